#!/usr/bin/env bash
# The cost of the live metrics (feature `prometheus`), as docs/fleet-metrics.md reports it:
#   1. the flusher's CPU time per call, built without the feature, with it but metrics off,
#      and with the endpoint on: REPS runs of each, interleaved, min and median
#      (examples/metrics_cost.rs, `flusher`);
#   2. the instructions the metrics code adds per call with the endpoint on, under callgrind
#      (deterministic, load-proof; skipped with a message when valgrind is not installed);
#      without them `fold` runs a copy of its loop that has no metrics code at all;
#   3. the CPU time of one render and one scrape at 1 000 regions (`scrape`).
# Usage: scripts/metrics-cost.sh            (REPS=7 by default)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
reps=${REPS:-7}

cargo build --release --features testing --example metrics_cost
cp target/release/examples/metrics_cost target/metrics-cost-plain
cargo build --release --features prometheus,testing --example metrics_cost
cp target/release/examples/metrics_cost target/metrics-cost-prom

configs=("plain off" "prom off" "prom on")
runs=target/metrics-cost-flusher.txt
: >"$runs"
for _ in $(seq "$reps"); do
    for c in "${configs[@]}"; do
        set -- $c
        echo "$1 $2 $(target/metrics-cost-$1 flusher "$2" | sed 's/.*flusher_ns_per_call=\([0-9.]*\).*/\1/')" >>"$runs"
    done
done
echo "flusher CPU per call (ns), $reps interleaved runs of 2 M calls each:"
for c in "${configs[@]}"; do
    grep "^$c " "$runs" | awk '{print $3}' | sort -g |
        awk -v c="$c" '{v[NR]=$1} END {printf "  %-9s min %7.2f  median %7.2f\n", c, v[1], v[int((NR+1)/2)]}'
done

if command -v valgrind >/dev/null 2>&1; then
    # Whole-flusher counts vary with the number of idle rounds (timing), so count the
    # instructions of the metrics code itself: a build with line tables, and callgrind's
    # per-line counts of what `fold` runs from src/metrics/ and of its call site.
    CARGO_PROFILE_RELEASE_DEBUG=1 cargo build --release --features prometheus,testing \
        --example metrics_cost --target-dir target/metrics-cost-lines
    out=target/metrics-cost-lines/on.callgrind
    valgrind --tool=callgrind --callgrind-out-file="$out" \
        target/metrics-cost-lines/release/examples/metrics_cost flusher on 200000 >/dev/null 2>&1
    callgrind_annotate --inclusive=no "$out" >"$out.self" 2>/dev/null
    callgrind_annotate --auto=yes "$out" >"$out.lines" 2>/dev/null
    inlined=$(awk '/src\/metrics\/.*Flusher>::fold/ {gsub(",", "", $1); s += $1} END {print s + 0}' \
        "$out.self")
    site=$(awk '/acc\.add\(c\.region/ && !done {gsub(",", "", $1); print $1 + 0; done = 1}' \
        "$out.lines")
    awk -v a="$inlined" -v b="${site:-0}" 'BEGIN {
        printf "metrics code per call with the endpoint on (callgrind, 200 k calls): %.1f instructions\n",
            (a + b) / 200000 }'
    rm -f "$out" "$out.self" "$out.lines"
else
    echo "instructions per call: skipped (valgrind is not installed)"
fi

target/metrics-cost-prom scrape 1000

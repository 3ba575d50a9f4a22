#!/usr/bin/env bash
# How `scopeprof check` fares on runs in separate processes on this machine: REPS
# repetitions of b1 c1 b2 c2 b3 c3 (six runs of examples/check_bench.rs, the sides alternating),
# each checked with one file per side (b1 against c1) and with three per side.
#
# Usage: scripts/check-noise.sh [REPS] [CALLS]       (defaults 20 and 3000 `kernel` calls)
# Environment: KERNEL_SCALE (default 1: same binary; 1.2 makes the candidates' `kernel` 20 %
# slower), BUDGET (--max-regression, default 3), METRIC (default p50).
# Prints one line per repetition and the counts: with KERNEL_SCALE=1 every "regressed" is a
# false alarm; with KERNEL_SCALE=1.2 and BUDGET=10 they are detections.
set -euo pipefail
cd "$(dirname "$0")/.."
reps="${1:-20}"
calls="${2:-3000}"
scale="${KERNEL_SCALE:-1}"
budget="${BUDGET:-3}"
metric="${METRIC:-p50}"
scripts/install-deps.sh
cargo build -q --release --features cli --example check_bench --bin scopeprof
bench=target/release/examples/check_bench
sp=target/release/scopeprof
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT

kernel_p50() { # FILE -> kernel's p50 (diff's JSON, ns)
    "$sp" diff --format json --metric p50 --include '^kernel$' "$1" "$1" |
        sed -n 's/.*"p50_ns":\([0-9.e+]*\).*/\1/p' | head -n1
}

counts=(0 0 0 0) # regressed single, regressed triple, inconclusive single, inconclusive triple
for r in $(seq 1 "$reps"); do
    for i in 1 2 3; do
        "$bench" "$dir/b$i.h5" --calls "$calls"
        "$bench" "$dir/c$i.h5" --calls "$calls" --kernel-scale "$scale"
    done
    line="rep $r: p50 of kernel (us):"
    for f in b1 c1 b2 c2 b3 c3; do
        line="$line $(awk -v x="$(kernel_p50 "$dir/$f.h5")" 'BEGIN { printf "%.2f", x / 1000 }')"
    done
    k=0
    for args in "$dir/b1.h5 $dir/c1.h5" "$dir/b1.h5 $dir/b2.h5 $dir/b3.h5 -- $dir/c1.h5 $dir/c2.h5 $dir/c3.h5"; do
        # shellcheck disable=SC2086 # the file lists split on purpose
        out="$("$sp" check --metric "$metric" --max-regression "$budget" --format json $args || true)"
        verdict="$(printf '%s' "$out" | sed -n 's/.*"name":"kernel","verdict":"\([a-z]*\)".*/\1/p')"
        # kernel's own object: [^}]* keeps the match inside it.
        lower="$(printf '%s' "$out" |
            sed -n 's/.*"name":"kernel","verdict":"[a-z]*",[^}]*"lower_pct":\([-0-9.e+]*\).*/\1/p')"
        [ "$verdict" = regressed ] && counts[k]=$((counts[k] + 1))
        [ "$verdict" = inconclusive ] && counts[k + 2]=$((counts[k + 2] + 1))
        line="$line | $([ $k -eq 0 ] && echo single || echo triple): $verdict (lower ${lower:-?}%)"
        k=1
    done
    echo "$line"
done
echo "check-noise: $reps repetitions, kernel scale $scale, budget +$budget%, metric $metric," \
    "$calls calls per run, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "check-noise: kernel regressed in ${counts[0]} (one file per side) and ${counts[1]}" \
    "(three per side); inconclusive in ${counts[2]} and ${counts[3]}"

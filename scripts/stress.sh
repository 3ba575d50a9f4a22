#!/usr/bin/env bash
# Load-safety stress in a release build (the shape that crashed the flusher before issue 8):
# 20 runs of 8 plain threads x 1 M spans each, default settings, then 3 lossy runs. Every run
# must end normally with consistent counts (calls + dropped calls == spans; the example exits
# non-zero otherwise). Without `lossy`, calls are dropped only when the flusher freed nothing
# for 100 ms, i.e. on a machine too loaded to run it; the script says how many runs were exact.
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${STRESS_RUNS:-20}"
cargo build --release --quiet --example stress_threads --example stress_cross
# Where cargo put it (CARGO_TARGET_DIR, when set, moves every build).
bin="${CARGO_TARGET_DIR:-target}/release/examples/stress_threads"
exact=0
for i in $(seq 1 "$runs"); do
    line="$("$bin" 8 1000000 | sed -n 1p)"
    echo "$line"
    case "$line" in *"(exact)"*) exact=$((exact + 1)) ;; esac
done
for i in 1 2 3; do
    LOSSY=1 "$bin" 8 1000000 | sed -n 2p
done
echo "stress: $runs runs of 8 x 1 M spans without a crash, $exact exact; 3 lossy runs consistent"
# Exact accounting under losses (issue 34): spans created on one thread and closed on three
# others, plus scoped threads, 780 000 spans, lossy with a 1 MiB budget. Every run must give
# calls reported + dropped calls + calls open at the finalize == spans created (the example
# exits non-zero otherwise). About 0.55 s a run (0.3 s with ScopeSubscriber) on the 2-core VM:
# the issue's 50 runs with ScopeLayer and 25 with ScopeSubscriber take about 35 s
# (STRESS_CROSS_RUNS sets the ScopeLayer count).
cross="${CARGO_TARGET_DIR:-target}/release/examples/stress_cross"
cross_runs="${STRESS_CROSS_RUNS:-50}"
for i in $(seq 1 "$cross_runs"); do
    out="$("$cross" 2>&1)" || { echo "$out"; exit 1; }
done
for i in $(seq 1 $(((cross_runs + 1) / 2))); do
    out="$(SCOPE_FRONT_END=subscriber "$cross" 2>&1)" || { echo "$out"; exit 1; }
done
echo "stress: $cross_runs + $(((cross_runs + 1) / 2)) cross-thread lossy runs exact (layer + subscriber)"

#!/usr/bin/env bash
# Run the hot-path overhead bench and print a Markdown table of ns/op and ratios against the bare
# registry measured in the same run (DESIGN.md, "Hot-path rules").
#
# Usage:
#   bash scripts/overhead-table.sh [EXTRA CARGO BENCH ARGS...]
#       e.g. bash scripts/overhead-table.sh -- --measurement-time 5
#   bash scripts/overhead-table.sh --table-only     # only print the table of the last run
#
# Reads criterion's median point estimates from <criterion dir>/{span,poll}/<config>/new/estimates.json.
# Results older than this invocation (for example configurations skipped by a filter) are marked
# "(stale)". Set OVERHEAD_STRICT=1 to exit with status 1 when a target is missed.
set -euo pipefail

cd "$(dirname "$0")/.."

table_only=0
if [[ "${1:-}" == "--table-only" ]]; then
    table_only=1
    shift
fi

start_epoch=$(date +%s)
if [[ $table_only -eq 0 ]]; then
    t0=$(date +%s)
    cargo bench --bench overhead "$@"
    t1=$(date +%s)
    echo
    echo "bench wall time: $((t1 - t0)) s (including build)"
else
    start_epoch=0
fi

if [[ -n "${CRITERION_HOME:-}" ]]; then
    crit_dir="$CRITERION_HOME"
else
    crit_dir="${CARGO_TARGET_DIR:-target}/criterion"
fi

echo
python3 - "$crit_dir" "$start_epoch" <<'PY'
import json, os, sys

crit_dir, start_epoch = sys.argv[1], int(sys.argv[2])
configs = [
    "no_subscriber",
    "registry",
    "scope_disabled",
    "scope_aggregate",
    "scope_timeonly",
    "scope_threads",
    "scope_async",
    "tracing_timing",
    "tracing_chrome",
]
data_only = ["registry_end"]
stale = set()

def median(group, config):
    path = os.path.join(crit_dir, group, config, "new", "estimates.json")
    try:
        with open(path) as f:
            est = json.load(f)
    except (OSError, ValueError):
        return None
    if os.path.getmtime(path) < start_epoch:
        stale.add((group, config))
    return est["median"]["point_estimate"]

data = {c: {g: median(g, c) for g in ("span", "poll")} for c in configs + data_only}
base = data["registry"]

def ns(v):
    return "n/a" if v is None else (f"{v:.1f}" if v < 100 else f"{v:.0f}")

def ratio(v, b):
    return "n/a" if v is None or not b else f"{v / b:.2f}x"

print("| config | span ns | span / registry | poll ns | poll / registry |")
print("|---|---:|---:|---:|---:|")
for c in configs:
    d = data[c]
    if d["span"] is None and d["poll"] is None:
        continue
    cells = []
    for g in ("span", "poll"):
        mark = " (stale)" if (g, c) in stale else ""
        cells += [ns(d[g]) + mark, ratio(d[g], base[g])]
    print(f"| {c} | " + " | ".join(cells) + " |")

end = data.get("registry_end") or {}
drift = [f"{g} {100 * (end[g] / base[g] - 1):+.0f}%" for g in ("span", "poll")
         if end.get(g) is not None and base[g]]
if drift:
    print()
    print("registry drift over the run (registry_end vs registry): " + ", ".join(drift))

print()
print("targets: TimeOnly span <= 1.5x, poll <= 3.0x; Aggregate span <= 1.3x; "
      "Disabled within 3 ns of no subscriber")

missed = 0
def check(label, ok, detail):
    global missed
    if ok is None:
        print(f"- {label}: n/a ({detail})")
        return
    if not ok:
        missed += 1
    print(f"- {label}: {'met' if ok else 'MISSED'} ({detail})")

def ratio_target(label, config, group, limit):
    v, b = data[config][group], base[group]
    if v is None or not b:
        check(label, None, "not measured")
    else:
        check(label, v / b <= limit, f"{v / b:.2f}x, limit {limit}x")

ratio_target("TimeOnly span <= 1.5x", "scope_timeonly", "span", 1.5)
ratio_target("TimeOnly poll <= 3.0x", "scope_timeonly", "poll", 3.0)
ratio_target("Aggregate span <= 1.3x", "scope_aggregate", "span", 1.3)
for g in ("span", "poll"):
    v, n = data["scope_disabled"][g], data["no_subscriber"][g]
    if v is None or n is None:
        check(f"Disabled {g} within 3 ns", None, "not measured")
    else:
        check(f"Disabled {g} within 3 ns", v - n <= 3.0,
              f"{v:.1f} ns vs {n:.1f} ns, {v - n:+.1f} ns")
if stale:
    print()
    print("(stale): estimate predates this run (skipped by a filter?); ratios mix runs.")

if os.environ.get("OVERHEAD_STRICT") == "1" and missed:
    sys.exit(1)
PY

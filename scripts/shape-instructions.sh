#!/usr/bin/env bash
# Instructions per operation of each cost shape, on the recording thread and in the rest of
# the process (the flusher), counted by callgrind: figures that do not depend on the CPU's
# speed or on what else the machine runs (see examples/shape_instructions.rs).
#
#   scripts/shape-instructions.sh                    # build, then every shape and front end
#   BIN=path/to/shape_instructions scripts/shape-instructions.sh   # a binary built elsewhere
#   VARIANTS="aggregate flight10us" SHAPES=span scripts/shape-instructions.sh   # other modes
#
# Each configuration runs at N and 2N operations; the difference over N cancels fixed costs
# (start-up, the overhead probe, the first buffers). valgrind serializes threads, so the
# flusher sees larger batches than it does beside a running program: its figure is what it
# executes per record, not the time a core spends.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "needs valgrind (apt-get install valgrind)" >&2; exit 2; }
if [ -z "${BIN:-}" ]; then
    cargo build --release --example shape_instructions >&2
    BIN=target/release/examples/shape_instructions
fi
N="${N:-30000}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# Instructions of thread 1 (the program's), and of the flusher's rounds (drain, assemble,
# fold, spool: `Flusher::round` and what it calls, on whatever thread), for one run. The
# flusher's idle wake-ups and the buffers it pre-faults are left out: under valgrind the
# program runs ~50x slower, so both grow with the run's length, not with its records.
count() {
    local tag="$1"; shift
    valgrind --tool=callgrind --separate-threads=yes \
        --callgrind-out-file="$work/$tag.%p" "$BIN" "$@" >/dev/null 2>&1
    valgrind --tool=callgrind --toggle-collect='*Flusher::round' \
        --callgrind-out-file="$work/$tag.round.%p" "$BIN" "$@" >/dev/null 2>&1
    local main rest
    main=$(grep -h '^summary' "$work"/"$tag".[0-9]*-01 | awk '{s+=$2} END {print s}')
    rest=$(grep -h '^summary' "$work"/"$tag".round.* | awk '{s+=$2} END {print s+0}')
    echo "$main $rest"
}
printf '%-11s %-7s %-6s %12s %12s\n' front shape async thread/op flusher/op
for shape in ${SHAPES:-span poll async3}; do
    for front in noop layer subscriber; do
        for async in ${VARIANTS:-"" async}; do
            [ "$front" = noop ] && [ -n "$async" ] && continue
            read -r m1 r1 < <(count "a$front$shape$async" "$front" "$shape" "$N" $async)
            read -r m2 r2 < <(count "b$front$shape$async" "$front" "$shape" "$((2 * N))" $async)
            awk -v m1="$m1" -v m2="$m2" -v r1="$r1" -v r2="$r2" -v n="$N" \
                -v f="$front" -v s="$shape" -v a="${async:--}" \
                'BEGIN { printf "%-11s %-7s %-6s %12.1f %12.1f\n", f, s, a, (m2-m1)/n, (r2-r1)/n }'
        done
    done
done

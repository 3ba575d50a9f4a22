#!/usr/bin/env bash
# The MPI finalize's cost per rank at 2, 4 and 8 ranks, for the parallel write (feature mpio)
# and the token relay, interleaved: for every rank, the bytes it writes during finalize
# (/proc/self/io wchar), its CPU time and wall time, and its peak RSS (see examples/mpi.rs).
# Ranks are oversubscribed (more than this machine's cores); the tables go to docs/mpi.md.
#
# Usage: scripts/mpi-scaling.sh [CALLS_PER_RANK (default 2000000)] [RANK COUNTS (default "2 4 8")]
set -euo pipefail
cd "$(dirname "$0")/.."
calls="${1:-2000000}"
counts="${2:-2 4 8}"
HDF5_DIR="$(scripts/hdf5-mpio-dir.sh)" cargo build --release --quiet --features mpio --example mpi
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
for n in $counts; do
    for how in parallel relay; do
        echo "== $n ranks, $how"
        OMPI_MCA_mpi_yield_when_idle=1 mpirun --allow-run-as-root --oversubscribe -n "$n" \
            "${CARGO_TARGET_DIR:-target}"/release/examples/mpi "$calls" "$dir/run-$how-$n.h5" 100 "$how" 2>/dev/null |
            sed -n '/^[0-9]* ranks,/,/^ *solve:/p' | grep -v '^ *solve:'
        ls -l "$dir/run-$how-$n.h5" | awk '{printf "file: %.1f MiB\n", $5 / 1048576}'
        rm -f "$dir/run-$how-$n.h5"
    done
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"

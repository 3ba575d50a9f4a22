#!/usr/bin/env bash
# Prints the parallel (OpenMPI) HDF5 directory that the `mpio` feature builds against: what
# HDF5_DIR must name (hdf5-metno-sys reads `$HDF5_DIR/include` and links `$HDF5_DIR/lib`).
# Debian's libhdf5-openmpi-dev has both under /usr/lib/<triplet>/hdf5/openmpi. An HDF5_DIR
# already set wins. Fails with a message when neither is there.
#
# Usage: HDF5_DIR="$(scripts/hdf5-mpio-dir.sh)" cargo test --all-features
set -euo pipefail
if [ -n "${HDF5_DIR:-}" ]; then
    echo "$HDF5_DIR"
    exit 0
fi
dir="$(pkg-config --libs-only-L hdf5-openmpi 2>/dev/null | sed -n 's/^ *-L\([^ ]*\).*/\1/p')"
if [ -z "$dir" ] || [ ! -e "$dir/include/hdf5.h" ]; then
    echo "hdf5-mpio-dir: no parallel HDF5 found (install libhdf5-openmpi-dev: scripts/install-deps.sh), or set HDF5_DIR" >&2
    exit 1
fi
echo "$dir"

#!/usr/bin/env bash
# GPU check of the `cuda` and `nvtx` sinks (examples/gpu_check.rs), for a machine with an NVIDIA
# GPU and driver: builds the example (unless GPU_CHECK_BIN names a prebuilt binary), runs it and
# exits with its status (0 = every check printed PASS). It times 256 MiB host-to-device copies
# inside spans and checks the CUDA event times against plausible bandwidths, the CPU/device
# bracketing, empty spans, cuda_sync_on_exit, and events/gpu_durations in the written file.
# With GPU_CHECK_NSYS=1 and Nsight Systems (nsys) on PATH it also runs the check under nsys and
# prints the NVTX range summary (domain "scope-profiler").
#
# Usage: scripts/gpu-check.sh [OUTPUT.h5]     (default: $TMPDIR/gpu_check.h5)
set -euo pipefail
cd "$(dirname "$0")/.."

out="${1:-${TMPDIR:-/tmp}/gpu_check.h5}"
if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi -L || true
else
    echo "gpu-check: nvidia-smi not found; continuing (the check itself looks for libcuda)" >&2
fi

bin="${GPU_CHECK_BIN:-}"
if [ -z "$bin" ]; then
    scripts/install-deps.sh
    cargo build --release --example gpu_check --features cuda,nvtx
    bin="${CARGO_TARGET_DIR:-target}/release/examples/gpu_check"
fi

status=0
timeout 300 "$bin" "$out" || status=$?

if [ "${GPU_CHECK_NSYS:-0}" = 1 ]; then
    if command -v nsys >/dev/null 2>&1; then
        rep="${out%.h5}-nsys"
        timeout 300 nsys profile --trace=nvtx,cuda --force-overwrite=true -o "$rep" \
            "$bin" "${out%.h5}-nsys.h5" >/dev/null || status=1
        # The report is called nvtx_sum in recent nsys, nvtxsum in older ones.
        nsys stats --report nvtx_sum "$rep.nsys-rep" 2>/dev/null \
            || nsys stats --report nvtxsum "$rep.nsys-rep" || true
    else
        echo "gpu-check: GPU_CHECK_NSYS=1 but nsys is not on PATH; skipped" >&2
    fi
fi

if [ "$status" -eq 0 ]; then
    echo "gpu-check: PASS"
else
    echo "gpu-check: FAIL (status $status)" >&2
fi
exit "$status"

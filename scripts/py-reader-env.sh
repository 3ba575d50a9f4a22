#!/usr/bin/env bash
# Creates (once) a Python virtual environment holding the reference reader for the files this
# crate writes: scope-profiler 0.7.5 (its `scope-profiler` CLI and `scope_profiler.read_h5`) and
# h5py. Idempotent: an existing venv that can already import scope_profiler is reused as is.
#
# Usage: scripts/py-reader-env.sh        (venv at ${SCOPE_PY_VENV:-target/py-reader-venv})
# The last line printed is the venv's path; use "$VENV/bin/python" / "$VENV/bin/scope-profiler".
set -euo pipefail

venv="${SCOPE_PY_VENV:-target/py-reader-venv}"
python="${PYTHON:-python3}"

if [ ! -x "$venv/bin/python" ]; then
    mkdir -p "$(dirname "$venv")"
    "$python" -m venv "$venv" >&2
fi

if ! "$venv/bin/python" -c 'import scope_profiler, h5py' >/dev/null 2>&1; then
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        'scope-profiler==0.7.5' h5py >&2
    "$venv/bin/python" -c 'import scope_profiler, h5py' >&2
fi

# Absolute path, so callers can use it from any directory.
(cd "$venv" && pwd)

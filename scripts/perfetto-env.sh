#!/usr/bin/env bash
# Creates (once) a Python virtual environment holding Perfetto's own compiled protobuf
# definitions (PyPI package `perfetto`: perfetto.protos.perfetto.trace.perfetto_trace_pb2), which
# the `scopeprof` tests use to parse the traces the CLI writes. Idempotent: an existing venv that
# can already import them is reused as is.
#
# Usage: scripts/perfetto-env.sh        (venv at ${SCOPEPROF_PERFETTO_VENV:-target/perfetto-venv})
# The last line printed is the venv's path; use "$VENV/bin/python".
set -euo pipefail

venv="${SCOPEPROF_PERFETTO_VENV:-target/perfetto-venv}"
python="${PYTHON:-python3}"
check='from perfetto.protos.perfetto.trace import perfetto_trace_pb2'

if [ ! -x "$venv/bin/python" ]; then
    mkdir -p "$(dirname "$venv")"
    "$python" -m venv "$venv" >&2
fi

if ! "$venv/bin/python" -c "$check" >/dev/null 2>&1; then
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check perfetto protobuf >&2
    "$venv/bin/python" -c "$check" >&2
fi

(cd "$venv" && pwd)

#!/usr/bin/env bash
# The tests against Tokio's own instrumentation: crates/tokio-unstable-tests, built with
# RUSTFLAGS="--cfg tokio_unstable" and Tokio's `tracing` feature in a target directory of its
# own (target/tokio-unstable), so the flag never invalidates the main build. They read files
# back with `scopeprof` (the main build's, built here if missing), the Python reference reader
# and Perfetto's own protos (both venvs made here if missing). Extra arguments go to
# `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
target="${CARGO_TARGET_DIR:-target}"
case "$target" in /*) ;; *) target="$root/$target" ;; esac
SCOPE_PY_VENV="${SCOPE_PY_VENV:-$(scripts/py-reader-env.sh | tail -n1)}"
SCOPEPROF_PERFETTO_VENV="$(scripts/perfetto-env.sh | tail -n1)"
[ -x "$target/debug/scopeprof" ] || cargo build --bin scopeprof
export SCOPE_PY_VENV SCOPEPROF_PERFETTO_VENV SCOPEPROF="$target/debug/scopeprof"
cd crates/tokio-unstable-tests
RUSTFLAGS="--cfg tokio_unstable" CARGO_TARGET_DIR="$target/tokio-unstable" \
    cargo test --locked "$@"

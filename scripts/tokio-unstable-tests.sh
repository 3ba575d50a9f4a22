#!/usr/bin/env bash
# The tests against Tokio's own instrumentation: crates/tokio-unstable-tests, built with
# RUSTFLAGS="--cfg tokio_unstable" and Tokio's `tracing` feature in a target directory of its
# own (target/tokio-unstable), so the flag never invalidates the main build. They read files
# back with `scopeprof` (the main build's, built here if missing), the Python reference reader
# and Perfetto's own protos (both venvs made here if missing).
#
#   scripts/tokio-unstable-tests.sh                 every test with ScopeLayer, then those of
#                                                   programs again with ScopeSubscriber
#   scripts/tokio-unstable-tests.sh ARGS...         cargo test ARGS (SCOPE_FRONT_END=subscriber
#                                                   picks the front end)
#   scripts/tokio-unstable-tests.sh run ARGS...     cargo run ARGS (an example)
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
target="${CARGO_TARGET_DIR:-target}"
case "$target" in /*) ;; *) target="$root/$target" ;; esac
SCOPE_PY_VENV="${SCOPE_PY_VENV:-$(scripts/py-reader-env.sh | tail -n1)}"
SCOPEPROF_PERFETTO_VENV="$(scripts/perfetto-env.sh | tail -n1)"
[ -x "$target/debug/scopeprof" ] || cargo build --features cli --bin scopeprof
export SCOPE_PY_VENV SCOPEPROF_PERFETTO_VENV SCOPEPROF="$target/debug/scopeprof"
cd crates/tokio-unstable-tests
export RUSTFLAGS="--cfg tokio_unstable" CARGO_TARGET_DIR="$target/tokio-unstable"
if [ "${1:-}" = run ]; then
    # An example of the crate: `run --release --example cost -- 5`.
    shift
    exec cargo run --locked "$@"
fi
if [ $# -gt 0 ]; then
    exec cargo test --locked "$@"
fi
cargo test --locked
# The same programs through the other front end, ScopeSubscriber (already built).
SCOPE_FRONT_END=subscriber cargo test --locked --test edges --test join --test lanes --test task_edges \
    --test critical \
    --test latency --test monitor

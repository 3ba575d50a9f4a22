#!/usr/bin/env bash
# The test command: installs what is missing (system packages, the Python reference reader in
# target/py-reader-venv) and runs the whole test suite (unit, integration, doc tests, and the
# compatibility tests against the real scope-profiler 0.7.5 reader), with every cargo feature,
# then the suites that check both front ends against ScopeSubscriber, the tests against Tokio's
# own instrumentation (crates/tokio-unstable-tests), the loom model of the lane handoff and the
# release-build stress runs. Among the integration tests, tests/readme.rs builds the README's
# Tokio example as a new project (offline, in target/tmp/readme-project) and runs the README's
# `scopeprof` commands on its profile.
#
# Every feature includes `mpio`, which links parallel HDF5: HDF5_DIR names it for that build
# only (scripts/hdf5-mpio-dir.sh); builds without `mpio` link the serial library as usual.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
SCOPE_PY_VENV="$(scripts/py-reader-env.sh | tail -n1)"
export SCOPE_PY_VENV
HDF5_DIR="$(scripts/hdf5-mpio-dir.sh)" cargo test --all-features "$@"
# The same compatibility, async, sink, streaming and load-safety suites against the other front
# end, ScopeSubscriber (tests/common::dispatch reads SCOPE_FRONT_END): already built above.
SCOPE_FRONT_END=subscriber HDF5_DIR="$(scripts/hdf5-mpio-dir.sh)" cargo test --all-features \
    --test python_compat --test async_lanes --test perf_sink --test likwid_sink \
    --test load_safety --test streaming --test line_timing --test scaling --test tokio_spans \
    --test critical_path --test flight_recorder "$@"
# Against Tokio's own instrumentation: a crate of its own built with --cfg tokio_unstable in a
# target directory of its own (target/tokio-unstable), so the flag never rebuilds the above.
scripts/tokio-unstable-tests.sh
# Accuracy per call and memory per live span/thread are properties of the release build (in a
# debug build those tests say so and are ignored): run them there.
cargo test --release --test accuracy --test memory
SCOPE_FRONT_END=subscriber cargo test --release --test accuracy
# Load safety: the lane handoff model-checked with loom, and the stress shapes in release.
scripts/loom.sh
scripts/stress.sh

#!/usr/bin/env bash
# Model-checks the lane handoff (src/recording/lane/loom_tests.rs) with loom. Builds the library with
# `--cfg scope_loom` in its own target directory, so the normal build cache stays valid.
set -euo pipefail
cd "$(dirname "$0")/.."
RUSTFLAGS="--cfg scope_loom ${RUSTFLAGS:-}" CARGO_TARGET_DIR=target/loom \
    cargo test --release --lib --no-default-features lane::loom_tests "$@"

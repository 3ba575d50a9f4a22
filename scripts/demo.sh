#!/usr/bin/env bash
# Quick-start demo: installs what is missing, runs examples/quickstart.rs (a Tokio program with
# #[instrument] async fns, sync spans and a CPU loop) under ScopeLayer, writes
# target/quickstart.h5 and prints its summary table.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cargo run --release --example quickstart -- "${CARGO_TARGET_DIR:-target}/quickstart.h5"

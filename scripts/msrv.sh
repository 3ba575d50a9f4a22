#!/usr/bin/env bash
# MSRV check, offline: the compiler building this crate must be the `rust-version` Cargo.toml
# declares (the version CI tests; cargo refuses older ones, and clippy's `incompatible_msrv`,
# on by default, flags std APIs newer than it). A newer compiler passes with a note, since the
# declared version is then not the one under test.
set -euo pipefail
cd "$(dirname "$0")/.."
declared=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml)
active=$(rustc --version | awk '{print $2}')
[ -n "$declared" ] || { echo "msrv: Cargo.toml declares no rust-version" >&2; exit 1; }
older=$(printf '%s\n%s\n' "$declared" "$active" | sort -V | head -n1)
if [ "$older" != "$declared" ]; then
  echo "msrv: rustc $active is older than the declared rust-version $declared" >&2
  exit 1
fi
if [ "$active" != "$declared" ] && [ "${active%.*}" != "$declared" ]; then
  echo "msrv: note: testing with rustc $active, newer than the declared $declared"
else
  echo "msrv: rustc $active is the declared rust-version $declared"
fi

//! Records the compiler version for the `rust_version` metadata key of written profiles, and
//! this crate's optimization level for the summary's debug-build note.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=RUSTC");
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    // `rustc 1.95.0 (59807616e 2026-04-14)` -> `1.95.0 (59807616e 2026-04-14)`.
    let version = Command::new(rustc)
        .arg("-V")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|v| v.trim().trim_start_matches("rustc ").to_owned())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=SCOPE_PROFILER_RUSTC_VERSION={version}");
    // This crate's own optimization level (cargo sets OPT_LEVEL for the package being built):
    // the summary says when the profiler, and usually the whole program, is a debug build.
    let opt = std::env::var("OPT_LEVEL").unwrap_or_else(|_| "unknown".into());
    println!("cargo:rustc-env=SCOPE_PROFILER_OPT_LEVEL={opt}");
}

//! `scopeprof recover` (what `scope-profiler-recover` did): turns a spool that was never
//! finalized into a profile that `scopeprof inspect` reads; nothing to recover is status 2 and
//! one line.

mod cli_common;

use std::time::Duration;

use cli_common::*;
use scope_profiler::ScopeLayer;
use tracing_subscriber::prelude::*;

#[test]
fn recovers_a_spool_that_was_never_finalized() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("never.h5");
    let (layer, guard) = ScopeLayer::builder()
        .output(&out)
        .summary(false)
        .spool_sync_interval(Duration::from_millis(20))
        .build()
        .unwrap();
    let d = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    tracing::dispatcher::with_default(&d, || {
        for _ in 0..500 {
            tracing::info_span!("lost work").in_scope(|| std::hint::black_box(1));
        }
    });
    // Everything recorded is in the spool (no fixed wait for the flusher), then the run
    // "dies": the guard never finalizes.
    guard.sync().expect("sync");
    std::mem::forget(guard);
    let spool = dir.path().join(".never.h5.spool");
    assert!(
        std::fs::metadata(&spool).unwrap().len() > 0,
        "the spool holds the calls"
    );
    let recovered = dir.path().join("recovered.h5");
    let text = scopeprof_ok(&[
        "recover",
        "--spool",
        spool.to_str().unwrap(),
        recovered.to_str().unwrap(),
    ]);
    assert!(text.starts_with("recovered "), "{text}");
    let json = scopeprof_ok(&["inspect", "--json", recovered.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let lost = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "lost work")
        .unwrap_or_else(|| panic!("{json}"));
    assert_eq!(lost["calls"], 500, "{json}");
}

#[test]
fn nothing_to_recover_is_status_2_and_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("nothing.h5");
    let o = scopeprof(&["recover", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("nothing to recover"), "{err}");
}

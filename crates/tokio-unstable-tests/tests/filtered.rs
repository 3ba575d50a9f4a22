//! `ScopeSubscriber` with a `max_level` below `TRACE` would silently drop Tokio's own
//! instrumentation (its spans and events are at `TRACE`): `build_subscriber` says so on
//! stderr, once per process, and not at all for `TRACE`.

use std::process::Command;

use scope_profiler::ScopeLayer;
use tracing::level_filters::LevelFilter;

/// Set in the child process that builds the profilers.
const CHILD: &str = "SCOPE_FILTERED_CHILD";

/// The child: two profilers filtered below `TRACE`, then one at `TRACE`.
#[test]
#[ignore = "the child process of a_max_level_below_trace_warns_once"]
fn filtered_child() {
    assert!(std::env::var_os(CHILD).is_some(), "run by its parent test");
    for level in [LevelFilter::DEBUG, LevelFilter::INFO, LevelFilter::TRACE] {
        let (_subscriber, guard) = ScopeLayer::builder()
            .no_output()
            .summary(false)
            .max_level(level)
            .build_subscriber()
            .expect("build");
        guard.finalize().expect("finalize");
    }
}

#[test]
fn a_max_level_below_trace_warns_once() {
    scope_profiler_tokio_unstable_tests::require_tokio_unstable();
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["filtered_child", "--exact", "--ignored", "--nocapture"])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let warning = "filters out Tokio's task instrumentation";
    assert_eq!(err.matches(warning).count(), 1, "{err}");
    assert!(err.contains("max_level(DEBUG)"), "{err}");
}

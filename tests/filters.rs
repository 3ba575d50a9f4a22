//! Filters: profile every span while the application's `fmt` logs stay at ERROR (per-layer
//! filters), give ScopeLayer its own per-layer filter, and say so when a global filter hides
//! every span from the profiler.

use std::io::Write;
use std::sync::{Arc, Mutex};

use scope_profiler::ScopeLayer;
use tracing::{debug_span, info_span, trace_span, Level};
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::prelude::*;

/// A `fmt` writer into a shared buffer.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

fn app() {
    info_span!("handler").in_scope(|| {
        debug_span!("parse").in_scope(|| tracing::info!("parsed the request"));
        trace_span!(target: "noisy::db", "query").in_scope(|| {});
        tracing::error!("request failed");
    });
}

#[test]
fn every_span_is_profiled_while_fmt_logs_stay_at_error() {
    let (layer, guard) = ScopeLayer::builder()
        .no_output()
        .summary(false)
        .build()
        .unwrap();
    let logs = Captured::default();
    let writer = logs.clone();
    let fmt = tracing_subscriber::fmt::layer()
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .with_filter(LevelFilter::ERROR);
    let subscriber = tracing_subscriber::registry().with(fmt).with(layer);
    tracing::subscriber::with_default(subscriber, app);
    let report = guard.finalize().unwrap();
    for name in ["handler", "parse", "query"] {
        assert_eq!(report.region(name).map(|r| r.calls), Some(1), "{name}");
    }
    let text = logs.text();
    assert!(text.contains("request failed"), "{text}");
    assert!(
        !text.contains("parsed the request"),
        "INFO logs leaked: {text}"
    );
}

#[test]
fn scope_layer_takes_its_own_per_layer_filter() {
    let (layer, guard) = ScopeLayer::builder()
        .no_output()
        .summary(false)
        .build()
        .unwrap();
    // Everything of this crate's target at any level, nothing of `noisy`.
    let only_app = Targets::new()
        .with_default(Level::TRACE)
        .with_target("noisy", LevelFilter::OFF);
    let subscriber = tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::sink)
                .with_filter(LevelFilter::ERROR),
        )
        .with(layer.with_filter(only_app));
    tracing::subscriber::with_default(subscriber, app);
    let report = guard.finalize().unwrap();
    assert_eq!(report.region("handler").map(|r| r.calls), Some(1));
    assert_eq!(report.region("parse").map(|r| r.calls), Some(1));
    assert!(report.region("query").is_none(), "filtered out by target");
}

/// Profiles `app()` behind a global ERROR filter (`with_filter` is per layer; this one hides
/// the spans from every layer) and returns the report; `summary` prints it to stderr.
fn behind_a_global_error_filter(summary: bool) -> scope_profiler::Report {
    let (layer, guard) = ScopeLayer::builder()
        .no_output()
        .summary(summary)
        .build()
        .unwrap();
    // A global filter (not `with_filter`) at ERROR: INFO..TRACE spans never exist.
    let subscriber = tracing_subscriber::registry()
        .with(LevelFilter::ERROR)
        .with(layer);
    tracing::subscriber::with_default(subscriber, app);
    guard.finalize().unwrap()
}

/// The child process of `a_global_filter_hiding_every_span_is_named_in_one_line`: prints the
/// summary at finalize.
#[test]
#[ignore = "the child process of a_global_filter_hiding_every_span_is_named_in_one_line"]
fn global_filter_child() {
    assert!(
        std::env::var_os("SCOPE_PROFILER_FILTERS_CHILD").is_some(),
        "run by its parent test"
    );
    behind_a_global_error_filter(true);
}

#[test]
fn a_global_filter_hiding_every_span_is_named_in_one_line() {
    let report = behind_a_global_error_filter(false);
    assert!(report.regions().is_empty());

    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["global_filter_child", "--exact", "--ignored", "--nocapture"])
        .env("SCOPE_PROFILER_FILTERS_CHILD", "1")
        .output()
        .unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let said: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("no spans reached the profiler"))
        .collect();
    assert_eq!(said.len(), 1, "{stderr}");
    assert!(said[0].ends_with("no spans reached the profiler; is a global filter hiding them?"));
    assert!(!stderr.contains('╭'), "no empty table: {stderr}");
}

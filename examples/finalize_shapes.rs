//! The load shapes of a real service, at full size in one process each: how long `finalize()`
//! and the guard's drop take after the last call, and the flusher's CPU per call.
//!
//! ```sh
//! cargo run --release --example finalize_shapes            # every shape
//! cargo run --release --example finalize_shapes -- short   # shapes whose name contains "short"
//! ```
//!
//! Shapes (each with `track_async(true)` and a file output, default settings otherwise):
//! - `open-connection`: one task whose outer call stays open over 1 M child calls;
//! - `live-tasks`: 10 k tasks alive at once, each a call over ten child calls (n = 100 k);
//! - `deep-recursion`: one recursion 100 k deep (tracing-subscriber's registry checks its span
//!   stack at every enter, so recording this takes a few seconds: the producer's cost);
//! - `one-span`: one span entered 1 M times inside a task (1 M polls of one call);
//! - `short-tasks`: 1 M short tasks with one span each, 4 workers (a task per request);
//! - `idle`: a service with nothing to do for 2 s after one call (n: seconds; the flusher's
//!   CPU per second of idling, over 2 runtime workers and this thread).

use std::time::Instant;

use scope_profiler::ScopeLayer;
use tracing::{info_span, Instrument};
use tracing_subscriber::prelude::*;

/// The shapes of `tests/scaling.rs`, shared with it.
#[path = "../tests/common/shapes.rs"]
mod shapes;

/// A fresh profiler and a dispatcher with it.
fn setup(path: &std::path::Path) -> (tracing::Dispatch, scope_profiler::FlushGuard) {
    let (layer, guard) = ScopeLayer::builder()
        .output(path)
        .track_async(true)
        .summary(false)
        .build()
        .expect("build");
    (
        tracing::Dispatch::new(tracing_subscriber::registry().with(layer)),
        guard,
    )
}

/// One call, then nothing for `seconds`.
fn idle(d: &tracing::Dispatch, seconds: u64) {
    let rt = shapes::runtime(d, 2);
    tracing::dispatcher::with_default(d, || {
        rt.block_on(async move {
            async {}.instrument(info_span!("once")).await;
            tokio::time::sleep(std::time::Duration::from_secs(seconds)).await;
        })
    });
}

fn main() {
    let filter = std::env::args().nth(1).unwrap_or_default();
    let dir = tempfile::tempdir().expect("temp dir");
    let shapes: [(&str, u64); 6] = [
        ("open-connection", 1_000_000),
        ("live-tasks", 100_000),
        ("deep-recursion", 100_000),
        ("one-span", 1_000_000),
        ("short-tasks", 1_000_000),
        ("idle", 2),
    ];
    println!("| shape | n | calls | dropped | recording | flusher CPU / n | finalize | drop |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for (shape, n) in shapes {
        if !shape.contains(filter.as_str()) {
            continue;
        }
        let path = dir.path().join(format!("{shape}.h5"));
        let (d, guard) = setup(&path);
        let t0 = Instant::now();
        // Each shape shuts its runtime down before it returns.
        match shape {
            "open-connection" => shapes::open_connection(&d, n),
            "live-tasks" => shapes::live_tasks(&d, n),
            "deep-recursion" => shapes::deep_recursion(&d, n),
            "one-span" => shapes::one_span_many_polls(&d, n),
            "idle" => idle(&d, n),
            _ => shapes::short_tasks_on(&d, n, 4),
        }
        let recording = t0.elapsed().as_secs_f64();
        // The clock starts after the last call (and the runtime's shutdown).
        let t1 = Instant::now();
        let report = guard.finalize().expect("finalize");
        let finalize = t1.elapsed().as_secs_f64();
        let calls: u64 = report.regions().iter().map(|r| r.calls).sum();
        // Per unit of n: a call, for `one-span` a poll, for `idle` a second.
        let per_unit = guard.flusher_cpu_ns() as f64 / n as f64;
        let t2 = Instant::now();
        drop(guard);
        drop(d);
        let dropped = t2.elapsed().as_secs_f64();
        println!(
            "| {shape} | {n} | {calls} | {} | {recording:.2} s | {per_unit:.0} ns | {finalize:.3} s \
             | {dropped:.3} s |",
            report.dropped()
        );
    }
}

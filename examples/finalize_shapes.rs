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
//! - `live-tasks`: 10 k tasks alive at once, each with a call open over a yield;
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

/// A fresh profiler, and a multi-thread runtime whose workers record into it.
fn setup(
    path: &std::path::Path,
    workers: usize,
) -> (
    tracing::Dispatch,
    scope_profiler::FlushGuard,
    tokio::runtime::Runtime,
) {
    let (layer, guard) = ScopeLayer::builder()
        .output(path)
        .track_async(true)
        .summary(false)
        .build()
        .expect("build");
    let d = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    let d2 = d.clone();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .on_thread_start(move || std::mem::forget(tracing::dispatcher::set_default(&d2)))
        .build()
        .expect("runtime");
    (d, guard, rt)
}

fn open_connection(rt: &tokio::runtime::Runtime, n: u64) {
    rt.block_on(async move {
        tokio::spawn(
            async move {
                for _ in 0..n {
                    async { tokio::task::yield_now().await }
                        .instrument(info_span!("cmd"))
                        .await;
                }
            }
            .instrument(info_span!("conn")),
        )
        .await
        .expect("task");
    });
}

fn live_tasks(rt: &tokio::runtime::Runtime, n: u64) {
    rt.block_on(async move {
        let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(n as usize));
        let hs: Vec<_> = (0..n)
            .map(|_| {
                let b = barrier.clone();
                tokio::spawn(
                    async move {
                        b.wait().await;
                        tokio::task::yield_now().await;
                    }
                    .instrument(info_span!("live")),
                )
            })
            .collect();
        for h in hs {
            h.await.expect("task");
        }
    });
}

fn recurse(depth: u64) {
    if depth > 0 {
        info_span!("rec").in_scope(|| recurse(depth - 1));
    }
}

fn deep_recursion(d: &tracing::Dispatch, n: u64) {
    let d = d.clone();
    std::thread::Builder::new()
        .stack_size(4 << 30)
        .spawn(move || tracing::dispatcher::with_default(&d, || recurse(n)))
        .expect("thread")
        .join()
        .expect("recursion");
}

fn one_span(rt: &tokio::runtime::Runtime, n: u64) {
    rt.block_on(async move {
        tokio::spawn(async move {
            let span = info_span!("hot");
            for _ in 0..n {
                let _e = span.enter();
            }
        })
        .await
        .expect("task");
    });
}

fn short_tasks(rt: &tokio::runtime::Runtime, n: u64) {
    rt.block_on(async move {
        let mut left = n;
        while left > 0 {
            let batch = left.min(1000);
            left -= batch;
            let hs: Vec<_> = (0..batch)
                .map(|_| {
                    tokio::spawn(
                        async { tokio::task::yield_now().await }.instrument(info_span!("request")),
                    )
                })
                .collect();
            for h in hs {
                h.await.expect("task");
            }
        }
    });
}

fn idle(rt: &tokio::runtime::Runtime, seconds: u64) {
    rt.block_on(async move {
        async {}.instrument(info_span!("once")).await;
        tokio::time::sleep(std::time::Duration::from_secs(seconds)).await;
    });
}

fn main() {
    let filter = std::env::args().nth(1).unwrap_or_default();
    let dir = tempfile::tempdir().expect("temp dir");
    let shapes: [(&str, u64); 6] = [
        ("open-connection", 1_000_000),
        ("live-tasks", 10_000),
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
        let workers = if shape == "short-tasks" { 4 } else { 2 };
        let (d, guard, rt) = setup(&path, workers);
        let t0 = Instant::now();
        // Spans created here (outside the workers) record too.
        tracing::dispatcher::with_default(&d, || match shape {
            "open-connection" => open_connection(&rt, n),
            "live-tasks" => live_tasks(&rt, n),
            "deep-recursion" => deep_recursion(&d, n),
            "one-span" => one_span(&rt, n),
            "idle" => idle(&rt, n),
            _ => short_tasks(&rt, n),
        });
        let recording = t0.elapsed().as_secs_f64();
        drop(rt);
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

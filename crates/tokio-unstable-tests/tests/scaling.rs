//! The flusher's work per wake and per task stays flat from n to 10 n (amortized O(1) per
//! record): the flusher thread's CPU time per operation (`FlushGuard::flusher_cpu_ns`, its own
//! thread clock, up to `FlushGuard::sync`: everything recorded is assembled), less that of the
//! same run with no operation (the profiler's fixed cost: its start, its drains while idle),
//! may grow by at most 1.5x. Each figure is the least of [`TRIES`] runs (interference from
//! other processes only ever adds). No wall-clock asserts.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use scope_profiler::ScopeLayer;
use tracing_subscriber::prelude::*;

const MAX_GROWTH: f64 = 1.5;
const TRIES: usize = 2;

/// Runs `work(n)` under a fresh profiler; returns the flusher's CPU ns up to the sync.
fn flusher_cpu(n: u64, work: &impl Fn(u64) -> u64) -> i64 {
    scope_profiler_tokio_unstable_tests::require_tokio_unstable();
    let dir = tempfile::tempdir().unwrap();
    let (layer, guard) = ScopeLayer::builder()
        .output(dir.path().join("scaling.h5"))
        .track_async(true)
        .summary(false)
        .build()
        .unwrap();
    let d = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    assert_eq!(tracing::dispatcher::with_default(&d, || work(n)), n);
    guard.sync().unwrap();
    let cpu = guard.flusher_cpu_ns();
    let report = guard.finalize().unwrap();
    assert_eq!(report.dropped(), 0, "a run that drops flatters");
    cpu
}

/// The flusher's CPU ns per operation of `work(n)`, over that of `work(0)`.
fn flusher_per_op(n: u64, work: &impl Fn(u64) -> u64) -> f64 {
    let least = |n| (0..TRIES).map(|_| flusher_cpu(n, work)).min().unwrap();
    let (fixed, cpu) = (least(0), least(n));
    let per_op = (cpu - fixed).max(1) as f64 / n as f64;
    eprintln!("  n = {n}: flusher {per_op:.1} ns per operation ({cpu} ns, {fixed} ns without)");
    per_op
}

fn check(shape: &str, n: u64, work: impl Fn(u64) -> u64) {
    let small = flusher_per_op(n, &work);
    let large = flusher_per_op(10 * n, &work);
    eprintln!("{shape}: {small:.1} -> {large:.1} ns per operation");
    assert!(
        large <= MAX_GROWTH * small,
        "{shape}: the flusher's CPU per operation grew {:.2}x from n to 10 n",
        large / small
    );
}

/// Hands out its task's waker once and never completes.
struct Park(Option<std::sync::mpsc::Sender<Waker>>);
impl Future for Park {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if let Some(tx) = self.0.take() {
            tx.send(cx.waker().clone()).unwrap();
        }
        Poll::Pending
    }
}

#[test]
fn wakes_of_one_task() {
    check("wakes", 20_000, |n| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        rt.block_on(async {
            let _task = tokio::spawn(Park(Some(tx)));
            tokio::task::yield_now().await;
        });
        let waker = rx.recv().unwrap();
        for _ in 0..n {
            waker.wake_by_ref();
        }
        n
    });
}

#[test]
fn many_short_tasks() {
    check("tasks", 2_000, |n| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            for _ in 0..n {
                tokio::spawn(async {
                    tokio::task::yield_now().await;
                    tokio::task::yield_now().await;
                });
                tokio::task::yield_now().await;
            }
        });
        n
    });
}

//! What Tokio's own instrumentation costs with the profiler: per wake, per poll, and the
//! flusher's CPU per wake. Run in release, built with `--cfg tokio_unstable`:
//!
//! ```text
//! scripts/tokio-unstable-tests.sh run --release --example cost -- [ROUNDS]
//! ```
//!
//! Two shapes, each measured with the registry and an empty layer (the baseline: what Tokio's
//! instrumentation costs any subscriber) and with `ScopeLayer` (`track_async(true)`), in
//! interleaved rounds; the table shows medians and the differences, per operation:
//! - `wake`: `Waker::wake_by_ref` of an idle task's waker, a million times from the main
//!   thread (each emits Tokio's `waker.wake_by_ref` event; the profiler records a wake);
//! - `yield`: a task that `yield_now()`s in a loop on a current-thread runtime: per iteration
//!   one poll (the task's span entered and exited), one wake, and a waker clone and drop (events
//!   the profiler looks at and skips).
//!
//! CPU is the calling thread's (`thread`) and the whole process's (`process`, the flusher
//! included, up to `FlushGuard::sync`: everything recorded is assembled); `flusher` is the
//! flusher thread's CPU over the same interval.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use scope_profiler::{FlushGuard, ScopeLayer};
use tracing_subscriber::prelude::*;

const WAKES: u64 = 1_000_000;
const YIELDS: u64 = 200_000;

struct Noop;
impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Noop {}

fn cpu(clock: libc::clockid_t) -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; clock_gettime only writes it.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// Per operation: (thread, process, flusher) CPU ns.
type Figures = (f64, f64, f64);

/// Runs `work` (returning its operation count) under the profiler or the baseline.
fn measure(profiler: bool, work: impl FnOnce() -> u64) -> Figures {
    let dir = tempfile::tempdir().unwrap();
    let (dispatch, guard): (tracing::Dispatch, Option<FlushGuard>) = if profiler {
        let (layer, guard) = ScopeLayer::builder()
            .output(dir.path().join("cost.h5"))
            .track_async(true)
            .summary(false)
            .build()
            .unwrap();
        let d = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
        (d, Some(guard))
    } else {
        let d = tracing::Dispatch::new(tracing_subscriber::registry().with(Noop));
        (d, None)
    };
    tracing::dispatcher::with_default(&dispatch, || {
        let f0 = guard.as_ref().map_or(0, |g| g.flusher_cpu_ns());
        let (t0, p0) = (
            cpu(libc::CLOCK_THREAD_CPUTIME_ID),
            cpu(libc::CLOCK_PROCESS_CPUTIME_ID),
        );
        let ops = work() as f64;
        let t1 = cpu(libc::CLOCK_THREAD_CPUTIME_ID);
        if let Some(g) = &guard {
            g.sync().unwrap();
        }
        let p1 = cpu(libc::CLOCK_PROCESS_CPUTIME_ID);
        let f1 = guard.as_ref().map_or(0, |g| g.flusher_cpu_ns());
        if let Some(g) = guard {
            let report = g.finalize().unwrap();
            assert_eq!(report.dropped(), 0, "a run that drops flatters");
        }
        (
            (t1 - t0) as f64 / ops,
            (p1 - p0) as f64 / ops,
            (f1 - f0) as f64 / ops,
        )
    })
}

/// A future that hands out its task's waker once and never completes.
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

fn wakes() -> u64 {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    rt.block_on(async {
        let task = tokio::spawn(Park(Some(tx)));
        tokio::task::yield_now().await; // the task runs once and parks
        drop(task);
    });
    let waker = rx.recv().unwrap();
    for _ in 0..WAKES {
        waker.wake_by_ref();
    }
    WAKES
}

fn yields() -> u64 {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        tokio::spawn(async {
            for _ in 0..YIELDS {
                tokio::task::yield_now().await;
            }
        })
        .await
        .unwrap();
    });
    YIELDS
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    scope_profiler_tokio_unstable_tests::require_tokio_unstable();
    let rounds: usize = std::env::args()
        .nth(1)
        .map_or(5, |a| a.parse().expect("ROUNDS"));
    println!("cost of Tokio's instrumentation with the profiler: {rounds} rounds, medians, ns per operation\n");
    println!("| shape | baseline thread | profiler thread | extra thread | baseline process | profiler process | extra process | flusher |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for (name, work) in [("wake", wakes as fn() -> u64), ("yield", yields)] {
        let mut runs: Vec<(Figures, Figures)> = Vec::new();
        for round in 0..rounds {
            // Alternate which goes first.
            let (a, b) = if round % 2 == 0 {
                let a = measure(false, work);
                (a, measure(true, work))
            } else {
                let b = measure(true, work);
                (measure(false, work), b)
            };
            runs.push((a, b));
        }
        let m = |f: &dyn Fn(&(Figures, Figures)) -> f64| median(runs.iter().map(f).collect());
        let (bt, pt) = (m(&|r| r.0 .0), m(&|r| r.1 .0));
        let (bp, pp) = (m(&|r| r.0 .1), m(&|r| r.1 .1));
        let extra_t = m(&|r| r.1 .0 - r.0 .0);
        let extra_p = m(&|r| r.1 .1 - r.0 .1);
        let flusher = m(&|r| r.1 .2);
        println!(
            "| {name} | {bt:.1} | {pt:.1} | {extra_t:.1} | {bp:.1} | {pp:.1} | {extra_p:.1} | {flusher:.1} |"
        );
    }
}

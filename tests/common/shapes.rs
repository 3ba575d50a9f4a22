//! The load shapes of a real service, shared by `tests/scaling.rs` (n against 10 n) and
//! `examples/finalize_shapes.rs` (full size, included by path): each runs `n` calls (polls for
//! the one-span shape) recording into `d`, on a runtime or thread of its own.

#![allow(dead_code)]

use std::sync::Arc;

use tracing::{info_span, Instrument};

/// A multi-thread runtime whose worker (and blocking) threads all record into `d`.
pub(crate) fn runtime(d: &tracing::Dispatch, workers: usize) -> tokio::runtime::Runtime {
    let d = d.clone();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .on_thread_start(move || std::mem::forget(tracing::dispatcher::set_default(&d)))
        .build()
        .expect("runtime")
}

/// `n` calls of `cmd` (one yield each) inside one `conn` call that stays open, in one task.
pub(crate) fn open_connection(d: &tracing::Dispatch, n: u64) {
    let rt = runtime(d, 2);
    tracing::dispatcher::with_default(d, || {
        rt.block_on(async {
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
            .expect("shape");
        })
    });
}

/// `n / 10` tasks alive at once (all wait on one barrier inside their outer call), then ten
/// child calls each.
pub(crate) fn live_tasks(d: &tracing::Dispatch, n: u64) {
    let tasks = (n / 10) as usize;
    let rt = runtime(d, 2);
    tracing::dispatcher::with_default(d, || {
        rt.block_on(async {
            let barrier = Arc::new(tokio::sync::Barrier::new(tasks));
            let handles: Vec<_> = (0..tasks)
                .map(|_| {
                    let b = barrier.clone();
                    tokio::spawn(
                        async move {
                            b.wait().await;
                            for _ in 0..10 {
                                async { tokio::task::yield_now().await }
                                    .instrument(info_span!("child"))
                                    .await;
                            }
                        }
                        .instrument(info_span!("task")),
                    )
                })
                .collect();
            for h in handles {
                h.await.expect("shape");
            }
        })
    });
}

fn recurse(depth: u64) {
    if depth > 0 {
        info_span!("rec").in_scope(|| recurse(depth - 1));
    }
}

/// One recursion `n` deep, on a thread with a stack large enough for it.
pub(crate) fn deep_recursion(d: &tracing::Dispatch, n: u64) {
    let d = d.clone();
    std::thread::Builder::new()
        .stack_size(4 << 30)
        .spawn(move || tracing::dispatcher::with_default(&d, || recurse(n)))
        .expect("shape")
        .join()
        .expect("shape");
}

/// One span entered `n` times (n polls of one call), inside a task.
pub(crate) fn one_span_many_polls(d: &tracing::Dispatch, n: u64) {
    let rt = runtime(d, 1);
    tracing::dispatcher::with_default(d, || {
        rt.block_on(async move {
            tokio::spawn(async move {
                let span = info_span!("hot");
                for _ in 0..n {
                    let _e = span.enter();
                }
            })
            .await
            .expect("shape");
        })
    });
}

/// `n` short tasks with one call each, at most 1000 alive at a time, on 2 workers.
pub(crate) fn short_tasks(d: &tracing::Dispatch, n: u64) {
    short_tasks_on(d, n, 2)
}

/// [`short_tasks`] on `workers` workers.
pub(crate) fn short_tasks_on(d: &tracing::Dispatch, n: u64, workers: usize) {
    let rt = runtime(d, workers);
    tracing::dispatcher::with_default(d, || {
        rt.block_on(async move {
            let mut left = n;
            while left > 0 {
                let batch = left.min(1000);
                left -= batch;
                let handles: Vec<_> = (0..batch)
                    .map(|_| {
                        tokio::spawn(
                            async { tokio::task::yield_now().await }
                                .instrument(info_span!("request")),
                        )
                    })
                    .collect();
                for h in handles {
                    h.await.expect("shape");
                }
            }
        })
    });
}

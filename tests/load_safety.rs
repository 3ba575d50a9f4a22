//! Load safety: the profiler never crashes or thins out its host's calls. Repeated stress
//! shapes that used to crash the flusher, exact counts under backpressure, whole-call drops in
//! lossy mode, bounded recording memory for many threads, reclaimed lanes of exited threads,
//! and a failing flusher that does not take the program down.
//!
//! Memory is measured in child processes (this test binary re-run with one `#[ignore]`d test
//! selected), so other tests running in parallel do not disturb the figures.

mod common;

use std::time::Duration;

use common::{child, dispatch, read, status_kib, value};
use scope_profiler::{Error, ScopeLayer};
use tracing::info_span;

/// Held by the CPU-heavy tests of this file, so the memory children (whose flusher must keep
/// up) do not share the two cores with a stress run.
static HEAVY: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn heavy() -> std::sync::MutexGuard<'static, ()> {
    HEAVY.lock().unwrap_or_else(|e| e.into_inner())
}

/// `threads` plain threads each record `spans` spans of one region as fast as they can.
/// Joined one by one (not a thread scope): `join` returns after the thread's thread-local
/// destructors, which hand the lane's last records over.
fn hammer(d: &tracing::Dispatch, threads: usize, spans: u64) {
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let d = d.clone();
            std::thread::spawn(move || {
                tracing::dispatcher::with_default(&d, || {
                    for _ in 0..spans {
                        let _g = info_span!("work").entered();
                    }
                })
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

#[test]
fn repeated_stress_gives_exact_counts_and_no_corruption() {
    let _heavy = heavy();
    // A 1 MiB budget (42 chunks) for 8 threads forces constant recycling and backpressure:
    // the shape that crashed the flusher when a recycled chunk was still published.
    let (threads, spans) = (8, 40_000u64);
    let mut waited = 0;
    for run in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("stress.h5");
        let (d, guard) = dispatch(
            ScopeLayer::builder()
                .output(&out)
                .buffer_budget(scope_profiler::MIN_BUFFER_BUDGET)
                // Exact counts are the point here, also on a CI machine too loaded to run the
                // (unoptimised) flusher within the default 100 ms.
                .backpressure_timeout(Duration::from_secs(5)),
        );
        hammer(&d, threads, spans);
        let report = guard.finalize().unwrap();
        let expected = threads as u64 * spans;
        assert_eq!(
            report.region("work").unwrap().calls,
            expected,
            "run {run}: dropped calls {}, records {}, corrupt {}, in flight {}, waits {}",
            report.dropped_calls(),
            report.dropped(),
            report.corrupt_records(),
            report.in_flight(),
            report.backpressure_waits()
        );
        assert_eq!(
            (
                report.dropped_calls(),
                report.dropped(),
                report.corrupt_records()
            ),
            (0, 0, 0),
            "run {run}"
        );
        waited += report.backpressure_waits();
        if run % 5 == 0 {
            let file = hdf5::File::open(&out).unwrap();
            let durations: Vec<i64> = read(&file, "events/durations");
            // One session row plus every call.
            assert_eq!(durations.len() as u64, expected + 1, "run {run}");
        }
    }
    println!("backpressure waits over 20 runs: {waited}");
}

/// Spans created on one thread and closed on three others, beside scoped threads of their
/// own, lossy with the smallest budget (the shape of `examples/stress_cross.rs`, 400 000 spans;
/// at 105 000 the code before the fix passed by chance, at this size it failed 3 of 3): every
/// span is one call, one dropped call or one call in flight, however its records were lost
/// (issue 34: calls + dropped calls came out above the spans made).
#[test]
fn lossy_spans_closed_on_other_threads_are_counted_once() {
    let _heavy = heavy();
    let dir = tempfile::tempdir().unwrap();
    let (d, guard) = dispatch(
        ScopeLayer::builder()
            .output(dir.path().join("cross.h5"))
            .lossy(true)
            .buffer_budget(scope_profiler::MIN_BUFFER_BUDGET),
    );
    let (cross, scoped, threads) = (200_000u64, 50_000u64, 4u64);
    std::thread::scope(|s| {
        let mut senders = Vec::new();
        for _ in 0..3 {
            let (tx, rx) = std::sync::mpsc::sync_channel::<tracing::Span>(1024);
            senders.push(tx);
            let d = d.clone();
            s.spawn(move || {
                tracing::dispatcher::with_default(&d, || rx.into_iter().for_each(drop))
            });
        }
        let dc = d.clone();
        s.spawn(move || {
            tracing::dispatcher::with_default(&dc, || {
                for i in 0..cross {
                    let span = info_span!("cross");
                    span.in_scope(|| std::hint::black_box(i));
                    senders[(i % 3) as usize].send(span).unwrap();
                }
            })
        });
        for _ in 0..threads {
            let d = d.clone();
            s.spawn(move || {
                tracing::dispatcher::with_default(&d, || {
                    for _ in 0..scoped {
                        let _g = info_span!("scoped").entered();
                    }
                })
            });
        }
    });
    // The scope has returned; the threads' thread-local destructors may still be running.
    let report = guard.finalize().unwrap();
    let calls: u64 = ["cross", "scoped"]
        .iter()
        .map(|n| report.region(n).map_or(0, |r| r.calls))
        .sum();
    let (dropped, open) = (report.dropped_calls(), report.in_flight());
    assert_eq!(
        calls + dropped + open,
        cross + threads * scoped,
        "calls {calls}, dropped calls {dropped}, in flight {open}, records lost {}",
        report.dropped()
    );
    assert_eq!(report.corrupt_records(), 0);
    println!("cross-thread lossy: {calls} calls kept, {dropped} dropped, {open} open");
}

#[test]
fn lossy_mode_drops_whole_calls_and_counts_them() {
    let _heavy = heavy();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("lossy.h5");
    let (d, guard) = dispatch(
        ScopeLayer::builder()
            .output(&out)
            .lossy(true)
            .buffer_budget(scope_profiler::MIN_BUFFER_BUDGET),
    );
    let (threads, spans) = (8, 60_000u64);
    hammer(&d, threads, spans);
    let report = guard.finalize().unwrap();
    let calls = report.region("work").map_or(0, |r| r.calls);
    let expected = threads as u64 * spans;
    // Every span is either one whole call in the report or one dropped call: never half.
    assert_eq!(
        calls + report.dropped_calls(),
        expected,
        "calls {calls}, dropped calls {}, records {}, corrupt {}, in flight {}",
        report.dropped_calls(),
        report.dropped(),
        report.corrupt_records(),
        report.in_flight()
    );
    assert_eq!(report.backpressure_waits(), 0, "lossy never waits");
    assert_eq!(report.in_flight(), 0);
    assert_eq!(report.corrupt_records(), 0);
    let file = hdf5::File::open(&out).unwrap();
    let durations: Vec<i64> = read(&file, "events/durations");
    assert_eq!(
        durations.len() as u64,
        calls + 1,
        "the file holds exactly the whole calls"
    );
    println!(
        "lossy: {calls} calls kept, {} dropped",
        report.dropped_calls()
    );
}

#[test]
fn a_failing_flusher_does_not_take_the_program_down() {
    let (d, guard) = dispatch(
        ScopeLayer::builder()
            .no_output()
            .buffer_budget(scope_profiler::MIN_BUFFER_BUDGET)
            .__fail_flusher_at(3),
    );
    // Record well past the failure and past the buffer budget: nobody frees buffers any
    // more, so threads must neither wait nor crash.
    tracing::dispatcher::with_default(&d, || {
        for _ in 0..50 {
            for _ in 0..2_000 {
                let _g = info_span!("work").entered();
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    hammer(&d, 4, 20_000);
    let err = guard.finalize().unwrap_err();
    assert!(matches!(err, Error::FlusherFailed { .. }), "{err:?}");
    assert!(err.to_string().contains("injected flusher fault"), "{err}");
    // And again: the cause stays, nothing hangs.
    assert!(matches!(guard.finalize(), Err(Error::FlusherFailed { .. })));
    drop(guard); // must return
    tracing::dispatcher::with_default(&d, || {
        let _g = info_span!("after the guard").entered();
    });
}

#[test]
#[ignore = "child process of recording_memory_is_bounded_by_the_budget"]
fn child_many_threads_memory() {
    let threads: usize = std::env::var("SP_THREADS").unwrap().parse().unwrap();
    let budget = 8 << 20;
    let dir = tempfile::tempdir().unwrap();
    let before = status_kib("VmRSS:");
    let (d, guard) = dispatch(
        ScopeLayer::builder()
            .output(dir.path().join("mem.h5"))
            .buffer_budget(budget)
            // What is measured is memory under backpressure: a debug flusher on a loaded
            // core can make no progress for the default 100 ms, and the drops that follow
            // (counted; tested by the lossy tests) would make the count inexact.
            .backpressure_timeout(std::time::Duration::from_secs(30)),
    );
    hammer(&d, threads, 640_000 / threads as u64);
    let peak = status_kib("VmHWM:");
    let report = guard.finalize().unwrap();
    println!("RESULT calls={}", report.region("work").unwrap().calls);
    println!("RESULT growth_kib={}", peak.saturating_sub(before));
    println!("RESULT budget_kib={}", budget / 1024);
}

#[test]
fn recording_memory_is_bounded_by_the_budget() {
    let _heavy = heavy();
    for threads in [8usize, 64] {
        let r = child(
            "child_many_threads_memory",
            &[("SP_THREADS", &threads.to_string())],
        );
        let growth = value(&r, "growth_kib");
        let budget = value(&r, "budget_kib");
        assert_eq!(
            value(&r, "calls"),
            640_000 / threads as u64 * threads as u64
        );
        // The budget bounds the buffers; the rest (flusher state, spool buffer, thread
        // stacks) is a small constant.
        assert!(
            growth < budget + 24 * 1024,
            "{threads} threads: RSS grew {growth} KiB with a {budget} KiB budget"
        );
        println!("{threads} threads: recording RSS growth {growth} KiB (budget {budget} KiB)");
    }
}

#[test]
#[ignore = "child process of lanes_of_exited_threads_are_reclaimed"]
fn child_short_lived_threads() {
    let n: usize = std::env::var("SP_N").unwrap().parse().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("threads.h5");
    // A small budget: what is measured is what stays behind per thread, not how many buffers
    // the pool may hold while the (unoptimised) flusher catches up.
    let (d, guard) = dispatch(
        ScopeLayer::builder()
            .output(&out)
            .track_threads(true)
            .buffer_budget(4 << 20),
    );
    // Warm up (the clock, the pool, the allocator), then measure.
    hammer(&d, 8, 10);
    let before = status_kib("VmRSS:");
    for _ in 0..n / 8 {
        hammer(&d, 8, 1);
    }
    // Give the flusher time to drain and reclaim what the last threads left.
    std::thread::sleep(Duration::from_millis(50));
    let after = status_kib("VmRSS:");
    let report = guard.finalize().unwrap();
    let file = hdf5::File::open(&out).unwrap();
    let tids: Vec<i64> = read(&file, "thread_table/index");
    println!("RESULT calls={}", report.region("work").unwrap().calls);
    println!("RESULT dropped_calls={}", report.dropped_calls());
    println!("RESULT threads={}", tids.len());
    println!("RESULT growth_kib={}", after.saturating_sub(before));
}

#[test]
fn lanes_of_exited_threads_are_reclaimed() {
    let _heavy = heavy();
    let r = child("child_short_lived_threads", &[("SP_N", "100000")]);
    // Exact, unless the (unoptimised, shared-core) flusher stalled past the wait bound: then
    // the calls it cost are counted, whole.
    assert_eq!(
        value(&r, "calls") + value(&r, "dropped_calls"),
        100_000 + 80,
        "{r:?}"
    );
    // Every thread is still in the thread table (the 8 warm-up threads included).
    assert_eq!(value(&r, "threads"), 100_000 + 8);
    let growth = value(&r, "growth_kib");
    // Before lanes were reclaimed this was ~18 KiB per thread (+1.8 GiB here). The release
    // figure with default settings is ~26 MiB (README); this debug child on a loaded CI core
    // measured 25-37 MiB, so the bound leaves room for the allocator's slack.
    assert!(
        growth < 48 * 1024,
        "RSS grew {growth} KiB over 100 000 threads"
    );
    println!("100 000 short-lived threads: RSS growth {growth} KiB");
}

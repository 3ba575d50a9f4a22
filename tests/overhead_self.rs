//! The profiler measures its own cost at `build()`, writes it to `metadata`, and
//! `compensate_overhead(true)` takes it out of the parents' exclusive times.

mod common;

use std::hint::black_box;
use std::time::{Duration, Instant};

use scope_profiler::ScopeLayer;

const CHILDREN: usize = 100_000;

/// The parent's own work per child (so the loop has a time of its own to compare with).
fn work() {
    let mut x = 0u64;
    for i in 0..100u64 {
        x = x.wrapping_add(black_box(i));
    }
    black_box(x);
}

/// The loop: one parent, 100 000 empty children, `work()` between them.
fn parent_loop() {
    let _p = tracing::info_span!("comp_parent").entered();
    for _ in 0..CHILDREN {
        work();
        tracing::info_span!("comp_child").in_scope(|| ());
    }
}

fn attr_f64(meta: &hdf5::Group, name: &str) -> f64 {
    meta.attr(name)
        .unwrap_or_else(|e| panic!("metadata@{name}: {e}"))
        .read_scalar()
        .unwrap()
}

#[test]
fn overhead_keys_are_present_and_positive() {
    let _turn = common::timing_turn();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("self.h5");
    let (d, guard) = common::dispatch(ScopeLayer::builder().output(&path));
    tracing::dispatcher::with_default(&d, || tracing::info_span!("one").in_scope(|| ()));
    let report = guard.finalize().unwrap();
    let per_call = report.overhead_ns_per_call().expect("measured at build()");
    assert!(per_call > 0.0);
    assert!(report.overhead_ns_per_poll().unwrap() > 0.0);
    let file = hdf5::File::open(&path).unwrap();
    let meta = file.group("metadata").unwrap();
    assert_eq!(attr_f64(&meta, "overhead_ns_per_call"), per_call);
    for key in ["overhead_ns_per_poll", "clock_resolution_ns"] {
        let v = attr_f64(&meta, key);
        assert!(v > 0.0 && v.is_finite(), "{key} = {v}");
    }
    let source = meta
        .attr("clock_source")
        .unwrap()
        .read_scalar::<hdf5::types::VarLenUnicode>()
        .unwrap();
    assert!(!source.is_empty());
    common::py("scope-profiler", &["inspect", path.to_str().unwrap()]);
}

/// One profiled run of the loop with a freshly built profiler: the parent's exclusive time in
/// the file (ns) and the per-call overhead the profiler measured at `build()`.
fn profiled_exclusive(compensate: bool) -> (f64, f64) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("comp.h5");
    let (d, guard) = common::dispatch(
        ScopeLayer::builder()
            .output(&path)
            .track_threads(true)
            .compensate_overhead(compensate),
    );
    tracing::dispatcher::with_default(&d, parent_loop);
    let report = guard.finalize().unwrap();
    let file = hdf5::File::open(&path).unwrap();
    let names = common::read_strings(&file, "region_table/names");
    let ids: Vec<u32> = common::read(&file, "rank_region_index/region_ids");
    let excl: Vec<i64> = common::read(&file, "rank_region_index/exclusive_totals");
    let row = ids
        .iter()
        .position(|&i| names[i as usize] == "comp_parent")
        .expect("parent row");
    let compensated: i64 = file
        .group("metadata")
        .unwrap()
        .attr("overhead_compensated")
        .unwrap()
        .read_scalar()
        .unwrap();
    assert_eq!(compensated == 1, compensate);
    (excl[row] as f64, report.overhead_ns_per_call().unwrap())
}

/// The same loop without a subscriber, best of three (ns).
fn bare_loop() -> f64 {
    (0..3)
        .map(|_| {
            let t = Instant::now();
            parent_loop();
            t.elapsed()
        })
        .min()
        .unwrap_or(Duration::MAX)
        .as_nanos() as f64
}

/// Wall-clock ratios scatter on a shared machine (the profiler measures itself at `build()`,
/// under whatever load there is then), so the test takes the best of up to ten trials; each
/// compares one compensated run with the uninstrumented loop measured just before it.
#[test]
fn compensated_exclusive_time_matches_the_uninstrumented_loop() {
    let _turn = common::timing_turn();
    let raw = profiled_exclusive(false).0;
    let mut trials = Vec::new();
    for _ in 0..10 {
        let bare = bare_loop();
        let (compensated, per_call) = profiled_exclusive(true);
        let err = (compensated - bare) / bare;
        eprintln!(
            "uninstrumented {:.2} ms, compensated exclusive {:.2} ms ({:+.1} %), {per_call:.0} \
             ns per child taken off",
            bare / 1e6,
            compensated / 1e6,
            100.0 * err,
        );
        // Without compensation this trial would be off by far more than 15 %.
        assert!(
            compensated + per_call * CHILDREN as f64 > 1.15 * bare,
            "the test would not tell compensation from none"
        );
        trials.push(err);
        if err.abs() <= 0.15 {
            break;
        }
    }
    let best = trials.iter().copied().fold(f64::MAX, |a, b| a.min(b.abs()));
    assert!(
        best <= 0.15,
        "compensated exclusive time vs the uninstrumented loop: {trials:?}"
    );
    assert!(
        raw > bare_loop() * 1.15,
        "uncompensated, the parent carries the overhead"
    );
}

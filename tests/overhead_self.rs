//! The profiler measures its own cost at `build()`, writes it to `metadata`, and
//! `compensate_overhead(true)` takes it out of the parents' exclusive times.

mod common;

use std::hint::black_box;

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

/// One profiled run of the loop with a freshly built profiler: the parent's exclusive time
/// in the file, its duration, the children's summed durations (ns), and the per-call
/// overhead the profiler measured at `build()`.
fn profiled(compensate: bool) -> (i64, i64, i64, f64) {
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
    let durations: Vec<i64> = common::read(&file, "events/durations");
    let row = |name: &str| {
        ids.iter()
            .position(|&i| names[i as usize] == name)
            .unwrap_or_else(|| panic!("{name} row"))
    };
    let total = |name: &str| -> i64 { durations[common::region_rows(&file, name)].iter().sum() };
    assert_eq!(common::region_rows(&file, "comp_child").len(), CHILDREN);
    let compensated: i64 = file
        .group("metadata")
        .unwrap()
        .attr("overhead_compensated")
        .unwrap()
        .read_scalar()
        .unwrap();
    assert_eq!(compensated == 1, compensate);
    (
        excl[row("comp_parent")],
        total("comp_parent"),
        total("comp_child"),
        report.overhead_ns_per_call().unwrap(),
    )
}

/// Compensation takes the measured cost of every child call out of its parent's exclusive
/// time, and nothing else: checked exactly against the durations in the same file (without
/// it, the parent's exclusive time is its duration minus its children's). How close the
/// compensated time comes to the uninstrumented loop is a timing property of the machine,
/// measured by the cost benchmark, not asserted here.
#[test]
fn compensation_takes_the_measured_cost_of_each_child_out_of_its_parent() {
    let _turn = common::timing_turn();
    let (raw_excl, parent, children, _) = profiled(false);
    assert_eq!(raw_excl, parent - children, "uncompensated exclusive time");
    let (excl, parent, children, per_call) = profiled(true);
    assert!(per_call > 0.0);
    let expected = (parent - children - per_call.round() as i64 * CHILDREN as i64).max(0);
    eprintln!(
        "parent {parent} ns, children {children} ns, {per_call:.0} ns per child taken off: \
         exclusive {excl} ns (expected {expected})"
    );
    assert_eq!(excl, expected, "compensated exclusive time");
}

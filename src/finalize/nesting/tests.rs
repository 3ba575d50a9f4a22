use super::*;
use crate::data::rows::{CallRecord, Layout, PhaseData, RegionRow};

fn row(name: &str, calls: &[(i64, i64, u32, i64)]) -> RegionRow {
    RegionRow {
        calls: calls
            .iter()
            .map(|&(s, e, thread, task)| CallRecord {
                task,
                ..CallRecord::new(s, e - s, thread)
            })
            .collect(),
        ..RegionRow::new(name)
    }
}

fn phase(regions: Vec<RegionRow>) -> PhaseData {
    PhaseData {
        finalize_time_ns: 100,
        ..PhaseData::new(Layout::Columnar, regions)
    }
}

#[test]
fn the_minimal_example_nests() {
    // outer [1, 9] ms, inner [2, 3] and [4, 7] (spec §1.13).
    let mut d = phase(vec![
        row("outer", &[(1, 9, 0, -1)]),
        row("inner", &[(2, 3, 0, -1), (4, 7, 0, -1)]),
    ]);
    assert_eq!(nest(&mut d, 10), Ok(13));
    assert_eq!(d.regions[0].calls[0].call_id, 10);
    assert_eq!(d.regions[0].calls[0].parent_id, -1);
    assert_eq!(d.regions[1].calls[0].parent_id, 10);
    assert_eq!(d.regions[1].calls[1].parent_id, 10);
    assert_eq!(d.regions[0].exclusive_ns, 8 - 4);
    assert_eq!(d.regions[1].exclusive_ns, 4);
    let tree = call_tree(&d);
    let names: Vec<(usize, &str)> = tree.iter().map(|r| (r.depth, r.name.as_str())).collect();
    assert_eq!(names, vec![(0, "outer"), (1, "(own)"), (1, "inner")]);
    assert_eq!(tree[1].total_ns, 4);
    assert_eq!((tree[2].calls, tree[2].total_ns), (2, 4));
}

#[test]
fn lanes_are_independent_and_tasks_are_lanes() {
    // Two threads overlap freely; two tasks interleave on one thread.
    let mut d = phase(vec![
        row("a", &[(0, 10, 0, -1), (5, 15, 1, -1)]),
        row("t", &[(0, 10, 0, 0), (2, 12, 0, 1)]),
    ]);
    assert!(nest(&mut d, 0).is_ok());
    // Without task lanes the interleaving calls on thread 0 would not nest.
    let mut flat = phase(vec![row("t", &[(0, 10, 0, -1), (2, 12, 0, -1)])]);
    let err = nest(&mut flat, 0).unwrap_err();
    assert_eq!(err.region, "t");
    assert_eq!(flat.regions[0].exclusive_ns, -1);
    assert!(flat.regions[0].calls.iter().all(|c| c.call_id == -1));
}

#[test]
fn recursion_collapses_into_one_row() {
    let mut d = phase(vec![row(
        "fib",
        &[
            (0, 100, 0, -1),
            (10, 50, 0, -1),
            (20, 30, 0, -1),
            (60, 90, 0, -1),
        ],
    )]);
    nest(&mut d, 0).unwrap();
    let tree = call_tree(&d);
    assert_eq!(tree.len(), 1);
    assert!(tree[0].recursive);
    assert_eq!(tree[0].calls, 4);
    assert_eq!(tree[0].total_ns, 100, "outermost calls only");
    assert_eq!(d.regions[0].exclusive_ns, 100, "30 + 30 + 10 + 30");
}

#[test]
fn zero_length_calls_nest_at_their_own_start() {
    let mut d = phase(vec![row("p", &[(5, 5, 0, -1)]), row("c", &[(5, 5, 0, -1)])]);
    nest(&mut d, 0).unwrap();
    let ids: Vec<(i64, i64)> = d
        .regions
        .iter()
        .map(|r| (r.calls[0].call_id, r.calls[0].parent_id))
        .collect();
    // One of them is the parent of the other.
    assert!(ids.contains(&(0, -1)) && ids.contains(&(1, 0)), "{ids:?}");
}

#[test]
fn lanes_with_nothing_open_are_forgotten() {
    // A task per request: 100 k lanes with one call each, plus one long-lived lane whose
    // outer call stays open over all of them.
    let names = ["conn", "request"];
    let mut n = Nester::new(&names, 0, true, Some(100_001));
    n.push(&Span {
        start: 0,
        end: 10_000_000,
        lane: -2,
        row: 0,
        g: 0,
        busy: 10_000_000,
    })
    .unwrap();
    for k in 0..100_000i64 {
        let s = Span {
            start: 10 + 10 * k,
            end: 15 + 10 * k,
            lane: k,
            row: 1,
            g: k as u32 + 1,
            busy: 5,
        };
        n.push(&s).unwrap();
    }
    assert!(
        n.stacks.len() <= 2 * SWEEP_MIN + 1,
        "{} lane stacks kept",
        n.stacks.len()
    );
    assert!(n.lane_index.contains_key(&-2), "the open call's lane stays");
    let nested = n.finish();
    assert_eq!(nested.call_id(1), 1);
    assert_eq!(nested.parent_id(1), -1, "a request is its own lane's root");
}

#[test]
fn busy_time_is_summed_per_path_and_own_rows_leave_out_the_childrens() {
    // An async `handler` of 100 ns that polled for 30 ns, twice, on two task lanes; inside
    // each, a `step` of 20 ns that polled for 10 ns.
    let names = ["handler", "step"];
    let mut n = Nester::new(&names, 0, true, None);
    for (lane, t) in [(0i64, 0i64), (1, 1_000)] {
        let span = |start, end, row, busy| Span {
            start: t + start,
            end: t + end,
            lane,
            row,
            g: 0,
            busy,
        };
        n.push(&span(0, 100, 0, 30)).unwrap();
        n.push(&span(40, 60, 1, 10)).unwrap();
    }
    let tree = n.finish().tree.unwrap();
    let row = |name: &str| tree.iter().find(|r| r.name == name).unwrap();
    assert_eq!((row("handler").total_ns, row("handler").busy_ns), (200, 60));
    assert_eq!((row("(own)").total_ns, row("(own)").busy_ns), (160, 40));
    assert_eq!((row("step").total_ns, row("step").busy_ns), (40, 20));
}

#[test]
fn left_out_calls_count_under_the_innermost_open_call_of_their_lane() {
    use crate::spool::below::BelowCall;
    let span = |start, end, lane, row, g| Span {
        start,
        end,
        lane,
        row,
        g,
        busy: end - start,
    };
    let below = |start_ns, _end_ns: i64, lane| Span::below(BelowCall { start_ns, lane });
    // Thread 0 (lane -2): outer [0, 100] holds inner [10, 50]; task 3: req [0, 80].
    let calls = [
        span(0, 100, -2, 0, 0),
        span(10, 50, -2, 1, 1),
        span(0, 80, 3, 2, 2),
    ];
    let left_out = [
        below(12, 13, -2), // in inner
        below(20, 21, -2), // in inner
        below(50, 52, -2), // inner has ended: in outer
        below(60, 61, -2), // in outer
        below(5, 6, 3),    // in the task's call, whatever thread polled it
        below(90, 91, 3),  // after the task's call: at the top
        below(0, 1, -3),   // a thread with no call: at the top
    ];
    let names = ["outer", "inner", "req"];
    let all: Vec<Span> = calls.iter().chain(&left_out).copied().collect();
    let n = nest_spans(all.clone(), &names, 7, true, 0).unwrap();
    assert_eq!(n.below, vec![(0, 2), (1, 2), (2, 1)]);
    assert_eq!(n.below_top, 2);
    // Ids and exclusive times are the calls' alone.
    assert_eq!(n.calls, 3);
    assert_eq!((n.call_id(0), n.call_id(1), n.parent_id(1)), (7, 9, 7));
    assert_eq!(n.exclusive, vec![100 - 40, 40, 80]);
    // The streaming nester (the external sort's path) counts the same.
    let mut sorted = all;
    sort(&mut sorted);
    let mut streaming = Nester::new(&names, 7, false, None);
    for s in &sorted {
        streaming.push(s).unwrap();
    }
    let m = streaming.finish();
    assert_eq!((m.below, m.below_top), (n.below, n.below_top));
}

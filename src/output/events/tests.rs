use super::*;
use crate::data::rows::{Layout, RegionRow};

/// A phase of nested calls on three threads, in completion order, held in memory.
fn phase(roots: i64) -> PhaseData {
    let call = |start: i64, end: i64, thread: u32| CallRecord::new(start, end - start, thread);
    let mut rows: Vec<RegionRow> = ["outer", "inner", "leaf"]
        .into_iter()
        .map(RegionRow::new)
        .collect();
    for t in 0..3u32 {
        for k in 0..roots {
            let b = k * 1000 + i64::from(t) * 7;
            for c in 0..3 {
                let (s, e) = (b + 10 + c * 300, b + 250 + c * 300);
                rows[2].calls.push(call(s + 5, s + 50, t));
                rows[1].calls.push(call(s, e, t));
            }
            rows[0].calls.push(call(b, b + 990, t));
        }
    }
    for r in &mut rows {
        for c in r.calls.clone() {
            r.stats.add(c.dur_ns as u64);
        }
    }
    PhaseData {
        track_threads: true,
        ..PhaseData::new(Layout::Columnar, rows)
    }
}

/// Above the budget the first pass spills to sorted runs on disk; exclusive totals, the
/// tree and the next id are the same as when it nests in memory, only per-call ids go.
#[test]
fn spilling_past_the_budget_nests_the_same() {
    let data = phase(2_000); // 42 000 calls
    let memory = scan(&data, Some((5, true))).unwrap();
    let m = memory.nested.as_ref().unwrap();
    assert!(m.has_ids() && memory.want.ids);
    crate::finalize::nesting::TEST_BUDGET.with(|b| b.set(Some(10_000)));
    let spilled = scan(&data, Some((5, true))).unwrap();
    crate::finalize::nesting::TEST_BUDGET.with(|b| b.set(None));
    let s = spilled.nested.as_ref().unwrap();
    assert!(
        !s.has_ids() && !spilled.want.ids,
        "no per-call ids from disk"
    );
    assert_eq!(s.exclusive, m.exclusive);
    assert_eq!(s.tree, m.tree);
    assert_eq!(s.next_id(), m.next_id());
    assert_eq!(spilled.counts, memory.counts);
    // outer: 990 - 3 * 240 per call; inner: 240 - 45; leaf: 45.
    assert_eq!(m.exclusive, vec![6_000 * 270, 18_000 * 195, 18_000 * 45]);
}

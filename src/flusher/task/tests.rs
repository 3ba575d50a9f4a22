use super::*;

/// A settle with the watermark past every call.
fn end_drain(t: &mut Tasks, now: i64) {
    t.settle(now, u64::MAX, false, ticks_are_ns);
}

/// Raw ticks as ns: the tests' clock.
fn ticks_are_ns(t: u64) -> i64 {
    t as i64
}

fn call(id: u64, s: i64, e: i64, polls: u32, busy: i64, region: u32) -> TaskCall {
    TaskCall {
        tokio_id: id,
        start_tick: s as u64,
        start_ns: s,
        end_ns: e,
        polls,
        busy_ns: busy,
        region,
        last_thread: region,
        hold: e as u64,
    }
}

#[test]
fn outermost_calls_make_the_task_row() {
    let mut t = Tasks::default();
    // Inner call completes first, then the outer one that contains it, then a second
    // sequential root.
    assert_eq!(t.add_call(&call(77, 20, 30, 1, 10, 1)), 0);
    t.settle(0, 29, false, ticks_are_ns);
    assert_eq!(t.add_call(&call(77, 10, 100, 6, 40, 0)), 0);
    assert_eq!(t.add_call(&call(5, 1, 2, 1, 1, 0)), 1);
    t.settle(0, 100, false, ticks_are_ns);
    t.add_call(&call(77, 200, 260, 2, 30, 2));
    let rows = t.take_rows(0, ticks_are_ns);
    assert_eq!(rows.len(), 2);
    let r = &rows[0];
    assert_eq!((r.tokio_id, r.created_ns, r.done_ns), (77, 10, 260));
    assert_eq!((r.steps, r.running_ns, r.suspended_ns), (8, 70, 50 + 30));
    assert_eq!(r.root_region, 0, "region of the first root");
    assert_eq!(r.thread_index, 2, "thread of the latest poll");
    assert!(t.take_rows(0, ticks_are_ns).is_empty(), "reset per phase");
}

#[test]
fn children_of_an_open_call_leave_nothing_behind() {
    let mut t = Tasks::default();
    // The connection's outer call started at 5 and stays open.
    t.open_insert(9, 5);
    for k in 0..10_000 {
        t.add_call(&call(9, 10 + 10 * k, 15 + 10 * k, 1, 5, 1));
        end_drain(&mut t, 0);
        assert!(t.pending.len() <= 1, "at most one drain pending");
    }
    let rows = t.take_rows(0, ticks_are_ns);
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (rows[0].steps, rows[0].done_ns),
        (0, -1),
        "only the open root counts"
    );
}

#[test]
fn quiet_tasks_retire_and_keep_their_rows() {
    let mut t = Tasks::default();
    let n = QUIET_CAP as u64 + 1000;
    for id in 1..=n {
        t.add_call(&call(id, 1, 3, 1, 2, 0));
        end_drain(&mut t, 0);
        end_drain(&mut t, 0);
    }
    assert!(t.in_memory() <= QUIET_CAP + 1, "{}", t.in_memory());
    let mut retired = t.take_finished();
    assert!(retired.len() >= 999);
    // Time makes the rest retire too.
    end_drain(&mut t, QUIET_NS);
    retired.extend(t.take_finished());
    assert_eq!(retired.len() as u64, n);
    assert_eq!(t.in_memory(), 0);
    retired.sort_by_key(|r| r.index);
    assert!(retired
        .iter()
        .enumerate()
        .all(|(i, r)| r.index == i as i64 && r.steps == 1 && r.tokio_id == i as u64 + 1));
}

#[test]
fn a_task_seen_only_through_polls_retires() {
    let mut t = Tasks::default();
    // Polls whose call was dropped: no call ever comes for these tasks.
    for id in 1..=(QUIET_CAP as u64 + 10) {
        t.index(id);
    }
    end_drain(&mut t, 0);
    assert!(t.in_memory() <= QUIET_CAP, "{}", t.in_memory());
    end_drain(&mut t, QUIET_NS);
    assert_eq!(t.in_memory(), 0);
    assert_eq!(t.take_finished().len(), QUIET_CAP + 10);
}

#[test]
fn a_root_waits_for_the_watermark() {
    let mut t = Tasks::default();
    // The outer call is added first; settles before the watermark passes its close must
    // not fold it, so the inner one, added later, is still seen as contained.
    t.add_call(&call(3, 10, 100, 2, 50, 0));
    t.settle(0, 50, false, ticks_are_ns);
    t.settle(0, 99, false, ticks_are_ns);
    assert_eq!(
        t.pending.len(),
        1,
        "kept until the watermark passes its close"
    );
    t.add_call(&call(3, 20, 30, 1, 10, 1));
    t.settle(0, 100, false, ticks_are_ns);
    let rows = t.take_rows(0, ticks_are_ns);
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (rows[0].steps, rows[0].running_ns),
        (2, 50),
        "one root: the outer call"
    );
}

#[test]
fn open_calls_are_kept_per_task() {
    let mut t = Tasks::default();
    t.open_insert(1, 10);
    t.open_insert(1, 5);
    t.open_insert(1, 20);
    assert_eq!(t.earliest_open(1), Some(5));
    t.open_remove(1, 5);
    assert_eq!(t.earliest_open(1), Some(10));
    t.open_remove(1, 20);
    t.open_remove(1, 10);
    assert_eq!(t.earliest_open(1), None);
    t.open_insert(0, 3);
    assert_eq!(t.earliest_open(0), None, "no task");
    // A task seen only through calls that were dropped leaves nothing behind, no row.
    end_drain(&mut t, QUIET_NS);
    end_drain(&mut t, 2 * QUIET_NS);
    assert_eq!(t.in_memory(), 0);
    assert!(t.take_finished().is_empty());
}

#[test]
fn a_task_open_across_phases_starts_the_next_phase_without_a_row() {
    let mut t = Tasks::default();
    t.open_insert(4, 1);
    t.add_call(&call(4, 2, 3, 1, 1, 0));
    let rows = t.take_rows(0, ticks_are_ns);
    assert_eq!((rows.len(), rows[0].done_ns), (1, -1), "still open");
    assert_eq!(t.in_memory(), 1, "kept for its open call");
    assert!(
        t.take_rows(0, ticks_are_ns).is_empty(),
        "no row without a call"
    );
    t.open_remove(4, 1);
    t.add_call(&call(4, 1, 10, 2, 4, 0));
    assert_eq!(t.take_rows(0, ticks_are_ns)[0].index, 0, "a fresh index");
}

#[test]
fn a_retired_task_seen_again_gets_a_new_index() {
    let mut t = Tasks::default();
    assert_eq!(t.index(7), 0);
    assert_eq!(t.index(7), 0, "the same task, the same index");
    t.add_call(&call(7, 1, 3, 1, 2, 0));
    end_drain(&mut t, QUIET_NS);
    end_drain(&mut t, 2 * QUIET_NS);
    assert_eq!(t.take_finished().len(), 1, "retired");
    assert_eq!(t.index(7), 1, "a new row for the task's later calls");
}

#[test]
fn a_task_with_only_open_calls_keeps_no_totals() {
    assert!(
        std::mem::size_of::<Slot>() <= 64,
        "{}",
        std::mem::size_of::<Slot>()
    );
    let mut t = Tasks::default();
    for id in 1..=1000 {
        t.open_insert(id, id * 10);
        // The first poll's dense index (what the polls column needs) takes no totals.
        t.index(id);
    }
    assert_eq!((t.in_memory(), t.totals.len()), (1000, 0));
    // A completed call takes its task's row; a retired task gives it back for the next.
    t.open_remove(7, 70);
    t.add_call(&call(7, 70, 80, 1, 10, 0));
    assert_eq!(t.totals.len(), 1);
    end_drain(&mut t, 10_000_000_000);
    end_drain(&mut t, 30_000_000_000);
    let rows = t.take_finished();
    assert_eq!(rows.len(), 1);
    assert_eq!((rows[0].tokio_id, rows[0].steps), (7, 1));
    assert_eq!(t.free_totals.len(), 1, "its totals are free again");
    t.open_remove(8, 80);
    t.add_call(&call(8, 80, 90, 2, 10, 0));
    assert_eq!(t.totals.len(), 1, "reused");
}

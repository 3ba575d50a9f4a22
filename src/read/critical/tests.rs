//! The walk on timelines built by hand, where the path is known exactly, and on random ones,
//! where it must still tile every call and end.

use super::{CallRef, CriticalPath, CriticalPaths, Kind, Lane};
use crate::data::edges::{Spawn, Wake};
use crate::read::Poll;

const NAMES: [&str; 4] = ["runtime.spawn", "req", "child", "render"];

fn names() -> Vec<String> {
    NAMES.iter().map(|s| s.to_string()).collect()
}

/// A poll of `region` (index into [`NAMES`]) of `task` on `thread`, `a..b`.
fn poll(task: i64, region: u32, a: i64, b: i64, sched: i64, thread: i64) -> Poll {
    Poll {
        region,
        start_ns: a,
        dur_ns: b - a,
        thread,
        task,
        scheduled_ns: sched,
    }
}

fn wake(tick: i64, by: Option<i64>, woken: i64, thread: u32) -> Wake {
    Wake {
        tick_ns: tick,
        thread,
        waker_task: by,
        woken_task: woken,
    }
}

/// Checks that `p`'s segments tile its call exactly, each of positive length.
fn assert_tiles(p: &CriticalPath) {
    let segs = &p.segments;
    assert!(!segs.is_empty() || p.wall_ns() == 0, "{p:#?}");
    if let (Some(f), Some(l)) = (segs.first(), segs.last()) {
        assert_eq!(f.start_ns, p.call.start_ns, "{p:#?}");
        assert_eq!(l.end_ns, p.call.end_ns, "{p:#?}");
    }
    for w in segs.windows(2) {
        assert_eq!(w[0].end_ns, w[1].start_ns, "{p:#?}");
    }
    assert!(segs.iter().all(|s| s.end_ns > s.start_ns), "{p:#?}");
    let sum: i64 = segs.iter().map(|s| s.dur_ns()).sum();
    assert_eq!(sum, p.wall_ns());
}

/// (kind, lane, start, end, inferred) of each segment, neighbours joined.
fn shape(p: &CriticalPath) -> Vec<(Kind, Lane, i64, i64, bool)> {
    p.joined()
        .iter()
        .map(|s| (s.kind, s.lane, s.start_ns, s.end_ns, s.inferred))
        .collect()
}

/// A parent (task 0, region `req`) spawns a child (task 1) at 8 and awaits it; the child
/// runs 12..55 and its completion wakes the parent at 55, polled at 60.
fn join_polls(sched: bool) -> Vec<Poll> {
    vec![
        poll(0, 1, 0, 10, -1, 0),
        poll(0, 1, 60, 70, if sched { 5 } else { -1 }, 0),
        poll(1, 2, 12, 55, -1, 1),
    ]
}

#[test]
fn a_join_is_walked_through_the_spawn_and_the_childs_wake() {
    let spawns = [Spawn {
        tick_ns: 8,
        thread: 0,
        parent_task: Some(0),
        child_task: 1,
    }];
    let cp = CriticalPaths::from_parts(
        &join_polls(true),
        &names(),
        &[wake(55, Some(1), 0, 1)],
        &spawns,
    );
    let p = cp.walk(&CallRef::new("req", 0, 70, 0, 0));
    assert_tiles(&p);
    use Kind::*;
    assert_eq!(
        shape(&p),
        [
            (Running, Lane::Task(0), 0, 8, false),
            (Scheduled, Lane::Task(1), 8, 12, false),
            (BlockedOn, Lane::Task(1), 12, 55, false),
            (Scheduled, Lane::Task(0), 55, 60, false),
            (Running, Lane::Task(0), 60, 70, false),
        ]
    );
    assert_eq!(p.segments[2].region(), Some("child"));
    assert_eq!(
        p.by_kind(),
        [(Running, 18), (Scheduled, 9), (BlockedOn, 43)]
    );
}

#[test]
fn without_wakes_a_join_is_inferred_from_the_childs_last_poll() {
    let cp = CriticalPaths::from_parts(&join_polls(false), &names(), &[], &[]);
    let p = cp.walk(&CallRef::new("req", 0, 70, 0, 0));
    assert_tiles(&p);
    use Kind::*;
    assert_eq!(
        shape(&p),
        [
            (Running, Lane::Task(0), 0, 10, false),
            (Scheduled, Lane::Task(1), 10, 12, true),
            (BlockedOn, Lane::Task(1), 12, 55, true),
            (Scheduled, Lane::Task(0), 55, 60, true),
            (Running, Lane::Task(0), 60, 70, false),
        ]
    );
}

#[test]
fn without_wakes_a_gap_no_task_ended_in_is_idle_unknown() {
    let polls = [poll(0, 1, 0, 10, -1, 0), poll(0, 1, 40, 50, -1, 0)];
    let cp = CriticalPaths::from_parts(&polls, &names(), &[], &[]);
    let p = cp.walk(&CallRef::new("req", 0, 50, 0, 0));
    assert_tiles(&p);
    assert_eq!(p.by_kind(), [(Kind::Running, 20), (Kind::IdleUnknown, 30)]);
}

#[test]
fn a_timer_wake_is_the_drivers_and_a_foreign_threads_wake_is_outside() {
    // Task 0 on thread 0: woken at 24 by thread 0 (a worker: the driver), polled at 25;
    // woken at 50 by thread 7 (no task ever ran there), polled at 52.
    let polls = [
        poll(0, 1, 0, 5, -1, 0),
        poll(0, 1, 25, 30, 1, 0),
        poll(0, 1, 52, 60, 2, 0),
    ];
    let wakes = [wake(24, None, 0, 0), wake(50, None, 0, 7)];
    let cp = CriticalPaths::from_parts(&polls, &names(), &wakes, &[]);
    let p = cp.walk(&CallRef::new("req", 0, 60, 0, 0));
    assert_tiles(&p);
    use Kind::*;
    assert_eq!(
        shape(&p),
        [
            (Running, Lane::Task(0), 0, 5, false),
            (Driver, Lane::Task(0), 5, 24, false),
            (Scheduled, Lane::Task(0), 24, 25, false),
            (Running, Lane::Task(0), 25, 30, false),
            (Outside, Lane::Thread(7), 30, 50, false),
            (Scheduled, Lane::Task(0), 50, 52, false),
            (Running, Lane::Task(0), 52, 60, false),
        ]
    );
}

#[test]
fn a_scheduled_segment_names_the_task_that_held_the_worker() {
    // Task 0 woken at 10 by the driver, polled at 30: task 2 held the only worker 9..29.
    let polls = [
        poll(0, 1, 0, 5, -1, 0),
        poll(0, 1, 30, 35, 20, 0),
        poll(2, 2, 9, 29, -1, 0),
    ];
    let cp = CriticalPaths::from_parts(&polls, &names(), &[wake(10, None, 0, 0)], &[]);
    let p = cp.walk(&CallRef::new("req", 0, 35, 0, 0));
    assert_tiles(&p);
    let s = p
        .segments
        .iter()
        .find(|s| s.kind == Kind::Scheduled)
        .unwrap();
    assert_eq!((s.start_ns, s.end_ns), (10, 30));
    assert_eq!(s.behind, [(2, 19)]);
}

#[test]
fn a_wake_by_another_task_walks_that_task_back_to_the_calls_start() {
    // Task 0 waits on a lock task 3 holds: task 3 runs 2..20, is woken by the driver at 30,
    // runs 32..40 and releases (wakes task 0) at 39; task 0 runs again at 41.
    let polls = [
        poll(0, 1, 0, 5, -1, 0),
        poll(0, 1, 41, 45, 2, 0),
        poll(3, 2, 2, 20, -1, 1),
        poll(3, 2, 32, 40, 2, 1),
    ];
    let wakes = [wake(30, None, 3, 1), wake(39, Some(3), 0, 1)];
    let cp = CriticalPaths::from_parts(&polls, &names(), &wakes, &[]);
    let p = cp.walk(&CallRef::new("req", 0, 45, 0, 0));
    assert_tiles(&p);
    use Kind::*;
    assert_eq!(
        shape(&p),
        [
            // Before task 3's first poll: nothing known (no spawn edge).
            (IdleUnknown, Lane::Task(3), 0, 2, false),
            (BlockedOn, Lane::Task(3), 2, 20, false),
            (Driver, Lane::Task(3), 20, 30, false),
            (Scheduled, Lane::Task(3), 30, 32, false),
            (BlockedOn, Lane::Task(3), 32, 39, false),
            (Scheduled, Lane::Task(0), 39, 41, false),
            (Running, Lane::Task(0), 41, 45, false),
        ]
    );
}

#[test]
fn running_segments_carry_the_stack_of_nested_polls() {
    let polls = [
        poll(0, 0, 0, 10, -1, 0),
        poll(0, 1, 1, 9, -1, 0),
        poll(0, 3, 5, 7, -1, 0),
    ];
    let cp = CriticalPaths::from_parts(&polls, &names(), &[], &[]);
    let p = cp.walk(&CallRef::new("req", 1, 9, 0, 0));
    assert_tiles(&p);
    let stacks: Vec<(i64, i64, Vec<String>)> = p
        .segments
        .iter()
        .map(|s| (s.start_ns, s.end_ns, s.stack.to_vec()))
        .collect();
    let v = |x: &[&str]| x.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        stacks,
        [
            (1, 5, v(&["req"])),
            (5, 7, v(&["req", "render"])),
            (7, 9, v(&["req"])),
        ]
    );
    let regions = p.by_region();
    assert_eq!(regions[0], ((Lane::Task(0), "req".to_string()), 6));
}

#[test]
fn a_call_outside_tasks_is_one_running_segment_on_its_thread() {
    let cp = CriticalPaths::from_parts(&[], &names(), &[], &[]);
    let p = cp.walk(&CallRef::new("solve", 5, 25, -1, 3));
    assert_tiles(&p);
    assert_eq!(p.segments[0].lane, Lane::Thread(3));
    assert_eq!(p.segments[0].region(), Some("solve"));
}

/// A small xorshift generator (deterministic).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

#[test]
fn random_timelines_are_tiled_by_every_walk() {
    for seed in 1..200u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let tasks = 1 + rng.below(6) as i64;
        let mut polls = Vec::new();
        let mut wakes = Vec::new();
        let mut spawns = Vec::new();
        for task in 0..tasks {
            let mut t = rng.below(50) as i64;
            for k in 0..rng.below(8) {
                let gap = rng.below(30) as i64;
                let dur = 1 + rng.below(20) as i64;
                let sched = if k == 0 {
                    -1
                } else {
                    rng.below(gap as u64 + 1) as i64
                };
                t += gap;
                polls.push(poll(
                    task,
                    1 + rng.below(3) as u32,
                    t,
                    t + dur,
                    sched,
                    task % 2,
                ));
                if rng.below(2) == 0 {
                    // A nested poll.
                    polls.push(poll(task, 3, t, t + dur / 2, -1, task % 2));
                }
                if k > 0 && rng.below(4) > 0 {
                    let by = rng.below(tasks as u64 + 1) as i64;
                    let by = (by < tasks).then_some(by);
                    wakes.push(wake(t - sched, by, task, rng.below(3) as u32));
                }
                t += dur;
            }
            if rng.below(2) == 0 && tasks > 1 {
                spawns.push(Spawn {
                    tick_ns: rng.below(40) as i64,
                    thread: 0,
                    parent_task: Some(rng.below(tasks as u64) as i64),
                    child_task: task,
                });
            }
        }
        if rng.below(3) == 0 {
            wakes.clear();
            for p in &mut polls {
                p.scheduled_ns = -1;
            }
        }
        let cp = CriticalPaths::from_parts(&polls, &names(), &wakes, &spawns);
        for p in polls.iter().filter(|p| p.region != 3) {
            let end = p.start_ns + p.dur_ns + rng.below(100) as i64;
            let call = CallRef::new("req", p.start_ns, end, p.task, 0);
            assert_tiles(&cp.walk(&call));
        }
    }
}

#[test]
fn polls_that_touch_are_walked_piece_by_piece() {
    // Two polls of one stack that touch at 5 are two runs; the walk used to find no piece in
    // the first (they were merged into one piece across the runs) and stall.
    let polls = [poll(0, 1, 0, 5, -1, 0), poll(0, 1, 5, 10, 0, 0)];
    let cp = CriticalPaths::from_parts(&polls, &names(), &[], &[]);
    let p = cp.walk(&CallRef::new("req", 0, 10, 0, 0));
    assert_tiles(&p);
    assert_eq!(shape(&p), [(Kind::Running, Lane::Task(0), 0, 10, false)]);
    assert_eq!(p.segments.len(), 2);
}

#[test]
fn with_wakes_a_run_without_scheduled_ns_is_the_tasks_own_teardown() {
    // Task 0 polled 0..10 and (woken by the driver at 15) 20..30; its future's drop enters
    // `req` again at 32..33, outside any poll of the task: no wake, no `scheduled_ns`.
    let polls = [
        poll(0, 1, 0, 10, -1, 0),
        poll(0, 1, 20, 30, 5, 0),
        poll(0, 1, 32, 33, -1, 0),
    ];
    let cp = CriticalPaths::from_parts(&polls, &names(), &[wake(15, None, 0, 0)], &[]);
    let p = cp.walk(&CallRef::new("req", 0, 33, 0, 0));
    assert_tiles(&p);
    use Kind::*;
    assert_eq!(
        p.by_kind(),
        [(Running, 23), (Scheduled, 5), (Driver, 5)],
        "{p:#?}"
    );
}

#[test]
fn a_wake_a_nanosecond_after_the_polls_scheduled_time_is_still_the_one() {
    // Task 0's second poll says it was woken at 30 - 10 = 20; the wake's own tick rounded to
    // 21. The wake by task 1 is still followed (it used to be missed: idle-unknown); before
    // task 1's first poll nothing is known (no spawn edge).
    let polls = [
        poll(0, 1, 0, 5, -1, 0),
        poll(0, 1, 30, 35, 10, 0),
        poll(1, 2, 8, 25, -1, 1),
    ];
    let cp = CriticalPaths::from_parts(&polls, &names(), &[wake(21, Some(1), 0, 1)], &[]);
    let p = cp.walk(&CallRef::new("req", 0, 35, 0, 0));
    assert_tiles(&p);
    use Kind::*;
    assert_eq!(
        shape(&p),
        [
            (IdleUnknown, Lane::Task(1), 0, 8, false),
            (BlockedOn, Lane::Task(1), 8, 20, false),
            (Scheduled, Lane::Task(0), 20, 30, false),
            (Running, Lane::Task(0), 30, 35, false),
        ]
    );
}

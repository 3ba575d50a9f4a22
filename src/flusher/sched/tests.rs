use super::timeline::{Done, Timeline};
use super::*;

fn polls(out: &[TaskOut]) -> Vec<Done> {
    out.iter()
        .filter_map(|o| match o {
            TaskOut::Poll { poll, .. } => Some(*poll),
            TaskOut::Ended { .. } => None,
        })
        .collect()
}

#[test]
fn a_suspension_splits_at_its_wake() {
    let mut t = Timeline::new(100, 1);
    assert_eq!(t.start(150, 0), None);
    t.end(200);
    t.wake(300);
    let first = t
        .start(350, 1)
        .expect("the first poll is proved by the second");
    assert_eq!(
        first,
        Done {
            start: 150,
            end: 200,
            lane: 0,
            sched: None,
            idle: 0,
            woken: true,
            first_delay: Some(50),
        }
    );
    t.end(360);
    t.wake(400);
    let second = t.start(410, 0).unwrap();
    assert_eq!(
        (second.sched, second.idle, second.first_delay),
        (Some(50), 100, None),
        "idle from the end of the poll to the wake, scheduled from the wake to the start"
    );
    assert_eq!(t.cum, 50 + 10, "scheduled time of every poll started");
}

#[test]
fn a_wake_during_a_poll_counts_from_its_end() {
    let mut t = Timeline::new(1, 0);
    t.start(10, 0);
    t.wake(15); // during the poll (another thread, or the task itself)
    t.wake(16); // a second one changes nothing
    t.end(20);
    t.start(30, 0);
    t.end(31);
    t.start(40, 0); // proves the second poll
    let p = t.start(50, 0); // a start without an end: ignored
    assert_eq!(p, None);
    assert_eq!(
        t.cum, 10,
        "only the suspension after the wake: from the end (20) to 30"
    );
}

#[test]
fn later_wakes_and_unwoken_suspensions() {
    let mut t = Timeline::new(0, 0);
    t.start(10, 0);
    t.end(20);
    t.wake(25);
    t.wake(27); // already woken: extra
    t.start(30, 0);
    t.end(40);
    // No wake: idle throughout.
    let second = t.start(70, 0).unwrap();
    assert_eq!(
        (second.sched, second.idle, second.woken),
        (Some(5), 5, true)
    );
    t.end(80);
    let third = t.start(90, 0).unwrap();
    assert_eq!((third.sched, third.idle, third.woken), (Some(0), 30, false));
    assert_eq!(t.extra_wakes, 1);
}

#[test]
fn an_unknown_spawn_gives_no_first_poll_delay() {
    let mut t = Timeline::new(0, 0);
    t.start(10, 0);
    t.end(20);
    let first = t.start(30, 0).unwrap();
    assert_eq!((first.sched, first.first_delay), (None, None));
}

#[test]
fn the_last_enter_before_the_close_is_the_drop() {
    let mut t = Timeline::new(5, 0);
    t.start(10, 0);
    t.end(20);
    t.wake(30);
    t.start(40, 0);
    t.end(50); // the last poll (Ready)
    t.start(51, 0); // the drop of the future
    t.end(52);
    assert_eq!(
        t.close(),
        Some(50),
        "the last poll ended at 50; the drop is no poll"
    );
}

/// Events of one task from three lanes, read in any order, settle in time order.
#[test]
fn events_settle_in_time_order_up_to_the_watermark() {
    let mut s = Sched::default();
    s.spawn(7, 3, 100, 2);
    s.link(7, 42);
    // Lane 1 read first: the second poll's start and end; lane 2: the wake before them.
    s.poll_start(7, 150, 1);
    s.poll_end(7, 160);
    s.poll_start(7, 300, 1);
    s.poll_end(7, 310);
    s.wake(7, 250);
    s.settle(200);
    assert!(s.out.is_empty(), "the first poll is provisional");
    assert_eq!(s.held().1, 3, "events after the watermark wait");
    s.settle(1000);
    let p = polls(&s.out);
    assert_eq!(p.len(), 1);
    assert_eq!((p[0].start, p[0].first_delay), (150, Some(50)));
    // The task closes: its last enter-exit was the drop.
    s.out.clear();
    s.task_closed(7);
    assert_eq!(
        s.out,
        [TaskOut::Ended {
            tokio: 42,
            site: 2,
            last_end: Some(160)
        }]
    );
    assert_eq!(s.live(), 0);
    // A wake that comes after: counted, ignored.
    s.wake_of_ended_task();
    assert_eq!(s.counts.ended_wakes, 1);
    assert_eq!(s.counts.wakes, 1);
}

/// A wake read together with the task's close but later than it (another thread still held
/// a waker) is of a task that has ended: counted, and no wake of the task.
#[test]
fn a_wake_after_the_close_settled_with_it_is_of_an_ended_task() {
    let mut s = Sched::default();
    s.spawn(7, 3, 100, 2);
    s.link(7, 42);
    s.poll_start(7, 150, 1);
    s.poll_end(7, 160);
    s.poll_start(7, 170, 1); // the drop
    s.poll_end(7, 171);
    s.wake(7, 165); // before the close: the task's (during nothing: it ends the suspension)
    s.wake(7, 190); // after it
    s.close_at(7, 180);
    s.settle(1000);
    assert_eq!((s.counts.wakes, s.counts.ended_wakes), (1, 1));
    s.task_closed(7);
    assert_eq!(s.counts.extra_wakes, 0);
}

#[test]
fn a_call_gathers_the_scheduled_time_of_the_suspensions_it_spans() {
    let mut s = Sched::default();
    s.spawn(1, 0, 0, 0);
    s.link(1, 9);
    // Task polls [10, 20], [40, 50], [70, 80], woken at 30 and 55.
    for (a, b) in [(10, 20), (40, 50), (70, 80)] {
        s.poll_start(1, a, 0);
        s.poll_end(1, b);
    }
    s.wake(1, 30);
    s.wake(1, 55);
    // Call 5 from 12 to 45 (spans the first suspension), call 6 inside one poll.
    s.call_start(9, 5, 12);
    s.call_exit(9, 5, 18);
    s.call_exit(9, 5, 45);
    s.call_start(9, 6, 72);
    s.call_exit(9, 6, 78);
    // A call of a task without a timeline.
    s.call_start(10, 8, 12);
    s.settle(100);
    assert_eq!(s.take_call(5), Some(10), "woken at 30, polled at 40");
    assert_eq!(s.take_call(6), Some(0));
    assert_eq!(s.take_call(8), None);
    assert_eq!(s.held(), (0, 0));
}

//! Tokio's own spans through the assembler: a task's spawn, polls and wakes from three lanes
//! read in the worst order, and a call inside the task.

use super::*;
use crate::flusher::sched::TaskOut;
use tracing_core::{callsite::Callsite, Kind, Level, Metadata};

struct Cs;
impl Callsite for Cs {
    fn set_interest(&self, _: tracing_core::Interest) {}
    fn metadata(&self) -> &Metadata<'_> {
        &SPAWN
    }
}
static CS: Cs = Cs;
static SPAWN: Metadata<'static> = tracing_core::metadata! {
    name: "runtime.spawn",
    target: "tokio::task",
    level: Level::TRACE,
    fields: &[],
    callsite: &CS,
    kind: Kind::SPAN,
};
static CALL: Metadata<'static> = tracing_core::metadata! {
    name: "handler",
    target: "app",
    level: Level::INFO,
    fields: &[],
    callsite: &CS,
    kind: Kind::SPAN,
};

/// An assembler with Tokio's instrumentation on (the flusher sets `active` from the layer's
/// callsites).
fn assembler() -> Assembler {
    let callsites = Arc::new(Callsites::default());
    callsites.register(&SPAWN);
    callsites.register(&CALL);
    let mut a = Assembler::new(callsites);
    a.sched.active = true;
    a
}

const TASK: u64 = 5; // span id of the task's `runtime.spawn` span
const CALL_ID: u64 = 6;

#[test]
fn a_task_from_three_lanes_read_in_the_worst_order() {
    let mut a = assembler();
    let mut out = Vec::new();
    // Lane 1, the worker: two polls of the task, a call inside spanning the suspension, then
    // the drop of the task's future and its close.
    let worker = [
        Record::task(42),
        Record::enter(TASK, 150),
        Record::new_span(CALL_ID, &CALL),
        Record::enter(CALL_ID, 151),
        Record::exit(CALL_ID, 155),
        Record::exit(TASK, 160),
        Record::enter(TASK, 300),
        Record::enter(CALL_ID, 301),
        Record::exit(CALL_ID, 305),
        Record::close(CALL_ID),
        Record::exit(TASK, 310),
        Record::enter(TASK, 311),
        Record::exit(TASK, 312),
        Record::close(TASK),
    ];
    a.feed(1, &worker, &mut out);
    // Lane 2, another thread: the wake that ended the suspension.
    a.feed(2, &[Record::wake(TASK, 250)], &mut out);
    // Lane 0 last: the spawn.
    let spawn = [
        Record::new_span(TASK, &SPAWN),
        Record::wake(TASK, 100),
        Record::spawn_site(3),
    ];
    a.feed(0, &spawn, &mut out);
    // Every lane read to its end (stashed closes take the clock's tick when they were read).
    for lane in 0..3 {
        a.caught_up(lane, u64::MAX - 1);
    }
    a.complete(u64::MAX, &mut out);
    assert_eq!(
        out.len(),
        1,
        "the call; the task's span is no call: {out:?}"
    );
    let call = &out[0];
    assert_eq!((call.start, call.end, call.task), (151, 305, 42));
    assert_eq!(call.sched, 50, "woken at 250, polled at 300");
    let s = &a.sched.out;
    assert_eq!(s.len(), 3, "{s:?}");
    let TaskOut::Poll {
        tokio, site, poll, ..
    } = s[0]
    else {
        panic!("{s:?}")
    };
    assert_eq!((tokio, site, poll.start, poll.end), (42, 3, 150, 160));
    assert_eq!((poll.sched, poll.first_delay), (None, Some(50)));
    let TaskOut::Poll { poll, .. } = s[1] else {
        panic!("{s:?}")
    };
    assert_eq!((poll.start, poll.sched, poll.idle), (300, Some(50), 90));
    assert_eq!(
        s[2],
        TaskOut::Ended {
            tokio: 42,
            site: 3,
            last_end: Some(310)
        },
        "the enter at 311 was the drop of the future"
    );
    assert_eq!(a.open_instances(), 0);
    assert_eq!((a.orphans, a.corrupt, a.dropped_calls), (0, 0, 0));
    // A wake after the task ended: counted, no loss.
    a.feed(2, &[Record::wake(TASK, 2000)], &mut out);
    a.complete(u64::MAX, &mut out);
    assert_eq!(a.sched.counts.ended_wakes, 1);
    assert_eq!(a.orphans, 0, "a late wake is not a lost record");
}

#[test]
fn with_task_regions_the_task_is_a_call_too() {
    let mut a = assembler();
    a.task_regions = true;
    let mut out = Vec::new();
    let recs = [
        Record::new_span(TASK, &SPAWN),
        Record::wake(TASK, 10),
        Record::spawn_site(1),
        Record::task(7),
        Record::enter(TASK, 20),
        Record::exit(TASK, 30),
        Record::close(TASK),
    ];
    a.feed(0, &recs, &mut out);
    a.caught_up(0, 100);
    a.complete(100, &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].start, out[0].end, out[0].task), (20, 30, 7));
    assert_eq!(out[0].sched, 0, "its task's scheduled time: none");
}

/// A task ends when its future is dropped (its span's last enter-exit); its close takes its
/// lane's next tick, which comes much later when the worker goes idle. A wake between the two,
/// read with them, is of a task that has ended.
#[test]
fn a_wake_after_the_drop_is_of_an_ended_task_though_the_close_is_stamped_later() {
    let mut a = assembler();
    let mut out = Vec::new();
    let spawn = [
        Record::new_span(TASK, &SPAWN),
        Record::wake(TASK, 100),
        Record::spawn_site(3),
    ];
    a.feed(0, &spawn, &mut out);
    let worker = [
        Record::task(42),
        Record::enter(TASK, 150),
        Record::exit(TASK, 160),
        Record::enter(TASK, 161), // the drop
        Record::exit(TASK, 162),
        Record::close(TASK),
    ];
    a.feed(1, &worker, &mut out);
    // Another thread wakes the task through a waker it kept, after the drop.
    a.feed(2, &[Record::wake(TASK, 200)], &mut out);
    // The worker's next tick, which stamps the close, comes only later: the watermark passes
    // the wake a round before the close is due.
    a.caught_up(1, 1_000);
    a.complete(300, &mut out);
    a.complete(2_000, &mut out);
    assert_eq!(a.open_instances(), 0);
    let c = a.sched.counts;
    assert_eq!((c.wakes, c.ended_wakes, c.extra_wakes), (0, 1, 0), "{c:?}");
}

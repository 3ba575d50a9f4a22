use super::*;
use tracing_core::{callsite::Callsite, Kind, Level, Metadata};

pub(super) struct Cs;
impl Callsite for Cs {
    fn set_interest(&self, _: tracing_core::Interest) {}
    fn metadata(&self) -> &Metadata<'_> {
        &META
    }
}
pub(super) static CS: Cs = Cs;
pub(super) static META: Metadata<'static> = tracing_core::metadata! {
    name: "r",
    target: "t",
    level: Level::INFO,
    fields: &[],
    callsite: &CS,
    kind: Kind::SPAN,
};

/// Every lane read to the end, the watermark past everything: completes every closed
/// call.
pub(super) fn next_drain(a: &mut Assembler, out: &mut Vec<RawCall>) {
    for lane in 0..4 {
        a.caught_up(lane, u64::MAX - 1);
    }
    a.complete(u64::MAX, out);
}

/// An assembler that knows the test callsite.
fn assembler() -> Assembler {
    let callsites = Arc::new(Callsites::default());
    callsites.register(&META);
    Assembler::new(callsites)
}

fn new(id: u64, _t: u64) -> Record {
    Record::new_span(id, &META)
}
fn enter(id: u64, t: u64) -> Record {
    Record::enter(id, t)
}
fn exit(id: u64, t: u64) -> Record {
    Record::exit(id, t)
}
fn close(id: u64, _t: u64) -> Record {
    Record::close(id)
}

#[test]
fn five_enters_are_one_call() {
    let mut a = assembler();
    let mut out = vec![];
    let mut recs = vec![new(1, 1)];
    for k in 0..5 {
        recs.push(enter(1, 10 + 10 * k));
        recs.push(exit(1, 15 + 10 * k));
    }
    recs.push(close(1, 100));
    a.feed(0, &recs, &mut out);
    a.complete(u64::MAX, &mut out);
    assert!(
        out.is_empty(),
        "a close has no time until its lane shows one"
    );
    // The lane was read to its end at tick 100: its close is no later.
    a.caught_up(0, 100);
    a.complete(99, &mut out);
    assert!(
        out.is_empty(),
        "completed once the watermark passes its close"
    );
    a.complete(100, &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(
        (out[0].start, out[0].end, out[0].busy, out[0].polls),
        (10, 55, 25, 5)
    );
    assert_eq!(a.open_instances(), 0, "a completed instance is freed");
}

#[test]
fn cross_lane_call_waits_for_the_watermark() {
    let mut a = assembler();
    let mut out = vec![];
    a.feed(0, &[new(7, 1)], &mut out);
    a.feed(1, &[enter(7, 5), exit(7, 9)], &mut out);
    // Close on a third lane, while a poll's exit on lane 1 is not drained yet.
    a.feed(2, &[close(7, 30)], &mut out);
    a.caught_up(2, 30);
    // Lane 1 was read up to tick 9 only: the watermark is there.
    a.complete(9, &mut out);
    assert!(out.is_empty());
    a.feed(1, &[enter(7, 20), exit(7, 25)], &mut out);
    a.complete(30, &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(
        (out[0].start, out[0].end, out[0].busy, out[0].polls),
        (5, 25, 9, 2)
    );
    assert_eq!(a.in_flight(), 0);
}

#[test]
fn a_replayed_later_poll_does_not_hide_the_first_one() {
    let mut a = assembler();
    let mut out = vec![];
    // Lane 0 (drained first) has the span's second poll; lane 1 created it and ran the
    // first poll. The stashed second poll is replayed when the NEW arrives, before lane 1's
    // own (earlier) poll is fed.
    a.feed(0, &[enter(6, 10), exit(6, 20)], &mut out);
    a.feed(1, &[new(6, 1), enter(6, 2), exit(6, 5)], &mut out);
    a.feed(0, &[close(6, 21)], &mut out);
    a.complete(0, &mut out);
    next_drain(&mut a, &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(
        (out[0].start, out[0].end, out[0].busy, out[0].polls),
        (2, 20, 13, 2)
    );
    assert_eq!((out[0].lane, out[0].last_lane), (1, 0));
}

#[test]
fn a_close_takes_the_next_tick_of_its_lane() {
    let mut a = assembler();
    let mut out = vec![];
    a.feed(
        0,
        &[
            new(1, 0),
            enter(1, 10),
            exit(1, 15),
            enter(1, 18),
            exit(1, 20),
            close(1, 0),
            new(2, 0),
        ],
        &mut out,
    );
    a.feed(0, &[enter(2, 50)], &mut out);
    a.complete(49, &mut out);
    assert!(out.is_empty(), "the close may have come as late as tick 50");
    a.complete(50, &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].start, out[0].end, out[0].close), (10, 20, 50));
    assert_eq!(a.in_flight(), 1, "span 2 is still open");
}

#[test]
fn a_replayed_close_completes_without_its_lane() {
    let mut a = assembler();
    let mut out = vec![];
    // A worker lane closes span 5 before the lane that created it is read; the worker
    // then exits (its lane is never read again).
    a.feed(1, &[enter(5, 10), exit(5, 12), close(5, 0)], &mut out);
    a.feed(0, &[new(5, 0)], &mut out);
    a.caught_up(0, u64::MAX - 1);
    a.complete(u64::MAX - 1, &mut out);
    assert_eq!(out.len(), 1, "the close took the tick it was stashed with");
    assert_eq!((out[0].start, out[0].end, out[0].lane), (10, 12, 1));
    assert_eq!((a.in_flight(), a.orphans), (0, 0));
}

#[test]
fn the_contiguous_shape_is_one_step_held_until_the_watermark_passes_its_close() {
    let mut a = assembler();
    let mut out = vec![];
    a.feed(
        0,
        &[new(3, 1), enter(3, 2), exit(3, 4), close(3, 5)],
        &mut out,
    );
    assert_eq!(a.open_instances(), 0, "no instance");
    // Its close has no tick until the lane shows one; then the watermark must pass it.
    a.caught_up(0, 6);
    a.complete(5, &mut out);
    assert!(out.is_empty(), "another lane may still hold a poll of it");
    a.complete(6, &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(
        (out[0].start, out[0].end, out[0].busy, out[0].close),
        (2, 4, 2, 6)
    );
}

#[test]
fn a_poll_on_another_lane_between_the_exit_and_the_close_joins_the_one_step_call() {
    // A span entered on lane 0 and, before lane 0 closes it, on lane 1 (a scoped thread);
    // lane 0's four records are contiguous and read first.
    let mut a = assembler();
    let mut out = vec![];
    a.feed(
        0,
        &[new(3, 1), enter(3, 2), exit(3, 4), close(3, 0)],
        &mut out,
    );
    a.caught_up(0, 20);
    a.feed(1, &[enter(3, 6), exit(3, 9)], &mut out);
    a.caught_up(1, 20);
    a.complete(20, &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(
        (
            out[0].start,
            out[0].end,
            out[0].busy,
            out[0].polls,
            out[0].last_lane
        ),
        (2, 9, 5, 2, 1)
    );
    assert_eq!((a.orphans, a.in_flight(), a.open_instances()), (0, 0, 0));
}

#[test]
fn never_entered_span_is_no_call_and_orphans_are_counted() {
    let mut a = assembler();
    let mut out = vec![];
    a.feed(0, &[new(1, 1), close(1, 2), exit(9, 3)], &mut out);
    a.complete(2, &mut out);
    assert_eq!(
        a.orphans, 0,
        "an unknown record waits for its NEW until the watermark passes it"
    );
    next_drain(&mut a, &mut out);
    assert!(out.is_empty());
    assert_eq!(a.orphans, 1);
}

#[test]
fn polls_drained_before_their_new_are_replayed() {
    let mut a = assembler();
    let mut out = vec![];
    // A worker lane is drained before the spawning lane that created the span.
    a.feed(1, &[enter(4, 10), exit(4, 12), enter(4, 20)], &mut out);
    a.feed(0, &[new(4, 5)], &mut out);
    a.feed(1, &[exit(4, 26), close(4, 27)], &mut out);
    a.complete(0, &mut out);
    next_drain(&mut a, &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(
        (out[0].start, out[0].end, out[0].busy, out[0].polls),
        (10, 26, 8, 2)
    );
    assert_eq!(a.orphans, 0);
}

fn lost(id: u64, closed: bool) -> Record {
    Record::lost(id, closed)
}

#[test]
fn a_call_with_a_lost_record_is_dropped_whole() {
    let mut a = assembler();
    let mut out = vec![];
    // Span 5 lost its exit; span 6 is intact.
    a.feed(
        0,
        &[new(5, 1), enter(5, 2), new(6, 3), enter(6, 4), exit(6, 5)],
        &mut out,
    );
    a.feed(0, &[lost(5, false), close(5, 9), close(6, 10)], &mut out);
    a.complete(0, &mut out);
    next_drain(&mut a, &mut out);
    assert_eq!(out.len(), 1, "only the intact call");
    assert_eq!(out[0].start, 4);
    assert_eq!((a.dropped_calls, a.in_flight()), (1, 0));
    // The reused id is a new instance, untouched by the old loss.
    a.feed(
        0,
        &[new(5, 20), enter(5, 21), exit(5, 22), close(5, 23)],
        &mut out,
    );
    next_drain(&mut a, &mut out);
    assert_eq!(out.len(), 2);
}

#[test]
fn a_lost_close_ends_the_call_and_drops_it() {
    let mut a = assembler();
    let mut out = vec![];
    a.feed(
        0,
        &[new(8, 1), enter(8, 2), exit(8, 3), lost(8, true)],
        &mut out,
    );
    a.complete(0, &mut out);
    next_drain(&mut a, &mut out);
    assert!(out.is_empty());
    assert_eq!((a.in_flight(), a.dropped_calls), (0, 1));
}

#[test]
fn a_lost_new_orphans_its_records_as_one_dropped_call() {
    let mut a = assembler();
    let mut out = vec![];
    // Span 9's NEW was lost; its later records arrive with the marker before them.
    a.feed(
        0,
        &[lost(9, false), enter(9, 2), exit(9, 3), close(9, 4)],
        &mut out,
    );
    a.complete(0, &mut out);
    next_drain(&mut a, &mut out);
    assert!(out.is_empty());
    assert_eq!((a.dropped_calls, a.orphans), (1, 4));
}

#[test]
fn same_lane_records_before_a_new_belong_to_an_earlier_instance() {
    let mut a = assembler();
    let mut out = vec![];
    // Lane 0: a lost NEW of id 4 (marker, enter, exit, close), then id 4 reused by a new,
    // intact span in the same drain. The stashed records must not join the new instance.
    a.feed(
        0,
        &[
            lost(4, false),
            enter(4, 2),
            exit(4, 3),
            close(4, 4),
            new(4, 5),
            enter(4, 6),
        ],
        &mut out,
    );
    a.feed(0, &[exit(4, 8), close(4, 9)], &mut out);
    a.complete(0, &mut out);
    next_drain(&mut a, &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].start, out[0].end, out[0].polls), (6, 8, 1));
    assert_eq!((a.dropped_calls, a.orphans), (1, 4));
}

#[test]
fn corrupt_records_are_counted_not_followed() {
    let mut a = assembler();
    let mut out = vec![];
    // A creation record whose callsite word points nowhere the layer registered, and an
    // event-site slot with no checkpoint before it (and no line timing): neither is
    // dereferenced.
    let bogus = Record { id: 1, word: 0x88 };
    let bad_kind = Record { id: 2, word: EVENT };
    a.feed(0, &[bogus, enter(1, 2), exit(1, 3), close(1, 4)], &mut out);
    a.feed(0, &[bad_kind], &mut out);
    assert!(out.is_empty());
    assert_eq!(a.corrupt, 5);
}

#[test]
fn a_gone_lanes_state_goes_with_its_last_close() {
    let mut a = assembler();
    let mut out = vec![];
    let recs = [
        Record::task(7),
        new(1, 0),
        enter(1, 5),
        exit(1, 6),
        enter(1, 7),
        exit(1, 8),
        close(1, 0),
    ];
    a.feed(3, &recs, &mut out);
    a.lane_gone(3);
    assert!(
        a.lanes.has(3),
        "a close still waits for the lane's next tick"
    );
    a.caught_up(3, 10);
    a.complete(u64::MAX, &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].task, out[0].polls, out[0].close), (7, 2, 10));
    assert!(!a.lanes.has(3), "nothing left of the lane");
    assert_eq!(a.open_instances(), 0);
}

/// The calls and polls of `recs` fed on lane 0, then completed.
fn calls_and_polls(recs: &[Record]) -> (Vec<RawCall>, Vec<RawPoll>) {
    let mut a = assembler();
    a.keep_polls = true;
    let mut out = vec![];
    a.feed(0, recs, &mut out);
    next_drain(&mut a, &mut out);
    (out, std::mem::take(&mut a.polls))
}

#[test]
fn re_polls_take_one_step_and_give_what_the_general_path_gives() {
    // Span 1 polled four times; span 2's records between the enters and exits of the
    // second stream keep every poll of span 1 off the re-poll path.
    let mut adjacent = vec![new(1, 0)];
    let mut apart = vec![new(1, 0), new(2, 0)];
    for k in 0..4 {
        let t = 10 + 10 * k;
        adjacent.extend([enter(1, t), exit(1, t + 4)]);
        apart.extend([enter(1, t), enter(2, t + 1), exit(2, t + 2), exit(1, t + 4)]);
    }
    adjacent.push(close(1, 0));
    apart.extend([close(2, 0), close(1, 0)]);
    let (fast, fast_polls) = calls_and_polls(&adjacent);
    let (general, general_polls) = calls_and_polls(&apart);
    let general: Vec<RawCall> = general.into_iter().filter(|c| c.start == 10).collect();
    assert_eq!(fast.len(), 1);
    assert_eq!(
        (fast[0].start, fast[0].end, fast[0].busy, fast[0].polls),
        (10, 44, 16, 4)
    );
    assert_eq!(
        fast[0],
        RawCall {
            close: fast[0].close,
            ..general[0].clone()
        }
    );
    let span1: Vec<RawPoll> = general_polls
        .into_iter()
        .filter(|p| p.end - p.start == 4)
        .collect();
    assert_eq!(fast_polls, span1, "every poll kept, in order");
}

#[test]
fn a_nested_re_enter_and_a_poll_on_another_lane_keep_the_general_path() {
    let mut a = assembler();
    let mut out = vec![];
    // Polled once; then re-entered while entered (depth 2): one poll of 10..40.
    a.feed(
        0,
        &[
            new(1, 0),
            enter(1, 1),
            exit(1, 2),
            enter(1, 10),
            enter(1, 20),
            exit(1, 30),
            exit(1, 40),
        ],
        &mut out,
    );
    // A poll in progress on lane 1 while lane 0 polls: both count.
    a.feed(1, &[enter(1, 50)], &mut out);
    a.feed(0, &[enter(1, 60), exit(1, 70)], &mut out);
    a.feed(1, &[exit(1, 80)], &mut out);
    a.feed(0, &[close(1, 0)], &mut out);
    next_drain(&mut a, &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(
        (
            out[0].start,
            out[0].end,
            out[0].polls,
            out[0].busy,
            out[0].last_lane
        ),
        (1, 80, 4, 1 + 30 + 10 + 30, 1)
    );
}

#[test]
fn held_one_step_calls_are_bounded_and_every_call_still_comes() {
    let mut a = assembler();
    let mut out = vec![];
    let cap = super::fast::HELD_MAX as u64;
    let n = cap + 1000;
    let mut recs = Vec::new();
    for k in 0..n {
        let t = 10 + 4 * k;
        recs.extend([new(7, t), enter(7, t + 1), exit(7, t + 2), close(7, t + 3)]);
    }
    a.feed(0, &recs, &mut out);
    // Nothing read on the other lanes yet: the watermark has not moved, and the oldest
    // beyond the cap are final at once.
    assert_eq!(out.len() as u64, n - cap);
    assert!(
        out.windows(2).all(|w| w[0].start < w[1].start),
        "oldest first"
    );
    next_drain(&mut a, &mut out);
    assert_eq!(out.len() as u64, n);
    assert_eq!(a.held, 0);
}

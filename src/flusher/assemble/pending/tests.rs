//! The pending path against what the general path gives for the same records: one call per
//! span, whatever the batch boundaries, interleavings and other lanes.

use super::super::tests::{next_drain, META};
use super::*;
use crate::flusher::assemble::Implicit;
use crate::recording::region::Callsites;
use crate::recording::subscriber::SpanSites;
use std::sync::Arc;

/// A `ScopeSubscriber` assembler whose callsite index 0 is the test callsite.
fn subscriber() -> Assembler {
    let callsites = Arc::new(Callsites::default());
    callsites.register(&META);
    let sites = Arc::new(SpanSites::new());
    assert_eq!(sites.register(&META), Some(0));
    let mut a = Assembler::new(callsites);
    a.implicit = Some(Implicit::new(sites));
    a
}

/// A subscriber's span id of callsite index 0 (see `recording::subscriber::spans`).
fn sub_id(seq: u64) -> u64 {
    1 << 44 | seq
}

/// A `ScopeLayer` assembler that knows the test callsite.
fn layer() -> Assembler {
    let callsites = Arc::new(Callsites::default());
    callsites.register(&META);
    Assembler::new(callsites)
}

/// An async call of span `id` on one lane: its creation (`ScopeLayer`), then `polls` polls of
/// 5 ticks from `t`, 10 apart, then its close.
fn async_call(id: u64, t: u64, polls: u64) -> Vec<Record> {
    let mut recs = vec![Record::new_span(id, &META)];
    for p in 0..polls {
        recs.push(Record::enter(id, t + 10 * p));
        recs.push(Record::exit(id, t + 10 * p + 5));
    }
    recs.push(Record::close(id));
    recs
}

/// (start, end, polls, busy) of each call, by start.
fn shapes(out: &[RawCall]) -> Vec<(u64, u64, u32, u64)> {
    let mut v: Vec<_> = out
        .iter()
        .map(|c| (c.start, c.end, c.polls, c.busy))
        .collect();
    v.sort();
    v
}

#[test]
fn an_async_call_in_one_batch_makes_no_instance() {
    let mut a = layer();
    let mut out = vec![];
    a.feed(0, &async_call(1, 10, 3), &mut out);
    assert_eq!(a.open_instances(), 0, "held, not assembled");
    next_drain(&mut a, &mut out);
    assert_eq!(shapes(&out), [(10, 35, 3, 15)]);
    assert_eq!((a.orphans, a.corrupt, a.dropped_calls), (0, 0, 0));
}

#[test]
fn interleaved_calls_of_one_lane_and_a_split_batch() {
    let mut a = layer();
    let mut out = vec![];
    // Two calls polled in turn on lane 0; the batch ends between their polls.
    let (x, y) = (1, 2);
    let first = [
        Record::new_span(x, &META),
        Record::enter(x, 10),
        Record::exit(x, 12),
        Record::new_span(y, &META),
        Record::enter(y, 20),
        Record::exit(y, 23),
        Record::enter(x, 30),
        Record::exit(x, 32),
    ];
    a.feed(0, &first, &mut out);
    assert_eq!(a.open_instances(), 2, "promoted at the batch's end");
    let second = [
        Record::enter(y, 40),
        Record::exit(y, 43),
        Record::close(y),
        Record::enter(x, 50),
        Record::exit(x, 52),
        Record::close(x),
    ];
    a.feed(0, &second, &mut out);
    next_drain(&mut a, &mut out);
    assert_eq!(shapes(&out), [(10, 52, 3, 6), (20, 43, 2, 6)]);
    assert_eq!(a.open_instances(), 0);
}

#[test]
fn a_nested_enter_promotes_it() {
    let mut a = layer();
    let mut out = vec![];
    let recs = [
        Record::new_span(1, &META),
        Record::enter(1, 10),
        Record::exit(1, 20),
        // Entered twice before the exit: the general path's poll depth.
        Record::enter(1, 30),
        Record::enter(1, 31),
        Record::exit(1, 32),
        Record::exit(1, 40),
        Record::close(1),
    ];
    a.feed(0, &recs, &mut out);
    next_drain(&mut a, &mut out);
    assert_eq!(shapes(&out), [(10, 40, 2, 20)]);
}

#[test]
fn polls_on_another_lane_join_it() {
    let mut a = layer();
    let mut out = vec![];
    // Created and polled on lane 0, polled on lane 1 in between, closed on lane 0; lane 1
    // is read after lane 0's close.
    let lane0 = [
        Record::new_span(1, &META),
        Record::enter(1, 10),
        Record::exit(1, 15),
        Record::enter(1, 40),
        Record::exit(1, 45),
        Record::close(1),
    ];
    a.feed(0, &lane0, &mut out);
    a.caught_up(0, 50);
    a.feed(1, &[Record::enter(1, 20), Record::exit(1, 30)], &mut out);
    next_drain(&mut a, &mut out);
    assert_eq!(shapes(&out), [(10, 45, 3, 20)]);
    assert_eq!(a.orphans, 0);
}

#[test]
fn more_than_the_cap_at_once_are_each_one_call() {
    let mut a = layer();
    let mut out = vec![];
    let n = PENDING_MAX as u64 * 3;
    let mut recs = vec![];
    for id in 1..=n {
        recs.extend_from_slice(&[
            Record::new_span(id, &META),
            Record::enter(id, id * 10),
            Record::exit(id, id * 10 + 1),
        ]);
    }
    for id in 1..=n {
        let t = 10_000 + id * 10;
        recs.extend_from_slice(&[
            Record::enter(id, t),
            Record::exit(id, t + 2),
            Record::close(id),
        ]);
    }
    a.feed(0, &recs, &mut out);
    next_drain(&mut a, &mut out);
    assert_eq!(out.len() as u64, n);
    assert!(
        out.iter().all(|c| c.polls == 2 && c.busy == 3),
        "{:?}",
        &out[..2]
    );
    assert_eq!(a.open_instances(), 0);
}

#[test]
fn a_close_waits_for_the_lanes_next_tick() {
    let mut a = layer();
    let mut out = vec![];
    // Two calls held in a row: each close is bounded by the lane's first tick after it.
    let mut recs = async_call(1, 10, 2);
    recs.extend(async_call(2, 100, 2));
    a.feed(0, &recs, &mut out);
    a.complete(u64::MAX, &mut out);
    assert_eq!(
        shapes(&out),
        [(10, 25, 2, 10)],
        "the second's close has no tick yet"
    );
    assert_eq!(out[0].close, 100);
    a.caught_up(0, 200);
    a.complete(199, &mut out);
    assert_eq!(out.len(), 1, "not before the watermark passes its close");
    a.complete(200, &mut out);
    assert_eq!(out.len(), 2);
    assert_eq!(out[1].close, 200);
}

#[test]
fn a_subscriber_call_joins_its_polls_from_another_lane_and_a_loss_drops_it() {
    let mut a = subscriber();
    let mut out = vec![];
    let s = sub_id(1);
    let lane0 = [
        Record::enter_fresh(s, 10),
        Record::exit(s, 15),
        Record::enter(s, 40),
        Record::exit(s, 45),
        Record::close(s),
    ];
    a.feed(0, &lane0, &mut out);
    assert_eq!(a.open_instances(), 0);
    a.caught_up(0, 50);
    a.feed(1, &[Record::enter(s, 20), Record::exit(s, 30)], &mut out);
    next_drain(&mut a, &mut out);
    assert_eq!(shapes(&out), [(10, 45, 3, 20)]);
    // A lost record of a pending call's span: promoted, then dropped whole and counted.
    let t = sub_id(2);
    let lane0 = [
        Record::enter_fresh(t, 100),
        Record::exit(t, 105),
        Record::lost(t, true),
    ];
    a.feed(0, &lane0, &mut out);
    next_drain(&mut a, &mut out);
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!((a.dropped_calls, a.orphans, a.open_instances()), (1, 0, 0));
}

#[test]
fn the_path_turns_off_where_calls_outlive_their_batch_and_probes_again() {
    let mut a = layer();
    let mut out = vec![];
    // A server's shape: each call's second poll comes a batch later, so each is promoted.
    for id in 1..=u64::from(PROBE) {
        let t = id * 100;
        let first = [
            Record::new_span(id, &META),
            Record::enter(id, t),
            Record::exit(id, t + 1),
        ];
        a.feed(0, &first, &mut out);
        a.feed(
            0,
            &[
                Record::enter(id, t + 50),
                Record::exit(id, t + 51),
                Record::close(id),
            ],
            &mut out,
        );
    }
    assert_eq!(a.outcomes.off, OFF, "more promoted than held");
    next_drain(&mut a, &mut out);
    // Off: a call that would fit its batch takes the general path (an instance until done).
    let mut t = 1_000_000;
    let call = |id: u64, t: u64| async_call(id, t, 2);
    a.feed(0, &call(1_000_000, t), &mut out);
    assert_eq!(a.open_instances(), 1, "general path while off");
    for k in 1..u64::from(OFF) {
        t += 100;
        a.feed(0, &call(1_000_000 + k, t), &mut out);
    }
    assert_eq!(a.outcomes.off, 0);
    // On again: the next one is held without an instance.
    next_drain(&mut a, &mut out);
    t += 100;
    a.feed(0, &call(2_000_000, t), &mut out);
    assert_eq!(a.open_instances(), 0, "the path probes again");
    next_drain(&mut a, &mut out);
    let n = u64::from(PROBE) + u64::from(OFF) + 1;
    assert_eq!(out.len() as u64, n, "every call once");
    assert!(out.iter().all(|c| c.polls == 2));
    assert_eq!((a.orphans, a.corrupt, a.dropped_calls), (0, 0, 0));
}

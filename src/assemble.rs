//! Assembly: turning each lane's record stream back into calls, on the flusher.
//!
//! A call is one span instance from its first enter to its last exit. The records of one
//! instance may come from several lanes (a future created on one thread and polled on Tokio
//! workers). Span ids are reused: the registry's slot generation wraps, so one thread creating
//! spans in a loop gets the same id back every 8 191 spans, far inside one drain. But an id is
//! never reused while its span is open, so a record goes to the newest instance of its id; and
//! records of the creating lane that precede a `NEW` in that lane belong to an earlier
//! instance (see `replay`).
//!
//! A `LOST` marker (a record the owner could not buffer, see `lane::writer`) is routed like
//! the record it replaces: its instance is dropped whole and counted in `dropped_calls`.
//!
//! Lanes are drained one after the other, so a record that happened before another one on a
//! *different* lane may be drained after it. Two rules make that harmless:
//! - a record whose instance has not been created yet (its `NEW` is still in another lane's
//!   buffer) is stashed and replayed as soon as that `NEW` arrives; if no drain that started
//!   after the stash brings it, the record is an orphan and counted as dropped;
//! - an instance is completed after the next drain that started after its `CLOSE` was seen, by
//!   which time everything that happened before the close (a poll on another worker thread,
//!   say) has been published and drained. Only the commonest shape, a span created, entered
//!   once, exited and closed with nothing in between on one lane, is completed at once.

use std::collections::hash_map::Entry;
use std::sync::Arc;

use crate::fasthash::FastMap;
use crate::lane::record::{Record, AUX, CLOSE, ENTER, EVENT, EXIT, LOST, NEW};
use crate::lines::LineAcc;
use crate::region::{Callsites, RegionTable};
use crate::task::OpenStarts;

/// Capacity the assembler's tables keep however few instances are open.
const KEEP_CAPACITY: usize = 4096;

/// A completed call, in raw clock ticks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RawCall {
    pub region: u32,
    pub start: u64,
    pub end: u64,
    /// Sum of the poll durations (ticks).
    pub busy: u64,
    /// Lane of the first poll.
    pub lane: u32,
    /// Tokio task id of the first poll (0 = none).
    pub task: u64,
    /// Number of polls.
    pub polls: u32,
    /// Lane of the latest poll.
    pub last_lane: u32,
    /// Sink payloads recorded during the call (`AUX` records), in order.
    pub aux: Vec<u64>,
    /// Line-timing checkpoints (`EVENT` records), when any.
    pub lines: Option<Box<LineAcc>>,
}

/// One poll (enter -> exit at depth 0) of a span, in raw ticks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RawPoll {
    pub region: u32,
    pub start: u64,
    pub end: u64,
    pub lane: u32,
    /// Tokio task id at the enter (0 = none).
    pub task: u64,
}

/// A span instance still being assembled.
#[derive(Clone, Debug)]
struct Inst {
    region: u32,
    first_enter: Option<(u64, u32, u64)>,
    last_exit: u64,
    /// Polls in progress, one per lane: (lane, depth, start, task). Per lane, because a
    /// lane's records may be replayed out of order with another lane's (see the module docs).
    open_polls: Vec<(u32, u32, u64, u64)>,
    last_lane: u32,
    busy: u64,
    polls: u32,
    closed_epoch: Option<u64>,
    aux: Vec<u64>,
    lines: Option<Box<LineAcc>>,
    /// Open while the profiler paused: some records may be missing, so never reported.
    tainted: bool,
    /// A record of this call was lost (a `LOST` marker): the call is dropped whole.
    lost: bool,
    /// The lane whose `CLOSE` (or lost close) ended the call: later records of that lane
    /// belong to a newer instance of the id.
    closed_lane: Option<u32>,
}

impl Inst {
    fn into_call(self) -> Option<RawCall> {
        if self.tainted {
            return None;
        }
        let (start, lane, task) = self.first_enter?;
        let end = self.last_exit.max(start);
        Some(RawCall {
            region: self.region,
            start,
            end,
            busy: self.busy.min(end - start),
            lane,
            task,
            polls: self.polls,
            last_lane: self.last_lane,
            aux: self.aux,
            lines: self.lines,
        })
    }
}

/// The assembler's state: open instances and the region table.
#[derive(Default)]
pub(crate) struct Assembler {
    open: FastMap<u64, Vec<Inst>>,
    /// Ids with an instance closed during the previous complete drain: completed at the end
    /// of the current one.
    deferred: Vec<u64>,
    /// Ids with an instance closed during the current complete drain: they cannot complete
    /// before the next one, so this drain's end does not visit them.
    closed_now: Vec<u64>,
    /// Records that arrived before their instance's `NEW`: (epoch stashed, lane, record).
    stash: FastMap<u64, Vec<(u64, u32, Record)>>,
    epoch: u64,
    /// Records that belonged to no known span instance.
    pub(crate) orphans: u64,
    /// Records rejected as corrupt (unknown kind, or a callsite the layer never registered).
    pub(crate) corrupt: u64,
    /// Calls dropped whole because a record of theirs was lost (a `LOST` marker).
    pub(crate) dropped_calls: u64,
    /// Whether to keep every poll in `polls`.
    pub(crate) keep_polls: bool,
    /// Whether the layer writes `EVENT` records (line timing); if not, one is corrupt.
    pub(crate) line_timing: bool,
    /// Polls completed since the caller last took them (when `keep_polls`).
    pub(crate) polls: Vec<RawPoll>,
    pub(crate) regions: RegionTable,
    /// Starts of the entered, not yet completed instances of each Tokio task.
    pub(crate) task_open: OpenStarts,
}

impl Assembler {
    /// An assembler that accepts the callsites registered in `callsites`.
    pub(crate) fn new(callsites: Arc<Callsites>) -> Assembler {
        Assembler {
            regions: RegionTable::new(callsites),
            ..Assembler::default()
        }
    }

    /// Marks the start of a complete drain (every published record of every lane).
    pub(crate) fn begin_complete_drain(&mut self) {
        self.epoch += 1;
    }

    /// Feeds one lane's records, in that lane's program order.
    pub(crate) fn feed(&mut self, lane: u32, records: &[Record], out: &mut Vec<RawCall>) {
        let mut i = 0;
        while i < records.len() {
            // Fast path: a sync span created, entered once, exited and closed on this lane
            // with nothing in between (`info_span!(..).in_scope(..)` in a loop).
            if let [n, e, x, c, ..] = &records[i..] {
                if n.kind() == NEW
                    && e.kind() == ENTER
                    && x.kind() == EXIT
                    && c.kind() == CLOSE
                    && n.id == e.id
                    && e.id == x.id
                    && x.id == c.id
                {
                    let end = x.tsc.max(e.tsc);
                    let Some(region) = self.regions.region_of(n.callsite_addr()) else {
                        self.corrupt += 4;
                        i += 4;
                        continue;
                    };
                    if self.keep_polls {
                        self.polls.push(RawPoll {
                            region,
                            start: e.tsc,
                            end,
                            lane,
                            task: e.task(),
                        });
                    }
                    out.push(RawCall {
                        region,
                        start: e.tsc,
                        end,
                        busy: end - e.tsc,
                        lane,
                        task: e.task(),
                        polls: 1,
                        last_lane: lane,
                        aux: Vec::new(),
                        lines: None,
                    });
                    i += 4;
                    continue;
                }
            }
            self.feed_one(lane, &records[i], out);
            i += 1;
        }
    }

    fn feed_one(&mut self, lane: u32, r: &Record, out: &mut Vec<RawCall>) {
        if !r.kind_is_valid() || (r.kind() == EVENT && !self.line_timing) {
            self.corrupt += 1;
            return;
        }
        if r.kind() == NEW {
            let Some(region) = self.regions.region_of(r.callsite_addr()) else {
                self.corrupt += 1;
                return;
            };
            let inst = Inst {
                region,
                first_enter: None,
                last_exit: 0,
                open_polls: Vec::new(),
                last_lane: lane,
                busy: 0,
                polls: 0,
                closed_epoch: None,
                aux: Vec::new(),
                lines: None,
                tainted: false,
                lost: false,
                closed_lane: None,
            };
            // Instances of one id stay in creation order, so the routing below finds the
            // newest one from the back (O(1) however many wait for their completion).
            // Exact capacities: a flusher behind holds one instance per span of its backlog,
            // and a default Vec's first growth would reserve four of each.
            self.open
                .entry(r.id)
                .or_insert_with(|| Vec::with_capacity(1))
                .push(inst);
            if let Some(stashed) = self.stash.remove(&r.id) {
                self.replay(lane, stashed, out);
            }
            return;
        }
        // An id is reused only after its span closed, so a record belongs to the instance of
        // its id created last (what `replay` keeps true for records that wait for their NEW).
        let found = self.open.get(&r.id).and_then(|insts| {
            let k = insts.len().checked_sub(1)?;
            // Nothing follows a span's close on the lane that closed it.
            (insts[k].closed_lane != Some(lane)).then_some(k)
        });
        let Some(k) = found else {
            if r.kind() == EVENT {
                // A checkpoint of a span this layer does not record (filtered out): not ours.
                return;
            }
            let epoch = self.epoch;
            self.stash
                .entry(r.id)
                .or_insert_with(|| Vec::with_capacity(1))
                .push((epoch, lane, *r));
            return;
        };
        let insts = self.open.get_mut(&r.id).expect("found above");
        let inst = &mut insts[k];
        match r.kind() {
            ENTER => {
                match inst.open_polls.iter_mut().find(|p| p.0 == lane) {
                    Some(p) => p.1 += 1,
                    None => {
                        inst.open_polls.reserve_exact(1);
                        inst.open_polls.push((lane, 1, r.tsc, r.task()));
                    }
                }
                // The earliest enter starts the call (records of other lanes may be replayed
                // before this lane's earlier ones).
                if inst.first_enter.is_none_or(|(t, _, _)| r.tsc < t) {
                    if let Some((t, _, task)) = inst.first_enter {
                        self.task_open.remove(task, t);
                    }
                    self.task_open.insert(r.task(), r.tsc);
                    inst.first_enter = Some((r.tsc, lane, r.task()));
                }
            }
            EXIT => {
                if let Some(i) = inst.open_polls.iter().position(|p| p.0 == lane) {
                    let p = &mut inst.open_polls[i];
                    p.1 -= 1;
                    if p.1 == 0 {
                        let (_, _, start, task) = inst.open_polls.swap_remove(i);
                        inst.busy += r.tsc.saturating_sub(start);
                        inst.polls += 1;
                        if self.keep_polls {
                            self.polls.push(RawPoll {
                                region: inst.region,
                                start,
                                end: r.tsc.max(start),
                                lane,
                                task,
                            });
                        }
                    }
                }
                if r.tsc >= inst.last_exit {
                    inst.last_exit = r.tsc;
                    inst.last_lane = lane;
                }
            }
            AUX => inst.aux.push(r.payload()),
            EVENT => {
                if let Some(p) = inst.open_polls.iter().find(|p| p.0 == lane) {
                    LineAcc::event(&mut inst.lines, p.2, r.tsc, r.site());
                }
            }
            LOST if r.payload() == 0 => inst.lost = true,
            _ => {
                // CLOSE, or a marker of a lost CLOSE, which ends the call as well.
                inst.lost |= r.kind() == LOST;
                inst.closed_lane = Some(lane);
                if inst.closed_epoch.is_none() {
                    inst.closed_epoch = Some(self.epoch);
                    self.closed_now.push(r.id);
                }
            }
        }
    }

    /// Replays the stashed records of an id whose `NEW` just arrived on lane `created_on`.
    /// Stashed records of that same lane came before the `NEW` in its program order, so they
    /// belong to an earlier instance of the reused id whose `NEW` was lost: orphans.
    fn replay(
        &mut self,
        created_on: u32,
        stashed: Vec<(u64, u32, Record)>,
        out: &mut Vec<RawCall>,
    ) {
        let (now, earlier): (Vec<_>, Vec<_>) = stashed
            .into_iter()
            .partition(|(_, lane, _)| *lane != created_on);
        self.orphaned(earlier.iter().map(|(_, _, r)| r));
        for (_, lane, r) in now {
            self.feed_one(lane, &r, out);
        }
    }

    /// Counts records that belong to no instance (one id's, in stash order). Each span among
    /// them that lost a record (its `NEW` was lost, hence no instance) is one dropped call:
    /// the id may have been reused by several such spans, each ending at a close (or the
    /// marker of a lost close).
    fn orphaned<'a>(&mut self, records: impl Iterator<Item = &'a Record>) {
        let mut lost = false;
        for r in records {
            self.orphans += 1;
            lost |= r.kind() == LOST;
            let closes = r.kind() == CLOSE || (r.kind() == LOST && r.payload() == 1);
            if closes && lost {
                self.dropped_calls += 1;
                lost = false;
            }
        }
        self.dropped_calls += u64::from(lost);
    }

    /// Completes the cross-lane instances closed before the current complete drain began,
    /// and gives up on stashed records that this drain did not resolve.
    /// Call after the complete drain has fed every lane.
    pub(crate) fn end_complete_drain(&mut self, out: &mut Vec<RawCall>) {
        let epoch = self.epoch;

        let mut expired = Vec::new();
        self.stash.retain(|_, v| {
            if v.iter().all(|(e, _, _)| *e >= epoch) {
                return true;
            }
            let (keep, gone): (Vec<_>, Vec<_>) = v.drain(..).partition(|(e, _, _)| *e >= epoch);
            *v = keep;
            expired.push(gone);
            !v.is_empty()
        });
        for gone in expired {
            self.orphaned(gone.iter().map(|(_, _, r)| r));
        }
        // Only ids with an instance closed before this drain; one visit per id (an id reused
        // many times between two drains is listed as often), one pass over its instances
        // that keeps their creation order.
        let mut ids = std::mem::replace(&mut self.deferred, std::mem::take(&mut self.closed_now));
        ids.sort_unstable();
        ids.dedup();
        let mut dropped = 0;
        for id in ids {
            // One hash lookup per id (the entry is removed through it when emptied).
            let Entry::Occupied(mut entry) = self.open.entry(id) else {
                continue;
            };
            let insts = entry.get_mut();
            // Instances closed during this drain stay: their ids are in `closed_now`.
            let mut kept = 0;
            for k in 0..insts.len() {
                if insts[k].closed_epoch.is_some_and(|e| e < epoch) {
                    continue;
                }
                insts.swap(kept, k);
                kept += 1;
            }
            for inst in insts.drain(kept..) {
                if let Some((t, _, task)) = inst.first_enter {
                    self.task_open.remove(task, t);
                }
                if inst.lost {
                    dropped += 1;
                } else {
                    out.extend(inst.into_call());
                }
            }
            if insts.is_empty() {
                entry.remove();
            }
        }
        self.dropped_calls += dropped;
    }

    /// Gives back the tables of a burst (a flusher far behind) once they have emptied; call
    /// between complete drains.
    pub(crate) fn shrink(&mut self) {
        if self.open.capacity() > KEEP_CAPACITY.max(8 * self.open.len()) {
            self.open.shrink_to(KEEP_CAPACITY.max(2 * self.open.len()));
        }
        if self.stash.capacity() > KEEP_CAPACITY.max(8 * self.stash.len()) {
            self.stash.shrink_to(KEEP_CAPACITY.max(2 * self.stash.len()));
        }
        for ids in [&mut self.deferred, &mut self.closed_now] {
            if ids.capacity() > KEEP_CAPACITY.max(8 * ids.len()) {
                ids.shrink_to(KEEP_CAPACITY.max(2 * ids.len()));
            }
        }
        self.task_open.shrink();
    }

    /// Calls started and not yet closed (in flight).
    pub(crate) fn in_flight(&self) -> u64 {
        self.open
            .values()
            .flatten()
            .filter(|i| i.first_enter.is_some() && i.closed_epoch.is_none() && !i.tainted)
            .count() as u64
    }

    /// Marks every open instance as never to be reported (the profiler paused while they were
    /// open, so some of their records may be missing; see [`crate::pause`]).
    pub(crate) fn taint_open(&mut self) {
        for inst in self.open.values_mut().flatten() {
            inst.tainted = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_core::{callsite::Callsite, Kind, Level, Metadata};

    struct Cs;
    impl Callsite for Cs {
        fn set_interest(&self, _: tracing_core::Interest) {}
        fn metadata(&self) -> &Metadata<'_> {
            &META
        }
    }
    static CS: Cs = Cs;
    static META: Metadata<'static> = tracing_core::metadata! {
        name: "r",
        target: "t",
        level: Level::INFO,
        fields: &[],
        callsite: &CS,
        kind: Kind::SPAN,
    };

    /// An empty complete drain: what completes calls closed in the previous one.
    fn next_drain(a: &mut Assembler, out: &mut Vec<RawCall>) {
        a.begin_complete_drain();
        a.end_complete_drain(out);
    }

    /// An assembler that knows the test callsite.
    fn assembler() -> Assembler {
        let callsites = Arc::new(Callsites::default());
        callsites.register(&META);
        Assembler::new(callsites)
    }

    fn new(id: u64, t: u64) -> Record {
        Record::new_span(id, t, &META)
    }
    fn enter(id: u64, t: u64) -> Record {
        Record::enter(id, t, 0)
    }
    fn exit(id: u64, t: u64) -> Record {
        Record::plain(EXIT, id, t)
    }
    fn close(id: u64, t: u64) -> Record {
        Record::plain(CLOSE, id, t)
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
        a.begin_complete_drain();
        a.feed(0, &recs, &mut out);
        a.end_complete_drain(&mut out);
        assert!(out.is_empty(), "completed one drain after its close");
        next_drain(&mut a, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(
            (out[0].start, out[0].end, out[0].busy, out[0].polls),
            (10, 55, 25, 5)
        );
    }

    #[test]
    fn cross_lane_call_waits_for_next_complete_drain() {
        let mut a = assembler();
        let mut out = vec![];
        a.begin_complete_drain();
        a.feed(0, &[new(7, 1)], &mut out);
        a.feed(1, &[enter(7, 5), exit(7, 9)], &mut out);
        // Close on a third lane, while a poll's exit on lane 1 is not drained yet.
        a.feed(2, &[close(7, 30)], &mut out);
        a.end_complete_drain(&mut out);
        assert!(out.is_empty());
        a.begin_complete_drain();
        a.feed(1, &[enter(7, 20), exit(7, 25)], &mut out);
        a.end_complete_drain(&mut out);
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
        a.begin_complete_drain();
        // Lane 0 (drained first) has the span's second poll; lane 1 created it and ran the
        // first poll. The stashed second poll is replayed when the NEW arrives, before lane 1's
        // own (earlier) poll is fed.
        a.feed(0, &[enter(6, 10), exit(6, 20)], &mut out);
        a.feed(1, &[new(6, 1), enter(6, 2), exit(6, 5)], &mut out);
        a.feed(0, &[close(6, 21)], &mut out);
        a.end_complete_drain(&mut out);
        next_drain(&mut a, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(
            (out[0].start, out[0].end, out[0].busy, out[0].polls),
            (2, 20, 13, 2)
        );
        assert_eq!((out[0].lane, out[0].last_lane), (1, 0));
    }

    #[test]
    fn the_contiguous_shape_completes_at_once() {
        let mut a = assembler();
        let mut out = vec![];
        a.feed(
            0,
            &[new(3, 1), enter(3, 2), exit(3, 4), close(3, 5)],
            &mut out,
        );
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].start, out[0].end, out[0].busy), (2, 4, 2));
    }

    #[test]
    fn never_entered_span_is_no_call_and_orphans_are_counted() {
        let mut a = assembler();
        let mut out = vec![];
        a.begin_complete_drain();
        a.feed(0, &[new(1, 1), close(1, 2), exit(9, 3)], &mut out);
        a.end_complete_drain(&mut out);
        assert_eq!(
            a.orphans, 0,
            "an unknown record waits one drain for its NEW"
        );
        next_drain(&mut a, &mut out);
        assert!(out.is_empty());
        assert_eq!(a.orphans, 1);
    }

    #[test]
    fn polls_drained_before_their_new_are_replayed() {
        let mut a = assembler();
        let mut out = vec![];
        a.begin_complete_drain();
        // A worker lane is drained before the spawning lane that created the span.
        a.feed(1, &[enter(4, 10), exit(4, 12), enter(4, 20)], &mut out);
        a.feed(0, &[new(4, 5)], &mut out);
        a.feed(1, &[exit(4, 26), close(4, 27)], &mut out);
        a.end_complete_drain(&mut out);
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
        a.begin_complete_drain();
        // Span 5 lost its exit; span 6 is intact.
        a.feed(
            0,
            &[new(5, 1), enter(5, 2), new(6, 3), enter(6, 4), exit(6, 5)],
            &mut out,
        );
        a.feed(0, &[lost(5, false), close(5, 9), close(6, 10)], &mut out);
        a.end_complete_drain(&mut out);
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
        assert_eq!(out.len(), 2);
    }

    #[test]
    fn a_lost_close_ends_the_call_and_drops_it() {
        let mut a = assembler();
        let mut out = vec![];
        a.begin_complete_drain();
        a.feed(
            0,
            &[new(8, 1), enter(8, 2), exit(8, 3), lost(8, true)],
            &mut out,
        );
        a.end_complete_drain(&mut out);
        next_drain(&mut a, &mut out);
        assert!(out.is_empty());
        assert_eq!((a.in_flight(), a.dropped_calls), (0, 1));
    }

    #[test]
    fn a_lost_new_orphans_its_records_as_one_dropped_call() {
        let mut a = assembler();
        let mut out = vec![];
        a.begin_complete_drain();
        // Span 9's NEW was lost; its later records arrive with the marker before them.
        a.feed(
            0,
            &[lost(9, false), enter(9, 2), exit(9, 3), close(9, 4)],
            &mut out,
        );
        a.end_complete_drain(&mut out);
        next_drain(&mut a, &mut out);
        assert!(out.is_empty());
        assert_eq!((a.dropped_calls, a.orphans), (1, 4));
    }

    #[test]
    fn same_lane_records_before_a_new_belong_to_an_earlier_instance() {
        let mut a = assembler();
        let mut out = vec![];
        a.begin_complete_drain();
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
        a.end_complete_drain(&mut out);
        next_drain(&mut a, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].start, out[0].end, out[0].polls), (6, 8, 1));
        assert_eq!((a.dropped_calls, a.orphans), (1, 4));
    }

    #[test]
    fn corrupt_records_are_counted_not_followed() {
        let mut a = assembler();
        let mut out = vec![];
        // A creation record whose callsite word points nowhere the layer registered, and a
        // record with an impossible kind: neither is dereferenced.
        let bogus = Record {
            id: 1,
            tsc: 0,
            aux: 0x88,
        };
        let bad_kind = Record {
            id: 2,
            tsc: 0,
            aux: 7,
        };
        a.feed(0, &[bogus, enter(1, 2), exit(1, 3), close(1, 4)], &mut out);
        a.feed(0, &[bad_kind], &mut out);
        assert!(out.is_empty());
        assert_eq!(a.corrupt, 5);
    }
}

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
//! Lanes are drained one after the other, in bounded batches, so a record that happened before
//! another one on a *different* lane may be drained after it. A **watermark** makes that
//! harmless: the flusher tracks, per lane, a clock tick before which everything that lane
//! recorded has been read (the latest tick read from it, or the tick at which a drain of it
//! started and found nothing left), and the minimum over all lanes is the watermark (see
//! `crate::flush`). Every record of a span instance happened before its `CLOSE`, so:
//! - an instance is completed once the watermark has passed its `CLOSE` ([`Assembler::complete`]);
//!   by then its polls on every other worker thread have been read. How far the flusher is
//!   behind does not matter: what waits here is bounded by the window between the lanes'
//!   read positions, not by the backlog;
//! - a record whose instance has not been created yet (its `NEW` is still in another lane's
//!   buffer) is stashed and replayed as soon as that `NEW` arrives; once the watermark has
//!   passed the record (the `NEW` came before it) without bringing it, it is an orphan and
//!   counted as dropped.
//!
//! A `CLOSE` carries no time (the hot path reads no clock for it), so its tick is the next
//! time its lane shows after it: the tick of the next record of that lane that has one, or,
//! when the lane has nothing more, the moment the flusher finished reading it. Only the
//! commonest shape, a span created, entered once, exited and closed with nothing in between
//! on one lane, is completed at once.

use std::cmp::Reverse;
use std::collections::hash_map::Entry;
use std::collections::BinaryHeap;
use std::sync::Arc;

use crate::fasthash::FastMap;
use crate::lane::record::{Record, AUX, CLOSE, ENTER, EVENT, EXIT, LOST, NEW};
use crate::lines::LineAcc;
use crate::region::{Callsites, RegionTable};
use crate::task::OpenStarts;

/// The tick of a stashed record: its own, or, for one without (`NEW`, `CLOSE`, markers of
/// lost records), now: it was written before the flusher read it.
fn tick_of(r: &Record) -> u64 {
    if r.tsc != 0 {
        r.tsc
    } else {
        crate::clock::Clock::global().raw()
    }
}

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
    /// Tick of its close: every record of the call was written before it.
    pub close: u64,
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
    /// Tick of the close, once seen.
    closed_tick: Option<u64>,
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
            close: self.closed_tick.unwrap_or(end),
        })
    }
}

/// The assembler's state: open instances and the region table.
#[derive(Default)]
pub(crate) struct Assembler {
    open: FastMap<u64, Vec<Inst>>,
    /// Closed instances waiting for the watermark: (close tick, id), earliest first.
    closing: BinaryHeap<Reverse<(u64, u64)>>,
    /// Records that arrived before their instance's `NEW`: (tick, lane, record).
    stash: FastMap<u64, Vec<(u64, u32, Record)>>,
    /// Earliest tick in `stash` (`u64::MAX` when empty).
    stash_min: u64,
    /// Per lane: ids closed on it that wait for the lane's next tick.
    untimed: Vec<Vec<u64>>,
    /// While stashed records are replayed: the tick the current one was stashed with.
    replaying: Option<u64>,
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
            stash_min: u64::MAX,
            ..Assembler::default()
        }
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
                    self.stamp(lane, e.tsc);
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
                        close: end,
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
        if r.tsc != 0 && self.replaying.is_none() {
            self.stamp(lane, r.tsc);
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
                closed_tick: None,
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
            let tick = tick_of(r);
            self.stash_min = self.stash_min.min(tick);
            self.stash
                .entry(r.id)
                .or_insert_with(|| Vec::with_capacity(1))
                .push((tick, lane, *r));
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
                if let (None, Some(tick)) = (inst.closed_lane, self.replaying) {
                    inst.closed_tick = Some(tick);
                    self.closing.push(Reverse((tick, r.id)));
                } else if inst.closed_lane.is_none() {
                    // Its tick is the lane's next one (see the module docs).
                    let l = lane as usize;
                    if self.untimed.len() <= l {
                        self.untimed.resize_with(l + 1, Vec::new);
                    }
                    self.untimed[l].push(r.id);
                }
                inst.closed_lane = Some(lane);
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
        for (tick, lane, r) in now {
            // A stashed record is not where its lane stands now: it shows no time of that lane,
            // and a close among them takes the tick it was stashed with.
            self.replaying = Some(tick);
            self.feed_one(lane, &r, out);
        }
        self.replaying = None;
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

    /// Lane `lane` shows time `tick`: the closes read on it before happened no later.
    #[inline]
    fn stamp(&mut self, lane: u32, tick: u64) {
        let Some(ids) = self.untimed.get_mut(lane as usize) else {
            return;
        };
        if ids.is_empty() {
            return;
        }
        for id in ids.drain(..) {
            let Some(insts) = self.open.get_mut(&id) else {
                continue;
            };
            let waiting = insts
                .iter_mut()
                .rev()
                .find(|i| i.closed_lane == Some(lane) && i.closed_tick.is_none());
            if let Some(inst) = waiting {
                inst.closed_tick = Some(tick);
                self.closing.push(Reverse((tick, id)));
            }
        }
    }

    /// The flusher has read everything lane `lane` published before `tick`.
    pub(crate) fn caught_up(&mut self, lane: u32, tick: u64) {
        self.stamp(lane, tick);
    }

    /// Completes the instances whose close the watermark `wm` has passed (every record of
    /// theirs has been read), and gives up on stashed records it has passed without bringing
    /// their `NEW`. Work: O(log n) per completed instance.
    pub(crate) fn complete(&mut self, wm: u64, out: &mut Vec<RawCall>) {
        if wm >= self.stash_min {
            self.expire_stash(wm);
        }
        let mut dropped = 0;
        while let Some(&Reverse((tick, id))) = self.closing.peek() {
            if tick > wm {
                break;
            }
            self.closing.pop();
            // One hash lookup per id (the entry is removed through it when emptied); an id
            // reused several times is listed as often, later visits find nothing to do.
            let Entry::Occupied(mut entry) = self.open.entry(id) else {
                continue;
            };
            let insts = entry.get_mut();
            // One pass that keeps the creation order of the instances that stay.
            let mut kept = 0;
            for k in 0..insts.len() {
                if insts[k].closed_tick.is_some_and(|t| t <= wm) {
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

    /// Counts the stashed records the watermark `wm` has passed as orphans.
    fn expire_stash(&mut self, wm: u64) {
        let mut expired = Vec::new();
        let mut min = u64::MAX;
        self.stash.retain(|_, v| {
            if v.iter().all(|(t, _, _)| *t > wm) {
                min = v.iter().fold(min, |m, (t, _, _)| m.min(*t));
                return true;
            }
            let (keep, gone): (Vec<_>, Vec<_>) = v.drain(..).partition(|(t, _, _)| *t > wm);
            *v = keep;
            min = v.iter().fold(min, |m, (t, _, _)| m.min(*t));
            expired.push(gone);
            !v.is_empty()
        });
        self.stash_min = min;
        for gone in expired {
            self.orphaned(gone.iter().map(|(_, _, r)| r));
        }
    }

    /// Gives back the tables of a burst (a flusher far behind) once they have emptied; call
    /// between complete drains.
    pub(crate) fn shrink(&mut self) {
        if self.open.capacity() > KEEP_CAPACITY.max(8 * self.open.len()) {
            self.open.shrink_to(KEEP_CAPACITY.max(2 * self.open.len()));
        }
        if self.stash.capacity() > KEEP_CAPACITY.max(8 * self.stash.len()) {
            self.stash
                .shrink_to(KEEP_CAPACITY.max(2 * self.stash.len()));
        }
        if self.closing.capacity() > KEEP_CAPACITY.max(8 * self.closing.len()) {
            self.closing
                .shrink_to(KEEP_CAPACITY.max(2 * self.closing.len()));
        }
        self.task_open.shrink();
    }

    /// Calls started and not yet closed (in flight).
    pub(crate) fn in_flight(&self) -> u64 {
        self.open
            .values()
            .flatten()
            .filter(|i| i.first_enter.is_some() && i.closed_lane.is_none() && !i.tainted)
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

    /// Every lane read to the end, the watermark past everything: completes every closed
    /// call.
    fn next_drain(a: &mut Assembler, out: &mut Vec<RawCall>) {
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

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
//! `ScopeSubscriber` writes no `NEW`: its ids carry their callsite and are never reused, so
//! an instance is made when its span's first record is read, on whatever lane (see
//! [`implicit`]); only its Tokio spawn spans still come with a `NEW`.
//!
//! A `LOST` marker (records the owner could not buffer, see `lane::lost`) is routed like the
//! records it replaces: its instance is dropped whole and counted in `dropped_calls`; one
//! that replaces a `NEW` stands for it (see [`lost`]).
//!
//! Lanes are drained one after the other, in bounded batches, so a record that happened before
//! another one on a *different* lane may be drained after it. A **watermark** makes that
//! harmless: the flusher tracks, per lane, a clock tick before which everything that lane
//! recorded has been read (the latest tick read from it, or the tick at which a drain of it
//! started and found nothing left), and the minimum over all lanes is the watermark (see
//! `crate::flusher::flush`). Every record of a span instance happened before its `CLOSE`, so:
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
//! when the lane has nothing more, the moment the flusher finished reading it. The commonest
//! shapes skip the instance: a span created, entered once, exited and closed with nothing in
//! between on one lane ([`fast`]), and a call of several polls whose records all lie in one
//! batch of its lane ([`pending`]); both are held until the watermark passes their close.
//!
//! A lane's `TASK` records say which Tokio task its following enters run in; the assembler
//! keeps that per lane, so an enter record needs no task id of its own. Instances live in
//! [`insts`] (one 56-byte slab entry each, no allocation per call, found by
//! span id through an [`crate::flusher::id_index::IdIndex`]).
//!
//! With Tokio's own instrumentation (`--cfg tokio_unstable`), a task's spawn comes as three
//! records (its `NEW`, a wake stamp, its site): its instance is a *task span*, whose polls and
//! wakes (routed like any record of the span, by span id and stream order) go to the task's
//! timeline in [`crate::flusher::sched`] rather than into polls and calls; so do the starts and
//! exits of the calls inside tasks. A wake that finds no instance of its id once the
//! watermark has passed it belongs to a task that has ended: counted, and ignored.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

use crate::fasthash::FastMap;
use crate::flusher::lines::LineAcc;
use crate::flusher::sched::Sched;
use crate::flusher::task::Tasks;
use crate::recording::lane::record::{Record, AUX, ENTER, EVENT, EXIT, LOST, NEW, TASK};
use crate::recording::region::{Callsites, RegionTable};

mod fast;
mod implicit;
mod insts;
mod lanes;
mod lost;
mod open;
mod pending;
mod stash;
mod tokio;
pub(crate) use implicit::Implicit;
use insts::{Insts, EXTRA, NONE, NOT_ENTERED, TAINTED, TASK_SPAN};
use lanes::{Close, LaneState, Lanes, OpenPoll};

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
    /// Sink payloads and line-timing checkpoints, when the call has any (boxed: most calls
    /// have none, and a call moves twice on its way to the spool).
    pub extra: Option<Box<insts::Extra>>,
    /// Tick of its close: every record of the call was written before it.
    pub close: u64,
    /// Scheduled time (ticks) of its task's suspensions while it was open ([`NO_SCHED`]: it
    /// ran in no task with a timeline, see [`crate::flusher::sched`]).
    pub sched: u64,
}

/// [`RawCall::sched`] of a call outside any task with a timeline.
pub(crate) const NO_SCHED: u64 = u64::MAX;

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

/// A record that arrived before its instance's `NEW`, with where and when it was read.
#[derive(Clone, Copy, Debug)]
struct Stashed {
    tick: u64,
    /// The latest tick its lane showed before it (a lost marker happened after it).
    after: u64,
    lane: u32,
    /// The lane's task when it was read (what an enter runs in).
    task: u64,
    rec: Record,
}

/// The assembler's state: open instances and the region table.
pub(crate) struct Assembler {
    insts: Insts,
    /// Per lane: its task, polls in progress and closes (see [`lanes`]).
    lanes: Lanes,
    /// Closes of replayed (stashed) records, whose ticks are not in their lane's order:
    /// earliest first.
    replayed: BinaryHeap<Reverse<Close>>,
    /// The closes a `complete` found due (kept for its capacity).
    due: Vec<Close>,
    /// The held one-step calls a `complete` found due (kept for its capacity).
    held_due: Vec<(u64, lanes::Held)>,
    /// One-step calls held on all lanes (see [`fast`]).
    held: usize,
    /// Calls of the lane being fed with several polls and no close yet (see [`pending`]).
    pending: Vec<pending::Pending>,
    /// Whether the pending path pays off here (see [`pending`]).
    outcomes: pending::Outcomes,
    /// Records that arrived before their instance's `NEW`, by span id.
    stash: FastMap<u64, Vec<Stashed>>,
    /// At most the earliest, over the ids in `stash`, of the newest tick of each (`u64::MAX`
    /// when empty): no id expires before the watermark reaches it.
    stash_min: u64,
    /// While stashed records are replayed: the tick the current one was stashed with.
    replaying: Option<u64>,
    /// Records that belonged to no known span instance.
    pub(crate) orphans: u64,
    /// Records rejected as corrupt (unknown kind, or a callsite the layer never registered).
    pub(crate) corrupt: u64,
    /// Calls dropped whole because a record of theirs was lost (a `LOST` marker), or whose
    /// close found no instance (see `stash`).
    pub(crate) dropped_calls: u64,
    /// The profiler has paused: a close may be of a span created meanwhile, not recorded.
    paused: bool,
    /// Whether to keep every poll in `polls`.
    pub(crate) keep_polls: bool,
    /// Whether the layer writes `EVENT` records (line timing); if not, one is corrupt.
    pub(crate) line_timing: bool,
    /// Polls completed since the caller last took them (when `keep_polls`).
    pub(crate) polls: Vec<RawPoll>,
    pub(crate) regions: RegionTable,
    /// The Tokio tasks: their open calls (kept here, at every first enter and completion),
    /// indices and rows (see [`crate::flusher::task`]).
    pub(crate) tasks: Tasks,
    /// Tokio tasks' timelines: idle and scheduled time (see [`crate::flusher::sched`]).
    pub(crate) sched: Sched,
    /// Whether a task span is also a call (`Builder::task_regions`).
    pub(crate) task_regions: bool,
    /// `ScopeSubscriber`'s callsites: instances made at their span's first record (see
    /// [`implicit`]); `None` for `ScopeLayer`, whose `NEW` records make them.
    pub(crate) implicit: Option<Implicit>,
}

impl Assembler {
    /// An assembler that accepts the callsites registered in `callsites`.
    pub(crate) fn new(callsites: Arc<Callsites>) -> Assembler {
        Assembler {
            insts: Insts::new(),
            lanes: Lanes::default(),
            replayed: BinaryHeap::new(),
            due: Vec::new(),
            held_due: Vec::new(),
            held: 0,
            pending: Vec::with_capacity(pending::PENDING_MAX),
            outcomes: pending::Outcomes::default(),
            stash: FastMap::default(),
            stash_min: u64::MAX,
            replaying: None,
            orphans: 0,
            corrupt: 0,
            dropped_calls: 0,
            paused: false,
            keep_polls: false,
            line_timing: false,
            polls: Vec::new(),
            regions: RegionTable::new(callsites),
            tasks: Tasks::default(),
            sched: Sched::default(),
            task_regions: false,
            implicit: None,
        }
    }

    /// Feeds one lane's records, in that lane's program order.
    pub(crate) fn feed(&mut self, lane: u32, records: &[Record], out: &mut Vec<RawCall>) {
        let mut ls = self.lanes.take(lane);
        let mut i = 0;
        while i < records.len() {
            let taken = self.one_step_at(lane, &mut ls, &records[i..], out);
            if taken > 0 {
                i += taken;
                continue;
            }
            let r = &records[i];
            if let Some((tick, site)) = tokio::spawn_at(&records[i..]) {
                self.spawn(lane, &mut ls, r, tick, site, out);
                i += 3;
                continue;
            }
            match r.kind() {
                TASK if !r.is_wake() => ls.task = r.id,
                EVENT => {
                    // A checkpoint and its site slot, always together.
                    let site = records.get(i + 1).filter(|s| s.is_event_site());
                    match site {
                        Some(site) if self.line_timing && !r.is_event_site() => {
                            self.checkpoint(lane, &mut ls, r, site.id as usize);
                            i += 1;
                        }
                        _ => self.corrupt += 1,
                    }
                }
                _ => {
                    let task = ls.task;
                    self.feed_one(lane, &mut ls, task, r, out);
                }
            }
            i += 1;
        }
        // No pending call outlives its lane's batch (see `pending`).
        if !self.pending.is_empty() {
            self.promote_all_pending(lane);
        }
        self.lanes.put(lane, ls);
    }

    /// The instance record `r` of lane `lane` belongs to: the newest of its id, unless that
    /// one was closed on this very lane (then a newer one's `NEW` has not arrived yet).
    #[inline]
    fn route(&mut self, lane: u32, r: &Record) -> Option<u32> {
        let k = self.insts.newest(r.id)?;
        (self.insts.get(k).closed_lane != lane).then_some(k)
    }

    /// A line-timing checkpoint at `r.ticks()` of event callsite `site`.
    fn checkpoint(&mut self, lane: u32, ls: &mut LaneState, r: &Record, site: usize) {
        if self.replaying.is_none() {
            ls.stamp(r.ticks());
        }
        // A checkpoint of a span this layer does not record (filtered out) is not ours.
        let Some(k) = self.route(lane, r) else {
            return;
        };
        if let Some(start) = ls.poll_of(k).map(|p| p.start) {
            LineAcc::event(&mut self.insts.extra(k).lines, start, r.ticks(), site);
        }
    }

    fn feed_one(
        &mut self,
        lane: u32,
        ls: &mut LaneState,
        task: u64,
        r: &Record,
        out: &mut Vec<RawCall>,
    ) {
        let ticks = r.ticks();
        if ticks != 0 && self.replaying.is_none() {
            ls.stamp(ticks);
        }
        // A task completed with the lane's previous record: only this record may be its wake.
        let completed = if ls.completed != 0 {
            std::mem::take(&mut ls.completed)
        } else {
            0
        };
        if r.kind() == NEW {
            let Some(region) = self.regions.region_of(r.callsite_addr()) else {
                self.corrupt += 1;
                return;
            };
            // The id now means this instance (see `insts`): the routing below finds it at
            // once however many older ones wait for their completion.
            self.insts.create(r.id, region);
            if let Some(stashed) = self.stash.remove(&r.id) {
                self.replay(lane, stashed, out);
            }
            return;
        }
        if r.kind() == LOST && r.lost_site() != 0 {
            return self.lost_creation(lane, ls, r, out);
        }
        // An id is reused only after its span closed, so a record belongs to the instance of
        // its id created last (what `replay` keeps true for records that wait for their NEW).
        let Some(k) = self.route_or_create(lane, r) else {
            self.stash_record(lane, task, ls.last, r);
            return;
        };
        match r.kind() {
            ENTER => self.enter(lane, ls, task, k, ticks),
            EXIT => self.exit(lane, ls, k, ticks),
            TASK if self.insts.get(k).flags & TASK_SPAN != 0 => {
                let by = self.waker(ls, completed);
                self.sched.wake_by(k, ticks, lane, by)
            }
            // A wake routed to a span that is no task: its task's id is another span's now.
            TASK => self.sched.wake_of_ended_task(),
            AUX => self.insts.extra(k).aux.push(r.payload()),
            LOST => self.lost_in_call(lane, ls, k, r),
            _ => self.close(lane, ls, k, r),
        }
    }

    fn enter(&mut self, lane: u32, ls: &mut LaneState, task: u64, k: u32, tick: u64) {
        // An instance with no poll in progress anywhere needs no search (recursion pushes a
        // new instance per level: O(1) each, not O(depth)).
        let task_span = self.insts.get(k).flags & TASK_SPAN != 0;
        let nested = self.insts.get(k).open > 0;
        let polls = &mut ls.polls;
        let found = if nested {
            polls.iter_mut().rev().find(|p| p.inst == k)
        } else {
            None
        };
        match found {
            Some(p) => p.depth += 1,
            None => {
                polls.push(OpenPoll {
                    inst: k,
                    depth: 1,
                    start: tick,
                    task,
                });
                let inst = self.insts.get_mut(k);
                inst.open = inst.open.saturating_add(1);
                if task_span {
                    self.sched.poll_start(k, tick, lane);
                }
            }
        }
        // The earliest enter starts the call (records of other lanes may be replayed before
        // this lane's earlier ones).
        let was = self.insts.get(k).first;
        if was == NOT_ENTERED || tick < was {
            let old = self.insts.enter(k, tick, lane, task);
            if task_span {
                self.sched.link(k, task);
                if !self.task_regions {
                    return; // a task's span is no call of the task
                }
            } else if self.sched.active && task != 0 {
                self.sched.call_start(task, k, tick);
            }
            if let Some((t, s)) = old {
                self.tasks.open_remove(t, s);
            }
            self.tasks.open_insert(task, tick);
        }
    }

    fn exit(&mut self, lane: u32, ls: &mut LaneState, k: u32, tick: u64) {
        let polls = &mut ls.polls;
        if let Some(at) = polls.iter().rposition(|p| p.inst == k) {
            let p = &mut polls[at];
            p.depth -= 1;
            if p.depth == 0 {
                // The two fields read in place, not the entry moved out: its enter, usually a
                // few records back, was stored moments ago, and a 16-byte load across those
                // stores is not forwarded (it stalled ~30 % of this function's time).
                let (start, task) = (p.start, p.task);
                // Usually the innermost poll, the last one.
                if at + 1 == polls.len() {
                    polls.truncate(at);
                } else {
                    polls.remove(at);
                }
                let inst = self.insts.get_mut(k);
                if inst.open != u8::MAX {
                    inst.open -= 1;
                }
                inst.polls += 1;
                let region = inst.region;
                let task_span = inst.flags & TASK_SPAN != 0;
                self.insts.add_busy(k, tick.saturating_sub(start));
                if task_span {
                    // Its polls are the task's, written from its timeline.
                    self.sched.poll_end(k, tick);
                } else {
                    if self.sched.active && task != 0 {
                        self.sched.call_exit(task, k, tick);
                    }
                    self.keep_poll(region, start, tick.max(start), lane, task);
                }
            }
        }
        self.insts.exit(k, tick, lane);
    }

    /// A `CLOSE`, or a marker of a lost `CLOSE`, which ends the call as well.
    fn close(&mut self, lane: u32, ls: &mut LaneState, k: u32, r: &Record) {
        let inst = self.insts.get_mut(k);
        if inst.closed_lane == NONE && inst.flags & TASK_SPAN != 0 {
            self.task_closing(k);
            if self.replaying.is_none() {
                ls.completed = self.sched.tokio_of(k);
            }
        }
        let inst = self.insts.get_mut(k);
        if inst.closed_lane == NONE {
            match self.replaying {
                Some(tick) => self.replayed.push(Reverse((tick, k, r.id))),
                // Its tick is the lane's next one (see the module docs).
                None => ls.untimed.push((k, r.id)),
            }
        }
        inst.closed_lane = lane;
    }

    /// The flusher has read everything lane `lane` published before `tick`.
    pub(crate) fn caught_up(&mut self, lane: u32, tick: u64) {
        let mut ls = self.lanes.take(lane);
        ls.stamp(tick);
        self.lanes.put(lane, ls);
    }

    /// Lane `lane`'s thread exited and everything it recorded was read: its state goes once
    /// its last close completed.
    pub(crate) fn lane_gone(&mut self, lane: u32) {
        self.lanes.gone(lane);
    }

    /// Completes the instances whose close the watermark `wm` has passed (every record of
    /// theirs has been read), and gives up on stashed records it has passed without bringing
    /// their `NEW`. Work: O(log n) per completed instance.
    pub(crate) fn complete(&mut self, wm: u64, out: &mut Vec<RawCall>) {
        // Held one-step calls first: records of theirs from other lanes may be stashed, and
        // would expire below.
        self.release_due_held(wm, out);
        let mut due = std::mem::take(&mut self.due);
        self.lanes.due(wm, &mut due);
        if wm >= self.stash_min {
            self.expire_stash(wm);
        }
        while let Some(&Reverse(c)) = self.replayed.peek() {
            if c.0 > wm {
                break;
            }
            self.replayed.pop();
            due.push(c);
        }
        self.unpolled_tasks_end(&due);
        // Every event of the tasks up to `wm` first: the calls completed below have gathered
        // their scheduled time, and the tasks closed below have run their last poll.
        self.sched.settle(wm);
        for (tick, k, id) in due.drain(..) {
            self.finish(tick, k, id, out);
        }
        self.due = due;
    }

    /// Completes instance `k` of span `id`, closed at `tick`.
    fn finish(&mut self, tick: u64, k: u32, id: u64, out: &mut Vec<RawCall>) {
        let (last_exit, busy) = (self.insts.last_exit(k), self.insts.busy(k));
        let (inst, extra) = self.insts.remove(id, k);
        if inst.open > 0 {
            // Polls it never ended (their exits were lost): forget them.
            self.lanes.forget_polls(k);
        }
        let task_span = inst.flags & TASK_SPAN != 0;
        let sched = if task_span {
            let sched = self.sched.task_closed(k);
            if !self.task_regions {
                return;
            }
            sched.unwrap_or(NO_SCHED)
        } else if self.sched.active {
            self.sched.take_call(k).unwrap_or(NO_SCHED)
        } else {
            NO_SCHED
        };
        if inst.first != NOT_ENTERED {
            self.tasks.open_remove(inst.task, inst.first);
        }
        if inst.flags & insts::LOST != 0 {
            // A span never entered is no call, lost or not (`polls`: see `lost_in_call`).
            if inst.first != NOT_ENTERED || inst.polls > 0 {
                self.dropped_calls += 1;
            }
            return;
        }
        if inst.flags & TAINTED != 0 || inst.first == NOT_ENTERED {
            return;
        }
        let end = last_exit.max(inst.first);
        let extra = extra.filter(|_| inst.flags & EXTRA != 0).map(Box::new);
        out.push(RawCall {
            region: inst.region,
            start: inst.first,
            end,
            busy: busy.min(end - inst.first),
            lane: inst.first_lane,
            task: inst.task,
            polls: inst.polls,
            last_lane: inst.last_lane,
            extra,
            close: tick,
            sched,
        });
    }

    /// Gives back the tables of a burst (a flusher far behind) once they have emptied; call
    /// between rounds.
    pub(crate) fn shrink(&mut self) {
        self.insts.shrink();
        self.sched.shrink();
        if self.stash.capacity() > KEEP_CAPACITY.max(8 * self.stash.len()) {
            self.stash
                .shrink_to(KEEP_CAPACITY.max(2 * self.stash.len()));
        }
        if self.replayed.capacity() > KEEP_CAPACITY.max(8 * self.replayed.len()) {
            self.replayed
                .shrink_to(KEEP_CAPACITY.max(2 * self.replayed.len()));
        }
        if self.due.capacity() > KEEP_CAPACITY {
            self.due = Vec::new();
        }
        if self.held_due.capacity() > KEEP_CAPACITY {
            self.held_due = Vec::new();
        }
    }

    /// Calls started and not yet closed (in flight).
    #[cfg(test)]
    pub(crate) fn in_flight(&self) -> u64 {
        self.in_flight_except(|_, _| false)
    }

    /// Calls started and not yet closed (in flight); calls `hidden(region, task_span)` says
    /// are not written are not counted (`task_span`: a Tokio task's span), nor are task spans
    /// that are no calls.
    pub(crate) fn in_flight_except(&self, hidden: impl Fn(u32, bool) -> bool) -> u64 {
        self.insts
            .iter()
            .filter(|i| i.closed_lane == NONE && i.flags & TAINTED == 0)
            // Entered: an enter read, or a lost one (see `lost_in_call`).
            .filter(|i| i.first != NOT_ENTERED || i.polls > 0)
            .filter(|i| self.task_regions || i.flags & TASK_SPAN == 0)
            .filter(|i| !hidden(i.region, i.flags & TASK_SPAN != 0))
            .count() as u64
    }

    /// Marks every open instance as never to be reported (the profiler paused while they were
    /// open, so some of their records may be missing; see [`crate::recording::pause`]).
    pub(crate) fn taint_open(&mut self) {
        self.paused = true;
        for inst in self.insts.iter_mut() {
            inst.flags |= TAINTED;
        }
    }

    /// Instances open now (created and not yet completed).
    #[cfg(test)]
    pub(crate) fn open_instances(&self) -> usize {
        self.insts.live()
    }
}

#[cfg(test)]
mod model_lost_tests;
#[cfg(test)]
mod model_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tokio_tests;

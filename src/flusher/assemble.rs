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
//! when the lane has nothing more, the moment the flusher finished reading it. Only the
//! commonest shape, a span created, entered once, exited and closed with nothing in between
//! on one lane, is completed at once.

use std::cmp::Reverse;
use std::collections::hash_map::Entry;
use std::collections::BinaryHeap;
use std::sync::Arc;

use crate::fasthash::FastMap;
use crate::flusher::lines::LineAcc;
use crate::flusher::region::{Callsites, RegionTable};
use crate::flusher::task::OpenStarts;
use crate::recording::lane::record::{Record, AUX, CLOSE, ENTER, EVENT, EXIT, LOST, NEW};

/// The tick of a stashed record: its own, or, for one without (`NEW`, `CLOSE`, markers of
/// lost records), now: it was written before the flusher read it.
fn tick_of(r: &Record) -> u64 {
    if r.tsc != 0 {
        r.tsc
    } else {
        crate::recording::clock::Clock::global().raw()
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

/// The earliest enter of an instance: where and when its call starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FirstEnter {
    tsc: u64,
    lane: u32,
    /// Tokio task id at that enter (0 = none).
    task: u64,
}

/// A poll in progress on one lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct OpenPoll {
    lane: u32,
    /// Nested enters of the span on this lane not yet exited (the poll ends at 0).
    depth: u32,
    start: u64,
    /// Tokio task id at the enter (0 = none).
    task: u64,
}

/// A span instance still being assembled.
#[derive(Clone, Debug)]
struct Inst {
    region: u32,
    first_enter: Option<FirstEnter>,
    last_exit: u64,
    /// Polls in progress, one per lane. Per lane, because a lane's records may be replayed
    /// out of order with another lane's (see the module docs).
    open_polls: Vec<OpenPoll>,
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
        let FirstEnter {
            tsc: start,
            lane,
            task,
        } = self.first_enter?;
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
    /// At most the earliest, over the ids in `stash`, of the newest tick of each (`u64::MAX`
    /// when empty): no id expires before the watermark reaches it.
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
                match inst.open_polls.iter_mut().find(|p| p.lane == lane) {
                    Some(p) => p.depth += 1,
                    None => {
                        inst.open_polls.reserve_exact(1);
                        inst.open_polls.push(OpenPoll {
                            lane,
                            depth: 1,
                            start: r.tsc,
                            task: r.task(),
                        });
                    }
                }
                // The earliest enter starts the call (records of other lanes may be replayed
                // before this lane's earlier ones).
                if inst.first_enter.is_none_or(|f| r.tsc < f.tsc) {
                    if let Some(f) = inst.first_enter {
                        self.task_open.remove(f.task, f.tsc);
                    }
                    self.task_open.insert(r.task(), r.tsc);
                    inst.first_enter = Some(FirstEnter {
                        tsc: r.tsc,
                        lane,
                        task: r.task(),
                    });
                }
            }
            EXIT => {
                if let Some(i) = inst.open_polls.iter().position(|p| p.lane == lane) {
                    let p = &mut inst.open_polls[i];
                    p.depth -= 1;
                    if p.depth == 0 {
                        let OpenPoll { start, task, .. } = inst.open_polls.swap_remove(i);
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
                if let Some(p) = inst.open_polls.iter().find(|p| p.lane == lane) {
                    LineAcc::event(&mut inst.lines, p.start, r.tsc, r.site());
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

    /// Counts records that belong to no instance (one id's). When a marker of a lost record
    /// is among them, every span they belong to lost its `NEW` and is one dropped call: as
    /// many as they hold closes (or markers of lost closes), at least one. (Their order is no
    /// guide: they come from several lanes.)
    fn orphaned<'a>(&mut self, records: impl Iterator<Item = &'a Record>) {
        let (mut lost, mut closes) = (false, 0u64);
        for r in records {
            self.orphans += 1;
            lost |= r.kind() == LOST;
            closes += u64::from(r.kind() == CLOSE || (r.kind() == LOST && r.payload() == 1));
        }
        if lost {
            self.dropped_calls += closes.max(1);
        }
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
                if let Some(f) = inst.first_enter {
                    self.task_open.remove(f.task, f.tsc);
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

    /// Counts the stashed records of the ids whose records the watermark `wm` has all passed
    /// as orphans.
    fn expire_stash(&mut self, wm: u64) {
        // An id's records go together, once the watermark has passed the newest of them: the
        // records of one span are counted as one dropped call, not one per batch.
        let mut expired = Vec::new();
        let mut min = u64::MAX;
        self.stash.retain(|_, v| {
            let newest = v.iter().map(|(t, _, _)| *t).max().unwrap_or(0);
            if newest > wm {
                min = min.min(newest);
                return true;
            }
            expired.push(std::mem::take(v));
            false
        });
        self.stash_min = min;
        for gone in expired {
            self.orphaned(gone.iter().map(|(_, _, r)| r));
        }
    }

    /// Gives back the tables of a burst (a flusher far behind) once they have emptied; call
    /// between rounds.
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
    /// open, so some of their records may be missing; see [`crate::recording::pause`]).
    pub(crate) fn taint_open(&mut self) {
        for inst in self.open.values_mut().flatten() {
            inst.tainted = true;
        }
    }
}

#[cfg(test)]
mod tests;

//! Calls of several polls folded within one lane's batch: the async path's one step.
//!
//! An `#[instrument]`ed async fn that awaits is a call of several polls: its first enter
//! (flagged *fresh* under `ScopeSubscriber`; after its `NEW` under `ScopeLayer`) and exit,
//! more enter/exit pairs, then its close, usually all on the worker that polled it and, for a
//! short call, in one batch of that worker's records. The general path makes an instance for
//! it (an id-index insert), pushes and pops a poll entry per poll, queues its close for the
//! lane's next tick and then for the watermark, and removes the instance again: about ten
//! steps per call, each a lookup or a queue.
//!
//! Here, while the flusher reads one lane's batch ([`Assembler::feed`]), such a call is a
//! *pending* entry of a few words: its first poll starts it, each later enter/exit pair of its
//! span adds a poll, and its close makes it a held call (see [`super::fast`]), confirmed at the
//! watermark like a sync span's: records of its span that another lane wrote meanwhile join it
//! there. Anything else of its span on this lane (a nested enter, a checkpoint, a sink
//! payload, a lost marker) first *promotes* it to an instance, and so does the batch's end:
//! a pending entry never outlives the batch, so no other lane's record can look for its span
//! while it is pending, and the general path sees exactly what it would have built itself.
//!
//! At most [`PENDING_MAX`] wait at once (a linear search from the newest is cheaper than a
//! hash at that size); beyond it the oldest is promoted. Tokio's own instrumentation
//! (`tokio_unstable`) keeps the general path: a task's timeline sees every enter and exit.
//!
//! **Adaptive.** A server with hundreds of tasks in flight per worker polls each task again
//! only after the others: its calls' later polls come batches later, so nearly every pending
//! call would be promoted, and the pending entry and its searches were cost on top of the
//! general path (callgrind, `examples/shape_instructions.rs ... request`: +560 to +1 000
//! instructions per request before this rule). So the path watches its outcomes: of every
//! [`PROBE`] pending calls, if more were promoted than held, the next [`OFF`] candidates take
//! the general path at once (a counter's decrement each), and then it probes again.

use super::lanes::{Held, LaneState};
use super::{Assembler, RawCall};
use crate::recording::lane::record::{Record, ENTER, EXIT};

/// Pending calls at most at once (see the module docs).
pub(super) const PENDING_MAX: usize = 16;
/// Pending calls whose outcomes decide whether the path stays on.
pub(super) const PROBE: u32 = 256;
/// Candidate calls that take the general path after a probe that promoted most.
pub(super) const OFF: u32 = 8192;

/// The pending path's outcomes (see the module docs: adaptive).
#[derive(Debug, Default)]
pub(super) struct Outcomes {
    held: u32,
    promoted: u32,
    /// Candidates left to send to the general path (0: the path is on).
    pub(super) off: u32,
}

impl Outcomes {
    /// Whether a candidate takes the general path (the path is off for a while).
    #[inline(always)]
    fn skip(&mut self) -> bool {
        if self.off == 0 {
            return false;
        }
        self.off -= 1;
        true
    }

    #[inline]
    fn decide(&mut self) {
        if self.held + self.promoted >= PROBE {
            if self.promoted > self.held {
                self.off = OFF;
            }
            (self.held, self.promoted) = (0, 0);
        }
    }
}

/// A call of the batch's lane that has started and is not closed, with no poll in progress.
#[derive(Clone, Copy, Debug)]
pub(super) struct Pending {
    id: u64,
    start: u64,
    /// Its latest exit.
    end: u64,
    busy: u64,
    /// Tokio task of its first poll.
    task: u64,
    region: u32,
    polls: u32,
}

impl Assembler {
    /// A `ScopeSubscriber` call that starts at `records[0]` (a fresh enter) with a whole
    /// first poll and no close right after it (that is the sync path's): how many records it
    /// took (0: none).
    #[inline(always)]
    pub(super) fn pending_fresh_at(
        &mut self,
        lane: u32,
        ls: &mut LaneState,
        records: &[Record],
    ) -> usize {
        let [e, x, ..] = records else {
            return 0;
        };
        if self.implicit.is_none()
            || self.sched.active
            || x.kind() != EXIT
            || e.id != x.id
            || self.outcomes.skip()
        {
            return 0;
        }
        // The fresh enter is its span's first record anywhere, unless another lane's records
        // of it were read first (they made an instance).
        if self.insts.live() > 0 && self.insts.newest(e.id).is_some() {
            return 0;
        }
        match self.implicit_region(e.id) {
            Some(region) => self.pend(lane, ls, region, e, x, 2),
            None => 0,
        }
    }

    /// A `ScopeLayer` call that starts at `records[0]` (a `NEW`) with a whole first poll and
    /// no close right after it: how many records it took (0: none).
    #[inline(always)]
    pub(super) fn pending_new_at(
        &mut self,
        lane: u32,
        ls: &mut LaneState,
        records: &[Record],
    ) -> usize {
        let [n, e, x, ..] = records else {
            return 0;
        };
        if self.sched.active
            || e.kind() != ENTER
            || x.kind() != EXIT
            || n.id != e.id
            || e.id != x.id
            || self.outcomes.skip()
        {
            return 0;
        }
        // Records of this span that other lanes wrote and were read first wait for this `NEW`
        // in the stash: the general path replays them.
        if !self.stash.is_empty() && self.stash.contains_key(&n.id) {
            return 0;
        }
        match self.regions.region_of(n.callsite_addr()) {
            Some(region) => self.pend(lane, ls, region, e, x, 3),
            None => 0,
        }
    }

    /// Starts a pending call of `region` with the poll of enter `e` and exit `x`; returns
    /// `taken`.
    #[inline]
    fn pend(
        &mut self,
        lane: u32,
        ls: &mut LaneState,
        region: u32,
        e: &Record,
        x: &Record,
        taken: usize,
    ) -> usize {
        if self.pending.len() == PENDING_MAX {
            let oldest = self.pending.remove(0);
            self.promote(lane, oldest);
        }
        let (start, end) = (e.ticks(), x.ticks().max(e.ticks()));
        ls.stamp(start);
        let task = ls.task;
        self.keep_poll(region, start, end, lane, task);
        self.pending.push(Pending {
            id: e.id,
            start,
            end,
            busy: end - start,
            task,
            region,
            polls: 1,
        });
        taken
    }

    /// A whole poll (an enter and its exit at `records[0]`) of a pending call, added to it: 2,
    /// or 0 when it is not one.
    #[inline(always)]
    pub(super) fn pending_poll_at(
        &mut self,
        lane: u32,
        ls: &mut LaneState,
        records: &[Record],
    ) -> usize {
        let [r, x, ..] = records else {
            return 0;
        };
        if x.kind() != EXIT || x.id != r.id {
            return 0;
        }
        let Some(at) = self.pending_of(r.id) else {
            return 0;
        };
        let (start, end) = (r.ticks(), x.ticks().max(r.ticks()));
        ls.stamp(start);
        let p = &mut self.pending[at];
        // Later on this lane than its last poll's exit: no nesting, no overlap.
        p.polls += 1;
        p.busy += end - start;
        p.end = p.end.max(end);
        let (region, task) = (p.region, ls.task);
        self.keep_poll(region, start, end, lane, task);
        2
    }

    /// The close `r` of a pending call, which holds the call: 1, or 0 when it is not one.
    #[inline(always)]
    pub(super) fn pending_close_at(
        &mut self,
        lane: u32,
        ls: &mut LaneState,
        r: &Record,
        out: &mut Vec<RawCall>,
    ) -> usize {
        let Some(at) = self.pending_of(r.id) else {
            return 0;
        };
        let p = self.pending.remove(at);
        self.outcomes.held += 1;
        self.outcomes.decide();
        self.hold_call(
            ls,
            Held {
                id: p.id,
                start: p.start,
                end: p.end,
                busy: p.busy,
                task: p.task,
                close: 0,
                region: p.region,
                lane,
                polls: p.polls,
            },
            out,
        );
        1
    }

    /// Where span `id`'s pending call is, if it has one (newest first: the call polled last
    /// is the likeliest).
    #[inline]
    fn pending_of(&self, id: u64) -> Option<usize> {
        self.pending.iter().rposition(|p| p.id == id)
    }

    /// Promotes span `id`'s pending call, if it has one, before the general path reads a
    /// record of it.
    #[inline]
    pub(super) fn promote_pending_of(&mut self, lane: u32, id: u64) {
        if self.pending.is_empty() {
            return;
        }
        if let Some(at) = self.pending_of(id) {
            let p = self.pending.remove(at);
            self.promote(lane, p);
        }
    }

    /// Promotes every pending call: the batch of lane `lane` ends.
    pub(super) fn promote_all_pending(&mut self, lane: u32) {
        let mut pending = std::mem::take(&mut self.pending);
        for &p in &pending {
            self.promote(lane, p);
        }
        pending.clear();
        self.pending = pending; // its capacity
    }

    /// Pending call `p` of lane `lane` as the instance the general path would have made of
    /// its records: created, first entered at its start, with its polls, busy time and
    /// latest exit, no poll in progress.
    fn promote(&mut self, lane: u32, p: Pending) {
        self.outcomes.promoted += 1;
        self.outcomes.decide();
        let k = self.insts.create(p.id, p.region);
        self.insts.enter(k, p.start, lane, p.task);
        self.tasks.open_insert(p.task, p.start);
        self.insts.add_poll(k, p.busy, p.end, lane);
        self.insts.get_mut(k).polls = p.polls;
    }
}

#[cfg(test)]
mod tests;

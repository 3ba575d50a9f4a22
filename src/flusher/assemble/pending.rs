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

use super::lanes::{Held, LaneState};
use super::{Assembler, RawCall, RawPoll};
use crate::recording::lane::record::{Record, CLOSE, ENTER, EXIT, NEW};

/// Pending calls at most at once (see the module docs).
pub(super) const PENDING_MAX: usize = 32;

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
    /// A call that starts at `records[0]` with a whole first poll and no close right after it
    /// (that is [`sync_call_at`](Self::sync_call_at)'s): a fresh enter and its exit
    /// (`ScopeSubscriber`), or a `NEW`, enter and exit (`ScopeLayer`), of a span with nothing
    /// else known. How many records it took (0: none).
    #[inline]
    pub(super) fn pending_start_at(
        &mut self,
        lane: u32,
        ls: &mut LaneState,
        records: &[Record],
    ) -> usize {
        if self.sched.active {
            return 0;
        }
        let (taken, region, e, x) = if self.implicit.is_some() {
            let [e, x, ..] = records else {
                return 0;
            };
            if !(e.is_fresh() && x.kind() == EXIT && e.id == x.id) {
                return 0;
            }
            // The fresh enter is its span's first record anywhere, unless another lane's
            // records of it were read first (they made an instance).
            if self.insts.live() > 0 && self.insts.newest(e.id).is_some() {
                return 0;
            }
            match self.implicit_region(e.id) {
                Some(region) => (2, region, e, x),
                None => return 0,
            }
        } else {
            let [n, e, x, ..] = records else {
                return 0;
            };
            if !(n.kind() == NEW
                && e.kind() == ENTER
                && x.kind() == EXIT
                && n.id == e.id
                && e.id == x.id)
            {
                return 0;
            }
            // Records of this span that other lanes wrote and were read first wait for this
            // `NEW` in the stash: the general path replays them.
            if !self.stash.is_empty() && self.stash.contains_key(&n.id) {
                return 0;
            }
            match self.regions.region_of(n.callsite_addr()) {
                Some(region) => (3, region, e, x),
                None => return 0,
            }
        };
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

    /// A record of a pending call at `records[0]`: a whole poll (its enter and exit) added to
    /// it, or its close, which holds it. How many records it took (0: none; a record of a
    /// pending call that is neither is the caller's to promote it for).
    #[inline]
    pub(super) fn pending_at(
        &mut self,
        lane: u32,
        ls: &mut LaneState,
        records: &[Record],
        out: &mut Vec<RawCall>,
    ) -> usize {
        let Some(r) = records.first() else {
            return 0;
        };
        match r.kind() {
            ENTER => {
                let Some(x) = records.get(1) else {
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
            CLOSE => {
                let Some(at) = self.pending_of(r.id) else {
                    return 0;
                };
                let p = self.pending.remove(at);
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
            _ => 0,
        }
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
        for p in std::mem::take(&mut self.pending) {
            self.promote(lane, p);
        }
    }

    /// Pending call `p` of lane `lane` as the instance the general path would have made of
    /// its records: created, first entered at its start, with its polls, busy time and
    /// latest exit, no poll in progress.
    fn promote(&mut self, lane: u32, p: Pending) {
        let k = self.insts.create(p.id, p.region);
        self.insts.enter(k, p.start, lane, p.task);
        self.tasks.open_insert(p.task, p.start);
        self.insts.add_poll(k, p.busy, p.end, lane);
        self.insts.get_mut(k).polls = p.polls;
    }

    /// A poll kept for the file's poll table, when polls are kept.
    #[inline]
    fn keep_poll(&mut self, region: u32, start: u64, end: u64, lane: u32, task: u64) {
        if self.keep_polls {
            self.polls.push(RawPoll {
                region,
                start,
                end,
                lane,
                task,
            });
        }
    }
}

#[cfg(test)]
mod tests;

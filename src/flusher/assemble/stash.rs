//! Records that arrived before their instance's `NEW` (it is still in another lane's buffer):
//! stashed by span id, replayed when the `NEW` arrives, and counted as orphans once the
//! watermark has passed them without bringing it (see the module docs of
//! [`super`](crate::flusher::assemble)).

use super::{Assembler, RawCall, Stashed};
use crate::recording::lane::record::{Record, CLOSE, LOST};

/// The tick of a stashed record: its own, or, for one without (`NEW`, `CLOSE`, markers of
/// lost records), now: it was written before the flusher read it.
fn tick_of(r: &Record) -> u64 {
    match r.ticks() {
        0 => crate::recording::clock::ticks(),
        t => t,
    }
}

impl Assembler {
    /// Stashes record `r` of lane `lane` (read while the lane ran in task `task`, after the
    /// lane showed tick `after`).
    pub(super) fn stash_record(&mut self, lane: u32, task: u64, after: u64, r: &Record) {
        let tick = tick_of(r);
        self.stash_min = self.stash_min.min(tick);
        self.stash
            .entry(r.id)
            .or_insert_with(|| Vec::with_capacity(1))
            .push(Stashed {
                tick,
                after,
                lane,
                task,
                rec: *r,
            });
    }

    /// Replays the stashed records of an id whose `NEW` just arrived on lane `created_on`.
    /// Stashed records of that same lane came before the `NEW` in its program order, so they
    /// belong to an earlier instance of the reused id whose `NEW` was lost: orphans.
    pub(super) fn replay(
        &mut self,
        created_on: u32,
        stashed: Vec<Stashed>,
        out: &mut Vec<RawCall>,
    ) {
        let (now, earlier): (Vec<_>, Vec<_>) =
            stashed.into_iter().partition(|s| s.lane != created_on);
        self.orphaned(earlier.iter().map(|s| &s.rec));
        // A stashed record is not where its lane stands now: it shows no time of that lane,
        // and a close among them takes the tick it was stashed with.
        self.replay_into(now, out);
    }

    /// Takes the stashed records of span `id` read up to `tick` (the close of a held one-step
    /// call of it; later ones belong to a newer span of the reused id); `None` when there are
    /// none.
    pub(super) fn take_stashed_until(&mut self, id: u64, tick: u64) -> Option<Vec<Stashed>> {
        let v = self.stash.get_mut(&id)?;
        // A lost marker has no tick of its own (it is stashed with the time it was read): its
        // loss came after its lane's tick before it, so it is the call's unless that tick is
        // past the call's close.
        let (mine, later): (Vec<_>, Vec<_>) = v
            .drain(..)
            .partition(|s| s.tick <= tick || (s.rec.kind() == LOST && s.after <= tick));
        if later.is_empty() {
            self.stash.remove(&id);
        } else {
            *v = later;
        }
        (!mine.is_empty()).then_some(mine)
    }

    /// Feeds stashed records to their instance, each on its own lane at the tick it was
    /// stashed with.
    pub(super) fn replay_into(&mut self, stashed: Vec<Stashed>, out: &mut Vec<RawCall>) {
        for s in stashed {
            self.replaying = Some(s.tick);
            let mut ls = self.lanes.take(s.lane);
            self.feed_one(s.lane, &mut ls, s.task, &s.rec, out);
            self.lanes.put(s.lane, ls);
        }
        self.replaying = None;
    }

    /// Counts records that belong to no instance (one id's). Every close among them (a
    /// `CLOSE`, or a marker of a lost one) ends a span the flusher never knew (its creation
    /// was lost, or was not a registered callsite): one dropped call each, so every span is
    /// counted once, whatever was lost. (A marker of a span's lost creation makes its
    /// instance, see `lost`, so this is rare.) After a pause, a close may be of a span created
    /// while paused, which was never recorded: not counted then.
    fn orphaned<'a>(&mut self, records: impl Iterator<Item = &'a Record>) {
        let mut closes = 0u64;
        for r in records {
            if r.is_wake() {
                // A wake of a task that had ended before its record was read: no loss.
                self.sched.wake_of_ended_task();
                continue;
            }
            self.orphans += 1;
            closes += u64::from(r.kind() == CLOSE || (r.kind() == LOST && r.lost_closed()));
        }
        if !self.paused {
            self.dropped_calls += closes;
        }
    }

    /// Counts the stashed records of the ids whose records the watermark `wm` has all passed
    /// as orphans.
    pub(super) fn expire_stash(&mut self, wm: u64) {
        // An id's records go together, once the watermark has passed the newest of them: the
        // records of one span are counted as one dropped call, not one per batch.
        let mut expired = Vec::new();
        let mut min = u64::MAX;
        // Records of a span whose creation a held one-step call took wait for its release
        // (see `fast`): looked for only when something would expire, which is rare.
        let mut held: Option<crate::fasthash::FastMap<u64, ()>> = None;
        let lanes = &self.lanes;
        self.stash.retain(|&id, v| {
            let newest = v.iter().map(|s| s.tick).max().unwrap_or(0);
            if newest > wm {
                min = min.min(newest);
                return true;
            }
            let held = held.get_or_insert_with(|| lanes.held_ids().map(|id| (id, ())).collect());
            if held.contains_key(&id) {
                min = min.min(wm.saturating_add(1));
                return true;
            }
            expired.push(std::mem::take(v));
            false
        });
        self.stash_min = min;
        for gone in expired {
            self.orphaned(gone.iter().map(|s| &s.rec));
        }
    }
}

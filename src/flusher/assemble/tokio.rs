//! Tokio's own spans in the assembler (see [`crate::flusher::sched`]): a task's spawn makes its
//! instance a *task span*, whose polls and wakes go to the task's timeline.

use super::{Assembler, Close, LaneState, RawCall, TASK_SPAN};
use crate::recording::lane::record::{Record, NEW};

/// The spawn of a Tokio task at the head of `records`: its `NEW`, the wake stamp of the same
/// span and the site slot (see [`crate::recording::lane::record`]); returns the stamp's tick
/// and the site.
pub(super) fn spawn_at(records: &[Record]) -> Option<(u64, u32)> {
    match records {
        [n, w, site, ..]
            if n.kind() == NEW && w.is_wake() && w.id == n.id && site.is_event_site() =>
        {
            Some((w.ticks(), site.id as u32))
        }
        _ => None,
    }
}

impl Assembler {
    /// A Tokio task's spawn: `n` created its span at `tick`, from spawn site `site`.
    pub(super) fn spawn(
        &mut self,
        lane: u32,
        ls: &mut LaneState,
        n: &Record,
        tick: u64,
        site: u32,
        out: &mut Vec<RawCall>,
    ) {
        ls.stamp(tick);
        let Some(region) = self.regions.region_of(n.callsite_addr()) else {
            self.corrupt += 3;
            return;
        };
        let k = self.insts.create(n.id, region);
        self.insts.get_mut(k).flags |= TASK_SPAN;
        let by = self.task_on_lane(ls);
        self.sched.spawn_by(k, region, tick, site, lane, by);
        if let Some(stashed) = self.stash.remove(&n.id) {
            self.replay(lane, stashed, out);
        }
    }

    /// The Tokio task in a poll on lane `ls` now: the innermost poll of a task span in
    /// progress there (0: none). Not while replaying stashed records, which are not where
    /// their lane stands.
    pub(super) fn task_on_lane(&self, ls: &LaneState) -> u64 {
        if self.replaying.is_some() {
            return 0;
        }
        ls.polls
            .iter()
            .rev()
            .find(|p| self.insts.get(p.inst).flags & TASK_SPAN != 0)
            .map_or(0, |p| self.sched.tokio_of(p.inst))
    }

    /// The Tokio task a wake read on lane `ls` is attributed to (0: the runtime's driver):
    /// the task in a poll there, else the task that completed with the lane's previous
    /// record (`completed`), see [`crate::flusher::sched::edges`].
    pub(super) fn waker(&self, ls: &LaneState, completed: u64) -> u64 {
        match self.task_on_lane(ls) {
            0 if self.replaying.is_none() => completed,
            by => by,
        }
    }

    /// The first close of task span `k` is read. The task ended when its future was dropped,
    /// inside its span's last enter-exit (see `sched::timeline`), read before this close on
    /// this lane: its timeline is told now, not when the close is due, since the close has no
    /// tick of its own and takes its lane's next one, which may come long after wakes that
    /// other lanes recorded meanwhile and that the watermark passes first.
    pub(super) fn task_closing(&mut self, k: u32) {
        let dropped = self.insts.last_exit(k);
        if dropped != 0 {
            self.sched.close_at(k, dropped);
        }
    }

    /// Closes now due: a task never polled ends at its close (see
    /// [`task_closing`](Self::task_closing) for the others).
    pub(super) fn unpolled_tasks_end(&mut self, due: &[Close]) {
        if !self.sched.active {
            return;
        }
        for &(tick, k, _) in due {
            if self.insts.get(k).flags & TASK_SPAN != 0 && self.insts.last_exit(k) == 0 {
                self.sched.close_at(k, tick);
            }
        }
    }
}

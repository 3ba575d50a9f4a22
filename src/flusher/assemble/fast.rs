//! The assembler's fast paths:
//! - a sync span created, entered once, exited and closed on one lane with nothing in between
//!   (`info_span!(..).in_scope(..)` in a loop) is one call at once, without an instance;
//! - a *re-poll*, an enter and its exit next to each other on one lane, of a call that has
//!   started and has no poll in progress anywhere (an async fn's second and later polls, a
//!   span entered in a loop), is one step: no poll entry is pushed and searched for.

use super::{Assembler, LaneState, RawCall, RawPoll, NOT_ENTERED, NO_SCHED, TASK_SPAN};
use crate::recording::lane::record::{Record, CLOSE, ENTER, EXIT, NEW};

impl Assembler {
    /// The fast path at the start of `records`: how many records it took (0: none).
    #[inline]
    pub(super) fn sync_call_at(
        &mut self,
        lane: u32,
        ls: &mut LaneState,
        records: &[Record],
        out: &mut Vec<RawCall>,
    ) -> usize {
        // `ScopeSubscriber`, which writes no `NEW` (see `super::implicit`): a fresh ENTER (its
        // thread created the span just before), EXIT, CLOSE, of a span with no instance yet
        // (checked without a lookup when no instance is open at all, as between sync spans).
        if self.implicit.is_some() {
            if let [e, x, c, ..] = records {
                if e.is_fresh()
                    && x.kind() == EXIT
                    && c.kind() == CLOSE
                    && e.id == x.id
                    && x.id == c.id
                    && (self.insts.live() == 0 || self.insts.newest(e.id).is_none())
                {
                    if let Some(region) = self.implicit_region(e.id) {
                        self.sync_call(lane, ls, region, e.ticks(), x.ticks(), out);
                        return 3;
                    }
                }
            }
        }
        // `ScopeLayer` (and a subscriber's spawn spans): NEW, ENTER, EXIT, CLOSE of one id.
        if let [n, e, x, c, ..] = records {
            if n.kind() == NEW
                && e.kind() == ENTER
                && x.kind() == EXIT
                && c.kind() == CLOSE
                && n.id == e.id
                && e.id == x.id
                && x.id == c.id
            {
                match self.regions.region_of(n.callsite_addr()) {
                    Some(region) => self.sync_call(lane, ls, region, e.ticks(), x.ticks(), out),
                    None => self.corrupt += 4,
                }
                return 4;
            }
        }
        0
    }

    /// The fast path's call of region `region`: created, entered at `start`, exited at `end`,
    /// closed.
    #[inline]
    pub(super) fn sync_call(
        &mut self,
        lane: u32,
        ls: &mut LaneState,
        region: u32,
        start: u64,
        end: u64,
        out: &mut Vec<RawCall>,
    ) {
        let end = end.max(start);
        ls.stamp(start);
        let task = ls.task;
        if self.keep_polls {
            self.polls.push(RawPoll {
                region,
                start,
                end,
                lane,
                task,
            });
        }
        out.push(RawCall {
            region,
            start,
            end,
            busy: end - start,
            lane,
            task,
            polls: 1,
            last_lane: lane,
            extra: None,
            close: end,
            // Inside one poll: no suspension.
            sched: if self.sched.active && task != 0 {
                0
            } else {
                NO_SCHED
            },
        });
    }
}

impl Assembler {
    /// The re-poll fast path at the start of `records` (see the module docs): 2 when it took
    /// an enter and its exit, 0 when the general path must (a first poll, a nested or
    /// concurrent poll, a task span, a task with a timeline, an instance not made yet).
    #[inline]
    pub(super) fn repoll_at(&mut self, lane: u32, ls: &mut LaneState, records: &[Record]) -> usize {
        let [e, x, ..] = records else {
            return 0;
        };
        if e.kind() != ENTER || x.kind() != EXIT || e.id != x.id || e.is_fresh() {
            return 0;
        }
        let task = ls.task;
        if self.sched.active && task != 0 {
            return 0; // its task's timeline sees every enter and exit
        }
        let Some(k) = self.route_or_create(lane, e) else {
            return 0;
        };
        let (start, end) = (e.ticks(), x.ticks());
        let inst = self.insts.get_mut(k);
        // Its call started no later (so this enter moves nothing), and no poll of it is in
        // progress on any lane (so this one is not nested in another).
        if inst.open != 0
            || inst.flags & TASK_SPAN != 0
            || inst.first == NOT_ENTERED
            || start < inst.first
        {
            return 0;
        }
        ls.stamp(start);
        let region = inst.region;
        self.insts.add_poll(k, end.saturating_sub(start), end, lane);
        if self.keep_polls {
            self.polls.push(RawPoll {
                region,
                start,
                end: end.max(start),
                lane,
                task,
            });
        }
        2
    }
}

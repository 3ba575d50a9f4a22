//! The assembler's fast path: a sync span created, entered once, exited and closed on one
//! lane with nothing in between (`info_span!(..).in_scope(..)` in a loop) is one call at once,
//! without an instance.

use super::{Assembler, LaneState, RawCall, RawPoll, NO_SCHED};
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

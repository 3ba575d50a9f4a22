//! Lost-record markers in the assembler (see `crate::recording::lane::lost`): a marker is read
//! at the place of the records it replaces, so it is routed like them, and its call is
//! dropped whole.
//!
//! A marker whose lost records include the span's creation stands for that `NEW`: it carries
//! the callsite, and makes the instance (flagged lost) that the span's records on other lanes
//! route to, stashed ones included. So a span created on one thread and closed on another is
//! one dropped call whichever of its records were lost, and a later span of the reused id is
//! never taken for it.

use super::insts::LOST;
use super::{Assembler, LaneState, RawCall};
use crate::recording::lane::record::Record;

impl Assembler {
    /// A marker of lost records that include span `r.id`'s creation on lane `lane`.
    pub(super) fn lost_creation(
        &mut self,
        lane: u32,
        ls: &mut LaneState,
        r: &Record,
        out: &mut Vec<RawCall>,
    ) {
        let Some(region) = self.regions.region_of(r.lost_site()) else {
            // Not a callsite the layer registered: its close will be an orphan, counted then.
            self.corrupt += 1;
            return;
        };
        // As a `NEW` does: the id now means this instance.
        let k = self.insts.create(r.id, region);
        if let Some(stashed) = self.stash.remove(&r.id) {
            self.replay(lane, stashed, out);
        }
        self.lost_in_call(lane, ls, k, r);
    }

    /// A marker of lost records of instance `k`: the call is dropped whole when it completes.
    /// A lost enter counts as one (`polls`, which nobody reads of a dropped call), so the
    /// call counts as entered even when none of its enters was read.
    pub(super) fn lost_in_call(&mut self, lane: u32, ls: &mut LaneState, k: u32, r: &Record) {
        let inst = self.insts.get_mut(k);
        inst.flags |= LOST;
        if r.lost_entered() {
            inst.polls = inst.polls.max(1);
        }
        if r.lost_closed() {
            self.close(lane, ls, k, r);
        }
    }
}

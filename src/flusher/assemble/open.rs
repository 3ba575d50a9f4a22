//! The calls open now, for the spool's open-calls frame (see
//! [`crate::data::open_calls`]): every instance entered and not closed, with where its task
//! stands. Work: O(open instances), once per flush interval.

use super::insts::{NONE, NOT_ENTERED, TAINTED, TASK_SPAN};
use super::Assembler;
use crate::data::open_calls::TaskState;

/// One open call as the assembler holds it (raw ticks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OpenInst {
    pub region: u32,
    /// Its first enter.
    pub first: u64,
    /// The lane of its first enter.
    pub lane: u32,
    /// The Tokio task of its first enter (0: none).
    pub task: u64,
    /// Whether it is a Tokio task's own span.
    pub task_span: bool,
    pub state: TaskState,
}

impl Assembler {
    /// Hands every open call to `f` (task spans only when they are calls,
    /// `Builder::task_regions`): the state is its task's as Tokio's instrumentation tells it
    /// (settled up to the watermark), else running while a poll of it is in progress, else
    /// suspended inside a task, else unknown.
    pub(crate) fn for_each_open(&self, mut f: impl FnMut(OpenInst)) {
        for i in self.insts.iter() {
            if i.first == NOT_ENTERED || i.closed_lane != NONE || i.flags & TAINTED != 0 {
                continue;
            }
            let task_span = i.flags & TASK_SPAN != 0;
            if task_span && !self.task_regions {
                continue;
            }
            let known = (i.task != 0).then(|| self.sched.state_of(i.task)).flatten();
            let state = match known {
                Some(s) => s,
                None if i.open > 0 => TaskState::Running,
                None if i.task != 0 => TaskState::Suspended,
                None => TaskState::Unknown,
            };
            f(OpenInst {
                region: i.region,
                first: i.first,
                lane: i.first_lane,
                task: i.task,
                task_span,
                state,
            });
        }
    }
}

impl Assembler {
    /// What span id `id` means now: its newest instance's region and first enter (`None`
    /// for the enter: not entered yet), or its held one-step call's. Without either (`ScopeSubscriber` makes one at
    /// its span's first record), the region its id carries, not entered. `None`: a span this
    /// profiler does not know (filtered out, or completed and gone).
    pub(crate) fn span_now(&mut self, id: u64) -> Option<(u32, Option<u64>)> {
        if let Some(k) = self.insts.newest(id) {
            let i = self.insts.get(k);
            return Some((i.region, (i.first != NOT_ENTERED).then_some(i.first)));
        }
        // A one-step call (created, entered once, exited and closed in a row) has none.
        if let Some(h) = self.lanes.held_call(id) {
            return Some((h.region, Some(h.start)));
        }
        Some((self.implicit_region(id)?, None))
    }
}

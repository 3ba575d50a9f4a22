//! A task's polls as Tokio's own instrumentation shows them (see [`crate::flusher::sched`]),
//! folded into its row: busy, idle and scheduled time, polls, first-poll delay, spawn site.
//!
//! A task seen this way has a row even without a single call. Its row's `created_ns`,
//! `done_ns`, `steps`, `running_ns` and `suspended_ns` still describe its outermost calls when
//! it has any (as without the instrumentation); a task without calls gets them from its polls:
//! spawn (or first poll), end of its last poll once it ended (-1 before), polls, busy time,
//! idle plus scheduled time.

use crate::data::rows::{PollTotals, TaskSched};

/// One settled poll of a task, in ns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TaskPoll {
    pub tokio_id: u64,
    pub site: u32,
    pub lane: u32,
    pub start_ns: i64,
    pub end_ns: i64,
    /// From the wake to the start (`None`: the first poll).
    pub sched_ns: Option<i64>,
    /// The rest of the suspension before it.
    pub idle_ns: i64,
    /// From the spawn to the first poll (the first poll only).
    pub first_delay_ns: Option<i64>,
    /// The spawn (the first poll only, when known).
    pub spawn_ns: Option<i64>,
}

impl PollTotals {
    /// Folds one poll in.
    pub(crate) fn add(&mut self, p: &TaskPoll) {
        let s = &mut self.sched;
        if s.polls < 0 {
            *s = TaskSched {
                site: p.site,
                polls: 0,
                busy_ns: 0,
                idle_ns: 0,
                scheduled_ns: 0,
                first_poll_delay_ns: -1,
            };
        }
        s.polls += 1;
        s.busy_ns += (p.end_ns - p.start_ns).max(0);
        s.idle_ns += p.idle_ns.max(0);
        s.scheduled_ns += p.sched_ns.unwrap_or(0).max(0);
        if let Some(d) = p.first_delay_ns {
            s.first_poll_delay_ns = d.max(0);
        }
        if let Some(t) = p.spawn_ns {
            self.spawn_ns = t;
        }
        if self.first_ns < 0 || p.start_ns < self.first_ns {
            self.first_ns = p.start_ns;
        }
        self.last_ns = self.last_ns.max(p.end_ns);
    }

    /// The task ended; `last_ns` is the end of its last poll, if any.
    pub(crate) fn end(&mut self, site: u32, last_ns: Option<i64>) {
        self.ended = true;
        if self.sched.polls < 0 {
            // Ended without a poll in this row (dropped unpolled, or its last poll counted in
            // an earlier row).
            self.sched = TaskSched {
                site,
                polls: 0,
                busy_ns: 0,
                idle_ns: 0,
                scheduled_ns: 0,
                first_poll_delay_ns: -1,
            };
        }
        if let Some(t) = last_ns {
            self.last_ns = self.last_ns.max(t);
        }
    }

    /// `(created, done, steps, running, suspended)` of a row without calls.
    pub(crate) fn lane_columns(&self) -> (i64, i64, i64, i64, i64) {
        let s = &self.sched;
        let created = if self.spawn_ns >= 0 {
            self.spawn_ns
        } else {
            self.first_ns
        };
        let done = if self.ended { self.last_ns } else { -1 };
        (
            created,
            done,
            s.polls.max(0),
            s.busy_ns.max(0),
            (s.idle_ns + s.scheduled_ns).max(0),
        )
    }
}

//! `task_table`'s columns from Tokio's own instrumentation (`--cfg tokio_unstable`, see
//! `docs/latency.md`): where each task's time went.

use super::columns::H5;
use super::ReadError;

/// A task's time from Tokio's own instrumentation: `task_table`'s `spawn_location`,
/// `busy_ns`, `idle_ns`, `scheduled_ns`, `polls` and `first_poll_delay_ns`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskWaits {
    /// `file:line:col` of the spawn ("" when unknown).
    pub spawn_location: String,
    /// Time inside its polls (ns).
    pub busy_ns: i64,
    /// From the end of a poll to the wake that ended the suspension (ns).
    pub idle_ns: i64,
    /// From that wake to the start of the next poll (ns).
    pub scheduled_ns: i64,
    /// Polls.
    pub polls: i64,
    /// From the spawn to the first poll (ns), -1 when the row does not hold the first poll.
    pub first_poll_delay_ns: i64,
}

/// `task_table`'s columns from Tokio's instrumentation, when the file has them.
pub(super) struct WaitColumns {
    location: Vec<String>,
    /// busy, idle, scheduled, polls, first poll delay.
    ints: [Vec<i64>; 5],
}

impl WaitColumns {
    /// Row `i`, unless the task has no such data (`polls < 0`).
    pub(super) fn row(&self, i: usize) -> Option<TaskWaits> {
        let [busy, idle, sched, polls, first] = &self.ints;
        (polls[i] >= 0).then(|| TaskWaits {
            spawn_location: self.location[i].clone(),
            busy_ns: busy[i],
            idle_ns: idle[i],
            scheduled_ns: sched[i],
            polls: polls[i],
            first_poll_delay_ns: first[i],
        })
    }
}

pub(super) fn task_waits(h5: &H5<'_>, n: Option<u64>) -> Result<Option<WaitColumns>, ReadError> {
    if !h5.exists("task_table/polls") {
        return Ok(None);
    }
    let col = |name: &str| h5.ints::<i64>(&format!("task_table/{name}"), n);
    Ok(Some(WaitColumns {
        location: h5.strings("task_table/spawn_location", n)?,
        ints: [
            col("busy_ns")?,
            col("idle_ns")?,
            col("scheduled_ns")?,
            col("polls")?,
            col("first_poll_delay_ns")?,
        ],
    }))
}

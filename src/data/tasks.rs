//! Tokio tasks' time in a phase ([`TaskStats`](crate::TaskStats)) and a phase's tasks summed
//! up: the top ones by scheduled time and the line of all of them.

use std::collections::HashMap;

/// How many tasks the box lists.
pub(crate) const TOP_TASKS: usize = 10;

/// One Tokio task's time in a phase, from Tokio's own instrumentation (a program built with
/// `RUSTFLAGS="--cfg tokio_unstable"` and Tokio's `tracing` feature, profiled with
/// `track_async(true)`); see [`Report::tasks`](crate::Report::tasks).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskStats {
    /// The task's name (`task.name`, else `task <file>:<line>` of its spawn).
    pub name: String,
    /// Tokio's task id (0 for the line of all tasks).
    pub tokio_id: u64,
    /// Where it was spawned, `file:line:col` ("" when unknown).
    pub spawn_location: String,
    /// Polls.
    pub polls: u64,
    /// Time inside its polls, ns.
    pub busy_ns: u64,
    /// From the end of a poll to the wake that ended the suspension, ns.
    pub idle_ns: u64,
    /// From that wake to the start of the next poll (woken, waiting for a worker), ns.
    pub scheduled_ns: u64,
    /// From the spawn to the first poll, ns, when this phase saw it.
    pub first_poll_delay_ns: Option<u64>,
}

impl TaskStats {
    fn add(&mut self, o: &TaskStats) {
        self.polls += o.polls;
        self.busy_ns += o.busy_ns;
        self.idle_ns += o.idle_ns;
        self.scheduled_ns += o.scheduled_ns;
        self.first_poll_delay_ns = self.first_poll_delay_ns.or(o.first_poll_delay_ns);
    }
}

/// A phase's tasks: the top ones by scheduled time and the sum over all of them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct TaskSummary {
    /// The [`TOP_TASKS`] with the most scheduled time, most first.
    pub top: Vec<TaskStats>,
    /// How many tasks had such data.
    pub tasks: u64,
    /// Their sums (`first_poll_delay_ns`: the longest).
    pub all: TaskStats,
}

/// Gathers `tasks` (per rank, Tokio id) into the summary; `None` without any.
pub(crate) fn summarize(tasks: impl Iterator<Item = (u32, TaskStats)>) -> Option<TaskSummary> {
    let mut by_task: HashMap<(u32, u64), TaskStats> = HashMap::new();
    for (rank, t) in tasks {
        match by_task.get_mut(&(rank, t.tokio_id)) {
            Some(sum) => sum.add(&t),
            None => {
                by_task.insert((rank, t.tokio_id), t);
            }
        }
    }
    if by_task.is_empty() {
        return None;
    }
    let mut all = TaskStats {
        name: format!("all {} tasks", by_task.len()),
        ..TaskStats::default()
    };
    for t in by_task.values() {
        all.add(t);
        all.first_poll_delay_ns = all.first_poll_delay_ns.max(t.first_poll_delay_ns);
    }
    let tasks = by_task.len() as u64;
    let mut top: Vec<TaskStats> = by_task.into_values().collect();
    top.sort_by(|a, b| {
        b.scheduled_ns
            .cmp(&a.scheduled_ns)
            .then(a.tokio_id.cmp(&b.tokio_id))
    });
    top.truncate(TOP_TASKS);
    Some(TaskSummary { top, tasks, all })
}

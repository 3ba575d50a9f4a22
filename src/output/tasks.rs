//! The summary's tasks box: where Tokio tasks' time went, from Tokio's own instrumentation
//! (see [`crate::flusher::sched`]): the tasks with the most scheduled time (woken, waiting for
//! a worker), with their busy, idle and scheduled time and polls, and a line for all of them.
//!
//! A task's rows of one phase (a task retired while quiet and running again has several) are
//! added up; rows are told apart by rank and Tokio id.

use crate::data::tasks::TaskStats;
#[cfg(test)]
use crate::data::tasks::TOP_TASKS;
pub(crate) use crate::data::tasks::{summarize, TaskSummary};

use crate::data::rows::PhaseData;

/// The tasks of a phase being finalized.
pub(crate) fn of_phase(data: &PhaseData) -> Option<TaskSummary> {
    let mut name = String::new();
    summarize(data.tasks.iter().filter(|t| t.sched.has()).map(|t| {
        name.clear();
        crate::output::hdf5::lanes::task_name(&mut name, data, t);
        let s = &t.sched;
        let stats = TaskStats {
            name: name.clone(),
            tokio_id: t.tokio_id,
            spawn_location: crate::output::hdf5::lanes::spawn_location(data, t),
            polls: s.polls.max(0) as u64,
            busy_ns: s.busy_ns.max(0) as u64,
            idle_ns: s.idle_ns.max(0) as u64,
            scheduled_ns: s.scheduled_ns.max(0) as u64,
            first_poll_delay_ns: u64::try_from(s.first_poll_delay_ns).ok(),
        };
        (0, stats)
    }))
}

/// The tasks box (ends with a newline).
pub(crate) fn render(s: &TaskSummary) -> String {
    let secs = |ns: u64| format!("{:.6}", ns as f64 / 1e9);
    let headers: Vec<String> = [
        "task (most scheduled first)",
        "polls",
        "busy [s]",
        "idle [s]",
        "scheduled [s]",
        "sched/poll [s]",
    ]
    .map(String::from)
    .to_vec();
    let row = |t: &TaskStats| {
        vec![
            t.name.clone(),
            t.polls.to_string(),
            secs(t.busy_ns),
            secs(t.idle_ns),
            secs(t.scheduled_ns),
            format!(
                "{:.3e}",
                t.scheduled_ns as f64 / 1e9 / t.polls.saturating_sub(1).max(1) as f64
            ),
        ]
    };
    let mut rows: Vec<Vec<String>> = s.top.iter().map(row).collect();
    if s.tasks > 1 {
        rows.push(row(&s.all));
    }
    let mut out = crate::output::summary::boxed(&headers, &rows);
    out += &format!(
        "  Tokio tasks: busy = in a poll, idle = waiting for a wake, scheduled = woken, waiting \
         for a worker ({} of {} tasks shown).\n",
        s.top.len(),
        s.tasks
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(id: u64, sched: u64) -> (u32, TaskStats) {
        (
            0,
            TaskStats {
                name: format!("t{id}"),
                tokio_id: id,
                polls: 3,
                busy_ns: 10,
                idle_ns: 20,
                scheduled_ns: sched,
                ..TaskStats::default()
            },
        )
    }

    #[test]
    fn rows_of_one_task_add_up_and_the_most_scheduled_come_first() {
        let mut rows: Vec<(u32, TaskStats)> = (1..=15).map(|k| task(k, k * 1000)).collect();
        rows.push(task(3, 100_000)); // a second row of task 3
        let s = summarize(rows.into_iter()).unwrap();
        assert_eq!(s.tasks, 15);
        assert_eq!(s.top.len(), TOP_TASKS);
        assert_eq!(s.top[0].tokio_id, 3);
        assert_eq!((s.top[0].scheduled_ns, s.top[0].polls), (103_000, 6));
        assert_eq!(s.top[1].tokio_id, 15);
        assert_eq!(s.all.polls, 16 * 3);
        let text = render(&s);
        assert!(
            text.contains("scheduled [s]") && text.contains("all 15 tasks"),
            "{text}"
        );
        assert_eq!(summarize(std::iter::empty()), None);
    }
}

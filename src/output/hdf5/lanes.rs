//! Lane data of a schema-3 file: `thread_table` and `task_table` (spec §1.8), and this crate's
//! own per-poll records, which the schema has no place for.
//!
//! Polls go into the group `/scope_profiler_rs/polls` (the Python reader ignores groups it does
//! not know): one row per enter -> exit interval, with columns `region_ids` (u32, index into
//! `/scope_profiler_rs/region_names`, which lists every region the profiler knows, including
//! regions whose calls are still running), `start_ns` (i64, absolute, same clock as
//! `events`), `durations` (i64 ns), `thread_ids` (i64, `thread_table` index) and `task_ids` (i64,
//! `task_table` index, -1 outside a task).
//!
//! Mind the mixed time bases the reader expects: lane-table times are relative to
//! `metadata/start_time_ns`, event and poll times are absolute; `cpu_ns` is absolute CPU time.

use ::hdf5::File;

use super::ctx::Ctx;
use crate::output::model::{PhaseData, PollRecord, TaskRow};
use crate::Error;

/// Name of this crate's own group.
pub(crate) const OWN_GROUP: &str = "scope_profiler_rs";

/// The rows of a phase's lanes: its task rows (in index order) and polls.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Lanes<'a> {
    pub tasks: &'a [TaskRow],
    pub polls: &'a [PollRecord],
}

impl<'a> Lanes<'a> {
    /// The lanes a phase holds.
    pub(crate) fn of(data: &'a PhaseData) -> Lanes<'a> {
        Lanes {
            tasks: &data.tasks,
            polls: &data.polls,
        }
    }
}

/// Writes the lane tables the configuration asks for and the poll records: the threads of
/// `data`, the tasks and polls of `lanes`.
pub(super) fn write_lanes(
    ctx: &Ctx<'_>,
    file: &File,
    data: &PhaseData,
    lanes: Lanes<'_>,
) -> Result<(), Error> {
    let origin = data.start_time_ns;
    let rel = |t: i64| if t < 0 { -1 } else { t - origin };
    if data.track_threads && !data.threads.is_empty() {
        let t = ctx.group(file, "thread_table")?;
        let rows = &data.threads[..];
        ctx.column(&t, "ranks", rows, |_| 0u32)?;
        ctx.column(&t, "index", rows, |r| i64::from(r.index))?;
        ctx.column(&t, "ident", rows, |r| r.native_id)?;
        ctx.column(&t, "native_id", rows, |r| r.native_id)?;
        ctx.column(&t, "daemon", rows, |_| 0i8)?;
        ctx.column(&t, "start_ns", rows, |r| r.start_ns - origin)?;
        ctx.column(&t, "end_ns", rows, |r| rel(r.end_ns))?;
        ctx.column(&t, "cpu_ns", rows, |r| r.cpu_ns)?;
        ctx.strings(&t, "name", rows.iter().map(|r| r.name.as_str()))?;
    }
    if data.track_async && !lanes.tasks.is_empty() {
        let t = ctx.group(file, "task_table")?;
        let rows = lanes.tasks;
        ctx.column(&t, "ranks", rows, |_| 0u32)?;
        ctx.column(&t, "index", rows, |r| r.index)?;
        ctx.column(&t, "thread_index", rows, |r| i64::from(r.thread_index))?;
        ctx.column(&t, "created_ns", rows, |r| rel(r.created_ns))?;
        ctx.column(&t, "done_ns", rows, |r| rel(r.done_ns))?;
        ctx.column(&t, "steps", rows, |r| r.steps)?;
        ctx.column(&t, "running_ns", rows, |r| r.running_ns)?;
        ctx.column(&t, "suspended_ns", rows, |r| r.suspended_ns)?;
        // Not in the schema (the Python reader ignores it): Tokio's own task id per row.
        ctx.column(&t, "tokio_id", rows, |r| r.tokio_id)?;
        // Always "task" (written as a fill value, see `Ctx::strings`).
        ctx.strings(&t, "kind", rows.iter().map(|_| "task"))?;
        // `Task-<tokio id>`, formatted into one buffer (a task table can have millions of rows).
        let mut names = String::with_capacity(rows.len() * 12);
        let mut ends = Vec::with_capacity(rows.len());
        for r in rows {
            use std::fmt::Write as _;
            let _ = write!(names, "Task-{}", r.tokio_id);
            ends.push(names.len());
        }
        let mut start = 0;
        ctx.strings(
            &t,
            "name",
            ends.iter().map(|&end| {
                let s = &names[start..end];
                start = end;
                s
            }),
        )?;
        let region = |r: u32| data.region_names.get(r as usize).map_or("", String::as_str);
        ctx.strings(&t, "coro_name", rows.iter().map(|r| region(r.root_region)))?;
    }
    if !lanes.polls.is_empty() {
        let own = ctx.group(file, OWN_GROUP)?;
        ctx.strings(
            &own,
            "region_names",
            data.region_names.iter().map(String::as_str),
        )?;
        let polls = ctx.h5("scope_profiler_rs/polls", own.create_group("polls"))?;
        let p = lanes.polls;
        ctx.column(&polls, "region_ids", p, |x| x.region)?;
        ctx.column(&polls, "start_ns", p, |x| x.start_ns)?;
        ctx.column(&polls, "durations", p, |x| x.dur_ns)?;
        ctx.column(&polls, "thread_ids", p, |x| i64::from(x.thread))?;
        ctx.column(&polls, "task_ids", p, |x| x.task)?;
    }
    Ok(())
}

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
//! With Tokio's own instrumentation (`--cfg tokio_unstable`, see [`crate::flusher::sched`]),
//! `task_table` gains `spawn_location` (str, `file:line:col`), `busy_ns`, `idle_ns`,
//! `scheduled_ns`, `polls` and `first_poll_delay_ns` (i64, -1 for a row without such data),
//! its `name` is the task's `task.name` or `task <file>:<line>`, and the polls gain
//! `scheduled_ns` (i64: from the wake that ended the task's previous suspension to the poll;
//! -1 for a task's first poll and for polls of other spans). Without it nothing changes.
//!
//! Mind the mixed time bases the reader expects: lane-table times are relative to
//! `metadata/start_time_ns`, event and poll times are absolute; `cpu_ns` is absolute CPU time.

use ::hdf5::File;

use super::ctx::Ctx;
use crate::data::rows::{PhaseData, PollRecord, TaskRow, ThreadRow};
use crate::Error;

/// Name of this crate's own group.
pub(crate) const OWN_GROUP: &str = "scope_profiler_rs";

/// An integer lane-table column: its name and its value for a row, given the phase's
/// `start_time_ns` (lane times are stored relative to it).
pub(crate) type LaneCol<R> = (&'static str, fn(&R, i64) -> i64);

/// A time relative to `origin`; -1 (not yet) stays.
fn rel(t: i64, origin: i64) -> i64 {
    if t < 0 {
        -1
    } else {
        t - origin
    }
}

/// `thread_table`'s integer columns (besides `ranks` and `daemon`).
pub(crate) const THREAD_COLS: [LaneCol<ThreadRow>; 6] = [
    ("index", |r, _| i64::from(r.index)),
    ("ident", |r, _| r.native_id),
    ("native_id", |r, _| r.native_id),
    ("start_ns", |r, o| r.start_ns - o),
    ("end_ns", |r, o| rel(r.end_ns, o)),
    ("cpu_ns", |r, _| r.cpu_ns),
];

/// `task_table`'s integer columns (besides `ranks`); `tokio_id` is not in the schema (the
/// Python reader ignores it).
pub(crate) const TASK_COLS: [LaneCol<TaskRow>; 8] = [
    ("index", |r, _| r.index),
    ("thread_index", |r, _| i64::from(r.thread_index)),
    ("created_ns", |r, o| rel(r.created_ns, o)),
    ("done_ns", |r, o| rel(r.done_ns, o)),
    ("steps", |r, _| r.steps),
    ("running_ns", |r, _| r.running_ns),
    ("suspended_ns", |r, _| r.suspended_ns),
    ("tokio_id", |r, _| r.tokio_id as i64),
];

/// A `task_table` column of Tokio's instrumentation: its name and its value for a row.
pub(crate) type TaskCol = (&'static str, fn(&TaskRow) -> i64);

/// `task_table`'s columns from Tokio's instrumentation (besides `spawn_location`), written
/// when a row has such data.
pub(crate) const TASK_SCHED_COLS: [TaskCol; 5] = [
    ("busy_ns", |r| r.sched.busy_ns),
    ("idle_ns", |r| r.sched.idle_ns),
    ("scheduled_ns", |r| r.sched.scheduled_ns),
    ("polls", |r| r.sched.polls),
    ("first_poll_delay_ns", |r| r.sched.first_poll_delay_ns),
];

/// Whether a phase's lanes have Tokio's scheduling data (the extra columns are written).
pub(crate) fn has_sched(lanes: &Lanes<'_>) -> bool {
    lanes.tasks.iter().any(|t| t.sched.has()) || lanes.polls.iter().any(|p| p.sched_ns >= 0)
}

/// A poll column: its name and its value for a poll.
pub(crate) type PollCol = (&'static str, fn(&PollRecord) -> i64);

/// The poll columns of `/scope_profiler_rs/polls`, all but `region_ids` (u32).
pub(crate) const POLL_COLS: [PollCol; 4] = [
    ("start_ns", |x| x.start_ns),
    ("durations", |x| x.dur_ns),
    ("thread_ids", |x| i64::from(x.thread)),
    ("task_ids", |x| x.task),
];

/// A task's name in `task_table/name`, written into `out`: its `task.name`, else `task
/// <file>:<line> #<task index>` of its spawn (Tokio's instrumentation; the index tells apart
/// the tasks of one spawn site), else `Task-<tokio id>`.
pub(crate) fn task_name(out: &mut String, data: &PhaseData, row: &TaskRow) {
    use std::fmt::Write as _;
    match data.extra.tokio.site(row.sched.site) {
        Some(s) if !s.name.is_empty() => out.push_str(&s.name),
        Some(s) if !s.file.is_empty() => {
            let _ = write!(out, "{} #{}", s.lane_name(), row.index);
        }
        _ => {
            let _ = write!(out, "Task-{}", row.tokio_id);
        }
    }
}

/// A task's spawn location (`file:line:col`, "" when unknown).
pub(crate) fn spawn_location(data: &PhaseData, row: &TaskRow) -> String {
    data.extra
        .tokio
        .site(row.sched.site)
        .map(|s| s.location())
        .unwrap_or_default()
}

/// The root region's name of a task (`task_table/coro_name`).
pub(crate) fn coro_name<'a>(data: &'a PhaseData, row: &TaskRow) -> &'a str {
    data.region_names
        .get(row.root_region as usize)
        .map_or("", String::as_str)
}

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
    if data.track_threads && !data.threads.is_empty() {
        let t = ctx.group(file, "thread_table")?;
        let rows = &data.threads[..];
        ctx.column(&t, "ranks", rows, |_| 0u32)?;
        for (name, f) in THREAD_COLS {
            ctx.column(&t, name, rows, |r| f(r, origin))?;
        }
        ctx.column(&t, "daemon", rows, |_| 0i8)?;
        ctx.strings(&t, "name", rows.iter().map(|r| r.name.as_str()))?;
    }
    if data.track_async && !lanes.tasks.is_empty() {
        let t = ctx.group(file, "task_table")?;
        let rows = lanes.tasks;
        ctx.column(&t, "ranks", rows, |_| 0u32)?;
        for (name, f) in TASK_COLS {
            ctx.column(&t, name, rows, |r| f(r, origin))?;
        }
        // Always "task" (written as a fill value, see `Ctx::strings`).
        ctx.strings(&t, "kind", rows.iter().map(|_| "task"))?;
        // Formatted into one buffer (a task table can have millions of rows).
        let mut names = String::with_capacity(rows.len() * 12);
        let mut ends = Vec::with_capacity(rows.len());
        for r in rows {
            task_name(&mut names, data, r);
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
        ctx.strings(&t, "coro_name", rows.iter().map(|r| coro_name(data, r)))?;
        if has_sched(&lanes) {
            for (name, f) in TASK_SCHED_COLS {
                ctx.column(&t, name, rows, f)?;
            }
            let locations: Vec<String> = rows.iter().map(|r| spawn_location(data, r)).collect();
            ctx.strings(&t, "spawn_location", locations.iter().map(String::as_str))?;
        }
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
        for (name, f) in POLL_COLS {
            ctx.column(&polls, name, p, f)?;
        }
        if has_sched(&lanes) {
            ctx.column(&polls, "scheduled_ns", p, |x| x.sched_ns)?;
        }
    }
    Ok(())
}

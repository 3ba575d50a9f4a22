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
use crate::output::model::PhaseData;
use crate::Error;

/// Name of this crate's own group.
pub(crate) const OWN_GROUP: &str = "scope_profiler_rs";

/// Writes the lane tables the configuration asks for and the poll records.
pub(super) fn write_lanes(ctx: &Ctx<'_>, file: &File, data: &PhaseData) -> Result<(), Error> {
    let origin = data.start_time_ns;
    let rel = |t: i64| if t < 0 { -1 } else { t - origin };
    if data.track_threads && !data.threads.is_empty() {
        let t = ctx.group(file, "thread_table")?;
        let n = data.threads.len();
        let col = |f: &dyn Fn(&crate::output::model::ThreadRow) -> i64| -> Vec<i64> {
            data.threads.iter().map(f).collect()
        };
        ctx.dataset(&t, "ranks", &vec![0u32; n], None)?;
        ctx.dataset(&t, "index", &col(&|r| i64::from(r.index)), None)?;
        ctx.dataset(&t, "ident", &col(&|r| r.native_id), None)?;
        ctx.dataset(&t, "native_id", &col(&|r| r.native_id), None)?;
        ctx.dataset(&t, "daemon", &vec![0i8; n], None)?;
        ctx.dataset(&t, "start_ns", &col(&|r| r.start_ns - origin), None)?;
        ctx.dataset(&t, "end_ns", &col(&|r| rel(r.end_ns)), None)?;
        ctx.dataset(&t, "cpu_ns", &col(&|r| r.cpu_ns), None)?;
        ctx.strings(&t, "name", data.threads.iter().map(|r| r.name.as_str()))?;
    }
    if data.track_async && !data.tasks.is_empty() {
        let t = ctx.group(file, "task_table")?;
        let n = data.tasks.len();
        let col = |f: &dyn Fn(&crate::output::model::TaskRow) -> i64| -> Vec<i64> {
            data.tasks.iter().map(f).collect()
        };
        ctx.dataset(&t, "ranks", &vec![0u32; n], None)?;
        ctx.dataset(&t, "index", &col(&|r| r.index), None)?;
        ctx.dataset(
            &t,
            "thread_index",
            &col(&|r| i64::from(r.thread_index)),
            None,
        )?;
        ctx.dataset(&t, "created_ns", &col(&|r| rel(r.created_ns)), None)?;
        ctx.dataset(&t, "done_ns", &col(&|r| rel(r.done_ns)), None)?;
        ctx.dataset(&t, "steps", &col(&|r| r.steps), None)?;
        ctx.dataset(&t, "running_ns", &col(&|r| r.running_ns), None)?;
        ctx.dataset(&t, "suspended_ns", &col(&|r| r.suspended_ns), None)?;
        // Not in the schema (the Python reader ignores it): Tokio's own task id per row.
        ctx.dataset(
            &t,
            "tokio_id",
            &data.tasks.iter().map(|r| r.tokio_id).collect::<Vec<u64>>(),
            None,
        )?;
        ctx.strings(&t, "kind", data.tasks.iter().map(|_| "task"))?;
        let names: Vec<String> = data
            .tasks
            .iter()
            .map(|r| format!("Task-{}", r.tokio_id))
            .collect();
        ctx.strings(&t, "name", names.iter().map(String::as_str))?;
        ctx.strings(
            &t,
            "coro_name",
            data.tasks.iter().map(|r| r.root_region.as_str()),
        )?;
    }
    if !data.polls.is_empty() {
        let own = ctx.group(file, OWN_GROUP)?;
        ctx.strings(
            &own,
            "region_names",
            data.region_names.iter().map(String::as_str),
        )?;
        let polls = ctx.h5("scope_profiler_rs/polls", own.create_group("polls"))?;
        let p = &data.polls;
        ctx.dataset(
            &polls,
            "region_ids",
            &p.iter().map(|x| x.region).collect::<Vec<u32>>(),
            None,
        )?;
        ctx.dataset(
            &polls,
            "start_ns",
            &p.iter().map(|x| x.start_ns).collect::<Vec<i64>>(),
            None,
        )?;
        ctx.dataset(
            &polls,
            "durations",
            &p.iter().map(|x| x.dur_ns).collect::<Vec<i64>>(),
            None,
        )?;
        ctx.dataset(
            &polls,
            "thread_ids",
            &p.iter().map(|x| i64::from(x.thread)).collect::<Vec<i64>>(),
            None,
        )?;
        ctx.dataset(
            &polls,
            "task_ids",
            &p.iter().map(|x| x.task).collect::<Vec<i64>>(),
            None,
        )?;
    }
    Ok(())
}

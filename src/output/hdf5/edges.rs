//! This crate's own datasets of spool version 2 under `/scope_profiler_rs/` (the Python
//! reader ignores the group; see `docs/latency.md`):
//!
//! * `open_calls/`: the calls open when the spool was last flushed, in a file `recover` wrote
//!   from a crashed run's spool: attributes `at_ns` (i64, when they were taken) and `open`
//!   (i64, calls open then, all of them), and one row per call, oldest first, at most 4096:
//!   `regions` (str), `start_ns` (i64, absolute), `thread_ids` (i64), `tokio_ids` (i64, -1
//!   outside a task), `task_ids` (i64, `task_table` index, -1 none yet), `parents` (i64, the
//!   row of the enclosing open call, -1 none) and `states` (str: `running`, `scheduled`,
//!   `idle`, `suspended` or `unknown`);
//! * `wakes/` (Tokio's instrumentation): `tick_ns` (i64, absolute), `thread_ids` (i64, the
//!   waking thread), `waker_task_ids` (i64, -1: the runtime's driver or a thread outside
//!   tasks) and `woken_task_ids` (i64), in the order the flusher settled them;
//! * `spawns/` (Tokio's instrumentation): `tick_ns`, `thread_ids`, `parent_task_ids` (-1: the
//!   thread, outside tasks) and `child_task_ids`;
//! * `follows_from/`: `tick_ns`, `span_regions` (str), `span_start_ns` (-1: not entered
//!   when the flusher resolved the link, a few ms after it), `follows_regions` (str) and
//!   `follows_start_ns`.
//!
//! Task ids are `task_table` indices. The edges are read from the phase's spool files as the
//! file is written (one pass that skips every other frame).

use ::hdf5::{File, Group};

use super::ctx::Ctx;
use super::lanes::OWN_GROUP;
use crate::data::edges::or_none;
use crate::data::open_calls::OpenCalls;
use crate::data::rows::PhaseData;
use crate::Error;

/// `/scope_profiler_rs`, made when the file does not have it yet.
fn own_group(ctx: &Ctx<'_>, file: &File) -> Result<Group, Error> {
    if file.link_exists(OWN_GROUP) {
        ctx.h5(OWN_GROUP, file.group(OWN_GROUP))
    } else {
        ctx.group(file, OWN_GROUP)
    }
}

/// Writes the open calls and the edges `data` has, if any.
pub(super) fn write_edges(ctx: &Ctx<'_>, file: &File, data: &PhaseData) -> Result<(), Error> {
    if let Some(open) = &data.extra.open_calls {
        write_open_calls(ctx, &own_group(ctx, file)?, open)?;
    }
    let Some(sp) = &data.spooled else {
        return Ok(());
    };
    let (edges, regions) =
        crate::spool::edges::read_edges(&sp.files).map_err(|source| Error::Io {
            context: "reading this phase's task edges back from the spool".into(),
            path: sp.files.first().cloned().unwrap_or_default(),
            source,
        })?;
    if edges.is_empty() {
        return Ok(());
    }
    let own = own_group(ctx, file)?;
    if !edges.wakes.is_empty() {
        let g = ctx.h5("scope_profiler_rs/wakes", own.create_group("wakes"))?;
        let w = &edges.wakes[..];
        ctx.column(&g, "tick_ns", w, |x| x.tick_ns)?;
        ctx.column(&g, "thread_ids", w, |x| i64::from(x.thread))?;
        ctx.column(&g, "waker_task_ids", w, |x| or_none(x.waker_task))?;
        ctx.column(&g, "woken_task_ids", w, |x| x.woken_task)?;
    }
    if !edges.spawns.is_empty() {
        let g = ctx.h5("scope_profiler_rs/spawns", own.create_group("spawns"))?;
        let s = &edges.spawns[..];
        ctx.column(&g, "tick_ns", s, |x| x.tick_ns)?;
        ctx.column(&g, "thread_ids", s, |x| i64::from(x.thread))?;
        ctx.column(&g, "parent_task_ids", s, |x| or_none(x.parent_task))?;
        ctx.column(&g, "child_task_ids", s, |x| x.child_task)?;
    }
    if !edges.follows.is_empty() {
        let g = ctx.h5(
            "scope_profiler_rs/follows_from",
            own.create_group("follows_from"),
        )?;
        let f = &edges.follows[..];
        let name = |r: u32| regions.get(r as usize).map_or("", |g| g.name.as_str());
        ctx.column(&g, "tick_ns", f, |x| x.tick_ns)?;
        ctx.strings(&g, "span_regions", f.iter().map(|x| name(x.span_region)))?;
        ctx.column(&g, "span_start_ns", f, |x| x.span_start_ns)?;
        ctx.strings(
            &g,
            "follows_regions",
            f.iter().map(|x| name(x.follows_region)),
        )?;
        ctx.column(&g, "follows_start_ns", f, |x| x.follows_start_ns)?;
    }
    Ok(())
}

/// `/scope_profiler_rs/open_calls` (see the module docs).
fn write_open_calls(ctx: &Ctx<'_>, own: &Group, open: &OpenCalls) -> Result<(), Error> {
    let g = ctx.h5(
        "scope_profiler_rs/open_calls",
        own.create_group("open_calls"),
    )?;
    ctx.attr(&g, "at_ns", &open.at_ns)?;
    ctx.attr(&g, "open", &i64::try_from(open.open).unwrap_or(i64::MAX))?;
    let c = &open.calls[..];
    ctx.strings(&g, "regions", c.iter().map(|x| x.region.as_str()))?;
    ctx.column(&g, "start_ns", c, |x| x.start_ns)?;
    ctx.column(&g, "thread_ids", c, |x| i64::from(x.thread))?;
    ctx.column(&g, "tokio_ids", c, |x| x.tokio_id.map_or(-1, |t| t as i64))?;
    ctx.column(&g, "task_ids", c, |x| or_none(x.task))?;
    ctx.column(&g, "parents", c, |x| x.parent.map_or(-1, i64::from))?;
    ctx.strings(&g, "states", c.iter().map(|x| x.state.name()))
}

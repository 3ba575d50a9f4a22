//! One rank's writes into the file every rank has open through MPI-IO: its rows of every
//! table, at its [`Place`], with the values the relay's merge would give them.
//!
//! - `rank_region_index`: its rows, with the unified region ids, its rank, event offsets
//!   moved by its first event, and the summaries' absolute times moved onto rank 0's clock.
//! - `events/*`: its calls through the single-rank writer's streaming pass
//!   ([`write_events_at`]), every row's first start moved onto rank 0's clock; a column it does
//!   not have gets the column's sentinel.
//! - `thread_table`, `task_table`: its rows, times relative to rank 0's origin.
//! - `scope_profiler_rs/rank<N>`: its polls, as they are (its own clock), and the region
//!   names they refer to.
//!
//! Every write is an independent transfer (HDF5's default): each rank writes exactly its own
//! rows, no rank writes for another, and a rank makes as many writes as its data needs.

use ::hdf5::{File, H5Type};

use super::fixed;
use super::shape::{has_tasks, has_threads, source_text, Union, TAGS, TASK_KIND};
use crate::data::rows::PhaseData;
use crate::mpi::layout::Place;
use crate::mpi::merge::lanes::{TASK_I64, THREAD_I64};
use crate::output::events::{column_names, write_events_at, Scan, SummaryRow};
use crate::output::hdf5::lanes::{
    coro_name, task_name, LaneCol, OWN_GROUP, POLL_COLS, TASK_COLS, THREAD_COLS,
};
use crate::output::hdf5::{exclusive_totals, Ctx};
use crate::Error;

/// Rows per write of a lane or poll column.
const BLOCK: usize = 16_384;

/// One rank's phase and where it goes.
pub(super) struct Mine<'a> {
    pub data: &'a PhaseData,
    pub scan: &'a Scan,
    pub rank: u32,
    pub place: Place,
    /// The unified region id of each of its rows.
    pub ids: Vec<u32>,
    pub union: Union,
    /// Its clock minus rank 0's (ns).
    pub clock_offset: i64,
    /// Rank 0's `start_time_ns` (the origin of lane times).
    pub origin: i64,
}

/// Writes this rank's rows into `f`.
///
/// # Errors
/// A write fails (the error names the dataset).
pub(super) fn write(ctx: &Ctx<'_>, f: &File, m: &Mine<'_>) -> Result<(), Error> {
    index(ctx, f, m)?;
    let events = ctx.h5("events", f.group("events"))?;
    let mut columns = Vec::new();
    for name in column_names(m.union.want) {
        columns.push((name, ctx.h5(name, events.dataset(name))?));
    }
    let first = m.place.first.events;
    write_events_at(ctx, columns, m.data, m.scan, (first, m.clock_offset))?;
    lanes(ctx, f, m)?;
    polls(ctx, f, m)
}

/// Writes `values` at `at` of the dataset `path`.
fn put<T: H5Type>(ctx: &Ctx<'_>, f: &File, path: &str, at: u64, values: &[T]) -> Result<(), Error> {
    if values.is_empty() {
        return Ok(());
    }
    let ds = ctx.h5(path, f.dataset(path))?;
    let at = at as usize;
    ctx.h5(path, ds.write_slice(values, at..at + values.len()))
}

/// Writes `f(row)` for `rows` at `at` of the dataset `path`, in blocks.
fn put_rows<R, T: H5Type + Copy>(
    ctx: &Ctx<'_>,
    file: &File,
    path: &str,
    at: u64,
    rows: &[R],
    f: impl Fn(&R) -> T,
) -> Result<(), Error> {
    let mut buf = Vec::with_capacity(BLOCK.min(rows.len()));
    for (k, block) in rows.chunks(BLOCK).enumerate() {
        buf.clear();
        buf.extend(block.iter().map(&f));
        put(ctx, file, path, at + (k * BLOCK) as u64, &buf)?;
    }
    Ok(())
}

/// Writes `values` at `at` of the fixed-length string column `path`.
fn put_strs<'s>(
    ctx: &Ctx<'_>,
    f: &File,
    path: &str,
    at: u64,
    values: impl IntoIterator<Item = &'s str>,
) -> Result<(), Error> {
    let ds = ctx.h5(path, f.dataset(path))?;
    ctx.h5(path, fixed::write(&ds, at as usize, values))
}

fn index(ctx: &Ctx<'_>, f: &File, m: &Mine<'_>) -> Result<(), Error> {
    let (data, scan) = (m.data, m.scan);
    let at = m.place.first.rows;
    let r = data.regions.len();
    let mut offsets = Vec::with_capacity(r);
    let mut next = m.place.first.events;
    for &c in &scan.counts {
        offsets.push(next);
        next += c;
    }
    let summary: Vec<SummaryRow> = scan
        .summary
        .iter()
        .zip(&scan.counts)
        .map(|(s, &n)| {
            let mut s = *s;
            if n > 0 {
                s.start_minimum -= m.clock_offset;
                s.end_maximum -= m.clock_offset;
            }
            s
        })
        .collect();
    let lines: Vec<i64> = data.regions.iter().map(|row| row.line).collect();
    let ix = "rank_region_index";
    put(ctx, f, &format!("{ix}/region_ids"), at, &m.ids)?;
    put(ctx, f, &format!("{ix}/ranks"), at, &vec![m.rank; r])?;
    put(ctx, f, &format!("{ix}/event_offsets"), at, &offsets)?;
    put(ctx, f, &format!("{ix}/event_counts"), at, &scan.counts)?;
    put(ctx, f, &format!("{ix}/source_lines"), at, &lines)?;
    let exclusive = exclusive_totals(data, scan);
    put(ctx, f, &format!("{ix}/exclusive_totals"), at, &exclusive)?;
    put(ctx, f, &format!("{ix}/summary_statistics"), at, &summary)?;
    let files = data.regions.iter().map(|row| row.file.as_str());
    put_strs(ctx, f, &format!("{ix}/source_files"), at, files)?;
    let texts = (0..r).map(|i| source_text(data, i));
    put_strs(ctx, f, &format!("{ix}/source_texts"), at, texts)?;
    put_strs(ctx, f, &format!("{ix}/tags"), at, (0..r).map(|_| TAGS))
}

/// A lane table's integer column as the merge stores it: the single-rank value, moved by
/// `shift` when it is a time (-1 stays).
fn lane_value<R>(
    cols: &[LaneCol<R>],
    name: &str,
    relative: bool,
    shift: i64,
) -> impl Fn(&R, i64) -> i64 {
    let f = cols.iter().find(|(n, _)| *n == name).map(|(_, f)| *f);
    move |row, origin| match f.map(|f| f(row, origin)) {
        Some(-1) => -1,
        Some(v) if relative => v + shift,
        Some(v) => v,
        None => -1,
    }
}

fn lanes(ctx: &Ctx<'_>, f: &File, m: &Mine<'_>) -> Result<(), Error> {
    let data = m.data;
    let own_origin = data.start_time_ns;
    // The merge's shift: this rank's origin on rank 0's clock minus rank 0's origin.
    let shift = (own_origin - m.clock_offset) - m.origin;
    if has_threads(data) {
        let rows = &data.threads[..];
        let at = m.place.first.threads;
        put_rows(ctx, f, "thread_table/ranks", at, rows, |_| m.rank)?;
        for (name, relative) in THREAD_I64 {
            let value = lane_value(&THREAD_COLS, name, relative, shift);
            let path = format!("thread_table/{name}");
            put_rows(ctx, f, &path, at, rows, |r| value(r, own_origin))?;
        }
        put_rows(ctx, f, "thread_table/daemon", at, rows, |_| 0i8)?;
        put_strs(
            ctx,
            f,
            "thread_table/name",
            at,
            rows.iter().map(|r| r.name.as_str()),
        )?;
    }
    if has_tasks(data) {
        let rows = &data.tasks[..];
        let at = m.place.first.tasks;
        put_rows(ctx, f, "task_table/ranks", at, rows, |_| m.rank)?;
        for (name, relative) in TASK_I64 {
            let value = lane_value(&TASK_COLS, name, relative, shift);
            let path = format!("task_table/{name}");
            put_rows(ctx, f, &path, at, rows, |r| value(r, own_origin))?;
        }
        put_strs(
            ctx,
            f,
            "task_table/kind",
            at,
            rows.iter().map(|_| TASK_KIND),
        )?;
        let mut names = String::new();
        for (k, block) in rows.chunks(BLOCK).enumerate() {
            let mut ends = Vec::with_capacity(block.len());
            names.clear();
            for r in block {
                task_name(&mut names, data, r);
                ends.push(names.len());
            }
            let mut start = 0;
            let block_names = ends.iter().map(|&end| {
                let s = &names[start..end];
                start = end;
                s
            });
            put_strs(
                ctx,
                f,
                "task_table/name",
                at + (k * BLOCK) as u64,
                block_names,
            )?;
        }
        let coros = rows.iter().map(|r| coro_name(data, r));
        put_strs(ctx, f, "task_table/coro_name", at, coros)?;
    }
    Ok(())
}

fn polls(ctx: &Ctx<'_>, f: &File, m: &Mine<'_>) -> Result<(), Error> {
    let p = &m.data.polls[..];
    if p.is_empty() {
        return Ok(());
    }
    let names = m.data.region_names.iter().map(String::as_str);
    put_strs(
        ctx,
        f,
        &format!("{OWN_GROUP}/rank{}/region_names", m.rank),
        0,
        names,
    )?;
    let at = format!("{OWN_GROUP}/rank{}/polls", m.rank);
    put_rows(ctx, f, &format!("{at}/region_ids"), 0, p, |x| x.region)?;
    for (name, value) in POLL_COLS {
        put_rows(ctx, f, &format!("{at}/{name}"), 0, p, value)?;
    }
    Ok(())
}

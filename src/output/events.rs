//! The per-call part of a columnar file, streamed: `events/*` and the per-row index figures
//! that depend on the calls (counts, offsets, `summary_statistics`).
//!
//! A phase's calls are read twice from wherever they are ([`PhaseData::for_each_call`]: the
//! spool on disk, or memory without an output file), never all held at once:
//! 1. [`scan`] counts each row's calls (which fixes every row's offset in `events/*`), folds the
//!    summary compound and decides the optional columns; it also collects the compact copy
//!    nesting needs ([`crate::finalize::nesting`]), when nesting is wanted and the phase fits its budget;
//! 2. [`write_events`] creates each column at its final length and writes the calls through
//!    bounded per-row buffers, as hyperslabs at each row's running position.
//!
//! Memory: one spool frame, the row buffers (at most [`BUFFERED_CALLS`] calls in all) and, for
//! nesting, ~44 bytes per call up to [`crate::finalize::nesting::NEST_BUDGET`] calls.

use ::hdf5::{Dataset, Group};

use super::hdf5::Ctx;
use crate::data::rows::{CallRecord, PhaseData};
use crate::data::scan::Nested;
pub(crate) use crate::data::scan::{Optional, Scan, SummaryRow};
use crate::error::Error;
#[cfg(test)]
pub(crate) use crate::finalize::scan::{scan, summarize};
use crate::output::hdf5::lanes::OWN_GROUP;

/// Calls buffered over all rows before every row's buffer is written out.
pub(crate) const BUFFERED_CALLS: usize = 1 << 19;
/// Calls buffered in one row before it is written out.
const ROW_CALLS: usize = 1 << 15;
/// Largest chunk, in elements, of a compressed event column.
const MAX_CHUNK: usize = 65_536;

/// One event column being written.
struct Column {
    ds: Dataset,
    kind: Col,
}

/// The event columns, by what they hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Col {
    StartDeltas,
    Durations,
    ThreadIds,
    TaskIds,
    AwaitNs,
    CallIds,
    ParentIds,
    GpuDurations,
    /// In this crate's own group, not `events/`.
    Scheduled,
}

const ALL_COLS: [Col; 9] = [
    Col::StartDeltas,
    Col::Durations,
    Col::ThreadIds,
    Col::TaskIds,
    Col::AwaitNs,
    Col::CallIds,
    Col::ParentIds,
    Col::GpuDurations,
    Col::Scheduled,
];

impl Col {
    fn name(self) -> &'static str {
        match self {
            Col::StartDeltas => "start_deltas",
            Col::Durations => "durations",
            Col::ThreadIds => "thread_ids",
            Col::TaskIds => "task_ids",
            Col::AwaitNs => "await_ns",
            Col::CallIds => "call_ids",
            Col::ParentIds => "parent_ids",
            Col::GpuDurations => "gpu_durations",
            Col::Scheduled => "call_scheduled_ns",
        }
    }

    /// Where the column lives.
    fn path(self) -> String {
        match self {
            Col::Scheduled => format!("{OWN_GROUP}/{}", self.name()),
            _ => format!("events/{}", self.name()),
        }
    }

    fn of_name(name: &str) -> Option<Col> {
        ALL_COLS.into_iter().find(|c| c.name() == name)
    }
}

/// The event columns a phase with these optional columns has, in the order they are written.
pub(crate) fn column_names(want: Optional) -> Vec<&'static str> {
    let mut kinds = vec![Col::StartDeltas, Col::Durations];
    if want.threads {
        kinds.push(Col::ThreadIds);
    }
    if want.tasks {
        kinds.extend([Col::TaskIds, Col::AwaitNs]);
    }
    // Ids only when nesting succeeded (never an all-sentinel column, spec §1.7).
    if want.ids {
        kinds.extend([Col::CallIds, Col::ParentIds]);
    }
    if want.gpu {
        kinds.push(Col::GpuDurations);
    }
    kinds.into_iter().map(Col::name).collect()
}

/// The value of an optional event column for a call that has none (the merge of ranks fills
/// a rank without the column with it): 0 for `await_ns`, else -1.
pub(crate) fn sentinel(name: &str) -> i64 {
    match Col::of_name(name) {
        Some(Col::AwaitNs) => 0,
        _ => -1,
    }
}

/// Second pass: creates `events/*` (and `/scope_profiler_rs/call_scheduled_ns`, one value per
/// row of `events`: see [`crate::flusher::sched`]) at full length and writes every call at its
/// row's place.
///
/// # Errors
/// Reading the spool or writing a column failed (the error names the column).
pub(crate) fn write_events(
    ctx: &Ctx<'_>,
    events: &Group,
    data: &PhaseData,
    scan: &Scan,
    gzip: Option<u8>,
) -> Result<(), Error> {
    let n = scan.total() as usize;
    let mut columns = Vec::new();
    for name in column_names(scan.want) {
        let mut b = events.new_dataset::<i64>().shape(n);
        if let Some(level) = gzip.filter(|_| n > 0) {
            b = b.chunk(n.min(MAX_CHUNK)).shuffle().deflate(level.min(9));
        }
        let ds = ctx.h5(&format!("events/{name}"), b.create(name))?;
        columns.push((name, ds));
    }
    if scan.want.sched {
        let col = Col::Scheduled;
        let file = ctx.h5(OWN_GROUP, events.file())?;
        let own = match file.group(OWN_GROUP) {
            Ok(g) => g,
            Err(_) => ctx.h5(OWN_GROUP, file.create_group(OWN_GROUP))?,
        };
        let ds = own.new_dataset::<i64>().shape(n).create(col.name());
        columns.push((col.name(), ctx.h5(&col.path(), ds)?));
    }
    write_events_at(ctx, columns, data, scan, (0, 0))
}

/// Writes the phase's calls into existing event columns, which may be longer than the phase
/// (a multi-rank file): the calls at `base..base + n`, every row's first start minus
/// `shift_ns` (another rank's clock onto rank 0's). A column this phase does not have gets
/// its [`sentinel`] over the same range.
///
/// # Errors
/// Reading the spool or writing a column failed (the error names the column).
pub(crate) fn write_events_at(
    ctx: &Ctx<'_>,
    columns: Vec<(&'static str, Dataset)>,
    data: &PhaseData,
    scan: &Scan,
    (base, shift_ns): (u64, i64),
) -> Result<(), Error> {
    let n = scan.total() as usize;
    if n == 0 {
        return Ok(());
    }
    let mut own = column_names(scan.want);
    if scan.want.sched {
        own.push(Col::Scheduled.name());
    }
    let mut written = Vec::new();
    for (name, ds) in columns {
        match Col::of_name(name).filter(|_| own.contains(&name)) {
            Some(kind) => written.push(Column { ds, kind }),
            None => fill(ctx, &ds, name, base as usize..base as usize + n)?,
        }
    }
    let mut w = Writer {
        ctx,
        columns: written,
        nested: scan.nested.as_ref(),
        rows: Vec::new(),
        buffered: 0,
        scratch: Vec::new(),
    };
    let mut offset = base;
    for &count in &scan.counts {
        w.rows.push(RowBuf {
            next: offset,
            previous_start: shift_ns,
            calls: Vec::new(),
        });
        offset += count;
    }
    let mut g = 0usize;
    let mut failed = None;
    data.for_each_call(|row, c| {
        if failed.is_some() {
            return;
        }
        let r = &mut w.rows[row as usize];
        r.calls.push((g, *c));
        g += 1;
        w.buffered += 1;
        let full = r.calls.len() >= ROW_CALLS;
        let result = if w.buffered >= BUFFERED_CALLS {
            w.flush_all()
        } else if full {
            w.flush_row(row as usize)
        } else {
            Ok(())
        };
        if let Err(e) = result {
            failed = Some(e);
        }
    })?;
    if let Some(e) = failed {
        return Err(e);
    }
    w.flush_all()
}

/// The column's sentinel over `range`, in bounded blocks.
fn fill(
    ctx: &Ctx<'_>,
    ds: &Dataset,
    name: &str,
    range: std::ops::Range<usize>,
) -> Result<(), Error> {
    let block = vec![sentinel(name); range.len().min(ROW_CALLS)];
    let mut at = range.start;
    while at < range.end {
        let k = (range.end - at).min(block.len());
        let written = ds.write_slice(&block[..k], at..at + k);
        ctx.h5(&format!("events/{name}"), written)?;
        at += k;
    }
    Ok(())
}

/// Buffered calls of one row and where the next one goes.
struct RowBuf {
    next: u64,
    previous_start: i64,
    calls: Vec<(usize, CallRecord)>,
}

struct Writer<'a> {
    ctx: &'a Ctx<'a>,
    columns: Vec<Column>,
    nested: Option<&'a Nested>,
    rows: Vec<RowBuf>,
    buffered: usize,
    scratch: Vec<i64>,
}

impl Writer<'_> {
    fn flush_all(&mut self) -> Result<(), Error> {
        for r in 0..self.rows.len() {
            self.flush_row(r)?;
        }
        Ok(())
    }

    fn flush_row(&mut self, r: usize) -> Result<(), Error> {
        let row = &mut self.rows[r];
        if row.calls.is_empty() {
            return Ok(());
        }
        let calls = std::mem::take(&mut row.calls);
        let at = row.next as usize;
        let range = at..at + calls.len();
        let mut previous = row.previous_start;
        row.previous_start = calls.last().map_or(previous, |(_, c)| c.start_ns);
        row.next += calls.len() as u64;
        self.buffered -= calls.len();
        let nested = self.nested;
        for col in &self.columns {
            let s = &mut self.scratch;
            s.clear();
            match col.kind {
                Col::StartDeltas => s.extend(calls.iter().map(|(_, c)| {
                    let d = c.start_ns.wrapping_sub(previous);
                    previous = c.start_ns;
                    d
                })),
                Col::Durations => s.extend(calls.iter().map(|(_, c)| c.dur_ns.max(0))),
                Col::ThreadIds => s.extend(calls.iter().map(|(_, c)| i64::from(c.thread))),
                Col::TaskIds => s.extend(calls.iter().map(|(_, c)| c.task)),
                Col::AwaitNs => s.extend(calls.iter().map(|(_, c)| c.await_ns)),
                Col::GpuDurations => s.extend(calls.iter().map(|(_, c)| c.gpu_ns.max(-1))),
                Col::Scheduled => s.extend(calls.iter().map(|(_, c)| c.sched_ns.max(-1))),
                Col::CallIds => s.extend(calls.iter().map(|&(g, c)| match nested {
                    Some(n) => n.call_id(g),
                    None => c.call_id,
                })),
                Col::ParentIds => s.extend(calls.iter().map(|&(g, c)| match nested {
                    Some(n) => n.parent_id(g),
                    None => c.parent_id,
                })),
            }
            let written = col.ds.write_slice(&s[..], range.clone());
            self.ctx.h5(&col.kind.path(), written)?;
        }
        // Reuse the allocation.
        let mut calls = calls;
        calls.clear();
        self.rows[r].calls = calls;
        Ok(())
    }
}

#[cfg(test)]
mod tests;

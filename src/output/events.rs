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

use ::hdf5::{Dataset, Group, H5Type};

use super::hdf5::Ctx;
use crate::error::Error;
use crate::finalize::nesting::external::Runs;
use crate::finalize::nesting::{Nested, Nester, Overlap, Span};
use crate::data::stats::Stats;
use crate::output::hdf5::lanes::OWN_GROUP;
use crate::data::rows::{CallRecord, PhaseData};

/// Calls buffered over all rows before every row's buffer is written out.
pub(crate) const BUFFERED_CALLS: usize = 1 << 19;
/// Calls buffered in one row before it is written out.
const ROW_CALLS: usize = 1 << 15;
/// Largest chunk, in elements, of a compressed event column.
const MAX_CHUNK: usize = 65_536;

/// One `rank_region_index/summary_statistics` element: the 11-field packed compound of the
/// Python writer (88 bytes, member names and order exactly so).
#[derive(H5Type, Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
pub(crate) struct SummaryRow {
    /// Sum of durations (ns).
    pub total: i64,
    /// Smallest duration.
    pub minimum: i64,
    /// Largest duration.
    pub maximum: i64,
    /// Duration of the first stored call.
    pub first: i64,
    /// Duration of the last stored call.
    pub last: i64,
    /// Earliest absolute start.
    pub start_minimum: i64,
    /// Latest absolute end.
    pub end_maximum: i64,
    /// Calls with a GPU duration.
    pub gpu_count: u64,
    /// Sum of GPU durations.
    pub gpu_total: i64,
    /// Mean duration (ns).
    pub mean: f64,
    /// Sum of squared deviations from the mean.
    pub m2: f64,
}

/// Which optional event columns a file gets (see `write_columnar` in `hdf5.rs`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Optional {
    pub threads: bool,
    pub tasks: bool,
    pub gpu: bool,
    pub ids: bool,
    /// `/scope_profiler_rs/call_scheduled_ns` (a call ran in a Tokio task with a timeline;
    /// single-rank files only).
    pub sched: bool,
}

/// What the first pass learned about a phase's calls.
#[derive(Debug, Default)]
pub(crate) struct Scan {
    /// Calls per row.
    pub counts: Vec<u64>,
    /// Summary compound per row.
    pub summary: Vec<SummaryRow>,
    /// Optional columns to write.
    pub want: Optional,
    /// Call ids, parents, exclusive totals and the tree, when nesting was asked for and worked.
    pub nested: Option<Nested>,
    /// Why nesting was asked for but not done (an overlap, or the budget).
    pub not_nested: Option<NotNested>,
    /// Whether the in-memory calls carry ids of their own (set by `nesting::nest` in tests).
    own_ids: bool,
}

/// Why a phase was not nested.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NotNested {
    /// Two calls of one lane partly overlap (rows of both).
    Overlap(Overlap),
}

/// Where the first pass puts the compact copies nesting needs.
enum Collect {
    /// Nesting not wanted.
    Off,
    /// Up to [`crate::finalize::nesting::NEST_BUDGET`] calls: sorted in memory, with call ids.
    Memory(Vec<Span>),
    /// More: sorted runs on disk, merged (exclusive totals and the tree, no per-call ids).
    External(std::io::Result<Runs>),
}

impl Collect {
    fn push(&mut self, s: Span, data: &PhaseData) {
        match self {
            Collect::Off | Collect::External(Err(_)) => {}
            Collect::Memory(v) if v.len() < crate::finalize::nesting::nest_budget() => v.push(s),
            Collect::Memory(v) => {
                let first = std::mem::take(v);
                let mut runs = Runs::new(&scratch_dir(data), first);
                if let Ok(r) = &mut runs {
                    if let Err(e) = r.push(s) {
                        runs = Err(e);
                    }
                }
                *self = Collect::External(runs);
            }
            Collect::External(Ok(r)) => {
                if let Err(e) = r.push(s) {
                    *self = Collect::External(Err(e));
                }
            }
        }
    }
}

/// Where the external sort's temporary file goes: the output's directory (beside the
/// spool for a finalize; recovery says so, since its spool may lie on a full disk), else the
/// temp directory (`TMPDIR`) for calls with no spool.
fn scratch_dir(data: &PhaseData) -> std::path::PathBuf {
    let spooled = data.spooled.as_ref();
    spooled
        .and_then(|s| s.scratch.clone())
        .or_else(|| {
            spooled
                .and_then(|s| s.files.first())
                .map(|f| crate::data::files::dir_of(f))
        })
        .unwrap_or_else(std::env::temp_dir)
}

fn spill_error(data: &PhaseData, source: std::io::Error) -> Error {
    Error::Io {
        context: "sorting this phase's calls for nesting (temporary file)".into(),
        path: scratch_dir(data),
        source,
    }
}

impl Scan {
    /// Total calls.
    pub(crate) fn total(&self) -> u64 {
        self.counts.iter().sum()
    }
}

/// Running summary of one row.
#[derive(Default)]
struct RowAcc {
    s: SummaryRow,
    count: u64,
    /// Sum of squared durations, for `m2` when the row's statistics do not describe exactly
    /// these calls (`None` after an overflow).
    sum_sq: Option<u128>,
}

impl RowAcc {
    fn add(&mut self, c: &CallRecord) {
        let d = c.dur_ns.max(0);
        let s = &mut self.s;
        if self.count == 0 {
            self.sum_sq = Some(0);
            s.minimum = i64::MAX;
            s.maximum = i64::MIN;
            s.start_minimum = i64::MAX;
            s.end_maximum = i64::MIN;
            s.first = d;
        }
        s.last = d;
        s.total = s.total.wrapping_add(d);
        s.minimum = s.minimum.min(d);
        s.maximum = s.maximum.max(d);
        s.start_minimum = s.start_minimum.min(c.start_ns);
        s.end_maximum = s.end_maximum.max(c.start_ns.saturating_add(d));
        if c.gpu_ns >= 0 {
            s.gpu_count += 1;
            s.gpu_total += c.gpu_ns;
        }
        self.count += 1;
        let d = d as u128;
        self.sum_sq = self.sum_sq.and_then(|q| q.checked_add(d * d));
    }

    /// The compound; `mean`/`m2` from `stats` when they describe exactly these calls (the
    /// flusher's running statistics, the usual case), else from the sums.
    fn finish(mut self, stats: &Stats) -> SummaryRow {
        let n = self.count;
        if n == 0 {
            return SummaryRow::default();
        }
        if stats.count == n && stats.total == self.s.total as u64 {
            self.s.mean = stats.mean;
            self.s.m2 = stats.m2;
            return self.s;
        }
        let total = self.s.total as u128;
        self.s.mean = total as f64 / n as f64;
        // m2 = sum_sq - total^2 / n, exactly: (n * sum_sq - total^2) / n.
        let exact = self.sum_sq.and_then(|q| {
            let nq = q.checked_mul(u128::from(n))?;
            nq.checked_sub(total.checked_mul(total)?)
        });
        self.s.m2 = match exact {
            Some(v) => v as f64 / n as f64,
            None => {
                let mean = self.s.mean;
                self.sum_sq
                    .map_or(0.0, |q| q as f64 - n as f64 * mean * mean)
                    .max(0.0)
            }
        };
        self.s
    }
}

/// The summary compound of one in-memory row (tests).
#[cfg(test)]
pub(crate) fn summarize(row: &crate::data::rows::RegionRow) -> SummaryRow {
    let mut acc = RowAcc::default();
    row.calls.iter().for_each(|c| acc.add(c));
    acc.finish(&row.stats)
}

/// First pass: counts, summaries, optional columns and (with `nest = Some(first_id,
/// want_tree)`) nesting.
///
/// # Errors
/// Reading the spool failed.
pub(crate) fn scan(data: &PhaseData, nest: Option<(i64, bool)>) -> Result<Scan, Error> {
    let rows = data.regions.len();
    let mut acc: Vec<RowAcc> = (0..rows).map(|_| RowAcc::default()).collect();
    let expected: u64 = data.regions.iter().map(|r| r.stats.count).sum();
    let mut collect = match nest {
        None => Collect::Off,
        Some(_) if expected as usize <= crate::finalize::nesting::nest_budget() => {
            Collect::Memory(Vec::with_capacity(expected as usize))
        }
        Some(_) => Collect::External(Runs::new(&scratch_dir(data), Vec::new())),
    };
    let mut want = Optional {
        threads: data.track_threads,
        ..Optional::default()
    };
    let mut first_thread = None;
    let mut own_ids = false;
    let mut g: u64 = 0;
    data.for_each_call(|row, c| {
        acc[row as usize].add(c);
        let first = *first_thread.get_or_insert(c.thread);
        want.threads |= c.thread != first;
        want.tasks |= c.task >= 0;
        want.gpu |= c.gpu_ns >= 0;
        want.sched |= c.sched_ns >= 0;
        own_ids |= c.call_id >= 0;
        collect.push(Span::of(c, row, g as u32), data);
        g += 1;
    })?;
    let counts: Vec<u64> = acc.iter().map(|a| a.count).collect();
    let summary = acc
        .into_iter()
        .zip(&data.regions)
        .map(|(a, r)| a.finish(&r.stats))
        .collect();
    let mut scan = Scan {
        counts,
        summary,
        want,
        nested: None,
        not_nested: None,
        own_ids: own_ids && nest.is_none(),
    };
    if let Some((first_id, want_tree)) = nest {
        let names: Vec<&str> = data.regions.iter().map(|r| r.name.as_str()).collect();
        let nested = match collect {
            Collect::Memory(spans) => crate::finalize::nesting::nest_spans(
                spans,
                &names,
                first_id,
                want_tree,
                data.extra.child_overhead_ns,
            ),
            Collect::External(Ok(runs)) => {
                let mut nester = Nester::new(&names, first_id, want_tree, None)
                    .with_child_overhead(data.extra.child_overhead_ns);
                let merged = runs
                    .merge(|s| nester.push(s))
                    .map_err(|e| spill_error(data, e))?;
                merged.map(|()| nester.finish())
            }
            Collect::External(Err(e)) => return Err(spill_error(data, e)),
            Collect::Off => Ok(Nested::default()),
        };
        match nested {
            Ok(n) => scan.nested = Some(n),
            Err(o) => scan.not_nested = Some(NotNested::Overlap(o)),
        }
    }
    let ids = scan.nested.as_ref().is_some_and(Nested::has_ids);
    scan.want.ids = data.track_threads && (ids || scan.own_ids);
    Ok(scan)
}

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

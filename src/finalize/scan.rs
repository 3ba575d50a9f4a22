//! A finalize's first pass over a phase's calls: counts, summary rows and optional columns,
//! and (when asked) nesting, in memory or through an external sort past the budget.

use crate::data::rows::{CallRecord, PhaseData};
use crate::data::scan::{BelowByParent, Nested, NotNested, Optional, Scan, SummaryRow};
use crate::data::stats::Stats;
use crate::error::Error;
use crate::finalize::nesting::external::Runs;
use crate::finalize::nesting::{Nester, Span};

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
    // A flight-recorder dump's left-out calls go into nesting too, to be counted under
    // their parents; then each call's row and index is kept (8 bytes a call) to name them.
    let below = match (&data.spooled, &data.extra.flight, nest) {
        (Some(sp), Some(_), Some(_)) => {
            let mut n = 0u64;
            crate::spool::below::for_each_below(&sp.files, |b| {
                collect.push(Span::below(b), data);
                n += 1;
            })
            .map_err(|source| Error::Io {
                context: "reading the calls the flight recorder's threshold left out".into(),
                path: sp.files.first().cloned().unwrap_or_default(),
                source,
            })?;
            n
        }
        _ => 0,
    };
    let mut places: Vec<(u32, u32)> = Vec::new();
    let mut first_thread = None;
    let mut own_ids = false;
    let mut g: u64 = 0;
    data.for_each_call(|row, c| {
        if below > 0 {
            places.push((row, acc[row as usize].count as u32));
        }
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
        below: None,
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
            Ok(mut n) => {
                if below > 0 {
                    scan.below = Some(below_by_parent(&mut n, &places));
                }
                scan.nested = Some(n);
            }
            Err(o) => scan.not_nested = Some(NotNested::Overlap(o)),
        }
    }
    let ids = scan.nested.as_ref().is_some_and(Nested::has_ids);
    scan.want.ids = data.track_threads && (ids || scan.own_ids);
    Ok(scan)
}

/// The left-out calls nesting counted per enclosing call, with each call named by its row and
/// its index in the row (`places`, by storage position).
fn below_by_parent(n: &mut Nested, places: &[(u32, u32)]) -> BelowByParent {
    let mut parents: Vec<(u32, u64, u64)> = std::mem::take(&mut n.below)
        .into_iter()
        .filter_map(|(g, k)| {
            let &(row, index) = places.get(g as usize)?;
            Some((row, u64::from(index), k))
        })
        .collect();
    parents.sort_unstable();
    BelowByParent {
        parents,
        top: n.below_top,
    }
}

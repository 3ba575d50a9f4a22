//! The text summary printed at finalize: one row per region, in the rounded-box layout of the
//! Python package (`╭─╮ ├─┤ ╰─╯ │`), followed by an "Info" box.

use std::collections::HashMap;

use crate::data::report::{Flat, RegionStats, Report};
use crate::data::rows::SESSION_REGION;
use crate::data::scan::TreeRow;

/// What the summary says when no span ever reached the layer.
pub(crate) const NO_SPANS: &str = "no spans reached the profiler; is a global filter hiding them?";

/// Renders the report as the summary table (ends with a newline): the call tree with `(own)`
/// rows when nesting is known, else one flat row per region; GPU and perf columns when any
/// region has them.
pub(crate) fn render(report: &Report, title: &str) -> String {
    if report.regions().is_empty() && report.in_flight() == 0 && report.dropped() == 0 {
        // Not one span since build(): an empty table would only look like a broken profiler.
        return format!("scope-profiler ({title}): {NO_SPANS}\n");
    }
    let columns = Columns::of(report);
    let mut rows = match &report.tree {
        Some(tree) => columns.tree_rows(tree),
        None => columns.flat_rows(),
    };
    if rows.is_empty() {
        let mut row = vec!["(no calls)".to_owned()];
        row.extend(std::iter::repeat_n(
            "-".to_owned(),
            columns.headers.len() - 1,
        ));
        rows.push(row);
    }
    let mut out = boxed(&columns.headers, &rows);
    if let Some(tasks) = &report.tasks {
        out += &crate::output::tasks::render(tasks);
    }
    out += &info_box(&info_lines(report, title, &columns));
    out
}

fn secs(ns: f64) -> f64 {
    ns / 1e9
}

/// The table's columns: which optional ones this phase has, and their headers.
struct Columns<'a> {
    /// Regions with calls this phase.
    regions: Vec<&'a RegionStats>,
    /// Whether any region has device times (two GPU columns).
    gpu: bool,
    /// perf counter names (one column each).
    perf_names: Vec<String>,
    /// Whether the tree has calls that awaited (a `busy [s]` column beside the total).
    busy: bool,
    /// The session's wall-clock coverage, when the tree has a session root (`% session`).
    session_ns: Option<i64>,
    headers: Vec<String>,
}

impl<'a> Columns<'a> {
    fn of(report: &'a Report) -> Columns<'a> {
        let regions: Vec<&RegionStats> = report.regions().iter().filter(|r| r.calls > 0).collect();
        let gpu = regions.iter().any(|r| r.gpu_calls > 0);
        let perf_names: Vec<String> = regions
            .iter()
            .find(|r| !r.perf.is_empty())
            .map(|r| r.perf.iter().map(|(n, _)| n.clone()).collect())
            .unwrap_or_default();
        let session_ns = report.tree.as_ref().and_then(|t| {
            t.iter()
                .find(|r| r.depth == 0 && r.name == SESSION_REGION)
                .map(|r| r.coverage_ns)
        });
        let busy = report
            .tree
            .iter()
            .flatten()
            .any(|t| !t.own && t.busy_ns < t.total_ns);
        let mut headers: Vec<String> = vec!["region".into(), "calls".into()];
        if session_ns.is_some() {
            headers.push("% session".into());
        }
        headers.push("total [s]".into());
        if busy {
            headers.push("busy [s]".into());
        }
        headers.extend(["avg [s]", "min [s]", "max [s]", "std [s]"].map(String::from));
        if gpu {
            headers.extend(["gpu total [s]".to_owned(), "gpu avg [s]".to_owned()]);
        }
        headers.extend(perf_names.iter().map(|n| perf_header(n)));
        Columns {
            regions,
            gpu,
            perf_names,
            busy,
            session_ns,
            headers,
        }
    }

    /// A region's extra cells (GPU totals, perf counters); dashes for `None`.
    fn extras(&self, r: Option<&RegionStats>) -> Vec<String> {
        let mut cells = Vec::new();
        if self.gpu {
            match r.filter(|r| r.gpu_calls > 0) {
                Some(r) => {
                    cells.push(format!("{:.6}", secs(r.gpu_total_ns as f64)));
                    cells.push(format!(
                        "{:.3e}",
                        secs(r.gpu_total_ns as f64 / r.gpu_calls as f64)
                    ));
                }
                None => cells.extend(["-".to_owned(), "-".to_owned()]),
            }
        }
        for name in &self.perf_names {
            let v = r.and_then(|r| r.perf.iter().find(|(n, _)| n == name));
            cells.push(v.map_or_else(|| "-".to_owned(), |(_, v)| v.to_string()));
        }
        cells
    }

    /// One row per tree node, indented by depth; a region's first (shallowest) row carries
    /// its region-wide extras.
    fn tree_rows(&self, tree: &[TreeRow]) -> Vec<Vec<String>> {
        let by_name: HashMap<&str, &RegionStats> =
            self.regions.iter().map(|r| (r.name.as_str(), *r)).collect();
        let mut first_row: HashMap<&str, usize> = HashMap::new();
        for (i, t) in tree.iter().enumerate().filter(|(_, t)| !t.own) {
            first_row.entry(t.name.as_str()).or_insert(i);
        }
        let prefixes = tree_prefixes(tree.iter().map(|t| t.depth));
        let mut rows = Vec::with_capacity(tree.len());
        for (i, (t, prefix)) in tree.iter().zip(prefixes).enumerate() {
            let mut row = vec![
                format!("{prefix}{}{}", t.name, if t.recursive { " ↻" } else { "" }),
                if t.own { "-".into() } else { compact(t.calls) },
            ];
            if let Some(session) = self.session_ns {
                let pct = 100.0 * t.coverage_ns as f64 / session.max(1) as f64;
                row.push(format!("{pct:.2}%"));
            }
            row.push(format!("{:.6}", secs(t.total_ns as f64)));
            if self.busy {
                row.push(format!("{:.6}", secs(t.busy_ns as f64)));
            }
            if t.own {
                row.extend(std::iter::repeat_n("-".to_owned(), 4));
                row.extend(std::iter::repeat_n("-".to_owned(), self.extras(None).len()));
            } else {
                let st = &t.stats;
                row.push(format!("{:.3e}", secs(st.mean)));
                row.push(format!("{:.3e}", secs(st.min as f64)));
                row.push(format!("{:.3e}", secs(st.max as f64)));
                row.push(format!("{:.3e}", secs(st.std())));
                let r = (first_row.get(t.name.as_str()) == Some(&i))
                    .then(|| by_name.get(t.name.as_str()).copied())
                    .flatten();
                row.extend(self.extras(r));
            }
            rows.push(row);
        }
        rows
    }

    /// One row per region.
    fn flat_rows(&self) -> Vec<Vec<String>> {
        self.regions
            .iter()
            .map(|r| {
                let mut row = vec![
                    r.name.clone(),
                    compact(r.calls),
                    format!("{:.6}", secs(r.total_ns as f64)),
                    format!("{:.3e}", secs(r.mean_ns)),
                    format!("{:.3e}", secs(r.min_ns as f64)),
                    format!("{:.3e}", secs(r.max_ns as f64)),
                    format!("{:.3e}", secs(r.std_ns)),
                ];
                row.extend(self.extras(Some(r)));
                row
            })
            .collect()
    }
}

/// A perf counter's column header with its unit: the clocks count nanoseconds, every other
/// event counts occurrences.
fn perf_header(event: &str) -> String {
    if event.ends_with("-clock") {
        format!("{event} [ns]")
    } else {
        format!("{event} [count]")
    }
}

/// The tree's drawing before each row's name, from the rows' depths in preorder: `├─ ` for a
/// child with a later sibling, `└─ ` for the last child, and under each ancestor `│  ` while
/// that ancestor has a later sibling, else blanks.
fn tree_prefixes(depths: impl Iterator<Item = usize>) -> Vec<String> {
    let depths: Vec<usize> = depths.collect();
    // last[i]: no later sibling (a later row at the same depth before one shallower).
    let mut last = vec![true; depths.len()];
    let mut seen_at: Vec<bool> = Vec::new(); // per depth: a later row at that depth was seen
    for (i, &d) in depths.iter().enumerate().rev() {
        seen_at.resize(seen_at.len().max(d + 1), false);
        last[i] = !seen_at[d];
        seen_at[d] = true;
        seen_at.truncate(d + 1); // deeper rows after this one belong to other parents
    }
    let mut open: Vec<bool> = Vec::new(); // per depth >= 1: whether that ancestor is not last
    depths
        .iter()
        .zip(&last)
        .map(|(&d, &is_last)| {
            if d == 0 {
                open.clear();
                return String::new();
            }
            open.truncate(d - 1);
            let mut p: String = open
                .iter()
                .map(|&o| if o { "│  " } else { "   " })
                .collect();
            p += if is_last { "└─ " } else { "├─ " };
            open.push(!is_last);
            p
        })
        .collect()
}

/// The rounded box: headers, a rule, then the rows; the first column left-aligned, the
/// others right-aligned.
pub(crate) fn boxed(headers: &[String], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| width(h)).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(width(cell));
        }
    }
    let line = |cells: &[String]| {
        let mut s = String::from("  │ ");
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            let pad = " ".repeat(w - width(cell));
            if i == 0 {
                s += &format!("{cell}{pad}");
            } else {
                s += &format!("   {pad}{cell}");
            }
        }
        s + " │\n"
    };
    let inner = widths.iter().sum::<usize>() + 3 * (widths.len() - 1) + 2;
    let bar = "─".repeat(inner);
    let mut out = format!("\n  ╭{bar}╮\n");
    out += &line(headers);
    out += &format!("  ├{bar}┤\n");
    for row in rows {
        out += &line(row);
    }
    out += &format!("  ╰{bar}╯\n");
    out
}

/// The "Info" box's lines: wall clock, losses, waits, warnings, the profiler's own cost and
/// how to read the table.
fn info_lines(report: &Report, title: &str, columns: &Columns<'_>) -> Vec<String> {
    let mut info = vec![format!("Summary: {title}"), String::new()];
    info.push(format!(
        "Wall clock {:.6} s; {}.",
        report.wall_ns() as f64 / 1e9,
        region_count(columns)
    ));
    push_losses(&mut info, report);
    if let Some(o) = &report.overhead {
        info.push(format!(
            "Profiler overhead: {:.1} ns per call, {:.1} ns per poll; clock {} ({:.1} ns \
             resolution).",
            o.ns_per_call, o.ns_per_poll, o.clock_source, o.clock_resolution_ns
        ));
    }
    info.extend(debug_build_note(OPT_LEVEL, report.overhead.as_ref()));
    push_reading_notes(&mut info, report, columns);
    info
}

/// This crate's optimization level as cargo built it (`0` in a debug build).
const OPT_LEVEL: &str = env!("SCOPE_PROFILER_OPT_LEVEL");

/// The "Info" line saying the profiler was built without optimization (its hot path then
/// costs about ten times more, and the program's own code is usually unoptimized too), with
/// the cost measured at `build()`; `None` for an optimized build or a file read back.
fn debug_build_note(
    opt_level: &str,
    cost: Option<&crate::data::report::SelfCost>,
) -> Option<String> {
    // Only a report of this process's own profiler (it measured its cost at `build()`): a
    // file read back says nothing of the build that wrote it.
    let cost = cost.filter(|_| opt_level == "0")?;
    Some(format!(
        "WARNING: debug build (unoptimized, {:.0} ns per call here): profile a release build \
         (--release).",
        cost.ns_per_call
    ))
}

/// The regions with calls, the same count at finalize and in `scopeprof inspect`: the
/// session's own row (`scope_profiler.session`, in every file) is not counted.
fn region_count(columns: &Columns<'_>) -> String {
    let session =
        columns.regions.iter().any(|r| r.name == SESSION_REGION) || columns.session_ns.is_some();
    let n = columns
        .regions
        .iter()
        .filter(|r| r.name != SESSION_REGION)
        .count();
    if session {
        format!("{n} region(s), not counting the {SESSION_REGION} row")
    } else {
        format!("{n} region(s)")
    }
}

/// Adds the "Info" lines on what was lost or waited for: dropped records and calls, lost
/// detail, backpressure, calls still running, and the report's warnings.
fn push_losses(info: &mut Vec<String>, report: &Report) {
    // Records lost on the way to the flusher; calls the spool could not take are the
    // "detail lost" line below.
    if report.dropped > 0 {
        info.push(format!(
            "WARNING: {} record(s) dropped (the flusher fell behind).",
            report.dropped
        ));
    }
    if report.dropped_calls() > 0 {
        info.push(format!(
            "WARNING: {} call(s) dropped whole (a record could not be buffered).",
            report.dropped_calls()
        ));
    }
    if let Some(lost) = report.detail_lost() {
        info.push(format!(
            "WARNING: {} calls' detail lost: {} ({:.3} s to {:.3} s after the start); the \
             statistics above count them.",
            lost.calls,
            lost.cause,
            lost.first_ns as f64 / 1e9,
            lost.last_ns as f64 / 1e9
        ));
    }
    if report.backpressure_waits() > 0 {
        info.push(format!(
            "Backpressure: threads waited for the flusher {} time(s), {:.3} ms in all.",
            report.backpressure_waits(),
            report.backpressure_wait_ns() as f64 / 1e6
        ));
    }
    if report.in_flight() > 0 {
        info.push(format!(
            "{} call(s) still running; a later finalize reports them.",
            report.in_flight()
        ));
    }
    for w in report.warnings() {
        info.push(format!("WARNING: {w}"));
    }
}

/// Adds the "Info" lines on how to read the table: units, nesting, why it is flat, and what
/// `% session` measures.
fn push_reading_notes(info: &mut Vec<String>, report: &Report, columns: &Columns<'_>) {
    let n_regions = columns.regions.len();
    info.push("Durations are in seconds.".to_owned());
    if n_regions > 1 {
        info.push("Regions may nest, so the summed total can exceed the wall-clock time.".into());
    }
    if report.tree.is_none() && n_regions > 1 {
        match report.flat {
            Some(Flat::Overlap) => info.push(
                "Flat table: calls overlap on a thread (track_async(true) gives tasks lanes)."
                    .into(),
            ),
            Some(Flat::Truncated) => info.push(
                "Flat table: only part of this phase's calls were kept in memory (give an \
                 output file to keep them all)."
                    .into(),
            ),
            Some(Flat::NotWritten) => info.push(
                "Flat table: this phase's calls could not be written; the statistics are exact."
                    .into(),
            ),
            Some(Flat::Aggregate) | None => {}
        }
    }
    if columns.session_ns.is_some() {
        info.push("% session uses wall-clock coverage; overlapping calls count once.".into());
    }
    if report.tree.iter().flatten().any(|t| t.own) {
        info.push("(own): a path's time outside its child calls (await time included).".into());
    }
    if columns.busy {
        info.push(
            "busy [s]: time spent polling, on a CPU; total [s] adds the time suspended in .await."
                .into(),
        );
    }
}

/// The lines in a titled box as wide as the longest.
fn info_box(info: &[String]) -> String {
    let w = info.iter().map(|l| width(l)).max().unwrap_or(0) + 2;
    let mut out = format!("\n  ╭─ Info {}╮\n", "─".repeat(w.saturating_sub(7)));
    for l in info {
        out += &format!("  │ {l}{} │\n", " ".repeat(w - 2 - width(l)));
    }
    out += &format!("  ╰{}╯\n", "─".repeat(w));
    out
}

/// Display width, counting characters (good enough for the names regions have).
fn width(s: &str) -> usize {
    s.chars().count()
}

/// Counts like the Python package: `950`, `1.5k`, `2.0M`, `3.1B`.
fn compact(n: u64) -> String {
    match n {
        0..=999 => n.to_string(),
        1_000..=999_999 => format!("{:.1}k", n as f64 / 1e3),
        1_000_000..=999_999_999 => format!("{:.1}M", n as f64 / 1e6),
        _ => format!("{:.1}B", n as f64 / 1e9),
    }
}

/// The summary table (and, on rank 0 of a multi-rank run, the spread over ranks), as a
/// finalize prints it; titled with the file written, if any.
impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let title = match &self.file {
            Some(p) => p.display().to_string(),
            None => "scope-profiler".to_owned(),
        };
        f.write_str(&render(self, &title))?;
        f.write_str(&crate::data::spread::render_spread(self))
    }
}

#[cfg(test)]
mod tests;

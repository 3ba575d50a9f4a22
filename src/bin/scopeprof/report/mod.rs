//! `scopeprof report FILE -o report.html`, or `report BASE CAND -o ...`: one self-contained
//! HTML page a reviewer can open offline. It shows the summary table (the call tree with
//! exclusive times), a flamegraph, the timeline of the run's busiest window per thread, task
//! and GPU, and the polls and await time of the slowest calls; with two files it shows the
//! candidate and adds the colored diff table against the base.
//!
//! The page stays small whatever the file's size: the timeline holds at most `--max-slices`
//! slices (the window is chosen to hold about that many calls; if more meet it, the longest
//! are kept), the table and the flamegraph leave out call paths below a share of the total,
//! and the page says what it left out. The file is read twice, in bounded memory (`scan`).

mod html;
mod scan;
mod svg;
mod tree;

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;
use scope_profiler::read::StorageLayout;

use crate::compare::diff::{self, Sort, Stat};
use crate::compare::samples;
use crate::compare::table::fmt_ns;
use crate::compare::Select;
use crate::export::{open, TempOut};
use crate::items::Tracks;
use crate::report::tree::Tree;
use html::{note, Page};
use scan::SlowCall;

/// Call paths below this share of the total are left out of the summary table.
const TABLE_MIN_SHARE: f64 = 1.0 / 2000.0;
/// Most rows of the summary table.
const TABLE_ROWS: usize = 600;
/// Call paths below this share are not drawn in the flamegraph.
const FLAME_MIN_SHARE: f64 = 1.0 / 3000.0;
/// Most frames of the flamegraph.
const FLAME_FRAMES: usize = 4000;

/// `scopeprof report` options.
#[derive(Args, Debug)]
pub(crate) struct ReportArgs {
    /// The profile; or BASE CAND: the page then shows CAND and adds its diff against BASE.
    #[arg(required = true, num_args = 1..=2, value_name = "FILE")]
    pub(crate) files: Vec<PathBuf>,
    /// The HTML file to write.
    #[arg(short, long)]
    pub(crate) output: PathBuf,
    /// Most slices drawn in the timeline (the window is chosen to hold about this many calls).
    #[arg(long, default_value_t = 12_000)]
    pub(crate) max_slices: usize,
    /// Draw the flamegraph's wall-clock time (calls, `.await` included) instead of busy time
    /// (polls).
    #[arg(long)]
    pub(crate) wall: bool,
    #[arg(long, default_value_t = crate::sort::DEFAULT_RUN_ITEMS, hide = true)]
    pub(crate) sort_run_items: usize,
}

/// Writes the report (in the reading child).
pub(crate) fn run(a: &ReportArgs) -> Result<(), String> {
    let file = a.files.last().expect("clap requires a file");
    let p = open(file)?;
    let mut page = Page::new(&format!("Profile report: {}", file.display()));
    if let Some(l) = p.label() {
        page.fact("label", l.to_owned());
    }
    page.fact("file", file.display().to_string());
    if let [base, _] = a.files.as_slice() {
        page.fact("compared with", base.display().to_string());
        diff_section(&mut page, base, file)?;
    }
    if p.layout() == StorageLayout::Aggregate {
        let data = samples::read(file, &Select::default())?;
        page.fact("layout", "aggregate (per-region totals only)".into());
        let body = note(
            "This file holds per-region totals only (aggregate layout): there is no call \
             tree, flamegraph, timeline or per-call detail to show.",
        ) + &html::flat_table(&data.regions);
        page.section("summary", "Summary", body);
    } else {
        details(&mut page, &p, a)?;
    }
    let text = page.render();
    let (tmp, mut w) = TempOut::create(&a.output)?;
    w.write_all(text.as_bytes())
        .map_err(|e| format!("{}: cannot write output: {e}", a.output.display()))?;
    tmp.publish(w)
}

/// The colored diff table of BASE against CAND.
fn diff_section(page: &mut Page, base: &Path, cand: &Path) -> Result<(), String> {
    let b = samples::read(base, &Select::default())?;
    let c = samples::read(cand, &Select::default())?;
    let metrics = [Stat::Calls, Stat::Total, Stat::Mean, Stat::P50, Stat::P99];
    let rows = diff::rows(&b, &c, Stat::Total, Sort::Delta, None);
    let mut body = note(&format!(
        "Base {} against candidate {}; change = candidate / base - 1. Red: slower or more, \
         green: faster or fewer. For a verdict that tells noise from a regression, use \
         `scopeprof check`.",
        base.display(),
        cand.display()
    ));
    for n in diff::notes(&[&b, &c], &metrics) {
        body.push_str(&note(&n));
    }
    body.push_str(&html::diff_table(&rows, &metrics));
    page.section("diff", "Diff against the base", body);
    Ok(())
}

/// The flamegraph: of busy time (the polls) unless `--wall` or the file has no polls, else
/// of the call tree's wall-clock time.
fn flame_section(
    page: &mut Page,
    p: &scope_profiler::read::Profile,
    a: &ReportArgs,
    calls: &Tree,
    tracks: &mut Tracks,
) -> Result<(), String> {
    let polls = if a.wall {
        None
    } else {
        scan::poll_tree(p, tracks, &a.output, a.sort_run_items)?
    };
    let (tree, what) = match &polls {
        Some(t) => (t, "busy time (the calls' polls, on a thread; no .await)"),
        None => (calls, "wall-clock time (calls, .await included)"),
    };
    let frames = tree.rows((tree.total() as f64 * FLAME_MIN_SHARE) as u64, FLAME_FRAMES);
    let body = note(&format!(
        "Icicle flamegraph of {what}: callers above callees, width = inclusive time. Click a \
         frame to zoom in."
    )) + "<button id=\"flame-reset\" type=\"button\">reset zoom</button>"
        + &svg::flamegraph(tree, &frames, &tracks.names);
    page.section("flamegraph", "Flamegraph", body);
    Ok(())
}

/// The sections drawn from the calls: summary, flamegraph, timeline, slowest calls.
fn details(
    page: &mut Page,
    p: &scope_profiler::read::Profile,
    a: &ReportArgs,
) -> Result<(), String> {
    let mut tracks = Tracks::new(p);
    let o = scan::overview(p, &mut tracks, &a.output, a.sort_run_items)?;
    page.fact(
        "calls",
        format!(
            "{} in {} regions, {} lanes; wall {}",
            o.calls,
            p.region_names().len(),
            tracks.tracks.len(),
            fmt_ns((o.last - o.first) as f64)
        ),
    );
    let total = o.tree.total();
    let rows = o
        .tree
        .rows((total as f64 * TABLE_MIN_SHARE) as u64, TABLE_ROWS);
    let mut body = note(
        "The call tree: one row per call path (calls nest by time within their thread or \
         task). Total includes the callees, self (exclusive) does not.",
    );
    if rows.len() < o.tree.paths() {
        body.push_str(&note(&format!(
            "Showing the {} heaviest of {} call paths (those above {:.2}% of the total).",
            rows.len(),
            o.tree.paths(),
            TABLE_MIN_SHARE * 100.0
        )));
    }
    if o.overlapping > 0 {
        body.push_str(&note(&format!(
            "{} call(s) overlapped another call of their lane without nesting; they start \
             their own paths.",
            o.overlapping
        )));
    }
    body.push_str(&html::tree_table(&rows, &tracks.names, total));
    page.section("summary", "Summary (call tree)", body);
    flame_section(page, p, a, &o.tree, &mut tracks)?;
    let window = scan::window(&o, a.max_slices);
    let slow: Vec<SlowCall> = o
        .slowest
        .iter()
        .map(|c| SlowCall::new(*c, &tracks))
        .collect();
    let d = scan::detail(p, window, slow, a.max_slices)?;
    timeline_section(page, &o, &d, window, a.max_slices);
    let mut body = note(
        "The longest calls. A call's polls are the intervals it ran on a thread; between them \
         it awaited (await = duration - busy). In the bar, blue is running, grey is waiting.",
    );
    if p.poll_count() == 0 {
        body.push_str(&note(
            "This file has no per-poll records (written without track_async, or by the Python \
             package), so polls and await time are not known.",
        ));
    }
    body.push_str(&html::slow_table(
        &d.slow,
        &d.tracks,
        o.first,
        p.poll_count() > 0,
    ));
    page.section("slowest", "Slowest calls: polls and await time", body);
    Ok(())
}

fn timeline_section(
    page: &mut Page,
    o: &scan::Overview,
    d: &scan::Detail,
    window: (i64, i64),
    max_slices: usize,
) {
    let (svg, dropped) = svg::timeline(&d.slices, &d.tracks, window, o.first);
    let whole = window == (o.first, o.last);
    let mut body = note(&if whole {
        format!(
            "The whole run ({}), one lane per thread, task and GPU.",
            fmt_ns((o.last - o.first) as f64)
        )
    } else {
        format!(
            "The run has {} calls, too many to draw: this is the busiest window of {} (from \
             +{} to +{}), where the lanes spent the most time inside calls.",
            o.calls,
            fmt_ns((window.1 - window.0) as f64),
            fmt_ns((window.0 - o.first) as f64),
            fmt_ns((window.1 - o.first) as f64)
        )
    });
    if d.in_window as usize > d.slices.len() {
        body.push_str(&note(&format!(
            "{} slices meet this window; the {} longest are drawn (limit --max-slices {}).",
            d.in_window,
            d.slices.len(),
            max_slices
        )));
    }
    if dropped > 0 {
        body.push_str(&note(&format!(
            "{dropped} quieter lanes are not drawn (at most {} lanes).",
            svg::MAX_LANES
        )));
    }
    body.push_str(&svg);
    page.section("timeline", "Timeline of the busiest window", body);
}

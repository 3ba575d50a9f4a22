//! The summary table of a file read back: the same call tree and renderer as the summary a
//! finalize prints, so `scopeprof inspect` shows what the run showed.
//!
//! Calls of all ranks are pooled by region name, as the Python summary does; each (rank,
//! thread) and (rank, task) pair stays its own lane for the nesting.

use std::collections::HashMap;

use super::{Profile, ReadError, StorageLayout};
use crate::data::report::{RegionStats, Report};
use crate::data::rows::{CallRecord, Layout, PhaseData, RegionRow};
use crate::data::stats::Stats;
use crate::finalize::nesting::{call_tree, nest, TreeRow};

/// A file's summary: a [`Report`] plus the call tree, renderable as text or JSON.
#[derive(Clone, Debug)]
pub struct Summary {
    report: Report,
    title: String,
    /// The file's path, as given.
    path: String,
}

impl Summary {
    /// Per-region statistics (and the call tree behind [`Summary::render`]).
    pub fn report(&self) -> &Report {
        &self.report
    }

    /// The summary table, exactly as a finalize prints it.
    pub fn render(&self) -> String {
        crate::output::summary::render(&self.report, &self.title)
    }

    /// The table's rows as JSON: `{"file", "title", "wall_ns", "nested", "rows": [{"depth", "name",
    /// "own", "recursive", "calls", "total_ns", "busy_ns", "mean_ns", "min_ns", "max_ns", "std_ns"}]}`
    /// (`busy_ns`: the time its calls were polled, for `own` rows less their children's;
    /// `null` in a flat table).
    /// With nesting, rows are the call tree in display order (`own` rows carry the exclusive
    /// time in `total_ns`); without, one flat row per region. `file` is the file's path, `title`
    /// the summary's title (the run's label and the path).
    pub fn to_json(&self) -> String {
        let mut rows = Vec::new();
        match &self.report.tree {
            Some(tree) => {
                for t in tree {
                    rows.push(json_row(
                        t.depth,
                        &t.name,
                        t.own,
                        t.recursive,
                        t.calls,
                        (t.total_ns, Some(t.busy_ns)),
                        &t.stats,
                    ));
                }
            }
            None => {
                for r in self.report.regions.iter().filter(|r| r.calls > 0) {
                    let st = Stats {
                        count: r.calls,
                        total: r.total_ns,
                        min: r.min_ns,
                        max: r.max_ns,
                        mean: r.mean_ns,
                        m2: r.std_ns * r.std_ns * r.calls as f64,
                    };
                    rows.push(json_row(
                        0,
                        &r.name,
                        false,
                        false,
                        r.calls,
                        (r.total_ns as i64, None),
                        &st,
                    ));
                }
            }
        }
        format!(
            "{{\"file\":{},\"title\":{},\"wall_ns\":{},\"nested\":{},\"rows\":[{}]}}\n",
            json_str(&self.path),
            json_str(&self.title),
            self.report.wall_ns,
            self.report.tree.is_some(),
            rows.join(",")
        )
    }
}

fn json_row(
    depth: usize,
    name: &str,
    own: bool,
    rec: bool,
    calls: u64,
    (total, busy): (i64, Option<i64>),
    st: &Stats,
) -> String {
    let busy = busy.map_or_else(|| "null".to_owned(), |b| b.to_string());
    let (mean, min, max, std) = if own {
        ("null".into(), "null".into(), "null".into(), "null".into())
    } else {
        (
            json_f64(st.mean),
            st.min.to_string(),
            st.max.to_string(),
            json_f64(st.std()),
        )
    };
    format!(
        "{{\"depth\":{depth},\"name\":{},\"own\":{own},\"recursive\":{rec},\"calls\":{calls},\
         \"total_ns\":{total},\"busy_ns\":{busy},\"mean_ns\":{mean},\"min_ns\":{min},\"max_ns\":{max},\"std_ns\":{std}}}",
        json_str(name)
    )
}

fn json_f64(x: f64) -> String {
    if x.is_finite() {
        format!("{x}")
    } else {
        "null".into()
    }
}

/// `s` as a JSON string literal (quoted, with `"`, `\\`, newlines and control characters
/// escaped), as [`Summary::to_json`] writes names; for tools that write JSON beside it.
///
/// ```
/// assert_eq!(scope_profiler::read::json_str("a\"b"), r#""a\"b""#);
/// ```
pub fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Every call of a file, loaded for [`Calls::summary`] (see [`Profile::load_calls`]).
#[derive(Debug)]
pub struct Calls {
    data: Option<PhaseData>,
    aggregate: Option<Summary>,
    title: String,
    path: String,
    /// The file's tasks box (Tokio's own instrumentation).
    tasks: Option<crate::output::tasks::TaskSummary>,
}

impl Calls {
    /// Nests the calls and builds the summary (pure computation, no file access).
    pub fn summary(self) -> Summary {
        if let Some(s) = self.aggregate {
            return s;
        }
        let Some(mut data) = self.data else {
            return Summary {
                report: Report {
                    tasks: self.tasks,
                    ..Report::default()
                },
                title: self.title,
                path: self.path,
            };
        };
        let tree: Option<Vec<TreeRow>> = nest(&mut data, 0).ok().map(|_| call_tree(&data));
        let flat = tree.is_none().then_some(crate::data::report::Flat::Overlap);
        let calls = || data.regions.iter().flat_map(|r| r.calls.iter());
        let first = calls().map(|c| c.start_ns).min().unwrap_or(0);
        let last = calls().map(|c| c.start_ns + c.dur_ns).max().unwrap_or(0);
        let mut regions: Vec<RegionStats> = data
            .regions
            .iter()
            .map(|r| region_stats(&r.name, &r.stats, r.gpu_count, r.gpu_total))
            .collect();
        regions.sort_by_key(|r| std::cmp::Reverse(r.total_ns));
        let report = Report {
            regions,
            wall_ns: last.saturating_sub(first).max(0) as u64,
            tree,
            flat,
            tasks: self.tasks,
            ..Report::default()
        };
        Summary {
            report,
            title: self.title,
            path: self.path,
        }
    }
}

impl Profile {
    /// Reads every call and builds the summary (memory grows with the number of calls).
    ///
    /// # Errors
    /// A [`ReadError`] when the calls cannot be read (see [`Profile::for_each_call`]).
    pub fn summary(&self) -> Result<Summary, ReadError> {
        Ok(self.load_calls(&mut || {})?.summary())
    }

    /// Reads every call into memory for [`Calls::summary`], calling `progress` after each
    /// chunk read.
    ///
    /// # Errors
    /// As [`Profile::summary`]; also when a region's durations add up past `i64::MAX` ns.
    pub fn load_calls(&self, progress: &mut dyn FnMut()) -> Result<Calls, ReadError> {
        let title = self.label().map_or_else(
            || self.path().display().to_string(),
            |l| format!("{l} - {}", self.path().display()),
        );
        let tasks = self.task_summary();
        let path = self.path().display().to_string();
        match self.layout() {
            StorageLayout::Aggregate => Ok(Calls {
                data: None,
                aggregate: Some(self.aggregate_summary(title.clone(), path.clone())),
                title,
                path,
                tasks,
            }),
            StorageLayout::Columnar => Ok(Calls {
                data: Some(self.phase_data(progress)?),
                aggregate: None,
                title,
                path,
                tasks,
            }),
        }
    }

    /// The tasks box of the file's tasks with Tokio's data.
    fn task_summary(&self) -> Option<crate::output::tasks::TaskSummary> {
        crate::output::tasks::summarize(self.tasks().iter().filter_map(|t| {
            let s = t.sched.as_ref()?;
            let stats = crate::TaskStats {
                name: t.name.clone(),
                tokio_id: t.tokio_id,
                spawn_location: s.spawn_location.clone(),
                polls: s.polls.max(0) as u64,
                busy_ns: s.busy_ns.max(0) as u64,
                idle_ns: s.idle_ns.max(0) as u64,
                scheduled_ns: s.scheduled_ns.max(0) as u64,
                first_poll_delay_ns: u64::try_from(s.first_poll_delay_ns).ok(),
            };
            Some((t.rank, stats))
        }))
    }

    /// All calls, pooled by region name, lanes made unique across ranks.
    fn phase_data(&self, progress: &mut dyn FnMut()) -> Result<PhaseData, ReadError> {
        let mut by_name: HashMap<&str, usize> = HashMap::new();
        let mut regions: Vec<RegionRow> = Vec::new();
        let mut threads: HashMap<(u32, i64), u32> = HashMap::new();
        let mut tasks: HashMap<(u32, i64), i64> = HashMap::new();
        let mut totals: Vec<i64> = Vec::new();
        self.for_each_call(1 << 16, |row, chunk| {
            progress();
            let name = self.region_name(row.region);
            let next = regions.len();
            let k = *by_name.entry(name).or_insert(next);
            if k == next {
                regions.push(RegionRow::new(name));
            }
            totals.resize(regions.len(), 0);
            let region = &mut regions[k];
            for c in chunk {
                // Statistics add durations: a corrupt duration must not overflow them.
                totals[k] = totals[k].checked_add(c.dur_ns).ok_or_else(|| ReadError {
                    path: self.path().to_path_buf(),
                    problem: format!(
                        "the durations of region `{name}` add up past 2^63 ns: corrupt durations"
                    ),
                })?;
                let n = threads.len() as u32;
                let thread = *threads.entry((row.rank, c.thread)).or_insert(n);
                let task = if c.task >= 0 {
                    let n = tasks.len() as i64;
                    *tasks.entry((row.rank, c.task)).or_insert(n)
                } else {
                    -1
                };
                region.stats.add(c.dur_ns as u64);
                if c.gpu_ns >= 0 {
                    region.gpu_count += 1;
                    region.gpu_total = region.gpu_total.saturating_add(c.gpu_ns);
                }
                region.calls.push(CallRecord {
                    start_ns: c.start_ns,
                    dur_ns: c.dur_ns,
                    thread,
                    task,
                    await_ns: c.await_ns,
                    gpu_ns: c.gpu_ns,
                    call_id: -1,
                    parent_id: -1,
                    sched_ns: -1,
                });
            }
            Ok(())
        })?;
        Ok(PhaseData {
            start_time_ns: self.start_time_ns().unwrap_or(0),
            ..PhaseData::new(Layout::Columnar, regions)
        })
    }

    /// The flat summary of an aggregate file.
    fn aggregate_summary(&self, title: String, path: String) -> Summary {
        let mut by_name: HashMap<&str, Stats> = HashMap::new();
        for a in self.aggregates() {
            let s = by_name.entry(self.region_name(a.region)).or_default();
            let (min, max) = (a.min_ns.max(0) as u64, a.max_ns.max(0) as u64);
            let total = a.total_ns.max(0) as u64;
            // Only count, total, min and max are stored: mean is exact, the spread is unknown.
            if s.count == 0 {
                (s.min, s.max) = (min, max);
            } else {
                (s.min, s.max) = (s.min.min(min), s.max.max(max));
            }
            s.count = s.count.saturating_add(a.count);
            s.total = s.total.saturating_add(total);
            s.mean = s.total as f64 / s.count.max(1) as f64;
        }
        let mut regions: Vec<RegionStats> = by_name
            .iter()
            .map(|(name, st)| region_stats(name, st, 0, 0))
            .collect();
        regions.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
        Summary {
            report: Report {
                regions,
                flat: Some(crate::data::report::Flat::Aggregate),
                ..Report::default()
            },
            title,
            path,
        }
    }
}

fn region_stats(name: &str, st: &Stats, gpu_calls: u64, gpu_total: i64) -> RegionStats {
    RegionStats {
        gpu_calls,
        gpu_total_ns: gpu_total.max(0) as u64,
        ..RegionStats::new(name, st)
    }
}

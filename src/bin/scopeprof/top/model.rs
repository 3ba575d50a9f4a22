//! The snapshot model of `scopeprof top`: what the views show for one time window, computed
//! from the calls that ended in it. No terminal and no file here: [`Collector`] is fed calls
//! (by `source`), and [`Collector::finish`] gives the [`Snapshot`]. Memory is bounded by the
//! calls in the window (their durations, and per-thread intervals), never by the run.

use scope_profiler::read::Call;

/// Slowest calls kept per region for the detail view.
pub(crate) const SLOWEST: usize = 20;

/// A time window: the calls that ended in `start_ns..=end_ns` (profiler clock, ns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Window {
    pub(crate) start_ns: i64,
    pub(crate) end_ns: i64,
}

impl Window {
    /// Its length in ns (at least 1).
    pub(crate) fn len_ns(&self) -> i64 {
        (self.end_ns - self.start_ns).max(1)
    }

    /// Whether a call ending at `end_ns` is in it.
    pub(crate) fn holds_end(&self, end_ns: i64) -> bool {
        end_ns >= self.start_ns && end_ns <= self.end_ns
    }
}

/// The window asked for: the whole recording, or the last `ns` up to the present.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WindowSpec {
    All,
    Last(i64),
}

impl WindowSpec {
    /// Parses `all`, `10s`, `500ms`, `2m`, `1h` or a plain number of seconds.
    pub(crate) fn parse(s: &str) -> Result<WindowSpec, String> {
        let s = s.trim();
        if s == "all" {
            return Ok(WindowSpec::All);
        }
        let (num, unit) = match s.find(|c: char| c.is_ascii_alphabetic()) {
            Some(i) => s.split_at(i),
            None => (s, "s"),
        };
        let scale = match unit {
            "ns" => 1.0,
            "us" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => {
                return Err(format!(
                    "--window {s:?}: unknown unit (ms, s, m, h or `all`)"
                ))
            }
        };
        match num.parse::<f64>() {
            Ok(v) if v > 0.0 && (v * scale) < 1e18 => Ok(WindowSpec::Last((v * scale) as i64)),
            _ => Err(format!(
                "--window {s:?}: expected a positive duration such as 10s, 500ms, 2m, or `all`"
            )),
        }
    }

    /// The window over a recording spanning `span` (earliest start, latest end), ending at
    /// `end` (the present when `None`); `None` when nothing is recorded yet.
    pub(crate) fn select(&self, span: Option<(i64, i64)>, end: Option<i64>) -> Option<Window> {
        let (first, last) = span?;
        let end_ns = end.unwrap_or(last).min(last);
        Some(match *self {
            WindowSpec::All => Window {
                start_ns: first,
                end_ns: last,
            },
            WindowSpec::Last(ns) => Window {
                start_ns: end_ns.saturating_sub(ns),
                end_ns,
            },
        })
    }
}

/// The `q` quantile (0..=1) of `sorted` by nearest rank (`None` when empty).
pub(crate) fn percentile(sorted: &[i64], q: f64) -> Option<i64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// One of the slowest calls of a region in the window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SlowCall {
    pub(crate) dur_ns: i64,
    pub(crate) start_ns: i64,
    pub(crate) thread: i64,
    pub(crate) task: i64,
    pub(crate) await_ns: i64,
}

/// One row of the regions view.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RegionRow {
    pub(crate) id: u32,
    pub(crate) name: String,
    pub(crate) calls: u64,
    pub(crate) calls_per_s: f64,
    /// Sum of durations over the window's length (above 1 with several threads).
    pub(crate) wall_share: f64,
    pub(crate) p50_ns: Option<i64>,
    pub(crate) p99_ns: Option<i64>,
    pub(crate) max_ns: Option<i64>,
    /// Await time over total time of its calls.
    pub(crate) await_share: Option<f64>,
    pub(crate) total_ns: i64,
    /// Open calls (`None`: not known, see `source::OpenCalls`).
    pub(crate) open: Option<u64>,
    /// Log2 buckets of durations: bucket `k` holds `2^k <= dur < 2^(k+1)` ns (k = 0: < 2 ns).
    pub(crate) histogram: Vec<u64>,
    pub(crate) slowest: Vec<SlowCall>,
}

/// One row of the threads view.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ThreadRow {
    pub(crate) index: i64,
    pub(crate) name: String,
    pub(crate) calls: u64,
    /// Time covered by its calls outside tasks, over the window's length.
    pub(crate) utilisation: f64,
}

/// One row of the tasks view: a task's calls that ended in the window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TaskRow {
    pub(crate) index: i64,
    pub(crate) calls: u64,
    /// Region of its longest call (its root, as a rule).
    pub(crate) root: String,
    pub(crate) longest_ns: i64,
    pub(crate) busy_ns: i64,
    pub(crate) await_ns: i64,
}

/// Everything the views show for one window.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Snapshot {
    pub(crate) window: Window,
    pub(crate) regions: Vec<RegionRow>,
    pub(crate) threads: Vec<ThreadRow>,
    pub(crate) tasks: Vec<TaskRow>,
}

#[derive(Default)]
struct RegionAcc {
    durs: Vec<i64>,
    total: i64,
    awaits: i64,
    slowest: Vec<SlowCall>,
}

/// Per thread: calls, intervals of calls outside tasks (clipped to the window), and the
/// length at which they are merged next.
type ThreadAcc = (u64, Vec<(i64, i64)>, usize);

#[derive(Default)]
struct TaskAcc {
    calls: u64,
    longest: (i64, u32, i64),
}

/// Folds the calls of one window into a [`Snapshot`].
pub(crate) struct Collector {
    window: Window,
    regions: Vec<RegionAcc>,
    threads: std::collections::BTreeMap<i64, ThreadAcc>,
    tasks: std::collections::BTreeMap<i64, TaskAcc>,
}

impl Collector {
    /// A collector for `window`.
    pub(crate) fn new(window: Window) -> Collector {
        Collector {
            window,
            regions: Vec::new(),
            threads: Default::default(),
            tasks: Default::default(),
        }
    }

    /// Adds one call of region `region` when it ended in the window.
    pub(crate) fn add(&mut self, region: u32, c: &Call) {
        let end = c.start_ns.saturating_add(c.dur_ns);
        if !self.window.holds_end(end) {
            return;
        }
        let r = region as usize;
        if self.regions.len() <= r {
            self.regions.resize_with(r + 1, RegionAcc::default);
        }
        let acc = &mut self.regions[r];
        acc.durs.push(c.dur_ns);
        acc.total = acc.total.saturating_add(c.dur_ns);
        acc.awaits = acc.awaits.saturating_add(c.await_ns.max(0));
        keep_slowest(&mut acc.slowest, c);
        if c.thread >= 0 {
            let t = self
                .threads
                .entry(c.thread)
                .or_insert((0, Vec::new(), COMPACT_AT));
            t.0 += 1;
            if c.task < 0 {
                t.1.push((c.start_ns.max(self.window.start_ns), end));
                if t.1.len() >= t.2 {
                    // Nested and overlapping calls merge, so memory follows the thread's
                    // busy stretches more than its calls; merged again at twice the size
                    // left (amortized O(log n) per call).
                    merge(&mut t.1);
                    t.2 = (2 * t.1.len()).max(COMPACT_AT);
                }
            }
        }
        if c.task >= 0 {
            let t = self.tasks.entry(c.task).or_default();
            t.calls += 1;
            if c.dur_ns >= t.longest.0 {
                t.longest = (c.dur_ns, region, c.await_ns.max(0));
            }
        }
    }

    /// The snapshot; `names` by region id, `thread_names` by thread index, `open` the open
    /// calls per region id when known.
    pub(crate) fn finish(
        self,
        names: &[String],
        thread_names: &[(i64, String)],
        open: Option<&[u64]>,
    ) -> Snapshot {
        let secs = self.window.len_ns() as f64 / 1e9;
        let name = |id: usize| names.get(id).cloned().unwrap_or_else(|| format!("#{id}"));
        let mut regions = Vec::new();
        let count = self.regions.len().max(names.len());
        let mut accs = self.regions;
        accs.resize_with(count, RegionAcc::default);
        for (id, mut acc) in accs.into_iter().enumerate() {
            acc.durs.sort_unstable();
            let calls = acc.durs.len() as u64;
            let mut histogram = vec![0u64; 64];
            for &d in &acc.durs {
                histogram[63 - (d.max(1) as u64).leading_zeros() as usize] += 1;
            }
            while histogram.last() == Some(&0) {
                histogram.pop();
            }
            regions.push(RegionRow {
                id: id as u32,
                name: name(id),
                calls,
                calls_per_s: calls as f64 / secs,
                wall_share: acc.total as f64 / self.window.len_ns() as f64,
                p50_ns: percentile(&acc.durs, 0.5),
                p99_ns: percentile(&acc.durs, 0.99),
                max_ns: acc.durs.last().copied(),
                await_share: (acc.total > 0).then(|| acc.awaits as f64 / acc.total as f64),
                total_ns: acc.total,
                open: open.map(|o| o.get(id).copied().unwrap_or(0)),
                histogram,
                slowest: acc.slowest,
            });
        }
        let thread_name = |i: i64| {
            thread_names
                .iter()
                .find(|(k, _)| *k == i)
                .map_or_else(|| format!("thread {i}"), |(_, n)| n.clone())
        };
        let threads = self
            .threads
            .into_iter()
            .map(|(index, (calls, spans, _))| ThreadRow {
                index,
                name: thread_name(index),
                calls,
                utilisation: covered(spans) as f64 / self.window.len_ns() as f64,
            })
            .collect();
        let tasks = self
            .tasks
            .into_iter()
            .map(|(index, t)| TaskRow {
                index,
                calls: t.calls,
                root: name(t.longest.1 as usize),
                longest_ns: t.longest.0,
                busy_ns: t.longest.0 - t.longest.2,
                await_ns: t.longest.2,
            })
            .collect();
        Snapshot {
            window: self.window,
            regions,
            threads,
            tasks,
        }
    }
}

/// Keeps the [`SLOWEST`] longest calls in `slowest`, longest first.
fn keep_slowest(slowest: &mut Vec<SlowCall>, c: &Call) {
    if slowest.len() == SLOWEST && slowest[SLOWEST - 1].dur_ns >= c.dur_ns {
        return;
    }
    let s = SlowCall {
        dur_ns: c.dur_ns,
        start_ns: c.start_ns,
        thread: c.thread,
        task: c.task,
        await_ns: c.await_ns.max(0),
    };
    let at = slowest.partition_point(|x| x.dur_ns >= c.dur_ns);
    slowest.insert(at, s);
    slowest.truncate(SLOWEST);
}

/// Intervals of a thread kept before they are first merged.
const COMPACT_AT: usize = 1 << 16;

/// Replaces `spans` by their union: sorted, disjoint intervals.
fn merge(spans: &mut Vec<(i64, i64)>) {
    spans.sort_unstable();
    let mut out = 0usize;
    for k in 0..spans.len() {
        let (a, b) = spans[k];
        if out > 0 && a <= spans[out - 1].1 {
            spans[out - 1].1 = spans[out - 1].1.max(b);
        } else {
            spans[out] = (a, b);
            out += 1;
        }
    }
    spans.truncate(out);
}

/// Length of the union of the intervals `spans`.
fn covered(mut spans: Vec<(i64, i64)>) -> i64 {
    merge(&mut spans);
    spans.iter().map(|(a, b)| b - a).sum()
}

#[cfg(test)]
#[path = "model_tests.rs"]
mod tests;

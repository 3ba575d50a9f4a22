//! What one finalize hands to the writers: the regions with calls in this phase, their exact
//! statistics and (in time-only mode) every call.
//!
//! This is the boundary between the flusher (which builds it) and the output formats (HDF5 file,
//! text summary), so both sides can change independently.

use crate::stats::Stats;

/// How the profile stores its calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Layout {
    /// One row per call (`storage_layout = "columnar"`).
    Columnar,
    /// Only per-region aggregates (`storage_layout = "aggregate"`).
    Aggregate,
}

/// One completed call, times in nanoseconds on the profiler's clock (CLOCK_MONOTONIC based).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CallRecord {
    /// Absolute start (first enter).
    pub start_ns: i64,
    /// End minus start (last exit minus first enter), >= 0.
    pub dur_ns: i64,
    /// Dense index of the thread of the first poll.
    pub thread: u32,
    /// Dense task index, -1 outside any task.
    pub task: i64,
    /// Time suspended between polls (duration minus busy time), 0 for one-poll calls.
    pub await_ns: i64,
    /// CUDA-event device time of the call (ns), -1 when not measured.
    pub gpu_ns: i64,
}

/// One region with at least one call in this phase.
#[derive(Clone, Debug)]
pub(crate) struct RegionRow {
    /// The region's name (the span name).
    pub name: String,
    /// Source file of the first callsite, "" when unknown.
    pub file: String,
    /// Source line of the first callsite, -1 when unknown.
    pub line: i64,
    /// Exact statistics of this phase's calls.
    pub stats: Stats,
    /// Every call, in the order they completed (empty in the aggregate layout).
    pub calls: Vec<CallRecord>,
    /// Calls with a device time.
    pub gpu_count: u64,
    /// Sum of their device times (ns).
    pub gpu_total: i64,
}

/// Everything one finalize writes.
#[derive(Clone, Debug)]
pub(crate) struct PhaseData {
    /// Columnar or aggregate.
    pub layout: Layout,
    /// Regions with calls this phase, in region-id order.
    pub regions: Vec<RegionRow>,
    /// Clock value at build() (ns).
    pub start_time_ns: i64,
    /// Clock value at the start of this finalize (ns).
    pub finalize_time_ns: i64,
    /// ISO-8601 UTC wall time at build().
    pub timestamp: String,
    /// The run label, if set.
    pub label: Option<String>,
    /// Records lost so far (0 in a healthy run).
    pub dropped: u64,
    /// perf_event totals, when counters were configured.
    pub perf: Option<PerfTotals>,
    /// LIKWID results, when LIKWID markers were configured and results were found.
    pub likwid: Option<LikwidResults>,
}

/// perf_event counter totals per region (`rank0/perf_events/<region>`, schema spec §4.1).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct PerfTotals {
    /// Event names as given to the builder (`perf stat -e` spelling), in column order.
    pub event_names: Vec<String>,
    /// One entry per region that recorded calls this phase.
    pub regions: Vec<PerfRegion>,
}

/// One region's perf totals.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct PerfRegion {
    /// Region name.
    pub name: String,
    /// Calls of the region this phase.
    pub calls: u64,
    /// Counter totals over all the region's polls (inclusive of nested regions), in the order
    /// of `event_names`.
    pub values: Vec<u64>,
}

/// LIKWID marker results read back after a `likwid-perfctr -m` run (schema spec §4.4).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct LikwidResults {
    /// Every `LIKWID_*` environment variable of the process.
    pub env: Vec<(String, String)>,
    /// One entry per marker region.
    pub regions: Vec<LikwidRegion>,
}

/// One LIKWID marker region (`rank0/likwid/regions/<tag>`).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct LikwidRegion {
    /// The region's real name.
    pub tag: String,
    /// Event group id, -1 unknown.
    pub group_id: i64,
    /// Event group name, e.g. `CLOCK`.
    pub group_name: String,
    /// `full_api`, `marker_file` or `marker_api`.
    pub source: String,
    /// Event names (rows of `events`).
    pub event_names: Vec<String>,
    /// Counter names.
    pub counter_names: Vec<String>,
    /// Metric names (rows of `metrics`).
    pub metric_names: Vec<String>,
    /// Hardware threads (columns).
    pub cpus: Vec<i64>,
    /// Seconds per hardware thread.
    pub times: Vec<f64>,
    /// Calls per hardware thread.
    pub call_counts: Vec<i64>,
    /// Event values, `events[e][t]`.
    pub events: Vec<Vec<f64>>,
    /// Metric values, `metrics[m][t]`.
    pub metrics: Vec<Vec<f64>>,
}

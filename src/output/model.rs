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
}

//! What a finalize's first pass learns about a phase's calls (counts, summary rows, which
//! optional columns to write) and what nesting found (call ids, parents, exclusive times, the
//! call tree): the plain results the output formats write.

use ::hdf5::H5Type;

use crate::data::stats::Stats;

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
    pub(crate) own_ids: bool,
    /// In a flight-recorder dump with a threshold: the calls it left out, counted under the
    /// calls that enclosed them (`None`: no such calls, or the phase could not be nested).
    pub(crate) below: Option<BelowByParent>,
}

/// The calls `Builder::flight_min_duration` left out of a dump, each counted under the
/// innermost kept call of its lane that enclosed it (the parent the file's nesting gives it).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct BelowByParent {
    /// (row, the call's index in its row, left-out calls it enclosed), by row and index.
    pub parents: Vec<(u32, u64, u64)>,
    /// Left-out calls no kept call of their lane enclosed.
    pub top: u64,
}

/// Why a phase was not nested.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NotNested {
    /// Two calls of one lane partly overlap (rows of both).
    Overlap(Overlap),
}

impl Scan {
    /// Total calls.
    pub(crate) fn total(&self) -> u64 {
        self.counts.iter().sum()
    }
}

/// The result of nesting one phase.
#[derive(Debug, Default)]
pub(crate) struct Nested {
    /// The first id handed out.
    pub first_id: i64,
    /// Calls nested.
    pub(crate) calls: u64,
    /// Per-call ranks, only when the calls were nested in memory.
    pub(crate) ids: Option<Ranks>,
    /// Exclusive time per row (ns).
    pub exclusive: Vec<i64>,
    /// The summary's call tree, when asked for.
    pub tree: Option<Vec<TreeRow>>,
    /// Calls the flight recorder's threshold left out, counted per enclosing call's storage
    /// position (ascending; calls with any only).
    pub(crate) below: Vec<(u32, u64)>,
    /// Left-out calls no call of their lane enclosed.
    pub(crate) below_top: u64,
}

/// By storage position: each call's rank in (start asc, end desc) order (its id minus the
/// first id) and its parent's rank.
#[derive(Debug)]
pub(crate) struct Ranks {
    pub(crate) of: Vec<u32>,
    /// [`Ranks::ROOT`] for a lane root.
    pub(crate) parent: Vec<u32>,
}

impl Ranks {
    /// The parent rank of a call no other call of its lane contains.
    pub(crate) const ROOT: u32 = u32::MAX;

    pub(crate) fn new(calls: usize) -> Ranks {
        Ranks {
            of: vec![0; calls],
            parent: vec![Ranks::ROOT; calls],
        }
    }
}

impl Nested {
    /// Whether per-call ids are known (phases nested in memory).
    pub(crate) fn has_ids(&self) -> bool {
        self.ids.is_some()
    }

    /// The call id of the call stored at position `g` (-1 when ids are not known).
    pub(crate) fn call_id(&self, g: usize) -> i64 {
        match &self.ids {
            Some(r) => self.first_id + i64::from(r.of[g]),
            None => -1,
        }
    }

    /// The parent's call id of the call stored at position `g` (-1 for a lane root).
    pub(crate) fn parent_id(&self, g: usize) -> i64 {
        match self.ids.as_ref().map(|r| r.parent[g]) {
            None | Some(Ranks::ROOT) => -1,
            Some(p) => self.first_id + i64::from(p),
        }
    }

    /// The first id free for the next phase.
    pub(crate) fn next_id(&self) -> i64 {
        self.first_id + self.calls as i64
    }
}

/// Two calls of one lane overlap without one containing the other (rows of both).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Overlap {
    pub(crate) row: u32,
    pub(crate) other: u32,
}

/// One row of the summary's call tree: a call path (`A > B > C`, recursion collapsed).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct TreeRow {
    /// Depth in the tree (0 = root).
    pub depth: usize,
    /// Region name (or `(own)` for an exclusive-time row).
    pub name: String,
    /// Whether the path recurses into itself.
    pub recursive: bool,
    /// Calls on the path.
    pub calls: u64,
    /// Statistics of the path's outermost calls (recursive inner calls are folded in).
    pub stats: Stats,
    /// Wall-clock coverage: the union of the path's call intervals, per lane-free time line.
    pub coverage_ns: i64,
    /// For `(own)` rows: the exclusive time; else the inclusive total.
    pub total_ns: i64,
    /// Busy (on-CPU: polling) time, the sum of the calls' polls; for `(own)` rows less the
    /// children's busy time. Equals `total_ns` for calls that never await.
    pub busy_ns: i64,
    /// Whether this is an `(own)` row.
    pub own: bool,
}

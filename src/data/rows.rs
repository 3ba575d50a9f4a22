//! What one finalize hands to the writers ([`PhaseData`]): the regions with calls in this
//! phase and their exact statistics; in the columnar layout every call, held in memory
//! (without an output file, up to a cap) or in the spool files the flusher wrote
//! ([`SpooledCalls`], read back one frame at a time); the thread and task tables and the
//! polls; and the extras (sources, line profiles, the profiler's own cost).
//!
//! This is the boundary between the flusher and finalize, which build it, and the output
//! formats (HDF5 file, text summary), which only read it, so both sides can change
//! independently.

use crate::data::stats::Stats;

/// Name of the synthetic region spanning each phase, which the Python reader's `% session`
/// column is computed against. (If the program has a span of that name, its calls are written
/// instead of the synthetic one.)
pub const SESSION_REGION: &str = "scope_profiler.session";

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
    /// Call id (unique per process, parents before children), -1 when nesting failed.
    pub call_id: i64,
    /// Call id of the directly enclosing call on the same lane, -1 for a lane root.
    pub parent_id: i64,
    /// Scheduled time of its task's suspensions while it was open (ns; see
    /// [`crate::flusher::sched`]), -1 outside a task with Tokio's instrumentation.
    pub sched_ns: i64,
}

impl CallRecord {
    /// A call from `start_ns` lasting `dur_ns` on thread `thread`, outside any task, not yet
    /// nested (no await time, no device time).
    pub(crate) fn new(start_ns: i64, dur_ns: i64, thread: u32) -> CallRecord {
        CallRecord {
            start_ns,
            dur_ns,
            thread,
            task: -1,
            await_ns: 0,
            gpu_ns: -1,
            call_id: -1,
            parent_id: -1,
            sched_ns: -1,
        }
    }
}

/// One recording thread (`thread_table`), times absolute on the profiler clock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ThreadRow {
    /// Dense thread index (what `CallRecord::thread` holds).
    pub index: u32,
    /// Thread name.
    pub name: String,
    /// OS thread id.
    pub native_id: i64,
    /// Registration time (ns).
    pub start_ns: i64,
    /// Exit time (ns), -1 while alive.
    pub end_ns: i64,
    /// CPU time (ns).
    pub cpu_ns: i64,
}

/// One Tokio task (`task_table`), times absolute on the profiler clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TaskRow {
    /// Dense task index (what `CallRecord::task` holds).
    pub index: i64,
    /// Tokio's task id.
    pub tokio_id: u64,
    /// Thread index of the task's latest poll.
    pub thread_index: u32,
    /// Start of the task's first outermost call (ns).
    pub created_ns: i64,
    /// End of its last outermost call (ns), -1 while one is still running.
    pub done_ns: i64,
    /// Polls of its outermost calls.
    pub steps: i64,
    /// Time its outermost calls held a thread (ns).
    pub running_ns: i64,
    /// Time its outermost calls were suspended in `.await` (ns).
    pub suspended_ns: i64,
    /// Region of its first outermost call: an index into [`PhaseData::region_names`]
    /// (`u32::MAX` = none), like [`PollRecord::region`].
    pub root_region: u32,
    /// Its polls as Tokio's instrumentation shows them (`polls < 0`: none).
    pub sched: TaskSched,
}

/// A task's polls from Tokio's own instrumentation (see [`crate::flusher::sched`]): the
/// `task_table` columns `spawn_location`, `busy_ns`, `idle_ns`, `scheduled_ns`, `polls` and
/// `first_poll_delay_ns`, and the name of its lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TaskSched {
    /// Interned spawn site (name, location): an id into [`PhaseExtra::sites`] (0: unknown).
    pub site: u32,
    /// Polls (-1: the task has no such data).
    pub polls: i64,
    /// Time inside its polls.
    pub busy_ns: i64,
    /// From the end of a poll to the wake that ended the suspension.
    pub idle_ns: i64,
    /// From that wake to the start of the next poll.
    pub scheduled_ns: i64,
    /// From the spawn to the first poll (-1: not in this row).
    pub first_poll_delay_ns: i64,
}

impl Default for TaskSched {
    fn default() -> Self {
        TaskSched {
            site: 0,
            polls: -1,
            busy_ns: -1,
            idle_ns: -1,
            scheduled_ns: -1,
            first_poll_delay_ns: -1,
        }
    }
}

impl TaskSched {
    /// Whether the task has this data.
    pub(crate) fn has(&self) -> bool {
        self.polls >= 0
    }
}

impl TaskRow {
    /// Puts `rows` in index order (the order of `task_table`; rows come retired in
    /// completion order). Indices are unique, so the unstable sort gives the one order there
    /// is, in half the time of the stable sort (~45 against ~85 ms for a million rows; gathering
    /// each row at its index would save only ~10 % more).
    pub(crate) fn order(rows: &mut [TaskRow]) {
        if !rows.is_sorted_by_key(|r| r.index) {
            rows.sort_unstable_by_key(|r| r.index);
        }
    }
}

/// One poll: an enter -> exit interval of a span on one thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PollRecord {
    /// Index into [`PhaseData::region_names`].
    pub region: u32,
    /// Absolute start (ns).
    pub start_ns: i64,
    /// Duration (ns).
    pub dur_ns: i64,
    /// Thread index.
    pub thread: u32,
    /// Task index, -1 outside a task.
    pub task: i64,
    /// A task's poll: from the wake that ended its previous suspension to its start (ns); -1
    /// for a task's first poll and for polls of other spans.
    pub sched_ns: i64,
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
    /// Sum of the calls' exclusive times (ns), -1 when nesting is unknown.
    pub exclusive_ns: i64,
}

impl RegionRow {
    /// A region named `name` with no calls yet, no source location and nesting unknown.
    pub(crate) fn new(name: impl Into<String>) -> RegionRow {
        RegionRow {
            name: name.into(),
            file: String::new(),
            line: -1,
            stats: Stats::default(),
            calls: Vec::new(),
            gpu_count: 0,
            gpu_total: 0,
            exclusive_ns: -1,
        }
    }

    /// The synthetic `scope_profiler.session` region: one call from `start_ns` lasting
    /// `dur_ns` on thread `thread` (no call in the aggregate layout, only its statistics).
    pub(crate) fn session(start_ns: i64, dur_ns: i64, thread: u32, layout: Layout) -> RegionRow {
        let mut stats = Stats::default();
        stats.add(dur_ns.max(0) as u64);
        RegionRow {
            stats,
            calls: if layout == Layout::Columnar {
                vec![CallRecord::new(start_ns, dur_ns.max(0), thread)]
            } else {
                Vec::new()
            },
            ..RegionRow::new(SESSION_REGION)
        }
    }
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
    /// Calls dropped whole, backpressure waits and corrupt records so far.
    pub losses: crate::data::report::Losses,
    /// perf_event totals, when counters were configured.
    pub perf: Option<PerfTotals>,
    /// LIKWID results, when LIKWID markers were configured and results were found.
    pub likwid: Option<LikwidResults>,
    /// Recording threads (written as `thread_table` when threads are tracked).
    pub threads: Vec<ThreadRow>,
    /// Tokio tasks with calls this phase (written as `task_table` when tasks are tracked).
    pub tasks: Vec<TaskRow>,
    /// Every poll of this phase (kept when tasks are tracked).
    pub polls: Vec<PollRecord>,
    /// Every region name known to the profiler, indexed by [`PollRecord::region`].
    pub region_names: Vec<String>,
    /// Whether to write the thread table.
    pub track_threads: bool,
    /// Whether to write the task table and task columns.
    pub track_async: bool,
    /// Where the calls are when they are not in `regions[..].calls`: spool files on disk.
    pub spooled: Option<SpooledCalls>,
    /// Source texts, line profiles and the profiler's own cost.
    pub extra: PhaseExtra,
}

/// A phase's calls in spool files, read back one frame at a time.
#[derive(Clone, Debug, Default)]
pub(crate) struct SpooledCalls {
    /// The spool files, read in this order.
    pub files: Vec<std::path::PathBuf>,
    /// Row of each spool region id (`u32::MAX`: not written).
    pub row_of: Vec<u32>,
    /// How many task rows and polls the files hold (room reserved when they are read back).
    pub lanes: crate::data::rows::LaneCounts,
    /// Where a phase too large to nest in memory sorts its calls (a temporary file): the
    /// output's directory. `None`: beside the first spool file, which is the output's
    /// directory for a finalize.
    pub scratch: Option<std::path::PathBuf>,
}

impl PhaseData {
    /// A phase of `regions` with everything else empty: no threads, tasks or polls, no
    /// losses, times 0. Readers and tests fill in what they have with struct update syntax.
    pub(crate) fn new(layout: Layout, regions: Vec<RegionRow>) -> PhaseData {
        PhaseData {
            layout,
            regions,
            start_time_ns: 0,
            finalize_time_ns: 0,
            timestamp: String::new(),
            label: None,
            dropped: 0,
            losses: Default::default(),
            perf: None,
            likwid: None,
            threads: Vec::new(),
            tasks: Vec::new(),
            polls: Vec::new(),
            region_names: Vec::new(),
            track_threads: false,
            track_async: false,
            spooled: None,
            extra: Default::default(),
        }
    }
}

/// What a phase carries besides the calls: captured sources, line profiles, self-measured
/// overhead (see [`crate::output::source`], [`crate::flusher::lines`], [`crate::builder::overhead`]).
#[derive(Clone, Debug, Default)]
pub(crate) struct PhaseExtra {
    /// Source text per region row (same order as `PhaseData::regions`); empty = none captured.
    pub source_texts: Vec<String>,
    /// Line profiles (`rank0/line_profile/<i>`).
    pub line_profiles: Vec<crate::data::lines::LineProfile>,
    /// The profiler's cost measured at `build()`.
    pub overhead: Option<crate::data::report::SelfCost>,
    /// Subtracted from a parent's exclusive time per child call (0 = no compensation).
    pub child_overhead_ns: i64,
    /// Tokio's own instrumentation: spawn sites and counts.
    pub tokio: TokioExtra,
    /// The calls open at a crash (a phase `recover` wrote from a spool's open-calls frame).
    pub open_calls: Option<crate::data::open_calls::OpenCalls>,
    /// The time a flight-recorder dump covers (a dump's phase only).
    pub flight: Option<crate::data::flight::FlightWindow>,
}

/// What Tokio's own instrumentation (`--cfg tokio_unstable`) adds to a phase besides columns.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct TokioExtra {
    /// Spawn sites, site `id` at index `id - 1` (what [`TaskSched::site`] names).
    pub sites: Vec<crate::data::sites::SiteInfo>,
    /// Tasks, wakes and the like, since `build()`.
    pub counts: crate::data::rows::SchedCounts,
    /// Calls of Tokio's own spans left out since `build()` (not regions unless asked for).
    pub hidden_calls: u64,
}

impl TokioExtra {
    /// The spawn site `id` (`None`: 0 or unknown).
    pub(crate) fn site(&self, id: u32) -> Option<&crate::data::sites::SiteInfo> {
        id.checked_sub(1).and_then(|i| self.sites.get(i as usize))
    }
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

/// A task's row, folded incrementally from its settled roots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TaskTotals {
    /// Dense index in this phase (-1: none given yet).
    pub index: i64,
    /// Tokio's task id.
    pub tokio_id: u64,
    /// Thread of the latest poll.
    pub thread_index: u32,
    /// Start of the first root (`i64::MAX` = none yet).
    pub created_ns: i64,
    /// End of the last root (-1 = none yet).
    pub done_ns: i64,
    /// Polls of the roots.
    pub steps: i64,
    /// Busy time of the roots.
    pub running_ns: i64,
    /// Await time of the roots.
    pub suspended_ns: i64,
    /// Region of the first root (`u32::MAX` = none).
    pub root_region: u32,
    /// Its polls from Tokio's own instrumentation, if any.
    pub polls: PollTotals,
}

/// A task's polls folded into one row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PollTotals {
    /// The row's columns (`polls < 0`: no poll seen).
    pub sched: TaskSched,
    /// The spawn, when in this row (-1: not).
    pub spawn_ns: i64,
    /// Start of the row's first poll (-1: none).
    pub first_ns: i64,
    /// End of its last poll (-1: none).
    pub last_ns: i64,
    /// The task has ended.
    pub ended: bool,
}

impl Default for PollTotals {
    fn default() -> Self {
        PollTotals {
            sched: TaskSched::default(),
            spawn_ns: -1,
            first_ns: -1,
            last_ns: -1,
            ended: false,
        }
    }
}

impl PollTotals {
    /// The values the spool keeps of them, in order (see [`Self::from_spool`]).
    pub(crate) fn to_spool(self) -> [i64; 10] {
        let s = &self.sched;
        [
            i64::from(s.site),
            s.polls,
            s.busy_ns,
            s.idle_ns,
            s.scheduled_ns,
            s.first_poll_delay_ns,
            self.spawn_ns,
            self.first_ns,
            self.last_ns,
            i64::from(self.ended),
        ]
    }

    /// Back from [`Self::to_spool`]'s values.
    pub(crate) fn from_spool(v: &[i64; 10]) -> PollTotals {
        PollTotals {
            sched: TaskSched {
                site: u32::try_from(v[0]).unwrap_or(0),
                polls: v[1],
                busy_ns: v[2],
                idle_ns: v[3],
                scheduled_ns: v[4],
                first_poll_delay_ns: v[5],
            },
            spawn_ns: v[6],
            first_ns: v[7],
            last_ns: v[8],
            ended: v[9] != 0,
        }
    }
}

/// How many task rows and polls a spool phase holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct LaneCounts {
    pub tasks: u64,
    pub polls: u64,
}

/// Counts for the file's metadata.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SchedCounts {
    /// Tasks spawned (with Tokio's instrumentation).
    pub tasks: u64,
    /// Wakes matched to a live task.
    pub wakes: u64,
    /// Wakes of tasks that had ended (or whose span id belonged to no task): ignored.
    pub ended_wakes: u64,
    /// Wakes that found their task already woken (or in a poll that was woken before).
    pub extra_wakes: u64,
    /// Suspensions that ended without a recorded wake (idle throughout).
    pub unwoken: u64,
}

#[cfg(test)]
mod tests {
    use super::TaskRow;

    fn rows(indices: &[i64]) -> Vec<TaskRow> {
        indices
            .iter()
            .map(|&index| TaskRow {
                index,
                tokio_id: index.wrapping_add(100) as u64,
                thread_index: 0,
                created_ns: index,
                done_ns: -1,
                steps: 1,
                running_ns: 0,
                suspended_ns: 0,
                root_region: 0,
                sched: Default::default(),
            })
            .collect()
    }

    fn indices(rows: &[TaskRow]) -> Vec<i64> {
        rows.iter().map(|r| r.index).collect()
    }

    #[test]
    fn task_rows_are_put_in_index_order_whatever_their_indices() {
        // A permutation, rows travelling with their index.
        let mut r = rows(&[3, 0, 4, 1, 2]);
        TaskRow::order(&mut r);
        assert_eq!(indices(&r), [0, 1, 2, 3, 4]);
        assert!(
            r.iter().all(|t| t.tokio_id == t.index as u64 + 100),
            "rows move whole"
        );
        // Gaps, repeats and negative indices.
        for input in [
            &[5, 1, 9][..],
            &[2, 0, 2, 1],
            &[1, 1],
            &[-1, 0],
            &[0, 2, 1, 2],
        ] {
            let mut r = rows(input);
            TaskRow::order(&mut r);
            let mut want = input.to_vec();
            want.sort_unstable();
            assert_eq!(indices(&r), want, "{input:?}");
        }
        TaskRow::order(&mut []);
    }
}

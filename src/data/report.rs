//! What a finalize returns: per-region statistics of the calls completed in this phase.

use crate::data::rows::PerfTotals;

/// Exact statistics of one region's calls completed since the previous finalize.
///
/// ```
/// # use scope_profiler::ScopeLayer;
/// # use tracing_subscriber::prelude::*;
/// let (layer, guard) = ScopeLayer::builder().no_output().summary(false).build().unwrap();
/// let subscriber = tracing_subscriber::registry().with(layer);
/// tracing::subscriber::with_default(subscriber, || {
///     for _ in 0..3 {
///         tracing::info_span!("solve").in_scope(|| std::hint::black_box(42));
///     }
/// });
/// let report = guard.finalize().unwrap();
/// let solve = report.region("solve").unwrap();
/// assert_eq!(solve.calls, 3);
/// assert!(solve.min_ns <= solve.max_ns);
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct RegionStats {
    /// The region's name (the span name; same-named callsites pool into one region).
    pub name: String,
    /// Calls completed in this phase.
    pub calls: u64,
    /// Sum of the calls' durations (first enter to last exit), in nanoseconds.
    pub total_ns: u64,
    /// Shortest call (0 when `calls == 0`).
    pub min_ns: u64,
    /// Longest call.
    pub max_ns: u64,
    /// Mean duration.
    pub mean_ns: f64,
    /// Population standard deviation of the durations.
    pub std_ns: f64,
    /// Source file of the region's first callsite.
    pub file: Option<String>,
    /// Source line of the region's first callsite.
    pub line: Option<u32>,
    /// Calls completed since `build()`, over all phases.
    pub lifetime_calls: u64,
    /// Calls with a CUDA device time (0 without `cuda_timing`).
    pub gpu_calls: u64,
    /// Sum of those device times, ns.
    pub gpu_total_ns: u64,
    /// perf_event totals of this phase's calls, `(event, total)` in the configured order
    /// (empty without `perf_events`).
    pub perf: Vec<(String, u64)>,
}

impl RegionStats {
    /// Fills `perf` from this phase's perf totals.
    pub(crate) fn set_perf(&mut self, perf: &PerfTotals) {
        if let Some(region) = perf.regions.iter().find(|r| r.name == self.name) {
            self.perf = perf
                .event_names
                .iter()
                .cloned()
                .zip(region.values.iter().copied())
                .collect();
        }
    }

    /// A region named `name` with the statistics `st` (lifetime calls = this phase's), no
    /// source location, no device time and no perf totals.
    pub(crate) fn new(name: &str, st: &crate::data::stats::Stats) -> RegionStats {
        RegionStats {
            name: name.to_owned(),
            calls: st.count,
            total_ns: st.total,
            min_ns: st.min,
            max_ns: st.max,
            mean_ns: st.mean,
            std_ns: st.std(),
            file: None,
            line: None,
            lifetime_calls: st.count,
            gpu_calls: 0,
            gpu_total_ns: 0,
            perf: Vec::new(),
        }
    }

    /// A test region: `calls` calls taking `total_ns` in all (the other statistics 0).
    #[cfg(test)]
    pub(crate) fn of_total(name: &str, calls: u64, total_ns: u64) -> RegionStats {
        let st = crate::data::stats::Stats {
            count: calls,
            total: total_ns,
            ..Default::default()
        };
        RegionStats::new(name, &st)
    }
}

/// What load cost the run: calls dropped whole, backpressure waits, corrupt records. All
/// counts are since `build()`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Losses {
    pub dropped_calls: u64,
    pub waits: u64,
    pub wait_ns: u64,
    pub corrupt: u64,
    /// `follows_from` links left out: beyond the side channel's bound, or naming a span the
    /// profiler did not know (see `crate::recording::follows`).
    pub follows_lost: u64,
}

/// Calls of a phase whose per-call detail (start, end, thread, task) could not be written,
/// because the spool beside the output could not be (a full disk, a read-only or removed
/// directory). Their statistics are not lost: every region's counts and times in the
/// [`Report`] include them.
///
/// ```
/// # use scope_profiler::ScopeLayer;
/// let (_layer, guard) = ScopeLayer::builder().no_output().summary(false).build()?;
/// assert!(guard.finalize()?.detail_lost().is_none()); // a healthy phase
/// # Ok::<(), scope_profiler::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct DetailLost {
    /// How many calls.
    pub calls: u64,
    /// Start of the earliest of them, ns after `build()`.
    pub first_ns: u64,
    /// End of the latest of them, ns after `build()`.
    pub last_ns: u64,
    /// Why, in a few words (`"disk full"`, `"read-only file system"`, ...).
    pub cause: String,
}

/// Why a phase's summary has no call tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Flat {
    /// The aggregate layout keeps no calls to nest.
    Aggregate,
    /// Two calls of one lane partly overlap.
    Overlap,
    /// Only part of the calls were kept (in memory, above the cap).
    Truncated,
    /// The phase's calls could not be written whole (see [`Report::detail_lost`]).
    NotWritten,
}

/// The result of one [`FlushGuard::finalize`](crate::FlushGuard::finalize).
///
/// It covers the calls completed since the previous finalize (a "phase"); regions that
/// completed calls only in earlier phases are listed with `calls == 0` and their
/// `lifetime_calls`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Report {
    pub(crate) regions: Vec<RegionStats>,
    pub(crate) dropped: u64,
    pub(crate) spool_lost: u64,
    pub(crate) losses: Losses,
    pub(crate) in_flight: u64,
    pub(crate) wall_ns: u64,
    pub(crate) warnings: Vec<String>,
    pub(crate) tree: Option<Vec<crate::data::scan::TreeRow>>,
    /// Why the summary is a flat table rather than the call tree (`None`: a tree, or none was
    /// asked for).
    pub(crate) flat: Option<Flat>,
    pub(crate) file: Option<std::path::PathBuf>,
    pub(crate) overhead: Option<crate::data::report::SelfCost>,
    /// Rank 0 of a multi-rank run: every region's spread over ranks.
    pub(crate) ranks: Vec<crate::data::spread::RankSpread>,
    /// Calls of this phase whose per-call detail the spool lost.
    pub(crate) detail_lost: Option<DetailLost>,
    /// A multi-rank run: how its file was written.
    pub(crate) mpi_write: Option<crate::data::spread::MpiWrite>,
    /// Tokio tasks' time (Tokio's own instrumentation), when the phase has any.
    pub(crate) tasks: Option<crate::data::tasks::TaskSummary>,
    /// A flight-recorder dump: the time it covers.
    pub(crate) flight: Option<crate::data::flight::FlightWindow>,
    /// A finalize's report: the flight-recorder dumps written since the previous finalize.
    pub(crate) dumps: Vec<std::path::PathBuf>,
}

impl Report {
    /// Every region that has completed a call since `build()`, sorted by this phase's total
    /// time, longest first.
    pub fn regions(&self) -> &[RegionStats] {
        &self.regions
    }

    /// On rank 0 of a multi-rank run ([`Builder::mpi`](crate::Builder::mpi)): every region's
    /// calls and total time on each rank, with min/mean/max and the imbalance; empty on other
    /// ranks and in single-process runs.
    pub fn ranks(&self) -> &[crate::data::spread::RankSpread] {
        &self.ranks
    }

    /// In a multi-rank run ([`Builder::mpi`](crate::Builder::mpi)), on every rank: how this
    /// phase's file was written, in parallel through MPI-IO (feature `mpio`) or gathered by the
    /// token relay; also `metadata/mpi_write` in the file. `None` in single-process runs and
    /// when no file was written.
    pub fn mpi_write(&self) -> Option<crate::data::spread::MpiWrite> {
        self.mpi_write
    }

    /// With Tokio's own instrumentation (a program built with
    /// `RUSTFLAGS="--cfg tokio_unstable"` and Tokio's `tracing` feature, and
    /// [`track_async(true)`](crate::Builder::track_async)): the tasks of this phase with the most
    /// scheduled time (woken, waiting for a worker), most first, at most ten; empty without
    /// the instrumentation. The summary's tasks box lists them; see `docs/latency.md`.
    pub fn tasks(&self) -> &[crate::data::tasks::TaskStats] {
        self.tasks.as_ref().map_or(&[], |t| &t.top)
    }

    /// How many tasks [`tasks`](Self::tasks) chose from, and their sums (name `all N
    /// tasks`); `None` without Tokio's instrumentation.
    pub fn all_tasks(&self) -> Option<(u64, &crate::data::tasks::TaskStats)> {
        self.tasks.as_ref().map(|t| (t.tasks, &t.all))
    }

    /// The region named `name`.
    pub fn region(&self, name: &str) -> Option<&RegionStats> {
        self.regions.iter().find(|r| r.name == name)
    }

    /// What one recorded call adds to its parent's time, in ns, as measured at `build()`
    /// (`None` when disabled). Also in the file's `metadata` as `overhead_ns_per_call`.
    pub fn overhead_ns_per_call(&self) -> Option<f64> {
        self.overhead.as_ref().map(|o| o.ns_per_call)
    }

    /// What one poll (enter + exit) adds, in ns, as measured at `build()`.
    pub fn overhead_ns_per_poll(&self) -> Option<f64> {
        self.overhead.as_ref().map(|o| o.ns_per_poll)
    }

    /// Everything lost since `build()` (0 in a healthy run): the records the recording side
    /// lost (lanes, thread teardown, unmatched and corrupt records) plus the calls the spool
    /// could not take ([`spool_lost_calls`](Self::spool_lost_calls)). Prefer
    /// [`dropped_calls`](Self::dropped_calls) and `spool_lost_calls`: they count calls and say
    /// where the loss happened.
    pub fn dropped(&self) -> u64 {
        self.dropped + self.spool_lost
    }

    /// Calls dropped whole since `build()` because one of their records could not be buffered
    /// (0 in a healthy run; see [`Builder::lossy`](crate::Builder::lossy)). A dropped call is
    /// in no region's statistics and not in the file: never half a call.
    pub fn dropped_calls(&self) -> u64 {
        self.losses.dropped_calls
    }

    /// Times since `build()` a recording thread waited for the flusher because the buffer
    /// budget was used up (backpressure; 0 when the flusher keeps up or with `lossy(true)`).
    pub fn backpressure_waits(&self) -> u64 {
        self.losses.waits
    }

    /// Total time recording threads spent waiting for the flusher since `build()`, ns.
    pub fn backpressure_wait_ns(&self) -> u64 {
        self.losses.wait_ns
    }

    /// Records the flusher rejected as corrupt since `build()` (never followed; 0 unless
    /// something overwrote the profiler's buffers).
    pub fn corrupt_records(&self) -> u64 {
        self.losses.corrupt
    }

    /// Calls completed and assembled since `build()` that the spool could not take because
    /// writing it failed (a full disk, say); the finalize after the failure returns the
    /// error.
    pub fn spool_lost_calls(&self) -> u64 {
        self.spool_lost
    }

    /// The file this finalize published (`None` without an output, or when writing failed):
    /// the output, a numbered file with rotation, or a `<stem>.late.h5` name when the output
    /// already holds an earlier phase of this profiler.
    pub fn file(&self) -> Option<&std::path::Path> {
        self.file.as_deref()
    }

    /// Calls of this phase whose per-call detail could not be written (a full disk, a
    /// read-only or removed output directory), with their time range and why; `None` when
    /// nothing was lost. Such a phase's finalize returns [`Error::Partial`](crate::Error::Partial),
    /// whose report this is: its statistics count every call, lost detail or not.
    pub fn detail_lost(&self) -> Option<&DetailLost> {
        self.detail_lost.as_ref()
    }

    /// Calls entered but not closed at this finalize; a later finalize reports them.
    pub fn in_flight(&self) -> u64 {
        self.in_flight
    }

    /// Problems the sinks reported (events that could not be counted, LIKWID without MSR
    /// access, ...); also printed in the summary.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Wall-clock time of this phase (from `build()` or the previous finalize), ns; for a
    /// flight-recorder dump, the time it covers.
    pub fn wall_ns(&self) -> u64 {
        self.wall_ns
    }

    /// A flight-recorder dump ([`FlushGuard::dump`](crate::FlushGuard::dump)): the time it
    /// covers, ns, up to when it was asked for; every call that ended in it is in the dump,
    /// whole. At least the window asked for once the program has run that long, unless the
    /// disk budget shrank it (then [`warnings`](Self::warnings) says so). `None` for a
    /// finalize's report.
    pub fn window_ns(&self) -> Option<u64> {
        self.flight.as_ref().map(|w| w.covered_ns() as u64)
    }

    /// The flight recorder's dumps ([`FlushGuard::dump`](crate::FlushGuard::dump), signals,
    /// `POST /dump`, triggers) written since the previous finalize, in the order they were
    /// written; the summary lists them too. Empty for a dump's own report.
    pub fn dumps(&self) -> &[std::path::PathBuf] {
        &self.dumps
    }

    /// A flight-recorder dump with [`Builder::flight_min_duration`](crate::Builder::flight_min_duration):
    /// per region, the calls in its window left out for being shorter than the threshold
    /// (regions with any). They are in the run's statistics, not in the dump's calls.
    pub fn calls_below_threshold(&self) -> &[(String, u64)] {
        self.flight.as_ref().map_or(&[], |w| &w.below[..])
    }
}

/// The measured cost of the profiler on this machine.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SelfCost {
    /// What one recorded call (create, enter, exit, close) adds to its parent, ns.
    pub ns_per_call: f64,
    /// What one poll (enter + exit of an existing span) adds, ns.
    pub ns_per_poll: f64,
    /// Smallest step between two clock reads, ns.
    pub clock_resolution_ns: f64,
    /// The clock the hot path reads.
    pub clock_source: String,
}

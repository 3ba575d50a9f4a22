//! `ScopeLayer::builder()`: options, their validation and the environment overrides.
//!
//! Everything is checked in [`Builder::build`], so a mistake (an unwritable output path, a
//! zero flush interval) is an [`Error`] before the program starts, never a panic later. The
//! options themselves, their checks and the environment overrides are in [`crate::config`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::config::{Config, Mode};
use crate::finalize::guard::FlushGuard;
use crate::recording::layer::ScopeLayer;
use crate::recording::shared::Shared;
use crate::recording::subscriber::ScopeSubscriber;
use crate::sink::Sinks;
use crate::Error;

mod flight;
mod live;
#[cfg(feature = "prometheus")]
mod metrics;
pub(crate) mod overhead;

/// Configures and builds a [`ScopeLayer`] and its [`FlushGuard`].
///
/// ```no_run
/// use scope_profiler::{Mode, ScopeLayer};
/// use tracing_subscriber::prelude::*;
///
/// let (layer, guard) = ScopeLayer::builder()
///     .mode(Mode::TimeOnly)
///     .output("profiling_data.h5")
///     .label("my run")
///     .build()?;
/// tracing_subscriber::registry().with(layer).init();
/// // ... instrumented code ...
/// let report = guard.finalize()?;
/// # Ok::<(), scope_profiler::Error>(())
/// ```
#[derive(Clone, Debug, Default)]
#[must_use = "call .build() to get the layer"]
pub struct Builder {
    config: Config,
}

impl Builder {
    /// What to record (default [`Mode::TimeOnly`]).
    pub fn mode(mut self, mode: Mode) -> Self {
        self.config.mode = mode;
        self
    }

    /// Where finalize writes the HDF5 profile (default `profiling_data.h5`, like the Python
    /// package). The location is checked at `build()`.
    pub fn output(mut self, path: impl Into<PathBuf>) -> Self {
        self.config.output = Some(path.into());
        self
    }

    /// Keeps results in memory only: finalize returns the [`Report`](crate::Report) and
    /// writes no file.
    pub fn no_output(mut self) -> Self {
        self.config.output = None;
        self
    }

    /// Whether finalize prints the summary table to stderr (default `true`).
    pub fn summary(mut self, on: bool) -> Self {
        self.config.summary = on;
        self
    }

    /// Prints the summary of every finalize to `writer` instead of stderr (a log file, a
    /// buffer, the program's own output). [`Report`](crate::Report)'s `Display` gives the
    /// same text for one report.
    ///
    /// ```
    /// let (layer, guard) = scope_profiler::ScopeLayer::builder()
    ///     .no_output()
    ///     .summary_to(std::io::stdout())
    ///     .build()?;
    /// # drop((layer, guard));
    /// # Ok::<(), scope_profiler::Error>(())
    /// ```
    pub fn summary_to(mut self, writer: impl std::io::Write + Send + 'static) -> Self {
        self.config.summary_to = Some(crate::config::SummaryWriter(std::sync::Arc::new(
            std::sync::Mutex::new(Box::new(writer)),
        )));
        self
    }

    /// A label for the run, stored in the file and shown in summaries.
    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.config.label = Some(label.into());
        self
    }

    /// How often the flusher writes the calls it has assembled to the spool file beside the
    /// output (default 1 s): what a crash can lose at most, since a later `build()` recovers
    /// the spool. Draining the recording threads' buffers does not depend on it: the flusher
    /// drains every 2 ms while records come (up to 32 ms apart while they do not), and at once
    /// when a thread waits for a buffer.
    pub fn spool_sync_interval(mut self, interval: Duration) -> Self {
        self.config.flush_interval = interval;
        self
    }

    /// The old name of [`spool_sync_interval`](Self::spool_sync_interval), which says what it
    /// sets: it never was the interval at which buffers are drained.
    #[deprecated(since = "0.1.0", note = "renamed `spool_sync_interval`")]
    pub fn flush_interval(self, interval: Duration) -> Self {
        self.spool_sync_interval(interval)
    }

    /// Records the thread of every call (each OS thread is a lane).
    pub fn track_threads(mut self, on: bool) -> Self {
        self.config.track_threads = on;
        self
    }

    /// Records the Tokio task of every call and its await-suspended time. Task lanes need
    /// thread lanes: with it on, threads are tracked whatever
    /// [`track_threads`](Self::track_threads) says, in whichever order the two are called.
    pub fn track_async(mut self, on: bool) -> Self {
        self.config.track_async = on;
        self
    }

    /// With Tokio's own instrumentation (a program built with `RUSTFLAGS="--cfg tokio_unstable"`
    /// and Tokio's `tracing` feature) and [`track_async`](Self::track_async): makes each
    /// task's `runtime.spawn` span a call too, the root call of its task's lane (region
    /// `runtime.spawn`). Off by default: a task's span then only defines its lane and its
    /// `task_table` row, so call trees and `coro_name` stay as without the instrumentation.
    /// See `docs/latency.md`.
    ///
    /// ```
    /// # use scope_profiler::ScopeLayer;
    /// let (layer, guard) = ScopeLayer::builder()
    ///     .no_output()
    ///     .track_async(true)
    ///     .task_regions(true)
    ///     .build()?;
    /// # Ok::<(), scope_profiler::Error>(())
    /// ```
    pub fn task_regions(mut self, on: bool) -> Self {
        self.config.task_regions = on;
        self
    }

    /// With Tokio's own instrumentation (see [`task_regions`](Self::task_regions)): makes
    /// Tokio's resource spans (`runtime.resource`, `runtime.resource.async_op`,
    /// `runtime.resource.async_op.poll`: timers, channels, semaphores) regions. Off by
    /// default: their calls are left out and counted in the file's metadata
    /// (`tokio_hidden_calls`).
    pub fn tokio_resources(mut self, on: bool) -> Self {
        self.config.tokio_resources = on;
        self
    }

    /// Compresses the file's event columns with gzip (deflate + shuffle) at `level` 0-9.
    pub fn gzip(mut self, level: u8) -> Self {
        self.config.gzip = Some(level);
        self
    }

    /// Linux perf_event counters summed per region, named as for `perf stat -e`: `cycles`,
    /// `instructions`, `cache-references`, `cache-misses`, `branches`, `branch-misses`,
    /// `cpu-clock`, `task-clock`, `page-faults`, `context-switches`. Counters are opened once
    /// per thread and read at every enter and exit; nested regions count inclusively.
    ///
    /// An unknown name, or an event this machine cannot count, is an error at `build()`
    /// (see [`perf_skip_unsupported`](Self::perf_skip_unsupported)). Needs the `perf` feature
    /// (on by default).
    pub fn perf_events<I, S>(mut self, events: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.config.perf_events = events.into_iter().map(Into::into).collect();
        self
    }

    /// With `true`, perf events the machine cannot count are dropped at `build()` (and named in
    /// the summary) instead of failing the build.
    pub fn perf_skip_unsupported(mut self, on: bool) -> Self {
        self.config.perf_skip_unsupported = on;
        self
    }

    /// LIKWID marker regions named after the regions (`liblikwid` is loaded at run time).
    /// Needs the `likwid` feature.
    pub fn likwid(mut self, on: bool) -> Self {
        self.config.likwid = on;
        self
    }

    /// NVTX ranges named after the regions, for Nsight Systems. Needs the `nvtx` feature.
    pub fn nvtx(mut self, on: bool) -> Self {
        self.config.nvtx = on;
        self
    }

    /// CUDA-event device time per call (`libcuda` is loaded at run time; no GPU driver is an
    /// error at `build()`). Needs the `cuda` feature.
    pub fn cuda_timing(mut self, on: bool) -> Self {
        self.config.cuda_timing = on;
        self
    }

    /// With CUDA timing, synchronize the stream at every exit so the CPU end time includes the
    /// device work.
    pub fn cuda_sync_on_exit(mut self, on: bool) -> Self {
        self.config.cuda_sync_on_exit = on;
        self
    }

    /// The CUDA stream to record events on, as its raw `CUstream` handle (default 0: the
    /// default stream).
    ///
    /// # Safety
    /// The value goes to the CUDA driver as a `CUstream` (`cuEventRecord`) at every call's
    /// enter and exit. It must be 0 or a stream created in the CUDA context current on the
    /// threads that enter the spans, and that stream must outlive the profiler (until the
    /// guard's finalize or drop has returned). An invalid handle is undefined behaviour in
    /// the driver.
    pub unsafe fn cuda_stream(mut self, raw_stream: usize) -> Self {
        self.config.cuda_stream = raw_stream;
        self
    }

    // --- Long-running services: rotation, retention, durability (see docs/guide.md,
    // "Profiling a service") ---

    /// Writes a phase file every `period`: the output `profile.h5` becomes `profile.0001.h5`,
    /// `profile.0002.h5`, ... (four digits, from 1, no gaps), each a complete profile of the
    /// calls completed in its period; the final `finalize()` (or the guard's drop) writes the
    /// next number. Automatic rotations print no summary. Needs an output file.
    ///
    /// ```no_run
    /// # use scope_profiler::ScopeLayer;
    /// # use std::time::Duration;
    /// let (layer, guard) = ScopeLayer::builder()
    ///     .output("service.h5")
    ///     .rotate_every(Duration::from_secs(3600))
    ///     .max_files(24)
    ///     .build()?;
    /// # Ok::<(), scope_profiler::Error>(())
    /// ```
    pub fn rotate_every(mut self, period: Duration) -> Self {
        self.config.rotate_every = Some(period);
        self
    }

    /// With [`rotate_every`](Self::rotate_every): keeps only the newest `n` phase files this
    /// profiler wrote, deleting the oldest after each rotation.
    pub fn max_files(mut self, n: usize) -> Self {
        self.config.max_files = Some(n);
        self
    }

    /// The permission bits of the profiles this profiler publishes (default `0o600`: only
    /// the owner reads them, as `perf record` creates `perf.data`, since a profile holds
    /// source text and the program's names; see "What a profile contains" in docs/guide.md).
    /// `0o644` shares them with everyone on the machine. The bits are set exactly, after the
    /// file is complete and before it is published (the umask does not apply); the file is
    /// `0600` while it is written. The spool stays `0600` whatever this says.
    ///
    /// `build()` fails with [`Error::InvalidOption`] for bits beyond `0o777` (set-id, sticky).
    ///
    /// ```no_run
    /// # use scope_profiler::ScopeLayer;
    /// let (layer, guard) = ScopeLayer::builder()
    ///     .output("shared/profile.h5")
    ///     .file_mode(0o644)
    ///     .build()?;
    /// # Ok::<(), scope_profiler::Error>(())
    /// ```
    pub fn file_mode(mut self, mode: u32) -> Self {
        self.config.file_mode = mode;
        self
    }

    /// With `true`, every spool write is fsynced, and each published profile and its directory
    /// are fsynced before and after the rename, so power loss keeps everything up to the last
    /// flush (default `false`: a killed process loses nothing flushed, power loss may).
    pub fn durable(mut self, on: bool) -> Self {
        self.config.durable = on;
        self
    }

    // --- Line timing, source capture, overhead compensation -----------------------------

    /// Line timing: every `tracing` event inside a span is a checkpoint, and the time since the
    /// call's previous checkpoint (or the start of the current poll) goes to the event's line;
    /// the rest of the call's running time goes to the region's own line. Written as the
    /// reference's `rank0/line_profile` groups (`scope-profiler line-profile FILE`). Off by
    /// default; when off, events cost what they cost without this layer.
    ///
    /// ```
    /// # use scope_profiler::ScopeLayer;
    /// let (layer, guard) = ScopeLayer::builder().no_output().line_timing(true).build()?;
    /// # Ok::<(), scope_profiler::Error>(())
    /// ```
    pub fn line_timing(mut self, on: bool) -> Self {
        self.config.line_timing = on;
        self
    }

    /// Whether finalize reads each region's source text into the file (`source_texts`, and the
    /// line profiles' `source`): the whole fn item of an `#[instrument]` fn, the rest of the
    /// enclosing block of an `info_span!` (at most 200 lines / 16 KiB). Default `true`; a file
    /// that cannot be found gives an empty text, never an error.
    pub fn capture_source(mut self, on: bool) -> Self {
        self.config.capture_source = on;
        self
    }

    /// Another directory to look for callsite source files in (after the working directory
    /// and `CARGO_MANIFEST_DIR`). May be given several times.
    pub fn source_root(mut self, dir: impl Into<PathBuf>) -> Self {
        self.config.source_roots.push(dir.into());
        self
    }

    /// Subtracts each child call's measured profiler overhead (see the `overhead_ns_per_call`
    /// metadata key) from its parent's exclusive time, in the summary and in
    /// `exclusive_totals`. Raw durations are never changed. Default `false`.
    pub fn compensate_overhead(mut self, on: bool) -> Self {
        self.config.compensate_overhead = on;
        self
    }

    // --- Buffering -----------------------------------------------------------------------

    /// Profiles an MPI job into one file per phase (feature `mpi`): every rank's regions,
    /// threads and tasks, each row with its rank, as the Python package writes a multi-rank
    /// run. `build()` uses the program's MPI if it is initialized (the program finalizes it),
    /// else initializes it with the highest thread level available and finalizes it when the
    /// guard drops. Each rank's times are shifted onto rank 0's clock (offsets measured by
    /// ping-pong at each finalize, stored in `metadata`).
    ///
    /// **Every finalize becomes collective**: [`FlushGuard::finalize`](crate::FlushGuard::finalize),
    /// `finalize_to` and the guard's drop must be reached by every rank, in the same order,
    /// like an MPI collective; a rank that skips one blocks the others. Rotation
    /// ([`rotate_every`](Self::rotate_every)) and [`Mode::Aggregate`] are not available with it.
    /// Without it, ranks started by a launcher write `<stem>.rank<N>.h5` each (see
    /// [`merge_ranks`](crate::merge_ranks)).
    ///
    /// How the file is written: with the `mpio` feature (parallel HDF5), every rank writes its
    /// own rows of it through MPI-IO, which needs the output on a file system every rank
    /// shares; without it, or with [`mpi_relay`](Self::mpi_relay) or [`gzip`](Self::gzip),
    /// rank 0 gathers every rank's part through a token relay. See `docs/mpi.md`.
    ///
    /// ```no_run
    /// # use scope_profiler::ScopeLayer;
    /// let (layer, guard) = ScopeLayer::builder().output("run.h5").mpi(true).build()?;
    /// // ... the MPI program, on every rank ...
    /// let report = guard.finalize()?; // on every rank; rank 0 publishes run.h5
    /// # Ok::<(), scope_profiler::Error>(())
    /// ```
    pub fn mpi(mut self, on: bool) -> Self {
        self.config.mpi = on;
        self
    }

    /// With [`mpi`](Self::mpi) and the `mpio` feature: gathers every rank's phase on rank 0
    /// through the token relay instead of writing the file in parallel (default `false`). The
    /// relay needs no shared file system; the parallel write's rank 0 does not grow with the
    /// ranks' calls. Without `mpio` the relay is the only way, and this changes nothing.
    ///
    /// ```no_run
    /// # use scope_profiler::ScopeLayer;
    /// let (layer, guard) = ScopeLayer::builder()
    ///     .output("/local/run.h5") // a directory only rank 0's node sees
    ///     .mpi(true)
    ///     .mpi_relay(true)
    ///     .build()?;
    /// # Ok::<(), scope_profiler::Error>(())
    /// ```
    pub fn mpi_relay(mut self, on: bool) -> Self {
        self.config.mpi_relay = on;
        self
    }

    /// Test hook: after each phase written in parallel, the relay also publishes the same
    /// phase at `path`, so that the two files can be compared. Feature `testing` (unstable, not part of the API).
    #[doc(hidden)]
    #[cfg(feature = "testing")]
    pub fn __mpi_also_relay(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.config.mpi_also_relay = Some(path.into());
        self
    }

    /// Bounds the memory of all recording threads' buffers together (default
    /// [`DEFAULT_BUFFER_BUDGET`](crate::DEFAULT_BUFFER_BUDGET), 32 MiB; at least [`MIN_BUFFER_BUDGET`](crate::MIN_BUFFER_BUDGET)). Buffers are taken
    /// from and returned to one pool, so the bound holds for any number of threads, and those
    /// of exited threads are reused. When the budget is used up because the flusher is behind,
    /// a recording thread waits for it (see [`lossy`](Self::lossy)).
    ///
    /// ```
    /// let (layer, guard) = scope_profiler::ScopeLayer::builder()
    ///     .no_output()
    ///     .buffer_budget(16 << 20)
    ///     .build()?;
    /// # Ok::<(), scope_profiler::Error>(())
    /// ```
    pub fn buffer_budget(mut self, bytes: usize) -> Self {
        self.config.buffering.budget = bytes;
        self
    }

    /// What a recording thread does when the buffer budget is used up because the flusher is
    /// behind. With `false` (the default) it waits for the flusher (backpressure, like
    /// tracing-appender's `lossy(false)`), so every call is counted; the waits and the time
    /// spent waiting are in the [`Report`](crate::Report), the summary and the file. The wait
    /// is bounded (100 ms): a stalled or failed flusher never parks a thread for longer, and
    /// the thread then drops instead until buffers are free again.
    ///
    /// With `true` the thread never waits: it drops. Either way a dropped record drops its
    /// whole call, which is counted ([`Report::dropped_calls`](crate::Report::dropped_calls));
    /// a profile never holds half a call.
    pub fn lossy(mut self, on: bool) -> Self {
        self.config.buffering.lossy = on;
        self
    }

    /// How long a recording thread waits for a flusher that frees no buffer before it drops
    /// instead (default 100 ms; see [`lossy`](Self::lossy)). The bound is on the flusher
    /// making no progress: while it frees buffers, a thread keeps waiting. A longer bound keeps
    /// counts exact on a machine too loaded to run the flusher often; a shorter one bounds the
    /// stall a service's threads can see.
    pub fn backpressure_timeout(mut self, timeout: Duration) -> Self {
        self.config.buffering.max_wait = timeout;
        self
    }

    /// Test hook: makes the flusher panic in its `n`-th drain, to check that a failing flusher
    /// never takes the program down. Feature `testing` (unstable, not part of the API).
    #[doc(hidden)]
    #[cfg(feature = "testing")]
    pub fn __fail_flusher_at(mut self, n: u64) -> Self {
        self.config.buffering.fail_flusher_at = Some(n);
        self
    }

    /// Test hook: the flusher reads no record until the first finalize (or until a thread
    /// waits for a buffer), so a scaling test measures its work per call without the cost of
    /// rounds paced by a slow producer. Feature `testing` (unstable, not part of the API).
    #[doc(hidden)]
    #[cfg(feature = "testing")]
    pub fn __hold_flusher(mut self) -> Self {
        self.config.buffering.hold_flusher = true;
        self
    }

    /// Test hook: `hook` is called with the name of each point of a finalize it reaches
    /// (`"snapshot"`, `"publish"`, `"write"`, `"rename"`), for the whole process, so a
    /// fault-injection test can act at that moment. Feature `testing` (unstable, not part of the API).
    #[doc(hidden)]
    #[cfg(feature = "testing")]
    pub fn __checkpoints(self, hook: fn(&'static str)) -> Self {
        crate::checkpoint::set(hook);
        self
    }

    /// Validates the options, applies the environment overrides and starts the flusher.
    ///
    /// # Errors
    /// - [`Error::InvalidEnv`] for a `SCOPE_PROFILER` value other than on/off (`bogus`);
    /// - [`Error::InvalidOption`] for an option the profiler cannot use (a zero
    ///   `flush_interval`, a gzip level above 9, a budget below [`MIN_BUFFER_BUDGET`](crate::MIN_BUFFER_BUDGET),
    ///   `max_files` without `rotate_every`, ...), naming it;
    /// - [`Error::OutputPath`] when the output cannot be written (missing directory, no
    ///   permission, a directory or device at the path, another profiler of this process
    ///   writing it);
    /// - errors of the sinks asked for (unknown perf events, a missing LIKWID or CUDA library)
    ///   and of MPI setup;
    /// - [`Error::ThreadSpawn`] when the flusher thread cannot be started;
    /// - [`Error::ForkedChild`] in a process forked (without `exec`) from one whose profiler
    ///   was running (unless the mode is `Disabled`);
    /// - with the `prometheus` feature, [`Error::MetricsEndpoint`] when the metrics endpoint
    ///   cannot be bound, and [`Error::InvalidOption`] for invalid metric labels.
    pub fn build(self) -> Result<(ScopeLayer, FlushGuard), Error> {
        if self.config.max_level.is_some() {
            return Err(Error::InvalidOption {
                option: "max_level",
                reason: "filters ScopeSubscriber only; give ScopeLayer a per-layer filter \
                         (`layer.with_filter(LevelFilter::INFO)`) instead"
                    .into(),
            });
        }
        let (shared, guard) = self.start(FrontEnd::Layer)?;
        Ok((ScopeLayer::new(shared), guard))
    }

    /// Builds the profiler as a [`ScopeSubscriber`], a `tracing::Subscriber` of its own, and
    /// its [`FlushGuard`]: the same records and the same file as [`build`](Self::build)'s
    /// layer, without a registry underneath, for programs that use `tracing` only to profile
    /// (see [`ScopeSubscriber`] for what it does not do). Filter its levels with
    /// [`max_level`](Self::max_level). In a build with `--cfg tokio_unstable`, a `max_level`
    /// below `TRACE` hides Tokio's task instrumentation: it warns once on stderr.
    ///
    /// ```no_run
    /// let (subscriber, guard) = scope_profiler::ScopeLayer::builder()
    ///     .output("profiling_data.h5")
    ///     .build_subscriber()?;
    /// tracing::subscriber::set_global_default(subscriber).expect("no other subscriber");
    /// // ... instrumented code ...
    /// guard.finalize()?;
    /// # Ok::<(), scope_profiler::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`build`](Self::build).
    pub fn build_subscriber(self) -> Result<(ScopeSubscriber, FlushGuard), Error> {
        crate::config::warn_once(crate::config::tokio_filtered_warning(
            cfg!(tokio_unstable),
            self.config.max_level,
        ));
        let (shared, guard) = self.start(FrontEnd::Subscriber)?;
        Ok((ScopeSubscriber::new(shared), guard))
    }

    /// The most verbose level [`ScopeSubscriber`] records (default: every level); spans and
    /// events above it are never created, and its `max_level_hint` says so. `ScopeLayer`
    /// takes its filters from `tracing_subscriber` instead (a per-layer filter), and
    /// [`build`](Self::build) refuses this option.
    pub fn max_level(mut self, level: tracing_core::LevelFilter) -> Self {
        self.config.max_level = Some(level);
        self
    }

    /// Everything both front ends need: the checked configuration, the shared state, the
    /// flusher.
    fn start(self, front: FrontEnd) -> Result<(Arc<Shared>, FlushGuard), Error> {
        let mut config = self.config.finish()?;
        if config.mode != crate::Mode::Disabled {
            crate::fork::check_build()?;
        }
        #[allow(clippy::let_unit_value)] // `()` without the `mpi` feature
        let _mpi = crate::mpi::setup(&mut config)?;
        #[cfg(feature = "prometheus")]
        let metrics = crate::metrics::setup(&config, crate::mpi::handle_rank(&_mpi))?;
        let mut sinks = None;
        if config.mode != crate::Mode::Disabled {
            if let Some(path) = &config.output {
                crate::data::files::check_writable(path)?;
            }
            sinks = Sinks::build(&config)?;
        }
        let overhead = if config.mode == crate::Mode::Disabled {
            None
        } else {
            crate::builder::overhead::measure(&config, front)
        };
        let mut shared = Shared::new(config, sinks);
        shared.overhead = overhead;
        if front == FrontEnd::Subscriber {
            shared.span_sites = Some(Arc::new(crate::recording::subscriber::SpanSites::new()));
        }
        #[cfg(feature = "prometheus")]
        {
            shared.metrics = metrics.as_ref().map(|m| m.hub.clone());
        }
        let shared = Arc::new(shared);
        crate::fork::Watch::arm(&shared);
        let mut guard = FlushGuard::start(shared.clone(), _mpi)?;
        if let (Some(signal), Some(output)) = (shared.config.dump_signal, &shared.config.output) {
            guard.dump_on_signal(signal, output)?;
        }
        #[cfg(feature = "prometheus")]
        if let Some(crate::metrics::Setup {
            hub,
            listener: Some(listener),
        }) = metrics
        {
            if shared.config.metrics.dump {
                if let Some(output) = &shared.config.output {
                    hub.serve_dumps(metrics::http_dumps(guard.dump_handle(), output.clone()));
                }
            }
            guard.serve_metrics(crate::metrics::http::Server::start(listener, hub)?);
        }
        Ok((shared, guard))
    }
}

/// Which front end records: what the self-measurement at `build()` times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FrontEnd {
    /// `ScopeLayer` on a registry.
    Layer,
    /// `ScopeSubscriber`.
    Subscriber,
}

// The layer's entry point lives with the builder it returns (recording does not look up).
impl crate::ScopeLayer {
    /// Starts configuring a profiler.
    ///
    /// ```
    /// let (layer, guard) = scope_profiler::ScopeLayer::builder().no_output().build()?;
    /// # Ok::<(), scope_profiler::Error>(())
    /// ```
    pub fn builder() -> Builder {
        Builder::default()
    }
}

#[cfg(test)]
mod tests;

//! The flight recorder's options: per-call detail for a recent window only, dumped on demand
//! (see [`crate::FlushGuard::dump`]).

use std::time::Duration;

use super::Builder;
use crate::config::{FlightOptions, DEFAULT_FLIGHT_DISK_BUDGET};

impl Builder {
    /// Always on in production: keeps the per-call detail (calls, polls, task rows, wakes,
    /// the calls open at each flush) of at least the last `window` in a rolling ring of
    /// spool segments beside the output, deleting older segments as new ones are written,
    /// and writes a normal profile of that window when asked ([`crate::FlushGuard::dump`],
    /// [`crate::DumpHandle`]).
    ///
    /// The statistics still cover the whole run and are exact: the file that `finalize()`
    /// writes holds them in the aggregate layout ([`crate::Mode::Aggregate`]); the detail is
    /// only in the ring and the dumps. The ring holds about `window * 5/4` (segments of a
    /// quarter window each), within [`flight_disk_budget`](Self::flight_disk_budget); when a
    /// burst needs more, the oldest segments go first, the window shrinks, and the next
    /// dump's [`Report::window_ns`](crate::Report::window_ns) and warnings say so.
    /// Recording memory stays within [`buffer_budget`](Self::buffer_budget).
    ///
    /// `build()` fails with [`crate::Error::InvalidOption`] for a zero window, without an
    /// output file, or with [`mpi`](Self::mpi).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tracing_subscriber::layer::SubscriberExt;
    ///
    /// let dir = tempfile::tempdir()?;
    /// let (layer, guard) = scope_profiler::ScopeLayer::builder()
    ///     .output(dir.path().join("service.h5"))
    ///     .summary(false)
    ///     .flight_recorder(Duration::from_secs(60))
    ///     .build()?;
    /// let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    /// tracing::dispatcher::with_default(&dispatch, || {
    ///     for _ in 0..3 {
    ///         tracing::info_span!("request").in_scope(|| ());
    ///     }
    /// });
    /// // The last minute, as a profile of its own; the program goes on recording.
    /// let dump = guard.dump(dir.path().join("incident.h5"))?;
    /// assert_eq!(dump.region("request").unwrap().calls, 3);
    /// guard.finalize()?; // the whole run's statistics
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn flight_recorder(mut self, window: Duration) -> Self {
        let mut f = self.flight_options();
        f.window = window;
        self.config.flight = Some(f);
        self
    }

    /// The flight recorder's options so far (defaults for those not given).
    fn flight_options(&self) -> FlightOptions {
        self.config.flight.unwrap_or(FlightOptions {
            window: Duration::ZERO,
            disk_budget: DEFAULT_FLIGHT_DISK_BUDGET,
            min_duration: Duration::ZERO,
        })
    }

    /// With [`flight_recorder`](Self::flight_recorder): a call shorter than `min` counts in
    /// the statistics (exact, as always) but leaves no detail in the ring, as Java Flight
    /// Recorder's thresholds do. A call with a longer child is itself longer, so every call
    /// the user would look for in a dump is kept whole. The dump says how many calls of
    /// each region were left out ([`Report::calls_below_threshold`](crate::Report::calls_below_threshold)),
    /// and how many each kept call enclosed: the innermost kept call of a left-out call's lane
    /// open at its start ([`Profile::flight`](crate::read::Profile::flight),
    /// `/scope_profiler_rs/flight/below_threshold_*`). For that count the ring keeps a
    /// left-out call's start and lane, mostly 2 bytes. Polls and task rows are kept as without it.
    /// Default 0: every call.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let (layer, guard) = scope_profiler::ScopeLayer::builder()
    ///     .output(std::env::temp_dir().join("threshold_example.h5"))
    ///     .summary(false)
    ///     .flight_recorder(Duration::from_secs(300))
    ///     .flight_min_duration(Duration::from_micros(10)) // the cheap always-on setting
    ///     .build()?;
    /// # drop(layer); guard.finalize()?;
    /// # Ok::<(), scope_profiler::Error>(())
    /// ```
    pub fn flight_min_duration(mut self, min: Duration) -> Self {
        let mut f = self.flight_options();
        f.min_duration = min;
        self.config.flight = Some(f);
        self
    }

    /// With [`flight_recorder`](Self::flight_recorder): dumps the window whenever the process
    /// receives `signal` (e.g. `libc::SIGUSR2`), beside the output as
    /// `<stem>.dump-SIGUSR2-<unix seconds>.h5`, and says where on stderr. The handler only
    /// writes a byte to a pipe; a thread of the profiler's writes the dump. It is chained
    /// through `signal-hook-registry`, as `tokio::signal` does, so a handler the program
    /// already has keeps working; a raw `sigaction` installed later replaces it. It does
    /// nothing in a forked child.
    ///
    /// `build()` fails with [`crate::Error::InvalidOption`] without a flight recorder or for
    /// a signal that cannot be handled (`SIGKILL`, `SIGSTOP`, `SIGSEGV`, ...).
    ///
    /// ```no_run
    /// let (layer, guard) = scope_profiler::ScopeLayer::builder()
    ///     .output("service.h5")
    ///     .flight_recorder(std::time::Duration::from_secs(120))
    ///     .dump_on_signal(libc::SIGUSR2) // kill -USR2 <pid>
    ///     .build()?;
    /// # Ok::<(), scope_profiler::Error>(())
    /// ```
    pub fn dump_on_signal(mut self, signal: i32) -> Self {
        self.config.dump_signal = Some(signal);
        self
    }

    /// With [`flight_recorder`](Self::flight_recorder): dumps the window by itself whenever
    /// `trigger` holds (see [`crate::Trigger`]), beside the output as
    /// `<stem>.dump-<trigger>-<unix seconds>.h5` (e.g. `service.dump-p99-handle_request-1796530057.h5`),
    /// at most once per the trigger's cool-down, and says where on stderr. Of the dumps
    /// triggers write, the newest [`MAX_TRIGGER_DUMPS`](crate::MAX_TRIGGER_DUMPS) are kept,
    /// so a condition that holds for days does not fill the disk. May be given several times.
    ///
    /// `build()` fails with [`crate::Error::InvalidOption`] without a flight recorder, or for a
    /// trigger whose `over` is zero or whose rate is not a number >= 0.
    ///
    /// ```
    /// use std::time::Duration;
    /// use scope_profiler::Trigger;
    /// let dir = tempfile::tempdir()?;
    /// let (layer, guard) = scope_profiler::ScopeLayer::builder()
    ///     .output(dir.path().join("service.h5"))
    ///     .summary(false)
    ///     .flight_recorder(Duration::from_secs(120))
    ///     .dump_when(Trigger::p99_over("handle_request", Duration::from_millis(250), Duration::from_secs(30)))
    ///     .build()?;
    /// # drop(layer); guard.finalize()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn dump_when(mut self, trigger: crate::Trigger) -> Self {
        self.config.triggers.push(trigger);
        self
    }

    /// With [`flight_recorder`](Self::flight_recorder): the most bytes its ring of segment
    /// files may hold together (default 256 MiB, at least 1 MiB). A burst that needs more
    /// shrinks the window instead; the dump says by how much.
    pub fn flight_disk_budget(mut self, bytes: u64) -> Self {
        let mut f = self.flight_options();
        f.disk_budget = bytes;
        self.config.flight = Some(f);
        self
    }
}

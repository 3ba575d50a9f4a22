//! The guard `build()` returns: it owns the flusher thread and produces reports and files.
//!
//! Shaped like tracing-appender's `WorkerGuard`: keep it alive while the program runs;
//! [`FlushGuard::finalize`] (any number of times) reports and writes the calls completed since
//! the previous finalize, and dropping the guard finalizes once more if anything new happened,
//! then stops the flusher. The finalize itself is a pipeline in `crate::finalize::pipeline`.
//!
//! **No phase replaces another.** Each finalize publishes one phase file. Without rotation the
//! first goes to the output; a later phase (a second `finalize()`, or calls that complete
//! after it and are written by the drop) goes to `<stem>.late.h5` (then `late-2`, ...) beside
//! it, and the output keeps what the first finalize wrote. [`Report::file`] says where each
//! phase went. With [`rotate_every`](crate::Builder::rotate_every), every phase gets the next
//! numbered file.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Sender};
use std::sync::OnceLock;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::data::report::Report;
use crate::finalize::pipeline::{GuardState, Trigger};
use crate::flusher::flush::{Command, Flusher};
use crate::recording::pause::Switch;
use crate::recording::shared::Shared;
use crate::spool::{self, SpoolWriter};
use crate::{Error, Mode};

/// How long finalize (and the guard's drop) wait for the flusher before giving up with an
/// error instead of hanging the program.
const FLUSHER_REPLY_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Keeps the profiler's background flusher alive and writes the results.
///
/// ```
/// # use scope_profiler::ScopeLayer;
/// # use tracing_subscriber::prelude::*;
/// let (layer, guard) = ScopeLayer::builder().no_output().summary(false).build()?;
/// let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
/// tracing::dispatcher::with_default(&dispatch, || {
///     let _outer = tracing::info_span!("phase one").entered();
/// });
/// let first = guard.finalize()?;
/// assert_eq!(first.region("phase one").unwrap().calls, 1);
/// let second = guard.finalize()?; // only what completed since the first
/// assert_eq!(second.region("phase one").unwrap().calls, 0);
/// assert_eq!(second.region("phase one").unwrap().lifetime_calls, 1);
/// # Ok::<(), scope_profiler::Error>(())
/// ```
#[must_use = "dropping the guard finalizes the profile immediately"]
pub struct FlushGuard {
    inner: Arc<Inner>,
    /// The rotation timer: dropping the sender stops it.
    rotator: Option<(Sender<()>, JoinHandle<()>)>,
    /// The metrics endpoint; a field, so it stops after the drop's last finalize.
    #[cfg(feature = "prometheus")]
    endpoint: Option<crate::metrics::http::Server>,
    /// `Builder::dump_on_signal`: its handler and thread, stopped first at the drop.
    signal_dumps: Option<crate::finalize::dump_signal::SignalDumps>,
    /// `Builder::dump_when`: the thread that writes the triggers' dumps (it ends with the
    /// flusher).
    trigger_dumps: Option<crate::finalize::dump_triggers::TriggerDumps>,
}

/// What the guard and its rotation thread share.
struct Inner {
    shared: Arc<Shared>,
    /// The session's MPI (with `Builder::mpi`): what each phase's publisher is chosen from.
    mpi: crate::mpi::Handle,
    tx: Option<Sender<Command>>,
    flusher: Mutex<Option<JoinHandle<()>>>,
    /// The flusher thread, to wake it for a finalize.
    flusher_thread: Option<std::thread::Thread>,
    _claim: Option<OutputClaim>,
    state: Mutex<GuardState>,
}

impl Inner {
    fn finalize(&self, trigger: Trigger, to: Option<&Path>) -> Result<Option<Report>, Error> {
        let fork = &self.shared.fork;
        if fork.is_forked_child() {
            // The flusher, the spool and the output are the parent's (see `crate::fork`).
            crate::fork::say_off_once();
            return Err(Error::ForkedChild {
                pid: std::process::id(),
                parent: fork.origin().pid(),
            });
        }
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let flusher = crate::finalize::pipeline::FlusherLink {
            tx: self.tx.as_ref(),
            thread: self.flusher_thread.as_ref(),
            limit: FLUSHER_REPLY_LIMIT,
        };
        let publisher = crate::mpi::Publisher::of(&self.mpi);
        crate::finalize::pipeline::run(&self.shared, publisher, flusher, &mut state, trigger, to)
    }
}

/// Claims an output path for one profiler of this process, so a second `build()` writing the
/// same file gets a clear error instead of corrupting it. Released when the guard drops.
struct OutputClaim(PathBuf);

fn claimed() -> &'static Mutex<HashSet<PathBuf>> {
    static CLAIMED: OnceLock<Mutex<HashSet<PathBuf>>> = OnceLock::new();
    CLAIMED.get_or_init(Default::default)
}

impl OutputClaim {
    fn new(output: &Path) -> Result<OutputClaim, Error> {
        let dir = crate::data::files::dir_of(output);
        let key = std::fs::canonicalize(&dir)
            .unwrap_or(dir)
            .join(output.file_name().unwrap_or_default());
        let mut set = claimed().lock().unwrap_or_else(|e| e.into_inner());
        if !set.insert(key.clone()) {
            return Err(Error::OutputPath {
                path: output.to_path_buf(),
                source: std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    "another profiler in this process is already writing this file \
                     (finalize and drop its guard first, or choose another output)",
                ),
            });
        }
        Ok(OutputClaim(key))
    }
}

impl Drop for OutputClaim {
    fn drop(&mut self) {
        claimed()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.0);
    }
}

/// Creates the spool beside `output`, first recovering the spool of an earlier run that did
/// not finish (see [`crate::recover()`]).
fn open_spool(shared: &Shared, output: &Path) -> Result<SpoolWriter, Error> {
    crate::finalize::recover::recover_stale(output)?;
    let path = spool::spool_path(output);
    SpoolWriter::create(path.clone(), spool_header(shared), shared.config.durable).map_err(
        |source| Error::Io {
            context: "creating the spool beside the output".into(),
            path,
            source,
        },
    )
}

/// What a spool of this run says about it in its header.
fn spool_header(shared: &Shared) -> spool::Header {
    let config = &shared.config;
    spool::Header {
        start_time_ns: shared.start_ns,
        timestamp: shared.timestamp.clone(),
        label: config.label.clone(),
        track_threads: config.track_threads,
        track_async: config.track_async,
        aggregate: config.mode == Mode::Aggregate,
    }
}

mod flight;

impl FlushGuard {
    /// The state shared with the layer.
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.inner.shared
    }

    /// Starts the flusher (and the rotation timer) of a profiler whose state is `shared`, in
    /// a session whose MPI is `mpi`.
    pub(crate) fn start(shared: Arc<Shared>, mpi: crate::mpi::Handle) -> Result<FlushGuard, Error> {
        let phase_start_ns = shared.start_ns;
        let config = &shared.config;
        let mut claim = None;
        let mut fired_rx = None;
        let (tx, flusher) = if config.mode == Mode::Disabled {
            (None, None)
        } else {
            let (spool, flight) = match &config.output {
                Some(output) => {
                    claim = Some(OutputClaim::new(output)?);
                    let base = crate::mpi::Publisher::of(&mpi).spool_base(output);
                    let spool = open_spool(&shared, &base)?;
                    shared.fork.spool_fd(spool.raw_fd());
                    (Some(spool), flight::flight_ring(&shared, &base))
                }
                None => (None, None),
            };
            let (tx, rx) = mpsc::channel();
            let mut f = Flusher::new(shared.clone(), spool, flight);
            if !config.triggers.is_empty() {
                let (fire, fired) = mpsc::channel();
                f.watch(crate::flusher::triggers::Triggers::new(
                    &config.triggers,
                    fire,
                ));
                fired_rx = Some(fired);
            }
            let handle = std::thread::Builder::new()
                .name("scope-profiler-flush".into())
                .spawn(move || f.run(rx))
                .map_err(|source| Error::ThreadSpawn {
                    thread: "scope-profiler-flush",
                    source,
                })?;
            (Some(tx), Some(handle))
        };
        let rotate = config
            .rotate_every
            .filter(|_| config.mode != Mode::Disabled);
        let inner = Arc::new(Inner {
            shared,
            mpi,
            tx,
            flusher_thread: flusher.as_ref().map(|h| h.thread().clone()),
            flusher: Mutex::new(flusher),
            _claim: claim,
            state: Mutex::new(GuardState::new(phase_start_ns)),
        });
        let rotator = match rotate {
            Some(period) => Some(start_rotator(inner.clone(), period)?),
            None => None,
        };
        let mut guard = FlushGuard {
            inner,
            rotator,
            #[cfg(feature = "prometheus")]
            endpoint: None,
            signal_dumps: None,
            trigger_dumps: None,
        };
        if let Some(fired) = fired_rx {
            guard.dump_on_triggers(fired)?;
        }
        Ok(guard)
    }

    /// Reports (and writes, and prints, as configured) the calls completed since the previous
    /// finalize. Calls still running are reported by a later finalize; nothing is lost.
    ///
    /// Each finalize publishes its own file and never replaces one an earlier finalize of this
    /// guard published: the first goes to the output, later ones to `<stem>.late.h5`,
    /// `<stem>.late-2.h5`, ... beside it (with rotation, to the next numbered file).
    /// [`Report::file`] says where.
    ///
    /// **With [`Builder::mpi`](crate::Builder::mpi) this is a collective operation**: every
    /// rank must call it (and `finalize_to`, and drop the guard) the same number of times, in
    /// the same order, or the ranks that did wait for the others. Rank 0 publishes the one file
    /// and prints the summary; every rank's report holds its own regions, rank 0's also
    /// [`Report::ranks`].
    ///
    /// # Errors
    /// The output file cannot be written, or the spool could not be (its `io::Error` is the
    /// source); the report is still printed in that case, and the error says where the
    /// unpublished calls are kept (see [`recover`](crate::recover())). Once the phase is
    /// measured, such an error is [`Error::Partial`]: it carries the phase's [`Report`], with
    /// exact statistics even for calls whose per-call detail could not be written
    /// ([`Report::detail_lost`]; see `docs/faults.md`). Multi-rank, also when any rank's
    /// phase could not be written ([`crate::Error::Mpi`], on every rank). In a process
    /// forked from the one that built the profiler, [`Error::ForkedChild`] at once.
    pub fn finalize(&self) -> Result<Report, Error> {
        self.inner
            .finalize(Trigger::Explicit, None)
            .map(|r| r.unwrap_or_default())
    }

    /// Waits until every call that completed before this call is assembled, folded into its
    /// region's statistics and handed to the spool; the phase goes on (nothing is written
    /// to the output, nothing is reset). For benchmarks that must count the flusher's work
    /// on what they recorded, and for programs about to do something risky that want the
    /// spool (see [`recover`](crate::recover())) to hold everything so far. Returns at once
    /// in [`Mode::Disabled`].
    ///
    /// ```
    /// # use scope_profiler::ScopeLayer;
    /// # use tracing_subscriber::prelude::*;
    /// let (layer, guard) = ScopeLayer::builder().no_output().summary(false).build()?;
    /// let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    /// tracing::dispatcher::with_default(&dispatch, || {
    ///     tracing::info_span!("work").in_scope(|| ());
    /// });
    /// guard.sync()?; // the flusher has folded the call
    /// assert_eq!(guard.finalize()?.region("work").unwrap().calls, 1);
    /// # Ok::<(), scope_profiler::Error>(())
    /// ```
    ///
    /// # Errors
    /// The flusher failed ([`Error::FlusherFailed`]), is gone, or did not answer within 30 s
    /// ([`Error::FlusherStalled`]).
    pub fn sync(&self) -> Result<(), Error> {
        let Some(tx) = &self.inner.tx else {
            return Ok(());
        };
        let failed = || match self.inner.shared.failure.lock() {
            Ok(cause) => cause.clone(),
            Err(e) => e.into_inner().clone(),
        };
        let (reply_tx, reply_rx) = mpsc::channel();
        if tx.send(Command::Sync(reply_tx)).is_err() {
            return Err(failed().map_or(Error::FlusherGone, |cause| Error::FlusherFailed { cause }));
        }
        if let Some(t) = &self.inner.flusher_thread {
            t.unpark();
        }
        match reply_rx.recv_timeout(FLUSHER_REPLY_LIMIT) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(cause)) => Err(Error::FlusherFailed { cause }),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                Err(failed().map_or(Error::FlusherGone, |cause| Error::FlusherFailed { cause }))
            }
            Err(mpsc::RecvTimeoutError::Timeout) => Err(Error::FlusherStalled {
                waited: FLUSHER_REPLY_LIMIT,
            }),
        }
    }

    /// CPU time (ns) the profiler's flusher thread has used so far, as of its latest drain
    /// (every finalize ends with one). For scaling tests and benchmarks; not a stable API.
    #[doc(hidden)]
    pub fn flusher_cpu_ns(&self) -> i64 {
        self.inner
            .shared
            .flusher_cpu_ns
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Complete drains the flusher has done so far (every 2 to 32 ms, with or without
    /// records); with [`flusher_cpu_ns`](Self::flusher_cpu_ns), separates the cost of
    /// polling from the cost per record. Not a stable API.
    #[doc(hidden)]
    pub fn flusher_drains(&self) -> u64 {
        self.inner
            .shared
            .flusher_drains
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Like [`finalize`](Self::finalize), but writes this phase's file to `path` instead of the
    /// configured output (e.g. one file per phase of a long run). Works with
    /// [`no_output`](crate::Builder::no_output) too.
    ///
    /// ```no_run
    /// # use scope_profiler::ScopeLayer;
    /// let (layer, guard) = ScopeLayer::builder().output("run.h5").build()?;
    /// // ... setup phase ...
    /// guard.finalize_to("setup.h5")?;
    /// // ... solve phase ...
    /// guard.finalize()?; // run.h5 holds the solve phase
    /// # Ok::<(), scope_profiler::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`finalize`](Self::finalize), and when `path` is not writable.
    pub fn finalize_to(&self, path: impl AsRef<Path>) -> Result<Report, Error> {
        let path = path.as_ref();
        if !self.shared().fork.is_forked_child() {
            crate::data::files::check_writable(path)?;
        }
        self.inner
            .finalize(Trigger::Explicit, Some(path))
            .map(|r| r.unwrap_or_default())
    }
}

/// Live metrics (feature `prometheus`).
#[cfg(feature = "prometheus")]
impl FlushGuard {
    /// Keeps the running endpoint (stopped when the guard drops).
    pub(crate) fn serve_metrics(&mut self, server: crate::metrics::http::Server) {
        self.endpoint = Some(server);
    }

    /// The live metrics in the Prometheus text exposition format (version 0.0.4), for
    /// programs that serve them from their own HTTP server (axum, hyper, warp): answer
    /// `GET /metrics` with this text and the content type
    /// `text/plain; version=0.0.4; charset=utf-8`. `None` unless
    /// [`Builder::metrics`](crate::Builder::metrics) or
    /// [`Builder::prometheus`](crate::Builder::prometheus) turned them on (or with
    /// [`Mode::Disabled`](crate::Mode::Disabled)).
    ///
    /// The text is the latest snapshot the flusher published: at most ~100 ms old while
    /// calls complete, and complete up to the last [`finalize`](Self::finalize) right after
    /// one. It never waits for the flusher; it is rendered once per snapshot and shared.
    ///
    /// ```
    /// # use scope_profiler::ScopeLayer;
    /// # use tracing_subscriber::prelude::*;
    /// let (layer, guard) = ScopeLayer::builder().no_output().summary(false).metrics(true).build()?;
    /// let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    /// tracing::dispatcher::with_default(&dispatch, || {
    ///     for _ in 0..3 {
    ///         tracing::info_span!("handle").in_scope(|| ());
    ///     }
    /// });
    /// let report = guard.finalize()?;
    /// let text = guard.metrics_text().unwrap();
    /// assert!(text.contains("scope_region_calls_total{region=\"handle\"} 3\n"));
    /// assert_eq!(report.region("handle").unwrap().lifetime_calls, 3);
    /// # Ok::<(), scope_profiler::Error>(())
    /// ```
    pub fn metrics_text(&self) -> Option<String> {
        let hub = self.inner.shared.metrics.as_ref()?;
        Some(hub.text().to_string())
    }

    /// Where the metrics endpoint listens (with the port the system chose when the address
    /// gave port 0); `None` without [`Builder::prometheus`](crate::Builder::prometheus).
    pub fn metrics_addr(&self) -> Option<std::net::SocketAddr> {
        self.endpoint.as_ref().map(|s| s.local_addr())
    }
}

/// Starts the thread that finalizes every `period` (numbered files, no summary printed).
fn start_rotator(
    inner: Arc<Inner>,
    period: std::time::Duration,
) -> Result<(Sender<()>, JoinHandle<()>), Error> {
    let (stop, stopped) = mpsc::channel::<()>();
    let handle = std::thread::Builder::new()
        .name("scope-profiler-rotate".into())
        .spawn(move || {
            let mut next = std::time::Instant::now() + period;
            loop {
                let wait = next.saturating_duration_since(std::time::Instant::now());
                match stopped.recv_timeout(wait) {
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        next += period;
                        if let Err(e) = inner.finalize(Trigger::Rotation, None) {
                            eprintln!("scope-profiler: rotation failed: {e}");
                        }
                    }
                    _ => return,
                }
            }
        })
        .map_err(|source| Error::ThreadSpawn {
            thread: "scope-profiler-rotate",
            source,
        })?;
    Ok((stop, handle))
}

impl Drop for FlushGuard {
    fn drop(&mut self) {
        if self.inner.shared.fork.is_forked_child() {
            // A forked child: its flusher and rotation threads do not exist here, and what
            // they would write is the parent's. Leave it all as it is, without waiting for
            // anything or taking a lock another thread may have held at the fork.
            crate::fork::say_off_once();
            std::mem::forget(self.rotator.take());
            std::mem::forget(self.signal_dumps.take());
            std::mem::forget(self.trigger_dumps.take());
            std::mem::forget(self.inner.clone());
            return;
        }
        drop(self.signal_dumps.take());
        if let Some((stop, handle)) = self.rotator.take() {
            drop(stop);
            let _ = handle.join();
        }
        let inner = &self.inner;
        if let Some(sinks) = &inner.shared.sinks {
            sinks.shutdown();
        }
        if let Err(e) = inner.finalize(Trigger::Drop, None) {
            // Nobody receives a report from a drop: say what failed.
            let e = match e {
                Error::Partial { source, .. } => *source,
                e => e,
            };
            eprintln!("scope-profiler: final flush failed: {e}");
        }
        // Nothing reads records from here on: switch recording off for good, so spans after
        // the drop cost one relaxed load instead of filling the buffer budget and then taking
        // the drop path forever.
        inner.shared.pause.disable();
        if let Some(tx) = &inner.tx {
            let _ = tx.send(Command::Shutdown);
        }
        if let Some(t) = &inner.flusher_thread {
            t.unpark();
        }
        let flusher = inner
            .flusher
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(h) = flusher {
            // Like tracing-appender's guard: wait a bounded time, then give up with a message
            // rather than hang the program's exit.
            let t0 = std::time::Instant::now();
            while !h.is_finished() && t0.elapsed() < FLUSHER_REPLY_LIMIT {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            if h.is_finished() {
                let _ = h.join();
            } else {
                eprintln!(
                    "scope-profiler: the flusher did not stop within {FLUSHER_REPLY_LIMIT:?}; \
                     leaving it behind"
                );
            }
        }
        // The flusher is gone, and with it the triggers' sender: their thread ends.
        drop(self.trigger_dumps.take());
        crate::mpi::finish(&inner.mpi);
    }
}

impl std::fmt::Debug for FlushGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlushGuard")
            .field("mode", &self.inner.shared.config.mode)
            .field("output", &self.inner.shared.config.output)
            .finish()
    }
}

/// The runtime switch (see [`Switch`]).
impl FlushGuard {
    /// Pauses recording: the layer's callbacks return at once (other layers are unaffected)
    /// until [`resume`](Self::resume). Calls overlapping the pause are not reported.
    ///
    /// ```
    /// # use scope_profiler::ScopeLayer;
    /// # use tracing_subscriber::prelude::*;
    /// let (layer, guard) = ScopeLayer::builder().no_output().summary(false).build()?;
    /// let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    /// tracing::dispatcher::with_default(&dispatch, || {
    ///     tracing::info_span!("work").in_scope(|| ());
    ///     guard.pause();
    ///     tracing::info_span!("work").in_scope(|| ()); // not recorded
    ///     guard.resume();
    /// });
    /// assert_eq!(guard.finalize()?.region("work").unwrap().calls, 1);
    /// # Ok::<(), scope_profiler::Error>(())
    /// ```
    pub fn pause(&self) {
        self.switch().pause()
    }

    /// Resumes recording after [`pause`](Self::pause).
    pub fn resume(&self) {
        self.switch().resume()
    }

    /// Whether recording is paused (always `true` in `Mode::Disabled`).
    pub fn is_paused(&self) -> bool {
        self.shared()
            .pause
            .paused
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// A cloneable handle to pause and resume this profiler from anywhere.
    pub fn switch(&self) -> Switch {
        Switch::new(self.shared().clone())
    }
}

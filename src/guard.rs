//! The guard `build()` returns: it owns the flusher thread and produces reports and files.
//!
//! Shaped like tracing-appender's `WorkerGuard`: keep it alive while the program runs;
//! [`FlushGuard::finalize`] (any number of times) reports and writes the calls completed since
//! the previous finalize, and dropping the guard finalizes once more if anything new happened,
//! then stops the flusher.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::OnceLock;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::flush::{Command, Flusher, Snapshot};
use crate::output::model::{Layout, PhaseData, RegionRow};
use crate::report::{RegionStats, Report};
use crate::spool::{self, SpoolWriter};
use crate::state::Shared;
use crate::{Error, Mode};

/// Name of the synthetic region spanning each phase, which the Python reader's `% session`
/// column is computed against. (If the program has a span of that name, its calls are written
/// instead of the synthetic one.)
pub const SESSION_REGION: &str = "scope_profiler.session";

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
    shared: Arc<Shared>,
    tx: Option<Sender<Command>>,
    flusher: Option<JoinHandle<()>>,
    _claim: Option<OutputClaim>,
    state: Mutex<GuardState>,
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
        let dir = match output.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
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

/// Creates the spool beside `output`, moving a stale one (from a crashed run) aside first.
fn open_spool(shared: &Shared, output: &Path) -> Result<SpoolWriter, Error> {
    let path = spool::spool_path(output);
    if path.exists() {
        let aside = PathBuf::from(format!(
            "{}.stale-{}-{}",
            path.display(),
            std::process::id(),
            shared.start_ns
        ));
        let _ = std::fs::rename(&path, &aside);
        eprintln!(
            "scope-profiler: found calls of an earlier run that did not finish in {}; \
             moved them to {} (turn them into a file with `scope-profiler-recover {}`)",
            path.display(),
            aside.display(),
            output.display()
        );
    }
    let config = &shared.config;
    let header = spool::Header {
        start_time_ns: shared.start_ns,
        timestamp: shared.timestamp.clone(),
        label: config.label.clone(),
        track_threads: config.track_threads,
        track_async: config.track_async,
        aggregate: config.mode == Mode::Aggregate,
    };
    SpoolWriter::create(path.clone(), header).map_err(|source| Error::Io {
        context: "creating the spool beside the output".into(),
        path,
        source,
    })
}

/// Fills this phase's calls from its spool file (regions matched by name).
fn load_spooled_calls(phase: &Path, snap: &mut Snapshot) -> Result<(), Error> {
    let contents = spool::read(phase).map_err(|source| Error::Io {
        context: "reading this phase's calls back from the spool".into(),
        path: phase.to_path_buf(),
        source,
    })?;
    let by_name: std::collections::HashMap<String, usize> = snap
        .regions
        .iter()
        .enumerate()
        .map(|(i, r)| (r.row.name.clone(), i))
        .collect();
    let mut calls = contents.calls;
    for (id, (name, _, _)) in contents.regions.iter().enumerate() {
        if let Some(&i) = by_name.get(name) {
            let row = &mut snap.regions[i].row.calls;
            if row.is_empty() {
                std::mem::swap(row, &mut calls[id]);
            } else {
                row.append(&mut calls[id]);
            }
        }
    }
    Ok(())
}

struct GuardState {
    finalized: bool,
    phase_start_ns: i64,
    /// First call id of the next phase (ids continue across finalizes, as in Python).
    next_call_id: i64,
}

impl FlushGuard {
    /// The state shared with the layer.
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    pub(crate) fn start(shared: Arc<Shared>) -> Result<FlushGuard, Error> {
        let phase_start_ns = shared.start_ns;
        let config = &shared.config;
        let mut claim = None;
        let (tx, flusher) = if config.mode == Mode::Disabled {
            (None, None)
        } else {
            let spool = match &config.output {
                Some(output) => {
                    claim = Some(OutputClaim::new(output)?);
                    Some(open_spool(&shared, output)?)
                }
                None => None,
            };
            let (tx, rx) = mpsc::channel();
            let f = Flusher::new(shared.clone(), spool);
            let handle = std::thread::Builder::new()
                .name("scope-profiler-flush".into())
                .spawn(move || f.run(rx))
                .map_err(|e| Error::FlusherFailed {
                    cause: format!("cannot start the flusher thread: {e}"),
                })?;
            (Some(tx), Some(handle))
        };
        Ok(FlushGuard {
            shared,
            tx,
            flusher,
            _claim: claim,
            state: Mutex::new(GuardState {
                finalized: false,
                phase_start_ns,
                next_call_id: 0,
            }),
        })
    }

    /// Reports (and writes, and prints, as configured) the calls completed since the previous
    /// finalize. Calls still running are reported by a later finalize; nothing is lost.
    ///
    /// Returns an error only when the output file cannot be written; the report is still
    /// printed in that case, and the error says where the unpublished calls are kept (see
    /// [`recover`](crate::recover())).
    pub fn finalize(&self) -> Result<Report, Error> {
        self.finalize_inner(false, None)
            .map(|r| r.unwrap_or_default())
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
    pub fn finalize_to(&self, path: impl AsRef<Path>) -> Result<Report, Error> {
        let path = path.as_ref();
        crate::builder::check_writable(path)?;
        self.finalize_inner(false, Some(path))
            .map(|r| r.unwrap_or_default())
    }

    fn finalize_inner(&self, on_drop: bool, to: Option<&Path>) -> Result<Option<Report>, Error> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let finalize_ns = self.shared.clock.now_ns();
        let mut snap = match &self.tx {
            None => Snapshot::default(),
            Some(tx) => self.ask_flusher(tx)?,
        };
        let phase_calls: u64 = snap.regions.iter().map(|r| r.row.stats.count).sum();
        let sink_data = self
            .shared
            .sinks
            .as_ref()
            .is_some_and(|s| s.has_final_data());
        // At drop with nothing new since an explicit finalize, its file stays as it is; only
        // sink results that appear at shutdown (LIKWID's) are added to it.
        let append_only = on_drop && state.finalized && phase_calls == 0;
        if append_only && !sink_data {
            if let Some(p) = &snap.spool_phase {
                let _ = std::fs::remove_file(p);
            }
            return Ok(None);
        }
        let phase_start_ns = state.phase_start_ns;
        state.finalized = true;
        state.phase_start_ns = finalize_ns;

        let config = &self.shared.config;
        let target = to.or(config.output.as_deref());
        // With an output file the phase's calls are on disk; read them back for the file.
        let mut result = match (snap.spool_phase.clone(), snap.spool_error.clone()) {
            (_, Some(e)) => Err(Error::Io {
                context: format!("writing the spool: {e}"),
                path: target.map(Path::to_path_buf).unwrap_or_default(),
                source: std::io::Error::other("spool write failed"),
            }),
            (Some(phase), None) => load_spooled_calls(&phase, &mut snap),
            (None, None) => Ok(()),
        };
        let mut regions: Vec<RegionStats> = snap
            .regions
            .iter()
            .map(RegionStats::from_snapshot)
            .collect();
        let (dropped, in_flight) = (snap.dropped, snap.in_flight);
        let losses = crate::report::Losses {
            dropped_calls: snap.dropped_calls,
            waits: snap.waits,
            wait_ns: snap.wait_ns,
            corrupt: snap.corrupt,
        };
        let truncated = snap.calls_truncated;
        let spool_phase = snap.spool_phase.clone();
        let lines = std::mem::take(&mut snap.lines);
        let paused_calls = snap.paused_calls;
        let mut data = self.phase_data(snap, phase_start_ns, finalize_ns);
        data.extra = crate::output::source::phase_extra(&self.shared, &data, lines);
        // Nesting feeds the call ids (written with track_threads), the exclusive totals and the
        // summary's tree; skip it when none of them is wanted.
        let want_nesting = config.track_threads || config.summary;
        let nested = want_nesting && data.layout == Layout::Columnar;
        let tree = match nested.then(|| crate::nesting::nest(&mut data, state.next_call_id)) {
            Some(Ok(next)) => {
                state.next_call_id = next;
                // The tree is only for the printed summary (and needs every call).
                (config.summary && !truncated).then(|| crate::nesting::call_tree(&data))
            }
            _ => None,
        };
        drop(state);
        let mut warnings = Vec::new();
        if let Some(sinks) = &self.shared.sinks {
            let r = sinks.finalize(&mut data);
            if result.is_ok() {
                result = r;
            }
            warnings = sinks.warnings();
        }
        if paused_calls > 0 {
            warnings.push(format!(
                "{paused_calls} call(s) overlapped a pause and are not reported"
            ));
        }
        if truncated {
            warnings.push(
                "without an output file only the first 2 M calls of a phase are kept (the \
                 statistics stay exact); the summary is flat"
                    .into(),
            );
        }
        if let Some(perf) = &data.perf {
            for r in &mut regions {
                r.set_perf(perf);
            }
        }
        regions.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
        let report = Report {
            regions,
            dropped,
            losses,
            in_flight,
            wall_ns: (finalize_ns - phase_start_ns).max(0) as u64,
            warnings,
            tree,
            overhead: self.shared.overhead.clone(),
        };
        if config.mode == Mode::Disabled {
            return Ok(Some(report));
        }
        if append_only {
            if let Some(path) = target.filter(|p| p.exists()) {
                data.perf = None;
                result = result.and_then(|()| crate::output::hdf5_aux::append_aux(path, &data));
            }
            if let Some(p) = &spool_phase {
                let _ = std::fs::remove_file(p);
            }
            return result.map(|()| None);
        }
        if let (Ok(()), Some(path)) = (&result, target) {
            let opts = crate::output::hdf5::WriteOptions { gzip: config.gzip };
            result = crate::output::hdf5::write_phase(path, &data, &opts);
        }
        match (&result, &spool_phase) {
            (Ok(()), Some(p)) => {
                let _ = std::fs::remove_file(p);
            }
            (Err(_), Some(p)) => {
                result = result.map_err(|e| Error::Unpublished {
                    source: Box::new(e),
                    spool: p.clone(),
                })
            }
            _ => {}
        }
        if config.summary {
            let title = match (&config.label, target) {
                (Some(l), Some(p)) => format!("{l} - {}", p.display()),
                (Some(l), None) => l.clone(),
                (None, Some(p)) => p.display().to_string(),
                (None, None) => "scope-profiler".to_owned(),
            };
            eprint!("{}", crate::output::summary::render(&report, &title));
            if let Err(e) = &result {
                eprintln!("scope-profiler: {e}");
            }
        }
        result.map(|()| Some(report))
    }

    /// Asks the flusher for this phase, waiting a bounded time; a failed flusher's cause
    /// becomes the error.
    fn ask_flusher(&self, tx: &Sender<Command>) -> Result<Snapshot, Error> {
        let failed = || {
            let cause = self
                .shared
                .failure
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            match cause.clone() {
                Some(cause) => Error::FlusherFailed { cause },
                None => Error::FlusherGone,
            }
        };
        let (reply_tx, reply_rx) = mpsc::channel();
        if tx.send(Command::Finalize(reply_tx)).is_err() {
            return Err(failed());
        }
        self.wake_flusher();
        match reply_rx.recv_timeout(FLUSHER_REPLY_LIMIT) {
            Ok(Ok(snap)) => Ok(snap),
            Ok(Err(cause)) => Err(Error::FlusherFailed { cause }),
            Err(RecvTimeoutError::Disconnected) => Err(failed()),
            Err(RecvTimeoutError::Timeout) => Err(Error::FlusherStalled {
                waited: FLUSHER_REPLY_LIMIT,
            }),
        }
    }

    fn wake_flusher(&self) {
        if let Some(h) = &self.flusher {
            h.thread().unpark();
        }
    }

    fn phase_data(&self, snap: Snapshot, phase_start_ns: i64, finalize_ns: i64) -> PhaseData {
        let layout = match self.shared.config.mode {
            Mode::Aggregate => Layout::Aggregate,
            _ => Layout::Columnar,
        };
        // The session row spans the phase; widened to cover calls that started before it (in
        // flight at the previous finalize) or ended during this finalize, so that it contains
        // every call of its lane and nesting stays valid.
        let calls = snap.regions.iter().flat_map(|r| r.row.calls.iter());
        let first_start = calls
            .clone()
            .map(|c| c.start_ns)
            .min()
            .unwrap_or(phase_start_ns);
        let last_end = calls
            .map(|c| c.start_ns + c.dur_ns)
            .max()
            .unwrap_or(finalize_ns);
        let session_start = phase_start_ns.min(first_start);
        let session_dur = (finalize_ns.max(last_end) - session_start).max(0);
        let session_thread = snap
            .threads
            .iter()
            .find(|t| t.name == "main")
            .map_or(0, |t| t.index);
        let user_session = snap.regions.iter().any(|r| r.row.name == SESSION_REGION);
        let mut regions = Vec::new();
        if !user_session {
            regions.push(RegionRow::session(
                session_start,
                session_dur,
                session_thread,
                layout,
            ));
        }
        regions.extend(
            snap.regions
                .into_iter()
                .filter(|r| r.row.stats.count > 0)
                .map(|r| r.row),
        );
        let config = &self.shared.config;
        PhaseData {
            layout,
            regions,
            start_time_ns: phase_start_ns,
            finalize_time_ns: finalize_ns,
            timestamp: self.shared.timestamp.clone(),
            label: config.label.clone(),
            dropped: snap.dropped,
            losses: crate::report::Losses {
                dropped_calls: snap.dropped_calls,
                waits: snap.waits,
                wait_ns: snap.wait_ns,
                corrupt: snap.corrupt,
            },
            perf: None,
            likwid: None,
            threads: snap.threads,
            tasks: snap.tasks,
            polls: snap.polls,
            region_names: snap.region_names,
            track_threads: config.track_threads,
            track_async: config.track_async,
            extra: Default::default(),
        }
    }
}

impl Drop for FlushGuard {
    fn drop(&mut self) {
        if let Some(sinks) = &self.shared.sinks {
            sinks.shutdown();
        }
        if let Err(e) = self.finalize_inner(true, None) {
            eprintln!("scope-profiler: final flush failed: {e}");
        }
        if let Some(tx) = self.tx.take() {
            let _ = tx.send(Command::Shutdown);
        }
        self.wake_flusher();
        if let Some(h) = self.flusher.take() {
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
    }
}

impl std::fmt::Debug for FlushGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlushGuard")
            .field("mode", &self.shared.config.mode)
            .field("output", &self.shared.config.output)
            .finish()
    }
}

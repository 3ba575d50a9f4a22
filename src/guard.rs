//! The guard `build()` returns: it owns the flusher thread and produces reports and files.
//!
//! Shaped like tracing-appender's `WorkerGuard`: keep it alive while the program runs;
//! [`FlushGuard::finalize`] (any number of times) reports and writes the calls completed since
//! the previous finalize, and dropping the guard finalizes once more if anything new happened,
//! then stops the flusher.

use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::flush::{Command, Flusher, Snapshot};
use crate::output::model::{CallRecord, Layout, PhaseData, RegionRow};
use crate::report::{RegionStats, Report};
use crate::state::Shared;
use crate::stats::Stats;
use crate::{Error, Mode};

/// Name of the synthetic region spanning each phase, which the Python reader's `% session`
/// column is computed against. (If the program has a span of that name, its calls are written
/// instead of the synthetic one.)
pub const SESSION_REGION: &str = "scope_profiler.session";

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
    tx: Option<Mutex<Sender<Command>>>,
    flusher: Option<JoinHandle<()>>,
    state: Mutex<GuardState>,
}

struct GuardState {
    finalized: bool,
    phase_start_ns: i64,
    /// First call id of the next phase (ids continue across finalizes, as in Python).
    next_call_id: i64,
}

impl FlushGuard {
    pub(crate) fn start(shared: Arc<Shared>) -> Result<FlushGuard, Error> {
        let phase_start_ns = shared.start_ns;
        let (tx, flusher) = if shared.config.mode == Mode::Disabled {
            (None, None)
        } else {
            let (tx, rx) = mpsc::channel();
            let f = Flusher::new(shared.clone());
            let handle = std::thread::Builder::new()
                .name("scope-profiler-flush".into())
                .spawn(move || f.run(rx))
                .map_err(|e| Error::InvalidOption {
                    option: "build",
                    reason: format!("cannot start the flusher thread: {e}"),
                })?;
            (Some(Mutex::new(tx)), Some(handle))
        };
        Ok(FlushGuard {
            shared,
            tx,
            flusher,
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
    /// computed and printed in that case.
    pub fn finalize(&self) -> Result<Report, Error> {
        self.finalize_inner(false).map(|r| r.unwrap_or_default())
    }

    fn finalize_inner(&self, on_drop: bool) -> Result<Option<Report>, Error> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let finalize_ns = self.shared.clock.now_ns();
        let snap = match &self.tx {
            None => Snapshot::default(),
            Some(tx) => {
                let (reply_tx, reply_rx) = mpsc::channel();
                let sent = tx
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .send(Command::Finalize(reply_tx));
                if sent.is_err() {
                    return Err(Error::FlusherGone);
                }
                reply_rx.recv().map_err(|_| Error::FlusherGone)?
            }
        };
        let phase_calls: u64 = snap.regions.iter().map(|r| r.row.stats.count).sum();
        if on_drop && state.finalized && phase_calls == 0 {
            // Nothing new since the last explicit finalize: keep its file as it is.
            return Ok(None);
        }
        let phase_start_ns = state.phase_start_ns;
        state.finalized = true;
        state.phase_start_ns = finalize_ns;

        let config = &self.shared.config;
        let mut data = self.phase_data(snap.clone(), phase_start_ns, finalize_ns);
        let tree = match crate::nesting::nest(&mut data, state.next_call_id) {
            Ok(next) => {
                state.next_call_id = next;
                // The tree is only for the printed summary.
                (config.summary && data.layout == Layout::Columnar)
                    .then(|| crate::nesting::call_tree(&data))
            }
            Err(_) => None,
        };
        drop(state);
        let mut warnings = Vec::new();
        let mut result = Ok(());
        if let Some(sinks) = &self.shared.sinks {
            result = sinks.finalize(&mut data);
            warnings = sinks.warnings();
        }
        let mut regions: Vec<RegionStats> = snap
            .regions
            .iter()
            .map(|r| RegionStats::from_snapshot(r, data.perf.as_ref()))
            .collect();
        regions.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
        let report = Report {
            regions,
            dropped: snap.dropped,
            in_flight: snap.in_flight,
            wall_ns: (finalize_ns - phase_start_ns).max(0) as u64,
            warnings,
            tree,
        };
        if config.mode == Mode::Disabled {
            return Ok(Some(report));
        }
        if let (Ok(()), Some(path)) = (&result, &config.output) {
            let opts = crate::output::hdf5::WriteOptions { gzip: config.gzip };
            result = crate::output::hdf5::write_phase(path, &data, &opts);
        }
        if config.summary {
            let title = match (&config.label, &config.output) {
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
        let mut session_stats = Stats::default();
        session_stats.add(session_dur as u64);
        let user_session = snap.regions.iter().any(|r| r.row.name == SESSION_REGION);
        let mut regions = Vec::new();
        regions.extend((!user_session).then(|| RegionRow {
            name: SESSION_REGION.to_owned(),
            file: String::new(),
            line: -1,
            stats: session_stats,
            calls: if layout == Layout::Columnar {
                vec![CallRecord {
                    start_ns: session_start,
                    dur_ns: session_dur,
                    thread: session_thread,
                    task: -1,
                    await_ns: 0,
                    gpu_ns: -1,
                    call_id: -1,
                    parent_id: -1,
                }]
            } else {
                Vec::new()
            },
            gpu_count: 0,
            gpu_total: 0,
            exclusive_ns: -1,
        }));
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
            perf: None,
            likwid: None,
            threads: snap.threads,
            tasks: snap.tasks,
            polls: snap.polls,
            region_names: snap.region_names,
            track_threads: config.track_threads,
            track_async: config.track_async,
        }
    }
}

impl Drop for FlushGuard {
    fn drop(&mut self) {
        if let Err(e) = self.finalize_inner(true) {
            eprintln!("scope-profiler: final flush failed: {e}");
        }
        if let Some(tx) = self.tx.take() {
            let _ = tx
                .into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .send(Command::Shutdown);
        }
        if let Some(h) = self.flusher.take() {
            let _ = h.join();
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

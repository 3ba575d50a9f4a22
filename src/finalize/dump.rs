//! Flight-recorder dumps (`Builder::flight_recorder`): a normal schema-3 profile of the
//! recent window, written while the program keeps recording.
//!
//! A dump asks the flusher to fold everything recorded before now into the ring and close
//! its segment ([`crate::flusher::flight::FlightRing::for_dump`]), then reads those closed
//! segments on a thread of its own at low priority (nice 10) and writes them the way
//! [`crate::recover()`] writes a spool: to a temporary name, published whole (no half file is
//! ever under the final name). The segments stay pinned on disk until it is done. The calls
//! open at the dump come from the open-calls frame of that flush, with their enclosing open
//! calls and their start, so a request stuck when the dump is asked for is in it as open
//! (`/scope_profiler_rs/open_calls`, see docs/production.md).

use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Sender};
use std::sync::Arc;
use std::time::Duration;

use crate::data::flight::FlightWindow;
use crate::data::report::RegionStats;
use crate::flusher::flight::DumpPlan;
use crate::flusher::flush::Command;
use crate::recording::shared::Shared;
use crate::{Error, Report};

/// How long a dump waits for the flusher to fold what was recorded before it.
const FLUSHER_REPLY_LIMIT: Duration = Duration::from_secs(30);

/// Niceness of the thread that writes a dump: the program's own threads go first.
const DUMP_NICE: i32 = 10;

/// Asks for flight-recorder dumps from any thread: a cloneable handle to a profiler built
/// with [`Builder::flight_recorder`](crate::Builder::flight_recorder), from
/// [`FlushGuard::dump_handle`](crate::FlushGuard::dump_handle). It keeps no recording alive:
/// once the guard is dropped, a dump fails with [`Error::FlusherGone`].
///
/// ```
/// use std::time::Duration;
/// let dir = tempfile::tempdir()?;
/// let (_layer, guard) = scope_profiler::ScopeLayer::builder()
///     .output(dir.path().join("service.h5"))
///     .summary(false)
///     .flight_recorder(Duration::from_secs(30))
///     .build()?;
/// let handle = guard.dump_handle();
/// let path = dir.path().join("from-a-thread.h5");
/// let dumped = std::thread::spawn(move || handle.dump(path)).join().unwrap()?;
/// assert!(dumped.file().unwrap().exists());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct DumpHandle {
    tx: Option<Sender<Command>>,
    flusher: Option<std::thread::Thread>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for DumpHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DumpHandle")
            .field("flight_recorder", &self.shared.config.flight.is_some())
            .finish_non_exhaustive()
    }
}

impl DumpHandle {
    pub(crate) fn new(
        tx: Option<Sender<Command>>,
        flusher: Option<std::thread::Thread>,
        shared: Arc<Shared>,
    ) -> DumpHandle {
        DumpHandle {
            tx,
            flusher,
            shared,
        }
    }

    /// Writes the flight recorder's recent window to `path` as a schema-3 profile; see
    /// [`FlushGuard::dump`](crate::FlushGuard::dump).
    ///
    /// # Errors
    /// See [`FlushGuard::dump`](crate::FlushGuard::dump).
    pub fn dump(&self, path: impl AsRef<Path>) -> Result<Report, Error> {
        let path = path.as_ref().to_path_buf();
        let fork = &self.shared.fork;
        if fork.is_forked_child() {
            return Err(Error::ForkedChild {
                pid: std::process::id(),
                parent: fork.origin().pid(),
            });
        }
        if self.shared.config.flight.is_none() {
            return Err(Error::InvalidOption {
                option: "flight_recorder",
                reason: "dump needs a profiler built with Builder::flight_recorder".into(),
            });
        }
        let plan = self.plan()?;
        let target = path.clone();
        // Low priority, on a thread of its own: the program's threads keep their share.
        let writer = std::thread::Builder::new()
            .name("scope-profiler-dump".into())
            .spawn(move || {
                lower_priority();
                write_dump(&path, plan)
            })
            .map_err(|source| Error::ThreadSpawn {
                thread: "scope-profiler-dump",
                source,
            })?;
        // A panic in the writer (a bug) is the dump's error, never the caller's panic.
        let written = writer.join().unwrap_or_else(|panic| {
            let why = (panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".into());
            Err(Error::Io {
                context: "writing a flight-recorder dump".into(),
                path: target.clone(),
                source: std::io::Error::other(format!("the dump's thread panicked: {why}")),
            })
        })?;
        if let Some(file) = written.file() {
            let mut dumps = self.shared.dumps.lock().unwrap_or_else(|e| e.into_inner());
            dumps.push(file.to_path_buf());
        }
        Ok(written)
    }

    /// Asks the flusher for the segments to read.
    fn plan(&self) -> Result<DumpPlan, Error> {
        let failed = || match self.shared.failure.lock() {
            Ok(cause) => cause.clone(),
            Err(e) => e.into_inner().clone(),
        };
        let gone = || failed().map_or(Error::FlusherGone, |cause| Error::FlusherFailed { cause });
        let Some(tx) = &self.tx else {
            return Err(Error::FlusherGone);
        };
        let (reply_tx, reply_rx) = mpsc::channel();
        if tx.send(Command::Dump(reply_tx)).is_err() {
            return Err(gone());
        }
        if let Some(t) = &self.flusher {
            t.unpark();
        }
        match reply_rx.recv_timeout(FLUSHER_REPLY_LIMIT) {
            Ok(Ok(plan)) => Ok(plan),
            // (Checked above that the flight recorder is on: an error here is the flusher's.)
            Ok(Err(cause)) => Err(Error::FlusherFailed { cause }),
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(gone()),
            Err(mpsc::RecvTimeoutError::Timeout) => Err(Error::FlusherStalled {
                waited: FLUSHER_REPLY_LIMIT,
            }),
        }
    }
}

/// Lowers the calling thread's scheduling priority (Linux: `setpriority` with `who = 0`
/// applies to the calling thread only). A failure leaves it as it was.
fn lower_priority() {
    // SAFETY: setpriority has no memory preconditions; its failure is harmless here.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, 0, DUMP_NICE);
    }
}

/// Reads the plan's segments and writes them to `path`; the plan (and its pin on the
/// segments) is dropped when this returns.
fn write_dump(path: &Path, plan: DumpPlan) -> Result<Report, Error> {
    let mut passes = Vec::with_capacity(plan.files.len());
    for file in &plan.files {
        let p = crate::finalize::recover::pass0(file)
            .map_err(|e| crate::finalize::recover::read_error(file, e))?;
        passes.push(p);
    }
    // The regions' names as the newest segment declares them (a superset of the older ones').
    let names = passes.last().map(|p| p.region_names()).unwrap_or_default();
    let below = (plan.below.iter())
        .map(|&(r, n)| {
            let name = names.get(r as usize).cloned();
            (name.unwrap_or_else(|| format!("region {r}")), n)
        })
        .collect();
    let window = FlightWindow {
        covered_from_ns: plan.covered_from_ns,
        at_ns: plan.at_ns,
        window_ns: plan.window_ns,
        shrunk_to_ns: plan.shrunk_to_ns,
        below,
    };
    crate::finalize::recover::write_phase(path, &passes, false, Some(window.clone()))?;
    let mut r = report(path.to_path_buf(), &passes, window);
    if plan.lost_calls > 0 {
        r.warnings.push(format!(
            "{} call(s) since recording began lost their detail: the flight recorder could not \
             create its segment files then (their statistics are exact)",
            plan.lost_calls
        ));
    }
    Ok(r)
}

/// The dump's report: its regions' statistics, the time it covers, and why it is short.
fn report(file: PathBuf, passes: &[crate::finalize::recover::Pass0], w: FlightWindow) -> Report {
    let mut regions: Vec<RegionStats> = Vec::new();
    let mut stats: Vec<(String, crate::data::stats::Stats)> = Vec::new();
    for p in passes {
        for (name, st) in p.region_stats() {
            match stats.iter_mut().find(|(n, _)| n == name) {
                Some((_, s)) => *s = s.merge(&st),
                None => stats.push((name.to_owned(), st)),
            }
        }
    }
    for (name, st) in &stats {
        regions.push(RegionStats::new(name, st));
    }
    regions.sort_by(|a, b| {
        b.total_ns
            .cmp(&a.total_ns)
            .then_with(|| a.name.cmp(&b.name))
    });
    let mut warnings = Vec::new();
    if let Some(s) = w.shrunk_to_ns.filter(|&s| s < w.window_ns) {
        warnings.push(format!(
            "the flight recorder's disk budget shrank its window to {:.3} s at times \
             (asked for {:.3} s); this dump covers {:.3} s",
            s as f64 / 1e9,
            w.window_ns as f64 / 1e9,
            w.covered_ns() as f64 / 1e9
        ));
    }
    Report {
        regions,
        wall_ns: w.covered_ns() as u64,
        warnings,
        file: Some(file),
        flight: Some(w),
        ..Report::default()
    }
}

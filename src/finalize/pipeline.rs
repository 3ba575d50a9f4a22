//! One finalize, as a straight pipeline:
//! snapshot -> load -> read back -> sinks -> report -> publish -> print.
//!
//! - **snapshot**: the flusher drains everything and hands over the phase: statistics per
//!   region (by region id), lane tables, and the spool file holding the phase's calls. While
//!   it catches up, this thread reads the task rows and polls the spool holds so far.
//! - **load**: the phase as the writers see it ([`PhaseData`]); the calls stay on disk, joined
//!   to their rows by region id.
//! - **read back**: the first pass over the calls (counts, summaries, nesting and the call
//!   tree; see [`crate::output::events`]) on a second thread, while this one reads the rest
//!   of the task rows and polls and begins the file with the lane tables.
//! - **sinks**: perf totals, LIKWID results.
//! - **report**: the [`Report`].
//! - **publish**: the second pass writes the file, at a name that never replaces another
//!   phase's file ([`super::names`]); then the phase's spool file goes.
//! - **print**: the summary on stderr.
//!
//! Memory stays bounded whatever the phase's length: see [`crate::output::events`].

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Sender};

use super::failure::Failure;
use super::load::{load, report, Facts};
use super::publish::{publish, target};
use super::read_back::{read_back, ReadBack};
use crate::data::report::Report;
use crate::data::rows::PhaseData;
use crate::data::scan::Scan;
use crate::flusher::flush::{Command, Snapshot};
use crate::mpi::Publisher;
use crate::output::hdf5::staged::Staged;
use crate::recording::shared::Shared;
use crate::spool::LaneFollower;
use crate::{Error, Mode};

/// How often a finalize waiting for the flusher reads what the spool has gained.
const FOLLOW_EVERY: std::time::Duration = std::time::Duration::from_millis(1);

/// What asked for a finalize.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Trigger {
    /// `finalize()` / `finalize_to()`.
    Explicit,
    /// The rotation timer.
    Rotation,
    /// The guard's drop.
    Drop,
}

/// What finalizes remember between phases.
#[derive(Debug)]
pub(crate) struct GuardState {
    /// An explicit finalize has run.
    pub finalized: bool,
    pub phase_start_ns: i64,
    /// First call id of the next phase (ids continue across finalizes, as in Python).
    pub next_call_id: i64,
    /// Every file this guard published, oldest first, with its `(device, inode)`.
    pub published: Vec<(PathBuf, (u64, u64))>,
    /// Numbered files still kept (for `max_files`), oldest first.
    pub numbered: VecDeque<PathBuf>,
    /// Number of the next numbered file.
    pub next_number: u32,
    /// The last phase went to a late name (its target held an earlier phase).
    pub last_was_late: bool,
}

impl GuardState {
    pub(crate) fn new(phase_start_ns: i64) -> GuardState {
        GuardState {
            finalized: false,
            phase_start_ns,
            next_call_id: 0,
            published: Vec::new(),
            numbered: VecDeque::new(),
            next_number: 1,
            last_was_late: false,
        }
    }
}

/// How to reach the flusher.
#[derive(Clone, Copy)]
pub(crate) struct FlusherLink<'a> {
    /// Its command channel (`None` when disabled).
    pub tx: Option<&'a Sender<Command>>,
    /// Its thread, woken for a finalize.
    pub thread: Option<&'a std::thread::Thread>,
    /// How long to wait for its answer before giving up with an error.
    pub limit: std::time::Duration,
}

/// Runs one finalize. `Ok(None)`: nothing was reported (a drop with nothing new).
/// `publisher`: how this phase goes out (this process alone, or one rank of a collective),
/// chosen once for the phase; every step that differs between the two asks it.
pub(crate) fn run(
    shared: &Shared,
    publisher: Publisher<'_>,
    flusher: FlusherLink<'_>,
    state: &mut GuardState,
    trigger: Trigger,
    to: Option<&Path>,
) -> Result<Option<Report>, Error> {
    let finalize_ns = shared.clock.now_ns();
    let mut follower = lane_follower(shared, publisher);
    let snap = match snapshot(shared, flusher, follower.as_mut()) {
        Ok(s) => s,
        // Multi-rank, the other ranks still wait for this one's part: it tells them it has none.
        Err(e) => {
            let publishes = to.is_some() || shared.config.output.is_some();
            return Err(crate::mpi::abandon(publisher, shared, e, publishes));
        }
    };
    let phase_calls: u64 = snap.regions.iter().map(|r| r.row.stats.count).sum();
    // Multi-rank: every rank takes the same early return (the rest is collective).
    let any_calls = publisher.sum_calls(phase_calls);
    // At drop with nothing new since an explicit finalize, its file stays as it is; only sink
    // results that appear at shutdown (LIKWID's) are added to it.
    if trigger == Trigger::Drop && state.finalized && any_calls == 0 {
        return append_late_sink_data(shared, publisher, state, snap);
    }
    // A rotation with nothing completed in its period writes no file (the next phase, and
    // its session row, simply start earlier); numbers stay without gaps.
    if trigger == Trigger::Rotation && phase_calls == 0 && snap.spool_failure.is_none() {
        if let Some(p) = &snap.spool_phase {
            let _ = std::fs::remove_file(p);
        }
        return Ok(None);
    }
    let times = (state.phase_start_ns, finalize_ns);
    state.phase_start_ns = finalize_ns;
    if trigger != Trigger::Rotation {
        state.finalized = true;
    }
    let mut phase = open_phase(shared, snap, follower, times);
    let target = match shared.config.mode {
        Mode::Disabled => None,
        _ => target(shared, state, to),
    };
    let staged = read_phase(shared, publisher, state, trigger, &mut phase, &target);
    finish_phase(
        (shared, publisher),
        state,
        trigger,
        (phase, staged, target),
        (times, any_calls),
    )
}

/// A phase on its way: its rows, its first pass and what has gone wrong so far.
struct Phase {
    data: PhaseData,
    scan: Scan,
    facts: Facts,
    /// Why the spool could not hold the phase whole (its calls are then not read back).
    failure: Option<Failure>,
    result: Result<(), Error>,
    /// The phase's spool file, as the snapshot renamed it.
    spool_phase: Option<PathBuf>,
    spooled_calls: u64,
    paused_calls: u64,
    /// The spool's lanes read while the flusher caught up, when it read this phase's file.
    follower: Option<LaneFollower>,
}

/// Step 2: the phase's rows from the snapshot (its calls still in the spool), the facts the
/// report needs, and the sources, line profiles and the profiler's own cost.
fn open_phase(
    shared: &Shared,
    mut snap: Snapshot,
    follower: Option<LaneFollower>,
    (phase_start_ns, finalize_ns): (i64, i64),
) -> Phase {
    // A spool that lost calls: the statistics are whole, the calls on disk are not.
    let failure = snap
        .spool_failure
        .take()
        .map(|f| Failure::of(f, shared.start_ns));
    let result = match &failure {
        Some(f) => Err(f.error()),
        None => Ok(()),
    };
    let spool_phase = snap.spool_phase.clone();
    // The follower read the phase's spool only if the snapshot renamed that same file.
    let follower = follower.filter(|f| {
        let phase = spool_phase
            .as_deref()
            .and_then(|p| crate::data::files::identity(p).ok());
        phase.is_some_and(|(dev, ino, _)| f.identity().ok() == Some((dev, ino)))
    });
    let mut facts = Facts::of(&snap);
    facts.detail_lost = failure.as_ref().and_then(|f| f.lost.clone());
    facts.not_written = failure.is_some();
    let lines = std::mem::take(&mut snap.lines);
    let (paused_calls, spooled_calls) = (snap.paused_calls, snap.spooled_calls);
    let mut data = load(shared, snap, phase_start_ns, finalize_ns);
    if failure.is_some() {
        // Not read back: its calls are only part of the phase, and are not published.
        data.spooled = None;
    }
    // Sources, line profiles and the profiler's own cost (which nesting may compensate).
    let config = &shared.config;
    let sources = crate::output::source::Sources {
        capture_source: config.capture_source,
        source_roots: &config.source_roots,
        compensate_overhead: config.compensate_overhead,
    };
    let overhead = shared.overhead.clone();
    data.extra = crate::output::source::phase_extra(sources, overhead, &data, lines);
    Phase {
        data,
        scan: Scan::default(),
        facts,
        failure,
        result,
        spool_phase,
        spooled_calls,
        paused_calls,
        follower,
    }
}

/// Steps 3 and 4: the calls' first pass and the lanes, read back from the spool (single-rank,
/// a sound phase's file is begun with its lane tables meanwhile: returned).
fn read_phase(
    shared: &Shared,
    publisher: Publisher<'_>,
    state: &mut GuardState,
    trigger: Trigger,
    phase: &mut Phase,
    target: &Option<(PathBuf, bool)>,
) -> Option<Staged> {
    let stage_at = target
        .as_ref()
        .filter(|_| phase.result.is_ok() && !publisher.collective())
        .map(|(path, _)| path.as_path());
    if phase.failure.is_some() {
        return None;
    }
    let first = (state.next_call_id, trigger);
    let follower = phase.follower.take();
    let ReadBack {
        scan,
        lanes,
        staged,
    } = read_back(shared, first, &phase.data, follower, stage_at);
    match scan {
        Ok(s) => phase.scan = s,
        Err(e) => phase.result = std::mem::replace(&mut phase.result, Ok(())).and(Err(e)),
    }
    if let Some(n) = &phase.scan.nested {
        state.next_call_id = n.next_id();
    }
    // With the task rows retired and the polls streamed to the spool during the phase.
    match lanes {
        None => {}
        Some(Ok((tasks, polls))) => (phase.data.tasks, phase.data.polls) = (tasks, polls),
        Some(Err(e)) => phase.result = std::mem::replace(&mut phase.result, Ok(())).and(Err(e)),
    }
    staged
}

/// Steps 5 to 7: the sinks' results, the report, the file published (collectively when
/// multi-rank, even by a rank whose phase failed), the spool settled and the summary printed.
fn finish_phase(
    (shared, publisher): (&Shared, Publisher<'_>),
    state: &mut GuardState,
    trigger: Trigger,
    (mut phase, staged, target): (Phase, Option<Staged>, Option<(PathBuf, bool)>),
    ((phase_start_ns, finalize_ns), any_calls): ((i64, i64), u64),
) -> Result<Option<Report>, Error> {
    let config = &shared.config;
    let mut result = std::mem::replace(&mut phase.result, Ok(()));
    let mut warnings = sinks(shared, &mut phase.data, &mut result, &phase.facts);
    if phase.paused_calls > 0 {
        warnings.push(format!(
            "{} call(s) overlapped a pause and are not reported",
            phase.paused_calls
        ));
    }
    let (data, scan) = (&phase.data, &phase.scan);
    let mut report = report(
        data,
        &phase.facts,
        scan,
        warnings,
        phase_start_ns,
        finalize_ns,
    );
    report.overhead = shared.overhead.clone();
    report.dumps = std::mem::take(&mut *shared.dumps.lock().unwrap_or_else(|e| e.into_inner()));
    if config.mode == Mode::Disabled {
        return Ok(Some(report));
    }
    // Multi-rank, a rank whose phase failed still takes part in the (collective) publish.
    if let (true, Some((path, numbered))) = (result.is_ok() || publisher.collective(), &target) {
        crate::checkpoint::reach("publish");
        let ok = result.is_ok();
        let written = publish(
            (shared, publisher),
            state,
            path,
            *numbered,
            (data, scan, staged),
            ok,
        );
        match written {
            Ok((written, how)) => (report.file, report.mpi_write) = (Some(written), how),
            Err(e) => result = result.and(Err(e)),
        }
    }
    publisher.gather_spread(&mut report);
    let result = settle_spool(
        result,
        phase.spool_phase,
        phase.failure,
        phase.spooled_calls,
    );
    print(
        (shared, publisher),
        state,
        trigger,
        &report,
        &result,
        any_calls,
    );
    match result {
        Ok(()) => Ok(Some(report)),
        // Measured, but not written whole: the statistics go with the error.
        Err(e) => Err(Error::Partial {
            source: Box::new(e),
            report: Box::new(report),
        }),
    }
}

/// What becomes of the phase's spool file: removed once published (or when it holds no call
/// of a failed phase), else kept and named by the error ([`Error::Unpublished`]).
fn settle_spool(
    result: Result<(), Error>,
    spool_phase: Option<PathBuf>,
    failure: Option<Failure>,
    spooled_calls: u64,
) -> Result<(), Error> {
    let nothing_readable = failure.is_some() && spooled_calls == 0;
    let kept_at = failure.and_then(|f| f.kept_at);
    match (result, spool_phase.or(kept_at.clone())) {
        (Ok(()), Some(p)) => {
            let _ = std::fs::remove_file(p);
            Ok(())
        }
        (Err(e), Some(p)) if nothing_readable && kept_at.is_none() => {
            let _ = std::fs::remove_file(p);
            Err(e)
        }
        (Err(e), Some(spool)) => Err(Error::Unpublished {
            source: Box::new(e),
            spool,
        }),
        (result, None) => result,
    }
}

/// With tasks tracked into a file: a reader of the lanes the spool holds so far, which the
/// finalize's thread runs while it waits for the flusher to catch up (see
/// [`crate::spool::LaneFollower`]).
fn lane_follower(shared: &Shared, publisher: Publisher<'_>) -> Option<LaneFollower> {
    let config = &shared.config;
    if !config.track_async || config.mode == Mode::Disabled {
        return None;
    }
    // Where the guard created it (multi-rank: a base of this rank's own).
    let base = publisher.spool_base(config.output.as_deref()?);
    let spool = crate::spool::spool_path(&base);
    LaneFollower::open(&spool).ok()
}

/// Step 1: the flusher's snapshot of the phase, waiting a bounded time; a failed flusher's
/// cause becomes the error. While it waits, `follower` reads the lanes written so far (it is
/// dropped if that fails: the lanes are then read whole later).
fn snapshot(
    shared: &Shared,
    flusher: FlusherLink<'_>,
    follower: Option<&mut LaneFollower>,
) -> Result<Snapshot, Error> {
    let Some(tx) = flusher.tx else {
        return Ok(Snapshot::default());
    };
    let failed = || {
        let cause = shared.failure.lock().unwrap_or_else(|e| e.into_inner());
        match cause.clone() {
            Some(cause) => Error::FlusherFailed { cause },
            None => Error::FlusherGone,
        }
    };
    let (reply_tx, reply_rx) = mpsc::channel();
    if tx.send(Command::Finalize(reply_tx)).is_err() {
        return Err(failed());
    }
    if let Some(t) = flusher.thread {
        t.unpark();
    }
    let deadline = std::time::Instant::now() + flusher.limit;
    let mut follower = follower;
    let reply = loop {
        let Some(f) = follower.as_deref_mut() else {
            break reply_rx
                .recv_timeout(deadline.saturating_duration_since(std::time::Instant::now()));
        };
        match reply_rx.recv_timeout(FOLLOW_EVERY) {
            Err(mpsc::RecvTimeoutError::Timeout) if std::time::Instant::now() < deadline => {
                if f.read_available().is_err() {
                    follower = None;
                }
            }
            other => break other,
        }
    };
    match reply {
        Ok(Ok(snap)) => Ok(snap),
        Ok(Err(cause)) => Err(Error::FlusherFailed { cause }),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err(failed()),
        Err(mpsc::RecvTimeoutError::Timeout) => Err(Error::FlusherStalled {
            waited: flusher.limit,
        }),
    }
}

/// Step 4: the sinks' results; returns the warnings for the report.
fn sinks(
    shared: &Shared,
    data: &mut PhaseData,
    result: &mut Result<(), Error>,
    facts: &Facts,
) -> Vec<String> {
    let mut warnings = Vec::new();
    if let Some(sinks) = &shared.sinks {
        let r = sinks.finalize(data);
        if result.is_ok() {
            *result = r;
        }
        warnings = sinks.warnings();
    }
    if facts.truncated {
        warnings.push(format!(
            "without an output file only the first {} calls of a phase are kept (the \
             statistics stay exact); the summary is flat",
            crate::flusher::flush::MEMORY_CALL_CAP
        ));
    }
    warnings
}

/// Step 7: the summary on stderr (not for automatic rotations), and a line when late calls
/// went to a file of their own.
fn print(
    (shared, publisher): (&Shared, Publisher<'_>),
    state: &GuardState,
    trigger: Trigger,
    report: &Report,
    result: &Result<(), Error>,
    phase_calls: u64,
) {
    let config = &shared.config;
    if trigger == Trigger::Drop && state.last_was_late && publisher.prints_summary() {
        if let Some(file) = &report.file {
            eprintln!(
                "scope-profiler: {phase_calls} call(s) completed after the last finalize; written \
                 to {} (the earlier file is kept as it was)",
                file.display(),
            );
        }
    }
    if !config.summary || trigger == Trigger::Rotation || !publisher.prints_summary() {
        return;
    }
    let target = report.file.as_deref();
    let title = match (&config.label, target) {
        (Some(l), Some(p)) => format!("{l} - {}", p.display()),
        (Some(l), None) => l.clone(),
        (None, Some(p)) => p.display().to_string(),
        (None, None) => "scope-profiler".to_owned(),
    };
    let mut text = crate::output::summary::render(report, &title);
    text.push_str(&crate::mpi::render_spread(report));
    if !report.dumps.is_empty() {
        let list: Vec<String> = report
            .dumps
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        text.push_str(&format!(
            "scope-profiler: {} flight-recorder dump(s) since the last finalize: {}\n",
            list.len(),
            list.join(", ")
        ));
    }
    if let Err(e) = result {
        text.push_str(&format!("scope-profiler: {e}\n"));
    }
    match &config.summary_to {
        Some(w) => {
            let mut w = w.0.lock().unwrap_or_else(|e| e.into_inner());
            // A summary the writer cannot take is not worth failing the finalize for.
            let _ = w.write_all(text.as_bytes()).and_then(|()| w.flush());
        }
        None => eprint!("{text}"),
    }
}

/// A drop with no new calls: adds sink results that exist only now (LIKWID's) to the last
/// published file, and removes the empty phase's spool file.
fn append_late_sink_data(
    shared: &Shared,
    publisher: Publisher<'_>,
    state: &GuardState,
    snap: Snapshot,
) -> Result<Option<Report>, Error> {
    let sink_data = shared.sinks.as_ref().is_some_and(|s| s.has_final_data());
    let spool_phase = snap.spool_phase.clone();
    let mut result = Ok(());
    // (Multi-rank files are written by rank 0 only: late sink data is not appended to them.)
    let single = !publisher.collective();
    if sink_data && single && shared.config.mode != Mode::Disabled {
        let now = shared.clock.now_ns();
        let mut data = load(shared, snap, now, now);
        if let Some(sinks) = &shared.sinks {
            result = sinks.finalize(&mut data);
        }
        if let Some((path, id)) = state.published.last() {
            data.perf = None;
            result = result.and_then(|()| crate::output::hdf5::aux::append_aux(path, *id, &data));
        }
    }
    if let Some(p) = &spool_phase {
        let _ = std::fs::remove_file(p);
    }
    result.map(|()| None)
}

//! The flusher: a background thread that drains the lanes, assembles calls, folds statistics
//! and keeps the calls of the current phase, so the instrumented threads only ever append.
//!
//! Every [`POLL`] (at once while a recording thread waits for a buffer, or while a lane has
//! more; up to [`POLL_IDLE`] apart while rounds find almost nothing) it runs a *round*: it
//! reads at most [`DRAIN_BATCH`] chunks of every lane that is not ahead of the others in time
//! (the full chunks they handed over, then the published part of the chunks being written),
//! gives the chunks back to the pool, and completes the calls the **watermark** has passed:
//! the earliest, over all lanes, of the tick up to which that lane is known to be read (see
//! [`crate::flusher::assemble`]). Each round's work is bounded, and what waits for the
//! watermark is the window between the lanes' read positions, not the backlog, so a flusher
//! far behind holds no more state than one that keeps up. A finalize runs rounds until the
//! watermark has passed the moment it was asked for, so a call that closed before
//! `finalize()` was called is always in its report. Lanes of exited threads are dropped once
//! drained; their thread rows stay.
//!
//! A panic in the flusher (a sink bug, an I/O library fault) is caught: the failure is kept
//! for `finalize()` to report, recording threads stop waiting for it, and the thread goes on
//! draining and discarding (counted) so the program keeps running with bounded memory.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, Sender, TryRecvError};
use std::sync::Arc;
use std::time::Duration;

use crate::data::rows::TaskTotals;
use crate::data::rows::{CallRecord, PollRecord, ThreadRow};
use crate::data::stats::{Stats, Sums};
use crate::flusher::assemble::{Assembler, RawCall};
use crate::recording::lane::{DrainState, Lane};
use crate::recording::shared::Shared;
use crate::spool::SpoolWriter;
use crate::Mode;

mod flight;
mod fold;
mod follows;
mod live;
mod open;
mod snapshot;
pub(crate) use snapshot::{RegionSnapshot, Snapshot};

/// Pause between rounds while records keep coming.
pub(crate) const POLL: Duration = Duration::from_millis(2);
/// Longest pause between rounds, reached after rounds that found almost nothing: an idle
/// service's flusher wakes ~30 times a second instead of 500 (on a VM each wake-up costs
/// ~25 us of CPU in the scheduler, 1.4 % of a core at 500 a second).
pub(crate) const POLL_IDLE: Duration = Duration::from_millis(32);
/// A round that reads fewer records doubles the pause before the next one (up to
/// [`POLL_IDLE`]); one that reads more goes back to [`POLL`]. At 16 k requests a second on one
/// connection (~200 records per 2 ms) rounds then come every 32 ms and carry ~16x the work
/// each, which is what a round's fixed cost is spread over.
const QUIET_ROUND: usize = 4096;

/// The pause before the next round, after one that read `records` (see [`POLL_IDLE`]).
fn next_pause(pause: Duration, records: usize) -> Duration {
    if records >= QUIET_ROUND {
        POLL
    } else {
        (pause * 2).min(POLL_IDLE)
    }
}

/// What one round did.
struct Round {
    /// A lane has more to read now.
    more: bool,
    /// Records it read (what sets the pause before the next round).
    records: usize,
}

/// Chunks the flusher reads from one lane per round before it folds them and gives them back.
const DRAIN_BATCH: usize = 16;

/// Safety margin of the watermark, for clock readings of different cores (ns).
const MARGIN_NS: u64 = 50_000;

/// A lane read this far past the watermark waits for the others (ns): the window of
/// calls waiting for the watermark stays small whatever the lanes' record rates.
const AHEAD_NS: u64 = 2_000_000;

/// `ns` in raw clock ticks (at least 1).
fn ticks(shared: &Shared, ns: u64) -> u64 {
    const PROBE: u64 = 1 << 30;
    let probe_ns = shared.clock.ticks_to_ns(PROBE).max(1) as u128;
    ((u128::from(ns) * u128::from(PROBE) / probe_ns) as u64).max(1)
}

/// Requests from the guard.
pub(crate) enum Command {
    /// Drain everything, hand over the phase and start a new one (or say why the flusher
    /// failed).
    Finalize(Sender<Result<Snapshot, String>>),
    /// Drain everything recorded before now, fold it and hand it to the spool, then answer
    /// (the phase goes on; see `FlushGuard::sync`).
    Sync(Sender<Result<(), String>>),
    /// Drain everything recorded before now into the flight recorder's ring, close its
    /// segment and answer with the segments a dump reads (pinned until the plan drops).
    Dump(Sender<Result<crate::flusher::flight::DumpPlan, String>>),
    /// Stop the thread (after a last drain).
    Shutdown,
}

#[derive(Default)]
struct PhaseRegion {
    stats: Sums,
    calls: Vec<CallRecord>,
    lifetime: u64,
    gpu_count: u64,
    gpu_total: i64,
}

/// The flusher's state (owned by its thread).
pub(crate) struct Flusher {
    shared: Arc<Shared>,
    /// Every live lane: where the flusher stands in it, and the tick before which it has read
    /// everything the lane recorded.
    lanes: Vec<(Arc<Lane>, DrainState, u64)>,
    /// The latest watermark (raw ticks): every call that closed before it is assembled.
    watermark: u64,
    /// Ticks of [`MARGIN_NS`] and [`AHEAD_NS`].
    margin: u64,
    ahead: u64,
    /// Rows of threads whose lanes were drained and dropped.
    exited: crate::flusher::thread_rows::ExitedThreads,
    /// Records lost from dropped lanes (their counters are gone with them).
    exited_dropped: u64,
    /// Calls dropped whole by dropped lanes.
    exited_dropped_calls: u64,
    drains: u64,
    asm: Assembler,
    scratch: Vec<RawCall>,
    phase: Vec<PhaseRegion>,
    /// Rows of retired tasks, without an output file.
    finished_tasks: Vec<TaskTotals>,
    polls: Vec<PollRecord>,
    keep_calls: bool,
    spool: Option<SpoolWriter>,
    /// The flight recorder's ring, which gets the per-call detail (`Builder::flight_recorder`).
    flight: Option<crate::flusher::flight::FlightRing>,
    /// Calls shorter than this leave no detail in the ring (`Builder::flight_min_duration`).
    flight_min_ns: i64,
    /// The flight recorder's triggers (`Builder::dump_when`).
    triggers: Option<crate::flusher::triggers::Triggers>,
    spooled_regions: usize,
    phase_no: u64,
    kept_calls: usize,
    calls_truncated: bool,
    span_ns: Option<(i64, i64)>,
    lines: crate::flusher::lines::LineTables,
    paused_calls: u64,
    pauses_seen: usize,
    /// Calls of Tokio's own spans left out (not regions unless asked for).
    hidden_calls: u64,
    /// Tokio spawn sites declared to the spool.
    spooled_sites: usize,
    /// `follows_from` links waiting for the watermark, and those whose spans were unknown.
    follows: Vec<crate::recording::follows::Link>,
    follows_unresolved: u64,
    /// The live metrics this flusher feeds (feature `prometheus`, when they are on).
    #[cfg(feature = "prometheus")]
    metrics: Option<crate::metrics::Live>,
}

/// Capacity the per-drain batch vectors keep between drains.
const BATCH_KEEP: usize = 1 << 16;

/// Calls kept in memory per phase without an output file (for the summary's call tree); above
/// it only the statistics are kept.
pub(crate) const MEMORY_CALL_CAP: usize = 2_000_000;

impl Flusher {
    pub(crate) fn new(
        shared: Arc<Shared>,
        spool: Option<SpoolWriter>,
        flight: Option<crate::flusher::flight::FlightRing>,
    ) -> Flusher {
        let shared_ref = &shared;
        let ticks = |ns| ticks(shared_ref, ns);
        let (margin, ahead) = (ticks(MARGIN_NS), ticks(AHEAD_NS));
        let keep_calls = shared.config.mode == Mode::TimeOnly;
        let flight_min_ns = (shared.config.flight).map_or(0, |f| {
            i64::try_from(f.min_duration.as_nanos()).unwrap_or(i64::MAX)
        });
        let mut asm = Assembler::new(shared.callsites.clone());
        asm.keep_polls = (keep_calls || flight.is_some()) && shared.config.track_async;
        asm.line_timing = shared.config.line_timing;
        asm.task_regions = shared.config.task_regions;
        asm.implicit = shared
            .span_sites
            .clone()
            .map(crate::flusher::assemble::Implicit::new);
        // Wakes and spawns are streamed to the spool (or, with the flight recorder, its ring),
        // and not kept without one.
        asm.sched.keep_edges = spool.is_some() && shared.config.track_async;
        #[cfg(feature = "prometheus")]
        let metrics = shared.metrics.as_ref().map(|hub| hub.live());
        Flusher {
            shared,
            lanes: Vec::new(),
            watermark: 0,
            margin,
            ahead,
            exited: Default::default(),
            exited_dropped: 0,
            exited_dropped_calls: 0,
            drains: 0,
            asm,
            scratch: Vec::new(),
            phase: Vec::new(),
            finished_tasks: Vec::new(),
            polls: Vec::new(),
            keep_calls,
            spool,
            flight,
            flight_min_ns,
            triggers: None,
            spooled_regions: 0,
            phase_no: 0,
            kept_calls: 0,
            calls_truncated: false,
            span_ns: None,
            lines: Default::default(),
            paused_calls: 0,
            pauses_seen: 0,
            hidden_calls: 0,
            spooled_sites: 0,
            follows: Vec::new(),
            follows_unresolved: 0,
            #[cfg(feature = "prometheus")]
            metrics,
        }
    }

    /// The thread's main loop: drains until told to stop, surviving its own failures.
    pub(crate) fn run(mut self, rx: Receiver<Command>) {
        self.shared.pool.set_flusher(std::thread::current());
        let outcome = catch_unwind(AssertUnwindSafe(|| self.serve(&rx)));
        if let Err(panic) = outcome {
            let cause = panic_message(&*panic);
            self.shared.pool.flusher_stopped();
            *self
                .shared
                .failure
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = Some(cause.clone());
            eprintln!(
                "scope-profiler: the flusher failed ({cause}); recording stops, the program \
                 goes on{}",
                self.spool
                    .as_ref()
                    .map(|s| format!("; calls flushed so far are kept in {}", s.path().display()))
                    .unwrap_or_default()
            );
            // The spool stays on disk as it is (recoverable); its writer is not touched again.
            std::mem::forget(self.spool.take());
            let _ = catch_unwind(AssertUnwindSafe(|| self.discard(&rx, &cause)));
        }
        self.shared.pool.flusher_stopped();
    }

    fn serve(&mut self, rx: &Receiver<Command>) {
        let interval = self.shared.config.flush_interval;
        let mut next_flush = std::time::Instant::now() + interval;
        // Test hook: no rounds until the first finalize, unless a thread waits for a buffer.
        let mut held = self.shared.config.buffering.hold_flusher;
        let mut pause = POLL;
        loop {
            if std::time::Instant::now() >= next_flush {
                self.flush_spool();
                next_flush = std::time::Instant::now() + interval;
            }
            match rx.try_recv() {
                Ok(Command::Finalize(reply)) => {
                    held = false;
                    let snap = self.finalize();
                    self.note_cpu();
                    let _ = reply.send(Ok(snap));
                }
                Ok(Command::Sync(reply)) => {
                    self.catch_up();
                    self.flush_spool();
                    next_flush = std::time::Instant::now() + interval;
                    self.note_cpu();
                    let _ = reply.send(Ok(()));
                }
                Ok(Command::Dump(reply)) => {
                    self.catch_up();
                    self.flush_spool();
                    next_flush = std::time::Instant::now() + interval;
                    let plan = self.dump_plan();
                    self.note_cpu();
                    let _ = reply.send(plan);
                }
                Ok(Command::Shutdown) | Err(TryRecvError::Disconnected) => {
                    self.catch_up();
                    self.shared.pool.flusher_stopped();
                    self.shutdown_spool();
                    return;
                }
                Err(TryRecvError::Empty) if held && !self.shared.pool.has_waiters() => {
                    // Rare wake-ups, so the hold costs no CPU a test would count.
                    std::thread::park_timeout(Duration::from_millis(100));
                    continue;
                }
                Err(TryRecvError::Empty) => {
                    let round = self.round();
                    self.note_cpu();
                    if round.more {
                        pause = POLL;
                        continue; // a backlog: the next round now
                    }
                    pause = next_pause(pause, round.records);
                }
            }
            // A thread waiting for a buffer wants the next round now; otherwise pause (the
            // guard and waiting threads unpark us early).
            if !self.shared.pool.has_waiters() {
                std::thread::park_timeout(pause);
            }
        }
    }

    /// After a failure: keep the recording threads' buffers flowing, discarding (and
    /// counting) what they record, and answer every finalize with the cause.
    fn discard(&mut self, rx: &Receiver<Command>, cause: &str) {
        loop {
            self.refresh_lanes();
            let pool = &self.shared.pool;
            let mut lost = 0u64;
            self.lanes.retain_mut(|(lane, st, _)| {
                !lane
                    .drain(st, pool, usize::MAX, |records| lost += records.len() as u64)
                    .finished
            });
            self.shared.lost.fetch_add(lost, Ordering::Relaxed);
            match rx.try_recv() {
                Ok(Command::Finalize(reply)) => {
                    let _ = reply.send(Err(cause.to_owned()));
                }
                Ok(Command::Sync(reply)) => {
                    let _ = reply.send(Err(cause.to_owned()));
                }
                Ok(Command::Dump(reply)) => {
                    let _ = reply.send(Err(cause.to_owned()));
                }
                Ok(Command::Shutdown) | Err(TryRecvError::Disconnected) => return,
                Err(TryRecvError::Empty) => std::thread::park_timeout(POLL),
            }
        }
    }

    /// Publishes the flusher thread's CPU time so far (see `FlushGuard::flusher_cpu_ns`).
    fn note_cpu(&self) {
        self.shared
            .flusher_cpu_ns
            .store(crate::recording::clock::thread_cpu_ns(), Ordering::Relaxed);
    }

    fn refresh_lanes(&mut self) {
        let new = std::mem::take(
            &mut *self
                .shared
                .new_lanes
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        );
        self.lanes
            .extend(new.into_iter().map(|l| (l, DrainState::default(), 0)));
    }

    /// Runs rounds until the watermark has passed now: every call that closed before this
    /// was called is assembled. Bounded by the backlog.
    fn catch_up(&mut self) {
        // First every lane is read past now, which gives every close before now its tick
        // (no later than the end of that reading); then the watermark passes those ticks.
        let target = self.shared.clock.raw().saturating_add(self.margin);
        self.rounds_until(target);
        let stamped = self.shared.clock.raw().saturating_add(self.margin);
        self.rounds_until(stamped);
    }

    fn rounds_until(&mut self, target: u64) {
        while self.watermark < target {
            if !self.round().more {
                std::thread::yield_now();
            }
        }
    }

    /// One round (see the module docs); returns whether a lane has more to read now.
    fn round(&mut self) -> Round {
        self.drains += 1;
        let mut records = 0;
        if self.shared.config.buffering.fail_flusher_at == Some(self.drains) {
            panic!(
                "injected flusher fault (test hook) in drain {}",
                self.drains
            );
        }
        self.shared.flusher_drains.fetch_add(1, Ordering::Relaxed);
        self.shared.clock.recalibrate();
        // Before the new lanes are picked up: a lane registered later records after this.
        let start = self.shared.clock.raw();
        self.refresh_lanes();
        // New lanes (tick 0) are always read and do not hold the others back.
        let behind = self
            .lanes
            .iter()
            .map(|l| l.2)
            .filter(|&t| t != 0)
            .min()
            .unwrap_or(start);
        let mut more = false;
        let mut i = 0;
        while i < self.lanes.len() {
            if self.lanes[i].2 > behind.saturating_add(self.ahead) {
                // Ahead of the others: they catch up first.
                more |= self.lanes[i].0.has_full(&self.lanes[i].1);
                i += 1;
                continue;
            }
            let (finished, lane_more, fed) = self.drain_lane(i);
            records += fed;
            more |= lane_more;
            if finished {
                // The thread is gone and all it recorded is in: keep its row, drop the lane.
                let (lane, _, _) = self.lanes.swap_remove(i);
                self.asm.lane_gone(lane.index);
                self.exited.push(thread_row(&lane));
                self.exited_dropped += lane.dropped.load(Ordering::Relaxed);
                self.exited_dropped_calls += lane.dropped_calls.load(Ordering::Relaxed);
            } else {
                i += 1;
            }
        }
        self.taint_if_paused();
        let wm = self
            .lanes
            .iter()
            .map(|l| l.2)
            .min()
            .unwrap_or(start)
            .min(start);
        self.watermark = self.watermark.max(wm);
        let passed = self.watermark.saturating_sub(self.margin);
        self.resolve_follows(passed);
        self.asm.complete(passed, &mut self.scratch);
        self.fold();
        self.roll_full_ring();
        self.settle_tasks(passed);
        self.asm.shrink();
        self.publish_metrics(false);
        Round { more, records }
    }

    /// After the profiler paused: calls open now may miss records, so none of them is reported.
    fn taint_if_paused(&mut self) {
        let n = self.shared.pause.windows_len();
        if n > self.pauses_seen {
            self.pauses_seen = n;
            self.asm.taint_open();
        }
    }

    /// Reads at most [`DRAIN_BATCH`] chunks of lane `i` and folds them; moves the lane's
    /// read tick. Returns whether the lane is finished, whether it has more now, and the
    /// records read.
    fn drain_lane(&mut self, i: usize) -> (bool, bool, usize) {
        let lane = self.lanes[i].0.clone();
        let mut read = self.lanes[i].2;
        let started = self.shared.clock.raw();
        let Flusher {
            shared,
            asm,
            scratch,
            lanes,
            ..
        } = self;
        let index = lane.index;
        let mut fed = 0;
        let d = lane.drain(&mut lanes[i].1, &shared.pool, DRAIN_BATCH, |records| {
            fed += records.len();
            // A lane's records are in time order: everything before the last one is read.
            if let Some(t) = records.iter().rev().map(|r| r.ticks()).find(|&t| t != 0) {
                read = read.max(t);
            }
            // Loaded after the records were: set before any record of a Tokio task was
            // written, so calls inside tasks are followed from the first such record on.
            asm.sched.active |= shared.tokio.seen();
            asm.feed(index, records, scratch)
        });
        debug_assert!(d.chunks <= DRAIN_BATCH);
        if !d.more {
            // Everything the lane published before this drain started has been read, and
            // what it read was written before now.
            read = read.max(started);
            let ended = self.shared.clock.raw();
            self.asm.caught_up(index, ended);
        }
        self.lanes[i].2 = read;
        self.fold();
        (d.finished, d.more, fed)
    }

    /// The thread table: every lane, live threads' CPU time sampled now, in index order.
    pub(super) fn threads(&self) -> Vec<ThreadRow> {
        let mut rows: Vec<ThreadRow> = self.exited.rows().collect();
        rows.extend(self.lanes.iter().map(|(l, _, _)| thread_row(l)));
        rows.sort_by_key(|r| r.index);
        rows
    }

    /// The current phase's aggregate statistics (for the spool in aggregate mode).
    fn aggregate_stats(&self) -> Vec<(u32, Stats)> {
        if self.keep_calls {
            return Vec::new();
        }
        self.phase
            .iter()
            .enumerate()
            .filter(|(_, p)| p.stats.count > 0)
            .map(|(r, p)| (r as u32, p.stats.stats()))
            .collect()
    }

    /// Makes everything assembled so far durable in the spool: with the rows of the threads
    /// that exited since the last flush and of the live ones (not the whole table again).
    fn flush_spool(&mut self) {
        if self.spool.is_none() {
            return;
        }
        let mut threads = self.exited.take_unspooled();
        threads.extend(self.lanes.iter().map(|(l, _, _)| thread_row(l)));
        let agg = self.aggregate_stats();
        self.spool_open_calls();
        if let Some(spool) = &mut self.spool {
            spool.flush(&threads, &agg);
            // A spool created again after a failure has a new descriptor.
            self.shared.fork.spool_fd(spool.raw_fd());
        }
        self.compact_spool(&agg);
        self.flush_ring(&threads);
    }

    /// At shutdown: the last finalize published everything, so the spool goes, unless calls
    /// completed after it (other threads still running); those stay recoverable.
    fn shutdown_spool(&mut self) {
        let threads = self.threads();
        if let Some(said) = self.spool.take().and_then(|s| s.shutdown(&threads)) {
            eprintln!("scope-profiler: {said}");
        }
        if let Some(ring) = &mut self.flight {
            ring.remove_all();
        }
    }

    /// Calls dropped whole: marked in the stream, plus those dropped entirely on a lane.
    fn dropped_calls(&self) -> u64 {
        let lanes: u64 = self
            .lanes
            .iter()
            .map(|(l, _, _)| l.dropped_calls.load(Ordering::Relaxed))
            .sum();
        self.asm.dropped_calls + lanes + self.exited_dropped_calls
    }

    fn dropped(&self) -> u64 {
        let lanes: u64 = self
            .lanes
            .iter()
            .map(|(l, _, _)| l.dropped.load(Ordering::Relaxed))
            .sum();
        lanes
            + self.exited_dropped
            + self.shared.lost.load(Ordering::Relaxed)
            + self.asm.orphans
            + self.asm.corrupt
    }
}

/// One lane's thread-table row, with a live thread's CPU time sampled now.
fn thread_row(l: &Lane) -> ThreadRow {
    let end_ns = l.end_ns.load(Ordering::Acquire);
    let cpu_ns = if end_ns < 0 {
        crate::recording::clock::other_thread_cpu_ns(l.native_id)
            .unwrap_or_else(|| l.cpu_ns.load(Ordering::Relaxed))
    } else {
        l.cpu_ns.load(Ordering::Relaxed)
    };
    ThreadRow {
        index: l.index,
        name: l.name.clone(),
        native_id: l.native_id,
        start_ns: l.start_ns,
        end_ns,
        cpu_ns,
    }
}

/// The message of a caught panic.
fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}

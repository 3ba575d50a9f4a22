//! The flusher: a background thread that drains the lanes, assembles calls, folds statistics
//! and keeps the calls of the current phase, so the instrumented threads only ever append.
//!
//! Every [`POLL`] it drains every lane: the full chunks they handed over (bounded queues, so
//! memory stays bounded and a thread never waits) and the published part of the chunks being
//! written. A finalize is two such drains, so a call that closed before `finalize()` was
//! called is always in its report (see [`crate::assemble`] for why one is not enough).

use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::Duration;

use crate::assemble::{Assembler, RawCall};
use crate::lane::{Cursor, Lane};
use crate::output::model::{CallRecord, PollRecord, RegionRow, TaskRow, ThreadRow};
use crate::region::RegionInfo;
use crate::spool::SpoolWriter;
use crate::state::Shared;
use crate::stats::Stats;
use crate::task::{TaskCall, Tasks};
use crate::Mode;

/// How often the flusher collects full chunks.
pub(crate) const POLL: Duration = Duration::from_millis(2);

/// Requests from the guard.
pub(crate) enum Command {
    /// Drain everything, hand over the phase and start a new one.
    Finalize(Sender<Snapshot>),
    /// Stop the thread (after a last drain).
    Shutdown,
}

/// One region as seen at a finalize.
#[derive(Clone, Debug)]
pub(crate) struct RegionSnapshot {
    /// This phase's calls and statistics.
    pub row: RegionRow,
    /// Calls completed since `build()`.
    pub lifetime_calls: u64,
}

/// What a finalize hands to the guard.
#[derive(Clone, Debug, Default)]
pub(crate) struct Snapshot {
    /// Every region with at least one call since `build()`, in region-id order.
    pub regions: Vec<RegionSnapshot>,
    /// Every thread that recorded, in index order.
    pub threads: Vec<ThreadRow>,
    /// Tasks with calls this phase.
    pub tasks: Vec<TaskRow>,
    /// Polls of this phase (when tasks are tracked).
    pub polls: Vec<PollRecord>,
    /// Every region name, by region id (what `PollRecord::region` indexes).
    pub region_names: Vec<String>,
    /// The spool file holding this phase's calls (when writing a file).
    pub spool_phase: Option<std::path::PathBuf>,
    /// Why the spool could not be written, if it could not.
    pub spool_error: Option<String>,
    /// Whether this phase's calls were kept only in part (in-memory mode above its cap).
    pub calls_truncated: bool,
    /// Calls entered and not yet closed.
    pub in_flight: u64,
    /// Records lost so far.
    pub dropped: u64,
    /// Line tables of this phase (line timing), by region id.
    pub lines: Vec<(u32, crate::lines::RegionLines)>,
    /// Calls left out this phase because they overlapped a pause.
    pub paused_calls: u64,
}

#[derive(Default)]
struct PhaseRegion {
    stats: Stats,
    calls: Vec<CallRecord>,
    lifetime: u64,
    gpu_count: u64,
    gpu_total: i64,
}

/// The flusher's state (owned by its thread).
pub(crate) struct Flusher {
    shared: Arc<Shared>,
    lanes: Vec<(Arc<Lane>, Cursor)>,
    asm: Assembler,
    scratch: Vec<RawCall>,
    phase: Vec<PhaseRegion>,
    tasks: Tasks,
    polls: Vec<PollRecord>,
    keep_calls: bool,
    spool: Option<SpoolWriter>,
    spooled_regions: usize,
    phase_no: u64,
    kept_calls: usize,
    calls_truncated: bool,
    lines: crate::lines::LineTables,
    paused_calls: u64,
    pauses_seen: usize,
}

/// Calls kept in memory per phase without an output file (for the summary's call tree); above
/// it only the statistics are kept.
const MEMORY_CALL_CAP: usize = 2_000_000;

impl Flusher {
    pub(crate) fn new(shared: Arc<Shared>, spool: Option<SpoolWriter>) -> Flusher {
        let keep_calls = shared.config.mode == Mode::TimeOnly;
        let mut asm = Assembler::default();
        asm.keep_polls = keep_calls && shared.config.track_async;
        Flusher {
            shared,
            lanes: Vec::new(),
            asm,
            scratch: Vec::new(),
            phase: Vec::new(),
            tasks: Tasks::default(),
            polls: Vec::new(),
            keep_calls,
            spool,
            spooled_regions: 0,
            phase_no: 0,
            kept_calls: 0,
            calls_truncated: false,
            lines: Default::default(),
            paused_calls: 0,
            pauses_seen: 0,
        }
    }

    /// The thread's main loop.
    pub(crate) fn run(mut self, rx: Receiver<Command>) {
        let interval = self.shared.config.flush_interval;
        let mut next_flush = std::time::Instant::now() + interval;
        loop {
            if std::time::Instant::now() >= next_flush {
                self.flush_spool();
                next_flush = std::time::Instant::now() + interval;
            }
            match rx.recv_timeout(POLL) {
                Ok(Command::Finalize(reply)) => {
                    let snap = self.finalize();
                    let _ = reply.send(snap);
                }
                Ok(Command::Shutdown) | Err(RecvTimeoutError::Disconnected) => {
                    self.complete_drain();
                    self.shutdown_spool();
                    return;
                }
                Err(RecvTimeoutError::Timeout) => self.complete_drain(),
            }
        }
    }

    fn refresh_lanes(&mut self) {
        let lanes = self.shared.lanes.lock().unwrap_or_else(|e| e.into_inner());
        for lane in &lanes[self.lanes.len()..] {
            self.lanes.push((lane.clone(), Cursor::default()));
        }
    }

    fn complete_drain(&mut self) {
        self.shared.clock.recalibrate();
        self.asm.begin_complete_drain();
        self.refresh_lanes();
        let Flusher {
            lanes,
            asm,
            scratch,
            ..
        } = self;
        for (lane, cursor) in lanes.iter_mut() {
            let index = lane.index;
            lane.drain(cursor, |records| asm.feed(index, records, scratch));
        }
        self.taint_if_paused();
        self.asm.end_complete_drain(&mut self.scratch);
        self.fold();
    }

    /// After the profiler paused: calls open now may miss records, so none of them is reported.
    fn taint_if_paused(&mut self) {
        let n = self.shared.pause.windows_len();
        if n > self.pauses_seen {
            self.pauses_seen = n;
            self.asm.taint_open();
        }
    }

    /// Folds assembled calls into the phase: statistics always, the calls themselves in
    /// time-only mode.
    fn fold(&mut self) {
        let clock = self.shared.clock;
        let n_regions = self.asm.regions.regions().len();
        if self.phase.len() < n_regions {
            self.phase.resize_with(n_regions, PhaseRegion::default);
        }
        if let Some(spool) = &mut self.spool {
            for (id, info) in self.asm.regions.regions()[self.spooled_regions..]
                .iter()
                .enumerate()
            {
                let id = (self.spooled_regions + id) as u32;
                spool.region(
                    id,
                    info.name,
                    info.file.unwrap_or(""),
                    info.line.map_or(-1, i64::from),
                );
            }
            self.spooled_regions = n_regions;
        }
        let track_tasks = self.shared.config.track_async;
        let pauses = self.shared.pause.windows();
        for c in self.scratch.drain(..) {
            if crate::pause::overlaps(&pauses, c.start, c.end) {
                self.paused_calls += 1;
                continue;
            }
            let start_ns = clock.to_ns(c.start);
            let dur_ns = (clock.to_ns(c.end) - start_ns).max(0);
            // Busy time on the same rounding as the duration: a one-poll call has exactly 0 ns
            // of await time.
            let busy_ns = if c.busy >= c.end - c.start {
                dur_ns
            } else {
                (clock.to_ns(c.start + c.busy) - start_ns).clamp(0, dur_ns)
            };
            if self.shared.config.line_timing {
                let info = &self.asm.regions.regions()[c.region as usize];
                let ticks_to_ns = |t: u64| (clock.to_ns(c.start + t) - start_ns) as f64;
                self.lines.add_call(
                    c.region,
                    info.file,
                    info.line,
                    busy_ns,
                    c.lines.as_deref(),
                    ticks_to_ns,
                    &self.shared.lines,
                );
            }
            let task = if track_tasks && c.task != 0 {
                self.tasks.add_call(&TaskCall {
                    tokio_id: c.task,
                    start_ns,
                    end_ns: start_ns + dur_ns,
                    polls: c.polls,
                    busy_ns,
                    region: c.region,
                    last_thread: c.last_lane,
                })
            } else {
                -1
            };
            let gpu_ns = match &self.shared.sinks {
                Some(sinks) if !c.aux.is_empty() => sinks.resolve(&c.aux).unwrap_or(-1),
                _ => -1,
            };
            let p = &mut self.phase[c.region as usize];
            p.stats.add(dur_ns as u64);
            p.lifetime += 1;
            if gpu_ns >= 0 {
                p.gpu_count += 1;
                p.gpu_total += gpu_ns;
            }
            let record = CallRecord {
                start_ns,
                dur_ns,
                thread: c.lane,
                task,
                await_ns: dur_ns - busy_ns,
                gpu_ns,
                call_id: -1,
                parent_id: -1,
            };
            if !self.keep_calls {
                continue;
            }
            if let Some(spool) = &mut self.spool {
                spool.call(c.region, record);
            } else if self.kept_calls < MEMORY_CALL_CAP {
                self.kept_calls += 1;
                p.calls.push(record);
            } else {
                self.calls_truncated = true;
            }
        }
        for p in self.asm.polls.drain(..) {
            if crate::pause::overlaps(&pauses, p.start, p.end) {
                continue;
            }
            let start_ns = clock.to_ns(p.start);
            self.polls.push(PollRecord {
                region: p.region,
                start_ns,
                dur_ns: (clock.to_ns(p.end) - start_ns).max(0),
                thread: p.lane,
                task: if p.task != 0 {
                    self.tasks.index(p.task)
                } else {
                    -1
                },
            });
        }
    }

    /// The thread table: every lane, live threads' CPU time sampled now.
    fn threads(&self) -> Vec<ThreadRow> {
        self.lanes
            .iter()
            .map(|(l, _)| {
                let end_ns = l.end_ns.load(Ordering::Acquire);
                let cpu_ns = if end_ns < 0 {
                    crate::clock::other_thread_cpu_ns(l.native_id)
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
            })
            .collect()
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
            .map(|(r, p)| (r as u32, p.stats))
            .collect()
    }

    /// Makes everything assembled so far durable in the spool.
    fn flush_spool(&mut self) {
        if self.spool.is_none() {
            return;
        }
        let threads = self.threads();
        let agg = self.aggregate_stats();
        if let Some(spool) = &mut self.spool {
            spool.flush(&threads, &agg);
        }
    }

    /// At shutdown: the last finalize published everything, so the spool goes, unless calls
    /// completed after it (other threads still running); those stay recoverable.
    fn shutdown_spool(&mut self) {
        let threads = self.threads();
        if let Some(mut spool) = self.spool.take() {
            if spool.error().is_none() && spool.unpublished == 0 {
                spool.remove();
            } else {
                spool.flush(&threads, &[]);
                eprintln!(
                    "scope-profiler: {} call(s) completed after the last finalize; they are kept \
                     in {} (scope-profiler-recover turns them into a profile)",
                    spool.unpublished,
                    spool.path().display()
                );
            }
        }
    }

    fn dropped(&self) -> u64 {
        let lanes: u64 = self
            .lanes
            .iter()
            .map(|(l, _)| l.dropped.load(Ordering::Relaxed))
            .sum();
        let spool = self.spool.as_ref().map_or(0, |s| s.lost_calls);
        lanes + self.shared.lost.load(Ordering::Relaxed) + self.asm.orphans + spool
    }

    fn finalize(&mut self) -> Snapshot {
        self.complete_drain();
        self.complete_drain();
        let infos: Vec<RegionInfo> = self.asm.regions.regions().to_vec();
        let mut regions = Vec::new();
        for (info, p) in infos.iter().zip(self.phase.iter_mut()) {
            if p.lifetime == 0 {
                continue;
            }
            regions.push(RegionSnapshot {
                row: RegionRow {
                    name: info.name.to_owned(),
                    file: info.file.unwrap_or("").to_owned(),
                    line: info.line.map_or(-1, i64::from),
                    stats: std::mem::take(&mut p.stats),
                    calls: std::mem::take(&mut p.calls),
                    gpu_count: std::mem::take(&mut p.gpu_count),
                    gpu_total: std::mem::take(&mut p.gpu_total),
                    exclusive_ns: -1,
                },
                lifetime_calls: p.lifetime,
            });
        }
        let region_names: Vec<String> = infos.iter().map(|i| i.name.to_owned()).collect();
        let threads = self.threads();
        let agg = self.aggregate_stats();
        self.phase_no += 1;
        let (spool_phase, spool_error) = match &mut self.spool {
            None => (None, None),
            Some(spool) => match spool.rotate(self.phase_no, &threads, &agg) {
                Ok(p) => (Some(p), None),
                Err(e) => (
                    None,
                    Some(format!(
                        "{e} (unpublished calls are in {})",
                        spool.path().display()
                    )),
                ),
            },
        };
        self.kept_calls = 0;
        Snapshot {
            regions,
            threads,
            tasks: self.tasks.take_rows(|r| region_names[r as usize].clone()),
            polls: std::mem::take(&mut self.polls),
            region_names,
            spool_phase,
            spool_error,
            calls_truncated: std::mem::take(&mut self.calls_truncated),
            in_flight: self.asm.in_flight(),
            dropped: self.dropped(),
            lines: self.lines.take(),
            paused_calls: std::mem::take(&mut self.paused_calls),
        }
    }
}

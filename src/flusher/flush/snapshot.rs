//! What a finalize hands from the flusher to the guard: the phase's regions, lane tables and
//! spool file, and the counters of what was lost.

use std::sync::atomic::Ordering;

use super::Flusher;
use crate::data::rows::{PollRecord, RegionRow, TaskRow, ThreadRow};
use crate::data::stats::Stats;
use crate::recording::region::RegionInfo;
use crate::spool::loss::Rotated;

/// One region as seen at a finalize.
#[derive(Clone, Debug)]
pub(crate) struct RegionSnapshot {
    /// The region's id (its id in the spool too).
    pub id: u32,
    /// This phase's calls and statistics.
    pub row: RegionRow,
    /// Calls completed since `build()`.
    pub lifetime_calls: u64,
}

/// What a finalize hands to the guard.
#[derive(Debug, Default)]
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
    /// How many task rows and polls `spool_phase` holds.
    pub spooled_lanes: crate::spool::LaneCounts,
    /// Calls `spool_phase` holds.
    pub spooled_calls: u64,
    /// Why the spool does not hold every call of the phase, if it does not (it keeps what
    /// it has; the statistics are whole).
    pub spool_failure: Option<crate::spool::SpoolFailure>,
    /// Whether this phase's calls were kept only in part (in-memory mode above its cap).
    pub calls_truncated: bool,
    /// Calls entered and not yet closed.
    pub in_flight: u64,
    /// Records lost so far by the recording side (lanes, thread teardown, unmatched and
    /// corrupt records); the spool's losses are `spool_lost`.
    pub dropped: u64,
    /// Line tables of this phase (line timing), by region id.
    pub lines: Vec<(u32, crate::flusher::lines::RegionLines)>,
    /// Calls left out this phase because they overlapped a pause.
    pub paused_calls: u64,
    /// Calls dropped whole so far because a record of theirs could not be buffered.
    pub dropped_calls: u64,
    /// Times a recording thread waited for the flusher so far (backpressure).
    pub waits: u64,
    /// Total time recording threads waited, ns.
    pub wait_ns: u64,
    /// Records rejected as corrupt so far (never followed).
    pub corrupt: u64,
    /// `follows_from` links left out so far (dropped by the side channel's bound, or
    /// naming no span the flusher knew).
    pub follows_lost: u64,
    /// Calls the spool could not take since `build()` (after a write error).
    pub spool_lost: u64,
    /// Earliest start and latest end of this phase's calls (`None` without calls).
    pub span_ns: Option<(i64, i64)>,
    /// Tokio's own instrumentation: spawn sites and counts.
    pub tokio: crate::data::rows::TokioExtra,
}

impl Flusher {
    /// Catches up with everything recorded before now and hands the phase over.
    pub(super) fn finalize(&mut self) -> Snapshot {
        self.catch_up();
        // The live metrics then hold every call this finalize reports, and keep them.
        self.publish_metrics(true);
        self.carry_metrics();
        let infos: Vec<RegionInfo> = self.asm.regions.regions().to_vec();
        let regions = self.take_regions(&infos);
        let region_names: Vec<String> = infos.iter().map(|i| i.name.to_owned()).collect();
        let clock = self.shared.clock;
        let mut tasks = self.asm.tasks.take_rows(clock.now_ns(), |t| clock.to_ns(t));
        if !self.finished_tasks.is_empty() {
            tasks.extend(self.finished_tasks.drain(..).map(|t| t.row(false)));
            TaskRow::order(&mut tasks);
        }
        let threads = self.threads();
        let agg = self.aggregate_stats();
        self.phase_no += 1;
        let rotated = self.rotate_spool(&threads, &agg);
        self.kept_calls = 0;
        Snapshot {
            regions,
            threads,
            tasks,
            polls: std::mem::take(&mut self.polls),
            region_names,
            spool_phase: rotated.file,
            spooled_lanes: rotated.lanes,
            spooled_calls: rotated.calls,
            spool_failure: rotated.failure,
            calls_truncated: std::mem::take(&mut self.calls_truncated),
            in_flight: {
                let (regions, cfg) = (self.asm.regions.regions(), &self.shared.config);
                self.asm
                    .in_flight_except(|r, task| super::fold::hidden(regions, cfg, r, task))
            },
            dropped: self.dropped(),
            spool_lost: self.spool.as_ref().map_or(0, |s| s.lost_calls),
            span_ns: self.span_ns.take(),
            lines: self.lines.take(),
            paused_calls: std::mem::take(&mut self.paused_calls),
            dropped_calls: self.dropped_calls(),
            waits: self.shared.pool.waits.load(Ordering::Relaxed),
            wait_ns: self.shared.pool.wait_ns.load(Ordering::Relaxed),
            corrupt: self.asm.corrupt,
            follows_lost: self.follows_unresolved
                + self.shared.follows.dropped.load(Ordering::Relaxed),
            tokio: crate::data::rows::TokioExtra {
                sites: (self.shared.tokio.sites.since(0).into_iter())
                    .map(|(_, s)| s)
                    .collect(),
                counts: self.asm.sched.counts,
                hidden_calls: self.hidden_calls,
            },
        }
    }

    /// Takes this phase's calls and statistics of every region (`infos`, by id) that has
    /// ever completed a call.
    fn take_regions(&mut self, infos: &[RegionInfo]) -> Vec<RegionSnapshot> {
        let mut regions = Vec::new();
        for (id, (info, p)) in infos.iter().zip(self.phase.iter_mut()).enumerate() {
            if p.lifetime == 0 {
                continue;
            }
            regions.push(RegionSnapshot {
                id: id as u32,
                row: RegionRow {
                    name: info.name.to_owned(),
                    file: info.file.unwrap_or("").to_owned(),
                    line: info.line.map_or(-1, i64::from),
                    stats: p.stats.take(),
                    calls: std::mem::take(&mut p.calls),
                    gpu_count: std::mem::take(&mut p.gpu_count),
                    gpu_total: std::mem::take(&mut p.gpu_total),
                    exclusive_ns: -1,
                },
                lifetime_calls: p.lifetime,
            });
        }
        regions
    }

    /// Ends the spool's phase (`self.phase_no`, with the final `threads` and `agg`) and starts
    /// the next one's with the whole thread table; nothing without a spool.
    fn rotate_spool(&mut self, threads: &[ThreadRow], agg: &[(u32, Stats)]) -> Rotated {
        let Some(spool) = &mut self.spool else {
            return Rotated::default();
        };
        crate::checkpoint::reach("snapshot");
        let r = spool.rotate(self.phase_no, threads, agg);
        self.shared.fork.spool_fd(spool.raw_fd());
        // The new phase's spool holds the whole thread table too.
        self.exited.new_phase();
        spool.thread_rows(&self.exited.take_unspooled());
        r
    }
}

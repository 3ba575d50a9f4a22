//! The flusher's folding step: assembled calls into the phase's statistics and calls
//! (streamed to the spool with an output file), polls, and the task table, which is settled
//! up to the watermark (see [`crate::flusher::task`]).

use super::{Flusher, PhaseRegion, BATCH_KEEP, MEMORY_CALL_CAP};
use crate::data::edges::{Spawn, Wake};
use crate::data::rows::{CallRecord, PollRecord};
use crate::flusher::assemble::{RawCall, NO_SCHED};
use crate::flusher::sched::edges::EdgeOut;
use crate::flusher::sched::TaskOut;
use crate::flusher::task::polls::TaskPoll;
use crate::flusher::task::TaskCall;
use crate::recording::region::{RegionInfo, TokioSpan};
use crate::recording::shared::Config;

/// Whether a call of region `region` is left out: Tokio's own spans, unless asked for; a
/// `runtime.spawn` span that is no task's (a `block_on` future, a runtime worker thread, see
/// [`crate::recording::tokio`]) always. `task_span`: the call is a Tokio task's own span.
pub(super) fn hidden(regions: &[RegionInfo], cfg: &Config, region: u32, task_span: bool) -> bool {
    match regions.get(region as usize).and_then(|r| r.tokio) {
        Some(TokioSpan::Spawn) => !cfg.task_regions || !task_span,
        Some(TokioSpan::Resource) => !cfg.tokio_resources,
        None => false,
    }
}

impl Flusher {
    /// Folds assembled calls into the phase: statistics always, the calls themselves in
    /// time-only mode.
    pub(super) fn fold(&mut self) {
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
            if self.asm.sched.active {
                spool.scheduled_columns();
            }
        }
        if let Some(ring) = &mut self.flight {
            let now = self.shared.clock.now_ns();
            for (id, info) in self.asm.regions.regions()[self.spooled_regions..]
                .iter()
                .enumerate()
            {
                let id = (self.spooled_regions + id) as u32;
                let (file, line) = (info.file.unwrap_or(""), info.line.map_or(-1, i64::from));
                ring.region(id, info.name, file, line, now);
                if let Some(t) = &mut self.triggers {
                    t.region(id, info.name);
                }
            }
            if self.asm.sched.active {
                ring.scheduled_columns(now);
            }
        }
        self.spooled_regions = n_regions;
        // The live metrics, when on: checked once here; a loop without them otherwise.
        #[cfg(feature = "prometheus")]
        let live = self.metrics.is_some();
        #[cfg(not(feature = "prometheus"))]
        let live = false;
        if live {
            self.fold_calls::<true>();
        } else {
            self.fold_calls::<false>();
        }
        self.polls();
        self.task_polls();
        self.task_edges();
        // A round after a burst can hold many calls and polls;
        // give that memory back instead of keeping the batch vectors at their peak.
        if self.scratch.capacity() > BATCH_KEEP {
            self.scratch.shrink_to(BATCH_KEEP);
        }
        if self.asm.polls.capacity() > BATCH_KEEP {
            self.asm.polls.shrink_to(BATCH_KEEP);
        }
    }

    /// The calls of [`fold`](Self::fold); with `LIVE`, each is also fed to the live metrics.
    fn fold_calls<const LIVE: bool>(&mut self) {
        #[cfg(feature = "prometheus")]
        if let Some(m) = self.metrics.as_mut().filter(|_| LIVE) {
            let regions = self.asm.regions.regions();
            for info in regions.get(m.acc.regions()..).unwrap_or_default() {
                m.acc.region(info.name);
            }
        }
        let pauses = self.shared.pause.windows();
        let any_tokio = self.asm.regions.any_tokio();
        let mut calls = std::mem::take(&mut self.scratch);
        for c in calls.drain(..) {
            if !self.left_out(&c, any_tokio, &pauses) {
                self.fold_call::<LIVE>(c);
            }
        }
        self.scratch = calls; // its capacity, for the next round
    }

    /// Whether call `c` is left out (and counted): a hidden Tokio span, or paused.
    #[inline]
    fn left_out(&mut self, c: &RawCall, any_tokio: bool, pauses: &[(u64, u64)]) -> bool {
        if any_tokio
            && hidden(
                self.asm.regions.regions(),
                &self.shared.config,
                c.region,
                // A task's span always has its task's scheduled time.
                c.task != 0 && c.sched != NO_SCHED,
            )
        {
            self.hidden_calls += 1;
            return true;
        }
        if crate::recording::pause::overlaps(pauses, c.start, c.end) {
            self.paused_calls += 1;
            return true;
        }
        false
    }

    /// One call into its region's statistics, the live metrics, and the calls kept.
    #[inline]
    fn fold_call<const LIVE: bool>(&mut self, c: RawCall) {
        let clock = self.shared.clock;
        let (start_ns, end_ns) = clock.to_ns_pair(c.start, c.end);
        let dur_ns = (end_ns - start_ns).max(0);
        // Busy time on the same rounding as the duration: a one-poll call has exactly 0 ns
        // of await time.
        let busy_ns = if c.busy >= c.end - c.start {
            dur_ns
        } else {
            (clock.to_ns(c.start + c.busy) - start_ns).clamp(0, dur_ns)
        };
        if self.shared.config.line_timing {
            self.time_lines(&c, start_ns, busy_ns);
        }
        let task = if self.shared.config.track_async && c.task != 0 {
            self.asm.tasks.add_call(&TaskCall {
                tokio_id: c.task,
                start_tick: c.start,
                start_ns,
                end_ns: start_ns + dur_ns,
                polls: c.polls,
                busy_ns,
                region: c.region,
                last_thread: c.last_lane,
                hold: c.close,
            })
        } else {
            -1
        };
        let gpu_ns = match (&self.shared.sinks, c.extra.as_ref()) {
            (Some(sinks), Some(e)) if !e.aux.is_empty() => sinks.resolve(&e.aux).unwrap_or(-1),
            _ => -1,
        };
        let end_ns = start_ns + dur_ns;
        if let Some(t) = &mut self.triggers {
            t.add(c.region, end_ns, dur_ns);
        }
        self.span_ns = Some(match self.span_ns {
            Some((s, e)) => (s.min(start_ns), e.max(end_ns)),
            None => (start_ns, end_ns),
        });
        let p = &mut self.phase[c.region as usize];
        p.stats.add(dur_ns as u64);
        p.lifetime += 1;
        if gpu_ns >= 0 {
            p.gpu_count += 1;
            p.gpu_total += gpu_ns;
        }
        #[cfg(feature = "prometheus")]
        if LIVE {
            if let Some(m) = &mut self.metrics {
                m.acc
                    .add(c.region, dur_ns as u64, (dur_ns - busy_ns) as u64);
            }
        }
        if !self.keep_calls && self.flight.is_none() {
            return;
        }
        // The flight recorder's threshold: counted in the statistics above, no detail.
        if let Some(ring) = &mut self.flight {
            if dur_ns < self.flight_min_ns {
                // Its lane as nesting sees it, so a dump counts it under its parent.
                let lane = if task >= 0 {
                    task
                } else {
                    -2 - i64::from(c.lane)
                };
                ring.below(c.region, start_ns, end_ns, lane);
                return;
            }
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
            sched_ns: match c.sched {
                NO_SCHED => -1,
                t => clock.ticks_to_ns(t).clamp(0, dur_ns),
            },
        };
        if let Some(ring) = &mut self.flight {
            match ring.writer(start_ns) {
                Some(w) => w.call(c.region, record),
                None => ring.lost_call(),
            }
        } else if let Some(spool) = &mut self.spool {
            spool.call(c.region, record);
        } else if self.kept_calls < MEMORY_CALL_CAP {
            self.kept_calls += 1;
            self.phase[c.region as usize].calls.push(record);
        } else {
            self.calls_truncated = true;
        }
    }

    /// Line timing: the checkpoints of call `c` into its region's line table.
    fn time_lines(&mut self, c: &RawCall, start_ns: i64, busy_ns: i64) {
        let clock = self.shared.clock;
        let info = &self.asm.regions.regions()[c.region as usize];
        let ticks_to_ns = |t: u64| (clock.to_ns(c.start + t) - start_ns) as f64;
        self.lines.add_call(
            c.region,
            info.file,
            info.line,
            busy_ns,
            c.extra.as_ref().and_then(|e| e.lines.as_deref()),
            ticks_to_ns,
            &self.shared.lines,
        );
    }

    /// Folds the drained polls (streamed to the spool with an output file).
    pub(super) fn polls(&mut self) {
        let clock = self.shared.clock;
        let pauses = self.shared.pause.windows();
        let any_tokio = self.asm.regions.any_tokio();
        // Drained, not dropped: the vector keeps its capacity for the next round (a fresh
        // one grew again, copying, every round).
        let mut polls = std::mem::take(&mut self.asm.polls);
        for p in polls.drain(..) {
            // (A task's polls come from its timeline; polls of spawn spans here are not tasks'.)
            if (any_tokio
                && hidden(
                    self.asm.regions.regions(),
                    &self.shared.config,
                    p.region,
                    false,
                ))
                || crate::recording::pause::overlaps(&pauses, p.start, p.end)
            {
                continue;
            }
            let start_ns = clock.to_ns(p.start);
            let record = PollRecord {
                region: p.region,
                start_ns,
                dur_ns: (clock.to_ns(p.end) - start_ns).max(0),
                thread: p.lane,
                task: if p.task != 0 {
                    self.asm.tasks.index(p.task)
                } else {
                    -1
                },
                sched_ns: -1,
            };
            self.keep_poll(record);
        }
        self.asm.polls = polls;
    }

    fn keep_poll(&mut self, record: PollRecord) {
        if let Some(ring) = &mut self.flight {
            if let Some(w) = ring.writer(record.start_ns) {
                w.poll(record);
            }
            return;
        }
        match &mut self.spool {
            Some(spool) => spool.poll(record),
            None => self.polls.push(record),
        }
    }

    /// Folds the tasks' settled polls and ends (Tokio's instrumentation, see
    /// [`crate::flusher::sched`]) into the task table, and the polls into the phase's polls.
    pub(super) fn task_polls(&mut self) {
        if self.asm.sched.out.is_empty() {
            return;
        }
        let clock = self.shared.clock;
        let pauses = self.shared.pause.windows();
        let ns = |t: u64| clock.ticks_to_ns(t);
        for out in std::mem::take(&mut self.asm.sched.out) {
            match out {
                TaskOut::Poll {
                    tokio,
                    site,
                    region,
                    spawn,
                    poll: d,
                } => {
                    if crate::recording::pause::overlaps(&pauses, d.start, d.end) {
                        continue;
                    }
                    let start_ns = clock.to_ns(d.start);
                    let end_ns = start_ns + ns(d.end - d.start);
                    let sched_ns = d.sched.map(ns);
                    let index = self.asm.tasks.add_poll(&TaskPoll {
                        tokio_id: tokio,
                        site,
                        lane: d.lane,
                        start_ns,
                        end_ns,
                        sched_ns,
                        idle_ns: ns(d.idle),
                        first_delay_ns: d.first_delay.map(ns),
                        spawn_ns: (d.first_delay.is_some() && spawn != 0)
                            .then(|| clock.to_ns(spawn)),
                    });
                    if self.asm.keep_polls {
                        self.keep_poll(PollRecord {
                            region,
                            start_ns,
                            dur_ns: end_ns - start_ns,
                            thread: d.lane,
                            task: index,
                            sched_ns: sched_ns.unwrap_or(-1),
                        });
                    }
                }
                TaskOut::Ended {
                    tokio,
                    site,
                    last_end,
                } => {
                    let last = last_end.map(|t| clock.to_ns(t));
                    self.asm.tasks.task_ended(tokio, site, last);
                }
            }
        }
    }

    /// Streams the wakes and spawns the timelines settled (see
    /// [`crate::flusher::sched::edges`]) to the spool, tasks as dense indices.
    pub(super) fn task_edges(&mut self) {
        if self.asm.sched.edges.is_empty() {
            return;
        }
        let clock = self.shared.clock;
        let mut edges = std::mem::take(&mut self.asm.sched.edges);
        // With the flight recorder the spool holds statistics only: edges go to the ring.
        let (tasks, mut ring) = (&mut self.asm.tasks, self.flight.as_mut());
        let mut spool = if ring.is_some() {
            None
        } else {
            self.spool.as_mut()
        };
        let mut by = |t: u64| (t != 0).then(|| tasks.index(t));
        for e in edges.drain(..) {
            if spool.is_none() && ring.is_none() {
                break;
            }
            let mut to = super::flight::Both {
                spool: spool.as_deref_mut(),
                ring: ring.as_deref_mut(),
            };
            match e {
                EdgeOut::Wake {
                    tick,
                    lane,
                    by: waker,
                    woken,
                } => {
                    let waker_task = by(waker);
                    to.wake(Wake {
                        tick_ns: clock.to_ns(tick),
                        thread: lane,
                        waker_task,
                        woken_task: by(woken).unwrap_or(-1),
                    })
                }
                EdgeOut::Spawn {
                    tick,
                    lane,
                    by: parent,
                    child,
                } => {
                    let parent_task = by(parent);
                    to.spawn(Spawn {
                        tick_ns: clock.to_ns(tick),
                        thread: lane,
                        parent_task,
                        child_task: by(child).unwrap_or(-1),
                    })
                }
            }
        }
        // Its capacity, for the next round.
        if edges.capacity() <= BATCH_KEEP {
            self.asm.sched.edges = edges;
        }
    }

    /// At the end of a round: settles the task table up to the watermark `wm` (see [`crate::flusher::task`]); rows of
    /// retired tasks go to the spool (or stay in memory without an output file).
    pub(super) fn settle_tasks(&mut self, wm: u64) {
        if !self.shared.config.track_async {
            return;
        }
        let clock = self.shared.clock;
        self.asm
            .tasks
            .settle(clock.now_ns(), wm, false, |t| clock.to_ns(t));
        let finished = self.asm.tasks.take_finished();
        if finished.is_empty() {
            return;
        }
        if self.spool.is_none() {
            self.finished_tasks.extend(finished);
            return;
        }
        // Sites their rows name, first (a recovered spool names its tasks with them).
        let known = self.shared.tokio.sites.len();
        let now = self.shared.clock.now_ns();
        if known > self.spooled_sites {
            let sites = self.shared.tokio.sites.since(self.spooled_sites);
            match (&mut self.flight, &mut self.spool) {
                (Some(ring), _) => ring.sites(sites, now),
                (None, Some(spool)) => spool.sites(sites),
                (None, None) => {}
            }
            self.spooled_sites = known;
        }
        // With the flight recorder the spool holds statistics only: rows go to the ring.
        if let Some(ring) = &mut self.flight {
            if let Some(w) = ring.writer(now) {
                w.tasks(&finished);
            }
        } else if let Some(spool) = &mut self.spool {
            spool.tasks(&finished);
        }
    }
}

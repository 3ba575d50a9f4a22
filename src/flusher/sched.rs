//! Where a Tokio task's await time went: idle (waiting for its I/O, timer or channel) or
//! scheduled (woken, waiting for a worker), per task, per poll and per call; on the flusher.
//!
//! The data comes from Tokio's own instrumentation (see [`crate::recording::tokio`]): a task's
//! `runtime.spawn` span (its spawn, a wake stamp at the spawn, an enter-exit per poll) and
//! its wakes, which carry the span id and are routed to the span's instance by the
//! assembler's stream-order rule for reused ids (see [`crate::flusher::assemble`]).
//!
//! A task's polls and wakes come from different lanes, which the flusher reads in any order.
//! So they are not interpreted as they are read: each becomes an event with its tick, and at
//! every round the events the watermark has passed (everything before it has been read) are
//! sorted and run through the task's [`Timeline`] in time order. Events after the watermark
//! wait for the next round: what waits is the window between the lanes' read positions.
//!
//! Calls inside a task get the scheduled time of the task's suspensions while they were open:
//! the task's running sum of scheduled time at the call's last exit minus that at its first
//! enter, both taken in time order from the same events (a call's start and exits are events
//! too, keyed by the task's Tokio id). Calls outside any task get none (-1).
//!
//! Memory: one timeline per live task, one entry per open call inside a task, the events of the
//! window. Work: O(log w) per event for the window's w events (one sort of nearly sorted runs
//! per round); a wake costs one event.

pub(crate) mod edges;
pub(crate) mod timeline;

pub(crate) use crate::data::rows::SchedCounts;
use crate::fasthash::FastMap;
use timeline::{Done, Timeline};

/// Capacity kept by the event list however few events wait.
const KEEP_CAPACITY: usize = 4096;

/// What an event is. The order breaks ties at one tick: a call's exit before everything, a
/// wake before the end of a poll (a wake at its last tick was during it), before the task's
/// close (it was still alive) and before a start (a wake at a poll's first tick ended the
/// suspension before it), a call's start last.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    CallExit,
    Wake,
    End,
    Close,
    Start,
    CallStart,
}

/// One event: `key` is the task's timeline serial (polls, wakes) or its Tokio id (calls);
/// `arg` the lane of a poll's start or a wake, or the instance of a call; `by` the Tokio id
/// of the task a wake is attributed to (0: the runtime's driver; see [`edges`]).
#[derive(Clone, Copy, Debug)]
struct Ev {
    tick: u64,
    key: u64,
    by: u64,
    arg: u32,
    kind: Kind,
}

/// A call inside a task: the task's scheduled sum at its start, and what it has gathered.
#[derive(Clone, Copy, Debug)]
struct CallSched {
    base: u64,
    value: u64,
}

/// What the timelines hand to the flusher, in raw ticks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TaskOut {
    /// A poll of a task, settled.
    Poll {
        tokio: u64,
        site: u32,
        /// The region of the task's span.
        region: u32,
        /// The spawn (0: unknown).
        spawn: u64,
        poll: Done,
    },
    /// A task closed; `last_end` is the end of its last poll.
    Ended {
        tokio: u64,
        site: u32,
        last_end: Option<u64>,
    },
}

/// Every live task's timeline and the events waiting for the watermark.
#[derive(Default)]
pub(crate) struct Sched {
    /// Tokio's instrumentation is on (its callsites registered; set by the flusher): calls
    /// inside tasks get their scheduled time.
    pub(crate) active: bool,
    next_serial: u64,
    /// Instance of a task's span -> its timeline's serial.
    by_inst: FastMap<u32, u64>,
    /// Tokio task id -> timeline serial (from the task's first poll).
    by_tokio: FastMap<u64, u64>,
    timelines: FastMap<u64, Timeline>,
    pending: Vec<Ev>,
    calls: FastMap<u32, CallSched>,
    /// Settled polls and ended tasks, for the flusher to take.
    pub(crate) out: Vec<TaskOut>,
    pub(crate) counts: SchedCounts,
    /// Keep the wakes and spawns in [`Sched::edges`] (the flusher writes them to a spool).
    pub(crate) keep_edges: bool,
    /// Settled wakes and spawns, for the flusher to take (see [`edges`]).
    pub(crate) edges: Vec<edges::EdgeOut>,
}

impl Sched {
    /// Instance `k` (of region `region`) is a task spawned at `tick` from site `site`.
    #[cfg(test)]
    pub(crate) fn spawn(&mut self, k: u32, region: u32, tick: u64, site: u32) {
        self.spawn_by(k, region, tick, site, 0, 0);
    }

    /// Instance `k` (of region `region`) is a task spawned at `tick` from site `site`, on
    /// lane `lane` by Tokio task `by` (0: the thread, outside tasks).
    pub(crate) fn spawn_by(
        &mut self,
        k: u32,
        region: u32,
        tick: u64,
        site: u32,
        lane: u32,
        by: u64,
    ) {
        self.next_serial += 1;
        let mut t = Timeline::new(tick, site);
        t.region = region;
        t.spawned_by = (lane, by);
        self.timelines.insert(self.next_serial, t);
        self.by_inst.insert(k, self.next_serial);
        self.counts.tasks += 1;
    }

    /// The task of instance `k` first ran as Tokio task `tokio`.
    pub(crate) fn link(&mut self, k: u32, tokio: u64) {
        let Some(&serial) = self.by_inst.get(&k) else {
            return;
        };
        if let Some(t) = self.timelines.get_mut(&serial) {
            if t.tokio == 0 && tokio != 0 {
                t.tokio = tokio;
                self.by_tokio.insert(tokio, serial);
                if self.keep_edges {
                    let (lane, by) = t.spawned_by;
                    self.edges.push(edges::EdgeOut::Spawn {
                        tick: t.spawn,
                        lane,
                        by,
                        child: tokio,
                    });
                }
            }
        }
    }

    fn task_event(&mut self, k: u32, tick: u64, kind: Kind, arg: u32) {
        self.task_event_by(k, tick, kind, arg, 0);
    }

    fn task_event_by(&mut self, k: u32, tick: u64, kind: Kind, arg: u32, by: u64) {
        if let Some(&serial) = self.by_inst.get(&k) {
            self.pending.push(Ev {
                tick,
                key: serial,
                by,
                arg,
                kind,
            });
        }
    }

    /// A poll of task span `k` starts at `tick` on `lane`.
    pub(crate) fn poll_start(&mut self, k: u32, tick: u64, lane: u32) {
        self.task_event(k, tick, Kind::Start, lane);
    }

    /// The poll of task span `k` ends at `tick`.
    pub(crate) fn poll_end(&mut self, k: u32, tick: u64) {
        self.task_event(k, tick, Kind::End, 0);
    }

    /// A wake of task span `k` at `tick`.
    #[cfg(test)]
    pub(crate) fn wake(&mut self, k: u32, tick: u64) {
        self.wake_by(k, tick, 0, 0);
    }

    /// A wake of task span `k` at `tick`, on lane `lane`, attributed to Tokio task `by` (0:
    /// the runtime's driver, see [`edges`]).
    pub(crate) fn wake_by(&mut self, k: u32, tick: u64, lane: u32, by: u64) {
        self.task_event_by(k, tick, Kind::Wake, lane, by);
    }

    /// The task of span `k` ended at `tick` (its future dropped): wakes after it are of a task
    /// that has ended.
    pub(crate) fn close_at(&mut self, k: u32, tick: u64) {
        self.task_event(k, tick, Kind::Close, 0);
    }

    /// A wake that matched no task (its task ended, or its span id is another span's now).
    pub(crate) fn wake_of_ended_task(&mut self) {
        self.counts.ended_wakes += 1;
    }

    /// Call instance `k`, inside Tokio task `tokio`, starts (or moves its start) at `tick`.
    pub(crate) fn call_start(&mut self, tokio: u64, k: u32, tick: u64) {
        self.pending.push(Ev {
            tick,
            key: tokio,
            by: 0,
            arg: k,
            kind: Kind::CallStart,
        });
    }

    /// Call instance `k`, inside Tokio task `tokio`, ends a poll at `tick`.
    pub(crate) fn call_exit(&mut self, tokio: u64, k: u32, tick: u64) {
        self.pending.push(Ev {
            tick,
            key: tokio,
            by: 0,
            arg: k,
            kind: Kind::CallExit,
        });
    }

    /// The scheduled time (ticks) call instance `k` gathered, once it completed (`None`: it ran
    /// in no task with a timeline).
    pub(crate) fn take_call(&mut self, k: u32) -> Option<u64> {
        self.calls.remove(&k).map(|c| c.value)
    }

    /// Runs the events up to the watermark `wm` through their timelines, in time order.
    pub(crate) fn settle(&mut self, wm: u64) {
        if self.pending.is_empty() {
            return;
        }
        // Runs of each lane's events are in order: the stable sort merges them cheaply.
        self.pending.sort_by_key(|e| (e.tick, e.kind));
        let due = self.pending.partition_point(|e| e.tick <= wm);
        let mut events = std::mem::take(&mut self.pending);
        for e in events.drain(..due) {
            self.run(e);
        }
        self.pending = events;
        if self.pending.capacity() > KEEP_CAPACITY.max(8 * self.pending.len()) {
            self.pending.shrink_to(KEEP_CAPACITY);
        }
    }

    fn run(&mut self, e: Ev) {
        match e.kind {
            Kind::CallStart | Kind::CallExit => {
                let Some(cum) = self
                    .by_tokio
                    .get(&e.key)
                    .and_then(|s| self.timelines.get(s))
                    .map(|t| t.cum)
                else {
                    return;
                };
                if e.kind == Kind::CallStart {
                    // The earliest start counts (an earlier enter read later moves it).
                    self.calls.entry(e.arg).or_insert(CallSched {
                        base: cum,
                        value: 0,
                    });
                } else if let Some(c) = self.calls.get_mut(&e.arg) {
                    c.value = cum - c.base;
                }
            }
            Kind::Wake => match self.timelines.get_mut(&e.key) {
                Some(t) if !t.closed => {
                    self.counts.wakes += 1;
                    let queued = t.wake(e.tick);
                    if self.keep_edges && queued && t.tokio != 0 {
                        self.edges.push(edges::EdgeOut::Wake {
                            tick: e.tick,
                            lane: e.arg,
                            by: e.by,
                            woken: t.tokio,
                        });
                    }
                }
                // Its task has ended (its span id may be another span's by now).
                _ => self.counts.ended_wakes += 1,
            },
            Kind::Close => {
                if let Some(t) = self.timelines.get_mut(&e.key) {
                    t.closed = true;
                }
            }
            Kind::Start => {
                let Some(t) = self.timelines.get_mut(&e.key) else {
                    return;
                };
                if let Some(poll) = t.start(e.tick, e.arg) {
                    self.counts.unwoken += u64::from(!poll.woken);
                    self.out.push(TaskOut::Poll {
                        tokio: t.tokio,
                        site: t.site,
                        region: t.region,
                        spawn: t.spawn,
                        poll,
                    });
                }
            }
            Kind::End => {
                if let Some(t) = self.timelines.get_mut(&e.key) {
                    t.end(e.tick);
                }
            }
        }
    }

    /// Task span `k` completed (the watermark has passed its close, so every event of it up
    /// to there has run): its last enter-exit was the drop of its future. Returns the task's
    /// scheduled time (what the span's call gathered, with `Builder::task_regions`).
    pub(crate) fn task_closed(&mut self, k: u32) -> Option<u64> {
        let serial = self.by_inst.remove(&k)?;
        let mut t = self.timelines.remove(&serial)?;
        self.counts.extra_wakes += t.extra_wakes;
        if t.tokio == 0 {
            return None; // never entered: no task row
        }
        if self.by_tokio.get(&t.tokio) == Some(&serial) {
            self.by_tokio.remove(&t.tokio);
        }
        self.out.push(TaskOut::Ended {
            tokio: t.tokio,
            site: t.site,
            last_end: t.close(),
        });
        Some(t.cum)
    }

    /// Gives back the tables of a burst once it has passed (call between rounds).
    pub(crate) fn shrink(&mut self) {
        for_shrink(&mut self.by_inst);
        for_shrink(&mut self.by_tokio);
        for_shrink(&mut self.timelines);
        for_shrink(&mut self.calls);
    }

    /// The Tokio id of the task of span instance `k` (0: none, or not polled yet).
    pub(crate) fn tokio_of(&self, k: u32) -> u64 {
        let serial = self.by_inst.get(&k);
        serial
            .and_then(|s| self.timelines.get(s))
            .map_or(0, |t| t.tokio)
    }

    /// Where Tokio task `tokio` stands, as its events up to the watermark tell (`None`: no
    /// timeline of it).
    pub(crate) fn state_of(&self, tokio: u64) -> Option<crate::data::open_calls::TaskState> {
        let serial = self.by_tokio.get(&tokio)?;
        self.timelines.get(serial).map(Timeline::state)
    }

    /// Live tasks (tests).
    #[cfg(test)]
    pub(crate) fn live(&self) -> usize {
        self.timelines.len()
    }

    /// Open calls inside tasks, and events waiting (tests).
    #[cfg(test)]
    pub(crate) fn held(&self) -> (usize, usize) {
        (self.calls.len(), self.pending.len())
    }
}

fn for_shrink<K: std::hash::Hash + Eq, V>(m: &mut FastMap<K, V>) {
    let len = m.len();
    if m.capacity() > KEEP_CAPACITY.max(8 * len) {
        m.shrink_to(KEEP_CAPACITY.max(2 * len));
    }
}

#[cfg(test)]
mod tests;

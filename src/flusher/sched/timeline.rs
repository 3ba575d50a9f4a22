//! One Tokio task's scheduling timeline: its polls and wakes, taken in time order, split into
//! busy (inside a poll), idle (from the end of a poll to the wake that ends the suspension) and
//! scheduled (from that wake to the start of the next poll) time.
//!
//! The rules, for the suspension between two polls of a task:
//! - the wake that ends it is the first wake after the earlier poll *started*: a wake during a
//!   poll (another thread's, or the task's own `cx.waker().wake_by_ref()`) makes Tokio queue
//!   the task again as that poll returns, so it counts from the poll's end: idle 0, scheduled
//!   from the end of the poll to the next start;
//! - later wakes before the next poll change nothing (the task is queued once);
//! - `wake` and `wake_by_ref` count alike, from any thread; a deferred self-wake
//!   (`tokio::task::yield_now`, woken by the scheduler after the poll) is an ordinary wake;
//! - a suspension with no recorded wake (lost records) is idle throughout and counted;
//! - the first poll has no scheduled time of its own: the time from the spawn to it is the
//!   task's first-poll delay.
//!
//! Tokio enters the task's span once more when it drops the task's future (`tracing`'s
//! `Instrumented` enters its span to drop what it wraps), just before the span closes: the
//! last enter-exit pair before the close is that drop, not a poll. So the latest poll stays
//! *provisional* until the next poll starts (then it was a poll) or the task closes (then it
//! was the drop, and neither it nor the suspension before it counts). A task's latest poll is
//! therefore counted when its next one starts: in the next phase's row when a phase ends
//! between them.

/// A settled poll of a task, in raw ticks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Done {
    pub start: u64,
    pub end: u64,
    /// Lane of the poll.
    pub lane: u32,
    /// From the wake that ended the previous suspension to the start (`None`: the first
    /// poll).
    pub sched: Option<u64>,
    /// The rest of that suspension (0 for the first poll).
    pub idle: u64,
    /// Whether a wake ended the previous suspension (true for the first poll).
    pub woken: bool,
    /// From the spawn to the first poll (the first poll only, when the spawn is known).
    pub first_delay: Option<u64>,
}

/// Where a task stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Spawned (runnable), never polled.
    Spawned,
    /// Suspended since a poll ended at `since`, no wake yet.
    Idle { since: u64 },
    /// Woken at `at` (the end of the poll for a wake during it), suspended since `since`.
    Woken { at: u64, since: u64 },
    /// In a poll.
    Running {
        poll: Done,
        /// The first wake during this poll (0: none).
        woke: u64,
    },
}

/// One task's timeline, fed in time order.
#[derive(Clone, Debug)]
pub(crate) struct Timeline {
    /// Tokio's task id (0 until its first poll links it).
    pub tokio: u64,
    /// Its interned spawn site.
    pub site: u32,
    /// The region of its span (what its polls are written with).
    pub region: u32,
    /// The spawn (raw ticks, 0: unknown).
    pub spawn: u64,
    state: State,
    /// Scheduled time of every poll started so far (what calls of the task difference).
    pub cum: u64,
    /// The latest poll, until it is known not to be the drop.
    provisional: Option<Done>,
    /// End of the latest poll known to be one (0: none yet).
    pub last_end: u64,
    /// Wakes that arrived with nothing to end (during a suspension already ended, or late).
    pub extra_wakes: u64,
    /// Its span closed (the task ended): later wakes are ignored.
    pub closed: bool,
    /// The lane it was spawned on, and the Tokio task in a poll there then (0: none).
    pub spawned_by: (u32, u64),
}

impl Timeline {
    /// A task spawned at `spawn` (0: unknown) from site `site`.
    pub(crate) fn new(spawn: u64, site: u32) -> Timeline {
        Timeline {
            tokio: 0,
            site,
            region: 0,
            spawn,
            state: State::Spawned,
            cum: 0,
            provisional: None,
            last_end: 0,
            extra_wakes: 0,
            closed: false,
            spawned_by: (0, 0),
        }
    }

    /// Where the task stands: in a poll, woken (or spawned) and waiting for a worker, or
    /// waiting for a wake.
    pub(crate) fn state(&self) -> crate::data::open_calls::TaskState {
        use crate::data::open_calls::TaskState;
        match self.state {
            State::Running { .. } => TaskState::Running,
            State::Spawned | State::Woken { .. } => TaskState::Scheduled,
            State::Idle { .. } => TaskState::Idle,
        }
    }

    /// A wake at `tick`; returns whether it queued the task (ended a suspension, or was the
    /// first during a poll), not an extra wake of a task already queued.
    pub(crate) fn wake(&mut self, tick: u64) -> bool {
        match &mut self.state {
            State::Idle { since } => {
                let since = *since;
                self.state = State::Woken {
                    at: tick.max(since),
                    since,
                };
            }
            State::Running { woke, .. } if *woke == 0 => *woke = tick,
            _ => {
                self.extra_wakes += 1;
                return false;
            }
        }
        true
    }

    /// A poll starts at `tick` on `lane`; returns the poll it proves was one (the previous,
    /// provisional one).
    pub(crate) fn start(&mut self, tick: u64, lane: u32) -> Option<Done> {
        let (sched, idle, woken, first_delay) = match self.state {
            State::Spawned => {
                let delay = (self.spawn != 0).then(|| tick.saturating_sub(self.spawn));
                (None, 0, true, delay)
            }
            State::Idle { since } => (Some(0), tick.saturating_sub(since), false, None),
            State::Woken { at, since } => (
                Some(tick.saturating_sub(at)),
                at.saturating_sub(since),
                true,
                None,
            ),
            // A start while in a poll (its end was lost): keep the poll going.
            State::Running { .. } => return None,
        };
        self.cum += sched.unwrap_or(0);
        self.state = State::Running {
            poll: Done {
                start: tick,
                end: tick,
                lane,
                sched,
                idle,
                woken,
                first_delay,
            },
            woke: 0,
        };
        let proved = self.provisional.take();
        if let Some(p) = proved {
            self.last_end = p.end;
        }
        proved
    }

    /// The poll in progress ends at `tick`.
    pub(crate) fn end(&mut self, tick: u64) {
        if let State::Running { mut poll, woke } = self.state {
            poll.end = tick.max(poll.start);
            self.provisional = Some(poll);
            self.state = if woke != 0 {
                // Queued again as the poll returns.
                State::Woken {
                    at: poll.end,
                    since: poll.end,
                }
            } else {
                State::Idle { since: poll.end }
            };
        }
    }

    /// The task closed: the latest enter-exit pair was the drop of its future, not a poll.
    /// Returns the end of its last poll, if it had one.
    pub(crate) fn close(&mut self) -> Option<u64> {
        self.provisional = None;
        (self.last_end != 0).then_some(self.last_end)
    }
}

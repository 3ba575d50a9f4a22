//! What the assembler keeps per lane: the lane's current Tokio task, the polls in progress on
//! it, and its closes, first waiting for the lane's next tick, then, with that tick, waiting
//! for the watermark.
//!
//! A lane's closes get their ticks in stream order, and a lane's ticks only grow, so each lane
//! keeps them in a plain FIFO: completing a call is O(1), not O(log n) in a heap of every
//! close of the window. State exists only for lanes that have something (a dropped lane's goes
//! once its last close completed), so a program that starts 300 000 threads over its life
//! keeps the state of the threads alive now.

use std::collections::VecDeque;

use crate::fasthash::FastMap;

/// A poll in progress on one lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct OpenPoll {
    pub inst: u32,
    /// Nested enters of the span on this lane not yet exited (the poll ends at 0).
    pub depth: u32,
    pub start: u64,
    /// Tokio task at the enter (0 = none).
    pub task: u64,
}

/// A close with its tick: (tick, instance, span id).
pub(super) type Close = (u64, u32, u64);

/// Capacity a lane's queues of held calls keep however few are held (40 KiB: 64 threads'
/// lanes keep 2.5 MiB, `tests/load_safety.rs` measures it).
const HELD_KEEP: usize = 640;

/// A FIFO of held calls: a `Vec` read from a head index (a push is a `Vec` push; what was
/// read is dropped in bulk).
#[derive(Debug, Default)]
pub(super) struct HeldQueue {
    items: Vec<Held>,
    head: usize,
}

impl HeldQueue {
    #[inline]
    fn push(&mut self, h: Held) {
        self.items.push(h);
    }

    #[inline]
    fn front(&self) -> Option<&Held> {
        self.items.get(self.head)
    }

    /// How many it holds.
    #[inline]
    fn len(&self) -> usize {
        self.items.len() - self.head
    }

    /// Sets the close bound of its newest `n` (usually one: a sync span's, bounded by the
    /// next record).
    #[inline(always)]
    fn bound_newest(&mut self, n: usize, tick: u64) {
        let len = self.items.len();
        if n == 1 {
            if let Some(h) = self.items.last_mut() {
                h.close = tick;
            }
        } else {
            for h in &mut self.items[len - n..] {
                h.close = tick;
            }
        }
    }

    #[inline]
    fn pop_front(&mut self) -> Option<Held> {
        let h = *self.items.get(self.head)?;
        self.head += 1;
        Some(h)
    }

    fn is_empty(&self) -> bool {
        self.head == self.items.len()
    }

    fn iter(&self) -> impl Iterator<Item = &Held> {
        self.items[self.head..].iter()
    }

    /// Drops what was read; a burst's queue gives its memory back once it has drained.
    fn compact(&mut self) {
        if self.is_empty() {
            self.items.clear();
            self.head = 0;
        } else if self.head > 4096 && self.head * 2 > self.items.len() {
            self.items.drain(..self.head);
            self.head = 0;
        }
        let len = self.items.len();
        if self.items.capacity() > HELD_KEEP.max(8 * len) {
            self.items.shrink_to(HELD_KEEP.max(2 * len));
        }
    }
}

/// A call the one-step path assembled (see [`super::fast`] and [`super::pending`]), held
/// until the watermark has passed its close: then no other lane can still hold a poll of its
/// span. 64 bytes.
#[derive(Clone, Copy, Debug)]
pub(super) struct Held {
    pub id: u64,
    pub start: u64,
    /// Its latest exit.
    pub end: u64,
    /// Sum of its polls' durations.
    pub busy: u64,
    pub task: u64,
    /// A tick at or after its close: the lane's first tick after it (0: none read yet).
    pub close: u64,
    pub region: u32,
    pub lane: u32,
    pub polls: u32,
}

/// The assembler's state of one lane.
#[derive(Debug, Default)]
pub(super) struct LaneState {
    /// The Tokio task its enters run in now (its latest `TASK` record).
    pub task: u64,
    /// Polls in progress on it (what is entered on that thread now).
    pub polls: Vec<OpenPoll>,
    /// Closes read on it that wait for its next tick: (instance, span id).
    pub untimed: Vec<(u32, u64)>,
    /// Closes with their tick, in tick order, waiting for the watermark.
    pub closing: VecDeque<Close>,
    /// One-step calls read on it, oldest first, waiting for the watermark to pass their
    /// close, which the lane's first tick after it bounds ([`Held::close`]).
    pub held: HeldQueue,
    /// How many of the newest held calls have no close bound yet (no tick read since).
    held_unbounded: usize,
    /// The Tokio task whose span closed on it with the latest record read (0: none): a wake
    /// that is the lane's next record is at that task's completion (see
    /// [`crate::flusher::sched::edges`]).
    pub completed: u64,
    /// Its thread exited and everything was read: the state goes once empty.
    gone: bool,
    /// The latest tick it showed (a marker of lost records read next happened after it).
    pub last: u64,
}

impl LaneState {
    /// The lane shows time `tick`: the closes read on it before happened no later.
    /// Called for nearly every record: the common case (nothing waits for a tick) is a store
    /// and two tests, inlined.
    #[inline(always)]
    pub(super) fn stamp(&mut self, tick: u64) {
        self.last = tick;
        if self.held_unbounded != 0 {
            self.held.bound_newest(self.held_unbounded, tick);
            self.held_unbounded = 0;
        }
        if !self.untimed.is_empty() {
            self.time_closes(tick);
        }
    }

    /// The closes read since the lane's last tick happened no later than `tick`.
    #[inline(never)]
    fn time_closes(&mut self, tick: u64) {
        for (k, id) in self.untimed.drain(..) {
            self.closing.push_back((tick, k, id));
        }
    }

    /// The poll of instance `k` in progress here, if any.
    #[inline]
    pub(super) fn poll_of(&self, k: u32) -> Option<&OpenPoll> {
        self.polls.iter().rev().find(|p| p.inst == k)
    }

    /// The oldest held call of this lane, taken out (see [`super::fast`]'s cap).
    pub(super) fn oldest_held(&mut self) -> Option<Held> {
        let h = self.held.pop_front();
        self.held_unbounded = self.held_unbounded.min(self.held.len());
        h
    }

    /// Holds one-step call `h`, whose close is the lane's latest record (its bound is the
    /// lane's next tick).
    #[inline(always)]
    pub(super) fn hold(&mut self, h: Held) {
        self.held.push(Held { close: 0, ..h });
        self.held_unbounded += 1;
    }

    /// Takes the held calls whose close is bounded by `wm` (see [`LaneState::held`]), oldest
    /// first, each with that bound as its close's tick.
    #[inline]
    fn held_due(&mut self, wm: u64, mut f: impl FnMut(u64, Held)) {
        while let Some(&h) = self.held.front() {
            // Oldest first: an unbounded one is among the newest, and so are those after it.
            if h.close == 0 || h.close > wm {
                break;
            }
            self.held.pop_front();
            f(h.close, h);
        }
        self.held.compact();
    }

    fn is_empty(&self) -> bool {
        self.polls.is_empty()
            && self.untimed.is_empty()
            && self.closing.is_empty()
            && self.held.is_empty()
    }
}

/// Every lane's state, by lane index.
#[derive(Default)]
pub(super) struct Lanes {
    by_lane: FastMap<u32, LaneState>,
}

impl Lanes {
    /// Takes lane `lane`'s state out to work on it (give it back with [`put`](Self::put)).
    #[inline]
    pub(super) fn take(&mut self, lane: u32) -> LaneState {
        self.by_lane.remove(&lane).unwrap_or_default()
    }

    /// Gives a lane's state back (dropped if the lane is gone and it is empty).
    #[inline]
    pub(super) fn put(&mut self, lane: u32, state: LaneState) {
        let keep = state.task != 0 || state.completed != 0 || !state.is_empty();
        if !(state.gone && state.is_empty()) && keep {
            self.by_lane.insert(lane, state);
        }
    }

    /// Lane `lane`'s thread exited and all it recorded was read.
    pub(super) fn gone(&mut self, lane: u32) {
        let mut s = self.take(lane);
        s.gone = true;
        self.put(lane, s);
    }

    /// Hands the held one-step calls whose close the watermark `wm` has passed to `f`, lane
    /// by lane.
    pub(super) fn held_due(&mut self, wm: u64, mut f: impl FnMut(u64, Held)) {
        for s in self.by_lane.values_mut() {
            s.held_due(wm, &mut f);
        }
    }

    /// Moves the closes whose tick is at most `wm` into `due`, lane by lane.
    pub(super) fn due(&mut self, wm: u64, due: &mut Vec<Close>) {
        for s in self.by_lane.values_mut() {
            while let Some(&c) = s.closing.front() {
                if c.0 > wm {
                    break;
                }
                s.closing.pop_front();
                due.push(c);
            }
        }
        self.by_lane.retain(|_, s| !(s.gone && s.is_empty()));
    }

    /// The span ids of the one-step calls held on every lane (see [`Held`]).
    pub(super) fn held_ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.by_lane
            .values()
            .flat_map(|s| s.held.iter().map(|h| h.id))
    }

    /// The newest held one-step call of span `id`, on any lane (a search: for the rare
    /// question of what an id means, see `Assembler::span_now`).
    pub(super) fn held_call(&self, id: u64) -> Option<Held> {
        let held = self.by_lane.values().flat_map(|s| s.held.iter());
        held.filter(|h| h.id == id).max_by_key(|h| h.start).copied()
    }

    /// Forgets the polls of instance `k` on every lane (their exits were lost).
    pub(super) fn forget_polls(&mut self, k: u32) {
        for s in self.by_lane.values_mut() {
            s.polls.retain(|p| p.inst != k);
        }
    }

    /// Whether lane `lane` has state (tests).
    #[cfg(test)]
    pub(super) fn has(&self, lane: u32) -> bool {
        self.by_lane.contains_key(&lane)
    }
}

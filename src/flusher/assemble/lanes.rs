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
    /// Its thread exited and everything was read: the state goes once empty.
    gone: bool,
}

impl LaneState {
    /// The lane shows time `tick`: the closes read on it before happened no later.
    #[inline]
    pub(super) fn stamp(&mut self, tick: u64) {
        if self.untimed.is_empty() {
            return;
        }
        for (k, id) in self.untimed.drain(..) {
            self.closing.push_back((tick, k, id));
        }
    }

    /// The poll of instance `k` in progress here, if any.
    #[inline]
    pub(super) fn poll_of(&self, k: u32) -> Option<&OpenPoll> {
        self.polls.iter().rev().find(|p| p.inst == k)
    }

    fn is_empty(&self) -> bool {
        self.polls.is_empty() && self.untimed.is_empty() && self.closing.is_empty()
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
        if !(state.gone && state.is_empty()) && (state.task != 0 || !state.is_empty()) {
            self.by_lane.insert(lane, state);
        }
    }

    /// Lane `lane`'s thread exited and all it recorded was read.
    pub(super) fn gone(&mut self, lane: u32) {
        let mut s = self.take(lane);
        s.gone = true;
        self.put(lane, s);
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

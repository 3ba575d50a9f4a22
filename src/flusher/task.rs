//! Tokio task identity and per-task accounting, on the flusher.
//!
//! Task ids come from the stable `tokio::task::try_id()` read at every enter (see
//! [`crate::recording::lane::record::current_task_id`]); here each id seen in a phase gets a dense index
//! (a *lane index*: what `events/task_ids` holds) and a `task_table` row. We only see a task
//! through its spans, so a task's row describes its *outermost* calls (those no other call of
//! the same task contains): their polls are the task's steps, their busy time its running
//! time, their await time its suspended time.
//!
//! Everything here is amortized O(1) per call, whatever the shape, and memory is bounded by
//! what is open, not by what finished:
//! - A completed call is a *pending root* of its task until the flusher's watermark has passed
//!   its close (see [`crate::flusher::assemble`]): by then a call of the task that contains it
//!   has been entered (it is open) or assembled (it is pending too). Then it is settled: if a
//!   call of the same task that started no later is still open (the task's open starts, which
//!   the assembler keeps here), that call contains it and will be the root; otherwise it is a
//!   root and folds into the task's running totals. A server connection whose outer call
//!   stays open over a million commands therefore keeps no per-command state.
//! - A task with no open call and nothing pending is *quiet*. Quiet tasks are retired (their
//!   row handed to [`Tasks::take_finished`], which the flusher streams to the spool) once they
//!   have been quiet for [`QUIET_NS`] or when more than [`QUIET_CAP`] are quiet. A retired
//!   task that runs spans again gets a new index and a second row with the same `tokio_id`.

//!
//! With Tokio's own instrumentation a task's settled polls come here too ([`polls`]): every
//! spawned task gets a row, with its busy, idle and scheduled time.
//!
//! A task's state is one slot of a slab, found through a map from Tokio id to slot and, first,
//! a small direct-mapped cache of recent ids: a request's task is looked up a dozen times
//! (its enters, polls, completions, settling), almost always in the cache.

mod open;
pub(crate) mod polls;

use std::collections::VecDeque;

use crate::data::rows::TaskRow;
use crate::data::rows::{PollTotals, TaskTotals};
use crate::flusher::id_index::IdIndex;
use open::Starts;
use polls::TaskPoll;

/// A task quiet for this long is retired (its row streamed out).
pub(crate) const QUIET_NS: i64 = 1_000_000_000;
/// At most this many quiet tasks stay in memory; beyond it the longest-quiet ones retire.
pub(crate) const QUIET_CAP: usize = 16_384;

/// A completed call waiting for the watermark to pass its close, to learn whether it is a
/// root.
#[derive(Clone, Copy, Debug)]
struct Root {
    slot: u32,
    start_ns: i64,
    end_ns: i64,
    busy_ns: i64,
    polls: u32,
    region: u32,
    /// Its close (raw ticks): once the watermark has passed it, every call that contains it
    /// has been entered (it is open) or assembled (it is pending too).
    hold: u64,
}

impl TaskTotals {
    fn new(tokio_id: u64) -> TaskTotals {
        TaskTotals {
            index: -1,
            tokio_id,
            thread_index: 0,
            created_ns: i64::MAX,
            done_ns: -1,
            steps: 0,
            running_ns: 0,
            suspended_ns: 0,
            root_region: u32::MAX,
            polls: PollTotals::default(),
        }
    }

    /// The `task_table` row; `open` says a call of the task is still running.
    pub(crate) fn row(&self, open: bool) -> TaskRow {
        let none = self.created_ns == i64::MAX;
        let mut row = TaskRow {
            index: self.index,
            tokio_id: self.tokio_id,
            thread_index: self.thread_index,
            created_ns: if none { -1 } else { self.created_ns },
            done_ns: if open { -1 } else { self.done_ns },
            steps: self.steps,
            running_ns: self.running_ns,
            suspended_ns: self.suspended_ns,
            root_region: self.root_region,
            sched: self.polls.sched,
        };
        if none && self.polls.sched.has() {
            // No call: the lane columns from its polls (see `polls`).
            (
                row.created_ns,
                row.done_ns,
                row.steps,
                row.running_ns,
                row.suspended_ns,
            ) = self.polls.lane_columns();
        }
        row
    }

    fn fold(&mut self, r: &Root) {
        if r.start_ns < self.created_ns {
            self.created_ns = r.start_ns;
            self.root_region = r.region;
        }
        self.done_ns = self.done_ns.max(r.end_ns);
        self.steps += i64::from(r.polls);
        self.running_ns += r.busy_ns;
        self.suspended_ns += (r.end_ns - r.start_ns - r.busy_ns).max(0);
    }
}

/// One task in memory (64 bytes). No allocation of its own: its pending roots live in one
/// list shared by all tasks ([`Tasks::pending`]), up to two open calls are kept inline, and
/// its row's totals (144 bytes) are in a slab of their own, taken when the task first needs
/// a row: a burst of a million tasks whose calls are all still open keeps none.
#[derive(Debug)]
struct Slot {
    tokio_id: u64,
    /// Starts (raw ticks) of its entered, not yet completed calls (the assembler's).
    open: Starts,
    last_end_ns: i64,
    /// Its dense index in this phase (-1: none yet; polls and calls take one).
    index: i64,
    /// Its totals in [`Tasks::totals`] ([`NONE`]: none yet: no root folded, no poll of
    /// Tokio's instrumentation).
    totals: u32,
    /// Roots of this task in [`Tasks::pending`].
    pending: u32,
    /// Bumped by every call, so a stale entry of the quiet queue is recognised.
    generation: u32,
    /// Free slab entry.
    free: bool,
}

/// Dense task indices, accounting and open calls for one phase.
#[derive(Default)]
pub(crate) struct Tasks {
    /// Tokio id -> slot (the id is read back from the slot: see [`IdIndex`]).
    by_id: IdIndex,
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// The totals of the tasks that have a row (see [`Slot::totals`]), and the free entries.
    totals: Vec<TaskTotals>,
    free_totals: Vec<u32>,
    next_index: i64,
    /// Completed calls not settled yet, of all tasks (one flat list: no allocation per task).
    pending: Vec<Root>,
    /// Quiet tasks, longest-quiet first: (slot, generation, quiet since).
    quiet: VecDeque<(u32, u32, i64)>,
    /// Rows of retired tasks, until the flusher takes them.
    finished: Vec<TaskTotals>,
    /// `now_ns` of the latest settle (when tasks first seen through a poll count as quiet).
    last_now_ns: i64,
    /// Recently looked-up (tokio id, slot) pairs, by the id's low bits: a task's records come
    /// close together, and each would otherwise cost a lookup in the big table.
    recent: Vec<(u64, u32)>,
}

/// One completed call as the task table sees it.
pub(crate) struct TaskCall {
    pub tokio_id: u64,
    /// Its first enter, raw ticks (what the open starts hold).
    pub start_tick: u64,
    pub start_ns: i64,
    pub end_ns: i64,
    pub polls: u32,
    pub busy_ns: i64,
    pub region: u32,
    pub last_thread: u32,
    /// Its close, raw ticks (see [`crate::flusher::assemble::RawCall::close`]).
    pub hold: u64,
}

/// Entries of [`Tasks::recent`] (tokio ids are sequential, so live tasks rarely collide).
const RECENT: usize = 4096;

/// Map capacity kept however few tasks are left (a burst's table is given back above it).
const KEEP_CAPACITY: usize = 4096;

/// No slot.
const NONE: u32 = u32::MAX;

impl Tasks {
    /// The slot of `tokio_id`, if it is in memory.
    #[inline]
    fn find(&mut self, tokio_id: u64) -> Option<u32> {
        if self.recent.is_empty() {
            self.recent = vec![(0, NONE); RECENT];
        }
        let cached = self.recent[tokio_id as usize % RECENT];
        if cached.0 == tokio_id && cached.1 != NONE {
            return Some(cached.1);
        }
        let slots = &self.slots;
        let k = self.by_id.get(tokio_id, |e| slots[e as usize].tokio_id)?;
        self.recent[tokio_id as usize % RECENT] = (tokio_id, k);
        Some(k)
    }

    /// The slot of `tokio_id`, made on first sight (and whether it was made now).
    fn slot(&mut self, tokio_id: u64) -> (u32, bool) {
        if let Some(k) = self.find(tokio_id) {
            return (k, false);
        }
        let fresh = Slot {
            tokio_id,
            open: Starts::Empty,
            last_end_ns: i64::MIN,
            index: -1,
            totals: NONE,
            pending: 0,
            generation: 0,
            free: false,
        };
        let k = match self.free.pop() {
            Some(k) => {
                self.slots[k as usize] = fresh;
                k
            }
            None => {
                self.slots.push(fresh);
                (self.slots.len() - 1) as u32
            }
        };
        let slots = &self.slots;
        self.by_id
            .insert(tokio_id, k, |e| slots[e as usize].tokio_id);
        self.recent[tokio_id as usize % RECENT] = (tokio_id, k);
        (k, true)
    }

    /// The entry of slot `k`'s totals in [`Tasks::totals`], taken on first need.
    fn totals_at(&mut self, k: u32) -> usize {
        let s = &mut self.slots[k as usize];
        if s.totals == NONE {
            let fresh = TaskTotals {
                index: s.index,
                ..TaskTotals::new(s.tokio_id)
            };
            s.totals = match self.free_totals.pop() {
                Some(t) => {
                    self.totals[t as usize] = fresh;
                    t
                }
                None => {
                    self.totals.push(fresh);
                    (self.totals.len() - 1) as u32
                }
            };
        }
        s.totals as usize
    }

    /// Slot `k`'s totals, taken on first need.
    fn totals_of(&mut self, k: u32) -> &mut TaskTotals {
        let t = self.totals_at(k);
        &mut self.totals[t]
    }

    /// Slot `k`'s row, when it has an index in this phase (its totals, or, for a task whose
    /// calls are all still open or dropped, a row with nothing folded yet).
    fn row_totals(&self, k: u32) -> Option<TaskTotals> {
        let s = &self.slots[k as usize];
        if s.index < 0 {
            return None;
        }
        Some(match s.totals {
            // As the totals would be: nothing folded (its thread is known from a call's end).
            NONE => TaskTotals {
                index: s.index,
                ..TaskTotals::new(s.tokio_id)
            },
            t => self.totals[t as usize],
        })
    }

    /// Gives slot `k`'s totals back (it has no row any more).
    fn drop_totals(&mut self, k: u32) {
        let s = &mut self.slots[k as usize];
        if s.totals != NONE {
            self.free_totals.push(s.totals);
            s.totals = NONE;
        }
    }

    /// Frees the slot of a retired (or, at a phase's end, finished) task.
    fn release(&mut self, k: u32) {
        self.drop_totals(k);
        let id = self.slots[k as usize].tokio_id;
        let slots = &self.slots;
        self.by_id.remove_if(id, k, |e| slots[e as usize].tokio_id);
        if let Some(r) = self.recent.get_mut(id as usize % RECENT) {
            if r.0 == id {
                *r = (0, NONE);
            }
        }
        let s = &mut self.slots[k as usize];
        s.free = true;
        s.open = Starts::Empty;
        self.free.push(k);
    }

    /// The dense index of slot `k` (given on first need in this phase).
    fn index_of(&mut self, k: u32) -> i64 {
        let s = &mut self.slots[k as usize];
        if s.index < 0 {
            s.index = self.next_index;
            self.next_index += 1;
            if s.totals != NONE {
                self.totals[s.totals as usize].index = s.index;
            }
        }
        s.index
    }

    /// A call of `task` was entered first at `start` (raw ticks); 0 is no task.
    pub(crate) fn open_insert(&mut self, task: u64, start: u64) {
        if task == 0 {
            return;
        }
        let (k, _) = self.slot(task);
        self.slots[k as usize].open.insert(start);
    }

    /// The call of `task` entered first at `start` completed (or moved its start).
    pub(crate) fn open_remove(&mut self, task: u64, start: u64) {
        if task == 0 {
            return;
        }
        if let Some(k) = self.find(task) {
            let s = &mut self.slots[k as usize];
            s.open.remove(start);
            if s.open.is_empty() && s.pending == 0 {
                // Idle now: it retires unless a call of it comes (a dropped call does not).
                self.quiet.push_back((k, s.generation, self.last_now_ns));
            }
        }
    }

    /// Accounts one settled poll of a task (Tokio's instrumentation); returns its dense index.
    pub(crate) fn add_poll(&mut self, p: &TaskPoll) -> i64 {
        let (k, created) = self.slot(p.tokio_id);
        if created {
            // Quiet until it runs again (an ended task is queued again when it ends).
            self.quiet.push_back((k, 0, self.last_now_ns));
        }
        let index = self.index_of(k);
        let t = self.totals_at(k);
        let s = &mut self.slots[k as usize];
        s.generation = s.generation.wrapping_add(1);
        let totals = &mut self.totals[t];
        if p.end_ns >= s.last_end_ns {
            s.last_end_ns = p.end_ns;
            totals.thread_index = p.lane;
        }
        totals.polls.add(p);
        index
    }

    /// Tokio task `tokio_id` ended; `last_ns` is the end of its last poll. Its row retires
    /// once it has been quiet for [`QUIET_NS`].
    pub(crate) fn task_ended(&mut self, tokio_id: u64, site: u32, last_ns: Option<i64>) {
        let (k, _) = self.slot(tokio_id);
        self.index_of(k);
        self.totals_of(k).polls.end(site, last_ns);
        let s = &mut self.slots[k as usize];
        s.generation = s.generation.wrapping_add(1);
        if s.open.is_empty() && s.pending == 0 {
            self.quiet.push_back((k, s.generation, self.last_now_ns));
        }
    }

    /// The earliest start (raw ticks) of an open call of `task`.
    #[cfg(test)]
    pub(crate) fn earliest_open(&mut self, task: u64) -> Option<u64> {
        let k = self.find(task)?;
        self.slots[k as usize].open.earliest()
    }

    /// The dense index Tokio task `tokio_id` has in this phase, if it has one yet (gives
    /// none).
    pub(crate) fn known_index(&self, tokio_id: u64) -> Option<i64> {
        let slots = &self.slots;
        let k = self.by_id.get(tokio_id, |e| slots[e as usize].tokio_id)?;
        let index = self.slots[k as usize].index;
        (index >= 0).then_some(index)
    }

    /// The dense index of a Tokio task id (given on first need in this phase). A task first
    /// seen through a poll counts as quiet until a call of it comes (so one whose call is
    /// dropped still retires).
    pub(crate) fn index(&mut self, tokio_id: u64) -> i64 {
        let (k, created) = self.slot(tokio_id);
        if created {
            self.quiet.push_back((k, 0, self.last_now_ns));
        }
        self.index_of(k)
    }

    /// Accounts one completed call of a task; returns its dense index. An open call of the
    /// task that started no later contains it: then it is no root (a connection's commands).
    pub(crate) fn add_call(&mut self, c: &TaskCall) -> i64 {
        let (k, _) = self.slot(c.tokio_id);
        let index = self.index_of(k);
        let t = self.totals_at(k);
        let s = &mut self.slots[k as usize];
        if c.end_ns >= s.last_end_ns {
            s.last_end_ns = c.end_ns;
            self.totals[t].thread_index = c.last_thread;
        }
        s.generation = s.generation.wrapping_add(1);
        if s.open.earliest().is_some_and(|e| e <= c.start_tick) {
            return index;
        }
        s.pending += 1;
        self.pending.push(Root {
            slot: k,
            start_ns: c.start_ns,
            end_ns: c.end_ns,
            busy_ns: c.busy_ns,
            polls: c.polls,
            region: c.region,
            hold: c.hold,
        });
        index
    }

    /// After the calls up to the watermark `wm` (raw ticks) were added: settles the pending
    /// roots whose close it has passed (all of them when `force`), and retires tasks quiet
    /// since before `now_ns - QUIET_NS` or beyond [`QUIET_CAP`]. `to_ns` converts raw ticks
    /// (of open calls' starts) to ns. Work: O(p log p) for the p pending roots, which are the
    /// calls of the window between the lanes' read positions.
    pub(crate) fn settle(&mut self, now_ns: i64, wm: u64, force: bool, to_ns: impl Fn(u64) -> i64) {
        self.last_now_ns = now_ns;
        let mut pending = std::mem::take(&mut self.pending);
        // By task, then start ascending, end descending: within a task a root is contained
        // iff an earlier one ends later.
        pending.sort_unstable_by(|a, b| {
            (a.slot, a.start_ns)
                .cmp(&(b.slot, b.start_ns))
                .then(b.end_ns.cmp(&a.end_ns))
        });
        let mut kept = 0;
        let mut i = 0;
        while i < pending.len() {
            let k = pending[i].slot;
            let mut j = i;
            while j < pending.len() && pending[j].slot == k {
                j += 1;
            }
            let s = &mut self.slots[k as usize];
            let earliest_open = s.open.earliest().map(&to_ns);
            let mut max_end = i64::MIN;
            for r in i..j {
                let r = pending[r];
                let nested = r.end_ns <= max_end;
                max_end = max_end.max(r.end_ns);
                if nested || earliest_open.is_some_and(|e| e <= r.start_ns) {
                    s.pending -= 1; // contained in another root or in an open call
                } else if force || r.hold <= wm {
                    // A task with a pending root has its row (its call took an index).
                    if s.totals != NONE {
                        self.totals[s.totals as usize].fold(&r);
                    }
                    s.pending -= 1;
                } else {
                    pending[kept] = r;
                    kept += 1;
                }
            }
            if s.pending == 0 && s.open.is_empty() {
                self.quiet.push_back((k, s.generation, now_ns));
            }
            i = j;
        }
        pending.truncate(kept);
        self.pending = pending;
        self.retire(now_ns);
        // A burst (a flusher far behind) leaves a huge table behind; give it back.
        let slots = &self.slots;
        self.by_id
            .shrink_after_burst(KEEP_CAPACITY, |e| slots[e as usize].tokio_id);
        if self.by_id.is_empty() && self.slots.capacity() > KEEP_CAPACITY {
            self.slots = Vec::new();
            self.free = Vec::new();
        }
        if self.free_totals.len() == self.totals.len() && self.totals.capacity() > KEEP_CAPACITY {
            self.totals = Vec::new();
            self.free_totals = Vec::new();
        }
        if self.pending.capacity() > KEEP_CAPACITY.max(8 * self.pending.len()) {
            self.pending.shrink_to(KEEP_CAPACITY);
        }
        if self.quiet.capacity() > 4 * QUIET_CAP.max(self.quiet.len()) {
            self.quiet.shrink_to(2 * QUIET_CAP.max(self.quiet.len()));
        }
    }

    /// Retires the tasks quiet for [`QUIET_NS`], and the longest-quiet beyond [`QUIET_CAP`].
    fn retire(&mut self, now_ns: i64) {
        while let Some(&(k, generation, since)) = self.quiet.front() {
            if now_ns - since < QUIET_NS && self.quiet.len() <= QUIET_CAP {
                break;
            }
            self.quiet.pop_front();
            let s = &self.slots[k as usize];
            if s.free || s.generation != generation || s.pending != 0 || !s.open.is_empty() {
                continue; // stale: the task ran again (or is gone)
            }
            // A task seen only through open calls that were dropped has no row.
            if let Some(t) = self.row_totals(k) {
                self.finished.push(t);
            }
            // A retired task that runs again gets a new slot and index.
            self.release(k);
        }
    }

    /// Rows of tasks retired since the last call.
    pub(crate) fn take_finished(&mut self) -> Vec<TaskTotals> {
        std::mem::take(&mut self.finished)
    }

    /// The phase's remaining task rows (retired ones not taken yet included), in index
    /// order, and a fresh start for the next phase (tasks with open calls stay, without a
    /// row or index yet).
    pub(crate) fn take_rows(&mut self, now_ns: i64, to_ns: impl Fn(u64) -> i64) -> Vec<TaskRow> {
        self.settle(now_ns, u64::MAX, true, &to_ns);
        let mut rows: Vec<TaskRow> = self.finished.drain(..).map(|t| t.row(false)).collect();
        for k in 0..self.slots.len() as u32 {
            let s = &self.slots[k as usize];
            if s.free {
                continue;
            }
            let open = !s.open.is_empty();
            if let Some(t) = self.row_totals(k) {
                rows.push(t.row(open));
            }
            if open {
                // The next phase starts it afresh: no row, no index yet.
                self.drop_totals(k);
                let s = &mut self.slots[k as usize];
                s.index = -1;
                s.pending = 0;
                s.last_end_ns = i64::MIN;
            } else {
                self.release(k);
            }
        }
        TaskRow::order(&mut rows);
        self.pending.clear();
        self.quiet.clear();
        self.next_index = 0;
        rows
    }

    /// Tasks held in memory (live, pending or quiet, not retired).
    #[cfg(test)]
    pub(crate) fn in_memory(&self) -> usize {
        self.by_id.len()
    }
}

#[cfg(test)]
mod tests;

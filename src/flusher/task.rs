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
//!   its close (see [`crate::flusher::assemble`]): by then a call of the task that contains it has been
//!   entered (it is open) or assembled (it is pending too). Then it is settled: if a call of the same task that started no later is still open (the
//!   assembler's [`OpenStarts`]), that call contains it and will be the root; otherwise it is
//!   a root and folds into the task's running totals. A server connection whose outer call
//!   stays open over a million commands therefore keeps no per-command state.
//! - A task with no open call and nothing pending is *quiet*. Quiet tasks are retired (their
//!   row handed to [`Tasks::take_finished`], which the flusher streams to the spool) once they
//!   have been quiet for [`QUIET_NS`] or when more than [`QUIET_CAP`] are quiet. A retired
//!   task that runs spans again gets a new index and a second row with the same `tokio_id`.

use std::collections::{BTreeMap, VecDeque};

use crate::fasthash::FastMap;
use crate::output::model::TaskRow;

/// A task quiet for this long is retired (its row streamed out).
pub(crate) const QUIET_NS: i64 = 1_000_000_000;
/// At most this many quiet tasks stay in memory; beyond it the longest-quiet ones retire.
pub(crate) const QUIET_CAP: usize = 16_384;

/// Starts (raw ticks) of the entered, not yet completed calls of each task, kept by the
/// assembler so the task table can tell whether a completed call has an open container.
/// A task usually has one open call (kept inline, no allocation) or a few (a small sorted
/// Vec); one with many (a connection whose commands complete first-in first-out behind a busy
/// flusher) switches to a BTreeMap, so every change stays O(log n) whatever order they
/// complete in.
#[derive(Default)]
pub(crate) struct OpenStarts {
    by_task: FastMap<u64, Starts>,
}

/// One: a single open call; Few: sorted starts (duplicates allowed); Many: start -> number
/// of open calls.
enum Starts {
    One(u64),
    Few(Vec<u64>),
    Many(BTreeMap<u64, u32>),
}

/// Open calls of one task kept in a Vec before switching to the map.
const FEW: usize = 16;

/// Map capacity kept however few tasks have open calls.
const KEEP_OPEN: usize = 4096;

impl OpenStarts {
    /// A call of `task` was entered first at `start`.
    pub(crate) fn insert(&mut self, task: u64, start: u64) {
        if task == 0 {
            return;
        }
        let starts = match self.by_task.entry(task) {
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(Starts::One(start));
                return;
            }
            std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
        };
        match starts {
            Starts::One(s) => {
                let (a, b) = if *s <= start {
                    (*s, start)
                } else {
                    (start, *s)
                };
                *starts = Starts::Few(vec![a, b]);
            }
            Starts::Few(v) if v.len() < FEW => {
                let at = v.partition_point(|&s| s <= start);
                v.insert(at, start);
            }
            Starts::Few(v) => {
                let mut m = BTreeMap::new();
                for &s in v.iter().chain([start].iter()) {
                    *m.entry(s).or_insert(0) += 1;
                }
                *starts = Starts::Many(m);
            }
            Starts::Many(m) => *m.entry(start).or_insert(0) += 1,
        }
    }

    /// The call of `task` entered first at `start` completed (or moved its start).
    pub(crate) fn remove(&mut self, task: u64, start: u64) {
        let Some(starts) = self.by_task.get_mut(&task) else {
            return;
        };
        let empty = match starts {
            Starts::One(s) => *s == start,
            Starts::Few(v) => {
                if v.last() == Some(&start) {
                    v.pop();
                } else {
                    let at = v.partition_point(|&s| s < start);
                    if v.get(at) == Some(&start) {
                        v.remove(at);
                    }
                }
                v.is_empty()
            }
            Starts::Many(m) => {
                if let Some(n) = m.get_mut(&start) {
                    *n -= 1;
                    if *n == 0 {
                        m.remove(&start);
                    }
                }
                m.is_empty()
            }
        };
        if empty {
            self.by_task.remove(&task);
        }
    }

    /// The earliest start of an open call of `task`.
    pub(crate) fn earliest(&self, task: u64) -> Option<u64> {
        match self.by_task.get(&task)? {
            Starts::One(s) => Some(*s),
            Starts::Few(v) => v.first().copied(),
            Starts::Many(m) => m.first_key_value().map(|(&s, _)| s),
        }
    }

    /// Gives back the table of a burst once it has emptied (call between drains).
    pub(crate) fn shrink(&mut self) {
        if self.by_task.capacity() > KEEP_OPEN.max(8 * self.by_task.len()) {
            self.by_task
                .shrink_to(KEEP_OPEN.max(2 * self.by_task.len()));
        }
    }
}

/// A completed call waiting for the watermark to pass its close, to learn whether it is a
/// root.
#[derive(Clone, Copy, Debug)]
struct Root {
    tokio_id: u64,
    start_ns: i64,
    end_ns: i64,
    busy_ns: i64,
    polls: u32,
    region: u32,
    /// Its close (raw ticks): once the watermark has passed it, every call that contains it
    /// has been entered (it is open) or assembled (it is pending too).
    hold: u64,
}

/// A task's row, folded incrementally from its settled roots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TaskTotals {
    /// Dense index in this phase.
    pub index: i64,
    /// Tokio's task id.
    pub tokio_id: u64,
    /// Thread of the latest poll.
    pub thread_index: u32,
    /// Start of the first root (`i64::MAX` = none yet).
    pub created_ns: i64,
    /// End of the last root (-1 = none yet).
    pub done_ns: i64,
    /// Polls of the roots.
    pub steps: i64,
    /// Busy time of the roots.
    pub running_ns: i64,
    /// Await time of the roots.
    pub suspended_ns: i64,
    /// Region of the first root (`u32::MAX` = none).
    pub root_region: u32,
}

impl TaskTotals {
    /// The `task_table` row; `open` says a call of the task is still running.
    pub(crate) fn row(&self, open: bool) -> TaskRow {
        let none = self.created_ns == i64::MAX;
        TaskRow {
            index: self.index,
            tokio_id: self.tokio_id,
            thread_index: self.thread_index,
            created_ns: if none { -1 } else { self.created_ns },
            done_ns: if open { -1 } else { self.done_ns },
            steps: self.steps,
            running_ns: self.running_ns,
            suspended_ns: self.suspended_ns,
            root_region: self.root_region,
        }
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

/// One task in memory. No allocation of its own: its pending roots live in one list shared
/// by all tasks ([`Tasks::pending`]).
#[derive(Debug)]
struct TaskAcc {
    totals: TaskTotals,
    last_end_ns: i64,
    /// Roots of this task in [`Tasks::pending`].
    pending: u32,
    /// Bumped by every call, so a stale entry of the quiet queue is recognised.
    generation: u64,
}

/// Dense task indices and accounting for one phase.
#[derive(Default)]
pub(crate) struct Tasks {
    by_id: FastMap<u64, TaskAcc>,
    next_index: i64,
    /// Completed calls not settled yet, of all tasks (one flat list: no allocation per task).
    pending: Vec<Root>,
    /// Quiet tasks, longest-quiet first: (tokio id, generation, quiet since).
    quiet: VecDeque<(u64, u64, i64)>,
    /// Rows of retired tasks, until the flusher takes them.
    finished: Vec<TaskTotals>,
    /// `now_ns` of the latest settle (when tasks first seen through a poll count as quiet).
    last_now_ns: i64,
    /// Recently looked-up (tokio id, index) pairs, by the id's low bits: a task's polls come
    /// close together, and each would otherwise cost a lookup in the big table.
    recent: Vec<(u64, i64)>,
}

/// One completed call as the task table sees it.
pub(crate) struct TaskCall {
    pub tokio_id: u64,
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

impl Tasks {
    /// The task's accumulator and whether it was created now.
    fn acc(&mut self, tokio_id: u64) -> (&mut TaskAcc, bool) {
        let next = &mut self.next_index;
        let mut created = false;
        let acc = self.by_id.entry(tokio_id).or_insert_with(|| {
            created = true;
            *next += 1;
            TaskAcc {
                totals: TaskTotals {
                    index: *next - 1,
                    tokio_id,
                    thread_index: 0,
                    created_ns: i64::MAX,
                    done_ns: -1,
                    steps: 0,
                    running_ns: 0,
                    suspended_ns: 0,
                    root_region: u32::MAX,
                },
                last_end_ns: i64::MIN,
                pending: 0,
                generation: 0,
            }
        });
        (acc, created)
    }

    /// The dense index of a Tokio task id (assigned on first sight in this phase). A task
    /// first seen through a poll counts as quiet until a call of it comes (so one whose call
    /// is dropped still retires).
    pub(crate) fn index(&mut self, tokio_id: u64) -> i64 {
        if self.recent.is_empty() {
            self.recent = vec![(0, -1); RECENT];
        }
        let slot = tokio_id as usize % RECENT;
        if self.recent[slot].0 == tokio_id {
            return self.recent[slot].1;
        }
        let now = self.last_now_ns;
        let (acc, created) = self.acc(tokio_id);
        let index = acc.totals.index;
        if created {
            self.quiet.push_back((tokio_id, 0, now));
        }
        self.recent[slot] = (tokio_id, index);
        index
    }

    /// Accounts one completed call of a task; returns its dense index. `contained`: an open
    /// call of the task is known to contain it (then it is no root).
    pub(crate) fn add_call(&mut self, contained: bool, c: &TaskCall) -> i64 {
        let (acc, _) = self.acc(c.tokio_id);
        if c.end_ns >= acc.last_end_ns {
            acc.last_end_ns = c.end_ns;
            acc.totals.thread_index = c.last_thread;
        }
        acc.generation += 1;
        let index = acc.totals.index;
        if contained {
            return index;
        }
        acc.pending += 1;
        self.pending.push(Root {
            tokio_id: c.tokio_id,
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
    /// since before `now_ns - QUIET_NS` or beyond [`QUIET_CAP`]. `open` gives the earliest
    /// start (ns) of a still open call of a task. Work: O(p log p) for the p pending roots,
    /// which are the calls of the window between the lanes' read positions.
    pub(crate) fn settle(
        &mut self,
        now_ns: i64,
        wm: u64,
        force: bool,
        open: impl Fn(u64) -> Option<i64>,
    ) {
        self.last_now_ns = now_ns;
        let mut pending = std::mem::take(&mut self.pending);
        // By task, then start ascending, end descending: within a task a root is contained
        // iff an earlier one ends later.
        pending.sort_unstable_by(|a, b| {
            (a.tokio_id, a.start_ns)
                .cmp(&(b.tokio_id, b.start_ns))
                .then(b.end_ns.cmp(&a.end_ns))
        });
        let mut kept = 0;
        let mut i = 0;
        while i < pending.len() {
            let id = pending[i].tokio_id;
            let mut j = i;
            while j < pending.len() && pending[j].tokio_id == id {
                j += 1;
            }
            let earliest_open = open(id);
            let Some(acc) = self.by_id.get_mut(&id) else {
                i = j;
                continue;
            };
            let mut max_end = i64::MIN;
            for k in i..j {
                let r = pending[k];
                let nested = r.end_ns <= max_end;
                max_end = max_end.max(r.end_ns);
                if nested || earliest_open.is_some_and(|s| s <= r.start_ns) {
                    acc.pending -= 1; // contained in another root or in an open call
                } else if force || r.hold <= wm {
                    acc.totals.fold(&r);
                    acc.pending -= 1;
                } else {
                    pending[kept] = r;
                    kept += 1;
                }
            }
            if acc.pending == 0 && earliest_open.is_none() {
                self.quiet.push_back((id, acc.generation, now_ns));
            }
            i = j;
        }
        pending.truncate(kept);
        self.pending = pending;
        while let Some(&(id, generation, since)) = self.quiet.front() {
            if now_ns - since < QUIET_NS && self.quiet.len() <= QUIET_CAP {
                break;
            }
            self.quiet.pop_front();
            let retire = self.by_id.get(&id).is_some_and(|a| {
                a.generation == generation && a.pending == 0 && open(id).is_none()
            });
            if retire {
                let acc = self.by_id.remove(&id).expect("checked above");
                self.finished.push(acc.totals);
                // A retired task that runs again gets a new index.
                if let Some(r) = self.recent.get_mut(id as usize % RECENT) {
                    if r.0 == id {
                        *r = (0, -1);
                    }
                }
            }
        }
        // A burst (a flusher far behind) leaves a huge table behind; give it back.
        if self.by_id.capacity() > KEEP_CAPACITY.max(8 * self.by_id.len()) {
            self.by_id
                .shrink_to(KEEP_CAPACITY.max(2 * self.by_id.len()));
        }
        if self.pending.capacity() > KEEP_CAPACITY.max(8 * self.pending.len()) {
            self.pending.shrink_to(KEEP_CAPACITY);
        }
        if self.quiet.capacity() > 4 * QUIET_CAP.max(self.quiet.len()) {
            self.quiet.shrink_to(2 * QUIET_CAP.max(self.quiet.len()));
        }
    }

    /// Rows of tasks retired since the last call.
    pub(crate) fn take_finished(&mut self) -> Vec<TaskTotals> {
        std::mem::take(&mut self.finished)
    }

    /// The phase's remaining task rows (retired ones not taken yet included), in index
    /// order, and a fresh start for the next phase.
    pub(crate) fn take_rows(
        &mut self,
        now_ns: i64,
        open: impl Fn(u64) -> Option<i64>,
    ) -> Vec<TaskRow> {
        self.settle(now_ns, u64::MAX, true, &open);
        let mut rows: Vec<TaskRow> = self.finished.drain(..).map(|t| t.row(false)).collect();
        rows.extend(
            self.by_id
                .drain()
                .map(|(id, acc)| acc.totals.row(open(id).is_some())),
        );
        TaskRow::order(&mut rows);
        self.pending.clear();
        self.quiet.clear();
        self.next_index = 0;
        self.recent.clear();
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

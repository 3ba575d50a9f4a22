//! The index the walk runs on: every task's polls as a timeline of *pieces* (maximal
//! intervals with one stack of regions in a poll) grouped into *runs* (the task's time on a
//! CPU, from a poll's start to the end of the polls nested in it), every task's wakes by
//! time, spawn edges, and per thread the task runs it held (to name what a scheduled task
//! waited behind).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::CallRef;
use crate::data::edges::{Spawn, Wake};
use crate::read::{Poll, Profile, ReadError};

/// A maximal interval of a task's polls with one stack.
#[derive(Clone, Copy, Debug)]
pub(super) struct Piece {
    pub start: i64,
    pub end: i64,
    /// Index into [`CriticalPaths::stacks`].
    pub stack: u32,
}

/// A task's time on a CPU: polls that touch, nested ones included.
#[derive(Clone, Copy, Debug)]
pub(super) struct Run {
    pub start: i64,
    pub end: i64,
    /// `scheduled_ns` of the poll that starts the run (-1: unknown or first poll).
    pub sched: i64,
    /// Its first piece, in the task's pieces.
    pub first_piece: u32,
    /// The thread it ran on.
    pub thread: i64,
}

/// One task's timeline.
#[derive(Clone, Debug, Default)]
pub(super) struct TaskLine {
    pub pieces: Vec<Piece>,
    pub runs: Vec<Run>,
}

/// Where a time lies in a task's timeline.
pub(super) enum At {
    /// Inside run `usize` (start < t <= end).
    InRun(usize),
    /// In the gap before run `usize` (`runs.len()`: after the last run).
    Gap(usize),
}

impl TaskLine {
    /// Where `t` lies.
    pub(super) fn at(&self, t: i64) -> At {
        let i = self.runs.partition_point(|r| r.end < t);
        match self.runs.get(i) {
            Some(r) if r.start < t => At::InRun(i),
            _ => At::Gap(i),
        }
    }

    /// The pieces of run `r`.
    pub(super) fn pieces_of(&self, r: usize) -> &[Piece] {
        let a = self.runs[r].first_piece as usize;
        let b = self
            .runs
            .get(r + 1)
            .map_or(self.pieces.len(), |n| n.first_piece as usize);
        &self.pieces[a..b]
    }
}

/// A wake as the walk needs it: (tick, waking task, waking thread).
pub(super) type WakeAt = (i64, Option<i64>, i64);

/// The critical-path index of one file (or of polls and edges given directly): build it
/// once, then [`CriticalPaths::walk`] any number of calls. See the
/// [module docs](super).
#[derive(Clone, Debug, Default)]
pub struct CriticalPaths {
    pub(super) tasks: HashMap<i64, TaskLine>,
    /// Interned region stacks (index 0: empty).
    pub(super) stacks: Vec<Arc<[String]>>,
    /// Per woken task, its wakes by tick.
    pub(super) wakes: HashMap<i64, Vec<WakeAt>>,
    /// Per spawned task, its spawn (tick, parent task, thread).
    pub(super) spawns: HashMap<i64, WakeAt>,
    /// Threads that polled tasks: a wake from one of them outside any task is the driver's.
    pub(super) worker_threads: HashSet<i64>,
    /// Per thread, the task runs it held, by start: (start, end, task).
    pub(super) thread_runs: HashMap<i64, Vec<(i64, i64, i64)>>,
    /// Every task's last poll end, by end: (end, task), for the inferred `JoinHandle` edge.
    pub(super) task_ends: Vec<(i64, i64)>,
    /// Whether there are wakes at all (files with Tokio's instrumentation).
    pub(super) has_wakes: bool,
}

impl CriticalPaths {
    /// Reads the task polls, wakes and spawns of `profile` and indexes them.
    ///
    /// # Errors
    /// The polls or the edge tables cannot be read.
    pub fn build(profile: &Profile) -> Result<CriticalPaths, ReadError> {
        let mut polls: Vec<Poll> = Vec::new();
        profile.for_each_poll(1 << 16, |chunk| {
            polls.extend(chunk.iter().filter(|p| p.task >= 0));
            Ok(())
        })?;
        Ok(CriticalPaths::from_owned(
            polls,
            profile.poll_region_names(),
            &profile.wakes()?,
            &profile.spawns()?,
        ))
    }

    /// The index of `polls` (regions named by `region_names`), `wakes` and `spawns`: what
    /// [`CriticalPaths::build`] reads from a file. Polls outside tasks are ignored.
    pub fn from_parts(
        polls: &[Poll],
        region_names: &[String],
        wakes: &[Wake],
        spawns: &[Spawn],
    ) -> CriticalPaths {
        let polls = polls.iter().filter(|p| p.task >= 0).copied().collect();
        CriticalPaths::from_owned(polls, region_names, wakes, spawns)
    }

    /// [`CriticalPaths::from_parts`] of task polls it may reorder (no copy of them: the
    /// index's peak memory is theirs plus the timelines').
    fn from_owned(
        mut polls: Vec<Poll>,
        region_names: &[String],
        wakes: &[Wake],
        spawns: &[Spawn],
    ) -> CriticalPaths {
        // By task, then by start, outer polls first where two start together (a stable sort:
        // polls alike in all three keep the file's order).
        polls.sort_by_key(|p| (p.task, p.start_ns, -p.dur_ns));
        let mut cp = CriticalPaths {
            stacks: vec![Arc::from(Vec::<String>::new())],
            has_wakes: !wakes.is_empty(),
            ..CriticalPaths::default()
        };
        let mut interned: HashMap<Vec<u32>, u32> = HashMap::new();
        interned.insert(Vec::new(), 0);
        for ps in polls.chunk_by(|a, b| a.task == b.task) {
            let task = ps[0].task;
            let mut line = timeline(ps, region_names, &mut |ids: &[u32]| {
                if let Some(&i) = interned.get(ids) {
                    return i;
                }
                let names: Vec<String> = ids
                    .iter()
                    .map(|&r| region_names.get(r as usize).cloned().unwrap_or_default())
                    .collect();
                cp.stacks.push(Arc::from(names));
                let i = (cp.stacks.len() - 1) as u32;
                interned.insert(ids.to_vec(), i);
                i
            });
            for r in &line.runs {
                cp.worker_threads.insert(r.thread);
                cp.thread_runs
                    .entry(r.thread)
                    .or_default()
                    .push((r.start, r.end, task));
            }
            if let Some(last) = line.runs.last() {
                cp.task_ends.push((last.end, task));
            }
            line.pieces.shrink_to_fit();
            line.runs.shrink_to_fit();
            cp.tasks.insert(task, line);
        }
        for runs in cp.thread_runs.values_mut() {
            runs.sort_unstable();
        }
        cp.task_ends.sort_unstable();
        for w in wakes {
            cp.wakes.entry(w.woken_task).or_default().push((
                w.tick_ns,
                w.waker_task,
                i64::from(w.thread),
            ));
        }
        for v in cp.wakes.values_mut() {
            v.sort_by_key(|w| w.0);
        }
        for s in spawns {
            cp.spawns.entry(s.child_task).or_insert((
                s.tick_ns,
                s.parent_task,
                i64::from(s.thread),
            ));
        }
        cp
    }

    /// The calls of region `region` in `profile`, in file order, each with its ordinal
    /// (rank 0's calls and those of other ranks alike).
    ///
    /// # Errors
    /// The calls cannot be read.
    pub fn calls(&self, profile: &Profile, region: &str) -> Result<Vec<CallRef>, ReadError> {
        let mut out = Vec::new();
        profile.for_each_call(1 << 16, |row, calls| {
            if profile.region_name(row.region) == region {
                for c in calls {
                    let mut r =
                        CallRef::new(region, c.start_ns, c.start_ns + c.dur_ns, c.task, c.thread);
                    r.ordinal = out.len() as u64;
                    out.push(r);
                }
            }
            Ok(())
        })?;
        Ok(out)
    }

    /// Tasks polled on any thread in `a..b` other than `except`, with their time in polls
    /// there (ns), most first, at most three.
    pub(super) fn behind(&self, a: i64, b: i64, except: i64) -> Vec<(i64, i64)> {
        let mut m: HashMap<i64, i64> = HashMap::new();
        for runs in self.thread_runs.values() {
            let i = runs.partition_point(|r| r.1 <= a);
            for &(s, e, task) in runs[i..].iter().take_while(|r| r.0 < b) {
                if task != except {
                    *m.entry(task).or_default() += e.min(b) - s.max(a);
                }
            }
        }
        let mut v: Vec<(i64, i64)> = m.into_iter().filter(|x| x.1 > 0).collect();
        v.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
        v.truncate(3);
        v
    }
}

/// An open poll in the sweep: (end, region, thread).
type Open = (i64, u32, i64);

/// The sweep that builds one task's timeline: the polls open at the cursor, the run they
/// belong to, and the pieces and runs emitted so far.
struct Sweep<'a> {
    line: TaskLine,
    open: Vec<Open>,
    cursor: i64,
    run: Option<Run>,
    /// The region Tokio's `runtime.spawn` span has, left out of stacks.
    spawn_region: Option<usize>,
    ids: Vec<u32>,
    intern: &'a mut dyn FnMut(&[u32]) -> u32,
}

impl Sweep<'_> {
    /// Emits `a..b` with the open polls' stack, in the current run.
    fn emit(&mut self, a: i64, b: i64) {
        let Some(run) = self.run else { return };
        if b <= a {
            return;
        }
        self.ids.clear();
        let spawn = self.spawn_region;
        let regions = self.open.iter().map(|o| o.1);
        self.ids
            .extend(regions.filter(|&r| Some(r as usize) != spawn));
        let stack = (self.intern)(&self.ids);
        let line = &mut self.line;
        if line.runs.last().is_none_or(|r| r.start != run.start) {
            line.runs.push(Run {
                first_piece: line.pieces.len() as u32,
                ..run
            });
        }
        if let Some(r) = line.runs.last_mut() {
            r.end = b;
        }
        match line.pieces.last_mut() {
            // A piece never spans two runs, even where they touch: `pieces_of` cuts at runs.
            Some(p) if p.end == a && p.stack == stack && p.start >= run.start => p.end = b,
            _ => line.pieces.push(Piece {
                start: a,
                end: b,
                stack,
            }),
        }
    }

    /// Closes the polls that end by `x`, emitting the pieces up to each end.
    fn close(&mut self, x: i64) {
        while let Some(&(end, _, _)) = self.open.last() {
            if end > x {
                break;
            }
            self.emit(self.cursor, end);
            self.cursor = self.cursor.max(end);
            self.open.pop();
        }
        if self.open.is_empty() {
            self.run = None;
        }
    }

    /// Adds poll `p` (polls come by start, outer first).
    fn add(&mut self, p: &Poll) {
        self.close(p.start_ns);
        match self.run.as_mut() {
            None => {
                self.run = Some(Run {
                    start: p.start_ns,
                    end: p.start_ns,
                    sched: p.scheduled_ns,
                    first_piece: 0,
                    thread: p.thread,
                });
                self.cursor = p.start_ns;
            }
            Some(r) if p.start_ns == r.start => r.sched = r.sched.max(p.scheduled_ns),
            Some(_) => {
                self.emit(self.cursor, p.start_ns);
                self.cursor = self.cursor.max(p.start_ns);
            }
        }
        self.open.push((p.start_ns + p.dur_ns, p.region, p.thread));
    }
}

/// One task's timeline from its polls, sorted by start (outer first): a sweep with a stack of
/// the polls open at the cursor. `intern` gives a stack of region ids its index.
fn timeline(ps: &[Poll], names: &[String], intern: &mut dyn FnMut(&[u32]) -> u32) -> TaskLine {
    let mut sweep = Sweep {
        line: TaskLine::default(),
        open: Vec::new(),
        cursor: i64::MIN,
        run: None,
        spawn_region: names.iter().position(|n| n == "runtime.spawn"),
        ids: Vec::new(),
        intern,
    };
    for p in ps {
        sweep.add(p);
    }
    sweep.close(i64::MAX);
    sweep.line
}

//! The walk: from a call's end backwards to its start, over the polls of the task the path is
//! in, following wakes, spawns and (without Tokio's instrumentation) inferred `JoinHandle`
//! edges into other tasks.

use std::sync::Arc;

use super::index::{At, CriticalPaths, Run};
use super::{CallRef, CriticalPath, Kind, Lane, Segment};

/// Jumps to another task at the same time in a row before the walk gives up on the gap
/// (a cycle of wakes at one instant cannot loop).
const MAX_JUMPS_IN_PLACE: u32 = 8;

/// Steps in a row that do not move the walk back in time before it gives up (a bug guard: each
/// jump and each return from an inferred edge is bounded by [`MAX_JUMPS_IN_PLACE`]).
const MAX_STALLS: u32 = 4 * MAX_JUMPS_IN_PLACE + 4;

/// The walk's state: where the path is, and the segments found so far (latest first).
struct Walker<'a> {
    cp: &'a CriticalPaths,
    call: &'a CallRef,
    /// The time the walk has reached: everything after it is attributed.
    t: i64,
    /// The task the path is in.
    cur: i64,
    /// Whether the path rests on an inferred edge here.
    inferred: bool,
    /// Tasks entered through inferred edges, to return to before their first poll: (task,
    /// its `inferred`).
    back: Vec<(i64, bool)>,
    out: Vec<Segment>,
}

impl Walker<'_> {
    /// Attributes `a..self.t` (clamped to the call's start) and moves the walk to `a`.
    fn push(&mut self, kind: Kind, lane: Lane, stack: Arc<[String]>, a: i64, inferred: bool) {
        let a = a.max(self.call.start_ns);
        if a >= self.t {
            return;
        }
        let behind = if kind == Kind::Scheduled {
            self.cp.behind(a, self.t, self.cur)
        } else {
            Vec::new()
        };
        self.out.push(Segment {
            kind,
            lane,
            stack,
            start_ns: a,
            end_ns: self.t,
            inferred,
            behind,
        });
        self.t = a;
    }

    /// A wait of the current task, `a..t`.
    fn wait(&mut self, kind: Kind, a: i64) {
        let empty = self.cp.stacks[0].clone();
        self.push(kind, Lane::Task(self.cur), empty, a, self.inferred);
    }

    /// What the current task's own time is: `running` in the call's task, else `blocked-on`.
    fn own_kind(&self) -> Kind {
        if self.cur == self.call.task {
            Kind::Running
        } else {
            Kind::BlockedOn
        }
    }

    /// The current task's run `r`, from `t` back to its start.
    fn running(&mut self, r: usize) {
        let cp = self.cp;
        let line = &cp.tasks[&self.cur];
        let kind = self.own_kind();
        for p in line.pieces_of(r).iter().rev() {
            if p.start >= self.t {
                continue;
            }
            let stack = cp.stacks[p.stack as usize].clone();
            self.push(kind, Lane::Task(self.cur), stack, p.start, self.inferred);
            if self.t <= self.call.start_ns {
                break;
            }
        }
    }

    /// Before the current task's first poll: its spawn, or the task the inferred edge came
    /// from, or nothing known.
    fn before_first_poll(&mut self) {
        if let Some(&(tick, parent, thread)) = self.cp.spawns.get(&self.cur) {
            if tick < self.t {
                self.wait(Kind::Scheduled, tick);
                match parent {
                    Some(p) if self.cp.tasks.contains_key(&p) => self.cur = p,
                    _ => {
                        let empty = self.cp.stacks[0].clone();
                        let s = self.call.start_ns;
                        self.push(Kind::Outside, Lane::Thread(thread), empty, s, self.inferred);
                    }
                }
                return;
            }
        }
        if let Some((from, inferred)) = self.back.pop() {
            // The task waited for this one from the end of its poll before the gap: the
            // time between that end and this task's first poll is the spawned task's wait.
            let line = &self.cp.tasks[&from];
            if let At::Gap(i) = line.at(self.t) {
                let pe = i.checked_sub(1).map_or(i64::MIN, |j| line.runs[j].end);
                self.wait(Kind::Scheduled, pe);
            }
            self.cur = from;
            self.inferred = inferred;
            return;
        }
        let s = self.call.start_ns;
        self.wait(Kind::IdleUnknown, s);
    }

    /// In the gap of the current task before run `next` (`prev`: the run before it).
    fn gap(&mut self, prev: &Run, next: &Run, jumps: &mut u32) {
        let (pe, ns) = (prev.end, next.start);
        let wakes = self.cp.wakes.get(&self.cur).map_or(&[][..], Vec::as_slice);
        // The wake that ended the gap: the last one before the poll (the file keeps only the
        // wake that queued the task, so none lies between it and the poll); one during the
        // previous poll counts (it queued the task). The poll's `scheduled_ns` says when it
        // was, and may differ from the wake's tick by the rounding of the two (1 ns), so the
        // wake is looked up by the poll's start.
        let target = if next.sched >= 0 { ns - next.sched } else { ns };
        let i = wakes.partition_point(|w| w.0 <= ns);
        let wake = i
            .checked_sub(1)
            .map(|i| wakes[i])
            .filter(|w| w.0 >= prev.start);
        let woken = if next.sched >= 0 {
            Some(target)
        } else {
            wake.map(|w| w.0)
        };
        if let Some(w) = woken {
            if self.t > w.max(pe) {
                self.wait(Kind::Scheduled, w.max(pe));
                return;
            }
        }
        match wake {
            Some((_, Some(waker), _))
                if waker != self.cur && self.cp.tasks.contains_key(&waker) =>
            {
                if *jumps >= MAX_JUMPS_IN_PLACE {
                    self.wait(Kind::IdleUnknown, pe);
                } else {
                    *jumps += 1;
                    self.cur = waker;
                }
            }
            // A self-wake (`yield_now`): runnable right away.
            Some((_, Some(_), _)) => self.wait(Kind::Scheduled, pe),
            Some((_, None, thread)) if self.cp.worker_threads.contains(&thread) => {
                self.wait(Kind::Driver, pe);
            }
            Some((_, None, thread)) => {
                let empty = self.cp.stacks[0].clone();
                self.push(
                    Kind::Outside,
                    Lane::Thread(thread),
                    empty,
                    pe,
                    self.inferred,
                );
            }
            None if !self.cp.has_wakes => self.infer(pe, ns, jumps),
            // With Tokio's instrumentation every poll of a task has its `scheduled_ns`: a
            // run without one is no poll but a span entered after the task's last poll (an
            // `Instrument`ed future's drop): the task's own teardown, not a wait.
            None if next.sched < 0 => {
                let empty = self.cp.stacks[0].clone();
                let kind = self.own_kind();
                self.push(kind, Lane::Task(self.cur), empty, pe, self.inferred);
            }
            None => self.wait(Kind::IdleUnknown, pe),
        }
    }

    /// Without wakes: a gap `pe..ns` in which another task's last poll ended is taken as a
    /// `JoinHandle` await of that task (the latest such).
    fn infer(&mut self, pe: i64, ns: i64, jumps: &mut u32) {
        let ends = &self.cp.task_ends;
        let i = ends.partition_point(|e| e.0 <= ns);
        let child = ends[..i]
            .iter()
            .rev()
            .take_while(|e| e.0 > pe)
            .find(|e| e.1 != self.cur && !self.back.iter().any(|b| b.0 == e.1));
        match child {
            Some(&(end, task)) if *jumps < MAX_JUMPS_IN_PLACE => {
                let was = self.inferred;
                self.inferred = true;
                self.wait(Kind::Scheduled, end);
                if self.t > end {
                    // Clamped at the call's start: nothing more to walk.
                    return;
                }
                *jumps += 1;
                self.back.push((self.cur, was));
                self.cur = task;
            }
            _ => self.wait(Kind::IdleUnknown, pe),
        }
    }
}

impl CriticalPaths {
    /// The critical path of `call`: segments in time order that tile `call.start_ns ..
    /// call.end_ns` exactly. A call outside any task (or in a task without polls in the
    /// index) is one `running` segment on its thread.
    pub fn walk(&self, call: &CallRef) -> CriticalPath {
        let mut w = Walker {
            cp: self,
            call,
            t: call.end_ns,
            cur: call.task,
            inferred: false,
            back: Vec::new(),
            out: Vec::new(),
        };
        if call.task < 0 || !self.tasks.contains_key(&call.task) {
            let lane = if call.task < 0 {
                Lane::Thread(call.thread)
            } else {
                Lane::Task(call.task)
            };
            let stack: Arc<[String]> = Arc::from(vec![call.region.clone()]);
            w.push(Kind::Running, lane, stack, call.start_ns, false);
            return CriticalPath {
                call: call.clone(),
                segments: w.out,
            };
        }
        let (mut jumps, mut stalls) = (0u32, 0u32);
        while w.t > call.start_ns {
            let before = w.t;
            let line = &self.tasks[&w.cur];
            match line.at(w.t) {
                At::InRun(r) => w.running(r),
                At::Gap(0) => w.before_first_poll(),
                At::Gap(i) if i == line.runs.len() => {
                    // After the task's last poll: its completion (the wake of a `JoinHandle`
                    // fires right after the task's span closed).
                    let end = line.runs[i - 1].end;
                    let (lane, empty) = (Lane::Task(w.cur), self.stacks[0].clone());
                    let kind = w.own_kind();
                    w.push(kind, lane, empty, end, w.inferred);
                }
                At::Gap(i) => {
                    let (prev, next) = (line.runs[i - 1], line.runs[i]);
                    w.gap(&prev, &next, &mut jumps);
                }
            }
            if w.t < before {
                jumps = 0;
                stalls = 0;
            } else {
                // Every step either moves `t` back or changes task a bounded number of times
                // (jumps, and returns from inferred edges); a walk that stalls is a bug.
                stalls += 1;
                debug_assert!(stalls <= MAX_STALLS, "the walk stalled at {}", w.t);
                if stalls > MAX_STALLS {
                    w.wait(Kind::IdleUnknown, call.start_ns);
                }
            }
        }
        w.out.reverse();
        CriticalPath {
            call: call.clone(),
            segments: w.out,
        }
    }
}

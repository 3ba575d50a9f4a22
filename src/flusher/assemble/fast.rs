//! The assembler's fast paths:
//! - a sync span created, entered once, exited and closed on one lane with nothing in between
//!   (`info_span!(..).in_scope(..)` in a loop) is one call in one step, without an instance.
//!   It is *held* until the watermark has passed its close: another thread may have entered
//!   the span between its exit and its close (a span shared with a scoped thread), and that
//!   lane's records may be read later. At release such records, found stashed
//!   (`ScopeLayer`) or in an instance they made (`ScopeSubscriber`), join the call;
//!   otherwise it is final as it is. At most [`HELD_MAX`] wait at once;
//! - a *re-poll*, an enter and its exit next to each other on one lane, of a call that has
//!   started and has no poll in progress anywhere (an async fn's second and later polls, a
//!   span entered in a loop), is one step: no poll entry is pushed and searched for.

use super::insts::NONE;
use super::lanes::Held;
use super::{Assembler, LaneState, RawCall, RawPoll, NOT_ENTERED, NO_SCHED, TASK_SPAN};
use crate::recording::lane::record::{Record, CLOSE, ENTER, EXIT, NEW, TASK};

/// One-step calls held at most, over every lane (64 bytes each: 1.25 MiB, the bound they had
/// at 40 bytes before they carried several polls). Beyond it, a lane's
/// oldest held call is final at once, unconfirmed: a backlog (the watermark far behind) keeps
/// memory bounded, and loses only what a span polled on another lane between its exit and a
/// close on its creating lane would add, in that case alone.
pub(super) const HELD_MAX: usize = 20 << 10;

impl Assembler {
    /// The one-step paths at the start of `records`, chosen by its first record's kind (one
    /// decode, then only the checks that kind can pass): how many records they took (0: the
    /// general path's). Any other record of a pending call's span promotes it first (see
    /// [`super::pending`]).
    #[inline(always)]
    pub(super) fn one_step_at(
        &mut self,
        lane: u32,
        ls: &mut LaneState,
        records: &[Record],
        out: &mut Vec<RawCall>,
    ) -> usize {
        let r = &records[0];
        match r.kind() {
            ENTER if r.is_fresh() => match self.sync_fresh_at(lane, ls, records, out) {
                0 => self.pending_fresh_at(lane, ls, records),
                n => n,
            },
            ENTER => {
                if !self.pending.is_empty() {
                    match self.pending_poll_at(lane, ls, records) {
                        0 => self.promote_pending_of(lane, r.id),
                        n => return n,
                    }
                }
                self.repoll_at(lane, ls, records)
            }
            NEW => match self.sync_new_at(lane, ls, records, out) {
                0 => self.pending_new_at(lane, ls, records),
                n => n,
            },
            TASK => 0,
            _ if self.pending.is_empty() => 0,
            CLOSE => match self.pending_close_at(lane, ls, r, out) {
                0 => {
                    self.promote_pending_of(lane, r.id);
                    0
                }
                n => n,
            },
            _ => {
                self.promote_pending_of(lane, r.id);
                0
            }
        }
    }

    /// `ScopeSubscriber`'s sync span (it writes no `NEW`, see `super::implicit`): a fresh
    /// ENTER (its thread created the span just before), EXIT, CLOSE, of a span with no
    /// instance yet (checked without a lookup when no instance is open at all, as between
    /// sync spans). How many records it took (0: none).
    #[inline(always)]
    fn sync_fresh_at(
        &mut self,
        lane: u32,
        ls: &mut LaneState,
        records: &[Record],
        out: &mut Vec<RawCall>,
    ) -> usize {
        if self.implicit.is_none() {
            return 0;
        }
        if let [e, x, c, ..] = records {
            if x.kind() == EXIT
                && c.kind() == CLOSE
                && e.id == x.id
                && x.id == c.id
                && (self.insts.live() == 0 || self.insts.newest(e.id).is_none())
            {
                if let Some(region) = self.implicit_region(e.id) {
                    self.sync_call(lane, ls, e.id, region, (e.ticks(), x.ticks()), out);
                    return 3;
                }
            }
        }
        0
    }

    /// `ScopeLayer`'s sync span (and a subscriber's spawn spans'): NEW, ENTER, EXIT, CLOSE of
    /// one id. How many records it took (0: none).
    #[inline(always)]
    fn sync_new_at(
        &mut self,
        lane: u32,
        ls: &mut LaneState,
        records: &[Record],
        out: &mut Vec<RawCall>,
    ) -> usize {
        if let [n, e, x, c, ..] = records {
            if e.kind() == ENTER
                && x.kind() == EXIT
                && c.kind() == CLOSE
                && n.id == e.id
                && e.id == x.id
                && x.id == c.id
            {
                match self.regions.region_of(n.callsite_addr()) {
                    Some(region) => {
                        self.sync_call(lane, ls, e.id, region, (e.ticks(), x.ticks()), out)
                    }
                    None => self.corrupt += 4,
                }
                return 4;
            }
        }
        0
    }

    /// The fast path's call of span `id` of region `region`: created, entered at `start`,
    /// exited at `end`, closed; held on its lane until its close has a tick and the watermark
    /// has passed it.
    #[inline]
    pub(super) fn sync_call(
        &mut self,
        lane: u32,
        ls: &mut LaneState,
        id: u64,
        region: u32,
        (start, end): (u64, u64),
        out: &mut Vec<RawCall>,
    ) {
        let end = end.max(start);
        ls.stamp(start);
        let task = ls.task;
        self.keep_poll(region, start, end, lane, task);
        self.hold_call(
            ls,
            Held {
                id,
                start,
                end,
                busy: end - start,
                task,
                close: 0,
                region,
                lane,
                polls: 1,
            },
            out,
        );
    }

    /// Holds call `h`, closed by the lane's latest record, until the watermark passes its
    /// close. Inlined: it is most of a sync span's one step.
    #[inline(always)]
    pub(super) fn hold_call(&mut self, ls: &mut LaneState, h: Held, out: &mut Vec<RawCall>) {
        ls.hold(h);
        self.held += 1;
        if self.held > HELD_MAX {
            // Past the cap, the lane's oldest is final at once, unconfirmed (see the module
            // docs): memory stays bounded while the watermark lags behind a backlog.
            if let Some(h) = ls.oldest_held() {
                self.held -= 1;
                out.push(held_call(h.end, &h, self.sched.active));
            }
        }
    }

    /// Hands the held one-step calls the watermark `wm` has passed on: at once to `out` while
    /// nothing could join them (nothing stashed, no instance open: a program of sync spans),
    /// else one by one through [`release_held`](Self::release_held).
    pub(super) fn release_due_held(&mut self, wm: u64, out: &mut Vec<RawCall>) {
        if self.held == 0 {
            return;
        }
        let mut released = 0;
        if self.stash.is_empty() && (self.implicit.is_none() || self.insts.live() == 0) {
            let active = self.sched.active;
            self.lanes.held_due(wm, |tick, h| {
                out.push(held_call(tick, &h, active));
                released += 1;
            });
            self.held -= released;
            return;
        }
        let mut held = std::mem::take(&mut self.held_due);
        self.lanes.held_due(wm, |tick, h| held.push((tick, h)));
        for (tick, h) in held.drain(..) {
            self.release_held(tick, h, out);
        }
        self.held_due = held;
    }
}

/// The call of held `h`, closed at `tick` (`sched_active`: Tokio's instrumentation is on).
fn held_call(tick: u64, h: &Held, sched_active: bool) -> RawCall {
    RawCall {
        region: h.region,
        start: h.start,
        end: h.end,
        busy: h.busy,
        lane: h.lane,
        task: h.task,
        polls: h.polls,
        last_lane: h.lane,
        extra: None,
        close: tick,
        // Inside one poll: no suspension (calls of several polls are held only without
        // timelines, see `super::pending`).
        sched: if sched_active && h.task != 0 {
            0
        } else {
            NO_SCHED
        },
    }
}

impl Assembler {
    /// A held one-step call whose close (at `tick`) the watermark has passed: final, unless
    /// records of its span from another lane were read meanwhile. Those are stashed, waiting
    /// for a creation record the one step already took (`ScopeLayer`: the ones up to its
    /// close are its, later ones a newer span's of the reused id), or made an instance of
    /// their own (`ScopeSubscriber`, whose ids are never reused): either way they join the
    /// call, through an instance, and it completes as any other. Checks cost nothing while
    /// nothing is stashed and no instance is open (a program of sync spans).
    pub(super) fn release_held(&mut self, tick: u64, h: Held, out: &mut Vec<RawCall>) {
        self.held -= 1;
        let id = h.id;
        let call = held_call(tick, &h, self.sched.active);
        if self.implicit.is_some() {
            if self.insts.live() > 0 {
                if let Some(k) = self.insts.newest(id) {
                    let i = self.insts.get(k);
                    if i.closed_lane == NONE && i.flags & TASK_SPAN == 0 {
                        self.join_held(k, &call);
                        self.finish(tick, k, id, out);
                        return;
                    }
                }
            }
        } else if !self.stash.is_empty() {
            if let Some(mine) = self.take_stashed_until(id, tick) {
                let k = self.insts.create(id, call.region);
                self.join_held(k, &call);
                self.replay_into(mine, out);
                self.finish(tick, k, id, out);
                return;
            }
        }
        out.push(call);
    }

    /// Adds the polls of held call `call` to instance `k` (made for it, or made by its span's
    /// records on another lane) and closes the instance on the call's lane.
    fn join_held(&mut self, k: u32, call: &RawCall) {
        let fresh = self.insts.get(k).first == NOT_ENTERED;
        if let Some((t, s)) = self.insts.enter(k, call.start, call.lane, call.task) {
            self.tasks.open_remove(t, s);
            self.tasks.open_insert(call.task, call.start);
        } else if fresh {
            self.tasks.open_insert(call.task, call.start);
        }
        self.insts.add_poll(k, call.busy, call.end, call.lane);
        let inst = self.insts.get_mut(k);
        inst.polls += call.polls - 1;
        inst.closed_lane = call.lane;
    }
}

impl Assembler {
    /// The re-poll fast path at the start of `records` (see the module docs): 2 when it took
    /// an enter and its exit, 0 when the general path must (a first poll, a nested or
    /// concurrent poll, a task span, a task with a timeline, an instance not made yet).
    #[inline]
    pub(super) fn repoll_at(&mut self, lane: u32, ls: &mut LaneState, records: &[Record]) -> usize {
        let [e, x, ..] = records else {
            return 0;
        };
        if e.kind() != ENTER || x.kind() != EXIT || e.id != x.id || e.is_fresh() {
            return 0;
        }
        let task = ls.task;
        if self.sched.active && task != 0 {
            return 0; // its task's timeline sees every enter and exit
        }
        let Some(k) = self.route_or_create(lane, e) else {
            return 0;
        };
        let (start, end) = (e.ticks(), x.ticks());
        let inst = self.insts.get_mut(k);
        // Its call started no later (so this enter moves nothing), and no poll of it is in
        // progress on any lane (so this one is not nested in another).
        if inst.open != 0
            || inst.flags & TASK_SPAN != 0
            || inst.first == NOT_ENTERED
            || start < inst.first
        {
            return 0;
        }
        ls.stamp(start);
        let region = inst.region;
        self.insts.add_poll(k, end.saturating_sub(start), end, lane);
        self.keep_poll(region, start, end.max(start), lane, task);
        2
    }

    /// A poll kept for the file's poll table, when polls are kept.
    #[inline]
    pub(super) fn keep_poll(&mut self, region: u32, start: u64, end: u64, lane: u32, task: u64) {
        if self.keep_polls {
            self.polls.push(RawPoll {
                region,
                start,
                end,
                lane,
                task,
            });
        }
    }
}

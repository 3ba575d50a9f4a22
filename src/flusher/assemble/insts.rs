//! The span instances the assembler holds open: a slab of fixed-size entries and an id map to
//! the newest instance of each span id.
//!
//! Built for memory per live instance and for no allocation per call: an instance is one
//! 56-byte slab entry (no `Vec` of its own, no box); the id index holds a `u32` per bucket
//! and reads the id back from the entry (see [`IdIndex`]); the rare
//! extras (sink payloads, line-timing checkpoints) live in a side table, and so do the times
//! of the rare call whose latest exit is more than 2^32 ticks (~1.6 s) after its first enter,
//! or busy that long (a connection): the slab entry keeps 32-bit offsets. A poll in progress
//! is an entry of its lane's short list (see [`super::lanes`]), not of the instance.
//!
//! The id map points at the newest instance of each span id. Older instances of a reused id
//! need no link: they are closed (an id is reused only after its span closed), get no more
//! records (a record goes to the newest instance, see `assemble`), and complete before the
//! newer ones (the watermark passes closes in time order), through the closing queues, by
//! their index.

use crate::fasthash::FastMap;
use crate::flusher::id_index::IdIndex;
use crate::flusher::lines::LineAcc;

/// No instance / no lane.
pub(super) const NONE: u32 = u32::MAX;
/// [`Inst::first`] of an instance not entered yet.
pub(super) const NOT_ENTERED: u64 = u64::MAX;

/// Open while the profiler paused: some records may be missing, so never reported.
pub(super) const TAINTED: u8 = 1;
/// A record of this call was lost (a `LOST` marker): the call is dropped whole.
pub(super) const LOST: u8 = 2;
/// It has an entry in the extras table.
pub(super) const EXTRA: u8 = 4;
/// The slab entry is free (its `polls` links the free list).
const FREE: u8 = 8;
/// It has an exit.
const EXITED: u8 = 16;
/// Its latest exit is in the wide table (see the module docs).
const WIDE_EXIT: u8 = 32;
/// Its busy time is in the wide table.
const WIDE_BUSY: u8 = 64;
/// The `runtime.spawn` span of a Tokio task (see [`crate::flusher::sched`]).
pub(super) const TASK_SPAN: u8 = 128;

/// The largest offset a slab entry holds.
const NARROW: u64 = u32::MAX as u64;

/// A span instance still being assembled (56 bytes).
#[derive(Clone, Copy, Debug)]
pub(super) struct Inst {
    /// Its span id (the id index reads it back: see [`IdIndex`]).
    id: u64,
    /// Tick of the earliest enter ([`NOT_ENTERED`] before the first).
    pub first: u64,
    /// Tokio task of the earliest enter (0 = none).
    pub task: u64,
    /// The latest exit's tick minus `first` (see [`Insts::last_exit`]).
    exit_d: u32,
    /// Sum of the poll durations, ticks (see [`Insts::busy`]).
    busy_d: u32,
    pub region: u32,
    /// Lane of the earliest enter.
    pub first_lane: u32,
    /// Lane of the latest exit.
    pub last_lane: u32,
    /// Polls completed; the free list's link when the entry is free.
    pub polls: u32,
    /// The lane whose `CLOSE` (or lost close) ended the call ([`NONE`] while open): later
    /// records of that lane belong to a newer instance of the id.
    pub closed_lane: u32,
    /// Polls in progress (entries in the lanes' lists); saturates at 255, then it only means
    /// "some".
    pub open: u8,
    /// [`TAINTED`], [`LOST`], [`EXTRA`], [`TASK_SPAN`] and the private ones.
    pub flags: u8,
}

impl Inst {
    fn new(id: u64, region: u32) -> Inst {
        Inst {
            id,
            first: NOT_ENTERED,
            task: 0,
            exit_d: 0,
            busy_d: 0,
            region,
            first_lane: NONE,
            last_lane: NONE,
            polls: 0,
            closed_lane: NONE,
            open: 0,
            flags: 0,
        }
    }
}

/// Times of an instance that do not fit its slab entry.
#[derive(Clone, Copy, Debug, Default)]
struct Wide {
    /// The latest exit (absolute ticks).
    exit: u64,
    busy: u64,
}

/// The rare parts of a call: sink payloads and line-timing checkpoints.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Extra {
    /// Sink payloads recorded during the call (`AUX` records), in order.
    pub aux: Vec<u64>,
    /// Line-timing checkpoints (`EVENT` records), when any.
    pub lines: Option<Box<LineAcc>>,
}

/// Every open instance.
#[derive(Default)]
pub(super) struct Insts {
    slab: Vec<Inst>,
    free: u32,
    live: usize,
    /// Span id -> its newest instance.
    by_id: IdIndex,
    /// The id looked up last and its newest instance: a span's records come in runs (an
    /// enter and its exit; a span polled in a loop), each would otherwise cost a hash lookup.
    last: (u64, u32),
    extras: FastMap<u32, Extra>,
    wide: FastMap<u32, Wide>,
}

/// Capacity the tables keep however few instances are open.
const KEEP_CAPACITY: usize = 4096;

impl Insts {
    pub(super) fn new() -> Insts {
        Insts {
            free: NONE,
            // Span ids are never 0: nothing matches before the first lookup.
            last: (0, NONE),
            ..Insts::default()
        }
    }

    /// A new instance of span `id`, the newest of its id.
    pub(super) fn create(&mut self, id: u64, region: u32) -> u32 {
        let k = if self.free != NONE {
            let k = self.free;
            self.free = self.slab[k as usize].polls;
            self.slab[k as usize] = Inst::new(id, region);
            k
        } else {
            self.slab.push(Inst::new(id, region));
            (self.slab.len() - 1) as u32
        };
        let slab = &self.slab;
        self.by_id.insert(id, k, |e| slab[e as usize].id);
        self.last = (id, k);
        self.live += 1;
        k
    }

    /// The newest instance of span `id`.
    #[inline]
    pub(super) fn newest(&mut self, id: u64) -> Option<u32> {
        if self.last.0 == id {
            return Some(self.last.1);
        }
        let slab = &self.slab;
        let k = self.by_id.get(id, |e| slab[e as usize].id)?;
        self.last = (id, k);
        Some(k)
    }

    #[inline]
    pub(super) fn get(&self, k: u32) -> &Inst {
        &self.slab[k as usize]
    }

    #[inline]
    pub(super) fn get_mut(&mut self, k: u32) -> &mut Inst {
        &mut self.slab[k as usize]
    }

    /// The extras of instance `k`, made on first use.
    pub(super) fn extra(&mut self, k: u32) -> &mut Extra {
        self.slab[k as usize].flags |= EXTRA;
        self.extras.entry(k).or_default()
    }

    /// Instance `k` was entered at `tick` on `lane` in `task`: if that is its earliest enter
    /// (records of other lanes may be replayed before this lane's earlier ones), it becomes
    /// the call's start; returns the (task, start) it replaces, if any.
    pub(super) fn enter(&mut self, k: u32, tick: u64, lane: u32, task: u64) -> Option<(u64, u64)> {
        let i = &self.slab[k as usize];
        if i.first != NOT_ENTERED && tick >= i.first {
            return None;
        }
        let old = (i.first != NOT_ENTERED).then_some((i.task, i.first));
        let exited = i.flags & EXITED != 0;
        let exit = self.last_exit(k);
        let i = &mut self.slab[k as usize];
        (i.first, i.first_lane, i.task) = (tick, lane, task);
        if exited {
            // Its offset was from the old start.
            self.set_exit(k, exit);
        }
        old
    }

    /// Instance `k` exited at `tick` on `lane`: the call's end if it is the latest exit.
    pub(super) fn exit(&mut self, k: u32, tick: u64, lane: u32) {
        if self.slab[k as usize].flags & EXITED == 0 || tick >= self.last_exit(k) {
            self.set_exit(k, tick);
            self.slab[k as usize].last_lane = lane;
        }
    }

    fn set_exit(&mut self, k: u32, tick: u64) {
        let i = &mut self.slab[k as usize];
        i.flags |= EXITED;
        let narrow = tick
            .checked_sub(i.first)
            .filter(|&d| d < NARROW && i.first != NOT_ENTERED);
        match narrow {
            Some(d) => {
                i.exit_d = d as u32;
                if i.flags & WIDE_EXIT != 0 {
                    i.flags &= !WIDE_EXIT;
                    if i.flags & WIDE_BUSY == 0 {
                        self.wide.remove(&k);
                    }
                }
            }
            None => {
                i.flags |= WIDE_EXIT;
                self.wide.entry(k).or_default().exit = tick;
            }
        }
    }

    /// The latest exit of instance `k` (0 without one).
    pub(super) fn last_exit(&self, k: u32) -> u64 {
        let i = &self.slab[k as usize];
        if i.flags & EXITED == 0 {
            0
        } else if i.flags & WIDE_EXIT != 0 {
            self.wide.get(&k).map_or(0, |w| w.exit)
        } else {
            i.first + u64::from(i.exit_d)
        }
    }

    /// Adds a poll of `ticks` to instance `k`'s busy time.
    pub(super) fn add_busy(&mut self, k: u32, ticks: u64) {
        let i = &mut self.slab[k as usize];
        if i.flags & WIDE_BUSY == 0 {
            let sum = u64::from(i.busy_d) + ticks;
            if sum < NARROW {
                i.busy_d = sum as u32;
                return;
            }
            i.flags |= WIDE_BUSY;
            self.wide.entry(k).or_default().busy = sum;
        } else {
            self.wide.entry(k).or_default().busy += ticks;
        }
    }

    /// A whole poll of instance `k` (a re-poll, see `super::fast`): `busy` ticks more, one
    /// poll more, and an exit at `end` on `lane`. One step, and one lookup of the wide table
    /// for a call that has outgrown its slab entry (a connection open for minutes, polled
    /// thousands of times), where [`add_busy`](Self::add_busy) and [`exit`](Self::exit) took
    /// three.
    #[inline]
    pub(super) fn add_poll(&mut self, k: u32, busy: u64, end: u64, lane: u32) {
        let i = &mut self.slab[k as usize];
        i.polls += 1;
        let wide = i.flags & (WIDE_EXIT | WIDE_BUSY);
        if wide == 0 && i.flags & EXITED != 0 && i.first != NOT_ENTERED {
            let sum = u64::from(i.busy_d) + busy;
            let exit = i.first + u64::from(i.exit_d);
            let d = end.wrapping_sub(i.first);
            if sum < NARROW && (end < exit || (end >= i.first && d < NARROW)) {
                i.busy_d = sum as u32;
                if end >= exit {
                    (i.exit_d, i.last_lane) = (d as u32, lane);
                }
                return;
            }
        } else if wide == WIDE_EXIT | WIDE_BUSY {
            if let Some(w) = self.wide.get_mut(&k) {
                w.busy += busy;
                if end >= w.exit {
                    (w.exit, i.last_lane) = (end, lane);
                }
                return;
            }
        }
        self.add_busy(k, busy);
        self.exit(k, end, lane);
    }

    /// Instance `k`'s busy time, ticks.
    pub(super) fn busy(&self, k: u32) -> u64 {
        let i = &self.slab[k as usize];
        if i.flags & WIDE_BUSY != 0 {
            self.wide.get(&k).map_or(0, |w| w.busy)
        } else {
            u64::from(i.busy_d)
        }
    }

    /// Removes instance `k` of span `id`; returns it and its extras. Polls it has in progress
    /// ([`Inst::open`]) are the caller's to forget.
    pub(super) fn remove(&mut self, id: u64, k: u32) -> (Inst, Option<Extra>) {
        let inst = self.slab[k as usize];
        debug_assert_eq!(inst.flags & FREE, 0);
        // The map forgets the id once its newest instance completes (older ones are not in
        // it, see the module docs).
        let slab = &self.slab;
        if self.by_id.remove_if(id, k, |e| slab[e as usize].id) && self.last.0 == id {
            self.last = (0, NONE);
        }
        let extra = if inst.flags & EXTRA != 0 {
            self.extras.remove(&k)
        } else {
            None
        };
        if inst.flags & (WIDE_EXIT | WIDE_BUSY) != 0 {
            self.wide.remove(&k);
        }
        let slot = &mut self.slab[k as usize];
        slot.flags = FREE;
        slot.polls = self.free;
        self.free = k;
        self.live -= 1;
        (inst, extra)
    }

    /// Every live instance.
    pub(super) fn iter(&self) -> impl Iterator<Item = &Inst> {
        self.slab.iter().filter(|i| i.flags & FREE == 0)
    }

    /// Every live instance, to change.
    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Inst> {
        self.slab.iter_mut().filter(|i| i.flags & FREE == 0)
    }

    /// Live instances.
    #[inline]
    pub(super) fn live(&self) -> usize {
        self.live
    }

    /// Gives back the memory of a burst once it has passed (call between rounds).
    pub(super) fn shrink(&mut self) {
        if self.live == 0 && self.slab.capacity() > KEEP_CAPACITY {
            self.slab = Vec::new();
            self.free = NONE;
        }
        let slab = &self.slab;
        self.by_id
            .shrink_after_burst(KEEP_CAPACITY, |e| slab[e as usize].id);
        if self.extras.capacity() > KEEP_CAPACITY.max(8 * self.extras.len()) {
            self.extras
                .shrink_to(KEEP_CAPACITY.max(2 * self.extras.len()));
        }
        if self.wide.capacity() > KEEP_CAPACITY.max(8 * self.wide.len()) {
            self.wide.shrink_to(KEEP_CAPACITY.max(2 * self.wide.len()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instance_is_56_bytes() {
        assert_eq!(std::mem::size_of::<Inst>(), 56);
    }

    #[test]
    fn the_map_holds_the_newest_instance_of_a_reused_id() {
        let mut s = Insts::new();
        let a = s.create(7, 0);
        let b = s.create(7, 0);
        assert_eq!(s.newest(7), Some(b));
        // The older one completes first: the newest stays findable.
        s.remove(7, a);
        assert_eq!(s.newest(7), Some(b));
        s.remove(7, b);
        assert_eq!(s.newest(7), None);
        assert_eq!(s.live(), 0);
        // Freed entries are reused.
        let c = s.create(8, 1);
        assert!([a, b].contains(&c));
        assert_eq!(s.get(c).region, 1);
    }

    #[test]
    fn a_whole_poll_in_one_step_is_a_busy_and_an_exit() {
        // Narrow and wide offsets, a poll ending before the latest exit, a busy sum crossing
        // 2^32 ticks, an exit past it.
        let big = u64::from(u32::MAX);
        let polls = [
            (5, 20, 1),
            (3, 15, 2),
            (big - 10, big, 0),
            (100, 3 * big, 1),
            (7, 3 * big + 9, 2),
            (1, 10, 0),
        ];
        let (mut one, mut two) = (Insts::new(), Insts::new());
        let (a, b) = (one.create(1, 0), two.create(1, 0));
        one.enter(a, 4, 0, 0);
        one.exit(a, 6, 0);
        two.enter(b, 4, 0, 0);
        two.exit(b, 6, 0);
        for (busy, end, lane) in polls {
            one.add_poll(a, busy, end, lane);
            two.add_busy(b, busy);
            two.exit(b, end, lane);
            two.get_mut(b).polls += 1;
            assert_eq!(
                (
                    one.busy(a),
                    one.last_exit(a),
                    one.get(a).last_lane,
                    one.get(a).polls
                ),
                (
                    two.busy(b),
                    two.last_exit(b),
                    two.get(b).last_lane,
                    two.get(b).polls
                ),
                "after ({busy}, {end}, {lane})"
            );
        }
    }

    #[test]
    fn long_calls_keep_their_times_in_the_wide_table() {
        let mut s = Insts::new();
        let k = s.create(1, 0);
        assert_eq!(s.last_exit(k), 0);
        // An exit read before the enter it follows (another lane's, replayed later).
        s.exit(k, 5_000_000_000, 2);
        assert_eq!(s.enter(k, 100, 1, 0), None);
        assert_eq!(
            s.last_exit(k),
            5_000_000_000,
            "more than 2^32 ticks after the start"
        );
        s.exit(k, 200, 1);
        assert_eq!(
            (s.last_exit(k), s.get(k).last_lane),
            (5_000_000_000, 2),
            "not the latest"
        );
        // An earlier enter moves the start; the exit stays where it was.
        assert_eq!(s.enter(k, 50, 3, 7), Some((0, 100)));
        assert_eq!((s.get(k).first, s.last_exit(k)), (50, 5_000_000_000));
        s.add_busy(k, 3);
        s.add_busy(k, u64::from(u32::MAX));
        s.add_busy(k, 10);
        assert_eq!(s.busy(k), u64::from(u32::MAX) + 13);
        let back = s.create(3, 0);
        s.exit(back, 900, 0); // before its enter: wide until the start is known
        s.enter(back, 800, 0, 0);
        assert_eq!(s.last_exit(back), 900);
        s.remove(3, back);
        assert_eq!(s.wide.len(), 1, "only the long call's times are wide");
        let short = s.create(2, 0);
        s.enter(short, 1_000, 0, 0);
        s.exit(short, 1_500, 0);
        assert_eq!(s.last_exit(short), 1_500);
        s.remove(1, k);
        assert!(s.wide.is_empty(), "the wide times go with the instance");
    }
}

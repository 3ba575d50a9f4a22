//! The span instances the assembler holds open: a slab of fixed-size entries, an id map to the
//! newest instance of each span id, and the per-lane lists of polls in progress.
//!
//! Built for memory per live instance and for no allocation per call: an instance is one
//! 64-byte slab entry (no `Vec` of its own, no box); the id map holds a `u32` index; the rare
//! extras (sink payloads, line-timing checkpoints) live in a side table; a poll in progress
//! is an entry of its lane's short list (see [`super::lanes`]), not of the instance. Instances
//! of a reused span id are chained newest first through `prev`.

use crate::fasthash::FastMap;
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
pub(super) const EXTRA: u8 = 8;
/// The slab entry is free (its `prev` links the free list).
const FREE: u8 = 16;

/// A span instance still being assembled (64 bytes).
#[derive(Clone, Copy, Debug)]
pub(super) struct Inst {
    /// Tick of the earliest enter ([`NOT_ENTERED`] before the first).
    pub first: u64,
    /// Tick of the latest exit.
    pub last_exit: u64,
    /// Sum of the poll durations (ticks).
    pub busy: u64,
    /// Tokio task of the earliest enter (0 = none).
    pub task: u64,
    pub region: u32,
    /// Lane of the earliest enter.
    pub first_lane: u32,
    /// Lane of the latest exit.
    pub last_lane: u32,
    pub polls: u32,
    /// The next older instance of the same span id ([`NONE`]); the free list when free.
    pub prev: u32,
    /// The lane whose `CLOSE` (or lost close) ended the call ([`NONE`] while open): later
    /// records of that lane belong to a newer instance of the id.
    pub closed_lane: u32,
    /// Polls in progress (entries in the lanes' lists).
    pub open: u16,
    /// [`TAINTED`], [`LOST`], [`EXTRA`].
    pub flags: u8,
}

impl Inst {
    fn new(region: u32, prev: u32) -> Inst {
        Inst {
            first: NOT_ENTERED,
            last_exit: 0,
            busy: 0,
            task: 0,
            region,
            first_lane: NONE,
            last_lane: NONE,
            polls: 0,
            prev,
            closed_lane: NONE,
            open: 0,
            flags: 0,
        }
    }
}

/// The rare parts of an instance.
#[derive(Debug, Default)]
pub(super) struct Extra {
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
    by_id: FastMap<u64, u32>,
    extras: FastMap<u32, Extra>,
}

/// Capacity the tables keep however few instances are open.
const KEEP_CAPACITY: usize = 4096;

impl Insts {
    pub(super) fn new() -> Insts {
        Insts {
            free: NONE,
            ..Insts::default()
        }
    }

    /// A new instance of span `id`, the newest of its id.
    pub(super) fn create(&mut self, id: u64, region: u32) -> u32 {
        let prev = self.by_id.get(&id).copied().unwrap_or(NONE);
        let k = if self.free != NONE {
            let k = self.free;
            self.free = self.slab[k as usize].prev;
            self.slab[k as usize] = Inst::new(region, prev);
            k
        } else {
            self.slab.push(Inst::new(region, prev));
            (self.slab.len() - 1) as u32
        };
        self.by_id.insert(id, k);
        self.live += 1;
        k
    }

    /// The newest instance of span `id`.
    #[inline]
    pub(super) fn newest(&self, id: u64) -> Option<u32> {
        self.by_id.get(&id).copied()
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

    /// Removes instance `k` of span `id`; returns it and its extras. Polls it has in progress
    /// ([`Inst::open`]) are the caller's to forget.
    pub(super) fn remove(&mut self, id: u64, k: u32) -> (Inst, Option<Extra>) {
        let inst = self.slab[k as usize];
        debug_assert_eq!(inst.flags & FREE, 0);
        // Unlink it from its id's chain (newest first; usually it is the oldest, alone).
        match self.by_id.get(&id).copied() {
            Some(head) if head == k => {
                if inst.prev == NONE {
                    self.by_id.remove(&id);
                } else {
                    self.by_id.insert(id, inst.prev);
                }
            }
            Some(mut at) => {
                while at != NONE {
                    let prev = self.slab[at as usize].prev;
                    if prev == k {
                        self.slab[at as usize].prev = inst.prev;
                        break;
                    }
                    at = prev;
                }
            }
            None => {}
        }
        let extra = if inst.flags & EXTRA != 0 {
            self.extras.remove(&k)
        } else {
            None
        };
        let slot = &mut self.slab[k as usize];
        slot.flags = FREE;
        slot.prev = self.free;
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
    #[cfg(test)]
    pub(super) fn live(&self) -> usize {
        self.live
    }

    /// Gives back the memory of a burst once it has passed (call between rounds).
    pub(super) fn shrink(&mut self) {
        if self.live == 0 && self.slab.capacity() > KEEP_CAPACITY {
            self.slab = Vec::new();
            self.free = NONE;
        }
        if self.by_id.capacity() > KEEP_CAPACITY.max(8 * self.by_id.len()) {
            self.by_id
                .shrink_to(KEEP_CAPACITY.max(2 * self.by_id.len()));
        }
        if self.extras.capacity() > KEEP_CAPACITY.max(8 * self.extras.len()) {
            self.extras
                .shrink_to(KEEP_CAPACITY.max(2 * self.extras.len()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instance_is_64_bytes() {
        assert_eq!(std::mem::size_of::<Inst>(), 64);
    }

    #[test]
    fn reused_ids_chain_newest_first_and_unlink_anywhere() {
        let mut s = Insts::new();
        let a = s.create(7, 0);
        let b = s.create(7, 0);
        let c = s.create(7, 0);
        assert_eq!(s.newest(7), Some(c));
        s.remove(7, b);
        assert_eq!(s.get(c).prev, a);
        s.remove(7, c);
        assert_eq!(s.newest(7), Some(a));
        s.remove(7, a);
        assert_eq!(s.newest(7), None);
        assert_eq!(s.live(), 0);
        // Freed entries are reused.
        let d = s.create(8, 1);
        assert!([a, b, c].contains(&d));
    }
}

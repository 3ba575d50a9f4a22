//! The owner's half of a lane: a thread-local writer that appends records without locks.
//!
//! The fast path is one thread-local `Cell` read (const-initialised, no lazy-init check), a
//! compare of the layer's unique id, a slot write and a release store of the new length: no
//! atomic read-modify-write, no lock, no allocation. Everything else (first use on a thread,
//! a second layer in the same process, a full chunk) goes through the `#[cold]` slow path.

use std::cell::{Cell, RefCell};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::chunk::{Chunk, CHUNK_LEN};
use super::record::Record;
use super::Lane;
use crate::state::Shared;

/// One thread's writer into one layer's lane.
pub(crate) struct LocalLane {
    lane: Arc<Lane>,
    chunk: *mut Chunk,
    slots: *mut Record,
    len: usize,
    next_seq: u64,
}

thread_local! {
    /// (layer uid, writer) of the layer this thread wrote to last.
    static FAST: Cell<(u64, *mut LocalLane)> = const { Cell::new((0, std::ptr::null_mut())) };
    /// Every writer of this thread, one per layer; owns them.
    static OWNED: RefCell<Owned> = const { RefCell::new(Owned(Vec::new())) };
}

struct Owned(Vec<(u64, Box<LocalLane>)>);

impl Drop for Owned {
    fn drop(&mut self) {
        // The fast pointer must not outlive the writers it points to.
        let _ = FAST.try_with(|f| f.set((0, std::ptr::null_mut())));
    }
}

/// Runs `f` on this thread's writer for `shared`'s layer, registering the thread on first use.
#[inline(always)]
pub(crate) fn with_local(shared: &Shared, f: impl FnOnce(&mut LocalLane)) {
    let (uid, p) = FAST.get();
    if uid == shared.uid && !p.is_null() {
        // SAFETY: `p` points into a Box owned by this thread's `OWNED`, which is alive (its
        // destructor nulls FAST first) and not borrowed elsewhere: writers are only used here
        // and in the slow path below, never re-entrantly.
        f(unsafe { &mut *p })
    } else {
        with_local_slow(shared, f)
    }
}

#[cold]
#[inline(never)]
fn with_local_slow(shared: &Shared, f: impl FnOnce(&mut LocalLane)) {
    let p = OWNED.try_with(|owned| {
        let mut owned = owned.try_borrow_mut().ok()?;
        let p: *mut LocalLane = match owned.0.iter_mut().find(|(u, _)| *u == shared.uid) {
            Some((_, w)) => &mut **w,
            None => {
                let w = Box::new(LocalLane::new(shared.register_lane()));
                owned.0.push((shared.uid, w));
                &mut *owned.0.last_mut().expect("just pushed").1
            }
        };
        FAST.set((shared.uid, p));
        Some(p)
    });
    match p {
        // SAFETY: as in `with_local`: the Box lives in OWNED, which outlives this call.
        Ok(Some(p)) => f(unsafe { &mut *p }),
        // Thread teardown (OWNED already destroyed) or re-entrancy: the record is lost, and
        // counted.
        _ => {
            shared.lost.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl LocalLane {
    fn new(lane: Arc<Lane>) -> LocalLane {
        let mut w = LocalLane {
            lane,
            chunk: std::ptr::null_mut(),
            slots: std::ptr::null_mut(),
            len: CHUNK_LEN,
            next_seq: 0,
        };
        w.next_chunk();
        w
    }

    /// Appends one record.
    #[inline(always)]
    pub(crate) fn push(&mut self, rec: Record) {
        if self.len < CHUNK_LEN {
            // SAFETY: `slots` points at CHUNK_LEN slots of the chunk this thread owns, and
            // `len < CHUNK_LEN`; the flusher reads only below the published length.
            unsafe {
                self.slots.add(self.len).write(rec);
                self.len += 1;
                (*self.chunk).len.store(self.len, Ordering::Release);
            }
        } else {
            self.push_slow(rec);
        }
    }

    #[cold]
    #[inline(never)]
    fn push_slow(&mut self, rec: Record) {
        if !self.chunk.is_null() {
            // SAFETY: `chunk` came from Box::into_raw in `next_chunk` and is owned by us.
            let full = unsafe { Box::from_raw(self.chunk) };
            if let Err(full) = self.lane.hand_off(full) {
                // The flusher is behind: keep the full chunk, drop this record, count it.
                self.chunk = Box::into_raw(full);
                self.lane.dropped.fetch_add(1, Ordering::Relaxed);
                return;
            }
            self.chunk = std::ptr::null_mut();
            self.lane
                .cpu_ns
                .store(crate::clock::thread_cpu_ns(), Ordering::Relaxed);
        }
        if self.next_chunk() {
            self.push(rec);
        } else {
            self.lane.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Takes an empty chunk and publishes it; false when none can be had.
    fn next_chunk(&mut self) -> bool {
        let Some(c) = self.lane.fresh_chunk() else {
            self.len = CHUNK_LEN;
            return false;
        };
        c.seq.store(self.next_seq, Ordering::Relaxed);
        c.len.store(0, Ordering::Relaxed);
        self.next_seq += 1;
        self.slots = c.slots_ptr();
        self.chunk = Box::into_raw(c);
        self.len = 0;
        self.lane.set_current(self.chunk);
        true
    }
}

impl Drop for LocalLane {
    fn drop(&mut self) {
        let now = crate::clock::Clock::global().now_ns();
        self.lane
            .cpu_ns
            .store(crate::clock::thread_cpu_ns(), Ordering::Relaxed);
        if !self.chunk.is_null() {
            // SAFETY: owned by us since `next_chunk`; handed over exactly once.
            self.lane.retire(unsafe { Box::from_raw(self.chunk) });
            self.chunk = std::ptr::null_mut();
        }
        self.lane.end_ns.store(now, Ordering::Release);
    }
}

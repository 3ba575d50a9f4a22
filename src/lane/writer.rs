//! The owner's half of a lane: appends records to the current chunk and hands full chunks to
//! the flusher, independent of how the writer is found (see [`super::local`] for that).

use std::sync::Arc;

use super::chunk::{Chunk, CHUNK_LEN};
use super::pool::Pool;
use super::record::Record;
use super::sync::Ordering;
use super::Lane;

/// One thread's writer into one lane.
pub(crate) struct Writer {
    lane: Arc<Lane>,
    pool: Arc<Pool>,
    chunk: *mut Chunk,
    #[cfg(not(scope_loom))]
    slots: *mut Record,
    len: usize,
    next_seq: u64,
    /// A wait for a chunk timed out; do not wait again until one is had.
    stalled: bool,
}

// SAFETY: the writer owns its chunk (a `Box` turned into a raw pointer) and is used by one
// thread at a time; the loom model moves writers into model threads.
unsafe impl Send for Writer {}

impl Writer {
    /// A writer for `lane` taking chunks from `pool` (takes its first chunk lazily).
    pub(crate) fn new(lane: Arc<Lane>, pool: Arc<Pool>) -> Writer {
        Writer {
            lane,
            pool,
            chunk: std::ptr::null_mut(),
            #[cfg(not(scope_loom))]
            slots: std::ptr::null_mut(),
            len: CHUNK_LEN,
            next_seq: 0,
            stalled: false,
        }
    }

    /// The lane this writer appends to.
    pub(crate) fn lane_ref(&self) -> &Lane {
        &self.lane
    }

    /// Whether the layer's flusher has stopped, so this writer serves nobody any more.
    pub(crate) fn layer_gone(&self) -> bool {
        !self.pool.flusher_alive()
    }

    /// Appends one record; false when it had to be dropped (no chunk to be had).
    #[cfg(not(scope_loom))]
    #[inline(always)]
    pub(crate) fn push(&mut self, rec: Record) -> bool {
        if self.len < CHUNK_LEN {
            // SAFETY: `slots` points at the CHUNK_LEN slots of the chunk this thread owns (set
            // with `chunk` in `install`), and `len < CHUNK_LEN`; the flusher reads only below
            // the published length, which we raise after the write.
            unsafe {
                self.slots.add(self.len).write(rec);
                self.len += 1;
                (*self.chunk).len.store(self.len, Ordering::Release);
            }
            true
        } else {
            self.push_slow(rec)
        }
    }

    /// Appends one record (loom model: through the tracked slot cells).
    #[cfg(scope_loom)]
    pub(crate) fn push(&mut self, rec: Record) -> bool {
        if self.len < CHUNK_LEN {
            // SAFETY: `chunk` is the live chunk this writer owns (see `install`).
            unsafe { (*self.chunk).write(self.len, rec) };
            self.len += 1;
            true
        } else {
            self.push_slow(rec)
        }
    }

    #[cold]
    #[inline(never)]
    fn push_slow(&mut self, rec: Record) -> bool {
        if !self.chunk.is_null() {
            // SAFETY: `chunk` came from Box::into_raw in `install` and is owned by us.
            let full = unsafe { Box::from_raw(self.chunk) };
            self.chunk = std::ptr::null_mut();
            self.len = CHUNK_LEN;
            self.lane.hand_off(full);
            #[cfg(not(scope_loom))]
            self.lane
                .cpu_ns
                .store(crate::clock::thread_cpu_ns(), std::sync::atomic::Ordering::Relaxed);
        }
        match self.pool.take(&mut self.stalled) {
            Some(c) => {
                self.install(c);
                self.push(rec)
            }
            None => {
                self.lane
                    .dropped
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                false
            }
        }
    }

    /// Resets `c` and publishes it as the chunk being written.
    fn install(&mut self, c: Box<Chunk>) {
        c.seq.store(self.next_seq, Ordering::Relaxed);
        c.len.store(0, Ordering::Relaxed);
        self.next_seq += 1;
        #[cfg(not(scope_loom))]
        {
            self.slots = c.slots_ptr();
        }
        self.chunk = Box::into_raw(c);
        self.len = 0;
        self.lane.publish(self.chunk);
    }

    /// The thread is exiting: hands the last chunk over and marks the lane exited.
    pub(crate) fn finish(&mut self) {
        if !self.chunk.is_null() {
            // SAFETY: owned by us since `install`; handed over exactly once.
            let last = unsafe { Box::from_raw(self.chunk) };
            self.chunk = std::ptr::null_mut();
            self.len = CHUNK_LEN;
            self.lane.hand_off(last);
        }
        self.lane.mark_exited();
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        if !self.lane.exited.load(Ordering::Relaxed) {
            self.finish();
        }
    }
}

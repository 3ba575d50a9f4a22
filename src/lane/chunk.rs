//! A fixed-size block of [`Record`] slots: the unit lane buffers grow by and hand to the flusher.
//!
//! The owning thread writes slot `len` and then publishes `len + 1` with a release store; the
//! flusher reads `len` with an acquire load and only reads slots below it. Slots below a
//! published length are never written again while the chunk is in use; a chunk is reused only
//! after the flusher has consumed it and given it back through the lane's free queue.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use super::record::Record;

/// Records per chunk (4096 x 24 B = 96 KiB).
pub(crate) const CHUNK_LEN: usize = 4096;

/// A block of slots plus its published length and sequence number.
pub(crate) struct Chunk {
    /// Position of this chunk in its lane's stream (set by the owner before publishing it).
    pub(crate) seq: AtomicU64,
    /// Number of published slots.
    pub(crate) len: AtomicUsize,
    slots: Box<[UnsafeCell<Record>]>,
}

// SAFETY: slots are written only by the single owning thread, at indices >= the published
// `len`, and read by the flusher only below the `len` it loaded with acquire ordering, so no
// slot is ever read and written concurrently.
unsafe impl Sync for Chunk {}

impl Chunk {
    /// A new, empty chunk (the only allocation lane buffers make).
    pub(crate) fn new() -> Box<Chunk> {
        Box::new(Chunk {
            seq: AtomicU64::new(0),
            len: AtomicUsize::new(0),
            slots: (0..CHUNK_LEN)
                .map(|_| UnsafeCell::new(Record::default()))
                .collect(),
        })
    }

    /// Pointer to the first slot, for the owner's writes.
    pub(crate) fn slots_ptr(&self) -> *mut Record {
        self.slots.as_ptr() as *mut Record
    }

    /// The published records from `from` on.
    pub(crate) fn published_from(&self, from: usize) -> &[Record] {
        let len = self.len.load(Ordering::Acquire).min(CHUNK_LEN);
        let from = from.min(len);
        // SAFETY: slots [0, len) were fully written before `len` was published (release store
        // paired with the acquire load above) and are not written again while this chunk is
        // reachable by the flusher; UnsafeCell<Record> has the layout of Record.
        unsafe { std::slice::from_raw_parts(self.slots_ptr().add(from), len - from) }
    }
}

//! A block of [`Record`] slots: the unit lane buffers are made of, handed to the flusher when
//! full and recycled through the layer's [`Pool`](super::pool::Pool).
//!
//! Two sizes: a lane's first chunk is small ([`SMALL_LEN`] records, 1 KiB), the next ones
//! are full-size ([`CHUNK_LEN`], 16 KiB). A thread that records a handful of spans and exits
//! (a thread per task, a short-lived helper) then holds 1 KiB of the buffer budget until the
//! flusher reads it, not 16 KiB: 300 000 such threads coming and going never fill the budget
//! with nearly empty chunks when the flusher falls behind.
//!
//! The owning thread writes slot `len` and then publishes `len + 1` with a release store; the
//! flusher reads `len` with an acquire load and only reads slots below it. Slots below a
//! published length are never written again while the chunk is in use; a chunk is reset and
//! reused only after the flusher has consumed it and given it back to the pool.

use super::record::Record;
use super::sync::{AtomicPtr, AtomicU64, AtomicUsize, Ordering, SlotCell};

/// Records per chunk (1024 x 16 B = 16 KiB). Small enough that thousands of live threads fit
/// the default buffer budget, large enough that the handoff (a few atomic operations per
/// chunk, no lock) costs nothing per record.
#[cfg(not(scope_loom))]
pub(crate) const CHUNK_LEN: usize = 1024;
/// Records per chunk in the loom model: two, so a few records exercise every handoff path.
#[cfg(scope_loom)]
pub(crate) const CHUNK_LEN: usize = 2;

/// Records of a lane's first chunk (1 KiB).
#[cfg(not(scope_loom))]
pub(crate) const SMALL_LEN: usize = 64;
/// The loom model's first chunk: as large as the others.
#[cfg(scope_loom)]
pub(crate) const SMALL_LEN: usize = 2;

/// Bytes one full-size chunk occupies (what the buffer budget counts).
pub(crate) const CHUNK_BYTES: usize = CHUNK_LEN * std::mem::size_of::<Record>();
/// Bytes one small chunk occupies.
pub(crate) const SMALL_BYTES: usize = SMALL_LEN * std::mem::size_of::<Record>();

/// A block of slots plus its published length and sequence number.
pub(crate) struct Chunk {
    /// Position of this chunk in its lane's stream (set by the owner before publishing it).
    pub(crate) seq: AtomicU64,
    /// Number of published slots.
    pub(crate) len: AtomicUsize,
    /// The next (older) chunk in its lane's queue of full chunks (see `Lane::hand_off`).
    pub(crate) next: AtomicPtr<Chunk>,
    slots: Box<[SlotCell<Record>]>,
}

// SAFETY: slots are written only by the single owning thread, at indices >= the published
// `len`, and read by the flusher only below the `len` it loaded with acquire ordering, so no
// slot is ever read and written concurrently (the loom model checks exactly this through
// `SlotCell`).
unsafe impl Sync for Chunk {}

impl Chunk {
    /// A new, empty chunk of `len` slots (the only allocation lane buffers make).
    pub(crate) fn new(len: usize) -> Box<Chunk> {
        Box::new(Chunk {
            seq: AtomicU64::new(0),
            len: AtomicUsize::new(0),
            next: AtomicPtr::new(std::ptr::null_mut()),
            slots: (0..len).map(|_| SlotCell::new(Record::default())).collect(),
        })
    }

    /// Slots in this chunk.
    #[inline]
    pub(crate) fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Bytes it counts against the budget.
    pub(crate) fn bytes(&self) -> usize {
        self.capacity() * std::mem::size_of::<Record>()
    }

    /// Writes one slot per memory page, so that a new chunk's page faults happen on the
    /// calling thread (the flusher, see `Pool::refill`) and not on the recording thread that
    /// fills it first. Volatile: the allocator may hand out zeroed pages the compiler knows
    /// to be zero, and the point is the write, not the value.
    #[cfg(not(scope_loom))]
    pub(crate) fn prefault(&mut self) {
        let per_page = (4096 / std::mem::size_of::<Record>()).max(1);
        let slots = self.slots_ptr();
        for i in (0..self.capacity()).step_by(per_page) {
            // SAFETY: `&mut self`: nobody else can see this chunk; `i < capacity`, so the
            // write stays inside the slots.
            unsafe { std::ptr::write_volatile(slots.add(i), Record::default()) };
        }
    }

    /// Pointer to the first slot, for the owner's writes.
    #[cfg(not(scope_loom))]
    pub(crate) fn slots_ptr(&self) -> *mut Record {
        // `SlotCell` is `repr(transparent)` over `UnsafeCell<Record>`, which has the layout of
        // `Record`.
        self.slots.as_ptr() as *mut Record
    }

    /// Writes slot `i` and publishes `i + 1` records (owner only; loom model).
    #[cfg(scope_loom)]
    pub(crate) fn write(&self, i: usize, rec: Record) {
        self.slots[i].write(rec);
        self.len.store(i + 1, Ordering::Release);
    }

    /// Hands the published records from `from` on to `f` (nothing when there are none).
    #[cfg(not(scope_loom))]
    pub(crate) fn read_published(&self, from: usize, f: &mut impl FnMut(&[Record])) -> usize {
        let len = self.len.load(Ordering::Acquire).min(self.capacity());
        let from = from.min(len);
        if from < len {
            // SAFETY: slots [0, len) were fully written before `len` was published (release
            // store paired with the acquire load above) and are not written again while this
            // chunk is reachable by the flusher.
            f(unsafe { std::slice::from_raw_parts(self.slots_ptr().add(from), len - from) });
        }
        len
    }

    /// Hands the published records from `from` on to `f` (loom model: copied slot by slot, so
    /// loom sees each read).
    #[cfg(scope_loom)]
    pub(crate) fn read_published(&self, from: usize, f: &mut impl FnMut(&[Record])) -> usize {
        let len = self.len.load(Ordering::Acquire).min(self.capacity());
        let from = from.min(len);
        if from < len {
            let v: Vec<Record> = self.slots[from..len].iter().map(SlotCell::read).collect();
            f(&v);
        }
        len
    }
}

//! Lanes: one buffer per recording thread (per layer), written without locks by its owner and
//! drained by the flusher.
//!
//! A [`Lane`] is the part shared between the owning thread and the flusher: the thread's
//! identity (dense index, name, TID, start/end, CPU time), a pointer to the chunk being written,
//! a bounded lock-free queue of full chunks (owner -> flusher) and one of empty chunks
//! (flusher -> owner), so the hot path allocates only while the buffer grows. The owner side
//! lives in [`local`].

pub(crate) mod chunk;
pub(crate) mod local;
pub(crate) mod record;

use std::sync::atomic::{AtomicI64, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use crossbeam_queue::ArrayQueue;

use chunk::Chunk;
use record::Record;

/// Full chunks a lane may queue for the flusher before it drops records (x 96 KiB).
pub(crate) const MAX_QUEUED_CHUNKS: usize = 512;

/// The shared half of one thread's buffer.
pub(crate) struct Lane {
    /// Dense index of the thread (registration order, per layer).
    pub(crate) index: u32,
    /// Thread name (`std::thread::current().name()`, or `thread-<index>`).
    pub(crate) name: String,
    /// OS thread id.
    pub(crate) native_id: i64,
    /// Registration time (clock ns).
    pub(crate) start_ns: i64,
    /// Exit time (clock ns), -1 while alive.
    pub(crate) end_ns: AtomicI64,
    /// Thread CPU time in ns (exact at exit, sampled while alive).
    pub(crate) cpu_ns: AtomicI64,
    /// Records lost because the flusher fell behind.
    pub(crate) dropped: AtomicU64,
    current: AtomicPtr<Chunk>,
    full: ArrayQueue<Box<Chunk>>,
    free: ArrayQueue<Box<Chunk>>,
    // Boxed: chunks move between queues as boxes and are recognised by address.
    #[allow(clippy::vec_box)]
    retired: Mutex<Vec<Box<Chunk>>>,
    allocated: AtomicUsize,
}

/// Where the flusher stands in one lane's stream: the next unread record is slot `offset` of
/// the chunk with sequence number `seq`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Cursor {
    seq: u64,
    offset: usize,
}

impl Lane {
    /// A lane for a thread registering now.
    pub(crate) fn new(index: u32, name: String, native_id: i64, start_ns: i64) -> Lane {
        Lane {
            index,
            name,
            native_id,
            start_ns,
            end_ns: AtomicI64::new(-1),
            cpu_ns: AtomicI64::new(0),
            dropped: AtomicU64::new(0),
            current: AtomicPtr::new(std::ptr::null_mut()),
            full: ArrayQueue::new(MAX_QUEUED_CHUNKS),
            free: ArrayQueue::new(MAX_QUEUED_CHUNKS),
            retired: Mutex::new(Vec::new()),
            allocated: AtomicUsize::new(0),
        }
    }

    /// Publishes `c` as the chunk being written (owner only).
    pub(crate) fn set_current(&self, c: *mut Chunk) {
        self.current.store(c, Ordering::Release);
    }

    /// Hands a full chunk to the flusher; gives it back if the queue is full.
    pub(crate) fn hand_off(&self, c: Box<Chunk>) -> Result<(), Box<Chunk>> {
        self.full.push(c)
    }

    /// Hands the last, partial chunk of an exiting thread to the flusher (never fails).
    pub(crate) fn retire(&self, c: Box<Chunk>) {
        self.current.store(std::ptr::null_mut(), Ordering::Release);
        self.retired
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(c);
    }

    /// An empty chunk: a recycled one, or a new one while the lane is below its cap.
    pub(crate) fn fresh_chunk(&self) -> Option<Box<Chunk>> {
        if let Some(c) = self.free.pop() {
            return Some(c);
        }
        if self.allocated.fetch_add(1, Ordering::Relaxed) < MAX_QUEUED_CHUNKS + 2 {
            Some(Chunk::new())
        } else {
            self.allocated.fetch_sub(1, Ordering::Relaxed);
            None
        }
    }

    /// Hands every record published since `cursor` to `sink`, in the owner's program order:
    /// full chunks, retired chunks, then the published part of the chunk being written.
    /// Consumed chunks go back to the free queue at the end, never during the drain, so a
    /// chunk cannot be reused while it is read.
    pub(crate) fn drain(&self, cursor: &mut Cursor, mut sink: impl FnMut(&[Record])) {
        // Load `current` before popping: if it fills up meanwhile it shows up in `full` below
        // and is recognised by address, so records are never taken out of order.
        let current = self.current.load(Ordering::Acquire);
        let mut taken: Vec<Box<Chunk>> = Vec::new();
        while let Some(c) = self.full.pop() {
            Self::take(&c, cursor, &mut sink);
            taken.push(c);
        }
        let retired = std::mem::take(&mut *self.retired.lock().unwrap_or_else(|e| e.into_inner()));
        for c in &retired {
            Self::take(c, cursor, &mut sink);
        }
        let seen = |p: *const Chunk| {
            taken
                .iter()
                .chain(retired.iter())
                .any(|c| std::ptr::eq(&**c, p))
        };
        if !current.is_null() && !seen(current) {
            // SAFETY: `current` was published by the owner with a release store; the chunk is
            // only freed or recycled by this flusher (at the end of a drain), or handed to
            // `retired`, so it is still alive here.
            Self::take(unsafe { &*current }, cursor, &mut sink);
        }
        for c in taken {
            if let Err(c) = self.free.push(c) {
                drop(c);
                self.allocated.fetch_sub(1, Ordering::Relaxed);
            }
        }
        drop(retired);
    }

    fn take(c: &Chunk, cursor: &mut Cursor, sink: &mut impl FnMut(&[Record])) {
        let seq = c.seq.load(Ordering::Acquire);
        if seq < cursor.seq {
            return;
        }
        let from = if seq == cursor.seq { cursor.offset } else { 0 };
        let records = c.published_from(from);
        if !records.is_empty() {
            sink(records);
        }
        let end = from + records.len();
        if end >= chunk::CHUNK_LEN {
            *cursor = Cursor {
                seq: seq + 1,
                offset: 0,
            };
        } else {
            *cursor = Cursor { seq, offset: end };
        }
    }
}

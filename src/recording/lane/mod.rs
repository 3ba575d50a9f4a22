//! Lanes: one buffer per recording thread (per layer), written without locks by its owner and
//! drained by the flusher.
//!
//! A [`Lane`] is the part shared between the owning thread and the flusher: the thread's
//! identity (dense index, name, TID, start/end, CPU time), a pointer to the chunk being
//! written, and the queue of full chunks (owner -> flusher). Empty chunks come from the layer's
//! one [`pool::Pool`], which bounds the memory of all lanes together; the flusher gives drained
//! chunks back to it. The owner side lives in [`writer`] (the handoff logic) and [`local`]
//! (the thread-local glue).
//!
//! No lock on the owner's side: the full-chunk queue is an intrusive stack the owner pushes on
//! with one compare-and-swap (it is the only pusher) and the flusher empties with one swap (it
//! is the only taker and never pops single chunks, so there is no ABA problem); the flusher
//! keeps what it took but has not read yet in the lane's [`DrainState`]. A recording thread
//! therefore never waits for the flusher while it hands a chunk over, whatever the flusher is
//! doing (the pool's free list is lock-free too).
//!
//! ## The handoff protocol (checked by `loom_tests` under `--cfg scope_loom`)
//! - The owner publishes a chunk as `current` (release) after resetting its `seq` and `len`.
//! - A full chunk is first unpublished (`current = null`), then pushed on `full`. So a chunk the
//!   flusher takes from `full` (and later recycles) can never be loaded from `current` by a
//!   later drain: that load happens after the take, hence after the null store.
//! - A drain loads `current` before it empties `full`, reads the chunks it holds (oldest first,
//!   a bounded batch), then reads `current` unless chunks are still waiting or it was among
//!   those read, and only then gives the read chunks back. A chunk loaded from `current` is
//!   therefore either still the owner's (it reads only below the published `len`) or sitting in
//!   `full` or in the drain state, unrecycled; either way alive and not rewritten.
//! - An exiting thread unpublishes its last chunk, pushes it on `full` and then sets `exited`
//!   (release). A drain that saw `exited` (acquire, first thing) takes everything that lane
//!   will ever hold, after which the lane is reclaimed.
//! - Lost-record markers are not in the chunks: the owner leaves each on the lane's cold
//!   [`lost::LostList`] at the loss, with its place in the stream (the sequence number of the
//!   next chunk it will install). A drain takes that list after the chunks it reads (every
//!   marker of a place it reaches was left before the records after it were published) and
//!   feeds each marker just before the first record of its chunk, or after the last record it
//!   read once every chunk before its place has been read. So the flusher reads a loss as soon
//!   as it reads past it, whether the thread ever gets a buffer again, exits, or not.

pub(crate) mod chunk;
pub(crate) mod local;
#[cfg(all(test, scope_loom))]
mod loom_tests;
pub(crate) mod lost;
pub(crate) mod pool;
pub(crate) mod record;
pub(crate) mod sync;
pub(crate) mod writer;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, AtomicU64 as StdAtomicU64};

use chunk::Chunk;
use lost::{LostList, Pending};
use pool::Pool;
use record::Record;
use sync::{AtomicBool, AtomicPtr, Ordering};

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
    /// Records this thread could not buffer (no chunk within the wait bound, or lossy).
    pub(crate) dropped: StdAtomicU64,
    /// Calls dropped whole on this lane with nothing of them in the stream (every record,
    /// creation to close, was dropped here); the others are marked in the stream.
    pub(crate) dropped_calls: StdAtomicU64,
    current: AtomicPtr<Chunk>,
    /// Full chunks, newest first: an intrusive stack through `Chunk::next` of owned pointers
    /// (`Box::into_raw`).
    full: AtomicPtr<Chunk>,
    exited: AtomicBool,
    /// Lost-record markers not taken by the flusher yet (see [`lost`]). Cold: touched only
    /// when a record is lost, and by the flusher once per drain.
    pub(crate) lost: LostList,
}

/// The flusher's side of one lane: where it stands in the stream, and the full chunks it took
/// but has not read yet (oldest first).
#[derive(Default)]
pub(crate) struct DrainState {
    cursor: Cursor,
    backlog: VecDeque<Box<Chunk>>,
    /// Lost markers taken from the lane whose place has not been read up to yet.
    marks: VecDeque<Pending>,
}

/// What one [`Lane::drain`] did.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Drained {
    /// Full chunks consumed.
    pub chunks: usize,
    /// Full chunks are still waiting (the current chunk was not read).
    pub more: bool,
    /// The owner has exited and everything it recorded has been read: drop the lane.
    pub finished: bool,
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
            dropped: StdAtomicU64::new(0),
            dropped_calls: StdAtomicU64::new(0),
            current: AtomicPtr::new(std::ptr::null_mut()),
            full: AtomicPtr::new(std::ptr::null_mut()),
            exited: AtomicBool::new(false),
            lost: LostList::default(),
        }
    }

    /// Publishes `c` as the chunk being written (owner only).
    fn publish(&self, c: *mut Chunk) {
        self.current.store(c, Ordering::Release);
    }

    /// Hands a full (or, at thread exit, the last) chunk to the flusher: unpublished first, so
    /// no later drain can load it from `current` after it was recycled (owner only). One
    /// compare-and-swap: the owner is the only pusher, so it retries only when the flusher took
    /// the stack meanwhile.
    fn hand_off(&self, c: Box<Chunk>) {
        self.current.store(std::ptr::null_mut(), Ordering::Release);
        let c = Box::into_raw(c);
        let mut head = self.full.load(Ordering::Relaxed);
        loop {
            // SAFETY: `c` is ours (from `Box::into_raw` above) until the exchange publishes it.
            unsafe { (*c).next.store(head, Ordering::Relaxed) };
            match self
                .full
                .compare_exchange_weak(head, c, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(now) => head = now,
            }
        }
    }

    /// Takes every full chunk handed off so far and appends them to `to`, oldest first
    /// (flusher only).
    fn take_full(&self, to: &mut VecDeque<Box<Chunk>>) {
        let mut p = self.full.swap(std::ptr::null_mut(), Ordering::Acquire);
        let at = to.len();
        while !p.is_null() {
            // SAFETY: every pointer on the stack came from `Box::into_raw` in `hand_off` and was
            // published by its release exchange (paired with the acquire swap above); the swap
            // made this thread its only owner.
            let c = unsafe { Box::from_raw(p) };
            p = c.next.load(Ordering::Relaxed);
            to.push_back(c);
        }
        // The stack is newest first.
        to.make_contiguous()[at..].reverse();
    }

    /// Marks the owner gone; everything it recorded is on `full` (owner only, last call).
    fn mark_exited(&self) {
        self.exited.store(true, Ordering::Release);
    }

    /// Whether full chunks wait for the flusher (handed off and not yet taken, or taken into
    /// `st` and not yet read).
    pub(crate) fn has_full(&self, st: &DrainState) -> bool {
        !st.backlog.is_empty() || !self.full.load(Ordering::Relaxed).is_null()
    }

    /// Hands records published since the last drain to `sink`, in the owner's program order:
    /// at most `max_chunks` full chunks and, once no full chunk is left, the published part of
    /// the chunk being written. The consumed chunks go back to `pool` at the end, so waiting
    /// threads get buffers back after every batch.
    pub(crate) fn drain(
        &self,
        st: &mut DrainState,
        pool: &Pool,
        max_chunks: usize,
        mut sink: impl FnMut(&[Record]),
    ) -> Drained {
        let exited = self.exited.load(Ordering::Acquire);
        // Load `current` before taking the full chunks: if it fills up meanwhile it shows up
        // among them and is recognised by address, so records are never taken out of order.
        let current = self.current.load(Ordering::Acquire);
        self.take_full(&mut st.backlog);
        // The markers after the chunks: a marker is left before any record after its place
        // is published, so every marker of a place these chunks reach is among them.
        self.lost.take_into(&mut st.marks);
        let n = st.backlog.len().min(max_chunks);
        let taken: Vec<Box<Chunk>> = st.backlog.drain(..n).collect();
        let more = !st.backlog.is_empty();
        for c in &taken {
            // A chunk from `full` is complete: its owner wrote nothing more into it.
            Self::take(c, true, &mut st.cursor, &mut st.marks, &mut sink);
        }
        // The current chunk comes after every full one; read it only when none is left.
        if !more && !current.is_null() && !taken.iter().any(|c| std::ptr::eq(&**c, current)) {
            // SAFETY: `current` was published with a release store after the chunk was reset.
            // It was not read above and no full chunk waits, so it is either still the owner's
            // chunk (alive: only the owner hands it off, and only to `full`) or it reached
            // `full` after our take and waits there unrecycled; chunks are recycled only by
            // this thread, below, and only those it read. It cannot be a chunk recycled by an
            // earlier drain: that drain's take happened after the owner's null store, and this
            // load comes later on this thread (see the module docs; loom checks it).
            let c = unsafe { &*current };
            Self::take(c, false, &mut st.cursor, &mut st.marks, &mut sink);
        }
        // Markers whose place is reached: every chunk before it has been read (the owner may
        // have no chunk now). Once the owner has exited and all is read, every marker is.
        let upto = if exited && !more {
            u64::MAX
        } else {
            st.cursor.seq
        };
        Self::feed_marks(upto, &mut st.marks, &mut sink);
        let chunks = taken.len();
        for c in taken {
            pool.give(c);
        }
        pool.refill();
        Drained {
            chunks,
            more,
            // `exited` was set after the owner's last handoff: with nothing left waiting, all
            // it recorded has been read.
            finished: exited && !more,
        }
    }

    /// Reads chunk `c` from where `cursor` stands, after the markers whose place is before
    /// it; `complete`: its owner handed it off, so the cursor moves past it.
    fn take(
        c: &Chunk,
        complete: bool,
        cursor: &mut Cursor,
        marks: &mut VecDeque<Pending>,
        sink: &mut impl FnMut(&[Record]),
    ) {
        let seq = c.seq.load(Ordering::Acquire);
        if seq < cursor.seq {
            return;
        }
        let from = if seq == cursor.seq { cursor.offset } else { 0 };
        if from == 0 {
            Self::feed_marks(seq, marks, sink);
        }
        let end = c.read_published(from, sink).max(from);
        *cursor = if complete || end >= c.capacity() {
            Cursor {
                seq: seq + 1,
                offset: 0,
            }
        } else {
            Cursor { seq, offset: end }
        };
    }

    /// Feeds the markers placed before chunk `upto` (or at it) to `sink`, in order.
    fn feed_marks(upto: u64, marks: &mut VecDeque<Pending>, sink: &mut impl FnMut(&[Record])) {
        if marks.front().is_none_or(|m| m.at > upto) {
            return;
        }
        let mut recs = Vec::new();
        while let Some(m) = marks.front().filter(|m| m.at <= upto) {
            recs.push(m.record());
            marks.pop_front();
        }
        sink(&recs);
    }
}

impl Drop for Lane {
    fn drop(&mut self) {
        // Chunks nobody drained (the flusher stopped first) are freed with the lane.
        let mut rest = VecDeque::new();
        self.take_full(&mut rest);
    }
}

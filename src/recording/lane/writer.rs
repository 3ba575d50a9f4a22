//! The owner's half of a lane: appends records to the current chunk and hands full chunks to
//! the flusher, independent of how the writer is found (see [`super::local`] for that).
//!
//! When no chunk can be had (the budget is used up and the wait bound passed, or `lossy`), the
//! record is dropped and a `LOST` marker for its span left on the lane's cold list at once,
//! with its place in the stream (see [`super::lost`]; consecutive records of one span share
//! a marker). The flusher reads the marker exactly where the dropped records were, so it
//! routes it to the very span instance that lost the record (span ids are reused, so an id
//! alone would not do) and drops that call whole; it does not wait for this thread to get a
//! buffer again.
//!
//! An enter secures room for its exit as well, so a leaf poll's two records share a buffer
//! and reach the flusher together (its one-step paths see them side by side). It is still
//! published at once: a span entered and stuck (a blocked request) must be visible to the
//! flusher's open-calls frame and to the live view, so publishing the whole poll only at its
//! exit (tried: one release store less per poll) is not worth what it hides.

use std::sync::Arc;

use super::chunk::Chunk;
use super::pool::Pool;
use super::record::Record;
use super::sync::Ordering;
use super::Lane;

/// [`Writer::task`] when the stream's task is not known (a `TASK` record was lost): the next
/// enter writes its task again.
const TASK_UNKNOWN: u64 = u64::MAX;

/// The owner samples its CPU time at every this many chunk handoffs.
#[cfg(not(scope_loom))]
const CPU_SAMPLE_EVERY: u64 = 16;

/// One thread's writer into one lane.
pub(crate) struct Writer {
    // The fields the fast path touches come first (one cache line).
    #[cfg(not(scope_loom))]
    slots: *mut Record,
    len: usize,
    /// Slots of the current chunk (0 without one).
    cap: usize,
    chunk: *mut Chunk,
    /// The Tokio task the lane's stream is in (its latest `TASK` record; 0 = none).
    task: u64,
    lane: Arc<Lane>,
    pool: Arc<Pool>,
    next_seq: u64,
    /// A wait for a chunk timed out (with the flusher's progress then); do not wait again
    /// until it has moved on.
    stalled: Option<u64>,
    /// Span callsites this thread knows to be registered with the flusher (a direct-mapped
    /// cache by address; see [`Writer::known_callsite`]).
    known: [usize; KNOWN],
}

/// Entries of [`Writer::known`].
const KNOWN: usize = 64;

// SAFETY: the writer owns its chunk (a `Box` turned into a raw pointer) and is used by one
// thread at a time; the loom model moves writers into model threads.
unsafe impl Send for Writer {}

impl Writer {
    /// A writer for `lane` taking chunks from `pool` (takes its first chunk lazily).
    pub(crate) fn new(lane: Arc<Lane>, pool: Arc<Pool>) -> Writer {
        Writer {
            #[cfg(not(scope_loom))]
            slots: std::ptr::null_mut(),
            len: 0,
            cap: 0,
            chunk: std::ptr::null_mut(),
            task: 0,
            lane,
            pool,
            next_seq: 0,
            stalled: None,
            known: [0; KNOWN],
        }
    }

    /// Whether span callsite `addr` is known to be registered with the flusher; if not,
    /// `register` makes it so and it is remembered. `tracing` may create a span of a callsite
    /// while another thread is still inside the subscriber's `register_callsite` for it (the
    /// flusher would count the span's creation record as corrupt and lose the call): a
    /// thread registers such a callsite itself, before it writes the record. One load and a
    /// compare per span once known (the thread's first span of each callsite, or one evicted
    /// from this small cache, takes the registry's lock).
    #[inline(always)]
    pub(crate) fn known_callsite(&mut self, addr: usize, register: impl FnOnce()) {
        // Callsites are statics at least 8 bytes apart: the bits above the alignment spread.
        let slot = (addr >> 4) % KNOWN;
        if self.known[slot] != addr {
            register();
            self.known[slot] = addr;
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
    #[inline(always)]
    pub(crate) fn push(&mut self, rec: Record) -> bool {
        if !self.room(1) {
            self.note_lost(&rec);
            return false;
        }
        self.write(rec);
        self.publish();
        true
    }

    /// Appends an enter of span `id` in Tokio task `task` (0: none; `None`: not tracked),
    /// reading the clock only once its slots are secured, so a chunk handoff never falls
    /// inside the call it starts. False when it had to be dropped.
    #[inline(always)]
    pub(crate) fn push_enter(&mut self, id: u64, task: Option<u64>, fresh: bool) -> bool {
        let switch = task.filter(|&t| t != self.task);
        // Room for the exit too, so a leaf poll's two records share one buffer; a fresh
        // enter asks for its close as well, so a sync span's three records do and the
        // flusher's one-step path sees them together (at most three slots of a buffer go
        // unused).
        let need = 2 + usize::from(switch.is_some()) + usize::from(fresh);
        if !self.room(need) {
            self.task = TASK_UNKNOWN;
            self.note_lost(&Record::enter(id, 0));
            return false;
        }
        if let Some(t) = switch {
            self.write(Record::task(t));
            self.task = t;
        }
        let ticks = crate::recording::clock::ticks();
        self.write(if fresh {
            Record::enter_fresh(id, ticks)
        } else {
            Record::enter(id, ticks)
        });
        self.publish();
        true
    }

    /// Appends two records that must be read together (a checkpoint and its site): the
    /// clock is read by `first` once both slots are secured. False when dropped.
    #[inline(always)]
    pub(crate) fn push_pair(&mut self, first: impl FnOnce() -> Record, second: Record) -> bool {
        if !self.room(2) {
            let rec = first();
            self.note_lost(&rec);
            return false;
        }
        self.write(first());
        self.write(second);
        self.publish();
        true
    }

    /// Appends `N` (at most 3) records that must be read together (a Tokio spawn), made by
    /// `make` from the clock read once their slots are secured. When they cannot be buffered,
    /// the first is noted as lost as usual. False when dropped.
    #[inline(always)]
    pub(crate) fn push_with_ticks<const N: usize>(
        &mut self,
        make: impl FnOnce(u64) -> [Record; N],
    ) -> bool {
        if !self.room(N) {
            let recs = make(crate::recording::clock::ticks());
            self.note_lost(&recs[0]);
            return false;
        }
        for rec in make(crate::recording::clock::ticks()) {
            self.write(rec);
        }
        self.publish();
        true
    }

    /// Appends a record that stands alone (a wake: its loss drops no call), made by `make`
    /// from the clock read once its slot is secured. A record that cannot be buffered is
    /// counted as dropped, without a lost marker. False when dropped.
    #[inline(always)]
    pub(crate) fn push_marker(&mut self, make: impl FnOnce(u64) -> Record) -> bool {
        if !self.room(1) {
            self.lane
                .dropped
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return false;
        }
        self.write(make(crate::recording::clock::ticks()));
        self.publish();
        true
    }

    /// Makes sure `n` (at most 4) slots are free in the current chunk, handing it off for a
    /// fresh one when they are not; false when no chunk can be had.
    #[inline(always)]
    fn room(&mut self, n: usize) -> bool {
        self.len + n <= self.cap || self.room_slow(n)
    }

    /// Writes `rec` into the next free slot, unpublished (the caller made room).
    #[cfg(not(scope_loom))]
    #[inline(always)]
    fn write(&mut self, rec: Record) {
        debug_assert!(self.len < self.cap);
        // SAFETY: `slots` points at the `cap` slots of the chunk this thread owns (set with
        // `chunk` in `install`), and `len < cap` (`room` made sure); the flusher
        // reads only below the published length, which `publish` raises after the write.
        unsafe { self.slots.add(self.len).write(rec) };
        self.len += 1;
    }

    /// Writes `rec` into the next free slot (loom model: through the tracked slot cells).
    #[cfg(scope_loom)]
    fn write(&mut self, rec: Record) {
        // SAFETY: `chunk` is the live chunk this writer owns (see `install`).
        unsafe { (*self.chunk).write(self.len, rec) };
        self.len += 1;
    }

    /// Publishes the slots written so far to the flusher (a release store; a plain store on
    /// x86).
    #[inline(always)]
    fn publish(&mut self) {
        // SAFETY: `chunk` is the live chunk this writer owns whenever `len` slots were
        // written to it (see `install`).
        unsafe { (*self.chunk).len.store(self.len, Ordering::Release) };
    }

    /// No room for `n` slots: hands the chunk off and takes another (lost markers are not
    /// written into it: they are on the lane's list already). False when no chunk can be had.
    #[cold]
    #[inline(never)]
    fn room_slow(&mut self, n: usize) -> bool {
        self.next_chunk() && self.len + n <= self.cap
    }

    /// Hands the full chunk (if any) to the flusher and installs a fresh one; false (and no
    /// chunk) when none can be had.
    fn next_chunk(&mut self) -> bool {
        self.next_chunk_from(|pool, stalled, small| pool.take(stalled, small))
    }

    fn next_chunk_from(
        &mut self,
        take: impl FnOnce(&Pool, &mut Option<u64>, bool) -> Option<Box<Chunk>>,
    ) -> bool {
        if !self.chunk.is_null() {
            // SAFETY: `chunk` came from Box::into_raw in `install` and is owned by us.
            let full = unsafe { Box::from_raw(self.chunk) };
            self.chunk = std::ptr::null_mut();
            (self.len, self.cap) = (0, 0);
            self.lane.hand_off(full);
            // The thread's CPU time, sampled for the flusher's fallback (it reads live threads'
            // clocks itself; exact at exit). A clock_gettime syscall (~0.8 us in a VM), so only
            // every CPU_SAMPLE_EVERY chunks: once per chunk it cost ~0.8 ns per record.
            #[cfg(not(scope_loom))]
            if self.next_seq.is_multiple_of(CPU_SAMPLE_EVERY) {
                self.lane.cpu_ns.store(
                    crate::recording::clock::thread_cpu_ns(),
                    std::sync::atomic::Ordering::Relaxed,
                );
            }
        }
        // A lane's first chunk is a small one (see `chunk`).
        let small = self.next_seq == 0;
        match take(&self.pool, &mut self.stalled, small) {
            Some(c) => {
                self.install(c);
                true
            }
            None => false,
        }
    }

    /// Counts a dropped record and leaves a lost marker for its span on the lane, placed
    /// before the next chunk this writer will install (it has none now: the loss came after
    /// handing off the last one, so every record written before it is in an earlier chunk).
    /// A span entered here whose every record on this lane was lost, creation to close, gets
    /// no marker (nothing of it is in the stream) and is counted as a dropped call at once.
    #[cold]
    fn note_lost(&mut self, rec: &Record) {
        use std::sync::atomic::Ordering::Relaxed;
        debug_assert!(self.chunk.is_null());
        self.lane.dropped.fetch_add(1, Relaxed);
        if self.lane.lost.note(self.next_seq, rec) {
            self.lane.dropped_calls.fetch_add(1, Relaxed);
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
        self.cap = c.capacity();
        self.chunk = Box::into_raw(c);
        self.len = 0;
        self.lane.publish(self.chunk);
    }

    /// The thread is exiting: hands the last chunk over and marks the lane exited (its lost
    /// markers are on the lane already, so it never waits for a buffer, in any mode).
    pub(crate) fn finish(&mut self) {
        if !self.chunk.is_null() {
            // SAFETY: owned by us since `install`; handed over exactly once.
            let last = unsafe { Box::from_raw(self.chunk) };
            self.chunk = std::ptr::null_mut();
            (self.len, self.cap) = (0, 0);
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

#[cfg(all(test, not(scope_loom)))]
mod tests {
    use super::*;
    use crate::recording::lane::chunk::{CHUNK_BYTES, SMALL_LEN};
    use crate::recording::lane::pool::Policy;
    use crate::recording::lane::DrainState;

    #[test]
    fn a_fresh_enter_keeps_its_sync_span_in_one_buffer() {
        let pool = Arc::new(Pool::new(
            8 * CHUNK_BYTES,
            Policy {
                lossy: false,
                max_wait: std::time::Duration::from_millis(10),
            },
        ));
        let lane = Arc::new(Lane::new(0, "t".into(), 0, 0));
        let mut w = Writer::new(lane.clone(), pool.clone());
        // Fill the first (small) buffer but for two slots.
        for id in 0..(SMALL_LEN - 2) as u64 {
            assert!(w.push(Record::exit(id + 1, 5)));
        }
        // A plain enter fits in one of them; a fresh one needs three.
        assert!(w.push_enter(100, None, false));
        assert!(w.push_enter(101, None, true));
        assert!(w.push(Record::exit(101, 9)));
        assert!(w.push(Record::close(101)));
        w.finish();
        let mut chunks = Vec::new();
        let mut st = DrainState::default();
        for _ in 0..4 {
            lane.drain(&mut st, &pool, 16, |recs| chunks.push(recs.to_vec()));
        }
        assert_eq!(chunks[0].len(), SMALL_LEN - 1, "one slot left unused");
        assert_eq!(chunks[0].last().map(|r| r.id), Some(100));
        let next: Vec<u64> = chunks[1].iter().map(|r| r.id).collect();
        assert_eq!(
            next,
            [101, 101, 101],
            "the fresh span starts the next buffer"
        );
        assert!(chunks[1][0].is_fresh());
    }

    /// Every record `lane` published so far, drained.
    fn drained(lane: &Lane, pool: &Pool, st: &mut DrainState) -> Vec<(u64, u64)> {
        let mut recs = Vec::new();
        lane.drain(st, pool, 16, |r| {
            recs.extend(r.iter().map(|r| (r.id, r.kind())));
        });
        recs
    }

    /// An enter is published at once (a stuck span stays visible), with room kept for its
    /// exit, so a leaf poll's records share a buffer.
    #[test]
    fn an_enter_is_published_at_once_and_keeps_room_for_its_exit() {
        use crate::recording::lane::record::{ENTER, EXIT, TASK};
        let pool = Arc::new(Pool::new(
            8 * CHUNK_BYTES,
            Policy {
                lossy: false,
                max_wait: std::time::Duration::from_millis(10),
            },
        ));
        let lane = Arc::new(Lane::new(0, "t".into(), 0, 0));
        let mut w = Writer::new(lane.clone(), pool.clone());
        let mut st = DrainState::default();
        assert!(w.push_enter(7, Some(3), false));
        assert_eq!(drained(&lane, &pool, &mut st), [(3, TASK), (7, ENTER)]);
        assert!(w.push(Record::exit(7, 50)));
        assert_eq!(drained(&lane, &pool, &mut st), [(7, EXIT)]);
        // One slot left in the (small) first buffer: the enter goes to the next, with its exit.
        for id in 0..(SMALL_LEN - 4) as u64 {
            assert!(w.push(Record::close(id + 100)));
        }
        assert!(w.push_enter(8, Some(3), false));
        assert!(w.push(Record::exit(8, 60)));
        let mut chunks = Vec::new();
        lane.drain(&mut st, &pool, 16, |r| chunks.push(r.len()));
        assert_eq!(chunks, [SMALL_LEN - 4, 2], "{chunks:?}");
    }

    /// With the budget used up and no flusher freeing anything, an exiting thread returns at
    /// once (it waited up to the backpressure timeout before, 30 s here), and the lost
    /// markers it could not write reach the flusher after its last records.
    #[test]
    fn an_exiting_thread_never_waits_and_its_markers_still_arrive() {
        let pool = Arc::new(Pool::new(
            CHUNK_BYTES,
            Policy {
                lossy: true,
                max_wait: std::time::Duration::from_secs(30),
            },
        ));
        let lane = Arc::new(Lane::new(0, "t".into(), 0, 0));
        let mut w = Writer::new(lane.clone(), pool.clone());
        let mut id = 1;
        while w.push(Record::exit(id, 5)) {
            id += 1;
        }
        assert!(!w.push(Record::exit(id + 1, 5)), "still no buffer");
        let t = std::time::Instant::now();
        w.finish();
        let exit = t.elapsed();
        assert!(
            exit < std::time::Duration::from_secs(5),
            "the exit took {exit:?}"
        );
        let mut recs = Vec::new();
        let mut st = DrainState::default();
        for _ in 0..4 {
            lane.drain(&mut st, &pool, 16, |r| recs.extend_from_slice(r));
        }
        let lost: Vec<(u64, bool)> = recs
            .iter()
            .filter(|r| r.kind() == crate::recording::lane::record::LOST)
            .map(|r| (r.id, r.lost_closed()))
            .collect();
        assert_eq!(
            lost,
            [(id, false), (id + 1, false)],
            "both markers, once each"
        );
        let tail: Vec<u64> = recs[recs.len() - 2..].iter().map(|r| r.id).collect();
        assert_eq!(tail, [id, id + 1], "after every record the thread wrote");
        assert_eq!(recs.len() as u64, id + 1, "{} exits and 2 markers", id - 1);
    }

    /// A lost marker is read at its place as soon as the flusher reads past it, while the
    /// thread still has no buffer (it used to wait in the thread until it got one again, and
    /// the lane read as caught up meanwhile); records written after the outage follow it.
    #[test]
    fn a_marker_is_read_at_its_place_while_the_thread_has_no_buffer() {
        use crate::recording::lane::record::{CLOSE, LOST};
        let pool = Arc::new(Pool::new(
            2 * CHUNK_BYTES,
            Policy {
                lossy: true,
                max_wait: std::time::Duration::from_secs(30),
            },
        ));
        let lane = Arc::new(Lane::new(0, "t".into(), 0, 0));
        let mut w = Writer::new(lane.clone(), pool.clone());
        let mut st = DrainState::default();
        // Fill the budget (the small first chunk, then a full-size one).
        let mut id = 1;
        while w.push(Record::exit(id, 5)) {
            id += 1;
        }
        assert!(
            !w.push(Record::close(id)),
            "the exit and close of one span lost"
        );
        let mut recs = Vec::new();
        // The first drain reads the full chunks and frees them; the markers come after them.
        lane.drain(&mut st, &pool, 16, |r| recs.extend_from_slice(r));
        let tail: Vec<(u64, u64)> = recs[recs.len() - 1..]
            .iter()
            .map(|r| (r.id, r.kind()))
            .collect();
        assert_eq!(
            tail,
            [(id, LOST)],
            "read before the thread had a buffer again"
        );
        assert!(recs[recs.len() - 1].lost_closed());
        assert_eq!(recs.len() as u64, id, "{} exits and one marker", id - 1);
        // The buffers are free again: what the thread writes next follows the marker.
        assert!(w.push(Record::close(id + 1)));
        w.finish();
        let mut after = Vec::new();
        lane.drain(&mut st, &pool, 16, |r| after.extend_from_slice(r));
        let after: Vec<(u64, u64)> = after.iter().map(|r| (r.id, r.kind())).collect();
        assert_eq!(after, [(id + 1, CLOSE)]);
    }
}

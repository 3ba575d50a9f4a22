//! The owner's half of a lane: appends records to the current chunk and hands full chunks to
//! the flusher, independent of how the writer is found (see [`super::local`] for that).
//!
//! When no chunk can be had (the budget is used up and the wait bound passed, or `lossy`), the
//! record is dropped and its span noted in a short pending list (consecutive records of one
//! span share an entry). As soon as the writer has a chunk again it first writes one `LOST`
//! marker per entry, then the record. The markers sit in the stream exactly where the dropped
//! records were, so the flusher routes each to the very span instance that lost the record
//! (span ids are reused, so an id alone would not do) and drops that call whole.
//!
//! An enter secures room for its exit as well, so a leaf poll's two records share a buffer
//! and reach the flusher together (its one-step paths see them side by side). It is still
//! published at once: a span entered and stuck (a blocked request) must be visible to the
//! flusher's open-calls frame and to the live view, so publishing the whole poll only at its
//! exit (tried: one release store less per poll) is not worth what it hides.

use std::sync::Arc;

use super::chunk::Chunk;
use super::pool::Pool;
use super::record::{Record, CLOSE, NEW};
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
    /// Spans that lost records since the last chunk, in order, waiting for their markers.
    lost: Vec<Lost>,
    /// Span callsites this thread knows to be registered with the flusher (a direct-mapped
    /// cache by address; see [`Writer::known_callsite`]).
    known: [usize; KNOWN],
}

/// Entries of [`Writer::known`].
const KNOWN: usize = 64;

/// A pending lost marker: span `id` lost records here; `closed` if its close was among them;
/// `whole` while every record of it on this lane so far was lost, starting with its creation.
#[derive(Clone, Copy, Debug)]
struct Lost {
    id: u64,
    closed: bool,
    whole: bool,
}

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
            lost: Vec::new(),
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

    /// Makes sure `n` (at most 3 + the pending lost markers' room) slots are free in the
    /// current chunk, handing it off for a fresh one when they are not; false when no chunk
    /// can be had.
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

    /// No room for `n` slots: hands the chunk off, takes another and writes the pending lost
    /// markers into it first (they exist only while there was no chunk). False when no chunk
    /// can be had.
    #[cold]
    #[inline(never)]
    fn room_slow(&mut self, n: usize) -> bool {
        let mut written = 0;
        loop {
            if self.len + n > self.cap && !self.next_chunk() {
                self.lost.drain(..written);
                return false;
            }
            match self.lost.get(written) {
                Some(&Lost { id, closed, .. }) if self.len + n < self.cap => {
                    self.write(Record::lost(id, closed));
                    written += 1;
                }
                Some(_) => {
                    // The markers filled this chunk: publish them and take the next.
                    self.publish();
                    self.lost.drain(..written);
                    written = 0;
                    if !self.next_chunk() {
                        return false;
                    }
                }
                None => {
                    self.lost.clear();
                    if written > 0 {
                        self.publish();
                    }
                    return true;
                }
            }
        }
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

    /// Counts a dropped record and notes its span for a lost marker. A span whose every record
    /// on this lane was lost, creation to close, needs no marker (nothing of it is in the
    /// stream): it is counted as a dropped call at once, so the pending list holds at most the
    /// spans open on this thread, whatever the length of the outage.
    fn note_lost(&mut self, rec: &Record) {
        use std::sync::atomic::Ordering::Relaxed;
        self.lane.dropped.fetch_add(1, Relaxed);
        let (new, close) = (rec.kind() == NEW, rec.kind() == CLOSE);
        // Consecutive records of one span instance share an entry (after its close the id may
        // be reused, so a closed entry is never extended).
        if let Some(last) = self.lost.last_mut().filter(|l| l.id == rec.id && !l.closed) {
            last.closed = close;
            if close && last.whole {
                self.lost.pop();
                self.lane.dropped_calls.fetch_add(1, Relaxed);
            }
            return;
        }
        self.lost.push(Lost {
            id: rec.id,
            closed: close,
            whole: new,
        });
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

    /// The thread is exiting: writes pending lost markers while a free chunk is at hand, leaves
    /// the rest on the lane for the flusher (never waiting for a buffer, in any mode), hands
    /// the last chunk over and marks the lane exited.
    pub(crate) fn finish(&mut self) {
        let mut i = 0;
        while i < self.lost.len() {
            if self.len >= self.cap
                && !self.next_chunk_from(|pool, _, small| pool.take_at_exit(small))
            {
                break;
            }
            let Lost { id, closed, .. } = self.lost[i];
            self.write(Record::lost(id, closed));
            self.publish();
            i += 1;
        }
        if i < self.lost.len() {
            let rest = self.lost[i..].iter().map(|l| Record::lost(l.id, l.closed));
            self.lane.leave_exit_markers(rest.collect());
        }
        self.lost.clear();
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
        let lost: Vec<(u64, u64)> = recs
            .iter()
            .filter(|r| r.kind() == crate::recording::lane::record::LOST)
            .map(|r| (r.id, r.payload()))
            .collect();
        assert_eq!(lost, [(id, 0), (id + 1, 0)], "both markers, once each");
        let tail: Vec<u64> = recs[recs.len() - 2..].iter().map(|r| r.id).collect();
        assert_eq!(tail, [id, id + 1], "after every record the thread wrote");
        assert_eq!(recs.len() as u64, id + 1, "{} exits and 2 markers", id - 1);
    }
}

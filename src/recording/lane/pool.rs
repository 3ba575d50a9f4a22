//! The layer's one buffer budget: every chunk of every lane comes from this pool, and the
//! flusher gives drained chunks back to it.
//!
//! The free chunks sit in a lock-free queue, oldest first: a chunk the flusher has just read
//! (its lines still in the flusher's cache) is reused last, so a recording thread rarely has
//! to pull the lines it writes from the other core. The flusher keeps a reserve of free,
//! pre-faulted chunks, and `build()` fills the first one ([`Pool::prefill`]), so a recording
//! thread neither allocates nor page-faults when it hands a chunk over.
//!
//! The pool allocates at most `max_chunks` chunks in all (the builder's `buffer_budget`), so
//! recording memory is bounded whatever the number of threads, and chunks of exited threads
//! are reused by new ones. When no chunk is free, a recording thread either waits for the
//! flusher (backpressure, the default: counts stay exact) or, with `lossy`, gives up at once.
//! The wait is bounded: when the flusher frees nothing for `max_wait`, or is gone, the thread
//! stops waiting and drops (counted), and does not wait again until the flusher has made
//! progress, so a stalled flusher never parks a thread (or a Tokio worker) more than once per
//! stall.

use super::chunk::{Chunk, CHUNK_BYTES, CHUNK_LEN, SMALL_BYTES, SMALL_LEN};
use super::sync::{AtomicBool, AtomicU64, AtomicUsize, FreeList, Ordering};

/// Rounds in a row the free list must hold more than twice the reserve before the surplus is
/// freed (a burst is over, not a pause between batches): 16 to 500 ms.
#[cfg_attr(scope_loom, allow(dead_code))]
const TRIM_AFTER: usize = 8;
/// Free chunks given back to the system per round at most (8 MiB: a few ms of `munmap`).
#[cfg_attr(scope_loom, allow(dead_code))]
const TRIM_PER_ROUND: usize = 512;

/// Small (first) chunks kept ready, and at most a sixteenth of the budget.
#[cfg_attr(scope_loom, allow(dead_code))]
const SMALL_RESERVE: usize = 64;
/// Free small chunks kept at most (more are freed: the budget goes back to full-size ones).
const SMALL_FREE_MAX: usize = 4096;

/// Free chunks the flusher keeps ready at first (see [`Pool::refill`]); `build()` makes them
/// (512 KiB).
const RESERVE_MIN: usize = 32;
/// The most free chunks the flusher keeps ready (4 MiB), and at most a quarter of the budget.
#[cfg_attr(scope_loom, allow(dead_code))]
const RESERVE_MAX: usize = 256;

/// What a recording thread does when no chunk is free.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Policy {
    /// Drop at once instead of waiting.
    pub lossy: bool,
    /// The longest a thread waits for the flusher before it drops.
    #[cfg_attr(scope_loom, allow(dead_code))]
    pub max_wait: std::time::Duration,
}

/// Chunks shared by all lanes of one layer, bounded by the buffer budget.
pub(crate) struct Pool {
    // Boxed: chunks move between the pool, the writers and the lanes' queues as boxes, and
    // the flusher recognises a lane's current chunk by its address.
    free: FreeList<Box<Chunk>>,
    /// Free small chunks (a lane's first; see `chunk`).
    free_small: FreeList<Box<Chunk>>,
    /// Bytes of chunks allocated, of both sizes.
    allocated: AtomicUsize,
    max_bytes: usize,
    policy: Policy,
    /// False once the flusher has stopped (or failed): nobody will free a chunk any more.
    flusher_alive: AtomicBool,
    /// Threads waiting for a chunk right now (the flusher skips its pause while > 0).
    waiting: AtomicUsize,
    /// Times a thread had to wait.
    pub(crate) waits: AtomicU64,
    /// Total time threads spent waiting, ns.
    pub(crate) wait_ns: AtomicU64,
    /// Chunks given back so far: the flusher's progress, which waiting threads watch.
    given: AtomicU64,
    /// How many free chunks [`refill`](Self::refill) keeps ready (grows when threads run dry).
    #[cfg_attr(scope_loom, allow(dead_code))]
    reserve: AtomicUsize,
    /// A recording thread found no free chunk and allocated one itself since the last refill.
    ran_dry: AtomicBool,
    /// Refills in a row that found more than twice the reserve free.
    #[cfg_attr(scope_loom, allow(dead_code))]
    over: AtomicUsize,
    #[cfg(not(scope_loom))]
    flusher: std::sync::OnceLock<std::thread::Thread>,
}

impl Pool {
    /// A pool of at most `budget` bytes of chunks (at least one full-size chunk).
    pub(crate) fn new(budget: usize, policy: Policy) -> Pool {
        let max_bytes = budget.max(CHUNK_BYTES);
        Pool {
            free: FreeList::new(max_bytes / CHUNK_BYTES),
            free_small: FreeList::new((max_bytes / SMALL_BYTES).min(SMALL_FREE_MAX)),
            allocated: AtomicUsize::new(0),
            max_bytes,
            policy,
            flusher_alive: AtomicBool::new(true),
            waiting: AtomicUsize::new(0),
            waits: AtomicU64::new(0),
            wait_ns: AtomicU64::new(0),
            given: AtomicU64::new(0),
            reserve: AtomicUsize::new(RESERVE_MIN),
            ran_dry: AtomicBool::new(false),
            over: AtomicUsize::new(0),
            #[cfg(not(scope_loom))]
            flusher: std::sync::OnceLock::new(),
        }
    }

    /// The largest number of full-size chunks the budget holds.
    #[cfg_attr(scope_loom, allow(dead_code))]
    fn max_chunks(&self) -> usize {
        self.max_bytes / CHUNK_BYTES
    }

    /// Reserves `bytes` of the budget; false when they do not fit.
    fn reserve_bytes(&self, bytes: usize) -> bool {
        let mut n = self.allocated.load(Ordering::Relaxed);
        while n + bytes <= self.max_bytes {
            match self.allocated.compare_exchange_weak(
                n,
                n + bytes,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(now) => n = now,
            }
        }
        false
    }

    /// Flusher, after giving chunks back: tops the free list up to the reserve with new chunks
    /// (within the budget), so recording threads rarely allocate one themselves. A new chunk
    /// costs a 16 KiB allocation and four page faults when first written (~10 us in a VM, and
    /// far more when the VM's memory was never touched); on the flusher that is off the
    /// program's threads. The reserve starts at [`RESERVE_MIN`] and doubles (up to
    /// [`RESERVE_MAX`], a quarter of the budget at most) whenever a recording thread ran dry
    /// since the last refill, so an idle program keeps little.
    #[cfg(not(scope_loom))]
    pub(crate) fn refill(&self) {
        let cap = RESERVE_MAX.min(self.max_chunks() / 4).max(1);
        let mut target = self.reserve.load(Ordering::Relaxed).min(cap);
        if self.ran_dry.swap(false, Ordering::Relaxed) && target < cap {
            target = (target * 2).min(cap);
            self.reserve.store(target, Ordering::Relaxed);
        }
        self.top_up(target, self.small_reserve());
        self.trim(target);
    }

    /// After a burst: frees full-size chunks beyond twice the reserve once that many have been
    /// free for [`TRIM_AFTER`] rounds, [`TRIM_PER_ROUND`] at a time, and asks the allocator to
    /// give the freed pages back to the system, so recording memory follows what is being
    /// recorded, not the peak of the run.
    #[cfg(not(scope_loom))]
    fn trim(&self, reserve: usize) {
        let keep = 2 * reserve;
        let free = self.free.len();
        if free <= keep {
            self.over.store(0, Ordering::Relaxed);
            return;
        }
        if self.over.fetch_add(1, Ordering::Relaxed) + 1 < TRIM_AFTER {
            return;
        }
        let mut freed = 0;
        for _ in 0..(free - keep).min(TRIM_PER_ROUND) {
            let Some(c) = self.free.pop() else { break };
            self.allocated.fetch_sub(c.bytes(), Ordering::Relaxed);
            drop(c);
            freed += 1;
        }
        if freed > 0 {
            give_back_freed_memory();
        }
    }

    /// Small chunks kept ready.
    #[cfg_attr(scope_loom, allow(dead_code))]
    fn small_reserve(&self) -> usize {
        SMALL_RESERVE.min(self.max_bytes / 16 / SMALL_BYTES)
    }

    /// Allocates and pre-faults new chunks (within the budget) until `big` full-size and
    /// `small` small ones are free.
    #[cfg(not(scope_loom))]
    fn top_up(&self, big: usize, small: usize) {
        let mut made = 0;
        let lists = [
            (&self.free, big, CHUNK_LEN),
            (&self.free_small, small, SMALL_LEN),
        ];
        for (list, target, len) in lists {
            let bytes = len * std::mem::size_of::<super::record::Record>();
            while list.len() < target && self.reserve_bytes(bytes) {
                let mut c = Chunk::new(len);
                c.prefault();
                if let Err(c) = list.push(c) {
                    drop(c);
                    self.allocated.fetch_sub(bytes, Ordering::Relaxed);
                    break;
                }
                made += 1;
            }
        }
        if made > 0 {
            // New chunks are progress too: a thread that stopped waiting looks again.
            self.given.fetch_add(made, Ordering::Release);
        }
    }

    /// At `build()`, on the building thread: makes the first reserve, so the program's first
    /// records never wait for the flusher's first round nor allocate.
    #[cfg(not(scope_loom))]
    pub(crate) fn prefill(&self) {
        self.top_up(
            RESERVE_MIN.min(self.max_chunks() / 4).max(1),
            self.small_reserve(),
        );
    }

    /// The loom model keeps its state space to the handoff: no refills (they take the same
    /// queue and budget as `try_take`, which the model covers).
    #[cfg(scope_loom)]
    pub(crate) fn refill(&self) {}

    /// No reserve in the loom model either (see `refill`).
    #[cfg(scope_loom)]
    pub(crate) fn prefill(&self) {}

    /// A free chunk, or a new one while the budget allows; never waits. `small` asks for a
    /// lane's first chunk (a full-size one serves when no small one can be had).
    pub(crate) fn try_take(&self, small: bool) -> Option<Box<Chunk>> {
        if small && SMALL_LEN != CHUNK_LEN {
            if let Some(c) = self.free_small.pop() {
                return Some(c);
            }
            if self.reserve_bytes(SMALL_BYTES) {
                return Some(Chunk::new(SMALL_LEN));
            }
        }
        if let Some(c) = self.free.pop() {
            return Some(c);
        }
        // Reserve the bytes first, so concurrent threads never exceed the budget.
        if self.reserve_bytes(CHUNK_BYTES) {
            self.ran_dry.store(true, Ordering::Relaxed);
            return Some(Chunk::new(CHUNK_LEN));
        }
        None
    }

    /// A chunk for a recording thread, waiting for the flusher when the policy says so.
    /// `stalled` is the thread's memory of a wait that timed out (the flusher's progress at
    /// that moment): it does not wait again until the flusher has moved on.
    ///
    /// While the flusher has given nothing back since the thread last found the pool empty,
    /// this is one atomic load: no lock, no wait. A chunk can only come back through
    /// [`give`](Self::give), which moves `given` (the budget is used up by then, and
    /// `allocated` never shrinks), so a thread that drops records during an outage (lossy, or
    /// after a timed-out wait) pays no lock per record.
    pub(crate) fn take(&self, stalled: &mut Option<u64>, small: bool) -> Option<Box<Chunk>> {
        if stalled.is_some_and(|at| at == self.given.load(Ordering::Acquire)) {
            return None;
        }
        // Read before looking: a chunk given back after this load moves `given` past it.
        let given = self.given.load(Ordering::Acquire);
        if let Some(c) = self.try_take(small) {
            *stalled = None;
            return Some(c);
        }
        if self.policy.lossy || !self.flusher_alive() {
            *stalled = Some(given);
            return None;
        }
        if let Some(c) = self.wait_for_chunk(small) {
            *stalled = None;
            return Some(c);
        }
        // Timed out (or the flusher is gone). Note the progress seen before one last look, so
        // a chunk given back meanwhile is never missed by the check above.
        let given = self.given.load(Ordering::Acquire);
        if let Some(c) = self.try_take(small) {
            *stalled = None;
            return Some(c);
        }
        *stalled = Some(given);
        None
    }

    #[cfg(not(scope_loom))]
    #[cold]
    fn wait_for_chunk(&self, small: bool) -> Option<Box<Chunk>> {
        let t0 = std::time::Instant::now();
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let mut pause = std::time::Duration::from_micros(20);
        // The bound is on the flusher making no progress, not on this thread getting a chunk:
        // while it frees chunks (that other threads may take first), keep waiting.
        let mut progress = self.given.load(Ordering::Acquire);
        let mut since = t0;
        let got = loop {
            if let Some(f) = self.flusher.get() {
                f.unpark();
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(std::time::Duration::from_millis(1));
            if let Some(c) = self.try_take(small) {
                break Some(c);
            }
            let now = self.given.load(Ordering::Acquire);
            if now != progress {
                (progress, since) = (now, std::time::Instant::now());
            }
            if since.elapsed() >= self.policy.max_wait || !self.flusher_alive() {
                break None;
            }
        };
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        // Only recording waits (an exiting thread never waits).
        let waited = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.waits.fetch_add(1, Ordering::Relaxed);
        self.wait_ns.fetch_add(waited, Ordering::Relaxed);
        got
    }

    /// The loom model cannot sleep: a bounded number of yields stands for the bounded wait.
    #[cfg(scope_loom)]
    fn wait_for_chunk(&self, small: bool) -> Option<Box<Chunk>> {
        self.waiting.fetch_add(1, Ordering::SeqCst);
        self.waits.fetch_add(1, Ordering::Relaxed);
        let mut got = None;
        for _ in 0..2 {
            loom::thread::yield_now();
            got = self.try_take(small);
            if got.is_some() || !self.flusher_alive() {
                break;
            }
        }
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        got
    }

    /// Gives a drained chunk back (flusher).
    pub(crate) fn give(&self, c: Box<Chunk>) {
        let list = if SMALL_LEN != CHUNK_LEN && c.capacity() == SMALL_LEN {
            &self.free_small
        } else {
            &self.free
        };
        if let Err(c) = list.push(c) {
            // Small chunks beyond the kept number (the big list holds the whole budget):
            // freed, their bytes back to the budget.
            self.allocated.fetch_sub(c.bytes(), Ordering::Relaxed);
            drop(c);
        }
        self.given.fetch_add(1, Ordering::Release);
    }

    /// Whether a thread is waiting for a chunk (the flusher then drains again at once).
    pub(crate) fn has_waiters(&self) -> bool {
        self.waiting.load(Ordering::SeqCst) > 0
    }

    /// Whether the flusher still frees chunks.
    pub(crate) fn flusher_alive(&self) -> bool {
        self.flusher_alive.load(Ordering::Acquire)
    }

    /// Called when the flusher stops or fails: nobody waits for it any more.
    pub(crate) fn flusher_stopped(&self) {
        self.flusher_alive.store(false, Ordering::Release);
    }

    /// Tells the pool which thread to wake when a recording thread waits.
    #[cfg(not(scope_loom))]
    pub(crate) fn set_flusher(&self, t: std::thread::Thread) {
        let _ = self.flusher.set(t);
    }

    /// The loom build has no flusher thread to wake.
    #[cfg(scope_loom)]
    pub(crate) fn set_flusher(&self, _t: std::thread::Thread) {}

    /// Bytes of chunks allocated now (bounded by the budget).
    #[cfg_attr(not(any(test, scope_loom)), allow(dead_code))]
    pub(crate) fn allocated(&self) -> usize {
        self.allocated.load(Ordering::Relaxed)
    }

    /// The most bytes of chunks this pool may allocate.
    #[cfg_attr(not(scope_loom), allow(dead_code))]
    pub(crate) fn max_bytes(&self) -> usize {
        self.max_bytes
    }
}

#[cfg(all(test, not(scope_loom)))]
mod tests {
    use super::*;

    /// A pool whose budget holds `max_chunks` full-size chunks.
    fn pool(max_chunks: usize, lossy: bool) -> Pool {
        Pool::new(
            max_chunks * CHUNK_BYTES,
            Policy {
                lossy,
                max_wait: std::time::Duration::from_millis(1),
            },
        )
    }

    #[test]
    fn refill_keeps_a_reserve_within_the_budget() {
        let p = pool(4, false);
        p.refill();
        // A quarter of a 4-chunk budget: one chunk in reserve, and 4 small ones (a
        // sixteenth of the budget).
        assert_eq!((p.free.len(), p.free_small.len()), (1, 4));
        assert_eq!(p.allocated(), CHUNK_BYTES + 4 * SMALL_BYTES);
        let big = pool(1000, false);
        big.refill();
        let smalls = SMALL_RESERVE * SMALL_BYTES;
        assert_eq!(big.allocated(), RESERVE_MIN * CHUNK_BYTES + smalls);
        // Take the reserve and one more: the last one a recording thread allocated itself,
        // so the next refill doubles the reserve.
        let taken: Vec<_> = (0..=RESERVE_MIN)
            .map(|_| big.try_take(false).unwrap())
            .collect();
        assert_eq!(big.allocated(), (RESERVE_MIN + 1) * CHUNK_BYTES + smalls);
        big.refill();
        assert_eq!(big.free.len(), 2 * RESERVE_MIN);
        assert_eq!(
            big.allocated(),
            (3 * RESERVE_MIN + 1) * CHUNK_BYTES + smalls
        );
        drop(taken);
    }

    #[test]
    fn a_bursts_surplus_is_freed_after_a_while() {
        let p = pool(1000, false);
        p.refill();
        let taken: Vec<_> = (0..200).map(|_| p.try_take(false).unwrap()).collect();
        for c in taken {
            p.give(c);
        }
        let peak = p.allocated();
        for _ in 1..TRIM_AFTER {
            p.refill();
        }
        assert_eq!(p.allocated(), peak, "a short pause keeps the chunks");
        for _ in 0..10 {
            p.refill();
        }
        let reserve = p.reserve.load(Ordering::Relaxed);
        assert_eq!(p.free.len(), 2 * reserve, "the surplus went back");
        assert!(p.allocated() < peak);
    }

    #[test]
    fn a_first_chunk_is_small_and_small_ones_come_back_to_their_list() {
        let p = pool(2, false);
        let mut stalled = None;
        let first = p.take(&mut stalled, true).unwrap();
        assert_eq!(first.capacity(), SMALL_LEN);
        assert_eq!(p.allocated(), SMALL_BYTES);
        p.give(first);
        assert_eq!(p.free_small.len(), 1);
        let again = p.take(&mut stalled, true).unwrap();
        assert_eq!(again.capacity(), SMALL_LEN);
        assert_eq!(p.allocated(), SMALL_BYTES, "reused, not allocated again");
        let next = p.take(&mut stalled, false).unwrap();
        assert_eq!(next.capacity(), CHUNK_LEN);
        drop((again, next));
    }

    #[test]
    fn a_stalled_thread_sees_the_next_chunk_given_back() {
        let p = pool(1, true);
        let mut stalled = None;
        let c = p.take(&mut stalled, false).expect("budget allows one");
        assert!(p.take(&mut stalled, false).is_none());
        assert_eq!(stalled, Some(0), "lossy: remembers the progress it saw");
        assert!(
            p.take(&mut stalled, false).is_none(),
            "nothing given back yet"
        );
        p.give(c);
        assert!(
            p.take(&mut stalled, false).is_some(),
            "a chunk given back is found"
        );
        assert_eq!(stalled, None);
    }

    #[test]
    fn a_timed_out_wait_remembers_progress_and_recovers() {
        let p = pool(1, false);
        let mut stalled = None;
        let c = p.take(&mut stalled, false).expect("budget allows one");
        // No flusher frees anything: the wait times out (1 ms) and the thread drops.
        assert!(p.take(&mut stalled, false).is_none());
        assert_eq!(p.waits.load(Ordering::Relaxed), 1);
        // Stalled: no second wait while the flusher has made no progress.
        assert!(p.take(&mut stalled, false).is_none());
        assert_eq!(p.waits.load(Ordering::Relaxed), 1);
        p.give(c);
        assert!(p.take(&mut stalled, false).is_some());
    }
}

/// Asks the allocator to return free memory to the system (glibc keeps freed blocks of its
/// heap otherwise; chunks are 16 KiB, below its `mmap` threshold). Only after a trim: it walks
/// the heap.
#[cfg(all(not(scope_loom), target_env = "gnu"))]
fn give_back_freed_memory() {
    // SAFETY: `malloc_trim` has no preconditions; it only releases free heap pages.
    unsafe { libc::malloc_trim(0) };
}

#[cfg(all(not(scope_loom), not(target_env = "gnu")))]
fn give_back_freed_memory() {}

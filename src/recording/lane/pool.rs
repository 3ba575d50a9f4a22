//! The layer's one buffer budget: every chunk of every lane comes from this pool, and the
//! flusher gives drained chunks back to it.
//!
//! The pool allocates at most `max_chunks` chunks in all (the builder's `buffer_budget`), so
//! recording memory is bounded whatever the number of threads, and chunks of exited threads
//! are reused by new ones. When no chunk is free, a recording thread either waits for the
//! flusher (backpressure, the default: counts stay exact) or, with `lossy`, gives up at once.
//! The wait is bounded: when the flusher frees nothing for `max_wait`, or is gone, the thread
//! stops waiting and drops (counted), and does not wait again until the flusher has made
//! progress, so a stalled flusher never parks a thread (or a Tokio worker) more than once per
//! stall.

use super::chunk::Chunk;
use super::sync::{lock, AtomicBool, AtomicU64, AtomicUsize, Mutex, Ordering};

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
    #[allow(clippy::vec_box)]
    free: Mutex<Vec<Box<Chunk>>>,
    allocated: AtomicUsize,
    max_chunks: usize,
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
    #[cfg(not(scope_loom))]
    flusher: std::sync::OnceLock<std::thread::Thread>,
}

impl Pool {
    /// A pool of at most `max_chunks` chunks (at least one).
    pub(crate) fn new(max_chunks: usize, policy: Policy) -> Pool {
        Pool {
            free: Mutex::new(Vec::new()),
            allocated: AtomicUsize::new(0),
            max_chunks: max_chunks.max(1),
            policy,
            flusher_alive: AtomicBool::new(true),
            waiting: AtomicUsize::new(0),
            waits: AtomicU64::new(0),
            wait_ns: AtomicU64::new(0),
            given: AtomicU64::new(0),
            #[cfg(not(scope_loom))]
            flusher: std::sync::OnceLock::new(),
        }
    }

    /// A free chunk, or a new one while the budget allows; never waits.
    pub(crate) fn try_take(&self) -> Option<Box<Chunk>> {
        if let Some(c) = lock(&self.free).pop() {
            return Some(c);
        }
        // Reserve a slot in the budget first, so concurrent threads never exceed it.
        let mut n = self.allocated.load(Ordering::Relaxed);
        while n < self.max_chunks {
            match self.allocated.compare_exchange_weak(
                n,
                n + 1,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some(Chunk::new()),
                Err(now) => n = now,
            }
        }
        None
    }

    /// A chunk for a recording thread, waiting for the flusher when the policy says so.
    /// `stalled` is the thread's memory of a wait that timed out (the flusher's progress at
    /// that moment): it does not wait again until the flusher has moved on.
    pub(crate) fn take(&self, stalled: &mut Option<u64>) -> Option<Box<Chunk>> {
        if let Some(c) = self.try_take() {
            *stalled = None;
            return Some(c);
        }
        if self.policy.lossy || !self.flusher_alive() {
            return None;
        }
        if stalled.is_some_and(|at| at == self.given.load(Ordering::Acquire)) {
            return None;
        }
        let got = self.wait_for_chunk(true);
        *stalled = match got {
            Some(_) => None,
            None => Some(self.given.load(Ordering::Acquire)),
        };
        got
    }

    /// A chunk for an exiting thread's last lost markers: waits (bounded) even in lossy mode,
    /// since a thread's exit is no latency-critical path and the markers keep counts exact.
    pub(crate) fn take_at_exit(&self) -> Option<Box<Chunk>> {
        self.try_take().or_else(|| {
            if self.flusher_alive() {
                self.wait_for_chunk(false)
            } else {
                None
            }
        })
    }

    #[cfg(not(scope_loom))]
    #[cold]
    fn wait_for_chunk(&self, backpressure: bool) -> Option<Box<Chunk>> {
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
            if let Some(c) = self.try_take() {
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
        if backpressure {
            // Only waits of recording (not of an exiting thread's last markers) are reported.
            let waited = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
            self.waits.fetch_add(1, Ordering::Relaxed);
            self.wait_ns.fetch_add(waited, Ordering::Relaxed);
        }
        got
    }

    /// The loom model cannot sleep: a bounded number of yields stands for the bounded wait.
    #[cfg(scope_loom)]
    fn wait_for_chunk(&self, _backpressure: bool) -> Option<Box<Chunk>> {
        self.waiting.fetch_add(1, Ordering::SeqCst);
        self.waits.fetch_add(1, Ordering::Relaxed);
        let mut got = None;
        for _ in 0..2 {
            loom::thread::yield_now();
            got = self.try_take();
            if got.is_some() || !self.flusher_alive() {
                break;
            }
        }
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        got
    }

    /// Gives a drained chunk back (flusher).
    pub(crate) fn give(&self, c: Box<Chunk>) {
        lock(&self.free).push(c);
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

    /// Chunks allocated so far (bounded by the budget).
    #[cfg_attr(not(scope_loom), allow(dead_code))]
    pub(crate) fn allocated(&self) -> usize {
        self.allocated.load(Ordering::Relaxed)
    }

    /// The most chunks this pool may allocate.
    #[cfg_attr(not(scope_loom), allow(dead_code))]
    pub(crate) fn max_chunks(&self) -> usize {
        self.max_chunks
    }
}

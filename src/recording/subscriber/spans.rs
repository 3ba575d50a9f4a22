//! What `ScopeSubscriber` keeps about spans instead of a registry: ids from a counter, the
//! callsite of an id, the extra handles of cloned spans, and each thread's entered spans.
//!
//! - **Ids** carry their callsite: `(callsite index + 1) << 44 | sequence`. The sequence comes
//!   from one counter per subscriber, taken by each thread in blocks of 4 096, so creating a
//!   span touches no shared cache line; an id is unique for 2^44 spans of one subscriber
//!   (17 600 billion: 20 days at 10 million spans a second), so ids are never reused in
//!   practice and the assembler's reuse logic is never exercised on this path (it still
//!   holds if they were). Any id gives back its span's `&'static Metadata` (for
//!   `current_span` and the sinks) with two loads, without a table of live spans.
//! - **Handles**: a span has one handle when created; `clone_span` adds one, `try_close`
//!   drops one, and the span closes when the last goes. Only cloned spans have an entry
//!   (sharded maps); while no clone is outstanding, `try_close` costs one relaxed load.
//! - **The current span** of a thread is the top of its stack of entered spans.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use tracing_core::Metadata;

use crate::fasthash::FastMap;

/// Bits of an id's sequence number.
const SEQ_BITS: u32 = 44;

/// The callsite index an id of `ScopeSubscriber` carries (`None`: no callsite, e.g. the id of
/// a span of an unregistered callsite). The flusher reads it to create a span's instance at
/// its first record: the subscriber writes no creation record (see `crate::flusher::assemble`).
#[inline]
pub(crate) fn index_of_id(id: u64) -> Option<u32> {
    (id >> SEQ_BITS).checked_sub(1).map(|k| k as u32)
}
const SEQ_MASK: u64 = (1 << SEQ_BITS) - 1;
/// A callsite's tag in the index: its spans need a creation record (Tokio's spawn spans,
/// whose `NEW` carries the task's spawn; see `crate::flusher::assemble::implicit`).
const EXPLICIT: u32 = 1 << 31;
/// Sequence numbers a thread takes at once.
const BLOCK: u64 = 4096;
/// Callsites in one chunk of the table, and chunks.
const CHUNK: usize = 1024;
const CHUNKS: usize = 1024;

/// The callsites of one subscriber, by dense index (at most [`CHUNK`] x [`CHUNKS`]); shared
/// with its flusher through `Shared::span_sites`.
pub(crate) struct Callsites {
    chunks: [OnceLock<Box<[AtomicPtr<Metadata<'static>>]>>; CHUNKS],
    index: Mutex<HashMap<usize, u32>>,
    len: AtomicUsize,
}

impl Callsites {
    pub(crate) fn new() -> Callsites {
        Callsites {
            chunks: std::array::from_fn(|_| OnceLock::new()),
            index: Mutex::new(HashMap::new()),
            len: AtomicUsize::new(0),
        }
    }

    /// The index of `meta`, given at its first registration; `None` beyond the table's size.
    pub(crate) fn register(&self, meta: &'static Metadata<'static>) -> Option<u32> {
        let key = meta as *const Metadata<'static> as usize;
        let mut index = self.index.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&k) = index.get(&key) {
            return Some(k & !EXPLICIT);
        }
        let k = index.len();
        if k >= CHUNK * CHUNKS {
            return None;
        }
        let chunk = self.chunks[k / CHUNK].get_or_init(|| {
            (0..CHUNK)
                .map(|_| AtomicPtr::new(std::ptr::null_mut()))
                .collect()
        });
        chunk[k % CHUNK].store(
            meta as *const Metadata<'static> as *mut Metadata<'static>,
            Ordering::Release,
        );
        let tag = if crate::recording::tokio::is_spawn_callsite(meta) {
            EXPLICIT
        } else {
            0
        };
        index.insert(key, k as u32 | tag);
        self.len.store(k + 1, Ordering::Release);
        Some(k as u32)
    }

    /// The index of a registered callsite, with its [`EXPLICIT`] tag (a lookup; see
    /// [`Ids::index_of`] for the cached one).
    fn lookup(&self, meta: &'static Metadata<'static>) -> Option<u32> {
        let key = meta as *const Metadata<'static> as usize;
        let index = self.index.lock().unwrap_or_else(|e| e.into_inner());
        index.get(&key).copied()
    }

    /// The callsite of index `k`.
    pub(crate) fn get(&self, k: u32) -> Option<&'static Metadata<'static>> {
        let k = k as usize;
        let p = self.chunks.get(k / CHUNK)?.get()?[k % CHUNK].load(Ordering::Acquire);
        // SAFETY: every non-null pointer in the table was stored from a `&'static Metadata`
        // (in `register`), so it is valid for ever.
        (!p.is_null()).then(|| unsafe { &*p })
    }
}

thread_local! {
    /// (subscriber uid, next sequence number, end of the block).
    static BLOCK_OF: Cell<(u64, u64, u64)> = const { Cell::new((0, 0, 0)) };
    /// Recently seen callsites and their indices, by address (a direct-mapped cache):
    /// (subscriber uid, callsite address, index).
    static INDEX_CACHE: RefCell<[(u64, usize, u32); 64]> =
        const { RefCell::new([(0, 0, 0); 64]) };
}

/// Span ids of one subscriber.
pub(super) struct Ids {
    uid: u64,
    next: AtomicU64,
    pub(super) callsites: Arc<Callsites>,
}

impl Ids {
    pub(super) fn new(uid: u64, callsites: Arc<Callsites>) -> Ids {
        Ids {
            uid,
            next: AtomicU64::new(1),
            callsites,
        }
    }

    /// A new id for a span of callsite `meta`; `None` when the callsite is not registered
    /// (more than a million callsites).
    #[inline]
    /// With it, whether its spans need a creation record (see [`EXPLICIT`]).
    pub(super) fn next(&self, meta: &'static Metadata<'static>) -> Option<(u64, bool)> {
        let entry = self.index_of(meta)?;
        let index = entry & !EXPLICIT;
        let seq = BLOCK_OF.with(|b| {
            let (uid, next, end) = b.get();
            // A new span clears the flag of the previous one's first enter (see `take_fresh`).
            let end = end & !FRESH_TAKEN;
            let (next, end) = if uid == self.uid && next < end {
                (next, end)
            } else {
                let start = self.next.fetch_add(BLOCK, Ordering::Relaxed);
                (start, start + BLOCK)
            };
            b.set((self.uid, next + 1, end));
            next
        });
        let id = (u64::from(index) + 1) << SEQ_BITS | (seq & SEQ_MASK);
        Some((id, entry & EXPLICIT != 0))
    }

    /// The callsite index of `meta` with its [`EXPLICIT`] tag, through this thread's cache.
    #[inline]
    fn index_of(&self, meta: &'static Metadata<'static>) -> Option<u32> {
        let key = meta as *const Metadata<'static> as usize;
        let slot = (key >> 4) % 64;
        let cached = INDEX_CACHE.with(|c| {
            let e = c.borrow()[slot];
            (e.0 == self.uid && e.1 == key).then_some(e.2)
        });
        if cached.is_some() {
            return cached;
        }
        let k = self.callsites.lookup(meta)?;
        INDEX_CACHE.with(|c| c.borrow_mut()[slot] = (self.uid, key, k));
        Some(k)
    }

    /// The callsite of a span id.
    pub(super) fn meta(&self, id: u64) -> Option<&'static Metadata<'static>> {
        let index = (id >> SEQ_BITS).checked_sub(1)?;
        self.callsites.get(index as u32)
    }
}

/// The extra handles of cloned spans.
pub(super) struct Handles {
    shards: [Mutex<FastMap<u64, u32>>; 16],
    /// Spans with extra handles now: while 0, no span was cloned and `release` is one load.
    outstanding: AtomicUsize,
}

impl Handles {
    pub(super) fn new() -> Handles {
        Handles {
            shards: std::array::from_fn(|_| Mutex::new(FastMap::default())),
            outstanding: AtomicUsize::new(0),
        }
    }

    fn shard(&self, id: u64) -> std::sync::MutexGuard<'_, FastMap<u64, u32>> {
        let k = (id.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 60) as usize;
        self.shards[k].lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `clone_span`: one more handle of span `id`.
    pub(super) fn add(&self, id: u64) {
        let mut shard = self.shard(id);
        let extra = shard.entry(id).or_insert(0);
        *extra += 1;
        if *extra == 1 {
            self.outstanding.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// `try_close`: one handle of span `id` dropped; true when it was the last.
    #[inline]
    pub(super) fn release(&self, id: u64) -> bool {
        // An id cloned on another thread became visible here through the handle that brought
        // it (a `Span` moved between threads synchronizes), so a relaxed load sees its entry.
        if self.outstanding.load(Ordering::Relaxed) == 0 {
            return true;
        }
        let mut shard = self.shard(id);
        match shard.get_mut(&id) {
            None => true,
            Some(extra) => {
                *extra -= 1;
                if *extra == 0 {
                    shard.remove(&id);
                    self.outstanding.fetch_sub(1, Ordering::Relaxed);
                }
                false
            }
        }
    }
}

/// Set in the end of a thread's block of ids once the span it created last has had its first
/// enter (block ends stay far below it).
const FRESH_TAKEN: u64 = 1 << 63;

/// Whether this enter of span `id` of subscriber `uid` is the first enter of the span this
/// thread created last: then it is, most likely, the span's first record anywhere (a hint for
/// the flusher's fast path, which checks it has no instance yet). Only the first enter is:
/// a span created once and entered in a loop has re-polls, which take the flusher's other
/// fast path. One read of the thread's block of ids, which creating the span has just
/// written, and one write when it is fresh.
#[inline]
pub(super) fn take_fresh(uid: u64, id: u64) -> bool {
    BLOCK_OF.with(|b| {
        let (u, next, end) = b.get();
        let fresh =
            u == uid && end & FRESH_TAKEN == 0 && next.wrapping_sub(1) & SEQ_MASK == id & SEQ_MASK;
        if fresh {
            b.set((u, next, end | FRESH_TAKEN));
        }
        fresh
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Cs;
    impl tracing_core::Callsite for Cs {
        fn set_interest(&self, _: tracing_core::Interest) {}
        fn metadata(&self) -> &Metadata<'_> {
            unreachable!()
        }
    }
    static CS: Cs = Cs;

    fn meta(name: &'static str) -> &'static Metadata<'static> {
        Box::leak(Box::new(Metadata::new(
            name,
            "t",
            tracing_core::Level::INFO,
            None,
            None,
            None,
            tracing_core::field::FieldSet::new(&[], tracing_core::identify_callsite!(&CS)),
            tracing_core::Kind::SPAN,
        )))
    }

    #[test]
    fn ids_are_unique_and_give_back_their_callsite() {
        let ids = Ids::new(7, Arc::new(Callsites::new()));
        let (a, b) = (meta("a"), meta("b"));
        assert_eq!(ids.callsites.register(a), Some(0));
        assert_eq!(ids.callsites.register(b), Some(1));
        assert_eq!(ids.callsites.register(a), Some(0), "once per callsite");
        let mut seen = std::collections::HashSet::new();
        for _ in 0..10_000 {
            let (id, explicit) = ids.next(a).unwrap();
            assert!(!explicit, "a plain span needs no creation record");
            assert_eq!(index_of_id(id), Some(0));
            assert!(seen.insert(id));
            assert!(std::ptr::eq(ids.meta(id).unwrap(), a));
        }
        let on_other = std::thread::scope(|s| s.spawn(|| ids.next(b).unwrap().0).join().unwrap());
        assert!(seen.insert(on_other), "another thread's block");
        assert!(std::ptr::eq(ids.meta(on_other).unwrap(), b));
        assert!(ids.next(meta("never registered")).is_none());
        assert!(ids.meta(1).is_none());
    }

    #[test]
    fn a_span_closes_with_its_last_handle() {
        let h = Handles::new();
        assert!(h.release(5), "never cloned: the only handle");
        h.add(6);
        h.add(6);
        assert!(!h.release(6));
        assert!(!h.release(6));
        assert!(h.release(6), "the last of three");
        assert_eq!(h.outstanding.load(Ordering::Relaxed), 0);
    }
}

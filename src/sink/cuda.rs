//! The CUDA sink: device time per call, from a pair of CUDA events (the counterpart of the
//! Python package's `use_gpu_timing`, §4.2 of the schema: `events/gpu_durations`).
//!
//! Per call (span instance): an event is recorded on the configured stream at the first enter
//! and another at every exit (the last one wins, so an `#[instrument]`ed future's device time
//! runs from its first poll to its last). At close the call's event pair travels as a payload
//! through the lane to the flusher, where [`Sink::resolve`](super::Sink::resolve) waits for the
//! end event (`cuEventSynchronize`, off the hot path), reads `cuEventElapsedTime` and returns
//! the pair to the pool. Calls without a measurement (an event call failed, or the span never
//! exited) resolve to `None`, written as -1.
//!
//! - **Loading.** `libcuda` is loaded at run time (cudarc's `dynamic-loading`). cudarc panics
//!   when a driver function is called without the library, so [`CudaSink::new`] first checks
//!   that the library can be loaded (cudarc's `is_culib_present`, which tries the same names)
//!   and returns [`Error::LibraryMissing`] otherwise; a library without a usable device
//!   (`cuInit` or `cuDeviceGetCount` failing, or no device) is an [`Error::Sink`]. cudarc
//!   resolves each driver symbol lazily, at its first call, so only the few functions used
//!   here must exist.
//! - **Context.** Events belong to a context: the one current on the thread that builds the
//!   layer, or else the primary context of device 0 (retained for the sink's lifetime). When a
//!   driver call fails on a thread with no current context (a Tokio worker, the flusher), the
//!   sink makes its context current there and retries once; it never replaces a context the
//!   program made current.
//! - **Pool.** Event pairs live in a pool of lazily allocated segments and are reused through a
//!   lock-free free list, so steady state creates no events. A span's pair index lives in a
//!   sharded map keyed by span id (enter and close may run on different threads). A pair whose
//!   payload never reaches the flusher (records dropped under overload) is not reused.
//! - **Sync on exit.** With `cuda_sync_on_exit` the stream is synchronized at every exit,
//!   right after the end event is recorded. Both happen in `before_exit`, which the layer calls
//!   before it reads the CPU clock, so the call's CPU end time includes the device work.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::OnceLock;

use cudarc::driver::result::{self, DriverError};
use cudarc::driver::sys;
use dashmap::DashMap;
use tracing_core::Metadata;

use crate::config::Config;
use crate::fasthash::IdHasher;
use crate::Error;

type IdBuild = std::hash::BuildHasherDefault<IdHasher>;

/// Tag in bits 32..48 of our payloads (the pair index is in the low 32 bits), so payloads of
/// other sinks in the same call are never mistaken for ours.
const TAG: u64 = 0xC0DA << 32;
const TAG_MASK: u64 = 0xFFFF << 32;
/// Map value of a span whose start could not be recorded.
const UNMEASURED: u32 = u32::MAX;
/// Pairs per pool segment, and the number of segments (at most 2^20 calls in flight).
const SEG_BITS: u32 = 10;
const SEG_LEN: usize = 1 << SEG_BITS;
const SEGS: usize = 1024;
const CAPACITY: u32 = (SEG_LEN * SEGS) as u32;

/// One reusable event pair.
struct Slot {
    /// `(start, end)` `CUevent` handles (as integers), created at the slot's first use.
    events: OnceLock<(usize, usize)>,
    /// Whether the end event has been recorded for the current call.
    ended: AtomicBool,
    /// While on the free list: the next free slot's index + 1 (0 = none).
    next_free: AtomicU32,
}

/// The event-pair pool: segments allocated on demand, a Treiber stack of free slots.
struct Pool {
    segs: Box<[OnceLock<Box<[Slot]>>]>,
    /// Slots handed out so far; fresh slots come from here when the free list is empty.
    fresh: AtomicU32,
    /// Free-list head: low 32 bits = index + 1 (0 = empty), high 32 bits = ABA counter.
    head: AtomicU64,
}

impl Pool {
    fn new() -> Pool {
        Pool {
            segs: (0..SEGS).map(|_| OnceLock::new()).collect(),
            fresh: AtomicU32::new(0),
            head: AtomicU64::new(0),
        }
    }

    fn slot(&self, idx: u32) -> &Slot {
        let seg = self.segs[(idx >> SEG_BITS) as usize].get_or_init(|| {
            (0..SEG_LEN)
                .map(|_| Slot {
                    events: OnceLock::new(),
                    ended: AtomicBool::new(false),
                    next_free: AtomicU32::new(0),
                })
                .collect()
        });
        &seg[idx as usize & (SEG_LEN - 1)]
    }

    /// A free slot index (reused if possible); `None` when the pool is exhausted.
    fn acquire(&self) -> Option<u32> {
        let mut head = self.head.load(Ordering::Acquire);
        loop {
            let top = head as u32;
            if top == 0 {
                break;
            }
            let next = self.slot(top - 1).next_free.load(Ordering::Relaxed);
            let new = ((head >> 32).wrapping_add(1) << 32) | u64::from(next);
            match self
                .head
                .compare_exchange_weak(head, new, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Some(top - 1),
                Err(h) => head = h,
            }
        }
        self.fresh
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < CAPACITY).then_some(n + 1)
            })
            .ok()
    }

    /// Returns a slot to the free list.
    fn release(&self, idx: u32) {
        let slot = self.slot(idx);
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            slot.next_free.store(head as u32, Ordering::Relaxed);
            let new = ((head >> 32).wrapping_add(1) << 32) | u64::from(idx + 1);
            match self
                .head
                .compare_exchange_weak(head, new, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(h) => head = h,
            }
        }
    }

    /// Slots ever handed out.
    fn created(&self) -> u32 {
        self.fresh.load(Ordering::Relaxed)
    }
}

/// Records a CUDA event pair per call on one stream.
pub(crate) struct CudaSink {
    /// `CUcontext` the events belong to.
    ctx: usize,
    /// The device whose primary context we retained (released on drop), if we did.
    retained: Option<sys::CUdevice>,
    /// `CUstream` to record on (0 = the default stream).
    stream: usize,
    sync_on_exit: bool,
    pool: Pool,
    /// Span id -> pair index of its current call (or [`UNMEASURED`]).
    open: DashMap<u64, u32, IdBuild>,
    failures: AtomicU64,
    first_failure: OnceLock<String>,
}

/// `CUDA_ERROR_...` name of a driver error, without calling back into the driver.
fn err_name(e: DriverError) -> String {
    format!("{:?}", e.0)
}

fn sink_error(what: &str, e: DriverError) -> Error {
    Error::Sink {
        sink: "cuda",
        message: format!("{what} failed: {}", err_name(e)),
    }
}

impl CudaSink {
    /// Loads the driver, picks the context and checks, with one timed event pair, that events
    /// can be recorded on the configured stream.
    pub(crate) fn new(config: &Config) -> Result<Self, Error> {
        // SAFETY: `is_culib_present` only tries to dlopen (and closes again) the library names
        // cudarc would load; it calls no driver function.
        if !unsafe { sys::is_culib_present() } {
            let names = cudarc::get_lib_name_candidates("cuda");
            return Err(Error::LibraryMissing {
                library: "libcuda".into(),
                reason: format!(
                    "no CUDA driver library found (tried {}); install the NVIDIA driver or add \
                     its directory to LD_LIBRARY_PATH, or build without cuda_timing",
                    names.join(", ")
                ),
            });
        }
        result::init().map_err(|e| sink_error("cuInit", e))?;
        let devices = result::device::get_count().map_err(|e| sink_error("cuDeviceGetCount", e))?;
        if devices < 1 {
            return Err(Error::Sink {
                sink: "cuda",
                message: "the CUDA driver reports no device".into(),
            });
        }
        let (ctx, retained) = match result::ctx::get_current() {
            Ok(Some(ctx)) => (ctx as usize, None),
            _ => {
                let dev = result::device::get(0).map_err(|e| sink_error("cuDeviceGet", e))?;
                // SAFETY: `dev` was returned by cuDeviceGet; the reference is released in Drop.
                let ctx = unsafe { result::primary_ctx::retain(dev) }
                    .map_err(|e| sink_error("cuDevicePrimaryCtxRetain", e))?;
                (ctx as usize, Some(dev))
            }
        };
        let sink = CudaSink {
            ctx,
            retained,
            stream: config.cuda_stream,
            sync_on_exit: config.cuda_sync_on_exit,
            pool: Pool::new(),
            open: DashMap::with_hasher(IdBuild::default()),
            failures: AtomicU64::new(0),
            first_failure: OnceLock::new(),
        };
        sink.probe()?;
        Ok(sink)
    }

    /// Times one empty pair on the stream, so a bad stream handle fails `build()`.
    fn probe(&self) -> Result<(), Error> {
        let idx = self.pool.acquire().ok_or_else(|| Error::Sink {
            sink: "cuda",
            message: "event pool exhausted".into(),
        })?;
        let r = self.pair(idx).and_then(|(start, end)| {
            self.record(start)?;
            self.record(end)?;
            self.elapsed_ns(start, end)
        });
        self.pool.release(idx);
        r.map(drop).map_err(|(what, e)| sink_error(what, e))
    }

    /// Runs a driver call; if it fails on a thread without a current context, makes ours
    /// current and retries once.
    fn call<T>(&self, op: impl Fn() -> Result<T, DriverError>) -> Result<T, DriverError> {
        match op() {
            Err(e) => match result::ctx::get_current() {
                Ok(None) => {
                    // SAFETY: `ctx` is a live context: retained by us, or current at build().
                    let made_current =
                        unsafe { result::ctx::set_current(self.ctx as sys::CUcontext) };
                    if made_current.is_ok() {
                        op()
                    } else {
                        Err(e)
                    }
                }
                _ => Err(e),
            },
            ok => ok,
        }
    }

    /// The events of slot `idx`, created on its first use.
    fn pair(&self, idx: u32) -> Result<(usize, usize), (&'static str, DriverError)> {
        let slot = self.pool.slot(idx);
        if let Some(&pair) = slot.events.get() {
            return Ok(pair);
        }
        let create = || {
            self.call(|| result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT))
                .map(|e| e as usize)
                .map_err(|e| ("cuEventCreate", e))
        };
        let start = create()?;
        let end = match create() {
            Ok(end) => end,
            Err(e) => {
                // SAFETY: `start` was just created and is used nowhere else.
                let _ = unsafe { result::event::destroy(start as sys::CUevent) };
                return Err(e);
            }
        };
        // Only the thread holding `idx` initializes its slot, so this cannot race.
        let _ = slot.events.set((start, end));
        Ok((start, end))
    }

    fn record(&self, event: usize) -> Result<(), (&'static str, DriverError)> {
        // SAFETY: `event` is a live event of our pool; the stream is the caller's handle
        // (0 = default stream), checked by the probe in `new`.
        self.call(|| unsafe {
            result::event::record(event as sys::CUevent, self.stream as sys::CUstream)
        })
        .map_err(|e| ("cuEventRecord", e))
    }

    fn elapsed_ns(&self, start: usize, end: usize) -> Result<i64, (&'static str, DriverError)> {
        // SAFETY: both are live events of our pool, recorded in order on one stream.
        self.call(|| unsafe { result::event::synchronize(end as sys::CUevent) })
            .map_err(|e| ("cuEventSynchronize", e))?;
        // SAFETY: as above; the end event has completed, so the start event has too.
        let ms = self
            .call(|| unsafe { result::event::elapsed(start as sys::CUevent, end as sys::CUevent) })
            .map_err(|e| ("cuEventElapsedTime", e))?;
        Ok((f64::from(ms) * 1e6).round().max(0.0) as i64)
    }

    fn fail(&self, (what, e): (&'static str, DriverError)) {
        self.failures.fetch_add(1, Ordering::Relaxed);
        self.first_failure
            .get_or_init(|| format!("{what}: {}", err_name(e)));
    }

    /// Starts a measurement: a pair with its start event recorded.
    fn start_call(&self) -> u32 {
        let Some(idx) = self.pool.acquire() else {
            self.failures.fetch_add(1, Ordering::Relaxed);
            self.first_failure
                .get_or_init(|| format!("more than {CAPACITY} calls in flight"));
            return UNMEASURED;
        };
        let started = self.pair(idx).and_then(|(start, _)| self.record(start));
        match started {
            Ok(()) => {
                self.pool.slot(idx).ended.store(false, Ordering::Relaxed);
                idx
            }
            Err(e) => {
                self.fail(e);
                self.pool.release(idx);
                UNMEASURED
            }
        }
    }
}

impl super::Sink for CudaSink {
    fn enter(&self, id: u64, _meta: &'static Metadata<'static>) {
        if self.open.contains_key(&id) {
            return; // a later poll of a call already measuring
        }
        let idx = self.start_call();
        match self.open.entry(id) {
            dashmap::Entry::Vacant(v) => {
                v.insert(idx);
            }
            // Another thread entered the same new span first; its start counts.
            dashmap::Entry::Occupied(_) if idx != UNMEASURED => self.pool.release(idx),
            dashmap::Entry::Occupied(_) => {}
        }
    }

    fn exit(&self, _id: u64, _meta: &'static Metadata<'static>, _emit: &mut dyn FnMut(u64)) {}

    fn before_exit(&self, id: u64) {
        let Some(idx) = self.open.get(&id).map(|e| *e) else {
            return;
        };
        if idx == UNMEASURED {
            return;
        }
        let slot = self.pool.slot(idx);
        if let Some(&(_, end)) = slot.events.get() {
            match self.record(end) {
                Ok(()) => slot.ended.store(true, Ordering::Release),
                Err(e) => self.fail(e),
            }
        }
        if self.sync_on_exit {
            // SAFETY: the stream handle is the caller's, checked by the probe in `new`.
            let r =
                self.call(|| unsafe { result::stream::synchronize(self.stream as sys::CUstream) });
            if let Err(e) = r {
                self.fail(("cuStreamSynchronize", e));
            }
        }
    }

    fn close(&self, id: u64, emit: &mut dyn FnMut(u64)) {
        let Some((_, idx)) = self.open.remove(&id) else {
            return;
        };
        if idx == UNMEASURED {
            return;
        }
        if self.pool.slot(idx).ended.load(Ordering::Acquire) {
            emit(TAG | u64::from(idx));
        } else {
            self.pool.release(idx); // never exited: nothing to time
        }
    }

    fn resolve(&self, payloads: &[u64]) -> Option<i64> {
        let mut ns = None;
        for &p in payloads {
            let idx = p as u32;
            if p & TAG_MASK != TAG || idx >= self.pool.created() {
                continue;
            }
            if ns.is_none() {
                if let Some(&(start, end)) = self.pool.slot(idx).events.get() {
                    match self.elapsed_ns(start, end) {
                        Ok(v) => ns = Some(v),
                        Err(e) => self.fail(e),
                    }
                }
            }
            self.pool.release(idx);
        }
        ns
    }

    fn warnings(&self) -> Vec<String> {
        let n = self.failures.load(Ordering::Relaxed);
        if n == 0 {
            return Vec::new();
        }
        vec![format!(
            "cuda: {n} CUDA driver calls failed, so some calls have no device time (-1); first: {}",
            self.first_failure.get().map_or("?", String::as_str)
        )]
    }
}

impl Drop for CudaSink {
    fn drop(&mut self) {
        for idx in 0..self.pool.created() {
            if let Some(&(start, end)) = self.pool.slot(idx).events.get() {
                for ev in [start, end] {
                    // SAFETY: our events, destroyed once; errors (driver shut down) are moot.
                    let _ = self.call(|| unsafe { result::event::destroy(ev as sys::CUevent) });
                }
            }
        }
        if let Some(dev) = self.retained {
            // SAFETY: releases the one reference `new` retained on this device.
            let _ = unsafe { result::primary_ctx::release(dev) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_reuses_released_slots_lifo() {
        let pool = Pool::new();
        let a = pool.acquire().unwrap();
        let b = pool.acquire().unwrap();
        assert_eq!((a, b), (0, 1));
        pool.release(a);
        pool.release(b);
        assert_eq!(pool.acquire(), Some(b));
        assert_eq!(pool.acquire(), Some(a));
        assert_eq!(pool.acquire(), Some(2));
        assert_eq!(pool.created(), 3);
        // Slots across a segment boundary.
        let many: Vec<u32> = (0..SEG_LEN as u32 + 5)
            .filter_map(|_| pool.acquire())
            .collect();
        assert_eq!(*many.last().unwrap(), SEG_LEN as u32 + 7);
        many.iter().for_each(|&i| pool.release(i));
        assert_eq!(pool.created(), SEG_LEN as u32 + 8);
    }

    #[test]
    fn pool_is_consistent_under_contention() {
        let pool = Pool::new();
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..10_000 {
                        let i = pool.acquire().unwrap();
                        let j = pool.acquire().unwrap();
                        assert_ne!(i, j);
                        pool.release(i);
                        pool.release(j);
                    }
                });
            }
        });
        // Never more slots than could be held at once (4 threads x 2).
        assert!(pool.created() <= 8, "{}", pool.created());
        let mut all: Vec<u32> = (0..pool.created())
            .map(|_| pool.acquire().unwrap())
            .collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(
            all.len() as u32,
            pool.created(),
            "every slot free exactly once"
        );
    }

    #[test]
    fn payload_tag_round_trips() {
        let p = TAG | 12345;
        assert_eq!(p & TAG_MASK, TAG);
        assert_eq!(p as u32, 12345);
        assert!(p < 1 << 56, "payloads are at most 56 bits");
    }
}

//! One clock for everything: the TSC, read directly, converted to nanoseconds on the
//! `CLOCK_MONOTONIC` time line.
//!
//! The hot path stores raw ticks ([`ticks`]: one `rdtsc`, ~11 ns in this project's VM, against
//! ~32 ns for `Instant::now()`); the flusher converts them with [`Clock::to_ns`]. `ticks` is a
//! free function, not a method: it reads the counter *before* touching any memory, so on the
//! exit of a call that waited long (caches cold) the time is taken first and the misses of the
//! bookkeeping fall outside the call. Whether the TSC is used is decided once, when the clock is
//! first used (at `build()`): on x86-64 when the CPU reports an invariant TSC (CPUID
//! 0x8000_0007 EDX bit 8) and `rdtscp` (what `quanta` required before), else ticks are
//! `CLOCK_MONOTONIC` nanoseconds.
//!
//! The conversion is anchored once per process at a (TSC, `CLOCK_MONOTONIC`) pair, so event
//! times, `start_time_ns` and `finalize_time_ns` share one time base with the Python package's
//! `perf_counter_ns()`. The tick length is measured over 5 ms when the clock is first used
//! and refined by [`Clock::recalibrate`], which the flusher calls at every round: at 20 ms,
//! 80 ms, 320 ms, 1.28 s, ... after the anchor it measures the tick length over the whole
//! elapsed time (so the 5 ms only decide the first 20 ms) and starts a new linear segment
//! there. Segments join continuously, so the mapping from ticks to ns is monotonic: two calls
//! converted at different times never appear to overlap because the scale changed between
//! them. Measured here, the TSC and `CLOCK_MONOTONIC` agree to 1e-8 over any 200 ms, and each
//! segment's tick length to ~1e-7 from the 320 ms segment on.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use crate::data::time::clock_ns;
pub(crate) use crate::data::time::monotonic_ns;

/// Whether [`ticks`] reads the TSC (decided once, by [`Clock::global`]).
static USE_TSC: AtomicBool = AtomicBool::new(false);

/// Raw clock ticks: what the hot path stores. The TSC when it is invariant, else
/// `CLOCK_MONOTONIC` ns (see the module docs).
#[inline(always)]
pub(crate) fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `rdtsc` has no preconditions and only reads the time-stamp counter; it is
        // read before the flag so the time is taken first (see the module docs).
        let t = unsafe { core::arch::x86_64::_rdtsc() };
        if USE_TSC.load(Ordering::Relaxed) {
            return t;
        }
    }
    fallback_ticks()
}

#[cold]
#[inline(never)]
fn fallback_ticks() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC).max(0) as u64
}

/// Whether this CPU has an invariant TSC and `rdtscp` (a constant-rate counter that keeps
/// ticking in every power state, readable from user space).
fn tsc_is_invariant() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::__cpuid;
        let max_ext = __cpuid(0x8000_0000).eax;
        if max_ext < 0x8000_0007 {
            return false;
        }
        let invariant = __cpuid(0x8000_0007).edx & (1 << 8) != 0;
        let rdtscp = __cpuid(0x8000_0001).edx & (1 << 27) != 0;
        invariant && rdtscp
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Which counter [`ticks`] reads, for the self-measurement's metadata.
pub(crate) fn source_name() -> &'static str {
    Clock::global();
    if USE_TSC.load(Ordering::Relaxed) {
        "tsc"
    } else {
        "clock_monotonic"
    }
}

/// One linear piece of the tick -> ns mapping, from `raw` on, in fixed point: ns =
/// `ns + (ticks - raw) * mult / 2^FRAC` (integer arithmetic: ~10 instructions a conversion,
/// where the floating-point form with its rounding call took ~30; the flusher converts every
/// call's start and end). A relative precision of 2^-41.
#[derive(Clone, Copy, Debug)]
struct Segment {
    raw: u64,
    ns: i64,
    mult: u64,
}

/// Fraction bits of [`Segment::mult`].
const FRAC: u32 = 40;

impl Segment {
    fn new(raw: u64, ns: i64, ns_per_tick: f64) -> Segment {
        let ns_per_tick = if ns_per_tick > 0.0 && ns_per_tick.is_finite() {
            ns_per_tick
        } else {
            1.0
        };
        Segment {
            raw,
            ns,
            mult: (ns_per_tick * (1u64 << FRAC) as f64).round() as u64,
        }
    }

    /// `ticks` ticks in ns, rounded.
    #[inline]
    fn span(self, ticks: u64) -> i64 {
        ((u128::from(ticks) * u128::from(self.mult) + (1 << (FRAC - 1))) >> FRAC) as i64
    }

    #[inline]
    fn to_ns(self, raw: u64) -> i64 {
        if raw >= self.raw {
            self.ns + self.span(raw - self.raw)
        } else {
            self.ns - self.span(self.raw - raw)
        }
    }
}

const MAX_SEGMENTS: usize = 24;

/// The process-wide profiler clock: the conversion of [`ticks`] to nanoseconds.
pub(crate) struct Clock {
    anchor_raw: u64,
    anchor_ns: i64,
    /// Segments, published by bumping `count` (release) after writing; never changed again.
    segments: [UnsafeCell<Segment>; MAX_SEGMENTS],
    count: AtomicUsize,
    /// Serializes recalibrations.
    recal: Mutex<()>,
}

// SAFETY: a segment is written once, under `recal`, before `count` is raised past it with a
// release store; readers only read segments below the `count` they loaded with acquire.
unsafe impl Sync for Clock {}

/// Elapsed time at the first recalibration; later ones come at 4x that, 16x, ...
const FIRST_CALIBRATION_NS: i64 = 20_000_000;

impl Clock {
    /// The one clock of this process (calibrated on first use, which decides whether
    /// [`ticks`] reads the TSC).
    pub(crate) fn global() -> &'static Clock {
        static CLOCK: OnceLock<Clock> = OnceLock::new();
        CLOCK.get_or_init(|| {
            USE_TSC.store(tsc_is_invariant(), Ordering::Relaxed);
            let (anchor_raw, anchor_ns) = paired_reading();
            // The first tick length, over 5 ms of CLOCK_MONOTONIC; refined from 20 ms on.
            std::thread::sleep(std::time::Duration::from_millis(5));
            let (raw, ns) = paired_reading();
            let scale = if raw > anchor_raw && ns > anchor_ns {
                (ns - anchor_ns) as f64 / (raw - anchor_raw) as f64
            } else {
                1.0
            };
            let first = Segment::new(anchor_raw, anchor_ns, scale);
            Clock {
                anchor_raw,
                anchor_ns,
                segments: std::array::from_fn(|_| UnsafeCell::new(first)),
                count: AtomicUsize::new(1),
                recal: Mutex::new(()),
            }
        })
    }

    /// Raw ticks now (see [`ticks`]).
    #[inline(always)]
    pub(crate) fn raw(&self) -> u64 {
        ticks()
    }

    fn segment(&self, k: usize) -> Segment {
        // SAFETY: only called with k < count (acquire-loaded), so the segment is published
        // and never written again.
        unsafe { *self.segments[k].get() }
    }

    /// Converts raw ticks to nanoseconds on the `CLOCK_MONOTONIC` time line.
    #[inline]
    pub(crate) fn to_ns(&self, raw: u64) -> i64 {
        let n = self.count.load(Ordering::Acquire);
        let mut k = n - 1;
        while k > 0 && self.segment(k).raw > raw {
            k -= 1;
        }
        self.segment(k).to_ns(raw)
    }

    /// Converts an interval's two ends at once (one segment lookup when both lie in the same
    /// piece, as nearly every call's do); the same values as two [`to_ns`](Self::to_ns).
    #[inline]
    pub(crate) fn to_ns_pair(&self, start: u64, end: u64) -> (i64, i64) {
        let n = self.count.load(Ordering::Acquire);
        let mut k = n - 1;
        while k > 0 && self.segment(k).raw > end {
            k -= 1;
        }
        let seg = self.segment(k);
        if start >= seg.raw || k == 0 {
            (seg.to_ns(start), seg.to_ns(end))
        } else {
            (self.to_ns(start), seg.to_ns(end))
        }
    }

    /// Converts a tick count (a difference of raw values) to nanoseconds.
    #[inline]
    pub(crate) fn ticks_to_ns(&self, ticks: u64) -> i64 {
        let n = self.count.load(Ordering::Acquire);
        self.segment(n - 1).span(ticks)
    }

    /// Refines the tick length when the next calibration point is reached (flusher only).
    pub(crate) fn recalibrate(&self) {
        let Ok(_guard) = self.recal.try_lock() else {
            return;
        };
        let n = self.count.load(Ordering::Acquire);
        if n >= MAX_SEGMENTS {
            return;
        }
        let elapsed_ns = monotonic_ns() - self.anchor_ns;
        let due = FIRST_CALIBRATION_NS.saturating_mul(1i64 << (2 * (n as u32 - 1)).min(60));
        if elapsed_ns < due {
            return;
        }
        let (raw, ns) = paired_reading();
        if raw <= self.anchor_raw || ns <= self.anchor_ns {
            return;
        }
        let scale = (ns - self.anchor_ns) as f64 / (raw - self.anchor_raw) as f64;
        // Continuous: the new piece starts where the last one is at `raw`.
        let seg = Segment::new(raw, self.segment(n - 1).to_ns(raw), scale);
        // SAFETY: segment `n` is not yet published (count == n) and `recal` is held, so no
        // one reads or writes it concurrently.
        unsafe { *self.segments[n].get() = seg };
        self.count.store(n + 1, Ordering::Release);
    }

    /// The current time in nanoseconds.
    pub(crate) fn now_ns(&self) -> i64 {
        self.to_ns(ticks())
    }
}

/// A (ticks, `CLOCK_MONOTONIC` ns) pair read as close together as possible: the best of a
/// few tries, so a preemption between the two reads does not skew the calibration.
fn paired_reading() -> (u64, i64) {
    let mut best = (u64::MAX, 0u64, 0i64);
    for _ in 0..16 {
        let t0 = ticks();
        let ns = monotonic_ns();
        let t1 = ticks();
        let gap = t1.wrapping_sub(t0);
        if gap < best.0 {
            best = (gap, t0 + gap / 2, ns);
        }
    }
    (best.1, best.2)
}

/// CPU time of another thread of this process, by OS thread id; `None` once it has exited.
///
/// Uses the kernel's per-thread CPU clock id (`MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)`),
/// which, unlike `pthread_getcpuclockid`, is safe to ask about a thread that is gone.
#[allow(clippy::unnecessary_cast)] // time_t and c_long are not i64 on every target
pub(crate) fn other_thread_cpu_ns(tid: i64) -> Option<i64> {
    let clock = ((!(tid as libc::clockid_t)) << 3) | 6;
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; an invalid clock id only makes the call fail.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    (rc == 0).then(|| ts.tv_sec as i64 * 1_000_000_000 + ts.tv_nsec as i64)
}

/// CPU time of the calling thread (`CLOCK_THREAD_CPUTIME_ID`) in nanoseconds.
pub(crate) fn thread_cpu_ns() -> i64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// The current UTC wall time as ISO-8601 with microseconds, e.g.
/// `2026-11-29T18:15:42.866251+00:00` (the format of the Python package's `timestamp`).
pub(crate) fn iso8601_now() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:06}+00:00",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        now.subsec_micros()
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian (year, month, day) (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_convert_to_monotonic_ns() {
        let c = Clock::global();
        let before = monotonic_ns();
        let t = c.now_ns();
        let after = monotonic_ns();
        // Calibration error is tiny; allow 1 ms either side.
        assert!(
            t >= before - 1_000_000 && t <= after + 1_000_000,
            "{before} {t} {after}"
        );
        std::thread::sleep(std::time::Duration::from_millis(25));
        c.recalibrate();
        // Pairs read as one (the best of several tries), so a preemption between the tick
        // and the CLOCK_MONOTONIC read of one pair cannot pass for a scale error.
        let (r1, m1) = paired_reading();
        std::thread::sleep(std::time::Duration::from_millis(30));
        let (r2, m2) = paired_reading();
        let dt = c.to_ns(r2) - c.to_ns(r1);
        assert!((29_000_000..300_000_000).contains(&dt), "{dt}");
        // The tick length agrees with CLOCK_MONOTONIC to well under 0.01 % after 20 ms
        // (tests/accuracy.rs checks 0.001 % from the first second on).
        let err = (dt - (m2 - m1)).abs() as f64 / (m2 - m1) as f64;
        assert!(err < 1e-4, "relative error {err}");
    }

    #[test]
    fn ticks_and_raw_are_one_counter() {
        let c = Clock::global();
        let (a, b, d) = (ticks(), c.raw(), ticks());
        assert!(a <= b && b <= d, "{a} {b} {d}");
        assert!(["tsc", "clock_monotonic"].contains(&source_name()));
    }

    #[test]
    fn recalibration_keeps_the_mapping_monotonic() {
        let c = Clock::global();
        let before: Vec<u64> = (0..1000).map(|_| ticks()).collect();
        std::thread::sleep(std::time::Duration::from_millis(90));
        c.recalibrate();
        c.recalibrate();
        let mut last = i64::MIN;
        for r in before.into_iter().chain((0..1000).map(|_| ticks())) {
            let ns = c.to_ns(r);
            assert!(ns >= last, "{ns} < {last}");
            last = ns;
        }
    }

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_786), (2026, 11, 29));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(
            iso8601_now().len(),
            "2026-11-29T18:15:42.866251+00:00".len()
        );
    }
}

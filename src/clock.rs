//! One clock for everything: the TSC, read through `quanta`, converted to nanoseconds on the
//! `CLOCK_MONOTONIC` time line.
//!
//! The hot path stores raw TSC ticks (one `rdtsc`, ~13 ns here, against ~32 ns for
//! `Instant::now()`); the flusher converts them with [`Clock::to_ns`]. The conversion is anchored
//! once per process at a (TSC, `CLOCK_MONOTONIC`) pair, so event times, `start_time_ns` and
//! `finalize_time_ns` share one time base with the Python package's `perf_counter_ns()`.
//!
//! The tick length starts as `quanta`'s calibration (a few ms of measuring, easily off by a
//! fraction of a percent on a loaded machine) and is refined by [`Clock::recalibrate`], which
//! the flusher calls at every drain: the ratio of elapsed `CLOCK_MONOTONIC` time to elapsed
//! ticks since the anchor, whose error shrinks as the run goes on.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// The process-wide profiler clock.
pub(crate) struct Clock {
    inner: quanta::Clock,
    anchor_raw: u64,
    anchor_ns: i64,
    /// Nanoseconds per tick (f64 bits); 0 until the first recalibration.
    ns_per_tick: AtomicU64,
}

/// Elapsed time after which the measured tick length replaces quanta's calibration.
const MIN_CALIBRATION_NS: i64 = 20_000_000;

impl Clock {
    /// The one clock of this process (calibrated on first use).
    pub(crate) fn global() -> &'static Clock {
        static CLOCK: OnceLock<Clock> = OnceLock::new();
        CLOCK.get_or_init(|| {
            let inner = quanta::Clock::new();
            let (anchor_raw, anchor_ns) = paired_reading(&inner);
            Clock {
                inner,
                anchor_raw,
                anchor_ns,
                ns_per_tick: AtomicU64::new(0),
            }
        })
    }

    /// Raw ticks: what the hot path stores.
    #[inline(always)]
    pub(crate) fn raw(&self) -> u64 {
        self.inner.raw()
    }

    /// Converts raw ticks to nanoseconds on the `CLOCK_MONOTONIC` time line.
    #[inline]
    pub(crate) fn to_ns(&self, raw: u64) -> i64 {
        let scale = f64::from_bits(self.ns_per_tick.load(Ordering::Relaxed));
        if scale > 0.0 {
            let delta = raw as f64 - self.anchor_raw as f64;
            return self.anchor_ns + (delta * scale).round() as i64;
        }
        if raw >= self.anchor_raw {
            self.anchor_ns + self.inner.delta_as_nanos(self.anchor_raw, raw) as i64
        } else {
            self.anchor_ns - self.inner.delta_as_nanos(raw, self.anchor_raw) as i64
        }
    }

    /// Converts a tick count (a difference of raw values) to nanoseconds.
    #[inline]
    pub(crate) fn ticks_to_ns(&self, ticks: u64) -> i64 {
        let scale = f64::from_bits(self.ns_per_tick.load(Ordering::Relaxed));
        if scale > 0.0 {
            (ticks as f64 * scale).round() as i64
        } else {
            self.inner.delta_as_nanos(0, ticks) as i64
        }
    }

    /// Refines the tick length from the time elapsed since the anchor (flusher only).
    pub(crate) fn recalibrate(&self) {
        let (raw, ns) = paired_reading(&self.inner);
        let elapsed_ns = ns - self.anchor_ns;
        if elapsed_ns < MIN_CALIBRATION_NS || raw <= self.anchor_raw {
            return;
        }
        let scale = elapsed_ns as f64 / (raw - self.anchor_raw) as f64;
        self.ns_per_tick.store(scale.to_bits(), Ordering::Relaxed);
    }

    /// The current time in nanoseconds.
    pub(crate) fn now_ns(&self) -> i64 {
        self.to_ns(self.raw())
    }
}

/// A (ticks, `CLOCK_MONOTONIC` ns) pair read as close together as possible: the best of a few
/// tries, so a preemption between the two reads does not skew the calibration.
fn paired_reading(clock: &quanta::Clock) -> (u64, i64) {
    let mut best = (u64::MAX, 0u64, 0i64);
    for _ in 0..5 {
        let t0 = clock.raw();
        let ns = monotonic_ns();
        let t1 = clock.raw();
        let gap = t1.wrapping_sub(t0);
        if gap < best.0 {
            best = (gap, t0 + gap / 2, ns);
        }
    }
    (best.1, best.2)
}

/// `CLOCK_MONOTONIC` in nanoseconds.
pub(crate) fn monotonic_ns() -> i64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CPU time of the calling thread (`CLOCK_THREAD_CPUTIME_ID`) in nanoseconds.
pub(crate) fn thread_cpu_ns() -> i64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

fn clock_ns(id: libc::clockid_t) -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; clock_gettime only writes into it.
    let rc = unsafe { libc::clock_gettime(id, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as i64 * 1_000_000_000 + ts.tv_nsec as i64
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
        let r1 = c.raw();
        let m1 = monotonic_ns();
        std::thread::sleep(std::time::Duration::from_millis(30));
        c.recalibrate();
        let r2 = c.raw();
        let m2 = monotonic_ns();
        let dt = c.to_ns(r2) - c.to_ns(r1);
        assert!((29_000_000..300_000_000).contains(&dt), "{dt}");
        // After recalibration ticks agree with CLOCK_MONOTONIC to well under 0.1 %.
        let err = (dt - (m2 - m1)).abs() as f64 / (m2 - m1) as f64;
        assert!(err < 1e-3, "relative error {err}");
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

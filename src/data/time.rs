//! The monotonic clock in nanoseconds (what the profiler's timestamps and temporary file names
//! use), below every stage.

#[cfg(all(feature = "mpi", feature = "testing"))]
use std::sync::OnceLock;

/// `CLOCK_MONOTONIC` in nanoseconds.
pub(crate) fn monotonic_ns() -> i64 {
    clock_ns(libc::CLOCK_MONOTONIC) + test_skew_ns()
}

/// For the multi-rank clock tests only: `SCOPE_PROFILER_TEST_CLOCK_SKEW_NS` shifts this
/// process's profiler clock, as if it ran on a node whose clock differs.
#[cfg(all(feature = "mpi", feature = "testing"))]
fn test_skew_ns() -> i64 {
    static SKEW: OnceLock<i64> = OnceLock::new();
    *SKEW.get_or_init(|| {
        std::env::var("SCOPE_PROFILER_TEST_CLOCK_SKEW_NS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    })
}

#[cfg(not(all(feature = "mpi", feature = "testing")))]
fn test_skew_ns() -> i64 {
    0
}

#[allow(clippy::unnecessary_cast)] // time_t and c_long are not i64 on every target
pub(crate) fn clock_ns(id: libc::clockid_t) -> i64 {
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

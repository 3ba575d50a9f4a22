//! The benchmark behind the `check` tests and `examples/check_bench.rs` (included by path): a
//! program whose regions do a known amount of work per call, so a candidate can be made a
//! known percentage slower in one region.
//!
//! Regions: `kernel` (many calls), `steady` (half as many, never changed), `rare` (5 calls),
//! all sync spans on the main thread, interleaved so that slow moments of the machine hit
//! every region alike.

#![allow(dead_code)]

use std::path::Path;

use scope_profiler::ScopeLayer;

/// Default units of work of one `kernel` and one `steady` call (one unit: one step of a
/// multiply-add chain): about 30-40 us per call on this project's VM in either build.
pub(crate) const UNITS: u64 = if cfg!(debug_assertions) {
    4_000
} else {
    200_000
};
/// Calls of `rare`.
pub(crate) const RARE_CALLS: u64 = 5;

/// What one run does.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Workload {
    /// Calls of `kernel` (`steady` gets half as many).
    pub(crate) calls: u64,
    /// Units of work of one `steady` call (and of a `kernel` call at scale 1).
    pub(crate) units: u64,
    /// Work per `kernel` call, as a multiple of `units` (1.2 = 20 % more work).
    pub(crate) kernel_scale: f64,
    /// Work per `rare` call, as a multiple of 4 x `units`.
    pub(crate) rare_scale: f64,
}

impl Default for Workload {
    fn default() -> Workload {
        Workload {
            calls: 300,
            units: UNITS,
            kernel_scale: 1.0,
            rare_scale: 1.0,
        }
    }
}

/// `units` steps of a dependent multiply-add chain (no memory traffic, no allocation).
pub(crate) fn spin(units: u64) -> u64 {
    let mut acc = std::hint::black_box(0x9e37_79b9_7f4a_7c15u64);
    for k in 0..units {
        acc = acc.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(k);
    }
    std::hint::black_box(acc)
}

/// Iteration `i` of the workload: one `kernel` call, a `steady` call every other iteration,
/// and the `rare` calls spread evenly over the run.
pub(crate) fn step(w: Workload, i: u64) -> u64 {
    let kernel = (w.units as f64 * w.kernel_scale).round() as u64;
    let rare = (4.0 * w.units as f64 * w.rare_scale).round() as u64;
    let rare_every = (w.calls / RARE_CALLS).max(1);
    let mut acc = tracing::info_span!("kernel").in_scope(|| spin(kernel));
    if i.is_multiple_of(2) {
        acc ^= tracing::info_span!("steady").in_scope(|| spin(w.units));
    }
    if i % rare_every == rare_every / 2 && i / rare_every < RARE_CALLS {
        acc ^= tracing::info_span!("rare").in_scope(|| spin(rare));
    }
    acc
}

/// Runs the whole workload under the current subscriber.
pub(crate) fn run(w: Workload) -> u64 {
    (0..w.calls).fold(0, |acc, i| acc ^ step(w, i))
}

/// A profiler writing to `out` and the dispatcher that records into it.
pub(crate) fn profiler(
    out: &Path,
) -> Result<(tracing::Dispatch, scope_profiler::FlushGuard), Box<dyn std::error::Error>> {
    use tracing_subscriber::prelude::*;
    let (layer, guard) = ScopeLayer::builder()
        .output(out)
        .summary(false)
        .capture_source(false)
        .build()?;
    Ok((
        tracing::Dispatch::new(tracing_subscriber::registry().with(layer)),
        guard,
    ))
}

/// Profiles one run of `w` into `out` (a whole profiler lifetime: build, run, finalize).
pub(crate) fn profile(out: &Path, w: Workload) -> Result<(), Box<dyn std::error::Error>> {
    let (d, guard) = profiler(out)?;
    tracing::dispatcher::with_default(&d, || run(w));
    guard.finalize()?;
    Ok(())
}

/// Profiles several runs at once, one profile each, their iterations interleaved (run 1's
/// iteration i, run 2's iteration i, ..., then iteration i + 1): every run sees the same
/// moments of the machine, so a burst of interference slows them all alike (a paired
/// design; see `tests/cli_check.rs`). All runs do `runs[0].calls` iterations.
pub(crate) fn profile_interleaved(
    runs: &[(std::path::PathBuf, Workload)],
) -> Result<(), Box<dyn std::error::Error>> {
    let mut profilers = Vec::new();
    for (out, _) in runs {
        profilers.push(profiler(out)?);
    }
    let calls = runs.first().map_or(0, |r| r.1.calls);
    let mut acc = 0u64;
    for i in 0..calls {
        for ((d, _), (_, w)) in profilers.iter().zip(runs) {
            acc ^= tracing::dispatcher::with_default(d, || step(*w, i));
        }
    }
    std::hint::black_box(acc);
    for (_, guard) in profilers {
        guard.finalize()?;
    }
    Ok(())
}

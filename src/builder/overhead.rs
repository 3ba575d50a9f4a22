//! The profiler measures itself at `build()`: what one recorded call and one poll cost on this
//! machine, and how fine the clock is. The figures go into the file's `metadata`
//! (`overhead_ns_per_call`, `overhead_ns_per_poll`, `clock_resolution_ns`, `clock_source`) and
//! the summary's info box, so a 300 ns region can be told from profiler noise; with
//! `Builder::compensate_overhead(true)` exclusive times subtract each child call's cost from
//! its parent.
//!
//! The probe runs the real thing: a throwaway profiler with this configuration's recording
//! switches (its flusher included), as the same front end (a layer on a bare
//! `tracing_subscriber::registry()`, or a `ScopeSubscriber`), on a short-lived
//! thread of its own (so its buffers go when the thread ends), timing 10 000 child
//! `info_span!`s (create + enter + exit + close inside a parent) and as many re-enters of one
//! span, in eight batches; the median batch counts (typical of the machine's load at `build()`,
//! the flusher's share included, not of one unlucky preemption). What a child call adds to its
//! parent's time is that cost minus the child's own recorded duration (the shortest the probe's
//! report saw); a poll's figure is its cost minus one clock read. It takes a few milliseconds
//! (tens in a debug build).

use std::sync::Arc;

use tracing_subscriber::prelude::*;

use crate::data::report::SelfCost;
use crate::recording::clock::Clock;
use crate::recording::shared::{Config, Shared};

const BATCH: u32 = 1_250;
const BATCHES: u32 = 8;

/// Measures the hot path of a front end configured like `config` (on a thread of its own).
pub(crate) fn measure(config: &Config, front: crate::builder::FrontEnd) -> Option<SelfCost> {
    let mut probe = config.clone();
    probe.output = None;
    probe.summary = false;
    probe.perf_events.clear();
    probe.likwid = false;
    probe.nvtx = false;
    probe.cuda_timing = false;
    probe.cuda_sync_on_exit = false;
    probe.capture_source = false;
    probe.buffering.fail_flusher_at = None;
    probe.buffering.hold_flusher = false;
    // The probe is private to this process: never collective, never rotating.
    probe.mpi = false;
    probe.rotate_every = None;
    std::thread::Builder::new()
        .name("scope-profiler-probe".into())
        .spawn(move || probe_here(probe, front))
        .ok()?
        .join()
        .ok()
        .flatten()
}

/// Runs the probe on this thread: a complete profiler (flusher included, so its share of a
/// busy machine counts as it will in the program), the fastest of eight batches.
fn probe_here(config: Config, front: crate::builder::FrontEnd) -> Option<SelfCost> {
    let clock = Clock::global();
    let ns_per_tick = clock.ticks_to_ns(1 << 24) as f64 / (1u64 << 24) as f64;
    // The fastest batch: the cost itself, without preemption or the flusher competing for the
    // core. Compensation then errs on the side of taking off too little: taking off more than
    // the children really cost would make parents' exclusive times too small, even zero.
    let time = |f: &dyn Fn()| -> f64 {
        (0..BATCHES)
            .map(|_| {
                let t0 = clock.raw();
                f();
                clock.raw().wrapping_sub(t0) as f64 * ns_per_tick / f64::from(BATCH)
            })
            .fold(f64::MAX, f64::min)
    };
    let resolution = clock_resolution(clock, ns_per_tick);
    // One clock read: what lies inside a poll's own recorded interval on an empty body.
    let read = time(&|| {
        for _ in 0..BATCH {
            std::hint::black_box(clock.raw());
        }
    });
    let mut shared = Shared::new(config, None);
    if front == crate::builder::FrontEnd::Subscriber {
        // As `build_subscriber` does (see `Shared::span_sites`).
        shared.span_sites = Some(Arc::new(crate::recording::subscriber::SpanSites::new()));
    }
    let shared = Arc::new(shared);
    // The probe is one process's: no MPI (`()` without the `mpi` feature).
    #[allow(clippy::let_unit_value)]
    let no_mpi = crate::mpi::Handle::default();
    let guard = crate::finalize::guard::FlushGuard::start(shared.clone(), no_mpi).ok()?;
    let dispatch = probe_dispatch(shared, front);
    let (span, poll) = tracing::dispatcher::with_default(&dispatch, || {
        // Inside a parent, as children are (the registry links a child to its parent).
        let _parent = tracing::info_span!("scope_profiler.probe_parent").entered();
        let span = time(&|| {
            for _ in 0..BATCH {
                tracing::info_span!("scope_profiler.probe").in_scope(|| ());
            }
        });
        let s = tracing::info_span!("scope_profiler.probe_poll");
        let poll = time(&|| {
            for _ in 0..BATCH {
                let _e = std::hint::black_box(&s).enter();
            }
        });
        (span, poll)
    });
    drop(dispatch);
    // What lies inside a child's own recorded interval (its duration on an empty body) does
    // not burden the parent.
    let report = guard.finalize().ok()?;
    let inner = report
        .region("scope_profiler.probe")
        .map_or(0.0, |r| r.mean_ns);
    Some(SelfCost {
        ns_per_call: (span - inner).max(ns_per_tick),
        ns_per_poll: (poll - read).max(ns_per_tick),
        clock_resolution_ns: resolution.max(ns_per_tick),
        clock_source: clock_source(),
    })
}

/// The clock's resolution in ns: the smallest step between two differing reads, of 1000.
fn clock_resolution(clock: &Clock, ns_per_tick: f64) -> f64 {
    (0..1000)
        .map(|_| {
            let a = clock.raw();
            let mut b = clock.raw();
            while b == a {
                b = clock.raw();
            }
            b.wrapping_sub(a)
        })
        .min()
        .unwrap_or(1) as f64
        * ns_per_tick
}

/// The probe's front end on `shared`: a layer on a bare registry, or a `ScopeSubscriber`.
fn probe_dispatch(shared: Arc<Shared>, front: crate::builder::FrontEnd) -> tracing::Dispatch {
    match front {
        crate::builder::FrontEnd::Layer => tracing::Dispatch::new(
            tracing_subscriber::registry().with(crate::recording::layer::ScopeLayer::new(shared)),
        ),
        crate::builder::FrontEnd::Subscriber => {
            tracing::Dispatch::new(crate::recording::subscriber::ScopeSubscriber::new(shared))
        }
    }
}

/// Which counter the hot path reads (see [`crate::recording::clock::ticks`]); either way
/// times are converted onto the `CLOCK_MONOTONIC` time line.
fn clock_source() -> String {
    crate::recording::clock::source_name().into()
}

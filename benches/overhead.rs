//! Hot-path overhead of `ScopeLayer` against the bare registry and other tracing layers.
//!
//! Two operations per subscriber configuration, both reported in ns per operation:
//!
//! * `span/<config>`: `info_span!` create + enter + exit + close (one sync call);
//! * `poll/<config>`: enter + exit of one span created outside the measured loop (one poll).
//!
//! Run `bash scripts/overhead-table.sh` to get the Markdown table with ratios against the bare
//! registry measured in the same run (see DESIGN.md, "Hot-path rules").
//!
//! # How the configurations are kept apart
//!
//! `tracing` caches, per span callsite, the `Interest` of all *live* dispatchers, and keeps a
//! global max level that is only recomputed when a dispatcher is created. So:
//!
//! * every configuration gets its own span callsites: the `bench_config!` macro expands its
//!   `info_span!` invocations once per configuration, so a callsite whose interest was cached
//!   under one subscriber is never measured under another one;
//! * every benchmark builds a fresh subscriber, installs it as this thread's default
//!   (`dispatcher::with_default`; criterion runs the measured closure on this thread) and drops
//!   it before the next benchmark builds its own, so only one dispatcher is live while its
//!   callsites register. Only then is a disabled layer measured on tracing's disabled path (a
//!   callsite whose interest is `never`, or a max level of `OFF`) instead of through
//!   `Subscriber::enabled` calls forced by some other live dispatcher (combined interest
//!   `sometimes`).
//!
//! `no_subscriber` runs first, before any dispatcher has ever been created: the state of a
//! program that uses `tracing` without installing anything (max level `OFF`).
//!
//! Each benchmark prints to stderr whether its dispatcher's spans are enabled and the global max
//! level, and, for `ScopeLayer`, after `finalize()`: operations run (warm-up included), calls in
//! the report and records dropped because the flusher fell behind. Drops mean the measured loop
//! partly ran the drop path, not the append path.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::Criterion;
use scope_profiler::{Mode, ScopeLayer};
use tracing::dispatcher::{self, Dispatch};
use tracing::level_filters::LevelFilter;
use tracing::{info_span, Span};
use tracing_subscriber::prelude::*;

/// Enable the `ScopeLayer` configurations with `track_threads(true)` / `track_async(true)`.
///
/// Both use `Mode::TimeOnly` (the schema forbids tracking lanes in aggregate mode).
const TRACKING_CONFIGS: bool = true;

/// A configuration, installed: the dispatcher to measure under (`None`: no subscriber at all) and
/// what to do once its benchmark ran (flush and report, join writer threads).
struct Installed {
    dispatch: Option<Dispatch>,
    finish: Box<dyn FnOnce(&Ran)>,
}

/// What one benchmark did, for the `finish` report.
struct Ran<'a> {
    /// `span/<config>` or `poll/<config>`.
    id: &'a str,
    /// Span name of the measured callsite.
    span_name: &'static str,
    /// Operations run, warm-up included.
    ops: u64,
    /// Layer callbacks per operation (4 for a span: new, enter, exit, close; 2 for a poll).
    callbacks_per_op: u64,
}

impl Installed {
    fn none() -> Self {
        Installed {
            dispatch: None,
            finish: Box::new(|_| {}),
        }
    }

    fn new(dispatch: Dispatch) -> Self {
        Installed {
            dispatch: Some(dispatch),
            finish: Box::new(|_| {}),
        }
    }

    fn finish_with(mut self, finish: impl FnOnce(&Ran) + 'static) -> Self {
        self.finish = Box::new(finish);
        self
    }
}

/// Builds a `ScopeLayer` from a builder expression (everything but output and build) on top of
/// the bare registry; `finalize()` runs after the benchmark and prints the drops.
macro_rules! scope_config {
    ($builder:expr) => {{
        let (layer, guard) = $builder
            .no_output()
            .summary(false)
            .build()
            .unwrap_or_else(|e| panic!("ScopeLayer::build failed: {e}"));
        Installed::new(Dispatch::new(tracing_subscriber::registry().with(layer))).finish_with(
            move |ran: &Ran| match guard.finalize() {
                Ok(report) => {
                    let records = ran.ops.saturating_mul(ran.callbacks_per_op);
                    eprintln!(
                        "[overhead] {}: {} ops, {} calls recorded, dropped = {} of ~{} records \
                         ({:.2}%)",
                        ran.id,
                        ran.ops,
                        report.region(ran.span_name).map_or(0, |r| r.calls),
                        report.dropped(),
                        records,
                        100.0 * report.dropped() as f64 / records.max(1) as f64,
                    );
                }
                Err(e) => eprintln!("[overhead] {}: finalize failed: {e}", ran.id),
            },
        )
    }};
}

/// Runs both benchmarks of one configuration, each under a freshly built subscriber (so drops
/// and flushes are attributed to one benchmark). Expands its own two `info_span!` callsites (see
/// the module docs); `$install` is evaluated once per benchmark, each time after the previous
/// subscriber was dropped.
macro_rules! bench_config {
    ($c:expr, $name:literal, $install:expr) => {{
        run_bench(
            $c,
            concat!("span/", $name),
            "bench_span",
            4,
            $install,
            || (),
            |(), iters| {
                let start = Instant::now();
                for _ in 0..iters {
                    let span = info_span!("bench_span");
                    let _entered = span.enter();
                    black_box(&span);
                }
                start.elapsed()
            },
        );
        run_bench(
            $c,
            concat!("poll/", $name),
            "bench_poll",
            2,
            $install,
            || info_span!("bench_poll"),
            |span: &Span, iters| {
                let start = Instant::now();
                for _ in 0..iters {
                    // black_box: without it, the check of a disabled span is hoisted out of the
                    // loop and `no_subscriber` measures an empty loop (0.0 ns).
                    let _entered = black_box(span).enter();
                }
                start.elapsed()
            },
        );
    }};
}

/// Runs one benchmark: installs `installed` on this thread, calls `setup` under it, measures
/// `timed(&setup_output, iters)`, drops everything, then runs the configuration's `finish`.
fn run_bench<T>(
    c: &mut Criterion,
    id: &str,
    span_name: &'static str,
    callbacks_per_op: u64,
    installed: Installed,
    setup: impl FnOnce() -> T,
    mut timed: impl FnMut(&T, u64) -> Duration,
) {
    let (group, name) = id.split_once('/').expect("id is group/config");
    let Installed { dispatch, finish } = installed;
    let mut ops = 0u64;
    let body = || {
        let state = setup();
        let mut group = c.benchmark_group(group);
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                ops = ops.saturating_add(iters);
                timed(&state, iters)
            })
        });
        group.finish();
        // Whether this dispatcher's callsites are live, checked on a third callsite.
        let probe = info_span!("bench_probe");
        eprintln!(
            "[overhead] {id}: spans {}, max level {}",
            if probe.is_disabled() {
                "disabled"
            } else {
                "enabled"
            },
            LevelFilter::current(),
        );
        drop(state);
    };
    match &dispatch {
        Some(dispatch) => dispatcher::with_default(dispatch, body),
        None => body(),
    }
    // The spans held clones of the dispatch and are closed by now. Drop the subscriber before
    // finishing, so the next benchmark starts with no live dispatcher.
    drop(dispatch);
    finish(&Ran {
        id,
        span_name,
        ops,
        callbacks_per_op,
    });
}

fn tracing_timing_config() -> Installed {
    let layer = tracing_timing::Builder::default()
        .layer(|| tracing_timing::Histogram::new_with_max(1_000_000, 2).unwrap());
    Installed::new(Dispatch::new(tracing_subscriber::registry().with(layer)))
}

fn tracing_chrome_config() -> Installed {
    // Producer side only: the writer thread serialises to a sink. Dropping the guard joins it.
    let (layer, guard) = tracing_chrome::ChromeLayerBuilder::new()
        .writer(std::io::sink())
        .build();
    Installed::new(Dispatch::new(tracing_subscriber::registry().with(layer)))
        .finish_with(move |_| drop(guard))
}

fn main() {
    let mut c = Criterion::default()
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_secs(1))
        .sample_size(30)
        .configure_from_args();
    if let Ok(v) = std::env::var("SCOPE_PROFILER") {
        eprintln!(
            "[overhead] warning: SCOPE_PROFILER={v:?} is set; it can force every ScopeLayer \
             configuration to Mode::Disabled"
        );
    }

    // First: nothing has ever been installed in this process.
    bench_config!(&mut c, "no_subscriber", Installed::none());
    bench_config!(
        &mut c,
        "registry",
        Installed::new(Dispatch::new(tracing_subscriber::registry()))
    );
    bench_config!(
        &mut c,
        "scope_disabled",
        scope_config!(ScopeLayer::builder().mode(Mode::Disabled))
    );
    bench_config!(
        &mut c,
        "scope_aggregate",
        scope_config!(ScopeLayer::builder().mode(Mode::Aggregate))
    );
    bench_config!(
        &mut c,
        "scope_timeonly",
        scope_config!(ScopeLayer::builder().mode(Mode::TimeOnly))
    );
    if TRACKING_CONFIGS {
        bench_config!(
            &mut c,
            "scope_threads",
            scope_config!(ScopeLayer::builder()
                .mode(Mode::TimeOnly)
                .track_threads(true))
        );
        bench_config!(
            &mut c,
            "scope_async",
            scope_config!(ScopeLayer::builder().mode(Mode::TimeOnly).track_async(true))
        );
    }
    bench_config!(&mut c, "tracing_timing", tracing_timing_config());
    bench_config!(&mut c, "tracing_chrome", tracing_chrome_config());
    // The baseline again, to show how much the machine drifted during the run.
    bench_config!(
        &mut c,
        "registry_end",
        Installed::new(Dispatch::new(tracing_subscriber::registry()))
    );

    c.final_summary();
}

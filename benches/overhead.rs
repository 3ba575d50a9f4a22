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
//! `tracing` caches, per span callsite, the `Interest` of all *live* dispatchers, and keeps a global
//! max level that is only recomputed when a dispatcher is created. Two rules follow:
//!
//! * every configuration gets its own span callsites: the `bench_config!` macro expands two
//!   `info_span!` invocations per configuration, so a callsite whose interest was cached under one
//!   subscriber is never measured under another one;
//! * configurations run one after another, each installed with a thread-local default
//!   (`dispatcher::with_default`; criterion runs the measured closure on this thread) and dropped
//!   before the next one is built, so only one dispatcher is live while its callsites register.
//!   This is what lets a disabled layer really be measured on tracing's disabled path (a callsite
//!   whose interest is `never`, or a max level of `OFF`) instead of on `Subscriber::enabled`
//!   calls forced by some other live dispatcher.
//!
//! `no_subscriber` runs first, before any dispatcher has ever been created, which is the state of
//! a program that uses `tracing` without installing anything.
//!
//! Each configuration prints one diagnostic line to stderr (whether its spans are enabled, the
//! global max level) and, for `ScopeLayer`, the report's drop counter after `finalize()`.

use std::hint::black_box;
use std::time::Duration;

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
/// what to do once its benchmarks ran (flush and report, join writer threads).
struct Installed {
    dispatch: Option<Dispatch>,
    finish: Box<dyn FnOnce()>,
}

impl Installed {
    fn new(dispatch: Dispatch) -> Self {
        Installed {
            dispatch: Some(dispatch),
            finish: Box::new(|| {}),
        }
    }

    fn finish_with(mut self, finish: impl FnOnce() + 'static) -> Self {
        self.finish = Box::new(finish);
        self
    }
}

/// Builds a `ScopeLayer` from a builder expression (everything but output and build) on top of
/// the bare registry; `finalize()` runs after the config's benchmarks and prints the drops.
macro_rules! scope_config {
    ($name:literal, $builder:expr) => {{
        let (layer, guard) = $builder
            .no_output()
            .summary(false)
            .build()
            .unwrap_or_else(|e| panic!("{}: ScopeLayer::build failed: {e}", $name));
        Installed::new(Dispatch::new(tracing_subscriber::registry().with(layer))).finish_with(
            move || match guard.finalize() {
                Ok(report) => eprintln!("[overhead] {}: dropped = {}", $name, report.dropped()),
                Err(e) => eprintln!("[overhead] {}: finalize failed: {e}", $name),
            },
        )
    }};
}

/// Runs both benchmarks of one configuration. Expands its own two `info_span!` callsites (see
/// the module docs); `$install` is evaluated only after the previous configuration was dropped.
macro_rules! bench_config {
    ($c:expr, $name:literal, $install:expr) => {{
        let installed: Installed = $install;
        run_config(
            $c,
            $name,
            installed,
            || {
                let span = info_span!("bench_span");
                let _entered = span.enter();
                black_box(&span);
            },
            || info_span!("bench_poll"),
        );
    }};
}

fn run_config(
    c: &mut Criterion,
    name: &str,
    installed: Installed,
    mut span_op: impl FnMut(),
    make_poll_span: impl FnOnce() -> Span,
) {
    let Installed { dispatch, finish } = installed;
    let body = || {
        let probe = make_poll_span();
        eprintln!(
            "[overhead] {name}: spans {}, max level {}",
            if probe.is_disabled() {
                "disabled"
            } else {
                "enabled"
            },
            LevelFilter::current(),
        );

        let mut group = c.benchmark_group("span");
        group.bench_function(name, |b| b.iter(&mut span_op));
        group.finish();

        let mut group = c.benchmark_group("poll");
        group.bench_function(name, |b| {
            b.iter(|| {
                let _entered = probe.enter();
            })
        });
        group.finish();
        drop(probe);
    };
    match &dispatch {
        Some(dispatch) => dispatcher::with_default(dispatch, body),
        None => body(),
    }
    // The spans hold clones of the dispatch; they are all closed by now. Drop the subscriber
    // before finishing so the next configuration starts with no live dispatcher.
    drop(dispatch);
    finish();
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
        .finish_with(move || drop(guard))
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
    bench_config!(
        &mut c,
        "no_subscriber",
        Installed {
            dispatch: None,
            finish: Box::new(|| {}),
        }
    );
    bench_config!(
        &mut c,
        "registry",
        Installed::new(Dispatch::new(tracing_subscriber::registry()))
    );
    bench_config!(
        &mut c,
        "scope_disabled",
        scope_config!("scope_disabled", ScopeLayer::builder().mode(Mode::Disabled))
    );
    bench_config!(
        &mut c,
        "scope_aggregate",
        scope_config!(
            "scope_aggregate",
            ScopeLayer::builder().mode(Mode::Aggregate)
        )
    );
    bench_config!(
        &mut c,
        "scope_timeonly",
        scope_config!("scope_timeonly", ScopeLayer::builder().mode(Mode::TimeOnly))
    );
    if TRACKING_CONFIGS {
        bench_config!(
            &mut c,
            "scope_threads",
            scope_config!(
                "scope_threads",
                ScopeLayer::builder()
                    .mode(Mode::TimeOnly)
                    .track_threads(true)
            )
        );
        bench_config!(
            &mut c,
            "scope_async",
            scope_config!(
                "scope_async",
                ScopeLayer::builder().mode(Mode::TimeOnly).track_async(true)
            )
        );
    }
    bench_config!(&mut c, "tracing_timing", tracing_timing_config());
    bench_config!(&mut c, "tracing_chrome", tracing_chrome_config());

    c.final_summary();
}

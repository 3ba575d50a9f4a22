//! Hot-path overhead of `ScopeLayer` against the bare registry and other tracing layers.
//!
//! Two operations per subscriber configuration, both reported in ns per operation:
//!
//! * `span/<config>`: `info_span!` create + enter + exit + close (one sync call);
//! * `poll/<config>`: enter + exit of one span created outside the measured loop (one poll);
//! * `event/<config>`: one `info!` inside an entered span (for a few configurations: the
//!   registry's own cost, the profiler without and with `line_timing(true)`).
//!
//! `scope_disabled` is `Mode::Disabled` alone in a registry (target: at most 2 ns per span over
//! `no_subscriber`); `scope_paused` is a `TimeOnly` profiler paused with `FlushGuard::pause`
//! (target: at most 2 ns per callback over `registry`).
//!
//! **This is the isolated hot path, not what a user pays**: each measured profiler gets a
//! 256 MiB budget and the flusher catches up, untimed, after every sample (see "Recording, not
//! waiting" below). What a span costs the whole process, unpinned, with default settings and
//! the flusher's work included, is `benches/cost.rs` (`docs/performance.md`).
//!
//! Run `bash scripts/overhead-table.sh` to get the Markdown table with ratios against the
//! registry with one no-op layer (`registry_noop`), measured in the same run; the bare
//! registry is shown too, labelled.
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
//! # What else it reports
//!
//! One stderr line per benchmark (and a JSON line appended to `$OVERHEAD_EXTRA` when set, which
//! `scripts/overhead-table.sh` reads): whether the dispatcher's spans are enabled, the global max
//! level, operations run (warm-up included), the CPU time the process's *other* threads (the
//! `ScopeLayer` flusher, tracing-chrome's writer) spent per operation meanwhile, and, for
//! `ScopeLayer`, after `finalize()`: calls in the report, records dropped because the flusher
//! fell behind (then the loop partly measured the drop path, not the append path) and how long
//! `finalize()` and the guard's drop took.
//!
//! # Recording, not waiting
//!
//! The loops record 30-130 M records/s, faster than the flusher folds them on a loaded 2-core
//! machine (it needs 20-30 ns per poll in `TimeOnly`, 50-75 ns with `track_async`). Left alone,
//! a sample would then measure backpressure (the thread waiting for buffers: with the default
//! budget, ~1 000 waits per benchmark and thread CPU per op up to 2-3x the recording cost) or,
//! with `lossy`, the drop path; the builds before the buffer budget dropped silently there,
//! which flattered their figures. So every measured `ScopeLayer` gets a 256 MiB budget
//! ([`BENCH_BUFFER_BUDGET`]: room for the backlog of the largest sample) and, after each timed
//! batch, untimed, waits until the flusher has read everything (two more complete drains).
//! Each sample thus starts with the flusher caught up, the flusher still runs concurrently
//! (as in a program), and the report shows 0 waits and 0 drops. It also shows the page faults
//! the loop took (a new buffer's first write; the flusher pre-faults a reserve of buffers, so
//! they are rare).
//!
//! The background threads matter on a 2-core machine: when another job holds the second core,
//! the flusher shares the benchmark's core and its time shows up in wall-clock ns/op.
//! `OVERHEAD_CLOCK=thread` times the loops with this thread's CPU time instead (hot path alone,
//! robust to other jobs); the default is `wall`.

use std::hint::black_box;
use std::io::Write as _;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use criterion::Criterion;
use scope_profiler::{Mode, ScopeLayer};
use tracing::dispatcher::{self, Dispatch};
use tracing::level_filters::LevelFilter;
use tracing::{info_span, Span};
use tracing_subscriber::prelude::*;

/// A layer that does nothing: with the registry, what every program pays for `tracing`.
struct Noop;
impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Noop {}

/// Enable the `ScopeLayer` configurations with `track_threads(true)` / `track_async(true)`.
///
/// Both use `Mode::TimeOnly` (the schema forbids tracking lanes in aggregate mode).
const TRACKING_CONFIGS: bool = true;

/// What the measured loops are timed with: `OVERHEAD_CLOCK=wall` (default) or `thread` (this
/// thread's CPU time, Linux only: excludes time the thread was descheduled, so a flusher or
/// another job sharing the core does not count; use it on a busy machine for the hot path alone).
#[derive(Clone, Copy, Debug, PartialEq)]
enum ClockKind {
    Wall,
    ThreadCpu,
}

impl ClockKind {
    fn name(self) -> &'static str {
        match self {
            ClockKind::Wall => "wall",
            ClockKind::ThreadCpu => "thread",
        }
    }
}

fn clock_kind() -> ClockKind {
    static KIND: OnceLock<ClockKind> = OnceLock::new();
    *KIND.get_or_init(|| match std::env::var("OVERHEAD_CLOCK").as_deref() {
        Ok("thread") | Ok("thread-cpu") if cpu_time::thread_ns().is_some() => ClockKind::ThreadCpu,
        Ok("thread") | Ok("thread-cpu") => {
            eprintln!("[overhead] warning: no thread CPU clock here; timing with the wall clock");
            ClockKind::Wall
        }
        Ok("wall") | Ok("") | Err(_) => ClockKind::Wall,
        Ok(other) => panic!("OVERHEAD_CLOCK={other:?}: expected `wall` or `thread`"),
    })
}

/// Times one batch of iterations with the selected clock.
enum Timer {
    Wall(Instant),
    ThreadCpu(u64),
}

impl Timer {
    #[inline]
    fn start() -> Timer {
        match clock_kind() {
            ClockKind::Wall => Timer::Wall(Instant::now()),
            ClockKind::ThreadCpu => Timer::ThreadCpu(cpu_time::thread_ns().unwrap_or(0)),
        }
    }

    #[inline]
    fn elapsed(&self) -> Duration {
        match self {
            Timer::Wall(t) => t.elapsed(),
            Timer::ThreadCpu(t0) => {
                Duration::from_nanos(cpu_time::thread_ns().unwrap_or(0).saturating_sub(*t0))
            }
        }
    }
}

/// CPU time of this thread and of the whole process, in ns (None where not available).
mod cpu_time {
    #[cfg(target_os = "linux")]
    fn read(clock: libc::clockid_t) -> Option<u64> {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec; clock_gettime only writes to it.
        let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
        (rc == 0).then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
    }

    #[cfg(target_os = "linux")]
    pub(crate) fn thread_ns() -> Option<u64> {
        read(libc::CLOCK_THREAD_CPUTIME_ID)
    }

    #[cfg(target_os = "linux")]
    pub(crate) fn process_ns() -> Option<u64> {
        read(libc::CLOCK_PROCESS_CPUTIME_ID)
    }

    #[cfg(not(target_os = "linux"))]
    pub fn thread_ns() -> Option<u64> {
        None
    }

    #[cfg(not(target_os = "linux"))]
    pub fn process_ns() -> Option<u64> {
        None
    }

    /// Minor page faults of this thread so far (0 where not available).
    #[cfg(target_os = "linux")]
    pub(crate) fn thread_faults() -> u64 {
        // SAFETY: all-zero is a valid `rusage` (plain integers and timevals).
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `ru` is a valid, writable rusage; getrusage only writes to it.
        let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
        if rc == 0 {
            ru.ru_minflt as u64
        } else {
            0
        }
    }

    #[cfg(not(target_os = "linux"))]
    pub fn thread_faults() -> u64 {
        0
    }
}

/// A configuration, installed: the dispatcher to measure under (`None`: no subscriber at all) and
/// what to do once its benchmark ran (flush and report, join writer threads).
struct Installed {
    dispatch: Option<Dispatch>,
    finish: Finish,
    /// Runs after every timed batch, untimed: lets a `ScopeLayer` flusher catch up (see the
    /// module docs, "Recording, not waiting").
    settle: Option<Box<dyn Fn()>>,
}

/// Runs after a benchmark, once its subscriber is dropped.
type Finish = Box<dyn FnOnce(&Ran) -> Option<Recorded>>;

/// What one benchmark did, for `finish`.
struct Ran<'a> {
    /// `span/<config>` or `poll/<config>`.
    id: &'a str,
    /// Span name of the measured callsite.
    span_name: &'static str,
}

/// What a `ScopeLayer` recorded during one benchmark, from its report.
struct Recorded {
    calls: u64,
    dropped: u64,
    /// Times the loop waited for the flusher (backpressure) and the time it waited, ns.
    waits: (u64, u64),
    /// How long `finalize()` and then dropping the guard took.
    teardown: (Duration, Duration),
}

impl Installed {
    fn none() -> Self {
        Installed {
            dispatch: None,
            finish: Box::new(|_| None),
            settle: None,
        }
    }

    fn new(dispatch: Dispatch) -> Self {
        Installed {
            dispatch: Some(dispatch),
            finish: Box::new(|_| None),
            settle: None,
        }
    }

    fn finish_with(mut self, finish: impl FnOnce(&Ran) -> Option<Recorded> + 'static) -> Self {
        self.finish = Box::new(finish);
        self
    }

    fn settle_with(mut self, settle: impl Fn() + 'static) -> Self {
        self.settle = Some(Box::new(settle));
        self
    }
}

/// Builds a `ScopeLayer` from a builder expression (everything but output and build) on top of
/// the bare registry; `finalize()` runs after the benchmark, then the guard's drop stops the
/// flusher.
macro_rules! scope_config {
    ($builder:expr) => {{
        let (layer, guard) = $builder
            .no_output()
            .summary(false)
            .buffer_budget(BENCH_BUFFER_BUDGET)
            .build()
            .unwrap_or_else(|e| panic!("ScopeLayer::build failed: {e}"));
        let recording = layer.mode() != Mode::Disabled;
        let guard = std::rc::Rc::new(guard);
        let settling = guard.clone();
        Installed::new(Dispatch::new(tracing_subscriber::registry().with(layer)))
            .settle_with(move || {
                if recording {
                    settle(&settling)
                }
            })
            .finish_with(move |ran: &Ran| {
                let t0 = Instant::now();
                let report = guard.finalize();
                let t1 = Instant::now();
                drop(guard); // the last reference (`settle` is gone): stops the flusher
                let teardown = (t1 - t0, t1.elapsed());
                match report {
                    Ok(report) => Some(Recorded {
                        calls: report.region(ran.span_name).map_or(0, |r| r.calls),
                        dropped: report.dropped(),
                        waits: (report.backpressure_waits(), report.backpressure_wait_ns()),
                        teardown,
                    }),
                    Err(e) => {
                        eprintln!("[overhead] {}: finalize failed: {e}", ran.id);
                        None
                    }
                }
            })
    }};
}

/// Buffer budget of the measured `ScopeLayer`s: room for the backlog of the largest sample
/// (~130 ms of recording at ~20 ns per record, minus what the flusher drains meanwhile), so
/// the loop never waits for the flusher (module docs, "Recording, not waiting").
const BENCH_BUFFER_BUDGET: usize = 256 << 20;

/// Waits, untimed, until the flusher has read everything recorded so far: two more complete
/// drains, the second of which started after this call (a drain reads what was published
/// before it started). Bounded, so a stuck flusher cannot hang the bench.
fn settle(guard: &scope_profiler::FlushGuard) {
    let d0 = guard.flusher_drains();
    let t0 = Instant::now();
    while guard.flusher_drains() < d0 + 2 && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Runs both benchmarks of one configuration, each under a freshly built subscriber (so drops
/// and background work are attributed to one benchmark). Expands its own `info_span!` callsites
/// (see the module docs); `$install` is evaluated once per benchmark, each time after the
/// previous subscriber was dropped.
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
                let timer = Timer::start();
                for _ in 0..iters {
                    let span = info_span!("bench_span");
                    let _entered = span.enter();
                    black_box(&span);
                }
                timer.elapsed()
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
                let timer = Timer::start();
                for _ in 0..iters {
                    // black_box: without it, the check of a disabled span is hoisted out of the
                    // loop and `no_subscriber` measures an empty loop (0.0 ns).
                    let _entered = black_box(span).enter();
                }
                timer.elapsed()
            },
        );
    }};
}

/// The event-checkpoint benchmark of one configuration: `info!` inside an entered span, one
/// `tracing` event per operation (the line-timing hot path when `line_timing(true)`). Its own
/// callsites per configuration, as in `bench_config!`.
macro_rules! bench_event {
    ($c:expr, $name:literal, $install:expr) => {{
        run_bench(
            $c,
            concat!("event/", $name),
            "bench_event_span",
            1,
            $install,
            || info_span!("bench_event_span").entered(),
            |_span, iters| {
                let timer = Timer::start();
                for _ in 0..iters {
                    tracing::info!("checkpoint");
                }
                timer.elapsed()
            },
        );
    }};
}

/// Like `scope_config!`, with the profiler paused (`FlushGuard::pause`) while measured.
macro_rules! scope_paused_config {
    ($builder:expr) => {{
        let (layer, guard) = $builder
            .no_output()
            .summary(false)
            .build()
            .unwrap_or_else(|e| panic!("ScopeLayer::build failed: {e}"));
        guard.pause();
        Installed::new(Dispatch::new(tracing_subscriber::registry().with(layer))).finish_with(
            move |_| {
                drop(guard);
                None
            },
        )
    }};
}

/// Runs one benchmark: installs `installed` on this thread, calls `setup` under it, measures
/// `timed(&setup_output, iters)`, drops everything, runs the configuration's `finish`, then
/// reports (stderr, and a JSON line to `$OVERHEAD_EXTRA` when set).
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
    let Installed {
        dispatch,
        finish,
        settle,
    } = installed;
    let mut ops = 0u64;
    let mut enabled = false;
    // CPU time of the other threads of this process (flusher, writer threads) while measuring.
    let mut background_ns = None;
    // Page faults this thread took inside the timed loops (a new buffer's first write).
    let mut faults = 0u64;
    let body = || {
        let state = setup();
        let cpu0 = cpu_time::process_ns().zip(cpu_time::thread_ns());
        let mut group = c.benchmark_group(group);
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                ops = ops.saturating_add(iters);
                let f0 = cpu_time::thread_faults();
                let took = timed(&state, iters);
                faults += cpu_time::thread_faults() - f0;
                if let Some(settle) = &settle {
                    settle();
                }
                took
            })
        });
        group.finish();
        let cpu1 = cpu_time::process_ns().zip(cpu_time::thread_ns());
        if let (Some((p0, t0)), Some((p1, t1))) = (cpu0, cpu1) {
            background_ns = Some((p1 - p0).saturating_sub(t1 - t0));
        }
        // Whether this dispatcher's span callsites are live, checked on a third callsite.
        enabled = !info_span!("bench_probe").is_disabled();
        drop(state);
    };
    match &dispatch {
        Some(dispatch) => dispatcher::with_default(dispatch, body),
        None => body(),
    }
    // The spans held clones of the dispatch and are closed by now. Drop the subscriber before
    // finishing, so the next benchmark starts with no live dispatcher.
    drop(dispatch);
    drop(settle);
    let recorded = finish(&Ran { id, span_name });
    if ops == 0 {
        return; // filtered out
    }

    let bg_per_op = background_ns.map(|ns| ns as f64 / ops as f64);
    let mut line = format!(
        "[overhead] {id}: spans {}, max level {}, {ops} ops",
        if enabled { "enabled" } else { "disabled" },
        LevelFilter::current(),
    );
    if let Some(bg) = bg_per_op {
        line += &format!(", background CPU {bg:.1} ns/op");
    }
    line += &format!(
        ", {:.3} page faults per 1k ops in the loop",
        1000.0 * faults as f64 / ops as f64
    );
    if let Some(r) = &recorded {
        let records = ops.saturating_mul(callbacks_per_op);
        line += &format!(
            ", {} calls recorded, dropped {} of ~{records} records ({:.2}%)",
            r.calls,
            r.dropped,
            100.0 * r.dropped as f64 / records as f64
        );
        line += &format!(
            ", waited for the flusher {} times ({:.1} ms)",
            r.waits.0,
            r.waits.1 as f64 / 1e6
        );
        line += &format!(
            ", finalize {:.2} s, guard drop {:.2} s",
            r.teardown.0.as_secs_f64(),
            r.teardown.1.as_secs_f64()
        );
    }
    eprintln!("{line}");

    if let Some(path) = std::env::var_os("OVERHEAD_EXTRA").filter(|p| !p.is_empty()) {
        let opt = |v: Option<String>| v.unwrap_or_else(|| "null".into());
        let json = format!(
            "{{\"id\":\"{id}\",\"clock\":\"{}\",\"ops\":{ops},\"enabled\":{enabled},\
             \"background_ns_per_op\":{},\"calls\":{},\"dropped\":{},\"waits\":{},\
             \"finalize_s\":{}}}\n",
            clock_kind().name(),
            opt(bg_per_op.map(|v| format!("{v:.3}"))),
            opt(recorded.as_ref().map(|r| r.calls.to_string())),
            opt(recorded.as_ref().map(|r| r.dropped.to_string())),
            opt(recorded.as_ref().map(|r| r.waits.0.to_string())),
            opt(recorded
                .as_ref()
                .map(|r| format!("{:.3}", r.teardown.0.as_secs_f64()))),
        );
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(json.as_bytes()));
        if let Err(e) = written {
            eprintln!(
                "[overhead] cannot append to {}: {e}",
                path.to_string_lossy()
            );
        }
    }
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
    Installed::new(Dispatch::new(tracing_subscriber::registry().with(layer))).finish_with(
        move |_| {
            drop(guard);
            None
        },
    )
}

/// Whether a sink configuration builds on this machine; says why not, loudly, when it does not.
#[allow(dead_code)] // unused when no sink feature is on
fn sink_available(name: &str, builder: scope_profiler::Builder) -> bool {
    match builder.no_output().summary(false).build() {
        Ok((_layer, guard)) => {
            drop(guard);
            true
        }
        Err(e) => {
            eprintln!("[overhead] skipping the {name} sink: {e}");
            false
        }
    }
}

fn main() {
    let mut c = Criterion::default()
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_secs(1))
        .sample_size(30)
        .configure_from_args();
    eprintln!("[overhead] timing with the {} clock", clock_kind().name());
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
    // The baseline: the registry with a layer that does nothing (the bare registry is
    // anomalously slow on some VMs; ratios against it flatter).
    bench_config!(
        &mut c,
        "registry_noop",
        Installed::new(Dispatch::new(tracing_subscriber::registry().with(Noop)))
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
    // Per-sink cost (no target; reported). Each needs its cargo feature, and the machine's
    // support: a sink that cannot be built here is skipped with the reason.
    #[cfg(feature = "perf")]
    if sink_available("perf", ScopeLayer::builder().perf_events(["task-clock"])) {
        bench_config!(
            &mut c,
            "scope_perf",
            scope_config!(ScopeLayer::builder().perf_events(["task-clock"]))
        );
    }
    #[cfg(feature = "nvtx")]
    if sink_available("nvtx", ScopeLayer::builder().nvtx(true)) {
        bench_config!(
            &mut c,
            "scope_nvtx",
            scope_config!(ScopeLayer::builder().nvtx(true))
        );
    }
    // LIKWID is not benchmarked: its marker state is process-wide and closes with the first
    // profiler, so a second LIKWID profiler in one process is refused (by design).
    #[cfg(feature = "cuda")]
    if sink_available("cuda", ScopeLayer::builder().cuda_timing(true)) {
        bench_config!(
            &mut c,
            "scope_cuda",
            scope_config!(ScopeLayer::builder().cuda_timing(true))
        );
    }
    // Pause switch: the paused layer beside the bare registry (target: <= 2 ns per callback
    // over `registry`).
    bench_config!(
        &mut c,
        "scope_paused",
        scope_paused_config!(ScopeLayer::builder().mode(Mode::TimeOnly))
    );
    // Event checkpoints: the registry's own cost for the event, the profiler without line
    // timing (events untouched) and with it (one EVENT record per event).
    bench_event!(
        &mut c,
        "registry",
        Installed::new(Dispatch::new(tracing_subscriber::registry()))
    );
    bench_event!(
        &mut c,
        "scope_timeonly",
        scope_config!(ScopeLayer::builder().mode(Mode::TimeOnly))
    );
    bench_event!(
        &mut c,
        "scope_lines",
        scope_config!(ScopeLayer::builder().mode(Mode::TimeOnly).line_timing(true))
    );
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

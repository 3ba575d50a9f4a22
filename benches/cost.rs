//! What a span costs the user's whole process: the honest cost benchmark.
//!
//! ```text
//! cargo bench --bench cost                       # 7 interleaved rounds, every shape
//! cargo bench --bench cost -- --rounds 5 --shapes span,poll --scale 0.5
//! ```
//!
//! Every configuration runs **unpinned, with default settings** (default buffer budget, the
//! flusher running beside the program, output to a real HDF5 file in a temporary directory),
//! exactly as a user runs it. The baseline is the registry with one empty layer
//! (`registry().with(Noop)`): what any real program pays for `tracing` itself. The bare
//! `Registry` with no layer is shown too, labelled, but never used as the baseline (it is
//! anomalously slow on some VMs, which would flatter the profiler). So is the *clock floor*: a
//! subscriber that only reads the TSC at each enter and exit, what timing every poll costs on
//! this machine before anything is recorded.
//!
//! For each shape and configuration a run reports, per operation:
//! - **wall**: the instrumented thread's wall time over the measured loop;
//! - **thread**: that thread's CPU time over the loop (the isolated hot-path figure);
//! - **process**: the CPU time of every thread of the process (the flusher's share included)
//!   from the first span until the flusher has drained, folded and spooled every record of the
//!   run: [`FlushGuard::sync`](scope_profiler::FlushGuard::sync) is a barrier inside the timed
//!   interval, not an untimed catch-up;
//! - **flusher**: the flusher thread's CPU time over the same interval.
//!
//! Shapes:
//! - `span`: `info_span!` create + enter + exit + close on one thread;
//! - `poll`: enter + exit of one span created before the loop (one poll each);
//! - `async3`: an `#[instrument]`ed async fn whose future is polled three times (it yields
//!   twice), awaited in a loop inside one Tokio task on a current-thread runtime;
//! - `request`: a task per request on a 2-worker multi-thread runtime: each request is a
//!   spawned task running an `#[instrument]`ed handler (two polls) with one child span inside.
//!
//! Rounds are interleaved (every configuration of a shape runs once per round, in a rotating
//! order), and the table shows the median over rounds of each figure and of its ratio to the
//! baseline of the same round. After each run the profiler's report is checked: the counts
//! must be exact (no drop, which would flatter the figures); a run that is not says so in the
//! `exact` column. The file is written after the timed interval (finalize is not measured
//! here; see `examples/finalize_shapes.rs`).
//!
//! Results also go, one JSON object per run, to `$COST_JSON` when set.

use std::time::Instant;

use scope_profiler::{FlushGuard, Mode, ScopeLayer};
use tracing::{info_span, Dispatch, Subscriber};
use tracing_subscriber::prelude::*;

/// A layer that does nothing: with the registry, the baseline every real program pays.
struct Noop;
impl<S: Subscriber> tracing_subscriber::Layer<S> for Noop {}

/// The floor of timing every poll: a subscriber whose spans are a counter and whose enter and
/// exit only read the TSC (as `ScopeSubscriber` does, once each) and throw it away. Nothing is
/// recorded, so no profiler that times each poll can cost less than this row on this machine.
#[derive(Default)]
struct ClockFloor {
    next: std::sync::atomic::AtomicU64,
}

impl ClockFloor {
    #[inline(always)]
    fn tick() {
        // SAFETY: `rdtsc` has no preconditions on x86_64; it reads the time-stamp counter.
        #[cfg(target_arch = "x86_64")]
        std::hint::black_box(unsafe { core::arch::x86_64::_rdtsc() });
        #[cfg(not(target_arch = "x86_64"))]
        std::hint::black_box(Instant::now());
    }
}

impl Subscriber for ClockFloor {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        tracing::span::Id::from_u64(id + 1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, _: &tracing::Event<'_>) {}
    fn enter(&self, _: &tracing::span::Id) {
        Self::tick();
    }
    fn exit(&self, _: &tracing::span::Id) {
        Self::tick();
    }
}

/// The configurations measured, in table order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Config {
    /// `tracing_subscriber::registry()` alone (labelled; not the baseline).
    Registry,
    /// `registry().with(Noop)`: the baseline.
    Noop,
    /// `ScopeLayer`, default settings (`TimeOnly`).
    TimeOnly,
    /// `ScopeLayer` with `track_async(true)`.
    TrackAsync,
    /// `ScopeLayer` in `Aggregate` mode.
    Aggregate,
    /// `ScopeSubscriber`, default settings.
    SubTimeOnly,
    /// `ScopeSubscriber` with `track_async(true)`.
    SubTrackAsync,
    /// `ScopeSubscriber` in `Aggregate` mode.
    SubAggregate,
    /// [`ClockFloor`]: a subscriber that reads the TSC at every enter and exit and keeps
    /// nothing (labelled; the floor of any profiler that times every poll on this machine).
    ClockFloor,
    /// `ScopeLayer` with `flight_recorder(60 s)` (only when `--configs` names it).
    Flight,
    /// `ScopeSubscriber` with `flight_recorder(60 s)` (only when `--configs` names it).
    SubFlight,
    /// `Flight` with `flight_min_duration(10 us)` (only when `--configs` names it).
    Flight10us,
    /// `SubFlight` with `flight_min_duration(10 us)` (only when `--configs` names it).
    SubFlight10us,
    /// `Flight` with `flight_min_duration(1 ms)` (only when `--configs` names it).
    Flight1ms,
    /// `SubFlight` with `flight_min_duration(1 ms)` (only when `--configs` names it).
    SubFlight1ms,
}

impl Config {
    const ALL: [Config; 9] = [
        Config::Registry,
        Config::Noop,
        Config::TimeOnly,
        Config::TrackAsync,
        Config::Aggregate,
        Config::SubTimeOnly,
        Config::SubTrackAsync,
        Config::SubAggregate,
        Config::ClockFloor,
    ];
    /// Measured only when `--configs` names them.
    const EXTRA: [Config; 6] = [
        Config::Flight,
        Config::SubFlight,
        Config::Flight10us,
        Config::SubFlight10us,
        Config::Flight1ms,
        Config::SubFlight1ms,
    ];

    fn name(self) -> &'static str {
        match self {
            Config::Registry => "registry (no layer)",
            Config::Noop => "registry + Noop (baseline)",
            Config::TimeOnly => "ScopeLayer TimeOnly",
            Config::TrackAsync => "ScopeLayer track_async",
            Config::Aggregate => "ScopeLayer Aggregate",
            Config::SubTimeOnly => "ScopeSubscriber TimeOnly",
            Config::SubTrackAsync => "ScopeSubscriber track_async",
            Config::SubAggregate => "ScopeSubscriber Aggregate",
            Config::ClockFloor => "clock floor (2 TSC reads a poll, nothing kept)",
            Config::Flight => "ScopeLayer flight_recorder(60 s)",
            Config::SubFlight => "ScopeSubscriber flight_recorder(60 s)",
            Config::Flight10us => "ScopeLayer flight_recorder, min 10 us",
            Config::SubFlight10us => "ScopeSubscriber flight_recorder, min 10 us",
            Config::Flight1ms => "ScopeLayer flight_recorder, min 1 ms",
            Config::SubFlight1ms => "ScopeSubscriber flight_recorder, min 1 ms",
        }
    }

    fn key(self) -> &'static str {
        match self {
            Config::Registry => "registry",
            Config::Noop => "noop",
            Config::TimeOnly => "timeonly",
            Config::TrackAsync => "track_async",
            Config::Aggregate => "aggregate",
            Config::SubTimeOnly => "sub_timeonly",
            Config::SubTrackAsync => "sub_track_async",
            Config::SubAggregate => "sub_aggregate",
            Config::ClockFloor => "clock_floor",
            Config::Flight => "flight",
            Config::SubFlight => "sub_flight",
            Config::Flight10us => "flight_10us",
            Config::SubFlight10us => "sub_flight_10us",
            Config::Flight1ms => "flight_1ms",
            Config::SubFlight1ms => "sub_flight_1ms",
        }
    }

    /// The dispatcher and, for the profiler, its guard.
    fn install(self, dir: &std::path::Path, tag: &str) -> (Dispatch, Option<FlushGuard>) {
        let profiler = |b: scope_profiler::Builder| {
            let (layer, guard) = b
                .output(dir.join(format!("{tag}.h5")))
                .summary(false)
                .build()
                .expect("build the profiler");
            (
                Dispatch::new(tracing_subscriber::registry().with(layer)),
                Some(guard),
            )
        };
        let subscriber = |b: scope_profiler::Builder| {
            let (sub, guard) = b
                .output(dir.join(format!("{tag}.h5")))
                .summary(false)
                .build_subscriber()
                .expect("build the profiler");
            (Dispatch::new(sub), Some(guard))
        };
        match self {
            Config::Registry => (Dispatch::new(tracing_subscriber::registry()), None),
            Config::Noop => (
                Dispatch::new(tracing_subscriber::registry().with(Noop)),
                None,
            ),
            Config::TimeOnly => profiler(ScopeLayer::builder()),
            Config::TrackAsync => profiler(ScopeLayer::builder().track_async(true)),
            Config::Aggregate => profiler(ScopeLayer::builder().mode(Mode::Aggregate)),
            Config::SubTimeOnly => subscriber(ScopeLayer::builder()),
            Config::SubTrackAsync => subscriber(ScopeLayer::builder().track_async(true)),
            Config::SubAggregate => subscriber(ScopeLayer::builder().mode(Mode::Aggregate)),
            Config::ClockFloor => (Dispatch::new(ClockFloor::default()), None),
            Config::Flight => profiler(ScopeLayer::builder().flight_recorder(FLIGHT_WINDOW)),
            Config::SubFlight => subscriber(ScopeLayer::builder().flight_recorder(FLIGHT_WINDOW)),
            Config::Flight10us => profiler(flight_min(10_000)),
            Config::SubFlight10us => subscriber(flight_min(10_000)),
            Config::Flight1ms => profiler(flight_min(1_000_000)),
            Config::SubFlight1ms => subscriber(flight_min(1_000_000)),
        }
    }
}

/// The flight recorder's window in the `flight` configurations.
const FLIGHT_WINDOW: std::time::Duration = std::time::Duration::from_secs(60);

/// The flight recorder with a threshold of `ns`.
fn flight_min(ns: u64) -> scope_profiler::Builder {
    ScopeLayer::builder()
        .flight_recorder(FLIGHT_WINDOW)
        .flight_min_duration(std::time::Duration::from_nanos(ns))
}

/// The shapes measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    Span,
    Poll,
    Async3,
    Request,
}

impl Shape {
    const ALL: [Shape; 4] = [Shape::Span, Shape::Poll, Shape::Async3, Shape::Request];

    fn key(self) -> &'static str {
        match self {
            Shape::Span => "span",
            Shape::Poll => "poll",
            Shape::Async3 => "async3",
            Shape::Request => "request",
        }
    }

    /// Operations per run at scale 1.
    fn ops(self) -> u64 {
        match self {
            Shape::Span => 2_000_000,
            Shape::Poll => 10_000_000,
            Shape::Async3 => 1_000_000,
            Shape::Request => 200_000,
        }
    }

    /// The region whose calls the report must count exactly, and how many per operation.
    fn checked_region(self) -> (&'static str, u64) {
        match self {
            Shape::Span => ("cost_span", 1),
            // One span polled `ops` times is one call.
            Shape::Poll => ("cost_poll", 0),
            Shape::Async3 => ("cost_async3", 1),
            Shape::Request => ("cost_request", 1),
        }
    }

    /// Which configurations run this shape.
    fn configs(self) -> Vec<Config> {
        Config::ALL.iter().chain(&Config::EXTRA).copied().collect()
    }
}

/// CPU clocks, in ns.
fn cpu_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; clock_gettime only writes into it.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime({clock})");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn thread_cpu() -> u64 {
    cpu_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

fn process_cpu() -> u64 {
    cpu_ns(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// One run's figures, per operation (ns).
#[derive(Clone, Copy, Debug, Default)]
struct Figures {
    wall: f64,
    thread: f64,
    process: f64,
    flusher: f64,
}

#[path = "common/futures.rs"]
mod futures;
use futures::{async3, request};

/// Times the measured part of one run; `body` runs the operations on this thread (or drives
/// a runtime from it).
fn measure(guard: Option<&FlushGuard>, ops: u64, body: impl FnOnce()) -> Figures {
    let flusher0 = guard.map_or(0, |g| g.flusher_cpu_ns());
    let p0 = process_cpu();
    let t0 = thread_cpu();
    let w0 = Instant::now();
    body();
    let wall = w0.elapsed().as_nanos() as f64;
    let thread = (thread_cpu() - t0) as f64;
    if let Some(g) = guard {
        // The barrier: the flusher drains, folds and spools everything recorded above.
        g.sync().expect("sync the profiler");
    }
    let process = (process_cpu() - p0) as f64;
    let flusher = guard.map_or(0, |g| g.flusher_cpu_ns()) - flusher0;
    let n = ops as f64;
    Figures {
        wall: wall / n,
        thread: thread / n,
        process: process / n,
        flusher: flusher.max(0) as f64 / n,
    }
}

fn run_shape(shape: Shape, dispatch: &Dispatch, guard: Option<&FlushGuard>, ops: u64) -> Figures {
    match shape {
        Shape::Span => tracing::dispatcher::with_default(dispatch, || {
            measure(guard, ops, || {
                for _ in 0..ops {
                    info_span!("cost_span").in_scope(|| std::hint::black_box(()));
                }
            })
        }),
        Shape::Poll => tracing::dispatcher::with_default(dispatch, || {
            let span = info_span!("cost_poll");
            let f = measure(guard, ops, || {
                for _ in 0..ops {
                    let _e = span.enter();
                    std::hint::black_box(());
                }
            });
            drop(span);
            f
        }),
        Shape::Async3 => {
            let rt = tokio::runtime::Builder::new_current_thread()
                .build()
                .expect("runtime");
            tracing::dispatcher::with_default(dispatch, || {
                measure(guard, ops, || {
                    rt.block_on(async {
                        tokio::spawn(async move {
                            for _ in 0..ops {
                                async3().await;
                            }
                        })
                        .await
                        .expect("the loop task")
                    })
                })
            })
        }
        Shape::Request => {
            let d = dispatch.clone();
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .on_thread_start(move || {
                    // The worker's default for its whole life (the runtime ends after the run).
                    std::mem::forget(tracing::dispatcher::set_default(&d));
                })
                .build()
                .expect("runtime");
            let f = tracing::dispatcher::with_default(dispatch, || {
                measure(guard, ops, || {
                    rt.block_on(async {
                        // Requests in flight at once: a bounded window, as a server has.
                        const WINDOW: u64 = 256;
                        let mut handles = std::collections::VecDeque::new();
                        let mut sum = 0u64;
                        for i in 0..ops {
                            if handles.len() as u64 >= WINDOW {
                                let h: tokio::task::JoinHandle<u64> =
                                    handles.pop_front().expect("non-empty");
                                sum = sum.wrapping_add(h.await.expect("request"));
                            }
                            handles.push_back(tokio::spawn(request(i)));
                        }
                        for h in handles {
                            sum = sum.wrapping_add(h.await.expect("request"));
                        }
                        std::hint::black_box(sum);
                    })
                })
            });
            rt.shutdown_timeout(std::time::Duration::from_secs(10));
            f
        }
    }
}

/// Options from the command line (cargo bench passes `--bench` too; it is ignored).
struct Options {
    rounds: usize,
    scale: f64,
    shapes: Vec<Shape>,
    configs: Option<Vec<String>>,
}

fn options() -> Options {
    let mut o = Options {
        rounds: 7,
        scale: 1.0,
        shapes: Shape::ALL.to_vec(),
        configs: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| panic!("{a} needs a value"));
        match a.as_str() {
            "--rounds" => o.rounds = value().parse().expect("--rounds N"),
            "--scale" => o.scale = value().parse().expect("--scale X"),
            "--shapes" => {
                let v = value();
                o.shapes = Shape::ALL
                    .into_iter()
                    .filter(|s| v.split(',').any(|w| w == s.key()))
                    .collect();
            }
            "--configs" => o.configs = Some(value().split(',').map(str::to_owned).collect()),
            _ => {} // --bench, filters
        }
    }
    o
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn main() {
    let o = options();
    let dir = tempfile::tempdir().expect("temporary directory");
    let mut json = std::env::var_os("COST_JSON").map(|p| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .expect("open $COST_JSON")
    });
    println!(
        "cost: {} rounds, scale {}, unpinned, default settings; per operation, ns",
        o.rounds, o.scale
    );
    for shape in &o.shapes {
        let configs: Vec<Config> = shape
            .configs()
            .into_iter()
            .filter(|c| {
                *c == Config::Noop
                    || o.configs.as_ref().map_or(!Config::EXTRA.contains(c), |v| {
                        v.iter().any(|k| k == c.key())
                    })
            })
            .collect();
        let ops = ((shape.ops() as f64 * o.scale) as u64).max(1000);
        // Per configuration: figures of every round, and their ratios to that round's baseline.
        let mut runs: Vec<Vec<Figures>> = vec![Vec::new(); configs.len()];
        let mut exact = vec![true; configs.len()];
        // Times the recording thread waited for the flusher (its buffers full), per config.
        let mut waits = vec![0u64; configs.len()];
        for round in 0..o.rounds {
            let mut this_round = vec![Figures::default(); configs.len()];
            for k in 0..configs.len() {
                // Rotate the order so no configuration always runs first or after another.
                let i = (k + round) % configs.len();
                let config = configs[i];
                let tag = format!("{}-{}-{round}", shape.key(), config.key());
                let (dispatch, guard) = config.install(dir.path(), &tag);
                let f = run_shape(*shape, &dispatch, guard.as_ref(), ops);
                drop(dispatch);
                if let Some(g) = guard {
                    let report = g.finalize().expect("finalize");
                    let (region, per_op) = shape.checked_region();
                    let want = if per_op == 0 { 1 } else { ops * per_op };
                    let got = report.region(region).map_or(0, |r| r.calls);
                    waits[i] += report.backpressure_waits();
                    if got != want || report.dropped_calls() != 0 {
                        exact[i] = false;
                        eprintln!(
                            "cost: {tag}: {got} calls of {region}, expected {want}; {} dropped",
                            report.dropped_calls()
                        );
                    }
                    drop(g);
                    let _ = std::fs::remove_file(dir.path().join(format!("{tag}.h5")));
                }
                this_round[i] = f;
                if let Some(out) = json.as_mut() {
                    use std::io::Write as _;
                    let _ = writeln!(
                        out,
                        "{{\"shape\":\"{}\",\"config\":\"{}\",\"round\":{round},\"ops\":{ops},\
                         \"wall\":{:.2},\"thread\":{:.2},\"process\":{:.2},\"flusher\":{:.2}}}",
                        shape.key(),
                        config.key(),
                        f.wall,
                        f.thread,
                        f.process,
                        f.flusher
                    );
                }
            }
            for (i, f) in this_round.into_iter().enumerate() {
                runs[i].push(f);
            }
        }
        print_table(*shape, ops, &configs, &runs, &exact, &waits);
    }
}

fn print_table(
    shape: Shape,
    ops: u64,
    configs: &[Config],
    runs: &[Vec<Figures>],
    exact: &[bool],
    waits: &[u64],
) {
    let base = configs
        .iter()
        .position(|c| *c == Config::Noop)
        .expect("the baseline runs");
    println!();
    println!("### {} ({} ops per run)", shape.key(), ops);
    println!();
    println!(
        "| configuration | wall | vs baseline | thread CPU | vs baseline | process CPU | vs baseline | flusher CPU | exact | waits |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---|---:|");
    for (i, c) in configs.iter().enumerate() {
        let pick = |f: fn(&Figures) -> f64| median(runs[i].iter().map(f).collect());
        let ratio = |f: fn(&Figures) -> f64| {
            median(
                runs[i]
                    .iter()
                    .zip(&runs[base])
                    .map(|(a, b)| f(a) / f(b))
                    .collect(),
            )
        };
        println!(
            "| {} | {:.1} | {:.2}x | {:.1} | {:.2}x | {:.1} | {:.2}x | {:.1} | {} | {} |",
            c.name(),
            pick(|f| f.wall),
            ratio(|f| f.wall),
            pick(|f| f.thread),
            ratio(|f| f.thread),
            pick(|f| f.process),
            ratio(|f| f.process),
            pick(|f| f.flusher),
            if exact[i] { "yes" } else { "NO" },
            waits[i],
        );
    }
}

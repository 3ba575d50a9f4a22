//! Service benchmark: a small Tokio key-value server over TCP with an `#[instrument]`
//! connection span (open for the whole connection) and one span per command, driven by a
//! load generator on loopback with a bounded number of requests.
//!
//! Four configurations run interleaved, round after round, in one process:
//! - `noop`: the same server under `registry().with(Noop)`, a layer that does nothing: the
//!   baseline, what any program pays for `tracing` itself;
//! - `bare`: the bare `tracing_subscriber::registry()` (shown, labelled; not the baseline);
//! - `layer`: ScopeLayer with `track_async(true)` writing a file, default settings;
//! - `off`: ScopeLayer built with `SCOPE_PROFILER=off`;
//! - with `--live`, `live`: `layer` with `live(true)` (a 200 ms spool sync, for `scopeprof top`);
//! - with `--flight`, `flight`: `layer` with `flight_recorder(60 s)`, and `flight_10us`: that
//!   with `flight_min_duration(10 us)`.
//!
//! It prints the median, over rounds, of each configuration's throughput and process CPU per
//! request (every thread: server, clients, flusher) and of their ratios to the same round's
//! `noop`; the profiler's CPU includes the flusher draining the round's records
//! (`FlushGuard::sync` inside the measured interval). Then the flusher's CPU per request and
//! the time `finalize()` + drop take after the last request. A last part runs one connection
//! with many commands (`--one-connection N`, default 1 M) and reports the exit time after its
//! last call.
//!
//! ```text
//! cargo run --release --example service_bench [-- --rounds 7 --clients 8 --requests 5000 --one-connection 1000000 --short-tasks 1000000 --work 0 --live --flight]
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use scope_profiler::ScopeLayer;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tracing::instrument;
use tracing_subscriber::prelude::*;

type Db = Arc<Mutex<HashMap<String, String>>>;

/// One command: `SET k v` or `GET k`.
#[instrument(skip_all)]
fn apply(db: &Db, line: &str) -> String {
    let mut parts = line.split_whitespace();
    match (parts.next(), parts.next(), parts.next()) {
        (Some("SET"), Some(k), Some(v)) => {
            db.lock().unwrap().insert(k.to_owned(), v.to_owned());
            "OK\n".to_owned()
        }
        (Some("GET"), Some(k), None) => match db.lock().unwrap().get(k) {
            Some(v) => format!("{v}\n"),
            None => "NIL\n".to_owned(),
        },
        _ => "ERR\n".to_owned(),
    }
}

/// A connection: one span open from accept to hang-up, one `apply` per command.
#[instrument(skip_all)]
async fn connection(stream: TcpStream, db: Db) -> std::io::Result<()> {
    let (r, mut w) = stream.into_split();
    let mut lines = BufReader::new(r).lines();
    while let Some(line) = lines.next_line().await? {
        let reply = apply(&db, &line);
        w.write_all(reply.as_bytes()).await?;
    }
    Ok(())
}

async fn serve(listener: TcpListener, db: Db) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            return;
        };
        stream.set_nodelay(true).ok();
        tokio::spawn(connection(stream, db.clone()));
    }
}

/// A client: `requests` request/response round trips on one connection.
async fn client(addr: std::net::SocketAddr, id: usize, requests: u64) {
    let stream = TcpStream::connect(addr).await.expect("connect");
    stream.set_nodelay(true).ok();
    let (r, mut w) = stream.into_split();
    let mut lines = BufReader::new(r).lines();
    for k in 0..requests {
        let cmd = if k % 2 == 0 {
            format!("SET key{id}-{} {k}\n", k % 64)
        } else {
            format!("GET key{id}-{}\n", (k - 1) % 64)
        };
        w.write_all(cmd.as_bytes()).await.expect("write");
        lines.next_line().await.expect("read").expect("reply");
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Config {
    Noop,
    Bare,
    Layer,
    Off,
    /// `Layer` with `live(true)` (a 200 ms spool sync, for `scopeprof top`): with `--live`.
    Live,
    /// `Layer` with `flight_recorder(60 s)`: with `--flight`.
    Flight,
    /// `Flight` with `flight_min_duration(10 us)`: with `--flight`.
    Flight10us,
}

/// A layer that does nothing: with the registry, the baseline.
struct Noop;
impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Noop {}

struct Round {
    req_per_s: f64,
    /// Process CPU (all threads: server, clients, flusher) per request, ns.
    cpu_ns_per_req: f64,
    flusher_ns_per_req: f64,
    exit_s: f64,
}

/// One round: a fresh server runtime (2 workers) under `config`, `clients` clients with
/// `requests` each on a separate client runtime (2 workers, not instrumented).
fn round(config: Config, clients: usize, requests: u64, dir: &std::path::Path, k: usize) -> Round {
    let mut guard = None;
    let dispatch = match config {
        Config::Noop => tracing::Dispatch::new(tracing_subscriber::registry().with(Noop)),
        Config::Bare => tracing::Dispatch::new(tracing_subscriber::registry()),
        Config::Layer | Config::Off | Config::Live | Config::Flight | Config::Flight10us => {
            if config == Config::Off {
                std::env::set_var("SCOPE_PROFILER", "off");
            }
            let mut b = ScopeLayer::builder()
                .output(dir.join(format!("service-{k}.h5")))
                .track_async(true)
                .summary(false)
                .live(config == Config::Live);
            if matches!(config, Config::Flight | Config::Flight10us) {
                b = b.flight_recorder(Duration::from_secs(60));
            }
            if config == Config::Flight10us {
                b = b.flight_min_duration(Duration::from_micros(10));
            }
            let (layer, g) = b.build().expect("build");
            std::env::remove_var("SCOPE_PROFILER");
            guard = Some(g);
            tracing::Dispatch::new(tracing_subscriber::registry().with(layer))
        }
    };
    let d = dispatch.clone();
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .on_thread_start(move || std::mem::forget(tracing::dispatcher::set_default(&d)))
        .build()
        .expect("runtime");
    let client_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let listener = server_rt
        .block_on(TcpListener::bind("127.0.0.1:0"))
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    server_rt.spawn(serve(listener, Db::default()));
    let cpu0 = guard.as_ref().map_or(0, |g| g.flusher_cpu_ns());
    let process0 = process_cpu_ns();
    let t0 = Instant::now();
    client_rt.block_on(async {
        let hs: Vec<_> = (0..clients)
            .map(|id| tokio::spawn(client(addr, id, requests)))
            .collect();
        for h in hs {
            h.await.expect("client");
        }
    });
    let elapsed = t0.elapsed().as_secs_f64();
    if let Some(g) = &guard {
        // The flusher's work on this round's records is part of what the round costs.
        g.sync().expect("sync");
    }
    let process = process_cpu_ns() - process0;
    let total = clients as u64 * requests;
    // Connections end when the clients hang up; give the server a moment to see it.
    drop(client_rt);
    std::thread::sleep(Duration::from_millis(20));
    drop(server_rt);
    let t_exit = Instant::now();
    let flusher = match guard {
        Some(g) => {
            let r = g.finalize().expect("finalize");
            let cpu = g.flusher_cpu_ns() - cpu0;
            if config == Config::Layer {
                let cmds = r.region("apply").map_or(0, |r| r.calls);
                assert_eq!(cmds, total, "every command profiled");
            }
            drop(g);
            cpu as f64 / total as f64
        }
        None => 0.0,
    };
    Round {
        req_per_s: total as f64 / elapsed,
        cpu_ns_per_req: process as f64 / total as f64,
        flusher_ns_per_req: flusher,
        exit_s: t_exit.elapsed().as_secs_f64(),
    }
}

/// CPU time of the whole process (user + system, every thread), ns.
fn process_cpu_ns() -> i64 {
    // SAFETY: `ru` is a valid, writable rusage; getrusage only writes into it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_SELF is always valid.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0;
    }
    let us = |t: libc::timeval| t.tv_sec * 1_000_000 + t.tv_usec;
    (us(ru.ru_utime) + us(ru.ru_stime)) * 1000
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let rounds = arg("--rounds", 7) as usize;
    let clients = arg("--clients", 8) as usize;
    let requests = arg("--requests", 5_000);
    let one = arg("--one-connection", 1_000_000);
    let dir = tempfile_dir();
    let mut configs = vec![Config::Noop, Config::Bare, Config::Layer, Config::Off];
    if std::env::args().any(|a| a == "--live") {
        configs.push(Config::Live);
    }
    if std::env::args().any(|a| a == "--flight") {
        configs.extend([Config::Flight, Config::Flight10us]);
    }
    // Per configuration, per round: (req/s, process CPU per request).
    let mut runs: HashMap<&str, Vec<(f64, f64)>> = HashMap::new();
    let mut flusher = Vec::new();
    let mut exit = Vec::new();
    // One warm-up round of each, not counted.
    for (k, c) in configs.iter().enumerate() {
        round(*c, clients, requests / 5, &dir, 100 + k);
    }
    for r in 0..rounds {
        // Rotate the order each round, so no configuration always runs first.
        let n = configs.len();
        for i in 0..n {
            let (k, c) = ((i + r) % n, configs[(i + r) % n]);
            let x = round(c, clients, requests, &dir, r * n + k);
            runs.entry(name(c))
                .or_default()
                .push((x.req_per_s, x.cpu_ns_per_req));
            if c == Config::Layer {
                flusher.push(x.flusher_ns_per_req);
                exit.push(x.exit_s);
            }
        }
    }
    if rounds > 0 {
        print_table(rounds, clients, requests, &configs, &runs);
        println!(
            "flusher CPU per request (layer): {:.0} ns (median); finalize + drop after the last \
             request: {:.3} s (median)",
            median(flusher),
            median(exit)
        );
    }
    if one > 0 {
        let x = round(Config::Layer, 1, one, &dir, 999);
        println!(
            "one connection, {one} commands: {:.0} req/s, flusher {:.0} ns/request, \
             finalize + drop after the last call {:.3} s",
            x.req_per_s, x.flusher_ns_per_req, x.exit_s
        );
    }
    let short = arg("--short-tasks", 1_000_000);
    if short > 0 {
        short_tasks(short, &dir, false);
        short_tasks(short, &dir, true);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The interleaved rounds' table: medians over rounds, ratios to the same round's `noop`.
fn print_table(
    rounds: usize,
    clients: usize,
    requests: u64,
    configs: &[Config],
    runs: &HashMap<&str, Vec<(f64, f64)>>,
) {
    let base = &runs[name(Config::Noop)];
    println!(
        "service_bench: {rounds} rounds x {clients} clients x {requests} requests, interleaved; \
         medians over rounds"
    );
    println!("| configuration | req/s | vs. noop | process CPU per request | vs. noop |");
    println!("|---|---:|---:|---:|---:|");
    for c in configs {
        let r = &runs[name(*c)];
        let tput = median(r.iter().map(|x| x.0).collect());
        let cpu = median(r.iter().map(|x| x.1).collect());
        let tput_ratio = median(r.iter().zip(base).map(|(x, b)| x.0 / b.0).collect());
        let cpu_ratio = median(r.iter().zip(base).map(|(x, b)| x.1 / b.1).collect());
        println!(
            "| {} | {:.0} | {:.3}x | {:.2} us | {:.3}x |",
            name(*c),
            tput,
            tput_ratio,
            cpu / 1e3,
            cpu_ratio
        );
    }
}

/// Resident set size of this process (MiB), from /proc.
fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

#[instrument(skip_all)]
async fn request(k: u64) -> u64 {
    tokio::task::yield_now().await;
    // Some work per request (`--work N` iterations), so the rate can be set below what the
    // flusher assembles.
    (0..work()).fold(k, |a, x| std::hint::black_box(a.wrapping_mul(31) ^ x))
}

fn work() -> u64 {
    static WORK: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *WORK.get_or_init(|| arg("--work", 0))
}

/// A task per request: `n` short tasks with one instrumented span each (4 workers, at most
/// 1000 alive at once); RSS growth while recording and the finalize time of that phase.
fn short_tasks(n: u64, dir: &std::path::Path, on: bool) {
    if !on {
        std::env::set_var("SCOPE_PROFILER", "off");
    }
    let built = ScopeLayer::builder()
        .output(dir.join("short.h5"))
        .track_async(true)
        .summary(false)
        .build();
    std::env::remove_var("SCOPE_PROFILER");
    let (layer, guard) = built.expect("build");
    let d = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    let d2 = d.clone();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .on_thread_start(move || std::mem::forget(tracing::dispatcher::set_default(&d2)))
        .build()
        .expect("runtime");
    let before = rss_mib();
    let t0 = Instant::now();
    let peak = rt.block_on(async move {
        let mut peak = 0f64;
        let mut left = n;
        while left > 0 {
            let batch = left.min(1000);
            left -= batch;
            let hs: Vec<_> = (0..batch).map(|k| tokio::spawn(request(k))).collect();
            for h in hs {
                h.await.expect("task");
            }
            if left.is_multiple_of(50_000) {
                peak = peak.max(rss_mib());
            }
        }
        peak
    });
    let run_s = t0.elapsed().as_secs_f64();
    drop(rt);
    let after = rss_mib().max(peak);
    let t1 = Instant::now();
    let report = guard.finalize().expect("finalize");
    let fin = t1.elapsed().as_secs_f64();
    let calls = report.region("request").map_or(0, |r| r.calls);
    let dropped = report.dropped();
    let flusher_us = guard.flusher_cpu_ns() as f64 / 1e3 / n as f64;
    drop(d);
    println!(
        "{n} short tasks, profiler {}: {calls} calls in {run_s:.2} s, RSS +{:.1} MiB while \
         recording (peak {after:.1} MiB), {dropped} records dropped, flusher {flusher_us:.2} us \
         CPU per task, finalize {fin:.3} s",
        if on { "on" } else { "off (SCOPE_PROFILER=off)" },
        after - before
    );
}

fn name(c: Config) -> &'static str {
    match c {
        Config::Noop => "registry + Noop (baseline)",
        Config::Bare => "bare registry",
        Config::Layer => "ScopeLayer track_async(true)",
        Config::Off => "ScopeLayer, SCOPE_PROFILER=off",
        Config::Live => "ScopeLayer track_async(true), live(true)",
        Config::Flight => "ScopeLayer track_async(true), flight_recorder(60 s)",
        Config::Flight10us => "ScopeLayer track_async(true), flight_recorder, min 10 us",
    }
}

fn tempfile_dir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("service_bench-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

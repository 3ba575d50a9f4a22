//! The critical-path walk's speed and memory on a large file. Built with `--cfg tokio_unstable`:
//!
//! ```text
//! scripts/tokio-unstable-tests.sh run --release --example critical_scale -- write big.h5 500000
//! scripts/tokio-unstable-tests.sh run --release --example critical_scale -- walk big.h5
//! ```
//!
//! `write FILE N`: N requests on two workers, each spawning a child that computes a little
//! and awaiting its `JoinHandle` (2 N calls, about 4 N task polls, 2 N wakes and 2 N spawns
//! with Tokio's instrumentation). `walk FILE`: builds the index (`CriticalPaths::build`) and
//! walks every `request` call, printing the time of each step and the process's peak RSS
//! (VmHWM) before and after.

use std::time::{Duration, Instant};

use scope_profiler::read::critical::{CriticalPaths, Kind};
use scope_profiler::read::Profile;
use scope_profiler::ScopeLayer;
use tracing::Instrument;
use tracing_subscriber::prelude::*;

/// The process's peak resident set (MiB), from /proc/self/status.
fn peak_mib() -> f64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb = s
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0);
    kb / 1024.0
}

fn write(path: &str, n: u64) {
    scope_profiler_tokio_unstable_tests::require_tokio_unstable();
    let (layer, guard) = ScopeLayer::builder()
        .output(path)
        .track_async(true)
        .summary(false)
        .build()
        .expect("build");
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    let d = dispatch.clone();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .on_thread_start(move || std::mem::forget(tracing::dispatcher::set_default(&d)))
        .build()
        .expect("runtime");
    let t = Instant::now();
    tracing::dispatcher::with_default(&dispatch, || {
        rt.block_on(async {
            // At most 1000 requests in flight.
            let mut batch = Vec::with_capacity(1000);
            for i in 0..n {
                let request = async move {
                    let child = async move { std::hint::black_box(i * 3) };
                    tokio::spawn(child.instrument(tracing::info_span!("child")))
                        .await
                        .unwrap()
                };
                batch.push(tokio::spawn(
                    request.instrument(tracing::info_span!("request")),
                ));
                if batch.len() == 1000 {
                    for h in batch.drain(..) {
                        h.await.unwrap();
                    }
                }
            }
            for h in batch {
                h.await.unwrap();
            }
        })
    });
    drop(rt);
    guard.finalize().expect("finalize");
    println!(
        "wrote {path}: {n} requests in {:.1} s",
        t.elapsed().as_secs_f64()
    );
}

fn walk(path: &str) {
    let before = peak_mib();
    let profile = Profile::open(path).expect("open");
    let opened = peak_mib();
    let mut polls = 0u64;
    profile
        .for_each_poll(1 << 16, |c| {
            polls += c.iter().filter(|p| p.task >= 0).count() as u64;
            Ok(())
        })
        .expect("polls");
    let wakes = profile.wakes().expect("wakes").len();
    let read = peak_mib();
    println!("{polls} task polls, {wakes} wakes; peak RSS {opened:.0} MiB after open, {read:.0} MiB after reading the polls and wakes");
    let t = Instant::now();
    let paths = CriticalPaths::build(&profile).expect("index");
    let built = t.elapsed();
    let after_build = peak_mib();
    let calls = paths.calls(&profile, "request").expect("calls");
    let t = Instant::now();
    let (mut segments, mut blocked) = (0u64, Duration::ZERO);
    for c in &calls {
        let p = paths.walk(c);
        segments += p.segments.len() as u64;
        let ns: i64 = p
            .segments
            .iter()
            .filter(|s| s.kind == Kind::BlockedOn)
            .map(|s| s.dur_ns())
            .sum();
        blocked += Duration::from_nanos(ns as u64);
    }
    let walked = t.elapsed();
    println!(
        "{} request calls ({} calls in the file): index {:.2} s, walks {:.2} s ({:.0} ns per call, {} segments); \
         peak RSS {before:.0} MiB before, {after_build:.0} MiB after the index, {:.0} MiB at the end; blocked-on {:.1} ms in all",
        calls.len(),
        profile.event_count(),
        built.as_secs_f64(),
        walked.as_secs_f64(),
        walked.as_nanos() as f64 / calls.len().max(1) as f64,
        segments,
        peak_mib(),
        blocked.as_secs_f64() * 1e3,
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("write") => write(
            &args[2],
            args.get(3).map_or(500_000, |n| n.parse().expect("N")),
        ),
        Some("walk") => walk(&args[2]),
        _ => eprintln!("usage: critical_scale write FILE [N] | walk FILE"),
    }
}

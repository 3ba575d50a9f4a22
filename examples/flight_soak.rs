//! The flight recorder over a long run: a Tokio service (a task per request, an
//! `#[instrument]`ed handler with a child span) under continuous load for `--seconds`
//! (default 60), as fast as it goes or at `--rate` requests a second, with
//! `flight_recorder(--window, default 60 s)` at the default disk budget.
//! Every second it samples the ring's bytes on disk and the process's resident memory, and
//! prints the calls recorded, the disk and memory at a tenth of the run and their maximum, so
//! that a run 10 times as long can be held against a short one: both must stay flat once the
//! window is full. It ends with a dump of the window and checks the whole run's statistics.
//!
//! ```text
//! cargo run --release --example flight_soak -- --seconds 60
//! cargo run --release --example flight_soak -- --seconds 600
//! cargo run --release --example flight_soak -- --seconds 90 --rate 20000
//! ```

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing_subscriber::prelude::*;

#[tracing::instrument]
async fn handle(id: u64) -> u64 {
    let x = tracing::info_span!("parse").in_scope(|| (0..200).fold(id, |a, b| a ^ b));
    tokio::task::yield_now().await;
    x
}

/// The profiler's bytes on disk: the ring (`.soak.h5.flight-*`) and the spool
/// (`.soak.h5.spool`, statistics only with the flight recorder).
fn ring_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().starts_with(".soak.h5."))
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// Resident memory, KiB.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map_or(default, |v| v.parse().expect("a number"))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let seconds = arg("--seconds", 60);
    let window = arg("--window", 60);
    let rate = arg("--rate", 0);
    let dir = tempfile::tempdir()?;
    let (layer, guard) = scope_profiler::ScopeLayer::builder()
        .output(dir.path().join("soak.h5"))
        .summary(false)
        .track_async(true)
        .flight_recorder(Duration::from_secs(window))
        .build()?;
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    let d = dispatch.clone();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .on_thread_start(move || std::mem::forget(tracing::dispatcher::set_default(&d)))
        .build()?;
    let served = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let load = {
        let (served, stop) = (served.clone(), stop.clone());
        rt.spawn(async move {
            let mut id = 0;
            let t0 = tokio::time::Instant::now();
            while !stop.load(Ordering::Relaxed) {
                if rate > 0 {
                    // Paced: the next batch is due when `rate` a second have been served.
                    let due = Duration::from_secs_f64(id as f64 / rate as f64);
                    tokio::time::sleep_until(t0 + due).await;
                }
                let batch: Vec<_> = (0..64)
                    .map(|_| {
                        id += 1;
                        tokio::spawn(handle(id))
                    })
                    .collect();
                for t in batch {
                    t.await.expect("a request");
                }
                served.fetch_add(64, Ordering::Relaxed);
            }
        })
    };
    let t0 = Instant::now();
    let (mut disk_max, mut rss_max, mut at_tenth) = (0u64, 0u64, None);
    while t0.elapsed() < Duration::from_secs(seconds) {
        std::thread::sleep(Duration::from_secs(1));
        let (disk, rss) = (ring_bytes(dir.path()), rss_kib());
        disk_max = disk_max.max(disk);
        rss_max = rss_max.max(rss);
        if at_tenth.is_none() && t0.elapsed() >= Duration::from_secs(seconds / 10) {
            at_tenth = Some((disk, rss));
        }
    }
    let (disk_end, rss_end) = (ring_bytes(dir.path()), rss_kib());
    let dump = guard.dump(dir.path().join("last.h5"))?;
    stop.store(true, Ordering::Relaxed);
    rt.block_on(load)?;
    drop(rt);
    let n = served.load(Ordering::Relaxed);
    let (disk_tenth, rss_tenth) = at_tenth.unwrap_or((0, 0));
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    println!(
        "{seconds} s, window {window} s: {n} requests ({:.0}/s); ring and spool on disk: {:.1} MiB at a \
         tenth, {:.1} MiB at the end, {:.1} MiB at most; RSS: {:.1} MiB at a tenth, {:.1} MiB \
         at the end, {:.1} MiB at most; the dump covers {:.1} s with {} requests",
        n as f64 / seconds as f64,
        mib(disk_tenth),
        mib(disk_end),
        mib(disk_max),
        rss_tenth as f64 / 1024.0,
        rss_end as f64 / 1024.0,
        rss_max as f64 / 1024.0,
        dump.window_ns().unwrap_or(0) as f64 / 1e9,
        dump.region("handle").map_or(0, |r| r.calls),
    );
    let total = guard.finalize()?.region("handle").map_or(0, |r| r.calls);
    assert_eq!(total, n, "the run's statistics count every request");
    Ok(())
}

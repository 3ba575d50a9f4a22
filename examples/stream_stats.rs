//! Measures the streamed output on a long run: N spans (default 20 M) recorded in a hot loop
//! with the default settings, then finalized into an HDF5 file. Prints RSS growth during the
//! run, records dropped, the finalize rate and the file's bytes per call (plain and gzip).
//!
//! ```text
//! cargo run --release --example stream_stats [-- SPANS]
//! SUMMARY=1 cargo run --release --example stream_stats   # also print the summary (finalize
//!                                                        # then nests every call for the tree)
//! ```

use std::time::{Duration, Instant};

use scope_profiler::ScopeLayer;
use tracing_subscriber::prelude::*;

/// Resident set size in KiB (Linux).
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn run(spans: u64, gzip: bool, dir: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    let out = dir.join(if gzip { "stream-gzip.h5" } else { "stream.h5" });
    let mut b = ScopeLayer::builder()
        .output(&out)
        .summary(std::env::var_os("SUMMARY").is_some());
    if gzip {
        b = b.gzip(4);
    }
    let (layer, guard) = b.build()?;
    let d = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    let rss0 = rss_kib();
    let peak = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(rss0));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let (peak, stop) = (peak.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                peak.fetch_max(rss_kib(), std::sync::atomic::Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let t0 = Instant::now();
    tracing::dispatcher::with_default(&d, || {
        for i in 0..spans {
            tracing::info_span!("hot").in_scope(|| std::hint::black_box(i));
        }
    });
    let run_s = t0.elapsed().as_secs_f64();
    // Let the flusher catch up, so the run's RSS is measured with the backlog drained.
    std::thread::sleep(Duration::from_millis(1200));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    sampler.join().unwrap();
    let run_peak = peak.load(std::sync::atomic::Ordering::Relaxed);
    let t1 = Instant::now();
    let report = guard.finalize()?;
    let fin_s = t1.elapsed().as_secs_f64();
    let calls = report.region("hot").map_or(0, |r| r.calls);
    let size = std::fs::metadata(&out)?.len();
    println!(
        "{} spans{}: run {:.2} s ({:.0} ns/span), RSS growth during run {:.1} MiB, dropped {}, \
         finalize {:.2} s ({:.1} M calls/s), file {:.1} MiB = {:.2} B/call",
        calls,
        if gzip { " (gzip 4)" } else { "" },
        run_s,
        run_s * 1e9 / spans as f64,
        (run_peak.saturating_sub(rss0)) as f64 / 1024.0,
        report.dropped(),
        fin_s,
        calls as f64 / fin_s / 1e6,
        size as f64 / (1 << 20) as f64,
        size as f64 / calls.max(1) as f64
    );
    drop(guard);
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let spans: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20_000_000);
    let dir = tempfile::tempdir()?;
    run(spans, false, dir.path())?;
    run(spans, true, dir.path())?;
    Ok(())
}

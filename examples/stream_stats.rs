//! Measures the streamed output on a long run: N spans (default 20 M) of one region recorded in
//! a hot loop with the default settings, then finalized into an HDF5 file. Prints the peak RSS
//! growth while recording and during finalize (both from `VmHWM`, the kernel's high-water mark,
//! reset between the two through `/proc/self/clear_refs`), records dropped, the finalize rate
//! and the file's bytes per call.
//!
//! ```text
//! cargo run --release --example stream_stats [-- SPANS [plain|gzip|summary|durable]]
//! ```
//!
//! `plain` (default): `summary(false)`; `gzip`: gzip level 4; `summary`: the summary printed
//! (finalize then nests the calls for the call tree); `durable`: `durable(true)`, and also the
//! cost of the fsyncs `durable` adds per flush, timed on the same file system.
//! Run one configuration per process, so one run's freed memory does not hide the next's.

use std::io::Write;
use std::time::{Duration, Instant};

use scope_profiler::ScopeLayer;
use tracing_subscriber::prelude::*;

/// A `/proc/self/status` figure in KiB (Linux).
fn status_kib(key: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// Resets `VmHWM` to the current RSS.
fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn run(spans: u64, mode: &str, dir: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    let out = dir.join("stream.h5");
    let mut b = ScopeLayer::builder()
        .output(&out)
        .summary(mode == "summary");
    if mode == "gzip" {
        b = b.gzip(4);
    }
    if mode == "durable" {
        b = b.durable(true);
    }
    let (layer, guard) = b.build()?;
    let d = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    reset_peak();
    let rss0 = status_kib("VmRSS:");
    let t0 = Instant::now();
    tracing::dispatcher::with_default(&d, || {
        for i in 0..spans {
            tracing::info_span!("hot").in_scope(|| std::hint::black_box(i));
        }
    });
    let run_s = t0.elapsed().as_secs_f64();
    // Let the flusher catch up, so finalize starts from the recording steady state.
    std::thread::sleep(Duration::from_millis(1200));
    let run_peak = status_kib("VmHWM:");
    let steady = status_kib("VmRSS:");
    reset_peak();
    let t1 = Instant::now();
    let report = guard.finalize()?;
    let fin_s = t1.elapsed().as_secs_f64();
    let fin_peak = status_kib("VmHWM:");
    let calls = report.region("hot").map_or(0, |r| r.calls);
    let size = std::fs::metadata(&out)?.len();
    println!(
        "{calls} spans ({mode}): run {run_s:.2} s ({:.0} ns/span), peak RSS growth recording \
         {:.1} MiB, finalize {:.1} MiB above the steady state; dropped {}; finalize {fin_s:.2} s \
         ({:.1} M calls/s); file {:.2} B/call",
        run_s * 1e9 / spans as f64,
        mib(run_peak.saturating_sub(rss0)),
        mib(fin_peak.saturating_sub(steady)),
        report.dropped(),
        calls as f64 / fin_s / 1e6,
        size as f64 / calls.max(1) as f64
    );
    drop(guard);
    if mode == "durable" {
        fsync_cost(dir)?;
    }
    Ok(())
}

/// What `durable(true)` adds per flush on this file system: an fsync of the spool's new
/// frames (1 MiB here, a busy interval's worth), timed against the plain write.
fn fsync_cost(dir: &std::path::Path) -> std::io::Result<()> {
    let path = dir.join("fsync-probe");
    let mut f = std::fs::File::create(&path)?;
    let frame = vec![7u8; 1 << 20];
    let (mut write_ns, mut sync_ns) = (Vec::new(), Vec::new());
    for _ in 0..20 {
        let t = Instant::now();
        f.write_all(&frame)?;
        write_ns.push(t.elapsed().as_nanos() as f64);
        let t = Instant::now();
        f.sync_data()?;
        sync_ns.push(t.elapsed().as_nanos() as f64);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2] / 1e6
    };
    println!(
        "per flush of 1 MiB: write {:.2} ms, + fsync {:.2} ms (median of 20)",
        median(&mut write_ns),
        median(&mut sync_ns)
    );
    std::fs::remove_file(&path)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let spans: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(20_000_000);
    let mode = args.next().unwrap_or_else(|| "plain".into());
    let dir = tempfile::tempdir_in(".")?;
    run(spans, &mode, dir.path())
}

//! Load-safety stress: N plain threads each record M spans as fast as they can, through the
//! public API only, and the run reports whether every call arrived.
//!
//! ```sh
//! cargo run --release --example stress_threads -- 8 1000000          # threads, spans each
//! LOSSY=1 cargo run --release --example stress_threads -- 8 1000000  # drop instead of waiting
//! ```
//! Prints calls reported vs. expected, dropped calls, backpressure waits, the time threads
//! spent waiting per call, and the RSS growth while recording (VmHWM).

use std::time::Instant;

use scope_profiler::ScopeLayer;
use tracing_subscriber::prelude::*;

fn status_kib(key: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let threads: usize = args.next().map_or(Ok(8), |a| a.parse())?;
    let spans: u64 = args.next().map_or(Ok(1_000_000), |a| a.parse())?;
    let dir = tempfile::tempdir()?;
    let out = dir.path().join("stress.h5");
    let rss0 = status_kib("VmRSS:");
    let lossy = std::env::var_os("LOSSY").is_some();
    let (layer, guard) = ScopeLayer::builder()
        .output(&out)
        .summary(false)
        .lossy(lossy)
        .build()?;
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            let d = dispatch.clone();
            s.spawn(move || {
                tracing::dispatcher::with_default(&d, || {
                    for _ in 0..spans {
                        let _g = tracing::info_span!("work").entered();
                    }
                })
            });
        }
    });
    let record_s = t0.elapsed().as_secs_f64();
    let rss_rec = status_kib("VmHWM:");
    let report = guard.finalize()?;
    let calls = report.region("work").map_or(0, |r| r.calls);
    let expected = threads as u64 * spans;
    println!(
        "threads {threads} x spans {spans}: calls {calls} of {expected} ({}), recorded in {record_s:.2} s",
        if calls == expected { "exact" } else { "some dropped whole, counted" }
    );
    println!(
        "dropped calls {} (records {}), backpressure waits {}, waited {:.1} ns per call",
        report.dropped_calls(),
        report.dropped(),
        report.backpressure_waits(),
        report.backpressure_wait_ns() as f64 / expected as f64
    );
    println!(
        "rss: start {} MiB, peak while recording +{} MiB",
        rss0 / 1024,
        rss_rec.saturating_sub(rss0) / 1024
    );
    // Every span is one whole call or one counted dropped call. Without `lossy`, drops happen
    // only when the flusher freed nothing for 100 ms (a machine too loaded to run it).
    if calls + report.dropped_calls() != expected {
        return Err(format!(
            "{calls} calls + {} dropped != {expected} spans",
            report.dropped_calls()
        )
        .into());
    }
    Ok(())
}

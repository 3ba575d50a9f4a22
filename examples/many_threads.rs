//! Memory over many short-lived threads: `cargo run --release --example many_threads -- N [off]`.
//! Spawns N threads, 8 at a time, each recording one span, and prints the RSS growth.
use scope_profiler::ScopeLayer;
use tracing_subscriber::prelude::*;

fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: usize = std::env::args().nth(1).map_or(Ok(100_000), |a| a.parse())?;
    let off = std::env::args().nth(2).is_some();
    let dir = tempfile::tempdir()?;
    let (layer, guard) = ScopeLayer::builder()
        .output(dir.path().join("t.h5"))
        .track_threads(true)
        .summary(false)
        .build()?;
    let d = if off {
        tracing::Dispatch::new(tracing_subscriber::registry())
    } else {
        tracing::Dispatch::new(tracing_subscriber::registry().with(layer))
    };
    let run = |k: usize| {
        for _ in 0..k / 8 {
            std::thread::scope(|s| {
                for _ in 0..8 {
                    let d = d.clone();
                    s.spawn(move || {
                        tracing::dispatcher::with_default(&d, || {
                            let _g = tracing::info_span!("work").entered();
                        })
                    });
                }
            });
        }
    };
    run(800);
    let before = rss_kib();
    run(n);
    std::thread::sleep(std::time::Duration::from_millis(50));
    println!("{n} threads: RSS growth {} KiB", rss_kib() - before);
    let report = guard.finalize()?;
    println!("calls {:?}", report.region("work").map(|r| r.calls));
    Ok(())
}

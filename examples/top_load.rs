//! A load for measuring `scopeprof top`: records N calls (default 1 M) of four regions on two
//! threads with a 200 ms `spool_sync_interval`, waits until they are spooled, and exits
//! without finalizing, leaving the spool as a crashed run would (`.<OUTPUT>.spool`).
//!
//! With a third argument, `PACE_US`, each thread sleeps that long after every request: a
//! program that runs for a while, to watch live (the spool is synced every 200 ms).
//!
//! ```text
//! cargo run --release --example top_load -- /tmp/load.h5 1000000
//! scopeprof top /tmp/load.h5 --once --window all
//! cargo run --release --example top_load -- /tmp/slow.h5 2000 5000 &   # ~5 s
//! scopeprof top /tmp/slow.h5
//! ```

use std::time::Duration;

use scope_profiler::ScopeLayer;
use tracing_subscriber::prelude::*;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let output = args.next().unwrap_or_else(|| "top_load.h5".into());
    let calls: u64 = args.next().map_or(Ok(1_000_000), |n| n.parse())?;
    let pace = Duration::from_micros(args.next().map_or(Ok(0), |n| n.parse())?);
    let (layer, guard) = ScopeLayer::builder()
        .output(&output)
        .summary(false)
        .spool_sync_interval(Duration::from_millis(200))
        .build()?;
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    let workers: Vec<_> = (0..2)
        .map(|t| {
            let d = dispatch.clone();
            std::thread::spawn(move || {
                tracing::dispatcher::with_default(&d, || {
                    for i in 0..calls / 2 {
                        let outer = tracing::info_span!("request").entered();
                        let name = i % 3;
                        match name {
                            0 => tracing::info_span!("parse").in_scope(|| std::hint::black_box(i)),
                            1 => tracing::info_span!("solve").in_scope(|| std::hint::black_box(t)),
                            _ => tracing::info_span!("send").in_scope(|| std::hint::black_box(i)),
                        };
                        drop(outer);
                        if !pace.is_zero() {
                            std::thread::sleep(pace);
                        }
                    }
                })
            })
        })
        .collect();
    for w in workers {
        w.join().expect("worker");
    }
    // Let the flusher spool everything, then "crash": the guard is never finalized.
    std::thread::sleep(Duration::from_secs(2));
    std::mem::forget(guard);
    std::process::exit(0);
}

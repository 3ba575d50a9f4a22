//! Quick start: a small Tokio program with `#[instrument]` async fns, sync `info_span!`
//! blocks and a CPU loop, profiled by ScopeLayer (or, with `--subscriber`, by
//! ScopeSubscriber: the same file). Writes `profiling_data.h5` (or the path given) and prints
//! the summary table.
//!
//! ```text
//! cargo run --release --example quickstart [-- [--subscriber] out.h5]
//! ```

use std::time::Duration;

use scope_profiler::{Mode, ScopeLayer};
use tracing::{info_span, instrument};
use tracing_subscriber::prelude::*;

/// A CPU-bound kernel: a few hundred microseconds of arithmetic.
fn crunch(n: u64) -> u64 {
    let _s = info_span!("crunch").entered();
    (0..n).fold(0u64, |acc, x| {
        acc.wrapping_mul(31).wrapping_add(x ^ (x >> 3))
    })
}

/// An async "request": waits on I/O (a timer here), then does some CPU work.
#[instrument(skip_all)]
async fn handle_request(id: u64) -> u64 {
    tokio::time::sleep(Duration::from_millis(2 + id % 3)).await;
    let parsed = info_span!("parse").in_scope(|| crunch(20_000 + id));
    tokio::time::sleep(Duration::from_millis(1)).await;
    parsed
}

#[instrument]
async fn serve(requests: u64) -> u64 {
    let tasks: Vec<_> = (0..requests)
        .map(|id| tokio::spawn(handle_request(id)))
        .collect();
    let mut acc = 0u64;
    for t in tasks {
        acc = acc.wrapping_add(t.await.expect("task"));
    }
    acc
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // `quickstart [--subscriber] [OUTPUT]`: `--subscriber` profiles with ScopeSubscriber, the
    // front end for programs whose only `tracing` consumer is the profiler.
    let args: Vec<String> = std::env::args().skip(1).collect();
    let subscriber = args.iter().any(|a| a == "--subscriber");
    let output = args
        .iter()
        .find(|a| *a != "--subscriber")
        .cloned()
        .unwrap_or_else(|| "profiling_data.h5".into());
    let builder = ScopeLayer::builder()
        .mode(Mode::TimeOnly)
        .output(&output)
        .track_async(true)
        .label("quickstart");
    let guard = if subscriber {
        // Same file, no registry underneath: no layers, no `LookupSpan`, events not logged.
        let (sub, guard) = builder.build_subscriber()?;
        tracing::subscriber::set_global_default(sub)?;
        guard
    } else {
        let (layer, guard) = builder.build()?;
        tracing_subscriber::registry().with(layer).init();
        guard
    };

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let served = rt.block_on(serve(200));

    // Sync phase: nested blocks and a CPU loop on the main thread.
    let mut checksum = served;
    {
        let _solve = info_span!("solve").entered();
        for step in 0..50 {
            let _s = info_span!("timestep", step).entered();
            checksum ^= crunch(50_000);
            info_span!("exchange").in_scope(|| std::thread::sleep(Duration::from_micros(200)));
        }
    }
    drop(rt);

    let report = guard.finalize()?; // prints the summary table to stderr
    println!(
        "wrote {output}: {} regions, {} calls, checksum {checksum:x}",
        report.regions().len(),
        report.regions().iter().map(|r| r.calls).sum::<u64>()
    );
    Ok(())
}

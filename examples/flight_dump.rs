//! What a flight-recorder dump costs: a program records spans as fast as one thread can
//! until the ring holds `--calls` calls (default 3 M, the last 60 s of a service at 50 k
//! calls/s), then asks for a dump while the same thread keeps recording. Prints the dump's
//! wall time, the calls in it, and the recording thread's throughput during the dump against
//! the second before it.
//!
//! ```text
//! cargo run --release --example flight_dump -- --calls 3000000
//! ```

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing_subscriber::prelude::*;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut calls: u64 = 3_000_000;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--calls" {
            calls = args.next().ok_or("--calls N")?.parse()?;
        }
    }
    let dir = tempfile::tempdir()?;
    let (layer, guard) = scope_profiler::ScopeLayer::builder()
        .output(dir.path().join("service.h5"))
        .summary(false)
        .flight_recorder(Duration::from_secs(600))
        .build()?;
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let worker = {
        let (done, stop, dispatch) = (done.clone(), stop.clone(), dispatch.clone());
        std::thread::spawn(move || {
            tracing::dispatcher::with_default(&dispatch, || {
                let mut x = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..1000 {
                        let _s = tracing::info_span!("request").entered();
                        x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                    }
                    done.fetch_add(1000, Ordering::Relaxed);
                }
            })
        })
    };
    let t0 = Instant::now();
    while done.load(Ordering::Relaxed) < calls {
        std::thread::sleep(Duration::from_millis(10));
    }
    let fill = t0.elapsed();
    // The recording thread's rate over the second before the dump...
    let (a, ta) = (done.load(Ordering::Relaxed), Instant::now());
    std::thread::sleep(Duration::from_secs(1));
    let (b, tb) = (done.load(Ordering::Relaxed), Instant::now());
    let before = (b - a) as f64 / (tb - ta).as_secs_f64();
    // ... and during it.
    let start = Instant::now();
    let dump = guard.dump(dir.path().join("dump.h5"))?;
    let took = start.elapsed();
    let c = done.load(Ordering::Relaxed);
    let during = (c - b) as f64 / (Instant::now() - tb).as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    worker.join().expect("the recording thread");
    let in_dump = dump.region("request").map_or(0, |r| r.calls);
    let size = std::fs::metadata(dump.file().ok_or("no file")?)?.len();
    println!(
        "filled {calls} calls in {:.1} s; dump: {in_dump} calls, {:.1} MiB, {:.2} s wall; \
         recording thread {:.2} M calls/s during the dump vs {:.2} M/s before ({:.2}x)",
        fill.as_secs_f64(),
        size as f64 / (1 << 20) as f64,
        took.as_secs_f64(),
        during / 1e6,
        before / 1e6,
        during / before
    );
    let total = guard.finalize()?.region("request").map_or(0, |r| r.calls);
    assert_eq!(
        total,
        done.load(Ordering::Relaxed),
        "the run's statistics are exact"
    );
    Ok(())
}

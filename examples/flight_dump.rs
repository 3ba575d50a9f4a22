//! What a flight-recorder dump costs: a program records spans as fast as one thread can
//! until the ring holds `--calls` calls (default 3 M, the last 60 s of a service at 50 k
//! calls/s); the same thread then goes on with work units of its own (no spans, so the ring
//! keeps those calls) while the main thread asks for a dump. Prints the dump's wall time, the
//! calls in it, and the working thread's throughput during the dump against the second
//! before it (both cores busy: the worker, and the flusher and the dump's writer).
//!
//! With `--min-us N` (`Builder::flight_min_duration`), calls shorter than N µs leave only
//! their place in the ring, and the dump counts them under their parents: `--min-us 1000000`
//! makes every call such a call, the dump's most work per call.
//!
//! ```text
//! cargo run --release --example flight_dump -- --calls 3000000
//! cargo run --release --example flight_dump -- --calls 3000000 --min-us 1000000
//! ```

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing_subscriber::prelude::*;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut calls: u64 = 3_000_000;
    let mut min_us: u64 = 0;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--calls" => calls = args.next().ok_or("--calls N")?.parse()?,
            "--min-us" => min_us = args.next().ok_or("--min-us N")?.parse()?,
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    let dir = tempfile::tempdir()?;
    let (layer, guard) = scope_profiler::ScopeLayer::builder()
        .output(dir.path().join("service.h5"))
        .summary(false)
        .flight_recorder(Duration::from_secs(600))
        .flight_min_duration(Duration::from_micros(min_us))
        .build()?;
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    let done = Arc::new(AtomicU64::new(0));
    let units = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let worker = {
        let (done, units, stop, dispatch) =
            (done.clone(), units.clone(), stop.clone(), dispatch.clone());
        std::thread::spawn(move || {
            tracing::dispatcher::with_default(&dispatch, || {
                let mut x = 0u64;
                // Recording: `calls` spans.
                while done.load(Ordering::Relaxed) < calls {
                    for _ in 0..1000 {
                        let _s = tracing::info_span!("request").entered();
                        x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                    }
                    done.fetch_add(1000, Ordering::Relaxed);
                }
                // Then work units of ~1 us each, counted, until stopped.
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..1000 {
                        x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                    }
                    units.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
    };
    let t0 = Instant::now();
    while done.load(Ordering::Relaxed) < calls {
        std::thread::sleep(Duration::from_millis(10));
    }
    let fill = t0.elapsed();
    // The working thread's rate over the second before the dump...
    let (a, ta) = (units.load(Ordering::Relaxed), Instant::now());
    std::thread::sleep(Duration::from_secs(1));
    let (b, tb) = (units.load(Ordering::Relaxed), Instant::now());
    let before = (b - a) as f64 / (tb - ta).as_secs_f64();
    // ... and during it.
    let start = Instant::now();
    let dump = guard.dump(dir.path().join("dump.h5"))?;
    let took = start.elapsed();
    let c = units.load(Ordering::Relaxed);
    let during = (c - b) as f64 / (Instant::now() - tb).as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    worker.join().expect("the recording thread");
    let in_dump = dump.region("request").map_or(0, |r| r.calls);
    let left_out: u64 = dump.calls_below_threshold().iter().map(|r| r.1).sum();
    let size = std::fs::metadata(dump.file().ok_or("no file")?)?.len();
    println!(
        "filled {calls} calls in {:.1} s; dump: {in_dump} calls and {left_out} left out, \
         {:.1} MiB, {:.2} s wall; working thread {:.0} k units/s during the dump vs {:.0} k/s \
         before ({:.2}x)",
        fill.as_secs_f64(),
        size as f64 / (1 << 20) as f64,
        took.as_secs_f64(),
        during / 1e3,
        before / 1e3,
        during / before
    );
    let total = guard.finalize()?.region("request").map_or(0, |r| r.calls);
    assert_eq!(
        total,
        done.load(Ordering::Relaxed),
        "the run's statistics are exact"
    );
    assert_eq!(
        in_dump + left_out,
        total,
        "the dump holds or counts every call of its window"
    );
    Ok(())
}

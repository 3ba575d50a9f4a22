//! An MPI program profiled into one file: run it with
//!
//! ```text
//! cargo build --release --features mpi --example mpi
//! mpirun -n 4 target/release/examples/mpi [CALLS_PER_RANK] [OUTPUT] [WORK] [relay|parallel]
//! ```
//!
//! (as root, add `--allow-run-as-root`; with more ranks than cores, `--oversubscribe`; for the
//! parallel write build with `--features mpio` and `HDF5_DIR` set, see docs/mpi.md).
//! Rank r makes about `CALLS_PER_RANK x (1 + r/10)` calls of `step` inside `solve` (default
//! 100 000), so the ranks are a little imbalanced; every rank finalizes (collectively), rank 0
//! prints the summary with the spread over ranks, and then every rank's cost of the finalize:
//! the bytes it wrote (`/proc/self/io` wchar), its CPU time (all its threads), its wall time
//! and its peak resident memory (VmHWM). The last argument picks how the file is written
//! (`relay` forces the token relay; default: parallel when built with `mpio`).

use std::time::Instant;

use mpi::traits::*;
use scope_profiler::ScopeLayer;
use tracing_subscriber::prelude::*;

/// A field of a `/proc/self/<file>` line `<key>: <value> ...`.
fn proc_field(file: &str, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/self/{file}"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// CPU time of the whole process (every thread), ns.
fn process_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the call only writes into it.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// `f()` and what a rank measures around it: bytes written, CPU ns, wall ns, VmHWM KiB.
fn measure<T>(f: impl FnOnce() -> T) -> (T, [u64; 4]) {
    let (w0, c0, t) = (proc_field("io", "wchar:"), process_cpu_ns(), Instant::now());
    let out = f();
    let figures = [
        proc_field("io", "wchar:") - w0,
        process_cpu_ns() - c0,
        t.elapsed().as_nanos() as u64,
        proc_field("status", "VmHWM:"),
    ];
    (out, figures)
}

fn main() -> Result<(), scope_profiler::Error> {
    let mut args = std::env::args().skip(1);
    let calls: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let output = args.next().unwrap_or_else(|| "mpi_example.h5".into());
    // A little work per call (iterations of a dependent add), so that the flusher of each
    // rank keeps up when ranks share cores.
    let work: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(100);
    let relay = args.next().is_some_and(|a| a == "relay");
    let (layer, guard) = ScopeLayer::builder()
        .output(&output)
        .mpi(true) // initializes MPI here (this program does not), finalized at the drop
        .mpi_relay(relay)
        .label("examples/mpi")
        .build()?;
    tracing_subscriber::registry().with(layer).init();
    let world = mpi::topology::SimpleCommunicator::world();
    let rank = world.rank() as u64;
    let mine = calls + calls * rank / 10;
    let solve = tracing::info_span!("solve").entered();
    for i in 0..mine {
        let _s = tracing::info_span!("step").entered();
        let mut x = i;
        for _ in 0..work {
            x = std::hint::black_box(x.wrapping_add(1));
        }
    }
    drop(solve);
    let before = proc_field("status", "VmHWM:");
    // Start the clocks when every rank is done recording, so that the figures are the
    // finalize itself, not a rank waiting for slower ones.
    world.barrier();
    // Collective: every rank calls it.
    let (report, mine) = measure(|| guard.finalize());
    let report = report?;
    let root = world.process_at_rank(0);
    if rank != 0 {
        root.gather_into(&mine[..]);
    } else {
        let mut all = vec![0u64; 4 * world.size() as usize];
        root.gather_into_root(&mine[..], &mut all[..]);
        let how = report.mpi_write().map_or("-", |h| h.as_str());
        println!(
            "{} ranks, {calls} calls/rank (base), file written by {how}: {}; rank 0 VmHWM \
             {:.1} MiB before finalize",
            world.size(),
            report
                .file()
                .map_or("-".into(), |f| f.display().to_string()),
            before as f64 / 1024.0,
        );
        println!("rank  finalize wchar [MiB]  CPU [s]  wall [s]  VmHWM [MiB]");
        for (k, m) in all.chunks(4).enumerate() {
            println!(
                "{k:>4}  {:>20.1}  {:>7.3}  {:>8.3}  {:>11.1}",
                m[0] as f64 / (1 << 20) as f64,
                m[1] as f64 / 1e9,
                m[2] as f64 / 1e9,
                m[3] as f64 / 1024.0
            );
        }
        for s in report.ranks() {
            println!(
                "  {}: calls by rank {:?}, imbalance {:.1} %",
                s.name,
                s.calls,
                s.imbalance_pct()
            );
        }
    }
    drop(guard); // collective as well; then MPI is finalized
    Ok(())
}

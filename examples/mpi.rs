//! An MPI program profiled into one file: run it with
//!
//! ```text
//! cargo build --release --features mpi --example mpi
//! mpirun -n 4 target/release/examples/mpi [CALLS_PER_RANK] [OUTPUT] [WORK]
//! ```
//!
//! (as root, add `--allow-run-as-root`; with more ranks than cores, `--oversubscribe`).
//! Rank r makes about `CALLS_PER_RANK x (1 + r/10)` calls of `step` inside `solve` (default
//! 100 000), so the ranks are a little imbalanced; every rank finalizes (collectively), rank 0
//! prints the summary with the spread over ranks, and then its figures: the finalize time
//! and its peak resident memory (VmHWM) before and after the finalize.

use std::time::Instant;

use scope_profiler::ScopeLayer;
use tracing_subscriber::prelude::*;

fn vm_hwm_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn main() -> Result<(), scope_profiler::Error> {
    let mut args = std::env::args().skip(1);
    let calls: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let output = args.next().unwrap_or_else(|| "mpi_example.h5".into());
    // A little work per call (iterations of a dependent add), so that the flusher of each
    // rank keeps up when ranks share cores.
    let work: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(100);
    let (layer, guard) = ScopeLayer::builder()
        .output(&output)
        .mpi(true) // initializes MPI here (this program does not), finalized at the drop
        .label("examples/mpi")
        .build()?;
    tracing_subscriber::registry().with(layer).init();
    // This rank, as the launcher says (the profiler's MPI is initialized by now).
    let rank: u64 = std::env::var("OMPI_COMM_WORLD_RANK")
        .or_else(|_| std::env::var("PMI_RANK"))
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
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
    let before = vm_hwm_kib();
    // Start the clock when every rank is done recording, so that the figure is the finalize
    // itself, not rank 0 waiting for slower ranks.
    {
        use mpi::traits::CommunicatorCollectives;
        mpi::topology::SimpleCommunicator::world().barrier();
    }
    let t = Instant::now();
    let report = guard.finalize()?; // collective: every rank calls it
    let took = t.elapsed();
    if rank == 0 {
        println!(
            "rank 0: {} calls/rank (base), finalize {:.2} s, VmHWM {:.1} MiB before finalize, \
             {:.1} MiB after; file {}",
            calls,
            took.as_secs_f64(),
            before as f64 / 1024.0,
            vm_hwm_kib() as f64 / 1024.0,
            report
                .file()
                .map_or("-".into(), |f| f.display().to_string()),
        );
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

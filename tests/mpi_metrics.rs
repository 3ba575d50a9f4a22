//! Live metrics in a multi-rank run (features `mpi` and `prometheus`) under a real
//! `mpirun -n 2`: each rank serves on the configured port plus its node-local rank, every
//! series carries `rank="<world rank>"`, and each rank's endpoint has that rank's own counts
//! (rank 0 scrapes both).
//!
//! This test binary is its own MPI program (`harness = false`): run plainly, it launches
//! itself under `mpirun` with `SCOPE_MPI_METRICS_PORT` set; each rank exits non-zero when its
//! checks fail, which fails the `mpirun` and the test.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::time::Duration;

#[path = "common/mod.rs"]
mod common;

use mpi::traits::*;
use scope_profiler::ScopeLayer;
use tracing_subscriber::prelude::*;

const RANKS: u16 = 2;

/// Calls of `work` on rank r.
fn work_calls(rank: u16) -> u64 {
    10 * (u64::from(rank) + 1)
}

fn main() {
    match std::env::var("SCOPE_MPI_METRICS_PORT") {
        Ok(port) => rank_main(port.parse().expect("port")),
        Err(_) => launcher_main(),
    }
}

fn scrape(addr: SocketAddr) -> String {
    let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("{addr}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    answer
}

fn rank_main(port: u16) {
    let rank: u16 = std::env::var("OMPI_COMM_WORLD_RANK")
        .ok()
        .and_then(|v| v.parse().ok())
        .expect("run by mpirun");
    let dir = std::env::var("SCOPE_MPI_METRICS_OUT").expect("output dir");
    let (layer, guard) = ScopeLayer::builder()
        .output(std::path::Path::new(&dir).join("run.h5"))
        .summary(false)
        .mpi(true)
        .prometheus(("127.0.0.1", port))
        .build()
        .expect("build");
    let addr = guard.metrics_addr().expect("an endpoint");
    assert_eq!(
        addr.port(),
        port + rank,
        "rank {rank} serves on port + local rank"
    );
    let d = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    tracing::dispatcher::with_default(&d, || {
        for _ in 0..work_calls(rank) {
            tracing::info_span!("work").in_scope(|| ());
        }
    });
    guard.finalize().expect("finalize"); // collective; publishes this rank's metrics
    let own = scrape(addr);
    let line = format!(
        "scope_region_calls_total{{region=\"work\",rank=\"{rank}\"}} {}\n",
        work_calls(rank)
    );
    assert!(own.contains(&line), "rank {rank}: no `{line}` in\n{own}");
    assert!(own.contains(&format!("scope_dropped_calls_total{{rank=\"{rank}\"}} 0\n")));
    let world = mpi::topology::SimpleCommunicator::world();
    if rank == 0 {
        let other: SocketAddr = format!("127.0.0.1:{}", port + 1).parse().unwrap();
        let text = scrape(other);
        let line = format!(
            "scope_region_calls_total{{region=\"work\",rank=\"1\"}} {}\n",
            work_calls(1)
        );
        assert!(
            text.contains(&line),
            "rank 1's endpoint: no `{line}` in\n{text}"
        );
    }
    world.barrier(); // rank 1 serves until rank 0 has scraped it
    drop(guard); // collective too
}

/// A base port with the next `RANKS - 1` ports free too.
fn free_ports() -> u16 {
    for _ in 0..100 {
        let base = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if base < u16::MAX - RANKS
            && (1..RANKS).all(|k| TcpListener::bind(("127.0.0.1", base + k)).is_ok())
        {
            return base;
        }
    }
    panic!("no run of {RANKS} free ports");
}

fn launcher_main() {
    let mpirun = common::on_path("mpirun")
        .expect("`mpirun` is not on PATH; scripts/install-deps.sh installs OpenMPI");
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_ports();
    let status = Command::new(mpirun)
        .args(["--allow-run-as-root", "--oversubscribe", "-n"])
        .arg(RANKS.to_string())
        .args([
            "-x",
            "SCOPE_MPI_METRICS_PORT",
            "-x",
            "SCOPE_MPI_METRICS_OUT",
        ])
        .arg(std::env::current_exe().expect("exe"))
        .env("SCOPE_MPI_METRICS_PORT", port.to_string())
        .env("SCOPE_MPI_METRICS_OUT", dir.path())
        .env("OMPI_MCA_mpi_yield_when_idle", "1")
        .status()
        .expect("run mpirun");
    let name = "each_rank_serves_its_own_metrics_on_port_plus_local_rank";
    if status.success() {
        println!("test {name} ... ok");
    } else {
        // The ranks' messages went to this process's output above.
        println!("test {name} ... FAILED (mpirun: {status})");
        std::process::exit(1);
    }
}

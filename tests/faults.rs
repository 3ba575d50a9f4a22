//! The fault matrix: faults a long-running program meets (`kill -9` at every step of a
//! finalize, a full disk at every write, the output directory removed or read-only, `fork`,
//! `SIGTERM`, and the flight recorder's dumps on a full disk, under `kill -9` and across a
//! fork), each row a real child process (this binary, run again with
//! `SCOPE_FAULT_CHILD`), and what survived: calls the program completed, calls readable
//! afterwards (in the published file, or through recovery), calls counted as lost, and how
//! long the program took to exit. `harness = false`: run plainly, it runs every row (or the
//! rows whose name contains its first argument), prints the table and fails when a row
//! misses its pass conditions:
//!
//! - after a `kill -9`, what is missing is bounded by the calls of the last flush interval
//!   (plus the flusher's round and a margin) and the lane buffers, and nothing is missing
//!   once the phase's spool was moved aside;
//! - in every row without a kill, completed = readable + counted lost;
//! - no exit takes more than 2 s longer than the same program's exit without the fault
//!   (a forked child: 1 s after its last call).
//!
//! The file-system rows mount a small tmpfs each (root: the project's machines and CI run as
//! root); a read-only directory is a read-only bind mount over it. Mounts go when a row
//! ends, failed or not. `docs/faults.md` holds the table from a run.

#[path = "faults/child.rs"]
mod child;
#[path = "common/mod.rs"]
mod common;
#[path = "faults/flight.rs"]
mod flight;
#[path = "faults/forking.rs"]
mod forking;
#[path = "faults/rows.rs"]
mod rows;
#[path = "faults/run.rs"]
mod run;
#[path = "faults/table.rs"]
mod table;

fn main() {
    if let Ok(scenario) = std::env::var("SCOPE_FAULT_CHILD") {
        child::run(&scenario);
        return; // a return from `main`: the fork scenario's child relies on it
    }
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let started = std::time::Instant::now();
    let table = rows::run_all(filter.as_deref());
    println!("{}", table.render());
    println!(
        "fault matrix: {} rows in {:.1} s",
        table.rows.len(),
        started.elapsed().as_secs_f64()
    );
    if !table.problems.is_empty() {
        for p in &table.problems {
            eprintln!("FAILED: {p}");
        }
        std::process::exit(1);
    }
}

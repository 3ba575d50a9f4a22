//! Helpers shared by integration tests: a dispatcher for a profiler, a multi-thread Tokio
//! runtime whose workers use it, reading our HDF5 files back, and the Python reference reader.

#![allow(dead_code)]

pub(crate) mod shapes;

#[allow(unused_imports)]
pub(crate) use shapes::runtime;

use std::process::Command;

use scope_profiler::{Builder, FlushGuard};
use tracing_subscriber::prelude::*;

/// The front end the suites run against: `ScopeLayer` on the registry (default) or
/// `ScopeSubscriber` with `SCOPE_FRONT_END=subscriber`. `scripts/test.sh` runs the
/// compatibility, async, sink and load-safety suites once with each, so one copy of each suite
/// checks both.
pub(crate) fn front_end() -> &'static str {
    match std::env::var("SCOPE_FRONT_END").as_deref() {
        Ok("subscriber") => "subscriber",
        Ok("layer") | Err(_) => "layer",
        Ok(other) => panic!("SCOPE_FRONT_END={other}: expected `layer` or `subscriber`"),
    }
}

/// Builds the profiler with [`front_end`] and a dispatcher with it (the builder's own errors
/// returned).
pub(crate) fn try_dispatch(
    builder: Builder,
) -> Result<(tracing::Dispatch, FlushGuard), scope_profiler::Error> {
    if front_end() == "subscriber" {
        let (sub, guard) = builder.build_subscriber()?;
        return Ok((tracing::Dispatch::new(sub), guard));
    }
    let (layer, guard) = builder.build()?;
    Ok((
        tracing::Dispatch::new(tracing_subscriber::registry().with(layer)),
        guard,
    ))
}

/// Builds the profiler (no summary) with [`front_end`] and a dispatcher with it.
pub(crate) fn dispatch(builder: Builder) -> (tracing::Dispatch, FlushGuard) {
    try_dispatch(builder.summary(false)).expect("build")
}

/// A 1-D dataset of a profile file.
pub(crate) fn read<T: hdf5::H5Type>(file: &hdf5::File, name: &str) -> Vec<T> {
    file.dataset(name)
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .read_raw()
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// A 1-D string dataset.
pub(crate) fn read_strings(file: &hdf5::File, name: &str) -> Vec<String> {
    read::<hdf5::types::VarLenUnicode>(file, name)
        .into_iter()
        .map(|s| s.to_string())
        .collect()
}

/// The row range of region `name` in the events columns.
pub(crate) fn region_rows(file: &hdf5::File, name: &str) -> std::ops::Range<usize> {
    let names = read_strings(file, "region_table/names");
    let id = names.iter().position(|n| n == name).expect("region") as u32;
    let ids: Vec<u32> = read(file, "rank_region_index/region_ids");
    let row = ids.iter().position(|&i| i == id).expect("row");
    let off: Vec<u64> = read(file, "rank_region_index/event_offsets");
    let cnt: Vec<u64> = read(file, "rank_region_index/event_counts");
    off[row] as usize..(off[row] + cnt[row]) as usize
}

/// `venv()` (the Python reader), `output_isolated` (a child without our descriptors) and
/// `Tmpfs` (a small file system a test mounts), shared with the unit tests.
#[path = "../../src/testing.rs"]
mod testing;
pub(crate) use testing::venv;
#[allow(unused_imports)]
pub(crate) use testing::Tmpfs;

/// Runs a program of the venv; panics with its output unless it succeeds.
pub(crate) fn py(program: &str, args: &[&str]) -> String {
    let exe = venv().join("bin").join(program);
    let out = Command::new(&exe)
        .args(args)
        .env("NO_COLOR", "1")
        .env("COLUMNS", "200")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", exe.display()));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{program} {args:?} failed:\n{text}");
    text
}

/// Naive recursive Fibonacci with a `fib` span per level: a recursion shape for tests.
pub(crate) fn fib(n: u32) -> u64 {
    let _s = tracing::info_span!("fib").entered();
    if n < 2 {
        n as u64
    } else {
        fib(n - 1) + fib(n - 2)
    }
}

/// Reads a crash-test child's stdout until it has reported (`done N` lines) at least
/// `calls` calls, waits until those are two flush intervals old, then kills it (SIGKILL).
/// Returns the last count it reported.
pub(crate) fn kill_after(child: &mut std::process::Child, calls: u64) -> u64 {
    use std::io::{BufRead, BufReader};
    let mut lines = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
    let mut reported = 0u64;
    while reported < calls {
        let line = lines.next().expect("child output").expect("utf-8 line");
        if let Some(n) = line.strip_prefix("done ") {
            reported = n.parse().expect("a count");
        }
    }
    // Everything reported is at least two flush intervals old by the time we kill.
    std::thread::sleep(std::time::Duration::from_millis(150));
    child.kill().expect("kill"); // SIGKILL
    child.wait().expect("wait");
    reported
}

/// Runs the ignored test `name` of the current test binary in a child process (so memory
/// figures are its own) and returns the `RESULT key=value` lines it printed.
pub(crate) fn child(name: &str, env: &[(&str, &str)]) -> Vec<(String, String)> {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            name,
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{name} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .filter_map(|l| l.split_once("RESULT ").map(|(_, r)| r))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// The value of `key` among a child's results.
pub(crate) fn value(r: &[(String, String)], key: &str) -> u64 {
    r.iter()
        .find(|(k, _)| k == key)
        .unwrap_or_else(|| panic!("no {key} in {r:?}"))
        .1
        .parse()
        .unwrap()
}

/// A `/proc/self/status` figure in KiB (`VmRSS:`, `VmHWM:`).
pub(crate) fn status_kib(key: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap()
}

/// A program on PATH.
pub(crate) fn on_path(name: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

/// CPU time of the calling thread, ns.
pub(crate) fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Tests of one binary that compare profiled times with times they measure themselves take
/// turns through this lock: another test's work (a profiler measuring itself at `build()`,
/// busy loops, a flusher's rounds) on the second core would disturb both measurements.
pub(crate) fn timing_turn() -> std::sync::MutexGuard<'static, ()> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}

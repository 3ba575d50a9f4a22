//! The flight recorder's rows of the fault matrix (`Builder::flight_recorder`): a dump onto a
//! full disk, `kill -9` during a dump, a fork during a dump. Each child records `work` calls
//! with the flight recorder on, then dumps.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use scope_profiler::{DumpHandle, FlushGuard, ScopeLayer};
use tracing_subscriber::prelude::*;

use super::child::{checkpoint, record, report_outcome, result, Env};
use super::common::Tmpfs;
use super::run::spawn;
use super::table::{calls_in, entries, env, fill, secs, with, Row, Table};

const CALLS: u64 = 20_000;

/// The child's profiler, with the flight recorder and the checkpoint `hook`.
fn build(env: &Env, hook: fn(&'static str)) -> FlushGuard {
    let (layer, guard) = ScopeLayer::builder()
        .output(&env.out)
        .spool_sync_interval(Duration::from_millis(env.flush_ms))
        .flight_recorder(Duration::from_secs(600))
        .__checkpoints(hook)
        .build()
        .expect("build");
    tracing_subscriber::registry().with(layer).init();
    guard
}

/// Where the child dumps (`SCOPE_FAULT_DUMP`).
fn dump_path() -> PathBuf {
    PathBuf::from(std::env::var("SCOPE_FAULT_DUMP").expect("SCOPE_FAULT_DUMP"))
}

/// The child's side of the rows below.
pub(crate) fn child(env: &Env, scenario: &str) {
    match scenario {
        "dump-recover" => {
            // Only `build()`: it recovers what an earlier run's ring left.
            drop(build(env, checkpoint));
            return;
        }
        "dump-fork" => {
            let guard = build(env, fork_at_write);
            let _ = HANDLE.set(guard.dump_handle());
            dump_after_recording(env, &guard, true);
            return;
        }
        _ => {}
    }
    let guard = build(env, checkpoint);
    if scenario == "dump-full" {
        let n = record(env.calls, &AtomicBool::new(false), None);
        result("completed", n);
        match guard.dump(dump_path()) {
            Ok(_) => result("dump_error", "none"),
            Err(e) => result("dump_error", e.to_string().replace('\n', " ")),
        }
        if let Some(f) = &env.filler {
            std::fs::remove_file(f).expect("free the space");
        }
        dump_after_recording(env, &guard, false);
        return;
    }
    dump_after_recording(env, &guard, true);
}

/// Records `env.calls` calls (with `first`), dumps, finalizes.
fn dump_after_recording(env: &Env, guard: &FlushGuard, first: bool) {
    if first {
        let n = record(env.calls, &AtomicBool::new(false), None);
        result("completed", n);
    }
    let r = guard.dump(dump_path()).expect("the dump");
    result("dump_calls", r.region("work").map_or(0, |r| r.calls));
    report_outcome(guard.finalize());
}

static HANDLE: OnceLock<DumpHandle> = OnceLock::new();

/// The checkpoint hook of `dump-fork`: at the dump's HDF5 write (the temporary file begun,
/// the dump's thread inside the HDF5 library), the process forks; the child asks for a dump
/// and reports what it got, then leaves at once.
fn fork_at_write(point: &'static str) {
    static FORKED: AtomicBool = AtomicBool::new(false);
    if point != "write" || FORKED.swap(true, Ordering::SeqCst) {
        return;
    }
    // SAFETY: a plain fork from a thread, as a program that forks while a dump runs does.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let t = std::time::Instant::now();
        let got = match HANDLE.get().map(|h| h.dump("never.h5")) {
            Some(Err(e)) => e.to_string(),
            Some(Ok(_)) => "a dump".to_owned(),
            None => "no handle".to_owned(),
        };
        let line = format!(
            "RESULT child_dump={}\nRESULT child_dump_us={}\n",
            got.replace('\n', " "),
            t.elapsed().as_micros()
        );
        // SAFETY: writes a live buffer to stdout, then leaves without running anything else
        // (no destructor, no atexit handler of the parent's state).
        unsafe {
            libc::write(1, line.as_ptr().cast(), line.len());
            libc::_exit(0);
        }
    }
    let mut status = 0;
    // SAFETY: waits for our own child; `status` is a valid out-pointer.
    let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(waited, pid);
    result(
        "child_status",
        if libc::WIFEXITED(status) {
            libc::WEXITSTATUS(status)
        } else {
            -1
        },
    );
}

fn dump_env(out: &Path, dump: &Path) -> Vec<(&'static str, String)> {
    with(
        env(out, CALLS),
        "SCOPE_FAULT_DUMP",
        &dump.display().to_string(),
    )
}

/// A dump onto a full disk: a typed error, and the next dump (room again) holds every call.
pub(crate) fn dump_full(t: &mut Table, name: &str) -> Row {
    let dir = tempfile::tempdir().expect("a directory");
    let out = dir.path().join("out.h5");
    let fs = Tmpfs::mount("1m");
    let filler = fill(fs.path());
    let dump = fs.path().join("dump.h5");
    let env = with(
        dump_env(&out, &dump),
        "SCOPE_FAULT_FILLER",
        &filler.display().to_string(),
    );
    let e = spawn("dump-full", &env, None).end();
    let error = e.get("dump_error").unwrap_or_default().to_owned();
    t.check(
        name,
        error.contains("No space left on device"),
        format!("the error does not say why: {error}"),
    );
    let completed = e.num("completed");
    let readable = calls_in(&dump, "work");
    t.check(
        name,
        readable == completed && e.num("dump_calls") == completed,
        format!("the second dump holds {readable} of {completed} calls"),
    );
    t.check(
        name,
        e.num("stat_calls") == completed,
        "the run's statistics",
    );
    let exit = e.exit_s("last_call_ns");
    t.check_exit(name, exit);
    Row {
        fault: name.into(),
        completed,
        readable,
        lost: Some(0),
        exit: secs(exit),
        survives: "everything: the dump fails with `Error::Io` (no space), recording and the \
                   ring go on, and the next dump holds every call"
            .into(),
        remedy: "free space; dump again",
    }
}

/// `kill -9` while a dump is written: no file under the dump's name; the ring's segments stay,
/// and the next `build()` recovers them.
pub(crate) fn dump_kill(t: &mut Table, name: &str) -> Row {
    let dir = tempfile::tempdir().expect("a directory");
    let out = dir.path().join("out.h5");
    let dump = dir.path().join("dump.h5");
    let stop_at = with(dump_env(&out, &dump), "SCOPE_FAULT_STOP_AT", "write");
    let mut c = spawn("dump-kill", &stop_at, None);
    c.at_checkpoint("write");
    let e = c.kill9();
    let completed = e.num("completed");
    t.check(
        name,
        !dump.exists(),
        "a file is under the dump's name after the kill",
    );
    let segments = entries(dir.path())
        .into_iter()
        .filter(|n| n.starts_with(".out.h5.flight-"))
        .count();
    t.check(name, segments > 0, "no ring segment left to recover");
    // The next run recovers the ring (and the main spool, statistics only) at `build()`.
    let again = spawn("dump-recover", &env(&out, 0), None).end();
    let recovered: u64 = entries(dir.path())
        .into_iter()
        .filter(|n| n.starts_with("out.recovered-") && n.ends_with(".h5"))
        .map(|n| calls_in(&dir.path().join(n), "work"))
        .max()
        .unwrap_or(0);
    t.check(
        name,
        recovered == completed,
        format!("the recovered ring holds {recovered} of {completed} calls"),
    );
    let left = entries(dir.path())
        .into_iter()
        .filter(|n| n.contains(".flight-"))
        .count();
    t.check(
        name,
        left == 0,
        format!("{left} segments left after recovery: {}", again.stderr),
    );
    Row {
        fault: name.into(),
        completed,
        readable: recovered,
        lost: None,
        exit: "killed".into(),
        survives: "every call of the window, in the ring's segments; no file under the dump's \
                   name; the next `build()` recovers the ring into `OUT.recovered-N.h5`"
            .into(),
        remedy: "run again, or `scopeprof recover --spool SEGMENT OUT.h5` per segment",
    }
}

/// A fork while the dump's thread is inside the HDF5 write: the child's dump is refused at
/// once, and the parent's dump and finalize are whole.
pub(crate) fn dump_fork(t: &mut Table, name: &str) -> Row {
    let dir = tempfile::tempdir().expect("a directory");
    let out = dir.path().join("out.h5");
    let dump = dir.path().join("dump.h5");
    let e = spawn("dump-fork", &dump_env(&out, &dump), None).end();
    let child = e.get("child_dump").unwrap_or_default().to_owned();
    t.check(
        name,
        child.contains("was forked from"),
        format!("the child's dump: {child:?}"),
    );
    t.check(name, e.num("child_status") == 0, "the child's exit status");
    let child_us = e.num("child_dump_us");
    t.check(
        name,
        child_us < 1_000_000,
        format!("the child's dump took {child_us} us to fail"),
    );
    let completed = e.num("completed");
    let readable = calls_in(&dump, "work");
    t.check(
        name,
        readable == completed && e.num("stat_calls") == completed,
        format!("the parent's dump holds {readable} of {completed} calls"),
    );
    let exit = e.exit_s("last_call_ns");
    t.check_exit(name, exit);
    Row {
        fault: name.into(),
        completed,
        readable,
        lost: Some(0),
        exit: secs(exit),
        survives: "the parent's dump and profile, whole; the child's dump fails at once with \
                   `Error::ForkedChild`"
            .into(),
        remedy: "-",
    }
}

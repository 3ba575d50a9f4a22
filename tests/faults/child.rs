//! The profiled program of the fault matrix: this test binary, run again with
//! `SCOPE_FAULT_CHILD` naming a scenario. It records `work` calls, reports what it completed
//! as `RESULT key=value` lines on stdout, and stops at the finalize checkpoints named in
//! `SCOPE_FAULT_STOP_AT` (printing `CHECKPOINT name`, then waiting for a line on stdin) so
//! the matrix can kill it there, fill its disk or make its directory read-only.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use scope_profiler::{Error, FlushGuard, ScopeLayer};
use tracing_subscriber::prelude::*;

/// The settings a scenario reads from its environment.
pub(crate) struct Env {
    pub out: PathBuf,
    pub calls: u64,
    pub flush_ms: u64,
    pub filler: Option<PathBuf>,
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

impl Env {
    fn read() -> Env {
        Env {
            out: PathBuf::from(var("SCOPE_FAULT_OUT").expect("SCOPE_FAULT_OUT")),
            calls: var("SCOPE_FAULT_CALLS").map_or(0, |v| v.parse().expect("a count")),
            flush_ms: var("SCOPE_FAULT_FLUSH_MS").map_or(50, |v| v.parse().expect("ms")),
            filler: var("SCOPE_FAULT_FILLER").map(PathBuf::from),
        }
    }
}

/// `CLOCK_MONOTONIC` in ns: comparable between processes of one machine.
pub(crate) fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the struct it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

pub(crate) fn result(key: &str, value: impl std::fmt::Display) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "RESULT {key}={value}");
    let _ = out.flush();
}

/// The checkpoint hook: stops at the points the matrix asked for, the first time only (the
/// guard's drop finalizes once more).
pub(crate) fn checkpoint(point: &'static str) {
    static STOPPED: AtomicBool = AtomicBool::new(false);
    let stops = var("SCOPE_FAULT_STOP_AT").unwrap_or_default();
    if !stops.split(',').any(|s| s == point) || STOPPED.swap(true, Ordering::SeqCst) {
        return;
    }
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "CHECKPOINT {point}");
        let _ = out.flush();
    }
    let mut line = String::new();
    let _ = std::io::stdin().lock().read_line(&mut line);
}

/// Calls completed, in a shared mapping of `SCOPE_FAULT_PROGRESS` (so the matrix reads the
/// count even after a `kill -9`).
pub(crate) struct Progress(&'static AtomicU64);

impl Progress {
    fn open() -> Option<Progress> {
        use std::os::fd::AsRawFd;
        let path = var("SCOPE_FAULT_PROGRESS")?;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .expect("progress file");
        f.set_len(8).expect("progress size");
        // SAFETY: maps 8 bytes of a file we opened read-write, shared, for the process's
        // life (never unmapped); the pointer is page aligned, so an AtomicU64 fits there.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                8,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        assert!(p != libc::MAP_FAILED, "mmap the progress file");
        // SAFETY: see above; nothing else in this process accesses the mapping.
        Some(Progress(unsafe { &*(p as *const AtomicU64) }))
    }

    fn set(&self, n: u64) {
        self.0.store(n, Ordering::Release);
    }
}

/// One `work` call of about 2 us.
fn work() {
    tracing::info_span!("work").in_scope(|| {
        let t = std::time::Instant::now();
        while t.elapsed() < Duration::from_micros(2) {
            std::hint::spin_loop();
        }
    });
}

/// Records `n` calls (0: until `stop`), paced at about 100 a millisecond; returns how many.
pub(crate) fn record(n: u64, stop: &AtomicBool, progress: Option<&Progress>) -> u64 {
    let mut done = 0;
    while (n == 0 || done < n) && !stop.load(Ordering::Relaxed) {
        work();
        done += 1;
        if let Some(p) = progress {
            p.set(done);
        }
        if done % 100 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    result("last_call_ns", mono_ns());
    done
}

pub(crate) fn build(env: &Env) -> Result<FlushGuard, Error> {
    let (layer, guard) = ScopeLayer::builder()
        .output(&env.out)
        .spool_sync_interval(Duration::from_millis(env.flush_ms))
        .buffer_budget(scope_profiler::MIN_BUFFER_BUDGET)
        .__checkpoints(checkpoint)
        .build()?;
    tracing_subscriber::registry().with(layer).init();
    Ok(guard)
}

/// Runs the scenario `name` (returns from `main` afterwards, unless it exits).
pub(crate) fn run(name: &str) {
    let env = Env::read();
    match name {
        "record" => record_then_drop(&env),
        "finalize" => record_then_finalize(&env),
        "phases" => two_phases(&env),
        "build" => build_refused(&env),
        "fork-return" | "fork-exit" => super::forking::run(&env, name == "fork-exit"),
        "sigterm" => sigterm(&env),
        "dump-full" | "dump-kill" | "dump-fork" | "dump-recover" => {
            super::flight::child(&env, name)
        }
        other => panic!("unknown scenario {other}"),
    }
}

/// Records, then returns from `main`: the guard's drop finalizes.
fn record_then_drop(env: &Env) {
    let guard = build(env).expect("build");
    let progress = Progress::open();
    let n = record(env.calls, &AtomicBool::new(false), progress.as_ref());
    result("completed", n);
    drop(guard);
}

/// Records, then finalizes explicitly and reports the outcome.
fn record_then_finalize(env: &Env) {
    let guard = build(env).expect("build");
    let progress = Progress::open();
    let n = record(env.calls, &AtomicBool::new(false), progress.as_ref());
    result("completed", n);
    report_outcome(guard.finalize());
}

/// What a finalize returned: calls in the statistics, detail lost, and where kept calls are.
pub(crate) fn report_outcome(r: Result<scope_profiler::Report, Error>) {
    let report = match &r {
        Ok(report) => report,
        Err(e) => {
            result("error", e.to_string().replace('\n', " "));
            if let Error::Partial { source, .. } = e {
                if let Error::Unpublished { spool, .. } = source.as_ref() {
                    result("kept", spool.display());
                }
            }
            match e.report() {
                Some(report) => report,
                None => return,
            }
        }
    };
    result("stat_calls", report.region("work").map_or(0, |r| r.calls));
    result("lost", report.detail_lost().map_or(0, |l| l.calls));
    if let Some(f) = report.file() {
        result("file", f.display());
    }
}

/// Phase 1 on a full disk (the matrix leaves little room), then the filler goes (room
/// again) and phase 2 is recorded in full.
fn two_phases(env: &Env) {
    let guard = build(env).expect("build");
    let n = record(env.calls, &AtomicBool::new(false), None);
    result("completed", n);
    report_outcome(guard.finalize());
    if let Some(f) = &env.filler {
        std::fs::remove_file(f).expect("free the space");
    }
    let second = record(env.calls / 5, &AtomicBool::new(false), None);
    result("second_completed", second);
    let r = guard.finalize().expect("the second phase is written whole");
    result("second_stat_calls", r.region("work").map_or(0, |r| r.calls));
    result(
        "second_file",
        r.file().expect("published").display().to_string(),
    );
    drop(guard);
}

/// `build()` in a read-only directory: the error, then the program runs on unprofiled.
fn build_refused(env: &Env) {
    match build(env) {
        Ok(_) => panic!("build() succeeded in a read-only directory"),
        Err(e) => result("build_error", e.to_string().replace('\n', " ")),
    }
    let n = record(env.calls, &AtomicBool::new(false), None);
    result("unprofiled", n);
    result("completed", 0);
}

/// A signal thread (a Tokio runtime of its own) finalizes on SIGTERM: it stops the work,
/// finalizes, and exits.
fn sigterm(env: &Env) {
    static STOP: AtomicBool = AtomicBool::new(false);
    static STOPPED: AtomicU64 = AtomicU64::new(u64::MAX);
    let guard = build(env).expect("build");
    let progress = Progress::open();
    let signals = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        rt.block_on(async {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                    .expect("SIGTERM handler");
            result("ready", 1);
            term.recv().await;
        });
        result("sigterm_ns", mono_ns());
        STOP.store(true, Ordering::SeqCst);
        while STOPPED.load(Ordering::SeqCst) == u64::MAX {
            std::thread::sleep(Duration::from_millis(1));
        }
        result("completed", STOPPED.load(Ordering::SeqCst));
        report_outcome(guard.finalize());
        std::process::exit(0);
    });
    let n = record(0, &STOP, progress.as_ref());
    STOPPED.store(n, Ordering::SeqCst);
    let _ = signals.join();
}

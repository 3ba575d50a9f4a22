//! The harness of the tests of scope-profiler against Tokio's own instrumentation: a Tokio
//! runtime whose every thread reports to one profiler, the file read back, and the two tools
//! the checks run (`scopeprof`, the Python reader).
//!
//! Built with `RUSTFLAGS="--cfg tokio_unstable"` and Tokio's `tracing` feature, in a target
//! directory of its own (`scripts/tokio-unstable-tests.sh`); built without the flag, every
//! test fails and says so.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use scope_profiler::read::{Call, IndexRow, Poll, Profile, TaskInfo};
use scope_profiler::{Builder, Report, ScopeLayer};
use tracing_subscriber::prelude::*;

/// Fails the test unless this build has Tokio's instrumentation.
pub fn require_tokio_unstable() {
    #[cfg(not(tokio_unstable))]
    panic!(
        "these tests need Tokio's own instrumentation: build with \
         RUSTFLAGS=\"--cfg tokio_unstable\" (scripts/tokio-unstable-tests.sh does)"
    );
}

/// A profiled run: the file and the report.
pub struct Run {
    /// The profile written.
    pub path: PathBuf,
    /// What finalize returned.
    pub report: Report,
}

/// Whether the profiler is `ScopeSubscriber` (`SCOPE_FRONT_END=subscriber`) rather than
/// `ScopeLayer` on the registry (the default, or `SCOPE_FRONT_END=layer`).
pub fn front_end_is_subscriber() -> bool {
    match std::env::var("SCOPE_FRONT_END").as_deref() {
        Ok("subscriber") => true,
        Ok("layer") | Err(_) => false,
        Ok(other) => panic!("SCOPE_FRONT_END={other}: expected `layer` or `subscriber`"),
    }
}

/// Profiles `body` on a multi-thread runtime with `workers` workers into `dir/name.h5`, with
/// `track_async(true)` and whatever `tweak` adds, through the front end
/// [`front_end_is_subscriber`] names; every runtime thread and the calling thread report to
/// the profiler. `body` gets the runtime and the dispatch (for threads it starts).
pub fn profile(
    dir: &Path,
    name: &str,
    workers: usize,
    tweak: impl FnOnce(Builder) -> Builder,
    body: impl FnOnce(&tokio::runtime::Runtime, &tracing::Dispatch),
) -> Run {
    require_tokio_unstable();
    let path = dir.join(format!("{name}.h5"));
    let builder = ScopeLayer::builder()
        .output(&path)
        .track_async(true)
        .summary(false);
    let (dispatch, guard) = if front_end_is_subscriber() {
        let (subscriber, guard) = tweak(builder)
            .build_subscriber()
            .expect("build the profiler");
        (tracing::Dispatch::new(subscriber), guard)
    } else {
        let (layer, guard) = tweak(builder).build().expect("build the profiler");
        let registry = tracing_subscriber::registry().with(layer);
        (tracing::Dispatch::new(registry), guard)
    };
    let d2 = dispatch.clone();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .on_thread_start(move || std::mem::forget(tracing::dispatcher::set_default(&d2)))
        .build()
        .expect("runtime");
    tracing::dispatcher::with_default(&dispatch, || body(&rt, &dispatch));
    drop(rt);
    let report = guard.finalize().expect("finalize");
    Run { path, report }
}

/// Spins (holding the thread) for `d`.
pub fn spin(d: Duration) {
    let end = Instant::now() + d;
    while Instant::now() < end {
        std::hint::spin_loop();
    }
}

/// Everything of a profile the checks look at.
pub struct Read {
    /// The profile.
    pub profile: Profile,
    /// Task rows.
    pub tasks: Vec<TaskInfo>,
    /// Every poll.
    pub polls: Vec<Poll>,
    /// Every call with its region's name.
    pub calls: Vec<(String, Call)>,
}

impl Read {
    /// Reads `path` whole.
    pub fn open(path: &Path) -> Read {
        let profile = Profile::open(path).expect("open the profile");
        let tasks = profile.tasks().to_vec();
        let mut polls = Vec::new();
        profile
            .for_each_poll(1 << 16, |p| {
                polls.extend_from_slice(p);
                Ok(())
            })
            .expect("polls");
        let mut calls = Vec::new();
        profile
            .for_each_call(1 << 16, |row: &IndexRow, c| {
                let name = profile.region_name(row.region).to_owned();
                calls.extend(c.iter().map(|c| (name.clone(), *c)));
                Ok(())
            })
            .expect("calls");
        Read {
            profile,
            tasks,
            polls,
            calls,
        }
    }

    /// The task rows with Tokio's data whose spawn location is on `line` of this crate's
    /// `file`.
    pub fn spawned_at(&self, file: &str, line: u32) -> Vec<&TaskInfo> {
        let at = format!("{file}:{line}:");
        self.tasks
            .iter()
            .filter(|t| {
                t.sched
                    .as_ref()
                    .is_some_and(|s| s.spawn_location.starts_with(&at))
            })
            .collect()
    }

    /// The polls of task `index`, by start.
    pub fn task_polls(&self, index: i64) -> Vec<Poll> {
        let mut v: Vec<Poll> = self
            .polls
            .iter()
            .filter(|p| p.task == index)
            .copied()
            .collect();
        v.sort_by_key(|p| p.start_ns);
        v
    }

    /// The calls of region `name`.
    pub fn calls_of(&self, name: &str) -> Vec<Call> {
        self.calls
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, c)| *c)
            .collect()
    }
}

/// The `scopeprof` binary: `$SCOPEPROF` (scripts/tokio-unstable-tests.sh sets it).
pub fn scopeprof() -> PathBuf {
    let p = std::env::var_os("SCOPEPROF").map(PathBuf::from).expect(
        "SCOPEPROF must name a scopeprof binary (scripts/tokio-unstable-tests.sh builds one)",
    );
    assert!(p.is_file(), "SCOPEPROF={} is no file", p.display());
    p
}

/// Runs `program` with `args`, returning stdout; panics with its output unless it succeeds.
pub fn run_ok(program: &Path, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .env("NO_COLOR", "1")
        .env("COLUMNS", "200")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", program.display()));
    assert!(
        out.status.success(),
        "{} {args:?} failed:\n{}{}",
        program.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A program of a venv: `$VAR/bin/program` (scripts/tokio-unstable-tests.sh sets `VAR`).
pub fn venv_program(var: &str, program: &str) -> PathBuf {
    let venv = std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| {
        panic!("{var} must name a venv (scripts/tokio-unstable-tests.sh makes it)")
    });
    let p = venv.join("bin").join(program);
    assert!(p.is_file(), "{} is missing", p.display());
    p
}

/// The file's `metadata` attributes from Tokio's instrumentation (`tokio_*`), read with the
/// Python reader's h5py (`$SCOPE_PY_VENV`).
pub fn tokio_metadata(path: &Path) -> std::collections::HashMap<String, i64> {
    const READ: &str = r#"
import sys, h5py
a = h5py.File(sys.argv[1], "r")["metadata"].attrs
for k in a:
    if k.startswith("tokio_"):
        print(k, int(a[k]))
"#;
    let out = run_ok(
        &venv_program("SCOPE_PY_VENV", "python"),
        &["-c", READ, path.to_str().expect("a UTF-8 path")],
    );
    out.lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(k, v)| (k.to_owned(), v.parse().expect("an integer attribute")))
        .collect()
}

/// The repository's root (for its scripts).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repo root")
}

/// `a` and `b` in milliseconds, for messages.
pub fn ms(ns: i64) -> f64 {
    ns as f64 / 1e6
}

//! The CUDA sink (`cuda_timing`).
//!
//! This machine has no GPU and no CUDA driver, so these tests check two things:
//! - without `libcuda`, `build()` returns `Error::LibraryMissing` (no panic) and the program
//!   carries on;
//! - the whole path (events recorded at enter/exit, payloads through the lanes, device times
//!   resolved on the flusher into `RegionStats` and `events/gpu_durations`) against a
//!   **stand-in** `libcuda.so` built here from `tests/support/cuda_standin.c`. It runs in a
//!   child process (this test binary re-executed with `LD_LIBRARY_PATH` pointing at the
//!   stand-in, and `SCOPE_PROFILER_CUDA_CHILD` selecting the scenario), because the dynamic
//!   loader reads `LD_LIBRARY_PATH` only at process start. The stand-in's events return fixed,
//!   predictable elapsed times (0.5 ms per event recorded in between, see the C file); real
//!   device times are checked by `examples/gpu_check.rs` on a machine with a GPU.

#![cfg(feature = "cuda")]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use scope_profiler::{Error, FlushGuard, Report, ScopeLayer};
use tracing::{info_span, instrument};
use tracing_subscriber::prelude::*;

const CHILD: &str = "SCOPE_PROFILER_CUDA_CHILD";
/// The custom stream handle the stand-in accepts.
const STREAM: usize = 0x5eed;
const MS: u64 = 1_000_000;

fn libcuda_loadable() -> bool {
    ["libcuda.so", "libcuda.so.1"].iter().any(|name| {
        let c = std::ffi::CString::new(*name).unwrap();
        // SAFETY: dlopen with a valid C string; a handle we get is closed right away.
        unsafe {
            let h = libc::dlopen(c.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL);
            if h.is_null() {
                false
            } else {
                libc::dlclose(h);
                true
            }
        }
    })
}

/// On this machine (no GPU, no driver): `cuda_timing` is `Error::LibraryMissing`, no panic.
#[test]
fn without_libcuda_build_fails_cleanly() {
    if libcuda_loadable() {
        // A machine with a CUDA driver: the build must work (or name a device problem), and
        // must not panic either way.
        let built = ScopeLayer::builder()
            .cuda_timing(true)
            .no_output()
            .summary(false)
            .build();
        match built {
            Ok(_) => eprintln!("libcuda present: cuda_timing builds"),
            Err(e @ Error::Sink { .. }) => eprintln!("libcuda present, no usable device: {e}"),
            Err(e) => panic!("libcuda is loadable, yet: {e}"),
        }
        return;
    }
    let err = ScopeLayer::builder()
        .cuda_timing(true)
        .no_output()
        .summary(false)
        .build()
        .expect_err("cuda_timing without libcuda must fail");
    match &err {
        Error::LibraryMissing { library, reason } => {
            assert_eq!(library, "libcuda");
            assert!(reason.contains("libcuda.so"), "{reason}");
        }
        other => panic!("expected LibraryMissing, got {other:?}"),
    }
    assert!(err.to_string().contains("libcuda"), "{err}");
    // The program continues, and profiling without CUDA works.
    let (layer, guard) = ScopeLayer::builder()
        .no_output()
        .summary(false)
        .build()
        .unwrap();
    let d = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    tracing::dispatcher::with_default(&d, || info_span!("after").in_scope(|| ()));
    let r = guard.finalize().unwrap();
    assert_eq!(r.region("after").unwrap().calls, 1);
    assert_eq!(r.region("after").unwrap().gpu_calls, 0);
}

/// Builds the stand-in driver once per process; returns its directory.
fn standin_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cuda_standin");
        std::fs::create_dir_all(&dir).unwrap();
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/cuda_standin.c");
        let out = Command::new("cc")
            .args(["-shared", "-fPIC", "-O1", "-o"])
            .arg(dir.join("libcuda.so"))
            .arg(&src)
            .arg("-lpthread")
            .output()
            .expect("run cc (the C compiler is needed to build the CUDA stand-in)");
        assert!(
            out.status.success(),
            "cc failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        dir
    })
}

/// Runs the `child` test of this binary in a new process against the stand-in driver.
fn run_child(scenario: &str, env: &[(&str, String)]) -> String {
    let dir = standin_dir();
    let ld = match std::env::var("LD_LIBRARY_PATH") {
        Ok(old) if !old.is_empty() => format!("{}:{old}", dir.display()),
        _ => dir.display().to_string(),
    };
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("LD_LIBRARY_PATH", ld)
        .env(CHILD, scenario)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "child {scenario} failed:\n{text}");
    assert!(
        text.contains("1 passed"),
        "child {scenario} did not run:\n{text}"
    );
    text
}

/// Runs against the stand-in `libcuda.so` (this machine has no GPU): device times per region
/// in the `Report` and in `events/gpu_durations`, the configured stream, sync on exit, context
/// binding on Tokio workers and the flusher, a span closed on another thread, event reuse.
#[test]
fn standin_driver_times_every_call() {
    let work = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cuda_full");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    run_child(
        "full",
        &[
            (
                "CUDA_STANDIN_LOG",
                work.join("driver.log").display().to_string(),
            ),
            ("CUDA_STANDIN_STREAM", STREAM.to_string()),
            ("CHILD_OUT", work.display().to_string()),
        ],
    );
}

/// Runs against the stand-in `libcuda.so` (this machine has no GPU): a driver that reports no
/// device, or whose `cuInit` fails, makes `build()` return `Error::Sink`, without a panic.
#[test]
fn standin_driver_without_usable_device_is_an_error() {
    run_child("no-device", &[("CUDA_STANDIN_DEVICES", "0".into())]);
    run_child("init-fails", &[("CUDA_STANDIN_INIT_ERROR", "100".into())]);
}

/// The child side, run by the tests above in a child process with the stand-in driver
/// loaded; ignored in a normal run (and fails when run without a scenario).
#[test]
#[ignore = "child process of the tests above"]
fn child() {
    match std::env::var(CHILD).as_deref() {
        Ok("full") => child_full(),
        Ok("no-device") => child_build_error("no device"),
        Ok("init-fails") => child_build_error("cuInit failed: CUDA_ERROR_NO_DEVICE"),
        Ok(other) => panic!("unknown scenario {other}"),
        Err(_) => panic!("run by its parent test, with {CHILD} naming the scenario"),
    }
}

fn child_build_error(expected: &str) {
    let err = ScopeLayer::builder()
        .cuda_timing(true)
        .no_output()
        .summary(false)
        .build()
        .expect_err("no usable device must fail");
    match &err {
        Error::Sink { sink, message } => {
            assert_eq!(*sink, "cuda");
            assert!(message.contains(expected), "{message}");
        }
        other => panic!("expected Error::Sink, got {other:?}"),
    }
    // The program continues.
    let (_layer, guard) = ScopeLayer::builder()
        .no_output()
        .summary(false)
        .build()
        .unwrap();
    guard.finalize().unwrap();
}

#[instrument(name = "polled")]
async fn polled(yields: u32) {
    for _ in 0..yields {
        tokio::task::yield_now().await;
    }
}

/// 3 `outer` calls of 2 `inner` calls each.
fn nested() {
    for _ in 0..3 {
        let _outer = info_span!("outer").entered();
        for _ in 0..2 {
            info_span!("inner").in_scope(|| std::hint::black_box(1));
        }
    }
}

fn gpu(report: &Report, name: &str) -> (u64, u64, u64) {
    let r = report
        .region(name)
        .unwrap_or_else(|| panic!("no region {name}"));
    (r.calls, r.gpu_calls, r.gpu_total_ns)
}

fn driver_log(path: &Path) -> HashMap<&'static str, usize> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut counts = HashMap::new();
    for line in text.lines() {
        let kind = match line.split(' ').next() {
            Some("create") => "create",
            Some("record") => {
                assert!(
                    line.ends_with(&format!(" {STREAM:#x}")),
                    "wrong stream: {line}"
                );
                "record"
            }
            Some("sync") => {
                assert!(
                    line.ends_with(&format!(" {STREAM:#x}")),
                    "wrong stream: {line}"
                );
                "sync"
            }
            _ => panic!("unexpected driver log line {line}"),
        };
        *counts.entry(kind).or_default() += 1;
    }
    counts
}

fn child_full() {
    let out = PathBuf::from(std::env::var("CHILD_OUT").unwrap());
    let log = PathBuf::from(std::env::var("CUDA_STANDIN_LOG").unwrap());
    let file = out.join("gpu.h5");
    let builder = ScopeLayer::builder().cuda_timing(true);
    // SAFETY: the stand-in driver takes any stream handle and only records it (no real
    // driver ever sees this value).
    let builder = unsafe { builder.cuda_stream(STREAM) };
    let (layer, guard): (_, FlushGuard) = builder
        .cuda_sync_on_exit(true)
        .track_async(true)
        .output(&file)
        .summary(false)
        .build()
        .expect("build against the stand-in driver");
    let d = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    let dd = d.clone();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        // An #[instrument]ed async fn creates its span at its first poll, on a worker.
        .on_thread_start(move || std::mem::forget(tracing::dispatcher::set_default(&dd)))
        .build()
        .unwrap();
    tracing::dispatcher::with_default(&d, || {
        nested();
        // Polled on worker threads, which have no current CUDA context until the sink binds
        // its own: 4 polls per call, and a 5th enter/exit when tracing's `Instrumented` drops
        // the finished future inside its span.
        for _ in 0..2 {
            rt.block_on(async { tokio::spawn(polled(3)).await.unwrap() });
        }
        // Entered here, closed on another thread.
        let handed = info_span!("handed_over");
        handed.in_scope(|| ());
        std::thread::spawn(move || drop(handed)).join().unwrap();
    });
    let r = guard.finalize().unwrap();
    assert!(r.warnings().is_empty(), "{:?}", r.warnings());
    // Each call measures 0.5 ms per event recorded from its start to its end (see the stand-in):
    // inner: start, end = 0.5 ms; outer: start, 2 x inner (4), end = 2.5 ms;
    // polled: start at the first enter, end at each of 5 exits, the last wins = 2.5 ms.
    assert_eq!(gpu(&r, "inner"), (6, 6, 6 * MS / 2));
    assert_eq!(gpu(&r, "outer"), (3, 3, 3 * 5 * MS / 2));
    assert_eq!(gpu(&r, "polled"), (2, 2, 2 * 5 * MS / 2));
    assert_eq!(gpu(&r, "handed_over"), (1, 1, MS / 2));

    let phase1 = driver_log(&log);
    // At most one event pair per call (fewer when the flusher resolved and freed pairs during
    // the phase; the build-time probe's pair is reused by the first call); an end record per
    // exit (3 + 6 + 2x5 + 1 = 20), one start per call, the probe's two; and a stream
    // synchronization per exit.
    let created = phase1["create"];
    assert!(
        created.is_multiple_of(2) && (2..=2 * 12).contains(&created),
        "{phase1:?}"
    );
    assert_eq!(phase1.get("record"), Some(&(2 + 12 + 20)), "{phase1:?}");
    assert_eq!(phase1.get("sync"), Some(&20), "{phase1:?}");

    // The file: one device time per call, -1 for the synthetic session call.
    let h5 = hdf5::File::open(&file).unwrap();
    let mut durations: Vec<i64> = h5
        .dataset("events/gpu_durations")
        .unwrap()
        .read_raw()
        .unwrap();
    durations.sort_unstable();
    let ms = MS as i64;
    let mut want = vec![-1];
    want.extend([ms / 2; 7]);
    want.extend([5 * ms / 2; 5]);
    assert_eq!(durations, want);
    drop(h5);

    // Steady state: every pair was resolved and freed by the finalize, so calls that each
    // complete before the next starts reuse them and no event is created.
    for _ in 0..10 {
        tracing::dispatcher::with_default(&d, || info_span!("again").in_scope(|| ()));
        let r = guard.finalize().unwrap();
        assert_eq!(gpu(&r, "again"), (1, 1, MS / 2));
    }
    let phase2 = driver_log(&log);
    assert_eq!(
        phase2.get("create"),
        phase1.get("create"),
        "events were reused"
    );
    drop(guard);
}

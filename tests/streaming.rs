//! The streamed output: crash recovery after kill -9, per-phase files, one file per profiler,
//! and a full disk during the run.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::{dispatch, read_strings};
use scope_profiler::{Error, ScopeLayer};
use tracing::info_span;

/// Child process of `a_killed_process_leaves_a_recoverable_spool`: records batches of calls
/// forever, printing the running total after each batch, until it is killed.
#[test]
#[ignore = "the child process of a_killed_process_leaves_a_recoverable_spool"]
fn crash_child() {
    let out = std::env::var_os("SP_CRASH_CHILD").expect("run by its parent test");
    let (d, _guard) = dispatch(
        ScopeLayer::builder()
            .output(&out)
            .spool_sync_interval(Duration::from_millis(50)),
    );
    tracing::dispatcher::with_default(&d, || {
        let mut done = 0u64;
        loop {
            let _batch = info_span!("batch").entered();
            for _ in 0..1000 {
                info_span!("work item").in_scope(|| std::hint::black_box(done));
                done += 1;
            }
            drop(_batch);
            println!("done {done}");
            std::thread::sleep(Duration::from_millis(30));
        }
    });
}

#[test]
fn a_killed_process_leaves_a_recoverable_spool() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("crashed.h5");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "crash_child", "--ignored", "--nocapture"])
        .env("SP_CRASH_CHILD", &out)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let reported = common::kill_after(&mut child, 20_000);
    assert!(!out.exists(), "the child never finalized");

    let r = scope_profiler::recover(&out).expect("recover");
    assert!(
        r.calls >= reported,
        "{} recovered < {reported} reported",
        r.calls
    );
    assert!(!r.spools.is_empty());
    assert!(
        r.spools.iter().all(|p| !p.exists()),
        "spools removed after recovery"
    );
    let f = hdf5::File::open(&out).unwrap();
    let names = read_strings(&f, "region_table/names");
    assert!(names.contains(&"work item".to_string()));
    let out_s = out.to_str().unwrap();
    let text = common::py("scope-profiler", &["inspect", out_s]);
    assert!(text.contains("work item"), "{text}");
    let check = format!(
        "import scope_profiler as sp\nr = sp.read_h5({out_s:?})\nprint(r.get_region('work item').num_calls)\n"
    );
    let n: u64 = common::py("python", &["-c", &check])
        .trim()
        .parse()
        .unwrap();
    assert!(
        n >= reported,
        "the reader sees {n} calls, {reported} were reported"
    );

    // The recovery command says what it did; with nothing left it fails clearly.
    let bin = env!("CARGO_BIN_EXE_scope-profiler-recover");
    let again = Command::new(bin).arg(&out).output().unwrap();
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("nothing to recover"));
}

#[test]
fn finalize_to_writes_one_file_per_phase() {
    let dir = tempfile::tempdir().unwrap();
    let main = dir.path().join("main.h5");
    let setup = dir.path().join("setup.h5");
    let (d, guard) = dispatch(ScopeLayer::builder().output(&main));
    tracing::dispatcher::with_default(&d, || {
        for _ in 0..10 {
            info_span!("setup").in_scope(|| ());
        }
        let r = guard.finalize_to(&setup).unwrap();
        assert_eq!(r.region("setup").unwrap().calls, 10);
        for _ in 0..7 {
            info_span!("solve").in_scope(|| ());
        }
        let r = guard.finalize().unwrap();
        assert_eq!(r.region("solve").unwrap().calls, 7);
        assert_eq!(r.region("setup").unwrap().calls, 0);
    });
    let a = hdf5::File::open(&setup).unwrap();
    let b = hdf5::File::open(&main).unwrap();
    assert!(read_strings(&a, "region_table/names").contains(&"setup".into()));
    assert!(!read_strings(&a, "region_table/names").contains(&"solve".into()));
    assert!(read_strings(&b, "region_table/names").contains(&"solve".into()));
    assert!(!read_strings(&b, "region_table/names").contains(&"setup".into()));
    let bad = guard
        .finalize_to(dir.path().join("missing/dir.h5"))
        .unwrap_err();
    assert!(bad.to_string().contains("missing/dir.h5"), "{bad}");
    // No spool files are left behind once everything is published.
    drop(guard);
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().contains("spool"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn a_second_profiler_writing_the_same_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("one.h5");
    let (_l, first) = ScopeLayer::builder()
        .output(&out)
        .summary(false)
        .build()
        .unwrap();
    let err = ScopeLayer::builder()
        .output(dir.path().join(".").join("one.h5"))
        .build()
        .unwrap_err();
    assert!(
        err.to_string().contains("already writing this file"),
        "{err}"
    );
    drop(first);
    // Once the first guard is gone the path is free again.
    let (_l, again) = ScopeLayer::builder()
        .output(&out)
        .summary(false)
        .build()
        .unwrap();
    drop(again);
}

/// A tmpfs of 256 KiB fills up during the run: no panic, the program goes on, and finalize
/// says what failed and where the calls that did fit are, and carries exact statistics of
/// every call (the exact split into kept and lost calls is checked by `tests/faults.rs`).
#[test]
fn a_full_disk_is_an_error_at_finalize_not_a_crash() {
    let small = common::Tmpfs::mount("256k");
    let mnt = small.path().to_path_buf();
    let out = mnt.join("full.h5");
    let (d, guard) = dispatch(
        ScopeLayer::builder()
            .output(&out)
            .spool_sync_interval(Duration::from_millis(20)),
    );
    // ~3 bytes a call in the spool: 200 000 calls do not fit 256 KiB.
    tracing::dispatcher::with_default(&d, || {
        for _ in 0..200_000 {
            info_span!("fill").in_scope(|| ());
        }
    });
    std::thread::sleep(Duration::from_millis(100));
    let err = guard.finalize().unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("spool"), "{msg}");
    assert!(
        msg.to_lowercase().contains("no space") || msg.contains("os error 28"),
        "{msg}"
    );
    assert!(matches!(err, Error::Partial { .. }), "{err:?}");
    let report = err.report().expect("the statistics");
    assert_eq!(report.region("fill").unwrap().calls, 200_000);
    let lost = report.detail_lost().expect("lost detail counted");
    assert!(lost.calls > 0 && lost.calls <= 200_000, "{lost:?}");
    assert_eq!(lost.cause, "disk full");
    assert!(lost.first_ns <= lost.last_ns);
    assert!(msg.contains("calls' detail lost: disk full"), "{msg}");
    // The program keeps running and recording.
    tracing::dispatcher::with_default(&d, || info_span!("after").in_scope(|| ()));
    drop(guard);
}

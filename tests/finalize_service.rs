//! Profiling a service: rotation into numbered files, retention, a later finalize never
//! replacing an earlier one's file, crashed runs recovered at `build()`, and `durable(true)`.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{dispatch, read, read_strings};
use scope_profiler::ScopeLayer;
use tracing::info_span;

/// Calls of region `name` in a profile file (0 when it has none).
fn calls_in(path: &Path, name: &str) -> u64 {
    let f = hdf5::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let names = read_strings(&f, "region_table/names");
    let Some(id) = names.iter().position(|n| n == name) else {
        return 0;
    };
    let ids: Vec<u32> = read(&f, "rank_region_index/region_ids");
    let counts: Vec<u64> = read(&f, "rank_region_index/event_counts");
    ids.iter()
        .zip(&counts)
        .filter(|(&i, _)| i as usize == id)
        .map(|(_, &c)| c)
        .sum()
}

/// The numbered files `stem.NNNN.h5` in `dir`, sorted.
fn numbered(dir: &Path, stem: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy().into_owned();
            n.strip_prefix(&format!("{stem}."))
                .and_then(|r| r.strip_suffix(".h5"))
                .is_some_and(|d| d.len() == 4 && d.bytes().all(|b| b.is_ascii_digit()))
        })
        .collect();
    v.sort();
    v
}

#[test]
fn rotation_writes_numbered_files_holding_every_call_once() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("svc.h5");
    let (d, guard) = dispatch(
        ScopeLayer::builder()
            .output(&out)
            .rotate_every(Duration::from_millis(500))
            .spool_sync_interval(Duration::from_millis(50)),
    );
    let t0 = Instant::now();
    tracing::dispatcher::with_default(&d, || {
        while t0.elapsed() < Duration::from_secs(3) {
            let _req = info_span!("request").entered();
            for _ in 0..200 {
                info_span!("work").in_scope(|| std::hint::black_box(1));
            }
            drop(_req);
            std::thread::sleep(Duration::from_millis(2));
        }
    });
    let report = guard.finalize().unwrap();
    let lifetime = report.region("work").unwrap().lifetime_calls;
    let last = report.file().expect("the last phase's file").to_path_buf();
    drop(guard);

    let files = numbered(dir.path(), "svc");
    assert!(
        files.len() >= 6,
        "3 s at 500 ms gives at least 6 files: {files:?}"
    );
    for (i, f) in files.iter().enumerate() {
        let want = dir.path().join(format!("svc.{:04}.h5", i + 1));
        assert_eq!(f, &want, "numbered from 1 without gaps");
    }
    assert_eq!(
        files.last(),
        Some(&last),
        "the final finalize writes the next number"
    );
    assert!(
        !out.exists(),
        "with rotation the output name itself is not written"
    );
    let total: u64 = files.iter().map(|f| calls_in(f, "work")).sum();
    assert_eq!(total, lifetime, "every call in exactly one file");
    assert!(lifetime > 10_000, "{lifetime}");
    for f in &files {
        let text = common::py("scope-profiler", &["inspect", f.to_str().unwrap()]);
        assert!(text.contains("scope_profiler.session"), "{text}");
    }
}

#[test]
fn retention_keeps_the_newest_files() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("kept.h5");
    let (d, guard) = dispatch(
        ScopeLayer::builder()
            .output(&out)
            .rotate_every(Duration::from_millis(100))
            .max_files(2),
    );
    let t0 = Instant::now();
    tracing::dispatcher::with_default(&d, || {
        while t0.elapsed() < Duration::from_millis(700) {
            info_span!("tick").in_scope(|| std::thread::sleep(Duration::from_millis(5)));
        }
    });
    let last = guard.finalize().unwrap().file().unwrap().to_path_buf();
    drop(guard);
    let files = numbered(dir.path(), "kept");
    assert_eq!(files.len(), 2, "{files:?}");
    assert_eq!(files[1], last);
    let n = |p: &Path| -> u32 {
        p.file_name().unwrap().to_string_lossy()[5..9]
            .parse()
            .unwrap()
    };
    assert!(n(&files[0]) >= 5, "the oldest were deleted: {files:?}");
    assert_eq!(n(&files[0]) + 1, n(&files[1]));
}

#[test]
fn rotation_options_are_checked() {
    let e = ScopeLayer::builder()
        .no_output()
        .rotate_every(Duration::from_secs(1))
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("rotate_every"), "{e}");
    let e = ScopeLayer::builder()
        .no_output()
        .max_files(3)
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("max_files"), "{e}");
}

/// The 20-line case: finalize, one more call, the guard drops. The drop must not replace the
/// file the finalize published; the late call goes to `<stem>.late.h5`.
#[test]
fn a_drop_after_finalize_never_replaces_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("app.h5");
    let (d, guard) = dispatch(ScopeLayer::builder().output(&out));
    tracing::dispatcher::with_default(&d, || {
        for _ in 0..1000 {
            info_span!("job").in_scope(|| ());
        }
    });
    let r = guard.finalize().unwrap();
    assert_eq!(r.region("job").unwrap().calls, 1000);
    assert_eq!(r.file(), Some(out.as_path()));
    assert_eq!(calls_in(&out, "job"), 1000);
    tracing::dispatcher::with_default(&d, || info_span!("job").in_scope(|| ()));
    drop(guard);
    assert_eq!(calls_in(&out, "job"), 1000, "the published file is kept");
    let late = dir.path().join("app.late.h5");
    assert_eq!(
        calls_in(&late, "job"),
        1,
        "the late call is written beside it"
    );
    common::py("scope-profiler", &["inspect", late.to_str().unwrap()]);

    // A second run: its first phase replaces app.h5 as usual (a new run), and its late
    // phase takes the next free late name, leaving the first run's late file alone.
    let (d, guard) = dispatch(ScopeLayer::builder().output(&out));
    tracing::dispatcher::with_default(&d, || info_span!("job").in_scope(|| ()));
    guard.finalize().unwrap();
    tracing::dispatcher::with_default(&d, || info_span!("job").in_scope(|| ()));
    let r = guard.finalize().unwrap();
    assert_eq!(r.file(), Some(dir.path().join("app.late-2.h5").as_path()));
    drop(guard);
    assert_eq!(calls_in(&out, "job"), 1);
    assert_eq!(calls_in(&late, "job"), 1);
}

/// Child of the recovery tests: `crash` records batches forever (printing the running total
/// after each flushed batch) until killed; `once` builds, records one call and exits normally.
#[test]
#[ignore = "child process of the recovery tests"]
fn service_child() {
    let out = std::env::var_os("SP_SERVICE_OUT").expect("run by its parent test");
    let mode = std::env::var("SP_SERVICE_MODE").unwrap();
    let (d, guard) = dispatch(
        ScopeLayer::builder()
            .output(&out)
            .spool_sync_interval(Duration::from_millis(50)),
    );
    tracing::dispatcher::with_default(&d, || {
        if mode == "once" {
            info_span!("second run").in_scope(|| ());
            return;
        }
        let mut done = 0u64;
        loop {
            for _ in 0..1000 {
                info_span!("work item").in_scope(|| std::hint::black_box(done));
                done += 1;
            }
            println!("done {done}");
            std::thread::sleep(Duration::from_millis(30));
        }
    });
    drop(guard);
}

fn child(out: &Path, mode: &str) -> Command {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["--exact", "service_child", "--ignored", "--nocapture"])
        .env("SP_SERVICE_OUT", out)
        .env("SP_SERVICE_MODE", mode);
    c
}

#[test]
fn a_killed_run_is_recovered_by_the_next_build() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("crashed.h5");
    let mut first = child(&out, "crash").stdout(Stdio::piped()).spawn().unwrap();
    let reported = common::kill_after(&mut first, 20_000);

    let second = child(&out, "once").output().unwrap();
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(second.status.success(), "{stderr}");
    let recovered = dir.path().join("crashed.recovered-1.h5");
    let line = stderr
        .lines()
        .find(|l| l.contains("recovered"))
        .unwrap_or_else(|| panic!("no line about the recovery:\n{stderr}"));
    assert!(line.contains(recovered.to_str().unwrap()), "{line}");
    let n = calls_in(&recovered, "work item");
    assert!(
        n >= reported,
        "{n} recovered < {reported} reported before the kill"
    );
    common::py("scope-profiler", &["inspect", recovered.to_str().unwrap()]);
    // The second run's own file is complete, and no spool is left behind.
    assert_eq!(calls_in(&out, "second run"), 1);
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("spool"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_corrupt_stale_spool_is_kept_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bad.h5");
    let spool = dir.path().join(".bad.h5.spool");
    std::fs::write(&spool, b"this is not a spool at all").unwrap();
    let run = child(&out, "once").output().unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    let kept = dir.path().join(".bad.h5.spool.corrupt-1");
    assert_eq!(
        std::fs::read(&kept).unwrap(),
        b"this is not a spool at all",
        "kept byte for byte"
    );
    let line = stderr
        .lines()
        .find(|l| l.contains("cannot be recovered"))
        .unwrap_or_else(|| panic!("no line about the spool:\n{stderr}"));
    assert!(line.contains(kept.to_str().unwrap()), "{line}");
    assert!(line.contains("not a spool"), "names the error: {line}");
    assert_eq!(calls_in(&out, "second run"), 1);
    // A later run keeps it too, and never overwrites it.
    std::fs::write(&spool, b"garbage again").unwrap();
    assert!(child(&out, "once").output().unwrap().status.success());
    assert_eq!(std::fs::read(&kept).unwrap(), b"this is not a spool at all");
    let second = dir.path().join(".bad.h5.spool.corrupt-2");
    assert_eq!(std::fs::read(&second).unwrap(), b"garbage again");
    // The recovery command accepts such a file, and says what is wrong with it.
    let bin = env!("CARGO_BIN_EXE_scope-profiler-recover");
    let r = Command::new(bin)
        .args(["--spool", kept.to_str().unwrap(), "x.h5"])
        .output()
        .unwrap();
    assert!(!r.status.success());
    assert!(String::from_utf8_lossy(&r.stderr).contains("not a spool"));
}

#[test]
fn durable_works_on_tmpfs() {
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("mem");
    std::fs::create_dir(&mnt).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64m", "tmpfs"])
        .arg(&mnt)
        .status()
        .expect("run mount");
    assert!(
        mounted.success(),
        "this test needs root to mount a tmpfs (the project's machines and CI run as root)"
    );
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(mnt.clone());
    let out = mnt.join("durable.h5");
    let (d, guard) = dispatch(
        ScopeLayer::builder()
            .output(&out)
            .durable(true)
            .rotate_every(Duration::from_millis(200))
            .spool_sync_interval(Duration::from_millis(20)),
    );
    tracing::dispatcher::with_default(&d, || {
        for _ in 0..50 {
            for _ in 0..1000 {
                info_span!("step").in_scope(|| ());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    let r = guard.finalize().unwrap();
    drop(guard);
    let files = numbered(&mnt, "durable");
    assert!(files.len() >= 2, "{files:?}");
    let total: u64 = files.iter().map(|f| calls_in(f, "step")).sum();
    assert_eq!(total, 50_000);
    assert_eq!(r.region("step").unwrap().lifetime_calls, 50_000);
}

//! `scopeprof top`: a snapshot of a program that is recording now (by its output path and by
//! its process id), of the finished file, and of a file written by the Python package; the
//! spool follower through an undone write and a rotation; targets that are not there or not
//! ours.

mod cli_common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cli_common::*;
use scope_profiler::read::live::{spool_path, SpoolFollower};
use scope_profiler::ScopeLayer;
use tracing_subscriber::prelude::*;

/// A request stuck inside its span (the one a user most wants to see) is shown open, with
/// its parent, by `top --once` while the program runs: from the spool's open-calls frame.
#[test]
fn a_stuck_call_is_shown_open_while_the_program_runs() {
    let _turn = SPOOLS.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("stuck.h5");
    let (layer, guard) = ScopeLayer::builder()
        .output(&out)
        .summary(false)
        .spool_sync_interval(Duration::from_millis(20))
        .build()
        .unwrap();
    let d = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    let (release, wait) = std::sync::mpsc::channel::<()>();
    let stuck = std::thread::spawn(move || {
        tracing::dispatcher::with_default(&d, || {
            for _ in 0..10 {
                tracing::info_span!("quick").in_scope(|| std::hint::black_box(1));
            }
            let _request = tracing::info_span!("request").entered();
            // A leaf span entered and blocked: its enter must reach the flusher at once.
            tracing::info_span!("locked").in_scope(|| wait.recv().unwrap());
        });
    });
    let target = out.to_str().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let open_of = |v: &serde_json::Value, name: &str| {
        v["regions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["region"] == name)
            .and_then(|r| r["open"].as_u64())
    };
    loop {
        let v = top_json(target, "all");
        if open_of(&v, "locked") == Some(1) {
            assert_eq!(open_of(&v, "request"), Some(1), "{v}");
            assert_eq!(open_of(&v, "quick"), Some(0), "{v}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the stuck call never showed: {v}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    release.send(()).unwrap();
    stuck.join().unwrap();
    let report = guard.finalize().unwrap();
    assert_eq!(report.region("locked").unwrap().calls, 1);
}

/// Tests that hold a spool open take turns (a process id target must find exactly one).
static SPOOLS: Mutex<()> = Mutex::new(());

/// `top TARGET --once --format json --window W`, parsed.
fn top_json(target: &str, window: &str) -> serde_json::Value {
    let out = scopeprof_ok(&[
        "top", target, "--once", "--format", "json", "--window", window,
    ]);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// Calls of `region` in a `top` JSON snapshot (0 when it is not listed).
fn calls_of(v: &serde_json::Value, region: &str) -> u64 {
    v["regions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["region"] == region)
        .map_or(0, |r| r["calls"].as_u64().unwrap())
}

#[test]
fn follows_a_recording_program_then_agrees_with_its_file() {
    let _turn = SPOOLS.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("live.h5");
    let (layer, guard) = ScopeLayer::builder()
        .output(&out)
        .summary(false)
        .spool_sync_interval(Duration::from_millis(20))
        .build()
        .unwrap();
    let d = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let worker = {
        let (done, stop) = (done.clone(), stop.clone());
        std::thread::spawn(move || {
            tracing::dispatcher::with_default(&d, || {
                while !stop.load(Ordering::Relaxed) {
                    tracing::info_span!("work")
                        .in_scope(|| std::thread::sleep(Duration::from_micros(200)));
                    done.fetch_add(1, Ordering::SeqCst);
                }
            });
        })
    };
    let target = out.to_str().unwrap();
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen.len() < 4 || *seen.last().unwrap() == 0 {
        assert!(Instant::now() < deadline, "no calls seen: {seen:?}");
        let v = top_json(target, "all");
        let after = done.load(Ordering::SeqCst);
        let calls = calls_of(&v, "work");
        assert!(
            calls <= after,
            "top shows {calls} calls, the program did {after}"
        );
        assert_eq!(v["source"], "spool", "{v}");
        if calls > 0 {
            let work = v["regions"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["region"] == "work")
                .unwrap();
            let (p50, p99) = (
                work["p50_ns"].as_i64().unwrap(),
                work["p99_ns"].as_i64().unwrap(),
            );
            assert!(200_000 <= p50 && p50 <= p99, "{work}");
            // The worker spends most of its time inside `work`: 0 or 1 open at a flush (null
            // only before the spool's first open-calls frame, with the reason said).
            match work["open"].as_u64() {
                Some(n) => assert!(n <= 1, "{work}"),
                None => assert!(v["open_reason"].as_str().unwrap().contains("open"), "{v}"),
            }
            assert!(v["window_start_ns"].as_i64().unwrap() < v["window_end_ns"].as_i64().unwrap());
        }
        seen.push(calls);
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        seen.windows(2).all(|w| w[0] <= w[1]),
        "not monotone: {seen:?}"
    );
    // The default window (the last 10 s) holds no more than everything.
    let last10 = calls_of(&top_json(target, "10s"), "work");
    assert!(last10 <= done.load(Ordering::SeqCst));
    // The same program by its process id: this test process holds the spool open.
    let pid = std::process::id().to_string();
    let by_pid = top_json(&pid, "all");
    assert!(calls_of(&by_pid, "work") > 0, "{by_pid}");

    stop.store(true, Ordering::Relaxed);
    worker.join().unwrap();
    let report = guard.finalize().unwrap();
    let total = done.load(Ordering::SeqCst);
    assert_eq!(report.region("work").unwrap().calls, total);
    let finished = top_json(target, "all");
    assert_eq!(finished["source"], "file", "{finished}");
    assert_eq!(calls_of(&finished, "work"), total);
    let work = &finished["regions"].as_array().unwrap()[0];
    assert_eq!(work["open"], 0, "{finished}");
    let text = scopeprof_ok(&["top", target, "--once", "--window", "all"]);
    assert!(
        text.contains("work") && text.contains(&total.to_string()),
        "{text}"
    );
}

/// `--once --at T` moves the window back to end T into the recording, as the screen's keys do.
#[test]
fn at_moves_the_window_back() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("at.h5");
    let (layer, guard) = ScopeLayer::builder()
        .output(&out)
        .summary(false)
        .build()
        .unwrap();
    let d = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    tracing::dispatcher::with_default(&d, || {
        (0..5).for_each(|_| tracing::info_span!("early").in_scope(|| ()));
        std::thread::sleep(Duration::from_millis(400));
        (0..7).for_each(|_| tracing::info_span!("late").in_scope(|| ()));
    });
    guard.finalize().unwrap();
    let target = out.to_str().unwrap();
    let window = |args: &[&str]| {
        let mut all = vec![
            "top", target, "--once", "--format", "json", "--window", "100ms",
        ];
        all.extend_from_slice(args);
        let v: serde_json::Value = serde_json::from_str(&scopeprof_ok(&all)).unwrap();
        (calls_of(&v, "early"), calls_of(&v, "late"))
    };
    assert_eq!(window(&[]), (0, 7), "the last 100 ms");
    assert_eq!(
        window(&["--at", "50ms"]),
        (5, 0),
        "the 100 ms ending 50 ms in"
    );
    assert_eq!(window(&["--at", "1h"]), (0, 7), "past the end: the end");
    let out = scopeprof(&["top", target, "--once", "--at", "all"]);
    assert_eq!(out.status.code(), Some(2));
    let out = scopeprof(&["top", target, "--at", "1s"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("go with --once"));
    let out = scopeprof(&["top", target, "--once", "--timings"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("the snapshot took"));
}

#[test]
fn reads_a_file_of_the_python_package() {
    let dir = tempfile::tempdir().unwrap();
    let file = python_package_profile(dir.path(), "py.h5", false, 2000);
    let v = top_json(file.to_str().unwrap(), "all");
    assert_eq!(calls_of(&v, "solve"), 120, "{v}");
    assert_eq!(calls_of(&v, "inner"), 120, "{v}");
    assert_eq!(calls_of(&v, "setup"), 1, "{v}");
    for r in v["regions"].as_array().unwrap() {
        let (p50, p99, max) = (
            r["p50_ns"].as_i64().unwrap(),
            r["p99_ns"].as_i64().unwrap(),
            r["max_ns"].as_i64().unwrap(),
        );
        assert!(0 <= p50 && p50 <= p99 && p99 <= max, "{r}");
    }
}

/// Spool bytes of a real run: after `a` calls of region `a`, and after `b` more of region `b`.
fn spool_bytes(dir: &Path, a: u64, b: u64) -> (Vec<u8>, Vec<u8>) {
    let _turn = SPOOLS.lock().unwrap_or_else(|e| e.into_inner());
    let out = dir.join("src.h5");
    let (layer, guard) = ScopeLayer::builder()
        .output(&out)
        .summary(false)
        .spool_sync_interval(Duration::from_millis(10))
        .build()
        .unwrap();
    let d = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    let spool = spool_path(&out);
    let wait_for = |region: u32, n: u64| {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let mut f = SpoolFollower::open(&spool).unwrap();
            let mut got = 0;
            f.refresh(
                |r, c| {
                    if r == region {
                        got += c.len() as u64
                    }
                },
                |_| {},
            )
            .unwrap();
            if got == n {
                return std::fs::read(&spool).unwrap();
            }
            assert!(Instant::now() < deadline, "{got} of {n} calls in the spool");
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    let first = tracing::dispatcher::with_default(&d, || {
        for _ in 0..a {
            tracing::info_span!("a").in_scope(|| std::hint::black_box(1));
        }
        wait_for(0, a)
    });
    let second = tracing::dispatcher::with_default(&d, || {
        for _ in 0..b {
            tracing::info_span!("b").in_scope(|| std::hint::black_box(1));
        }
        wait_for(1, b)
    });
    drop(d);
    guard.finalize().unwrap();
    (first, second)
}

/// Calls per region id of the whole spool, read through the follower's time index.
fn counts(f: &mut SpoolFollower) -> Vec<u64> {
    let mut n = vec![0u64; 2];
    f.calls_between(i64::MIN, i64::MAX, |r, c| n[r as usize] += c.len() as u64)
        .unwrap();
    n
}

#[test]
fn follows_a_spool_cut_back_and_rotated() {
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = spool_bytes(dir.path(), 1000, 500);
    assert!(second.starts_with(&first) && second.len() > first.len());
    let path = dir.path().join(".watched.h5.spool");
    std::fs::write(&path, &first).unwrap();
    let mut f = SpoolFollower::open(&path).unwrap();
    let mut new = 0u64;
    f.refresh(|_, c| new += c.len() as u64, |_| {}).unwrap();
    assert_eq!((new, counts(&mut f)), (1000, vec![1000, 0]));

    // The program writes more; only the new bytes are read.
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    use std::io::Write;
    file.write_all(&second[first.len()..]).unwrap();
    let mut new = 0u64;
    let r = f.refresh(|_, c| new += c.len() as u64, |_| {}).unwrap();
    assert_eq!(r.bytes, (second.len() - first.len()) as u64);
    assert_eq!((new, counts(&mut f)), (500, vec![1000, 500]));

    // A failed write undone: the file is cut back to the earlier frames.
    file.set_len(first.len() as u64).unwrap();
    let r = f.refresh(|_, _| {}, |_| {}).unwrap();
    assert_eq!(r.rewound, (second.len() - first.len()) as u64);
    assert_eq!(counts(&mut f), vec![1000, 0]);
    // ... and written again.
    file.write_all(&second[first.len()..]).unwrap();
    f.refresh(|_, _| {}, |_| {}).unwrap();
    assert_eq!(counts(&mut f), vec![1000, 500]);

    // Cut back, then other frames written past the old end before the next look (region
    // `a`'s frames again): the frames read before no longer match, and the follower reads on
    // from the last one still intact.
    file.set_len(first.len() as u64).unwrap();
    let header_end = 5 + u32::from_le_bytes(first[1..5].try_into().unwrap()) as usize;
    file.write_all(&first[header_end..]).unwrap();
    let r = f.refresh(|_, _| {}, |_| {}).unwrap();
    assert!(r.rewound > 0 && !r.restarted, "{r:?}");
    assert_eq!(counts(&mut f), vec![2000, 0]);

    // Rotation: the spool renamed aside and a new one at the path.
    assert!(!f.moved());
    std::fs::rename(&path, dir.path().join(".watched.h5.spool.1")).unwrap();
    assert!(f.moved());
    std::fs::write(&path, &first).unwrap();
    assert!(f.moved(), "a new file at the path is another inode");
    assert_eq!(
        counts(&mut f),
        vec![2000, 0],
        "the open file is the old phase"
    );
    let mut next = SpoolFollower::open(&path).unwrap();
    next.refresh(|_, _| {}, |_| {}).unwrap();
    assert_eq!(counts(&mut next), vec![1000, 0]);

    // The CLI reads the same: by the output path, and the crashed spool named directly.
    let v = top_json(dir.path().join("watched.h5").to_str().unwrap(), "all");
    assert_eq!(calls_of(&v, "a"), 1000, "{v}");
    let v = top_json(
        dir.path().join(".watched.h5.spool.1").to_str().unwrap(),
        "all",
    );
    assert_eq!((calls_of(&v, "a"), calls_of(&v, "b")), (2000, 0), "{v}");
}

#[test]
fn bad_targets_get_one_clear_line() {
    let dir = tempfile::tempdir().unwrap();
    let check = |args: &[&str], want: &str| {
        let out = scopeprof(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(want), "expected {want:?} in {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    };
    check(
        &["top", "999999999", "--once"],
        "no process with id 999999999",
    );
    let missing = dir.path().join("none.h5");
    check(
        &["top", missing.to_str().unwrap(), "--once"],
        "no such file",
    );
    let junk = dir.path().join("junk.bin");
    std::fs::write(&junk, b"hello, not a profile").unwrap();
    check(
        &["top", junk.to_str().unwrap(), "--once"],
        "neither a profile",
    );
    check(
        &["top", junk.to_str().unwrap(), "--once", "--window", "soon"],
        "--window",
    );
    // A process of another user.
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let mut child = None;
    let pid = if me == 0 {
        use std::os::unix::process::CommandExt;
        let c = std::process::Command::new("sleep")
            .arg("30")
            .uid(65534)
            .spawn()
            .unwrap();
        let pid = c.id();
        child = Some(c);
        pid
    } else {
        1
    };
    check(&["top", &pid.to_string(), "--once"], "belongs to user id");
    if let Some(mut c) = child {
        let _ = c.kill();
        let _ = c.wait();
    }
    // Our own process, with no spool open (this test holds none).
    let _turn = SPOOLS.lock().unwrap_or_else(|e| e.into_inner());
    let mut c = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    check(
        &["top", &c.id().to_string(), "--once"],
        "holds no scope-profiler spool",
    );
    let _ = c.kill();
    let _ = c.wait();
}

/// Runs `scopeprof top ARGS` in an 80x24 pseudo-terminal, types `keys` once the screen shows
/// `ready`, and returns its exit status, the screen (as a terminal shows it) before each key,
/// and everything it wrote.
fn in_a_terminal(args: &[&str], ready: &str, keys: &[&str]) -> (Option<i32>, Vec<String>, String) {
    use std::io::{Read, Write};
    use std::os::fd::{FromRawFd, OwnedFd};
    let (mut master, mut slave) = (0, 0);
    let size = libc::winsize {
        ws_row: 24,
        ws_col: 80,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty writes two descriptors into `master` and `slave` and reads `size`.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &size,
        )
    };
    assert_eq!(rc, 0, "openpty");
    // SAFETY: both descriptors were just opened and are owned here alone.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_scopeprof"))
        .arg("top")
        .args(args)
        .env("TERM", "xterm")
        .env("NO_COLOR", "1")
        .stdin(slave.try_clone().unwrap())
        .stdout(slave.try_clone().unwrap())
        .stderr(slave)
        .spawn()
        .unwrap();
    let mut writer = std::fs::File::from(master.try_clone().unwrap());
    let screen = Arc::new(Mutex::new(Vec::new()));
    let reader = {
        let screen = screen.clone();
        let mut master = std::fs::File::from(master);
        std::thread::spawn(move || {
            let mut buf = [0u8; 65536];
            while let Ok(n) = master.read(&mut buf) {
                if n == 0 {
                    break;
                }
                screen.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        })
    };
    let text = |s: &Mutex<Vec<u8>>| String::from_utf8_lossy(&s.lock().unwrap()).into_owned();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !text(&screen).contains(ready) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut marks = Vec::new();
    for k in keys {
        marks.push(screen.lock().unwrap().len());
        writer.write_all(k.as_bytes()).unwrap();
        std::thread::sleep(Duration::from_millis(300));
    }
    while Instant::now() < deadline && child.try_wait().unwrap().is_none() {
        std::thread::sleep(Duration::from_millis(50));
    }
    // Still running at the deadline: killed, and its status says so (no exit code).
    let _ = child.kill();
    let status = child.wait().unwrap().code();
    drop(writer);
    drop(reader);
    let raw = screen.lock().unwrap().clone();
    let screens = marks
        .iter()
        .map(|&m| {
            let mut vt = vt100::Parser::new(24, 80, 0);
            vt.process(&raw[..m]);
            vt.screen().contents()
        })
        .collect();
    (status, screens, text(&screen))
}

#[test]
fn the_terminal_ui_takes_keys_and_restores_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let file = tokio_profile(dir.path());
    let file = file.to_str().unwrap();
    // Sort, filter for `hand`, open its detail, the tasks and threads views, pause, move
    // back, quit.
    let keys = [
        "s", "/", "h", "a", "n", "d", "\r", "\r", "3", "4", " ", "\x1b[D", "q",
    ];
    let (status, screens, raw) = in_a_terminal(&[file, "--window", "all"], "q quit", &keys);
    assert_eq!(status, Some(0), "{raw}");
    let before = |key: usize| &screens[key];
    // The regions view, sorted by calls/s, then by wall%; the help line at the bottom.
    assert!(
        before(0).contains("calls/s*") && before(0).contains("handler"),
        "{}",
        before(0)
    );
    assert!(
        before(0).lines().last().unwrap().starts_with("q quit"),
        "{}",
        before(0)
    );
    assert!(before(1).contains("wall%*"), "{}", before(1));
    // Filtering as you type: `hand` leaves `handler` alone.
    let filtered = before(6);
    assert!(filtered.contains("filter: hand_"), "{filtered}");
    assert!(
        filtered.contains("handler") && !filtered.contains("main_work"),
        "{filtered}"
    );
    // The detail of `handler`: its 12 calls, histogram and slowest calls in tasks.
    let detail = before(8);
    assert!(
        detail.contains("handler: 12 calls, p50") && detail.contains("slowest"),
        "{detail}"
    );
    assert!(detail.contains("task "), "{detail}");
    // The tasks view (12 tasks, rooted at `handler`), the threads view.
    assert!(
        before(9).contains("root") && before(9).contains("handler"),
        "{}",
        before(9)
    );
    assert!(before(10).contains("tokio-rt-worker"), "{}", before(10));
    // Paused, then moved back.
    assert!(
        before(0).contains("[END]"),
        "a finished file: {}",
        before(0)
    );
    assert!(before(12).contains("[PAUSED]"), "{}", before(12));
    // The alternate screen was left: the terminal is as it was.
    assert!(
        raw.ends_with("\x1b[?1049l\x1b[?25h") || raw.contains("\x1b[?1049l"),
        "{raw}"
    );
    // Ctrl-C quits too.
    let (status, _, raw) = in_a_terminal(&[file], "q quit", &["\x03"]);
    assert_eq!(status, Some(0), "{raw}");
    assert!(raw.contains("\x1b[?1049l"));
}

#[test]
fn mutated_spools_are_errors_never_panics() {
    let dir = tempfile::tempdir().unwrap();
    let (first, _) = spool_bytes(dir.path(), 300, 0);
    let path = dir.path().join(".mutated.h5.spool");
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let (mut ok, mut err) = (0, 0);
    for round in 0..500 {
        let mut bytes = first.clone();
        for _ in 0..1 + next() % 4 {
            let at = (next() % bytes.len() as u64) as usize;
            bytes[at] = next() as u8;
        }
        if round % 5 == 0 {
            bytes.truncate((next() % bytes.len() as u64) as usize);
        }
        std::fs::write(&path, &bytes).unwrap();
        let mut f = SpoolFollower::open(&path).unwrap();
        let read = f
            .refresh(|_, _| {}, |_| {})
            .and_then(|_| f.calls_between(i64::MIN, i64::MAX, |_, _| {}));
        match read {
            Ok(()) => ok += 1,
            Err(e) => {
                assert!(e.to_string().contains("spool"), "{e}");
                err += 1
            }
        }
    }
    assert!(ok > 0 && err > 0, "{ok} read, {err} refused");
}

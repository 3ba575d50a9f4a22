//! The flight recorder (`Builder::flight_recorder`) on a real Tokio service: requests driven
//! on two workers, a request left stuck on purpose, dumps asked for while the load goes on.
//! Each dump must read back, cover the window, hold exactly the requests the program itself
//! saw end in the time it covers (within those at its edges), and show the stuck request as
//! open with its age. The whole-run file keeps exact statistics.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use scope_profiler::read::Profile;
use scope_profiler::{Error, ScopeLayer};

/// CLOCK_MONOTONIC, the clock of the profile's nanoseconds.
fn mono_ns() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer for the call.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// One test at a time: the service test keeps both cores busy, and the trigger tests judge
/// latencies and rates that a neighbour test would disturb.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

#[tracing::instrument]
async fn request(i: u64) -> u64 {
    // Some work that records nothing itself.
    let x = (0..2_000 + i % 500).fold(i, |a, b| std::hint::black_box(a ^ b));
    tokio::task::yield_now().await;
    x
}

#[tracing::instrument(skip(rx))]
async fn stuck(rx: tokio::sync::oneshot::Receiver<()>) {
    let _ = rx.await;
}

/// A Tokio runtime of two workers, each recording through `d`.
fn two_workers(d: tracing::Dispatch) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .on_thread_start(move || std::mem::forget(tracing::dispatcher::set_default(&d)))
        .build()
        .unwrap()
}

/// Calls of `region` in a dump, and the earliest start among them.
fn calls_of(path: &std::path::Path, region: &str) -> (u64, i64) {
    let p = Profile::open(path).expect("the dump reads back");
    let (mut n, mut first) = (0, i64::MAX);
    p.for_each_call(1 << 16, |row, calls| {
        if p.region_name(row.region) == region {
            n += calls.len() as u64;
            first = calls.iter().map(|c| c.start_ns).fold(first, i64::min);
        }
        Ok(())
    })
    .unwrap();
    (n, first)
}

#[test]
fn a_dump_of_a_running_service_holds_its_window_and_the_stuck_request() {
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("service.h5");
    let window = Duration::from_millis(1200);
    let (d, guard) = common::dispatch(
        ScopeLayer::builder()
            .output(&output)
            .track_async(true)
            .spool_sync_interval(Duration::from_millis(100))
            .flight_recorder(window),
    );
    let rt = two_workers(d);
    // The program's own log: when each request ended.
    let ends: Arc<Mutex<Vec<i64>>> = Arc::default();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (release, rx) = tokio::sync::oneshot::channel();
    let stuck_since = mono_ns();
    let stuck_task = rt.spawn(stuck(rx));
    let load = {
        let (ends, stop) = (ends.clone(), stop.clone());
        rt.spawn(async move {
            let mut i = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let mut batch = Vec::new();
                for _ in 0..20 {
                    i += 1;
                    let ends = ends.clone();
                    batch.push(tokio::spawn(async move {
                        request(i).await;
                        ends.lock().unwrap().push(mono_ns());
                    }));
                }
                for t in batch {
                    t.await.unwrap();
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
    };
    std::thread::sleep(Duration::from_millis(2500));
    // Two dumps while the load goes on: one through the guard, one from another thread.
    let before = mono_ns();
    let first = guard.dump(dir.path().join("first.h5")).expect("dump");
    let after = mono_ns();
    let handle = guard.dump_handle();
    let second_path = dir.path().join("second.h5");
    let second = std::thread::spawn(move || handle.dump(second_path))
        .join()
        .unwrap()
        .expect("dump from a thread");
    assert!(second.file().unwrap().exists());

    // It covers at least the window.
    let covered = first.window_ns().expect("a dump's window") as i64;
    assert!(
        covered >= window.as_nanos() as i64,
        "covers {covered} ns, less than the window"
    );
    // Its start, known to within the dump's own duration: the window ends between `before`
    // and `after`.
    let (from_early, from_late) = (before - covered, after - covered);
    let (n, first_start) = calls_of(first.file().unwrap(), "request");
    assert_eq!(n, first.region("request").unwrap().calls, "report = file");
    eprintln!(
        "dump: {n} requests, covers {covered} ns; first starts {} ns before the dump",
        before - first_start
    );
    assert!(first_start <= after - window.as_nanos() as i64);
    // Exactly the requests that ended in it, up to those at its edges: every one that ended
    // after its start and before the dump was asked for is in; none that ended more than
    // 0.5 s before its start (the flusher folds within a few flush intervals) or after it
    // returned.
    let logged = ends.lock().unwrap().clone();
    let count = |lo: i64, hi: i64| logged.iter().filter(|&&e| e >= lo && e <= hi).count() as u64;
    let (lower, upper) = (
        count(from_late, before),
        count(from_early - 500_000_000, after),
    );
    assert!(
        lower <= n && n <= upper,
        "{n} requests in the dump; the program saw {lower} end inside it and {upper} at most"
    );
    assert!(lower > 100, "the load ran: {lower} requests in the window");

    // The stuck request is there as open, with its age.
    let open = Profile::open(first.file().unwrap())
        .unwrap()
        .open_calls()
        .unwrap()
        .expect("the open calls at the dump");
    let call = open
        .calls
        .iter()
        .find(|c| c.region == "stuck")
        .expect("the stuck request is open in the dump");
    assert!(
        open.age_ns(call) >= before - stuck_since - 200_000_000,
        "age {} ns",
        open.age_ns(call)
    );

    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    rt.block_on(load).unwrap();
    let _ = release.send(());
    rt.block_on(stuck_task).unwrap();
    drop(rt);
    // The whole run's statistics stay exact.
    let report = guard.finalize().expect("finalize");
    let total = ends.lock().unwrap().len() as u64;
    assert_eq!(report.region("request").unwrap().calls, total);
    // It lists where the dumps went.
    let written = [dir.path().join("first.h5"), dir.path().join("second.h5")];
    assert_eq!(report.dumps(), &written[..]);
    assert_eq!(report.dropped(), 0);
    let whole = Profile::open(&output).unwrap();
    assert_eq!(
        whole.layout(),
        scope_profiler::read::StorageLayout::Aggregate,
        "the whole run's file holds statistics"
    );
    drop(guard);
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".flight-"))
        .collect();
    assert!(left.is_empty(), "segments left behind: {left:?}");
}

#[test]
fn bad_dumps_are_typed_errors_and_the_recorder_goes_on() {
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    // Without a flight recorder.
    let (_d, plain) = common::dispatch(ScopeLayer::builder().output(dir.path().join("p.h5")));
    match plain.dump(dir.path().join("x.h5")) {
        Err(Error::InvalidOption { option, .. }) => assert_eq!(option, "flight_recorder"),
        other => panic!("expected InvalidOption, got {other:?}"),
    }
    drop(plain);
    // Invalid options.
    for (builder, option) in [
        (
            ScopeLayer::builder().flight_recorder(Duration::ZERO),
            "flight_recorder",
        ),
        (
            ScopeLayer::builder()
                .flight_recorder(Duration::from_secs(1))
                .flight_disk_budget(1000),
            "flight_disk_budget",
        ),
        (
            ScopeLayer::builder()
                .no_output()
                .flight_recorder(Duration::from_secs(1)),
            "flight_recorder",
        ),
    ] {
        // Refused by `build()` before anything is created.
        match common::try_dispatch(builder) {
            Err(Error::InvalidOption { option: o, .. }) => assert_eq!(o, option),
            other => panic!("expected InvalidOption for {option}, got {:?}", other.err()),
        }
    }
    // A dump into a directory that does not exist: an I/O error, and the next one works.
    let (d, guard) = common::dispatch(
        ScopeLayer::builder()
            .output(dir.path().join("f.h5"))
            .flight_recorder(Duration::from_secs(5)),
    );
    tracing::dispatcher::with_default(&d, || tracing::info_span!("a").in_scope(|| ()));
    match guard.dump(dir.path().join("missing/dir/d.h5")) {
        Err(Error::Io { .. }) | Err(Error::OutputPath { .. }) => {}
        other => panic!("expected an I/O error, got {other:?}"),
    }
    tracing::dispatcher::with_default(&d, || tracing::info_span!("a").in_scope(|| ()));
    let ok = guard.dump(dir.path().join("d.h5")).expect("the next dump");
    assert_eq!(ok.region("a").unwrap().calls, 2);
    assert_eq!(guard.finalize().unwrap().region("a").unwrap().calls, 2);
}

static EARLIER_HANDLER_RAN: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

extern "C" fn earlier_handler(_: libc::c_int) {
    EARLIER_HANDLER_RAN.store(true, std::sync::atomic::Ordering::SeqCst);
}

#[test]
fn a_signal_dumps_the_window_and_the_program_s_own_handler_still_runs() {
    let _one = serial();
    // The program's own handler, installed before the profiler's.
    // SAFETY: a zeroed sigaction with a handler that only stores to an atomic.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = earlier_handler as *const () as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        assert_eq!(libc::sigaction(libc::SIGUSR2, &sa, std::ptr::null_mut()), 0);
    }
    let dir = tempfile::tempdir().unwrap();
    let (d, guard) = common::dispatch(
        ScopeLayer::builder()
            .output(dir.path().join("svc.h5"))
            .flight_recorder(Duration::from_secs(30))
            .dump_on_signal(libc::SIGUSR2),
    );
    tracing::dispatcher::with_default(&d, || {
        for _ in 0..50 {
            tracing::info_span!("served").in_scope(|| ());
        }
    });
    // SAFETY: sends SIGUSR2 to this process; both handlers are installed.
    assert_eq!(unsafe { libc::kill(libc::getpid(), libc::SIGUSR2) }, 0);
    let dumped = (0..600).find_map(|_| {
        std::thread::sleep(Duration::from_millis(50));
        std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| {
                let n = p.file_name().unwrap().to_string_lossy().into_owned();
                n.starts_with("svc.dump-SIGUSR2-") && n.ends_with(".h5")
            })
    });
    let dumped = dumped.expect("a dump named after the signal appeared within 30 s");
    // Published whole: once the name exists, the file reads back.
    let (n, _) = calls_of(&dumped, "served");
    assert_eq!(n, 50);
    assert!(
        EARLIER_HANDLER_RAN.load(std::sync::atomic::Ordering::SeqCst),
        "the program's own SIGUSR2 handler was replaced"
    );
    guard.finalize().unwrap();
    // A signal without a flight recorder is refused.
    match common::try_dispatch(ScopeLayer::builder().dump_on_signal(libc::SIGUSR2)) {
        Err(Error::InvalidOption { option, .. }) => assert_eq!(option, "dump_on_signal"),
        other => panic!("expected InvalidOption, got {:?}", other.err()),
    }
    // A signal that cannot be handled is refused.
    let refused = common::try_dispatch(
        ScopeLayer::builder()
            .output(dir.path().join("k.h5"))
            .flight_recorder(Duration::from_secs(1))
            .dump_on_signal(libc::SIGKILL),
    );
    match refused {
        Err(Error::InvalidOption { option, .. }) => assert_eq!(option, "dump_on_signal"),
        other => panic!("expected InvalidOption for SIGKILL, got {:?}", other.err()),
    }
}

/// The dump files beside `dir/<stem>.h5` whose names carry `why`.
fn dumps_of(dir: &std::path::Path, stem: &str, why: &str) -> Vec<std::path::PathBuf> {
    let prefix = format!("{stem}.dump-{why}-");
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy().into_owned();
            n.starts_with(&prefix) && n.ends_with(".h5")
        })
        .collect();
    v.sort();
    v
}

#[test]
fn triggers_dump_when_latency_or_rate_go_over_and_cool_down() {
    let _one = serial();
    use scope_profiler::Trigger;
    let dir = tempfile::tempdir().unwrap();
    let (d, guard) = common::dispatch(
        ScopeLayer::builder()
            .output(dir.path().join("svc.h5"))
            .spool_sync_interval(Duration::from_millis(100))
            .flight_recorder(Duration::from_secs(10))
            .dump_when(Trigger::p99_over(
                "request",
                Duration::from_millis(40),
                Duration::from_secs(2),
            ))
            .dump_when(
                Trigger::calls_rate_over("tick", 50.0, Duration::from_millis(500))
                    .cooldown(Duration::from_millis(400)),
            ),
    );
    let serve = |slow: bool, for_ms: u64| {
        tracing::dispatcher::with_default(&d, || {
            let t0 = std::time::Instant::now();
            let mut i = 0;
            while t0.elapsed() < Duration::from_millis(for_ms) {
                // Slow: one request in ten takes 60 ms (the p99 is then 60 ms).
                i += 1;
                let ms = if slow && i % 10 == 0 { 60 } else { 1 };
                tracing::info_span!("request")
                    .in_scope(|| std::thread::sleep(Duration::from_millis(ms)));
            }
        })
    };
    // Fast requests: no dump.
    serve(false, 1200);
    guard.sync().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(dumps_of(dir.path(), "svc", "p99-request").is_empty());
    // Slow ones: a dump, named after the trigger, holding them (at least 100 calls in 2 s
    // even if each 1 ms sleep takes 5 ms).
    serve(true, 3000);
    let dumped = (0..600)
        .find_map(|_| {
            std::thread::sleep(Duration::from_millis(50));
            dumps_of(dir.path(), "svc", "p99-request").pop()
        })
        .expect("the p99 trigger dumped within 30 s");
    let slowest = {
        let p = Profile::open(&dumped).expect("the trigger's dump reads back");
        let mut max = 0;
        p.for_each_call(1 << 16, |_, calls| {
            max = calls.iter().map(|c| c.dur_ns).fold(max, i64::max);
            Ok(())
        })
        .unwrap();
        max
    };
    assert!(
        slowest >= 30_000_000,
        "the slow requests are in it: {slowest} ns"
    );
    // A rate that holds for 2.5 s fires once per cool-down (400 ms), not at every check.
    tracing::dispatcher::with_default(&d, || {
        let t0 = std::time::Instant::now();
        while t0.elapsed() < Duration::from_millis(2500) {
            tracing::info_span!("tick").in_scope(|| ());
            std::thread::sleep(Duration::from_millis(2));
        }
    });
    guard.sync().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let rate = dumps_of(dir.path(), "svc", "rate-tick").len();
    assert!(
        (2..=8).contains(&rate),
        "{rate} rate dumps in 2.5 s with a 400 ms cool-down"
    );
    guard.finalize().unwrap();
    drop(guard);
    // Refused without a flight recorder, and with a zero window.
    for builder in [
        ScopeLayer::builder().dump_when(Trigger::calls_rate_over("x", 1.0, Duration::from_secs(1))),
        ScopeLayer::builder()
            .output(dir.path().join("z.h5"))
            .flight_recorder(Duration::from_secs(1))
            .dump_when(Trigger::calls_rate_over("x", 1.0, Duration::ZERO)),
    ] {
        match common::try_dispatch(builder) {
            Err(Error::InvalidOption { option, .. }) => assert_eq!(option, "dump_when"),
            other => panic!("expected InvalidOption, got {:?}", other.err()),
        }
    }
}

#[test]
fn a_trigger_that_always_holds_keeps_at_most_max_trigger_dumps() {
    let _one = serial();
    use scope_profiler::{Trigger, MAX_TRIGGER_DUMPS};
    let dir = tempfile::tempdir().unwrap();
    let (d, guard) = common::dispatch(
        ScopeLayer::builder()
            .output(dir.path().join("storm.h5"))
            .spool_sync_interval(Duration::from_millis(50))
            .flight_recorder(Duration::from_secs(1))
            .dump_when(
                Trigger::calls_rate_over("tick", 0.0, Duration::from_millis(200))
                    .cooldown(Duration::from_millis(50)),
            ),
    );
    let mut most = 0;
    tracing::dispatcher::with_default(&d, || {
        let t0 = std::time::Instant::now();
        while t0.elapsed() < Duration::from_secs(4) {
            tracing::info_span!("tick").in_scope(|| ());
            std::thread::sleep(Duration::from_millis(5));
            most = most.max(dumps_of(dir.path(), "storm", "rate-tick").len());
        }
    });
    drop(guard);
    let kept = dumps_of(dir.path(), "storm", "rate-tick").len();
    assert!(
        kept <= MAX_TRIGGER_DUMPS && most <= MAX_TRIGGER_DUMPS,
        "{kept} kept, {most} at most"
    );
    assert!(kept >= 3, "it kept firing: {kept}");
}

#[test]
fn a_threshold_keeps_the_long_calls_whole_and_counts_the_short_ones() {
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let (d, guard) = common::dispatch(
        ScopeLayer::builder()
            .output(dir.path().join("t.h5"))
            .flight_recorder(Duration::from_secs(60))
            .flight_min_duration(Duration::from_millis(1)),
    );
    let fast = || tracing::info_span!("fast").in_scope(|| std::hint::black_box(0));
    tracing::dispatcher::with_default(&d, || {
        for _ in 0..20 {
            // A long call whose children are short but one: it is kept, they are counted
            // under it.
            tracing::info_span!("batch").in_scope(|| {
                for _ in 0..50 {
                    fast();
                }
                // A long child, kept, with short children of its own (one of them with a
                // short child): all five are counted under it.
                tracing::info_span!("inner").in_scope(|| {
                    (0..3).for_each(|_| {
                        fast();
                    });
                    tracing::info_span!("tiny").in_scope(fast);
                    std::thread::sleep(Duration::from_millis(2));
                });
                std::thread::sleep(Duration::from_millis(2));
            });
        }
        // Short calls no kept call encloses.
        (0..7).for_each(|_| {
            fast();
        });
    });
    let path = dir.path().join("dump.h5");
    let dump = guard.dump(&path).unwrap();
    assert_eq!(
        calls_of(&path, "batch").0,
        20,
        "every long call is in the dump"
    );
    assert_eq!(calls_of(&path, "inner").0, 20);
    assert_eq!(calls_of(&path, "fast").0, 0, "no short call is");
    assert_eq!(calls_of(&path, "tiny").0, 0);
    let per_region = [("fast".to_owned(), 1087), ("tiny".to_owned(), 20)];
    assert_eq!(
        dump.calls_below_threshold(),
        &per_region,
        "the short calls are counted"
    );
    let h5 = hdf5::File::open(&path).unwrap();
    let counted: Vec<i64> = h5
        .dataset("scope_profiler_rs/flight/below_threshold_calls")
        .unwrap()
        .read_raw()
        .unwrap();
    assert_eq!(counted, vec![1087, 20]);
    drop(h5);
    // Each kept call knows how many short calls it enclosed: 50 directly under each batch,
    // 3 + 1 + 1 under each inner, 7 under none.
    let f = Profile::open(&path).unwrap().flight().unwrap().unwrap();
    assert_eq!(f.below_threshold, per_region);
    assert_eq!(f.below_at_top, Some(7));
    for (region, each) in [("batch", 50), ("inner", 5)] {
        let mine: Vec<_> = (f.below_by_parent.iter())
            .filter(|p| p.region == region)
            .collect();
        let indices: Vec<u64> = mine.iter().map(|p| p.index).collect();
        assert_eq!(indices, (0..20).collect::<Vec<u64>>(), "{region}");
        assert!(mine.iter().all(|p| p.calls == each), "{region}: {mine:?}");
    }
    assert_eq!(f.below_by_parent.len(), 40, "{:?}", f.below_by_parent);
    // The statistics of the whole run are exact.
    let r = guard.finalize().unwrap();
    assert_eq!(r.region("fast").unwrap().calls, 1087);
    assert_eq!(r.region("batch").unwrap().calls, 20);
}

/// Async calls: short calls polled on any worker count under the task's kept call (the lane
/// of a call in a task is its task, with `track_async`).
#[test]
fn a_threshold_counts_short_calls_under_their_async_parent_across_workers() {
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let (d, guard) = common::dispatch(
        ScopeLayer::builder()
            .output(dir.path().join("a.h5"))
            .track_async(true)
            .flight_recorder(Duration::from_secs(60))
            .flight_min_duration(Duration::from_millis(1)),
    );
    let rt = two_workers(d);
    #[tracing::instrument]
    async fn handle(i: u32) {
        for k in 0..4 {
            tracing::info_span!("step", k).in_scope(|| std::hint::black_box(i));
            // Each await may resume on the other worker.
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    rt.block_on(async {
        let tasks: Vec<_> = (0..30).map(|i| tokio::spawn(handle(i))).collect();
        for t in tasks {
            t.await.unwrap();
        }
    });
    drop(rt);
    let path = dir.path().join("dump.h5");
    guard.dump(&path).unwrap();
    let f = Profile::open(&path).unwrap().flight().unwrap().unwrap();
    assert_eq!(f.below_threshold, [("step".to_owned(), 120)]);
    assert_eq!(f.below_at_top, Some(0), "{f:?}");
    let handles: Vec<_> = (f.below_by_parent.iter())
        .filter(|p| p.region == "handle")
        .collect();
    assert_eq!(handles.len(), 30, "{f:?}");
    assert!(handles.iter().all(|p| p.calls == 4), "{handles:?}");
    drop(guard);
}

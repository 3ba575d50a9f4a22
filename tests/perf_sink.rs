//! The perf sink against the real `perf_event_open`: software counters per region (task-clock,
//! page-faults, context-switches), nesting, threads, phases, the errors for unknown and
//! uncountable events, the `rank0/perf_events` groups of the file, and the Python reader's
//! "Perf events" table.
//!
//! Tests take one lock so their busy loops do not compete for the CPUs (task-clock is CPU time,
//! region time is wall time).

#![cfg(all(feature = "perf", target_os = "linux"))]

mod common;

use common::thread_cpu_ns;

use std::path::Path;
use std::process::Command;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use hdf5::types::{IntSize, TypeDescriptor, VarLenUnicode};
use scope_profiler::{Error, FlushGuard, Report, ScopeLayer};
use tracing::info_span;

fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Busy-waits for `d` of wall time.
fn spin(d: Duration) {
    let end = Instant::now() + d;
    while Instant::now() < end {
        std::hint::black_box(0);
    }
}

/// Busy-waits until the thread has used `d` of CPU time (robust against a loaded machine).
fn spin_cpu(d: Duration) {
    let end = thread_cpu_ns() + d.as_nanos() as u64;
    while thread_cpu_ns() < end {
        std::hint::black_box(0);
    }
}

/// A layer counting `events` (plus a guard and its dispatcher).
fn build(
    events: &[&str],
    skip: bool,
    output: Option<&Path>,
) -> Result<(FlushGuard, tracing::Dispatch), Error> {
    let mut b = ScopeLayer::builder()
        .summary(false)
        .perf_events(events.iter().copied())
        .perf_skip_unsupported(skip);
    b = match output {
        Some(p) => b.output(p),
        None => b.no_output(),
    };
    let (d, guard) = common::try_dispatch(b)?;
    Ok((guard, d))
}

/// Profiles `work` counting `events` and returns the first finalize's report.
fn profile(events: &[&str], work: impl FnOnce()) -> Report {
    let (guard, d) = build(events, false, None).unwrap();
    tracing::dispatcher::with_default(&d, work);
    guard.finalize().unwrap()
}

/// The total of `event` in `region`.
fn perf(report: &Report, region: &str, event: &str) -> u64 {
    let r = report
        .region(region)
        .unwrap_or_else(|| panic!("no region {region}: {report:?}"));
    r.perf
        .iter()
        .find(|(e, _)| e == event)
        .unwrap_or_else(|| panic!("{region} has no {event}: {:?}", r.perf))
        .1
}

/// Involuntary context switches of the calling thread so far (preemptions).
fn preemptions() -> i64 {
    // SAFETY: an all-zero rusage is a valid value for getrusage to overwrite.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    ru.ru_nivcsw as i64
}

#[test]
fn task_clock_matches_the_time_of_a_busy_region() {
    let _s = serial();
    // task-clock counts while the thread is on a CPU, so thread CPU time <= task-clock <=
    // region time always, and task-clock ~ region time when nothing preempted the thread. On
    // a machine busy with other work most attempts are preempted (checked with the thread's
    // involuntary context switches); those only check the bounds.
    let mut unpreempted = 0;
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let (mut cpu_ns, mut switched) = (0, 0);
        let report = profile(&["task-clock"], || {
            info_span!("busy").in_scope(|| {
                let (t0, p0) = (thread_cpu_ns(), preemptions());
                spin(Duration::from_millis(3));
                cpu_ns = thread_cpu_ns() - t0;
                switched = preemptions() - p0;
            });
        });
        let busy = report.region("busy").unwrap();
        assert_eq!(busy.calls, 1);
        let task = perf(&report, "busy", "task-clock") as f64;
        let (cpu, region) = (cpu_ns as f64, busy.total_ns as f64);
        assert!(
            task >= 0.9 * cpu - 1e6,
            "task-clock {task} ns < thread CPU time {cpu} ns"
        );
        assert!(
            task <= region + 1e6,
            "task-clock {task} ns > region time {region} ns"
        );
        if switched == 0 {
            assert!(
                (task - region).abs() <= 0.3 * region + 1e6,
                "task-clock {task} ns vs region time {region} ns (not preempted)"
            );
            unpreempted += 1;
            if unpreempted == 3 {
                return;
            }
        }
    }
    assert!(
        unpreempted > 0,
        "every attempt was preempted: the machine is too busy to compare"
    );
}

#[test]
fn page_faults_count_fresh_memory() {
    let _s = serial();
    let report = profile(&["page-faults", "task-clock"], || {
        info_span!("touch").in_scope(|| {
            // 64 MiB is above glibc's largest mmap threshold, so the pages are fresh.
            let v = vec![1u8; 64 << 20];
            std::hint::black_box(&v);
        });
        info_span!("idle").in_scope(|| std::hint::black_box(1));
    });
    let touch = perf(&report, "touch", "page-faults");
    assert!(touch > 0, "no page faults counted");
    assert!(perf(&report, "idle", "page-faults") < touch);
}

#[test]
fn context_switches_count_sleeps() {
    let _s = serial();
    let report = profile(&["context-switches"], || {
        info_span!("nap").in_scope(|| {
            for _ in 0..20 {
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    });
    let switches = perf(&report, "nap", "context-switches");
    assert!(switches >= 20, "{switches} context switches for 20 sleeps");
}

#[test]
fn nested_regions_count_inclusively() {
    let _s = serial();
    let report = profile(&["task-clock"], || {
        info_span!("outer").in_scope(|| {
            spin_cpu(Duration::from_millis(15));
            info_span!("inner").in_scope(|| spin_cpu(Duration::from_millis(15)));
        })
    });
    let (outer, inner) = (
        perf(&report, "outer", "task-clock"),
        perf(&report, "inner", "task-clock"),
    );
    assert!(inner >= 14_000_000, "inner {inner}");
    assert!(
        outer >= inner + 14_000_000,
        "outer {outer} must include inner {inner}"
    );
}

#[test]
fn threads_are_counted_and_callsites_pool_by_name() {
    let _s = serial();
    let report = profile(&["task-clock"], || {
        let d = tracing::dispatcher::get_default(|d| d.clone());
        let hs: Vec<_> = (0..3)
            .map(|_| {
                let d = d.clone();
                std::thread::spawn(move || {
                    tracing::dispatcher::with_default(&d, || {
                        info_span!("work").in_scope(|| spin_cpu(Duration::from_millis(10)));
                    })
                })
            })
            .collect();
        hs.into_iter().for_each(|h| h.join().unwrap());
        // Another callsite of the same name, on this thread.
        info_span!("work").in_scope(|| spin_cpu(Duration::from_millis(10)));
    });
    assert_eq!(report.region("work").unwrap().calls, 4);
    let cpu = perf(&report, "work", "task-clock");
    assert!(
        cpu >= 38_000_000,
        "4 x 10 ms of CPU time counted as {cpu} ns"
    );
    let wall = report.region("work").unwrap().total_ns;
    assert!(
        cpu <= wall + 1_000_000,
        "{cpu} ns of CPU time in {wall} ns of calls"
    );
}

#[test]
fn each_finalize_reports_only_its_phase() {
    let _s = serial();
    let (guard, d) = build(&["task-clock"], false, None).unwrap();
    tracing::dispatcher::with_default(&d, || {
        info_span!("step").in_scope(|| spin_cpu(Duration::from_millis(30)));
        info_span!("once").in_scope(|| spin(Duration::from_millis(1)));
    });
    let first = guard.finalize().unwrap();
    tracing::dispatcher::with_default(&d, || {
        info_span!("step").in_scope(|| spin_cpu(Duration::from_millis(5)));
    });
    let second = guard.finalize().unwrap();
    let (a, b) = (
        perf(&first, "step", "task-clock"),
        perf(&second, "step", "task-clock"),
    );
    assert!(a >= 28_000_000, "phase 1: {a}");
    assert!(
        (4_500_000..15_000_000).contains(&b),
        "phase 2 counts only its 5 ms of CPU time: {b}"
    );
    assert!(
        second.region("once").unwrap().perf.is_empty(),
        "no calls, no perf row"
    );
}

#[test]
fn unknown_event_is_an_error_listing_the_supported_names() {
    let err = build(&["task-clock", "bogus-event"], true, None).unwrap_err();
    match &err {
        Error::UnknownPerfEvent { event, supported } => {
            assert_eq!(event, "bogus-event");
            for name in [
                "cycles",
                "instructions",
                "cache-references",
                "cache-misses",
                "branches",
                "branch-misses",
                "cpu-clock",
                "task-clock",
                "page-faults",
                "context-switches",
            ] {
                assert!(
                    supported.contains(&name),
                    "{name} missing from {supported:?}"
                );
                assert!(err.to_string().contains(name), "{err}");
            }
        }
        other => panic!("expected UnknownPerfEvent, got {other:?}"),
    }
}

/// Whether this machine can count `instructions`, asked of the kernel directly.
fn hardware_probe() -> Result<(), std::io::Error> {
    perf_event::Builder::new(perf_event::events::Hardware::INSTRUCTIONS)
        .build()
        .map(drop)
}

#[test]
fn hardware_event_is_counted_or_refused_with_the_reason() {
    let _s = serial();
    match (hardware_probe(), build(&["instructions"], false, None)) {
        (Ok(()), Ok((guard, d))) => {
            tracing::dispatcher::with_default(&d, || {
                info_span!("hw").in_scope(|| spin(Duration::from_millis(5)));
            });
            let report = guard.finalize().unwrap();
            assert!(perf(&report, "hw", "instructions") > 0);
        }
        (Err(kernel), Err(Error::PerfUnavailable { events })) => {
            assert_eq!(events.len(), 1, "{events:?}");
            assert_eq!(events[0].0, "instructions");
            assert!(
                events[0].1.contains(&kernel.to_string()),
                "{events:?} vs {kernel}"
            );
            let msg = Error::PerfUnavailable { events }.to_string();
            assert!(
                msg.contains("cannot count") && msg.contains("instructions"),
                "{msg}"
            );
        }
        (kernel, ours) => panic!(
            "the kernel says {kernel:?} but build() says {:?}",
            ours.map(|_| ())
        ),
    }
}

#[test]
fn skip_unsupported_continues_and_names_the_dropped_event() {
    let _s = serial();
    let (guard, d) = build(&["instructions", "task-clock"], true, None).unwrap();
    tracing::dispatcher::with_default(&d, || {
        info_span!("mixed").in_scope(|| spin(Duration::from_millis(5)));
    });
    let report = guard.finalize().unwrap();
    let names: Vec<&str> = report
        .region("mixed")
        .unwrap()
        .perf
        .iter()
        .map(|(e, _)| e.as_str())
        .collect();
    assert!(perf(&report, "mixed", "task-clock") > 0);
    if hardware_probe().is_ok() {
        assert_eq!(names, ["instructions", "task-clock"]);
        assert!(report.warnings().is_empty(), "{:?}", report.warnings());
    } else {
        assert_eq!(names, ["task-clock"]);
        assert!(
            report
                .warnings()
                .iter()
                .any(|w| w.contains("`instructions` not counted")),
            "{:?}",
            report.warnings()
        );
        // Nothing left to count is still an error.
        let err = build(&["instructions"], true, None).unwrap_err();
        assert!(matches!(err, Error::PerfUnavailable { .. }), "{err:?}");
    }
}

#[test]
fn file_has_perf_groups_that_the_python_reader_shows() {
    let _s = serial();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("perf.h5");
    let events = ["task-clock", "page-faults", "context-switches"];
    let (guard, d) = build(&events, false, Some(&path)).unwrap();
    tracing::dispatcher::with_default(&d, || {
        for _ in 0..2 {
            info_span!("solve").in_scope(|| spin(Duration::from_millis(5)));
        }
        info_span!("io/read").in_scope(|| std::thread::sleep(Duration::from_millis(2)));
    });
    let report = guard.finalize().unwrap();

    let file = hdf5::File::open(&path).unwrap();
    for (region, group) in [("solve", "solve"), ("io/read", "io|read")] {
        let g = file.group(&format!("rank0/perf_events/{group}")).unwrap();
        let calls = g.attr("calls").unwrap();
        assert_eq!(
            calls.dtype().unwrap().to_descriptor().unwrap(),
            TypeDescriptor::Integer(IntSize::U8)
        );
        assert_eq!(
            calls.read_scalar::<i64>().unwrap() as u64,
            report.region(region).unwrap().calls
        );
        let names = g.attr("event_names").unwrap();
        assert_eq!(names.shape(), vec![3]);
        let names: Vec<String> = names
            .read_raw::<VarLenUnicode>()
            .unwrap()
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(names, events);
        let values = g.dataset("values").unwrap();
        assert_eq!(
            values.dtype().unwrap().to_descriptor().unwrap(),
            TypeDescriptor::Unsigned(IntSize::U8)
        );
        let values = values.read_raw::<u64>().unwrap();
        let ours: Vec<u64> = events.iter().map(|e| perf(&report, region, e)).collect();
        assert_eq!(values, ours);
        let real: VarLenUnicode = g.attr("region").unwrap().read_scalar().unwrap();
        assert_eq!(real.as_str(), region);
    }
    assert!(
        !file.link_exists("rank0/perf_events/io"),
        "'/' must not nest groups"
    );
    drop(file);

    let exe = common::venv().join("bin").join("scope-profiler");
    let out = Command::new(&exe)
        .args(["inspect", path.to_str().unwrap()])
        .env("NO_COLOR", "1")
        .env("COLUMNS", "200")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", exe.display()));
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "inspect failed:\n{text}");
    let table = text
        .split("Perf events (rank 0)")
        .nth(1)
        .unwrap_or_else(|| panic!("no perf table:\n{text}"));
    for e in events {
        assert!(table.contains(e), "{e} missing:\n{table}");
    }
    let row = table
        .lines()
        .find(|l| l.contains(" solve "))
        .unwrap_or_else(|| panic!("{table}"));
    let cells: Vec<&str> = row
        .split('│')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    // Columns: region, calls, then the events sorted by name.
    let mut sorted = events;
    sorted.sort();
    let mut expect = vec!["solve".to_owned(), "2".to_owned()];
    expect.extend(sorted.iter().map(|e| perf(&report, "solve", e).to_string()));
    assert_eq!(cells, expect, "{table}");
    assert!(table.contains("io|read"), "{table}");
}

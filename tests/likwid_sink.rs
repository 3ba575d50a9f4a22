//! The LIKWID sink against a missing library, a recording stand-in (built here from
//! `tests/support/likwid_standin.c`) and the real Debian `liblikwid`.
//!
//! The library is chosen through the process-wide `SCOPE_PROFILER_LIKWID_LIB`, and LIKWID's
//! marker state is process-wide too, so everything runs in this binary's one test, in order.
//! No skipping: without Debian's `likwid` package (`scripts/install-deps.sh` installs it) the
//! test fails and says so.

#![cfg(feature = "likwid")]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use scope_profiler::{Error, Report, ScopeLayer};
use tracing::info_span;

const LIB_ENV: &str = "SCOPE_PROFILER_LIKWID_LIB";

fn build_standin(dir: &Path) -> PathBuf {
    let src = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/support/likwid_standin.c"
    );
    let out = dir.join("liblikwid_standin.so");
    let result = Command::new("cc")
        .args(["-shared", "-fPIC", "-Wall", "-o"])
        .arg(&out)
        .arg(src)
        .arg("-lpthread")
        .output()
        .expect("run cc (scripts/install-deps.sh installs gcc)");
    assert!(
        result.status.success(),
        "cc failed: {}",
        String::from_utf8_lossy(&result.stderr)
    );
    out
}

/// Profiles sync spans on the main thread and two workers with LIKWID markers on; returns the
/// report. The profiler (and with it the sink, which closes the markers) is gone on return.
fn profile_with_markers() -> Result<Report, Error> {
    let (d, guard) = common::try_dispatch(
        ScopeLayer::builder()
            .no_output()
            .summary(false)
            .likwid(true),
    )?;
    tracing::dispatcher::with_default(&d, || {
        for _ in 0..5 {
            info_span!("solve").in_scope(|| {
                for _ in 0..2 {
                    info_span!("inner").in_scope(|| std::hint::black_box(1));
                }
            });
        }
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let d = d.clone();
                std::thread::spawn(move || {
                    tracing::dispatcher::with_default(&d, || {
                        for _ in 0..3 {
                            info_span!("worker").in_scope(|| std::hint::black_box(2));
                        }
                    })
                })
            })
            .collect();
        workers.into_iter().for_each(|w| w.join().unwrap());
    });
    let report = guard.finalize();
    drop(d);
    report
}

/// One stand-in log line.
struct Call {
    function: String,
    tag: String,
    thread: String,
}

fn read_log(path: &Path) -> Vec<Call> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("no stand-in log at {}: {e}", path.display()))
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert_eq!(f.len(), 3, "bad log line {l:?}");
            Call {
                function: f[0].to_owned(),
                tag: f[1].to_owned(),
                thread: f[2].to_owned(),
            }
        })
        .collect()
}

fn missing_library_is_an_error_naming_it() {
    let missing = "/nonexistent/scope-profiler/liblikwid.so";
    std::env::set_var(LIB_ENV, missing);
    match profile_with_markers() {
        Err(Error::LibraryMissing { library, reason }) => {
            assert_eq!(library, missing);
            assert!(reason.contains(missing), "{reason}");
            let msg = Error::LibraryMissing { library, reason }.to_string();
            assert!(
                msg.contains("cannot load") && msg.contains(LIB_ENV),
                "{msg}"
            );
        }
        other => panic!("expected LibraryMissing, got {:?}", other.map(|_| ())),
    }
}

fn standin_sees_every_marker_call_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let lib = build_standin(dir.path());
    let log = dir.path().join("calls.log");
    std::env::set_var(LIB_ENV, &lib);
    std::env::set_var("LIKWID_STANDIN_LOG", &log);
    let report = profile_with_markers().expect("the stand-in loads");
    std::env::remove_var("LIKWID_STANDIN_LOG");
    let calls = read_log(&log);

    let functions: Vec<&str> = calls.iter().map(|c| c.function.as_str()).collect();
    assert_eq!(functions.first(), Some(&"init"), "{functions:?}");
    assert_eq!(functions.last(), Some(&"close"), "{functions:?}");
    assert_eq!(functions.iter().filter(|f| **f == "init").count(), 1);
    assert_eq!(functions.iter().filter(|f| **f == "close").count(), 1);
    for bad in ["start_nested", "stop_unmatched"] {
        assert!(!functions.contains(&bad), "{bad} in {functions:?}");
    }

    // Per thread: thread-init first, each region registered once before its first start,
    // starts and stops alternating and balanced.
    let mut threads: BTreeMap<&str, Vec<&Call>> = BTreeMap::new();
    for c in calls
        .iter()
        .filter(|c| c.function != "init" && c.function != "close")
    {
        threads.entry(&c.thread).or_default().push(c);
    }
    assert_eq!(threads.len(), 3, "main thread and two workers");
    for (tid, calls) in &threads {
        assert_eq!(calls[0].function, "thread_init", "thread {tid}");
        assert_eq!(
            calls.iter().filter(|c| c.function == "thread_init").count(),
            1
        );
        let mut registered = BTreeSet::new();
        let mut running = BTreeSet::new();
        for c in &calls[1..] {
            match c.function.as_str() {
                "register" => assert!(registered.insert(&c.tag), "{} registered twice", c.tag),
                "start" => {
                    assert!(
                        registered.contains(&c.tag),
                        "{} started unregistered",
                        c.tag
                    );
                    assert!(running.insert(&c.tag), "{} started twice", c.tag);
                }
                "stop" => assert!(
                    running.remove(&c.tag),
                    "{} stopped while not running",
                    c.tag
                ),
                other => panic!("unexpected {other} on thread {tid}"),
            }
        }
        assert!(running.is_empty(), "thread {tid} left {running:?} running");
    }

    // Starts per region equal our call counts (sync spans: one poll per call).
    for region in ["solve", "inner", "worker"] {
        let starts = calls
            .iter()
            .filter(|c| c.function == "start" && c.tag == region)
            .count() as u64;
        assert_eq!(starts, report.region(region).unwrap().calls, "{region}");
    }
    assert!(
        report.warnings().iter().all(|w| !w.contains("returned")),
        "{:?}",
        report.warnings()
    );
}

fn real_likwid_reports_its_errors_as_a_warning() {
    std::env::remove_var(LIB_ENV);
    let report = match profile_with_markers() {
        Ok(r) => r,
        Err(e @ Error::LibraryMissing { .. }) => panic!(
            "Debian's likwid package is needed for this test (scripts/install-deps.sh \
             installs it): {e}"
        ),
        Err(e) => panic!("{e}"),
    };
    eprintln!("warnings with the real liblikwid: {:?}", report.warnings());
    assert_eq!(report.region("inner").unwrap().calls, 10);
    // Not started under `likwid-perfctr -m`, LIKWID's marker API is not initialized and every
    // marker call returns -EFAULT (-14): reported once, with the code.
    let errors: Vec<&String> = report
        .warnings()
        .iter()
        .filter(|w| w.contains("returned"))
        .collect();
    assert_eq!(errors.len(), 1, "{:?}", report.warnings());
    assert!(
        errors[0].contains("likwid_marker") && errors[0].contains("-14"),
        "{errors:?}"
    );
    assert!(
        report
            .warnings()
            .iter()
            .any(|w| w.contains("likwid-perfctr")),
        "{:?}",
        report.warnings()
    );
}

/// The stand-in writes a LIKWID results file when the markers close (at the guard's drop);
/// the results then land in the profile already written by an explicit finalize.
fn standin_results_reach_the_file_at_drop() {
    let dir = tempfile::tempdir().unwrap();
    let lib = build_standin(dir.path());
    let results = dir.path().join("likwid-results.txt");
    let out = dir.path().join("likwid.h5");
    std::env::set_var(LIB_ENV, &lib);
    std::env::set_var("LIKWID_FILEPATH", &results);
    let (d, guard) = common::try_dispatch(
        ScopeLayer::builder()
            .output(&out)
            .summary(false)
            .likwid(true),
    )
    .expect("the stand-in loads");
    tracing::dispatcher::with_default(&d, || {
        for _ in 0..4 {
            info_span!("solve").in_scope(|| ());
        }
    });
    let report = guard.finalize().unwrap();
    assert_eq!(report.region("solve").unwrap().calls, 4);
    drop(guard);
    std::env::remove_var("LIKWID_FILEPATH");
    assert!(results.exists(), "markers closed at drop");
    let f = hdf5::File::open(&out).unwrap();
    assert!(
        f.link_exists("rank0/likwid"),
        "LIKWID results added to the file"
    );
    let names: Vec<hdf5::types::VarLenUnicode> =
        f.dataset("region_table/names").unwrap().read_raw().unwrap();
    assert!(
        names.iter().any(|n| n.as_str() == "solve"),
        "the calls are still there"
    );
}

#[test]
fn likwid_sink_with_missing_standin_and_real_libraries() {
    missing_library_is_an_error_naming_it();
    standin_sees_every_marker_call_in_order();
    standin_results_reach_the_file_at_drop();
    real_likwid_reports_its_errors_as_a_warning();
}

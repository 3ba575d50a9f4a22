//! Compatibility with the real reader: files we write must be accepted by the Python package
//! scope-profiler 0.7.5 (`scope-profiler inspect`, `diff`, `report`, `read_h5`), and its call
//! counts must equal our `Report`.
//!
//! The reader lives in a venv made by `scripts/py-reader-env.sh` (the test command makes it;
//! this test makes it too when `SCOPE_PY_VENV` is unset). No skipping: if the venv cannot be
//! made, the test fails and says why.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use scope_profiler::{Mode, Report, ScopeLayer};
use tracing::info_span;

fn run(program: &str, args: &[&str]) -> String {
    common::py(program, args)
}

/// Profiles `work` into `path` and returns our report.
fn profile(path: &Path, mode: Mode, work: impl FnOnce()) -> Report {
    let (d, guard) = common::dispatch(
        ScopeLayer::builder()
            .mode(mode)
            .output(path)
            .label("compat"),
    );
    tracing::dispatcher::with_default(&d, work);
    guard.finalize().unwrap()
}

/// `read_h5(path).get_region(name).num_calls` must equal the report for every region.
fn check_counts(path: &Path, report: &Report) {
    let expect: BTreeMap<&str, u64> = report
        .regions()
        .iter()
        .filter(|r| r.calls > 0)
        .map(|r| (r.name.as_str(), r.calls))
        .collect();
    assert!(!expect.is_empty());
    let json = serde_like_json(&expect);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/check_h5.py");
    let out = run(
        "python",
        &[script, path.to_str().unwrap(), "--expect-json", &json],
    );
    assert!(out.contains("ok"), "{out}");
}

fn serde_like_json(map: &BTreeMap<&str, u64>) -> String {
    let body: Vec<String> = map
        .iter()
        .map(|(k, v)| {
            let escaped: String = k
                .chars()
                .flat_map(|c| match c {
                    '"' => "\\\"".chars().collect::<Vec<_>>(),
                    '\\' => "\\\\".chars().collect(),
                    c if (c as u32) < 0x20 => format!("\\u{:04x}", c as u32).chars().collect(),
                    c => vec![c],
                })
                .collect();
            format!("\"{escaped}\": {v}")
        })
        .collect();
    format!("{{{}}}", body.join(", "))
}

fn inspect(path: &Path) -> String {
    run("scope-profiler", &["inspect", path.to_str().unwrap()])
}

#[test]
fn every_kind_of_file_we_write_is_read_back_with_our_counts() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name);

    let nested = profile(&p("nested.h5"), Mode::TimeOnly, || {
        for _ in 0..1000 {
            let _o = info_span!("outer").entered();
            for _ in 0..3 {
                info_span!("inner").in_scope(|| std::hint::black_box(0));
            }
        }
    });
    let recursive = profile(&p("recursive.h5"), Mode::TimeOnly, || {
        common::fib(15);
    });
    let threads = profile(&p("threads.h5"), Mode::TimeOnly, || {
        let d = tracing::dispatcher::get_default(|d| d.clone());
        let hs: Vec<_> = (0..4)
            .map(|i| {
                let d = d.clone();
                std::thread::Builder::new()
                    .name(format!("worker-{i}"))
                    .spawn(move || {
                        tracing::dispatcher::with_default(&d, || {
                            for _ in 0..500 {
                                info_span!("threaded").in_scope(|| ());
                            }
                        })
                    })
                    .unwrap()
            })
            .collect();
        hs.into_iter().for_each(|h| h.join().unwrap());
    });
    let aggregate = profile(&p("aggregate.h5"), Mode::Aggregate, || {
        for _ in 0..100 {
            info_span!("agg outer").in_scope(|| info_span!("agg inner").in_scope(|| ()));
        }
    });
    let big = profile(&p("big.h5"), Mode::TimeOnly, || {
        for _ in 0..200_000 {
            info_span!("hot").in_scope(|| ());
        }
    });
    let odd = profile(&p("odd.h5"), Mode::TimeOnly, || {
        info_span!("with space").in_scope(|| ());
        info_span!("slash/and:colon").in_scope(|| ());
        info_span!("ünïcödé 名前").in_scope(|| ());
        info_span!("quote\"back\\slash").in_scope(|| ());
    });
    assert_eq!(big.region("hot").unwrap().calls, 200_000);
    assert_eq!(recursive.region("fib").unwrap().calls, 1973);

    for (file, report) in [
        ("nested.h5", &nested),
        ("recursive.h5", &recursive),
        ("threads.h5", &threads),
        ("aggregate.h5", &aggregate),
        ("big.h5", &big),
        ("odd.h5", &odd),
    ] {
        let out = inspect(&p(file));
        for r in report.regions() {
            assert!(
                out.contains(&r.name),
                "{file}: inspect does not show {}:\n{out}",
                r.name
            );
        }
        check_counts(&p(file), report);
    }
    // Our extra metadata keys are shown, not rejected.
    let out = inspect(&p("nested.h5"));
    assert!(
        out.contains("writer") && out.contains("scope-profiler-rs"),
        "{out}"
    );
    assert!(out.contains("compat"), "label shown: {out}");

    run(
        "scope-profiler",
        &[
            "diff",
            p("nested.h5").to_str().unwrap(),
            p("big.h5").to_str().unwrap(),
        ],
    );
    let html = p("report.html");
    run(
        "scope-profiler",
        &[
            "report",
            p("nested.h5").to_str().unwrap(),
            "-o",
            html.to_str().unwrap(),
        ],
    );
    assert!(std::fs::metadata(&html).unwrap().len() > 1000);
    run(
        "scope-profiler",
        &[
            "inspect",
            "--metadata-only",
            p("aggregate.h5").to_str().unwrap(),
        ],
    );
}

#[test]
fn a_flight_recorder_dump_is_read_back_with_its_counts() {
    let dir = tempfile::tempdir().unwrap();
    let (d, guard) = common::dispatch(
        ScopeLayer::builder()
            .output(dir.path().join("service.h5"))
            .flight_recorder(std::time::Duration::from_secs(60)),
    );
    tracing::dispatcher::with_default(&d, || {
        for _ in 0..200 {
            let _o = info_span!("request").entered();
            info_span!("query").in_scope(|| std::hint::black_box(0));
        }
    });
    let path = dir.path().join("dump.h5");
    let dump = guard.dump(&path).unwrap();
    assert_eq!(dump.region("request").unwrap().calls, 200);
    check_counts(&path, &dump);
    assert!(inspect(&path).contains("request"));
    // The whole run's file (aggregate statistics) is read back too.
    let whole = guard.finalize().unwrap();
    check_counts(whole.file().unwrap(), &whole);
}

/// A dump of Tokio tasks taken while some are still running: their calls name tasks whose
/// rows are not in the dump yet (a task's row is written when it ends).
#[test]
fn a_flight_recorder_dump_of_running_tasks_is_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let (d, guard) = common::dispatch(
        ScopeLayer::builder()
            .output(dir.path().join("tasks.h5"))
            .track_async(true)
            .flight_recorder(std::time::Duration::from_secs(60)),
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .on_thread_start(move || std::mem::forget(tracing::dispatcher::set_default(&d)))
        .build()
        .unwrap();
    let (release, held) = tokio::sync::watch::channel(false);
    let tasks: Vec<_> = (0..40)
        .map(|i| {
            let mut held = held.clone();
            // The span is made inside the task, on a worker (which has the dispatcher).
            rt.spawn(async move {
                let job = async move {
                    info_span!("step").in_scope(|| std::hint::black_box(i));
                    tokio::task::yield_now().await;
                    if i % 2 == 0 {
                        // Half of them wait until after the dump.
                        let _ = held.wait_for(|go| *go).await;
                    }
                };
                tracing::Instrument::instrument(job, info_span!("job")).await
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let path = dir.path().join("dump.h5");
    let dump = guard.dump(&path).unwrap();
    assert_eq!(dump.region("job").unwrap().calls, 20, "the jobs that ended");
    assert_eq!(dump.region("step").unwrap().calls, 40);
    check_counts(&path, &dump);
    assert!(inspect(&path).contains("job"));
    release.send(true).unwrap();
    for t in tasks {
        rt.block_on(t).unwrap();
    }
    drop(rt);
    assert_eq!(guard.finalize().unwrap().region("job").unwrap().calls, 40);
}

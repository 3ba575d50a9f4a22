use std::ffi::CString;
use std::path::{Path, PathBuf};

use super::*;
use crate::sink::Sink;

/// Compiles the stand-in library into `dir`.
fn build_standin(dir: &Path) -> PathBuf {
    let src = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/support/likwid_standin.c"
    );
    let out = dir.join("liblikwid_standin.so");
    let built = crate::testing::output_isolated(
        std::process::Command::new("cc")
            .args(["-shared", "-fPIC", "-o"])
            .arg(&out)
            .args([src, "-lpthread"]),
    );
    assert!(built.status.success(), "cc failed: {built:?}");
    out
}

/// Points the stand-in's log and results file at `log` and `results`.
fn configure(lib: &Path, log: &Path, results: &Path) {
    type Configure = unsafe extern "C" fn(*const c_char, *const c_char);
    let (log, results) = (
        CString::new(log.to_str().unwrap()).unwrap(),
        CString::new(results.to_str().unwrap()).unwrap(),
    );
    // SAFETY: the stand-in's initializers have no preconditions; `standin_configure` has
    // this signature in tests/support/likwid_standin.c and copies both strings.
    unsafe {
        let l = libloading::Library::new(lib).unwrap();
        let f: libloading::Symbol<Configure> = l.get(b"standin_configure").unwrap();
        f(log.as_ptr(), results.as_ptr());
    }
}

/// Two callsites named `solve` and one named `inner`.
fn callsites() -> [&'static Metadata<'static>; 3] {
    let sub = tracing_subscriber::registry();
    tracing::subscriber::with_default(sub, || {
        [
            tracing::info_span!("solve").metadata().unwrap(),
            tracing::info_span!("inner").metadata().unwrap(),
            tracing::info_span!("solve").metadata().unwrap(),
        ]
    })
}

#[test]
fn standin_round_trip_closes_once_and_reads_results_back() {
    let dir = tempfile::tempdir().unwrap();
    let lib = build_standin(dir.path());
    let (log, results) = (dir.path().join("log.txt"), dir.path().join("marker.txt"));
    let api = load_first(&[lib.display().to_string()]).unwrap();
    configure(&lib, &log, &results);
    let env = vec![
        ("LIKWID_FILEPATH".to_owned(), results.display().to_string()),
        ("LIKWID_EVENTS".to_owned(), "STARTS:FIXC0".to_owned()),
    ];
    let sink = LikwidSink::start(api, env).unwrap();
    let [solve, inner, solve2] = callsites();
    let noop = &mut |_| {};
    for _ in 0..3 {
        sink.enter(1, solve);
        sink.enter(2, inner);
        sink.exit(2, inner, noop);
        sink.exit(1, solve, noop);
    }
    // Recursion and a second callsite of the same name: LIKWID sees one start.
    sink.enter(1, solve);
    sink.enter(3, solve2);
    sink.exit(3, solve2, noop);
    sink.exit(1, solve, noop);
    assert!(sink.take_results().is_none(), "no results before the close");
    assert!(
        LikwidSink::start(api, Vec::new()).is_err(),
        "one sink per library"
    );

    sink.close_markers();
    sink.close_markers();
    sink.enter(1, solve); // ignored after the close
    sink.exit(1, solve, noop);
    let got = sink.take_results().expect("results after the close");
    assert!(sink.take_results().is_none(), "results are read once");
    let by_tag = |t: &str| got.regions.iter().find(|r| r.tag == t).unwrap();
    assert_eq!(by_tag("solve").call_counts, vec![4]);
    assert_eq!(by_tag("solve").events, vec![vec![4.0]]);
    assert_eq!(by_tag("solve").event_names, vec!["STARTS"]);
    assert_eq!(by_tag("solve").counter_names, vec!["FIXC0"]);
    assert_eq!(by_tag("solve").source, "marker_file");
    assert_eq!(by_tag("inner").call_counts, vec![3]);
    assert!(sink.warnings().is_empty(), "{:?}", sink.warnings());
    assert!(
        LikwidSink::start(api, Vec::new()).is_err(),
        "no init after close"
    );

    let log = std::fs::read_to_string(&log).unwrap();
    let calls: Vec<&str> = log.lines().map(|l| l.split('\t').next().unwrap()).collect();
    assert_eq!(calls.first(), Some(&"init"));
    assert_eq!(calls.get(1), Some(&"thread_init"));
    assert_eq!(calls.last(), Some(&"close"));
    assert_eq!(calls.iter().filter(|c| **c == "close").count(), 1);
    assert_eq!(calls.iter().filter(|c| **c == "register").count(), 2);
    assert_eq!(calls.iter().filter(|c| **c == "start").count(), 7);
    assert_eq!(calls.iter().filter(|c| **c == "stop").count(), 7);
    assert!(
        !log.contains("nested") && !log.contains("unmatched"),
        "{log}"
    );
}

#[test]
fn parses_likwid_marker_files() {
    let text = "2 2 1\n0:outer-0\n1:a-b/c-0\n\
                0 0 0 1 1.000000e-03 2 1.0e+03 2.0e+03\n\
                0 0 1 2 2.0e-03 2 3.0 4.0\n\
                1 0 0 5 5.0e-01 2 5.0 6.0\n";
    let regions = parse_marker_file(text, "CLOCK");
    assert_eq!(regions.len(), 2);
    let outer = &regions[0];
    assert_eq!(outer.tag, "outer");
    assert_eq!(outer.group_id, 0);
    assert_eq!(outer.group_name, "CLOCK");
    assert_eq!(outer.cpus, vec![0, 1]);
    assert_eq!(outer.call_counts, vec![1, 2]);
    assert_eq!(outer.times, vec![1e-3, 2e-3]);
    assert_eq!(outer.events, vec![vec![1000.0, 3.0], vec![2000.0, 4.0]]);
    assert_eq!(outer.event_names, vec!["event_0", "event_1"]);
    assert!(outer.metric_names.is_empty() && outer.metrics.is_empty());
    assert_eq!(
        regions[1].tag, "a-b/c",
        "the group id is split off from the right"
    );
    assert!(parse_marker_file("garbage\n", "").is_empty());
    assert!(parse_marker_file("", "").is_empty());
    assert!(parse_marker_file("1 1 1\n0:x-0\n0 0 zero 1 1 0\n", "").is_empty());
}

//! `scopeprof critical-path` on a file whose critical path is known by construction: the join
//! program of `tests/support/critical_programs.rs` (a request awaiting a child that computes
//! 5 ms), profiled with this build's stable Tokio, so the child's edge is inferred. The JSON's
//! calls tile their wall time, the path goes through the child, the aggregate's shares add
//! up; the text says the same; a call or region that is not there is an error (status 2).

mod cli_common;

#[path = "support/critical_programs.rs"]
#[allow(dead_code, unreachable_pub)]
mod programs;

use std::path::{Path, PathBuf};

use cli_common::{scopeprof, scopeprof_ok};
use scope_profiler::ScopeLayer;
use serde_json::Value;
use tracing_subscriber::prelude::*;

/// Profiles the join program into `dir/join.h5`.
fn join_profile(dir: &Path) -> PathBuf {
    let path = dir.join("join.h5");
    let (layer, guard) = ScopeLayer::builder()
        .output(&path)
        .track_async(true)
        .summary(false)
        .build()
        .unwrap();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    let d = dispatch.clone();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .on_thread_start(move || std::mem::forget(tracing::dispatcher::set_default(&d)))
        .build()
        .unwrap();
    tracing::dispatcher::with_default(&dispatch, || programs::join(&rt, &dispatch));
    drop(rt);
    guard.finalize().unwrap();
    path
}

/// The join program's profile and its `critical-path --json` output (text and parsed), from
/// a run where the OS did not preempt the request inside a poll (every poll of it computes
/// next to nothing, so one of 1 ms or more is the machine's, and moves the shares checked
/// below): up to [`programs::RUNS`] runs.
fn unpreempted_run(dir: &Path) -> (PathBuf, String, Value) {
    for _ in 0..programs::RUNS {
        let file = join_profile(dir);
        let f = file.to_str().unwrap();
        let out = scopeprof_ok(&["critical-path", f, "--region", "request", "--json"]);
        let v: Value = serde_json::from_str(&out).expect("JSON");
        let call = &v["calls"][0];
        let preempted =
            call["segments"].as_array().unwrap().iter().any(|s| {
                s["kind"] == "running" && ns(&s["end_ns"]) - ns(&s["start_ns"]) >= 1_000_000
            });
        if !preempted {
            return (file, out, v);
        }
        eprintln!("the request was preempted in a poll; again");
    }
    panic!(
        "the request was preempted in a poll in each of {} runs",
        programs::RUNS
    );
}

fn ns(v: &Value) -> i64 {
    v.as_i64().expect("an integer")
}

#[test]
fn critical_path_json_and_text_follow_the_awaited_child() {
    let dir = tempfile::tempdir().unwrap();
    let (file, out, v) = unpreempted_run(dir.path());
    let f = file.to_str().unwrap();
    assert_eq!(v["region"], "request");
    let calls = v["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1);
    let call = &calls[0];
    let segs = call["segments"].as_array().unwrap();
    // The segments tile the call: contiguous, from its start to its end.
    assert_eq!(ns(&segs[0]["start_ns"]), ns(&call["start_ns"]));
    assert_eq!(ns(&segs.last().unwrap()["end_ns"]), ns(&call["end_ns"]));
    for w in segs.windows(2) {
        assert_eq!(ns(&w[0]["end_ns"]), ns(&w[1]["start_ns"]));
    }
    let sum: i64 = segs
        .iter()
        .map(|s| ns(&s["end_ns"]) - ns(&s["start_ns"]))
        .sum();
    assert_eq!(sum, ns(&call["wall_ns"]));
    // The child's 5 ms, in the child's task, inferred (a stable file).
    let child: i64 = segs
        .iter()
        .filter(|s| s["kind"] == "blocked-on" && s["stack"] == serde_json::json!(["child"]))
        .map(|s| {
            assert_eq!(s["inferred"], true, "{s}");
            assert_ne!(s["task"], call["task"], "{s}");
            ns(&s["end_ns"]) - ns(&s["start_ns"])
        })
        .sum();
    assert!(child >= 4_500_000, "{out}");
    // The aggregate: one call, shares of its wall time that add up to one.
    let agg = &v["aggregate"];
    assert_eq!(agg["calls"], 1);
    assert_eq!(ns(&agg["wall_ns"]), ns(&call["wall_ns"]));
    let kinds = agg["by_kind"].as_array().unwrap();
    let share: f64 = kinds.iter().map(|k| k["share"].as_f64().unwrap()).sum();
    assert!((share - 1.0).abs() < 1e-3, "{agg}");
    // No scheduled time behind other tasks in a stable file.
    assert_eq!(agg["behind"], serde_json::json!([]), "{agg}");
    let first_region = &agg["by_region"][0];
    assert_eq!(first_region["region"], "child", "{agg}");
    assert!(first_region["share"].as_f64().unwrap() >= 0.85, "{agg}");

    // The same call by number, as text.
    let text = scopeprof_ok(&["critical-path", f, "--region", "request", "--call", "0"]);
    assert!(text.contains("call #0"), "{text}");
    let line = text
        .lines()
        .find(|l| l.contains("blocked-on") && l.contains("child"))
        .unwrap_or_else(|| panic!("a blocked-on line in the child:\n{text}"));
    assert!(line.contains("[inferred]"), "{text}");
    assert!(text.contains("Over all 1 calls of `request`"), "{text}");
}

#[test]
fn critical_path_refuses_a_missing_call_or_region() {
    let dir = tempfile::tempdir().unwrap();
    let file = join_profile(dir.path());
    let f = file.to_str().unwrap();
    for args in [
        vec!["critical-path", f, "--region", "request", "--call", "7"],
        vec!["critical-path", f, "--region", "no_such_region"],
    ] {
        let out = scopeprof(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("join.h5"), "{err}");
    }
    // Without --region: the region with the most wall time in calls inside tasks, the
    // request (its call spans the child's).
    let text = scopeprof_ok(&["critical-path", f]);
    assert!(text.starts_with("Critical path of `request`"), "{text}");
}

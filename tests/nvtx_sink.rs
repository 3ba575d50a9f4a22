//! The NVTX sink against a real NVTX tool interface: a stand-in injection library
//! (`tests/support/nvtx_injection.c`, built here with `cc`) records every NVTX call to a log,
//! and the ranges it saw must match the profiler's own `Report`.
//!
//! NVTX looks for a tool once, at the first NVTX call of the process, by reading
//! `NVTX_INJECTION64_PATH`; so this binary holds a single test that sets the variable before
//! building the layer (environment variables are process-wide).

#![cfg(feature = "nvtx")]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use scope_profiler::{Report, ScopeLayer};
use tracing::{info_span, instrument};
use tracing_subscriber::prelude::*;

/// Builds the stand-in NVTX tool; returns its path.
fn build_injection(dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/nvtx_injection.c");
    let lib = dir.join("libnvtx_standin.so");
    let out = Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&lib)
        .arg(&src)
        .arg("-lpthread")
        .output()
        .expect("run cc (the C compiler is needed to build the NVTX stand-in)");
    assert!(
        out.status.success(),
        "cc failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    lib
}

/// One range as the tool saw it.
#[derive(Debug, Clone)]
struct SeenRange {
    domain: String,
    name: String,
    start_seq: u64,
    start_tid: u64,
    end: Option<(u64, u64)>,
}

/// The tool's log, parsed.
#[derive(Debug, Default)]
struct ToolLog {
    initialized: bool,
    domains: Vec<String>,
    /// Registered string -> how many times it was registered.
    strings: HashMap<String, usize>,
    ranges: Vec<SeenRange>,
    /// push/pop/global-range lines (the sink must not use them).
    other: Vec<String>,
}

fn parse(log: &str) -> ToolLog {
    let mut t = ToolLog::default();
    let mut by_id: HashMap<u64, usize> = HashMap::new();
    for line in log.lines() {
        let f: Vec<&str> = line.splitn(6, ' ').collect();
        let num = |i: usize| f[i].parse::<u64>().unwrap();
        match f[0] {
            "init" => t.initialized = true,
            "domain" => t
                .domains
                .push(line.splitn(5, ' ').nth(4).unwrap().to_owned()),
            "string" => {
                let s = line.splitn(6, ' ').nth(5).unwrap_or("").to_owned();
                *t.strings.entry(s).or_default() += 1;
            }
            "start" => {
                // start <seq> <tid> <id> <domain> <name...>; our domain name has no spaces.
                let rest: Vec<&str> = line.splitn(6, ' ').collect();
                by_id.insert(num(3), t.ranges.len());
                t.ranges.push(SeenRange {
                    domain: rest[4].to_owned(),
                    name: rest[5].to_owned(),
                    start_seq: num(1),
                    start_tid: num(2),
                    end: None,
                });
            }
            "end" => {
                let k = by_id[&num(3)];
                assert!(t.ranges[k].end.is_none(), "range ended twice: {line}");
                t.ranges[k].end = Some((num(1), num(2)));
            }
            _ => t.other.push(line.to_owned()),
        }
    }
    t
}

#[instrument(name = "polled")]
async fn polled(yields: u32) -> u32 {
    for _ in 0..yields {
        tokio::task::yield_now().await; // each yield = one more poll of the same call
    }
    info_span!("polled_child").in_scope(|| yields)
}

fn workload() {
    // Nested sync spans: 3 outer calls, each with 2 inner calls.
    for _ in 0..3 {
        let _outer = info_span!("outer").entered();
        for _ in 0..2 {
            info_span!("inner").in_scope(|| std::hint::black_box(1));
        }
    }
    // An instrumented async fn, called twice, each call polled 4 times.
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        assert_eq!(polled(3).await, 3);
        assert_eq!(polled(3).await, 3);
    });
    // A span entered here and closed (dropped) on another thread.
    let handed = info_span!("handed_over");
    handed.in_scope(|| std::hint::black_box(2));
    std::thread::spawn(move || drop(handed)).join().unwrap();
}

fn calls(report: &Report, name: &str) -> u64 {
    report.region(name).map_or(0, |r| r.calls)
}

#[test]
fn nvtx_ranges_match_the_report() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("nvtx_sink");
    std::fs::create_dir_all(&dir).unwrap();
    let lib = build_injection(&dir);
    let log_path = dir.join("nvtx.log");
    let _ = std::fs::remove_file(&log_path);
    // Before the first NVTX call of this process, which building the layer makes.
    std::env::set_var("NVTX_INJECTION64_PATH", &lib);
    std::env::set_var("NVTX_STANDIN_LOG", &log_path);

    let (layer, guard) = ScopeLayer::builder()
        .nvtx(true)
        .track_async(true)
        .no_output()
        .summary(false)
        .build()
        .expect("build with nvtx");
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    tracing::dispatcher::with_default(&dispatch, workload);
    let report = guard.finalize().unwrap();

    let log = std::fs::read_to_string(&log_path).expect("the NVTX tool wrote no log");
    let tool = parse(&log);
    assert!(tool.initialized, "the NVTX tool was not loaded:\n{log}");
    assert_eq!(tool.domains, ["scope-profiler"], "{log}");
    assert!(
        tool.other.is_empty(),
        "unexpected NVTX calls: {:?}",
        tool.other
    );

    // Names and counts: one range per call, per region.
    let names = ["outer", "inner", "polled", "polled_child", "handed_over"];
    let expected = [3, 6, 2, 2, 1];
    for (name, want) in names.iter().zip(expected) {
        assert_eq!(calls(&report, name), want, "report calls of {name}");
        let seen = tool.ranges.iter().filter(|r| r.name == *name).count() as u64;
        assert_eq!(seen, want, "NVTX ranges named {name}:\n{log}");
        assert_eq!(tool.strings.get(*name), Some(&1), "{name} registered once");
    }
    assert_eq!(tool.ranges.len(), 14, "no ranges besides the calls:\n{log}");
    for r in &tool.ranges {
        assert_eq!(r.domain, "scope-profiler");
        assert!(r.end.is_some(), "range never ended: {r:?}");
    }

    // Nesting: every inner range lies inside one outer range of its thread, and the outer
    // ranges (sequential calls) do not overlap.
    let span = |r: &SeenRange| (r.start_seq, r.end.unwrap().0);
    let outers: Vec<_> = tool.ranges.iter().filter(|r| r.name == "outer").collect();
    for w in outers.windows(2) {
        assert!(span(w[0]).1 < span(w[1]).0, "outer calls overlap: {w:?}");
    }
    for inner in tool.ranges.iter().filter(|r| r.name == "inner") {
        let (s, e) = span(inner);
        let parents = outers
            .iter()
            .filter(|o| o.start_tid == inner.start_tid && span(o).0 < s && e < span(o).1)
            .count();
        assert_eq!(
            parents, 1,
            "inner range not inside exactly one outer: {inner:?}"
        );
    }
    // The async calls: each child lies inside one `polled` range, which starts at the first
    // poll and ends when the future is dropped.
    let polled: Vec<_> = tool.ranges.iter().filter(|r| r.name == "polled").collect();
    for child in tool.ranges.iter().filter(|r| r.name == "polled_child") {
        let (s, e) = span(child);
        let parents = polled
            .iter()
            .filter(|p| span(p).0 < s && e < span(p).1)
            .count();
        assert_eq!(parents, 1, "child not inside one polled range: {child:?}");
    }
    // The span closed on another thread: its range ends there.
    let handed = tool
        .ranges
        .iter()
        .find(|r| r.name == "handed_over")
        .unwrap();
    let (_, end_tid) = handed.end.unwrap();
    assert_ne!(end_tid, handed.start_tid, "ended on the closing thread");
}

//! `scopeprof flamegraph`: folded stacks weighted by exclusive time, checked against the
//! file's own `exclusive_totals`, however the stacks are grouped; and the SVG.

mod cli_common;

use std::collections::BTreeMap;
use std::path::Path;

use cli_common::*;

/// Sum of folded weights per leaf frame (the region whose exclusive time a line carries).
fn leaf_totals(folded: &str) -> BTreeMap<String, i64> {
    let mut m = BTreeMap::new();
    for line in folded.lines() {
        let (stack, w) = line.rsplit_once(' ').expect("weight");
        let leaf = stack.rsplit(';').next().unwrap().to_owned();
        *m.entry(leaf).or_insert(0) += w.parse::<i64>().unwrap();
    }
    m
}

/// The file's `exclusive_totals` per region name (rows with calls).
fn exclusive_totals(file: &Path) -> BTreeMap<String, i64> {
    let names = strings(file, "region_table/names");
    let ids = column(file, "rank_region_index/region_ids");
    let counts = column(file, "rank_region_index/event_counts");
    let excl = column(file, "rank_region_index/exclusive_totals");
    let mut m = BTreeMap::new();
    for i in 0..ids.len() {
        if counts[i] > 0 {
            assert!(excl[i] >= 0, "the crate nested this file");
            *m.entry(names[ids[i] as usize].clone()).or_insert(0) += excl[i];
        }
    }
    m
}

/// Per region name: its calls' busy time, duration less `events/await_ns`.
fn busy_totals(file: &Path) -> BTreeMap<String, i64> {
    let names = strings(file, "region_table/names");
    let ids = column(file, "rank_region_index/region_ids");
    let counts = column(file, "rank_region_index/event_counts");
    let offsets = column(file, "rank_region_index/event_offsets");
    let (durs, awaits) = (
        column(file, "events/durations"),
        column(file, "events/await_ns"),
    );
    let mut m = BTreeMap::new();
    for ((id, n), at) in ids.iter().zip(&counts).zip(&offsets) {
        let busy: i64 = (*at..at + n)
            .map(|i| durs[i as usize] - awaits[i as usize])
            .sum();
        *m.entry(names[*id as usize].clone()).or_insert(0) += busy;
    }
    m
}

#[test]
fn folded_weights_are_the_files_exclusive_totals() {
    let dir = tempfile::tempdir().unwrap();
    let file = tokio_profile(dir.path());
    let f = file.to_str().unwrap();
    let want = exclusive_totals(&file);
    assert!(
        want.contains_key("handler") && want.contains_key("step"),
        "{want:?}"
    );

    let plain = scopeprof_ok(&["flamegraph", "--wall", "--folded", f]);
    assert_eq!(leaf_totals(&plain), want, "{plain}");
    // Stacks follow the call tree: steps inside handlers, handlers at the task lane roots.
    assert!(
        plain.lines().any(|l| l.starts_with("handler;step ")),
        "{plain}"
    );
    assert!(
        plain.lines().any(|l| l.starts_with("handler;query ")),
        "{plain}"
    );

    let per_task = scopeprof_ok(&["flamegraph", "--wall", "--folded", "--per-task", f]);
    assert_eq!(leaf_totals(&per_task), want);
    let tasks = per_task
        .lines()
        .filter(|l| l.starts_with("Task-") && l.contains(";handler "))
        .count();
    assert_eq!(tasks as u64, TASKS, "{per_task}");

    let per_thread = scopeprof_ok(&["flamegraph", "--wall", "--folded", "--per-thread", f]);
    assert_eq!(leaf_totals(&per_thread), want);
    assert!(
        per_thread.lines().all(|l| l.starts_with("thread ")),
        "{per_thread}"
    );

    let rank0 = scopeprof_ok(&["flamegraph", "--wall", "--folded", "--rank", "0", f]);
    assert_eq!(leaf_totals(&rank0), want);
    let rank1 = scopeprof_ok(&["flamegraph", "--wall", "--folded", "--rank", "1", f]);
    assert!(rank1.is_empty(), "no rank 1 in this file: {rank1}");

    // The spill-and-merge path gives the same stacks.
    let spilled = scopeprof_ok(&[
        "flamegraph",
        "--wall",
        "--folded",
        "--sort-run-items",
        "5",
        f,
    ]);
    assert_eq!(spilled, plain);

    // By default the stacks are the polls': each region's weight is its busy time less its
    // children's, from the file's own columns (a sync `step` is busy all through).
    let busy = leaf_totals(&scopeprof_ok(&["flamegraph", "--folded", f]));
    let polled = busy_totals(&file);
    assert_eq!(busy["step"], polled["step"], "{busy:?}");
    // Each call's busy time and its polls are rounded to ns on their own: 1 ns per poll.
    let polls = (TASKS * (2 * STEPS + 4)) as i64;
    assert!(
        (busy["query"] - polled["query"]).abs() <= polls,
        "{busy:?} {polled:?}"
    );
    let handler_own = polled["handler"] - polled["step"] - polled["query"];
    assert!(
        (busy["handler"] - handler_own).abs() <= polls,
        "{busy:?} {polled:?}"
    );
    assert!(
        busy["handler"] < want["handler"] / 2,
        "the handlers mostly sleep: {busy:?}"
    );
    assert_eq!(
        busy["main_work"], want["main_work"],
        "sync: busy all through"
    );
}

#[test]
fn reference_file_folded_and_svg() {
    let dir = tempfile::tempdir().unwrap();
    let file = reference_file(&ref_python(), dir.path(), true);
    let f = file.to_str().unwrap();
    let folded = scopeprof_ok(&["flamegraph", "--folded", f]);
    assert_eq!(leaf_totals(&folded), exclusive_totals(&file), "{folded}");
    assert!(
        folded.contains("scope_profiler.session;outer;inner 4000000"),
        "{folded}"
    );

    let svg = dir.path().join("f.svg");
    let out = scopeprof(&["flamegraph", f, "-o", svg.to_str().unwrap()]);
    if cfg!(feature = "flamegraph") {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(
            said.starts_with(&format!("wrote {} (flamegraph SVG, ", svg.display()))
                && said.trim_end().ends_with("KiB)"),
            "{said}"
        );
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(
            text.starts_with("<?xml") && text.contains("<svg"),
            "{text:.200}"
        );
        assert!(text.contains("inner") && text.contains("outer"));
    } else {
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains("--folded"));
    }
}

/// `flamegraph` without `-o` on a terminal is an error (SVG there is only noise); into a pipe,
/// or as folded stacks, it still goes to stdout. `script` gives the command a terminal.
#[test]
fn svg_is_not_written_to_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let file = reference_file(&ref_python(), dir.path(), true);
    let bin = env!("CARGO_BIN_EXE_scopeprof");
    let on_tty = |args: &str| {
        let cmd = format!("{bin} flamegraph {args} {}", file.display());
        std::process::Command::new("script")
            .args(["-qec", &cmd, "/dev/null"])
            .output()
            .expect("`script` (util-linux) runs a command on a terminal")
    };
    let out = on_tty("");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(
        text.contains("not writing SVG to a terminal") && text.contains("-o flame.svg"),
        "{text}"
    );
    assert!(!text.contains("<svg"), "{text}");
    let out = on_tty("--folded");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("outer;inner"));
    // Written to a file: the file's name and size, on stdout.
    let folded = dir.path().join("f.folded");
    let said = scopeprof_ok(&[
        "flamegraph",
        "--folded",
        file.to_str().unwrap(),
        "-o",
        folded.to_str().unwrap(),
    ]);
    let bytes = std::fs::metadata(&folded).unwrap().len();
    assert_eq!(
        said,
        format!("wrote {} (folded stacks, {bytes} B)\n", folded.display())
    );
}

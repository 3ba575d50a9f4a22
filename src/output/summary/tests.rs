//! The summary table's layout, columns and notes.

use super::*;
use crate::data::report::RegionStats;

fn region(name: &str, calls: u64, total_ns: u64) -> RegionStats {
    RegionStats::of_total(name, calls, total_ns)
}

#[test]
fn table_is_a_box_with_one_row_per_region() {
    let report = Report {
        regions: vec![
            region("solve", 10, 2_000_000_000),
            region("ünïcode/name", 1500, 1_000),
            region("idle", 0, 0),
        ],
        dropped: 3,
        losses: Default::default(),
        in_flight: 1,
        wall_ns: 5_000_000_000,
        warnings: vec!["perf: `cycles` dropped".into()],
        tree: None,
        overhead: Some(crate::data::report::SelfCost {
            ns_per_call: 95.5,
            ns_per_poll: 30.0,
            clock_resolution_ns: 0.4,
            clock_source: "tsc".into(),
        }),
        ..Report::default()
    };
    let s = render(&report, "run - out.h5");
    let lines: Vec<&str> = s.lines().filter(|l| !l.is_empty()).collect();
    assert!(lines[0].trim_start().starts_with('╭'));
    assert!(s.contains("│ solve "));
    assert!(s.contains("2.000000"));
    assert!(s.contains("1.5k"));
    assert!(
        !s.contains("idle"),
        "regions without calls this phase are not rows"
    );
    assert!(s.contains("3 record(s) dropped"));
    assert!(s.contains("WARNING: perf: `cycles` dropped"));
    assert!(s.contains("Summary: run - out.h5"));
    assert!(
        s.contains("Profiler overhead: 95.5 ns per call, 30.0 ns per poll; clock tsc"),
        "{s}"
    );
    // Every line of the table box has the same width.
    let table: Vec<&str> = lines.iter().take(6).copied().collect();
    let w = width(table[0]);
    assert!(table.iter().all(|l| width(l) == w), "{s}");
}

#[test]
fn no_span_at_all_is_one_line_that_names_filters() {
    let s = render(&Report::default(), "t");
    assert_eq!(s.lines().count(), 1, "{s}");
    assert!(s.contains(NO_SPANS));
    // A phase without calls after earlier ones is still a table.
    let report = Report {
        regions: vec![region("idle", 0, 0)],
        ..Report::default()
    };
    let s = render(&report, "t");
    assert!(s.contains("(no calls)"));
    assert!(s.contains("0 region(s)"));
}

#[test]
fn the_session_row_is_not_counted_as_a_region() {
    let with = Report {
        regions: vec![
            region(SESSION_REGION, 1, 10),
            region("a", 1, 5),
            region("b", 2, 4),
        ],
        ..Report::default()
    };
    let without = Report {
        regions: vec![region("a", 1, 5), region("b", 2, 4)],
        ..Report::default()
    };
    assert!(render(&with, "t").contains("2 region(s), not counting the scope_profiler.session row"));
    assert!(render(&without, "t").contains("Wall clock 0.000000 s; 2 region(s)."));
}

#[test]
fn the_overlap_note_is_only_printed_for_overlaps() {
    let two = vec![region("a", 1, 10), region("b", 1, 10)];
    let note = "Flat table: calls overlap";
    for (flat, shown) in [
        (None, false),
        (Some(Flat::Aggregate), false),
        (Some(Flat::Overlap), true),
    ] {
        let report = Report {
            regions: two.clone(),
            flat,
            ..Report::default()
        };
        assert_eq!(render(&report, "t").contains(note), shown, "{flat:?}");
    }
    let report = Report {
        regions: two,
        flat: Some(Flat::Truncated),
        ..Report::default()
    };
    assert!(render(&report, "t").contains("only part of this phase's calls"));
}

#[test]
fn a_debug_build_says_so_with_its_measured_cost() {
    let cost = crate::data::report::SelfCost {
        ns_per_call: 2012.4,
        ns_per_poll: 900.0,
        clock_resolution_ns: 0.4,
        clock_source: "tsc".into(),
    };
    let note = debug_build_note("0", Some(&cost)).expect("a note for opt-level 0");
    assert!(
        note.contains("debug build") && note.contains("2012 ns per call"),
        "{note}"
    );
    assert!(note.contains("--release"), "{note}");
    assert_eq!(debug_build_note("0", None), None, "a file read back");
    for opt in ["1", "2", "3", "s", "z"] {
        assert_eq!(debug_build_note(opt, Some(&cost)), None, "{opt}");
    }
    // This test binary is the library's own build: the table says what it is.
    let report = Report {
        regions: vec![region("a", 1, 10)],
        overhead: Some(cost),
        ..Report::default()
    };
    assert_eq!(
        render(&report, "t").contains("debug build"),
        cfg!(debug_assertions) && OPT_LEVEL == "0"
    );
}

#[test]
fn async_paths_get_a_busy_column_and_the_notes_define_it() {
    let row = |depth, name: &str, own, total_ns, busy_ns| TreeRow {
        depth,
        name: name.into(),
        recursive: false,
        calls: 4,
        stats: crate::data::stats::Stats::default(),
        coverage_ns: total_ns,
        total_ns,
        busy_ns,
        own,
    };
    let tree = vec![
        row(0, "handle_request", false, 4_000_000_000, 1_000_000_000),
        row(1, "(own)", true, 3_500_000_000, 600_000_000),
        row(1, "parse", false, 500_000_000, 400_000_000),
    ];
    let report = Report {
        regions: vec![
            region("handle_request", 4, 4_000_000_000),
            region("parse", 4, 500_000_000),
        ],
        tree: Some(tree.clone()),
        ..Report::default()
    };
    let s = render(&report, "t");
    assert!(s.contains("total [s]   busy [s]"), "{s}");
    assert!(
        s.contains("4.000000   1.000000") && s.contains("3.500000   0.600000"),
        "{s}"
    );
    assert!(
        s.contains("(own): a path's time outside its child calls"),
        "{s}"
    );
    assert!(s.contains("busy [s]: time spent polling"), "{s}");
    // Calls that never awaited: no busy column (it would repeat the total).
    let sync: Vec<TreeRow> = tree
        .into_iter()
        .map(|t| TreeRow {
            busy_ns: t.total_ns,
            ..t
        })
        .collect();
    let report = Report {
        tree: Some(sync),
        ..report
    };
    assert!(!render(&report, "t").contains("busy"));
}

#[test]
fn perf_columns_have_units() {
    let mut r = region("solve", 2, 100);
    r.perf = vec![("task-clock".into(), 90), ("page-faults".into(), 3)];
    let report = Report {
        regions: vec![r],
        ..Report::default()
    };
    let s = render(&report, "t");
    assert!(
        s.contains("task-clock [ns]") && s.contains("page-faults [count]"),
        "{s}"
    );
}

#[test]
fn tree_draws_siblings_and_last_children() {
    // session > {serve, solve > {timestep > {crunch, exchange}}}, then another root.
    let p = tree_prefixes([0, 1, 1, 2, 3, 3, 0, 1].into_iter());
    assert_eq!(
        p,
        [
            "",
            "├─ ",
            "└─ ",
            "   └─ ",
            "      ├─ ",
            "      └─ ",
            "",
            "└─ "
        ],
        "{p:#?}"
    );
    let p = tree_prefixes([0, 1, 2, 1].into_iter());
    assert_eq!(p, ["", "├─ ", "│  └─ ", "└─ "]);
}

#[test]
fn compact_counts() {
    assert_eq!(compact(999), "999");
    assert_eq!(compact(1500), "1.5k");
    assert_eq!(compact(21_891), "21.9k");
    assert_eq!(compact(2_000_000), "2.0M");
}

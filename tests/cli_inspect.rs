//! `scopeprof inspect` agrees with the reference's `scope-profiler inspect` (calls, totals,
//! mean, min, max of every row of the call tree), on files written by the reference's own
//! `make_minimal_h5.py` and on a file of this crate.

mod cli_common;

use std::path::Path;

use cli_common::*;

/// One row of a summary table.
#[derive(Debug)]
struct Row {
    name: String,
    /// `None` for `(own)` rows.
    calls: Option<u64>,
    total_s: f64,
    /// mean, min, max in seconds (`None` for `(own)` rows).
    stats: Option<(f64, f64, f64)>,
}

/// The reference's table, via `--columns region calls total avg min max`.
fn reference_rows(file: &Path) -> Vec<Row> {
    let venv_bin = ref_python().parent().unwrap().to_path_buf();
    let out = std::process::Command::new(venv_bin.join("scope-profiler"))
        .arg("inspect")
        .arg(file)
        .args([
            "--regions-only",
            "--columns",
            "region",
            "calls",
            "total",
            "avg",
            "min",
            "max",
        ])
        .env("COLUMNS", "250")
        .env("NO_COLOR", "1")
        .output()
        .expect("scope-profiler inspect");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut rows = Vec::new();
    let mut in_table = false;
    for line in text.lines() {
        let l = line.trim();
        if l.starts_with('├') {
            in_table = true;
            continue;
        }
        if l.starts_with('╰') {
            break;
        }
        if !in_table {
            continue;
        }
        let tokens: Vec<&str> = l
            .split_whitespace()
            .filter(|t| !matches!(*t, "│" | "└─" | "├─"))
            .collect();
        let num = |s: &str| s.parse::<f64>().unwrap_or_else(|_| panic!("{s} in {line}"));
        let name = tokens[0].to_owned();
        if name == "(own)" {
            rows.push(Row {
                name,
                calls: None,
                total_s: num(tokens[1]),
                stats: None,
            });
        } else {
            rows.push(Row {
                name,
                calls: Some(tokens[1].parse().unwrap()),
                total_s: num(tokens[2]),
                stats: Some((num(tokens[3]), num(tokens[4]), num(tokens[5]))),
            });
        }
    }
    assert!(!rows.is_empty(), "no table in:\n{text}");
    rows
}

/// Ours, via `scopeprof inspect --json`.
fn our_rows(file: &Path) -> Vec<Row> {
    let out = scopeprof_ok(&["inspect", "--json", file.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["nested"], true, "{out}");
    let s = |x: &serde_json::Value| x.as_f64().unwrap() / 1e9;
    v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let own = r["own"].as_bool().unwrap();
            Row {
                name: r["name"].as_str().unwrap().to_owned(),
                calls: (!own).then(|| r["calls"].as_u64().unwrap()),
                total_s: s(&r["total_ns"]),
                stats: (!own).then(|| (s(&r["mean_ns"]), s(&r["min_ns"]), s(&r["max_ns"]))),
            }
        })
        .collect()
}

/// Equal at the precision the reference prints (6 decimals for totals, 4 significant digits
/// for the mean, 3 decimals for min and max).
fn assert_agree(file: &Path) {
    let theirs = reference_rows(file);
    let ours = our_rows(file);
    let names = |rows: &[Row]| rows.iter().map(|r| r.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(&ours), names(&theirs), "{ours:#?}\n{theirs:#?}");
    for (o, t) in ours.iter().zip(&theirs) {
        assert_eq!(o.calls, t.calls, "{}", o.name);
        assert!(
            (o.total_s - t.total_s).abs() <= 0.6e-6,
            "{}: total {} vs {}",
            o.name,
            o.total_s,
            t.total_s
        );
        if let (Some((om, omin, omax)), Some((tm, tmin, tmax))) = (o.stats, t.stats) {
            assert!(
                (om - tm).abs() <= tm.abs() * 1e-3 + 1e-12,
                "{}: mean {om} vs {tm}",
                o.name
            );
            assert!(
                (omin - tmin).abs() <= 0.6e-3,
                "{}: min {omin} vs {tmin}",
                o.name
            );
            assert!(
                (omax - tmax).abs() <= 0.6e-3,
                "{}: max {omax} vs {tmax}",
                o.name
            );
        }
    }
}

#[test]
fn agrees_with_the_reference_on_its_own_files() {
    let dir = tempfile::tempdir().unwrap();
    let python = ref_python();
    for recommended in [false, true] {
        let file = reference_file(&python, dir.path(), recommended);
        assert_agree(&file);
    }
}

#[test]
fn agrees_with_the_reference_on_a_tokio_profile() {
    let dir = tempfile::tempdir().unwrap();
    let file = tokio_profile(dir.path());
    assert_agree(&file);
    busy_is_the_files_polling_time(&file);
}

/// `busy_ns` of a path is the sum of its calls' durations less their `events/await_ns`, read
/// here from the file's columns (each row's events at its `event_offsets`, `event_counts`);
/// `handler` sleeps between steps, so it is busy for less than its total; the table shows it.
fn busy_is_the_files_polling_time(file: &Path) {
    let names = strings(file, "region_table/names");
    let ids = column(file, "rank_region_index/region_ids");
    let counts = column(file, "rank_region_index/event_counts");
    let offsets = column(file, "rank_region_index/event_offsets");
    let (durs, awaits) = (
        column(file, "events/durations"),
        column(file, "events/await_ns"),
    );
    let mut busy_of = std::collections::BTreeMap::new();
    for ((id, n), at) in ids.iter().zip(&counts).zip(&offsets) {
        let range = *at as usize..(at + n) as usize;
        let busy: i64 = range.map(|i| durs[i] - awaits[i]).sum();
        *busy_of.entry(names[*id as usize].clone()).or_insert(0) += busy;
    }
    let out = scopeprof_ok(&["inspect", "--json", file.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let rows = v["rows"].as_array().unwrap();
    let handler = rows.iter().find(|r| r["name"] == "handler").unwrap();
    let (busy, total) = (
        handler["busy_ns"].as_i64().unwrap(),
        handler["total_ns"].as_i64().unwrap(),
    );
    assert_eq!(busy, busy_of["handler"], "{out}");
    assert!(
        busy > 0 && busy < total,
        "handler sleeps: busy {busy} of {total} ns"
    );
    for r in rows.iter().filter(|r| r["own"] == false) {
        assert!(
            r["busy_ns"].as_i64().unwrap() <= r["total_ns"].as_i64().unwrap(),
            "{r}"
        );
    }
    let text = scopeprof_ok(&["inspect", file.to_str().unwrap()]);
    assert!(
        text.contains("busy [s]") && text.contains("(own): "),
        "{text}"
    );
}

#[test]
fn prints_the_crates_summary_table() {
    let dir = tempfile::tempdir().unwrap();
    let file = reference_file(&ref_python(), dir.path(), false);
    let text = scopeprof_ok(&["inspect", file.to_str().unwrap()]);
    assert!(text.contains("╭"), "{text}");
    assert!(text.contains("│ outer "), "{text}");
    assert!(text.contains("│ └─ inner "), "{text}");
    assert!(text.contains("Summary: "), "{text}");
}

#[test]
fn aggregate_files_have_a_flat_summary_and_no_timeline() {
    use tracing_subscriber::prelude::*;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agg.h5");
    let (layer, guard) = scope_profiler::ScopeLayer::builder()
        .mode(scope_profiler::Mode::Aggregate)
        .output(&path)
        .summary(false)
        .build()
        .unwrap();
    let d = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    tracing::dispatcher::with_default(&d, || {
        for _ in 0..7 {
            tracing::info_span!("agg").in_scope(|| std::hint::black_box(1));
        }
    });
    guard.finalize().unwrap();
    let out = scopeprof_ok(&["inspect", "--json", path.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["nested"], false, "{out}");
    // `file` is the path as given (scripts open it), the label is in `title`.
    assert_eq!(v["file"], path.to_str().unwrap(), "{out}");
    assert!(
        v["title"]
            .as_str()
            .unwrap()
            .ends_with(path.to_str().unwrap()),
        "{out}"
    );
    let agg = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "agg")
        .unwrap_or_else(|| panic!("{out}"));
    assert_eq!(agg["calls"], 7, "{out}");
    let o = scopeprof(&[
        "export",
        path.to_str().unwrap(),
        "-o",
        dir.path().join("t").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("aggregate layout"));
}

#[test]
fn agrees_with_the_reference_on_a_flight_recorder_dump() {
    use tracing_subscriber::prelude::*;
    let dir = tempfile::tempdir().unwrap();
    let (layer, guard) = scope_profiler::ScopeLayer::builder()
        .output(dir.path().join("service.h5"))
        .summary(false)
        .flight_recorder(std::time::Duration::from_secs(60))
        .build()
        .unwrap();
    let d = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    tracing::dispatcher::with_default(&d, || {
        for _ in 0..30 {
            let _r = tracing::info_span!("request").entered();
            for _ in 0..3 {
                tracing::info_span!("query").in_scope(|| std::hint::black_box(0));
            }
        }
    });
    let file = dir.path().join("dump.h5");
    guard.dump(&file).unwrap();
    assert_agree(&file);
    let text = scopeprof_ok(&["inspect", file.to_str().unwrap()]);
    assert!(text.contains("request") && text.contains("query"), "{text}");
}

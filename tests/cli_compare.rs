//! `scopeprof diff` and `check` beyond the regression tests of `cli_check.rs`: the three
//! output formats and the options on real profiles, files written by the Python package
//! (columnar and aggregate) and by the reference's own `make_minimal_h5.py`, agreement of
//! the statistics with the reference's `scope-profiler diff`, every tested statistic on
//! files with known durations, and bad input.

mod cli_common;

use std::path::{Path, PathBuf};

use cli_common::workload::{self, Workload};
use cli_common::{
    python, python_package_profile, ref_python, reference_file, scopeprof, scopeprof_ok,
};

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn json(args: &[&str]) -> (i32, serde_json::Value) {
    let out = scopeprof(args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "{args:?}: no JSON ({e}): {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap(), v)
}

fn named<'a>(v: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    v["regions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {v}"))
}

/// A file of `make_samples_h5.py` (known log-normal durations; see the script).
fn samples(dir: &Path, name: &str, seed: u32, scale: f64, calls: u32, extra: &[&str]) -> PathBuf {
    let path = dir.join(name);
    let out = std::process::Command::new(ref_python())
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/cli_data/make_samples_h5.py"
        ))
        .arg(&path)
        .args([seed.to_string(), scale.to_string(), calls.to_string()])
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    path
}

#[test]
fn diff_prints_text_markdown_and_json_with_new_and_gone_regions() {
    let dir = tempfile::tempdir().unwrap();
    let (base, cand) = (dir.path().join("base.h5"), dir.path().join("cand.h5"));
    let w = Workload {
        calls: 200,
        ..Workload::default()
    };
    workload::profile_interleaved(&[
        (base.clone(), w),
        (
            cand.clone(),
            Workload {
                kernel_scale: 1.5,
                ..w
            },
        ),
    ])
    .unwrap();
    let text = scopeprof_ok(&["diff", s(&base), s(&cand)]);
    assert!(
        text.starts_with(&format!(
            "base: {}\ncand: {}\n",
            base.display(),
            cand.display()
        )),
        "{text}"
    );
    // By default the candidate's values and their changes, in 100 columns.
    let header = text.lines().nth(3).unwrap();
    for col in ["region", "calls", "total", "mean", "p50", "p99"] {
        assert!(header.contains(col), "{header}");
    }
    assert!(
        text.lines()
            .any(|l| l.starts_with("kernel ") && l.contains("200 +0.0%")),
        "{text}"
    );
    assert!(
        text.contains("(each cell: cand's value, change from base;"),
        "{text}"
    );
    let widest = text.lines().map(|l| l.chars().count()).max().unwrap();
    assert!(widest <= 100, "{widest} columns:\n{text}");
    // --wide: base -> cand for every statistic.
    let wide = scopeprof_ok(&["diff", "--wide", s(&base), s(&cand)]);
    let header = wide.lines().nth(3).unwrap();
    for col in [
        "calls (base -> cand)",
        "total (base -> cand)",
        "p99",
        "change",
    ] {
        assert!(header.contains(col), "{header}");
    }
    assert!(
        wide.lines()
            .any(|l| l.starts_with("kernel ") && l.contains("200 -> 200")),
        "{wide}"
    );

    let md = scopeprof_ok(&["diff", "--format", "markdown", s(&base), s(&cand)]);
    assert!(md.starts_with("### scopeprof diff\n"), "{md}");
    assert!(md.contains("|:---|---:|"), "{md}");
    assert!(
        md.lines().any(|l| l.starts_with("| kernel | 200 -> 200 |")),
        "{md}"
    );

    let (code, v) = json(&["diff", "--format", "json", s(&base), s(&cand)]);
    assert_eq!(code, 0);
    let k = named(&v, "kernel");
    assert_eq!(k["status"], "common");
    assert_eq!(k["base"]["calls"], 200);
    let p50 = k["change_pct"]["p50"].as_f64().unwrap();
    assert!((35.0..65.0).contains(&p50), "kernel p50 change {p50}");
    assert_eq!(v["key"], "total");

    // Options: statistics, order, threshold, names, ranks.
    let (_, v) = json(&[
        "diff",
        "--format",
        "json",
        "--metric",
        "p99,calls",
        "--sort",
        "name",
        s(&base),
        s(&cand),
    ]);
    assert_eq!(v["metrics"], serde_json::json!(["p99", "calls"]));
    assert_eq!(v["key"], "p99");
    let names: Vec<&str> = v["regions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
    let (_, v) = json(&[
        "diff",
        "--format",
        "json",
        "--metric",
        "p50",
        "--threshold",
        "20",
        s(&base),
        s(&cand),
    ]);
    let names: Vec<&str> = v["regions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"kernel") && !names.contains(&"steady"),
        "{names:?}"
    );
    let (_, v) = json(&[
        "diff",
        "--format",
        "json",
        "--include",
        "ker|ste",
        "--exclude",
        "steady",
        s(&base),
        s(&cand),
    ]);
    assert_eq!(v["regions"].as_array().unwrap().len(), 1, "{v}");
    let (_, v) = json(&[
        "diff",
        "--format",
        "json",
        "--ranks",
        "3-5",
        s(&base),
        s(&cand),
    ]);
    assert!(v["regions"].as_array().unwrap().is_empty(), "{v}");

    // Regions of only one file are new or gone.
    let tokio = cli_common::tokio_profile(dir.path());
    let (_, v) = json(&["diff", "--format", "json", s(&base), s(&tokio)]);
    assert_eq!(named(&v, "kernel")["status"], "gone");
    assert_eq!(named(&v, "handler")["status"], "new");
    assert!(named(&v, "handler")["base"].is_null());
    let text = scopeprof_ok(&["diff", s(&base), s(&tokio)]);
    assert!(text.contains("gone (only in base): "), "{text}");
    assert!(text.contains("new (only in cand): "), "{text}");
    // With --fail-on-new, a new region fails the check.
    let (code, v) = json(&[
        "check",
        "--format",
        "json",
        "--fail-on-new",
        s(&base),
        s(&tokio),
    ]);
    assert_eq!(code, 1, "{v}");
    assert_eq!(named(&v, "handler")["verdict"], "new");
    let (code, _) = json(&["check", "--format", "json", s(&base), s(&tokio)]);
    assert_eq!(code, 0);
}

#[test]
fn every_statistic_is_tested_on_known_durations() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let base = samples(d, "base.h5", 1, 1.0, 1000, &[]);
    let slower = samples(d, "slower.h5", 1, 1.25, 1000, &[]);
    let rank1 = samples(d, "rank1.h5", 1, 1.25, 1000, &["--only-rank1"]);
    let twice = samples(d, "twice.h5", 2, 1.0, 2000, &[]);
    for metric in ["p50", "mean", "p95", "p99", "total"] {
        let (code, v) = json(&[
            "check",
            "--format",
            "json",
            "--max-regression",
            "10",
            "--metric",
            metric,
            s(&base),
            s(&slower),
        ]);
        assert_eq!(code, 1, "{metric}: {v}");
        let a = named(&v, "alpha");
        assert_eq!(a["verdict"], "regressed", "{metric}: {a}");
        assert!(
            (a["change_pct"].as_f64().unwrap() - 25.0).abs() < 0.5,
            "{metric}: {a}"
        );
        assert_eq!(named(&v, "beta")["verdict"], "ok", "{metric}: {v}");
    }
    // Ranks: the regression is on rank 1 only.
    let (code, _) = json(&[
        "check",
        "--format",
        "json",
        "--max-regression",
        "10",
        "--ranks",
        "0",
        s(&base),
        s(&rank1),
    ]);
    assert_eq!(code, 0);
    let (code, _) = json(&[
        "check",
        "--format",
        "json",
        "--max-regression",
        "10",
        "--ranks",
        "1",
        s(&base),
        s(&rank1),
    ]);
    assert_eq!(code, 1);
    // Twice the calls, same durations: the total doubles, the mean does not move.
    let (code, v) = json(&[
        "check",
        "--format",
        "json",
        "--max-regression",
        "10",
        "--metric",
        "total",
        s(&base),
        s(&twice),
    ]);
    assert_eq!(code, 1, "{v}");
    assert!(
        (named(&v, "beta")["change_pct"].as_f64().unwrap() - 100.0).abs() < 3.0,
        "{v}"
    );
    let (code, v) = json(&[
        "check",
        "--format",
        "json",
        "--max-regression",
        "10",
        "--metric",
        "mean",
        s(&base),
        s(&twice),
    ]);
    assert_eq!(code, 0, "{v}");
    // Several files per side: between runs.
    let (code, v) = json(&[
        "check",
        "--format",
        "json",
        "--max-regression",
        "10",
        s(&base),
        s(&samples(d, "b2.h5", 3, 1.0, 1000, &[])),
        "--",
        s(&slower),
        s(&samples(d, "c2.h5", 4, 1.25, 1000, &[])),
    ]);
    assert_eq!(code, 1, "{v}");
    assert!(
        named(&v, "alpha")["method"]
            .as_str()
            .unwrap()
            .starts_with("between runs (t, 2 df)"),
        "{v}"
    );
    // Same file both sides: nothing changes.
    let (code, v) = json(&["check", "--format", "json", s(&base), s(&base)]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(named(&v, "alpha")["change_pct"], 0);
}

#[test]
fn diff_statistics_agree_with_the_reference_diff() {
    let dir = tempfile::tempdir().unwrap();
    let base = samples(dir.path(), "base.h5", 5, 1.0, 700, &[]);
    let cand = samples(dir.path(), "cand.h5", 6, 1.1, 700, &[]);
    let bin = ref_python().parent().unwrap().join("scope-profiler");
    for (ours, theirs) in [
        ("p50", "p50"),
        ("p99", "p99"),
        ("mean", "avg"),
        ("total", "total"),
    ] {
        let (_, v) = json(&[
            "diff",
            "--format",
            "json",
            "--metric",
            ours,
            s(&base),
            s(&cand),
        ]);
        let out = std::process::Command::new(&bin)
            .args(["diff", "--metric", theirs, s(&base), s(&cand)])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        for region in ["alpha", "beta"] {
            // Reference row: │ alpha  2.0015e-05  2.5019e-05  +5.004e-06  +25% │ (seconds).
            let row = text
                .lines()
                .find(|l| l.split_whitespace().nth(1) == Some(region))
                .unwrap_or_else(|| panic!("{region} not in {text}"));
            let cells: Vec<f64> = row
                .split_whitespace()
                .skip(2)
                .take(2)
                .map(|c| c.parse::<f64>().unwrap() * 1e9)
                .collect();
            let r = named(&v, region);
            for (side, want) in ["base", "cand"].iter().zip(&cells) {
                let got = r[side][format!("{ours}_ns")].as_f64().unwrap();
                assert!(
                    (got - want).abs() <= want.abs() * 1e-5,
                    "{ours} {region} {side}: {got} vs {want}"
                );
            }
        }
    }
}

#[test]
fn files_written_by_the_python_package_are_compared_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let col = python_package_profile(d, "col.h5", false, 3000);
    let agg = python_package_profile(d, "agg.h5", true, 3000);
    // Columnar: per-call statistics; the same file on both sides changes by exactly 0.
    let (_, v) = json(&["diff", "--format", "json", s(&col), s(&col)]);
    assert_eq!(named(&v, "solve")["base"]["calls"], 120);
    assert_eq!(named(&v, "inner")["change_pct"]["p50"], 0);
    let (code, v) = json(&["check", "--format", "json", s(&col), s(&col)]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(named(&v, "solve")["verdict"], "ok");
    assert_eq!(named(&v, "setup")["verdict"], "inconclusive");
    // Aggregate: the columns it supports, and the plain comparison, said so.
    let text = scopeprof_ok(&["diff", s(&agg), s(&col)]);
    assert!(
        text.contains("aggregate layout (per-region totals only): no percentiles"),
        "{text}"
    );
    let (_, v) = json(&["diff", "--format", "json", s(&agg), s(&agg)]);
    assert!(named(&v, "solve")["base"]["p50_ns"].is_null());
    assert_eq!(named(&v, "solve")["base"]["calls"], 120);
    let (code, v) = json(&[
        "check",
        "--format",
        "json",
        "--metric",
        "mean",
        s(&agg),
        s(&agg),
    ]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(named(&v, "solve")["method"], "plain (no per-call data)");
    assert!(
        v["notes"][0].as_str().unwrap().contains("compared plainly"),
        "{v}"
    );
    let (_, v) = json(&["check", "--format", "json", s(&agg), s(&agg)]);
    assert!(
        named(&v, "solve")["why"]
            .as_str()
            .unwrap()
            .contains("p50 needs per-call durations"),
        "{v}"
    );
    // Reports of both.
    for (f, page) in [(&col, "col.html"), (&agg, "agg.html")] {
        let out = d.join(page);
        scopeprof_ok(&["report", s(f), "-o", s(&out)]);
        let html = std::fs::read_to_string(&out).unwrap();
        assert!(html.contains(">solve<"), "{page}");
    }
    assert!(std::fs::read_to_string(d.join("agg.html"))
        .unwrap()
        .contains("aggregate layout"));
    // The reference's own hand-written files (make_minimal_h5.py).
    let python = ref_python();
    let min = reference_file(&python, d, false);
    let full = reference_file(&python, d, true);
    let (_, v) = json(&["diff", "--format", "json", s(&min), s(&full)]);
    assert_eq!(named(&v, "inner")["base"]["calls"], 2);
    assert_eq!(named(&v, "worker")["status"], "new");
    let (code, v) = json(&["check", "--format", "json", "--strict", s(&full), s(&full)]);
    assert_eq!(code, 3, "2-call regions are inconclusive: {v}");
    let out = d.join("ref.html");
    scopeprof_ok(&["report", s(&min), s(&full), "-o", s(&out)]);
    assert!(std::fs::read_to_string(&out)
        .unwrap()
        .contains("Diff against the base"));
    let _ = python;
}

#[test]
fn bad_input_exits_2_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let good = samples(dir.path(), "good.h5", 1, 1.0, 50, &[]);
    let junk = dir.path().join("junk.h5");
    std::fs::write(&junk, b"not an hdf5 file").unwrap();
    let missing = dir.path().join("missing.h5");
    let html = dir.path().join("r.html");
    for (args, says) in [
        (
            vec!["diff", s(&good), s(&missing)],
            "missing.h5: cannot open",
        ),
        (
            vec!["check", s(&junk), s(&good)],
            "junk.h5: not a readable HDF5 file",
        ),
        (
            vec!["report", s(&junk), "-o", s(&html)],
            "junk.h5: not a readable HDF5 file",
        ),
        (
            vec!["diff", "--include", "(", s(&good), s(&good)],
            "bad region pattern `(`",
        ),
        (
            vec!["check", "--ranks", "x", s(&good), s(&good)],
            "bad rank `x`",
        ),
        (
            vec!["check", s(&good), s(&good), s(&good)],
            "check takes BASE CAND, or BASE... -- CAND...",
        ),
        (
            vec!["check", "--confidence", "1.5", s(&good), s(&good)],
            "--confidence 1.5",
        ),
    ] {
        let out = scopeprof(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    assert!(!html.exists(), "no report is left behind on bad input");
}

/// Peak RSS and CPU of `scopeprof check FILE FILE` (run by `check_memory_and_cpu_...`).
#[test]
#[ignore = "child process of check_memory_and_cpu_do_not_grow_with_calls"]
fn child_check_rusage() {
    let file = std::env::var("SCOPE_CHECK_FILE").expect("run by the memory test");
    let out = scopeprof(&["check", &file, &file]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // SAFETY: rusage is plain integers, for which all-zero bytes are a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage for getrusage to fill.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    assert_eq!(rc, 0);
    let cpu_us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    println!("RESULT maxrss_kb={}", ru.ru_maxrss);
    println!(
        "RESULT cpu_us={}",
        cpu_us(ru.ru_utime) + cpu_us(ru.ru_stime)
    );
}

#[test]
fn check_memory_and_cpu_do_not_grow_with_calls() {
    let dir = tempfile::tempdir().unwrap();
    let gen = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/gen-large-profile.py");
    let mut results = Vec::new();
    for n in [200_000u64, 2_000_000] {
        let f = dir.path().join(format!("large{n}.h5"));
        python(&ref_python(), &format!("import runpy, sys; sys.argv = ['gen', {:?}, '{n}', '4']; runpy.run_path({gen:?}, run_name='__main__')", f.display().to_string()), &[]);
        let r = cli_common_child("child_check_rusage", &[("SCOPE_CHECK_FILE", s(&f))]);
        results.push((n, r.0, r.1));
    }
    let (n1, rss1, cpu1) = results[0];
    let (n2, rss2, cpu2) = results[1];
    println!("check of n={n1}: {rss1} KiB, {cpu1} us CPU; n={n2}: {rss2} KiB, {cpu2} us CPU");
    // Samples are capped (100 000 per region and file): 10x the calls stays within 64 MiB more.
    assert!(
        rss2 < rss1 + 64 * 1024,
        "peak RSS {rss1} KiB -> {rss2} KiB for 10x the calls"
    );
    assert!(rss2 < 256 * 1024, "peak RSS {rss2} KiB");
    // Reading is linear: CPU per call does not grow with the file.
    let per = |cpu: u64, n: u64| cpu as f64 / n as f64;
    assert!(
        per(cpu2, n2) < 1.5 * per(cpu1, n1),
        "CPU per call {:.3} -> {:.3} us",
        per(cpu1, n1),
        per(cpu2, n2)
    );
}

/// Runs an ignored test of this binary as a child; returns (maxrss_kb, cpu_us).
fn cli_common_child(name: &str, env: &[(&str, &str)]) -> (u64, u64) {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            name,
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let value = |k: &str| -> u64 {
        stdout
            .lines()
            .find_map(|l| {
                l.split_once(&format!("RESULT {k}="))
                    .map(|x| x.1.trim().parse().unwrap())
            })
            .unwrap_or_else(|| panic!("no {k} in {stdout}"))
    };
    (value("maxrss_kb"), value("cpu_us"))
}

#[test]
fn check_help_states_the_decision_rule() {
    let help = scopeprof_ok(&["check", "--help"]);
    for needle in [
        "Decision rule.",
        "lower bound of a one-sided",
        "Bonferroni",
        "Mann-Whitney",
        "bootstrap (400 seeded resamples",
        "Student's t over the runs",
        "fewer than 30 calls",
        "100 000 calls per region",
        "Exit status: 0 no region regressed; 1 a region regressed",
        "[default: p50]",
    ] {
        assert!(help.contains(needle), "--help lacks {needle:?}:\n{help}");
    }
    // The docs page states the same rule.
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/compare.md")).unwrap();
    let flat = |s: &str| {
        s.split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .replace('`', "")
            .replace("**", "")
    };
    let (doc, help) = (flat(&doc), flat(&help));
    for sentence in [
        "A region regressed when the lower bound of a one-sided confidence interval on c exceeds --max-regression",
        "is one observation and the bound is Student's t over the runs",
        "Per-call samples are capped at 100 000 calls per region and 2 000 000 per file",
    ] {
        assert!(help.contains(&sentence.replace("regressed when", "REGRESSED when")), "help: {sentence}");
        assert!(doc.contains(sentence), "docs/compare.md: {sentence}");
    }
}

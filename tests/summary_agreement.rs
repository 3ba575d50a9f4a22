//! The printed summary and the reference's `scope-profiler inspect` agree on the same file:
//! both tables are parsed and compared row by row (tree, calls, totals, % session) for a
//! nested async profile with concurrent tasks.
//!
//! One documented difference: for an `(own)` row the reference prints the summed exclusive
//! time over the session's wall time, which exceeds 100 % when the path's calls overlap
//! (concurrent tasks); the summary scales the path's wall-clock coverage by its exclusive
//! share instead. Where the path's calls do not overlap the two are the same number.

mod common;

use std::time::Duration;

use scope_profiler::ScopeLayer;
use tracing::{info_span, instrument};
use tracing_subscriber::prelude::*;

const CHILD: &str = "SCOPE_PROFILER_AGREEMENT_OUT";

fn crunch(n: u64) -> u64 {
    info_span!("crunch").in_scope(|| (0..n).fold(1u64, |a, x| a.wrapping_mul(31) ^ x))
}

#[instrument]
async fn request(id: u64) -> u64 {
    tokio::time::sleep(Duration::from_millis(1 + id % 3)).await;
    let v = info_span!("parse").in_scope(|| crunch(20_000));
    tokio::task::yield_now().await;
    v
}

#[instrument]
async fn serve(n: u64) -> u64 {
    let handles: Vec<_> = (0..n).map(|i| tokio::spawn(request(i))).collect();
    let mut acc = 0;
    for h in handles {
        acc ^= h.await.unwrap();
    }
    acc
}

#[instrument]
fn solve() {
    for _ in 0..20 {
        info_span!("step").in_scope(|| crunch(5_000));
    }
}

/// The profiled program (run in a child process so its printed summary can be read).
fn child(path: &str) {
    let (layer, guard) = ScopeLayer::builder()
        .output(path)
        .track_async(true)
        .label("agreement")
        .build()
        .unwrap();
    let d = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    let rt = common::runtime(&d, 2);
    tracing::dispatcher::with_default(&d, || {
        rt.block_on(serve(120));
        solve();
    });
    drop(rt);
    guard.finalize().unwrap();
}

/// One parsed table row.
#[derive(Debug)]
struct Row {
    depth: usize,
    name: String,
    calls: Option<u64>,
    pct: f64,
    total: f64,
}

/// Splits a box row `│ <tree><name> ... │` into (depth, name with suffix, numeric cells).
fn cells(line: &str, numeric: usize, ours: bool) -> Option<(usize, String, Vec<String>)> {
    let inner = line.trim().strip_prefix('│')?.strip_suffix('│')?.trim_end();
    let words: Vec<&str> = inner.split_whitespace().collect();
    if words.len() < numeric + 1 {
        return None;
    }
    let (head, nums) = words.split_at(words.len() - numeric);
    let depth = if ours {
        // Ours takes three columns per level (`├─ `, `└─ `, `│  ` or blanks).
        let body = inner.strip_prefix(' ').unwrap_or(inner);
        let drawn = body
            .chars()
            .take_while(|c| matches!(c, '│' | '├' | '└' | '─' | ' '))
            .count();
        drawn / 3
    } else {
        // The reference draws `│ ` per ancestor level and `└─` before every child.
        head.iter().filter(|w| **w == "│").count() + usize::from(head.contains(&"└─"))
    };
    let name: Vec<&str> = head
        .iter()
        .copied()
        .filter(|w| !matches!(*w, "│" | "└─" | "├─"))
        .collect();
    Some((
        depth,
        name.join(" "),
        nums.iter().map(|s| s.to_string()).collect(),
    ))
}

fn pct(s: &str) -> f64 {
    s.trim_end_matches('%').parse().unwrap()
}

/// Our summary: region, calls, % session, total, busy (async profiles), avg, min, max, std.
fn ours(text: &str) -> Vec<Row> {
    let numeric = if text.contains("busy [s]") { 8 } else { 7 };
    text.lines()
        .skip_while(|l| !l.contains("% session"))
        .skip(2)
        .take_while(|l| !l.trim_start().starts_with('╰'))
        .map(|l| {
            let (depth, name, c) = cells(l, numeric, true).unwrap_or_else(|| panic!("row {l:?}"));
            Row {
                depth,
                name,
                calls: c[0].parse().ok(),
                pct: pct(&c[1]),
                total: c[2].parse().unwrap(),
            }
        })
        .collect()
}

/// The reference's table: region (with `(Nx)`), % session, total.
fn reference(text: &str) -> Vec<Row> {
    text.lines()
        .skip_while(|l| !l.contains("% session"))
        .skip(2)
        .take_while(|l| !l.trim_start().starts_with('╰'))
        .map(|l| {
            let (depth, name, c) = cells(l, 2, false).unwrap_or_else(|| panic!("row {l:?}"));
            let (name, calls) = match name.rsplit_once(" (") {
                Some((n, x)) if x.ends_with("x)") => {
                    (n.to_owned(), x.trim_end_matches("x)").parse().ok())
                }
                _ if name == "(own)" => (name, None),
                _ => (name, Some(1)),
            };
            Row {
                depth,
                name,
                calls,
                pct: pct(&c[0]),
                total: c[1].parse().unwrap(),
            }
        })
        .collect()
}

/// The child process of `summary_and_reference_inspect_agree_on_a_nested_async_profile`.
#[test]
#[ignore = "the child process of summary_and_reference_inspect_agree_on_a_nested_async_profile"]
fn agreement_child() {
    let path = std::env::var_os(CHILD).expect("run by its parent test");
    child(path.to_str().unwrap());
}

#[test]
fn summary_and_reference_inspect_agree_on_a_nested_async_profile() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agree.h5");
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["agreement_child", "--exact", "--ignored", "--nocapture"])
        .env(CHILD, &path)
        .output()
        .unwrap();
    let summary = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{summary}");
    let inspect = common::py("scope-profiler", &["inspect", path.to_str().unwrap()]);

    let (a, b) = (ours(&summary), reference(&inspect));
    let context = format!("summary:\n{summary}\ninspect:\n{inspect}");
    assert!(a.len() >= 10, "{context}");
    assert_eq!(a.len(), b.len(), "{context}");
    let session = a[0].total;
    let mut concurrent_own_rows = 0;
    for (x, y) in a.iter().zip(&b) {
        assert_eq!((x.depth, &x.name), (y.depth, &y.name), "{context}");
        assert_eq!(x.calls, y.calls, "{}: calls\n{context}", x.name);
        assert!((x.total - y.total).abs() < 1.5e-6, "{}: total", x.name);
        if x.name != "(own)" || (x.pct - y.pct).abs() <= 0.011 {
            assert!(
                (x.pct - y.pct).abs() <= 0.011,
                "{}: % session\n{context}",
                x.name
            );
            continue;
        }
        // The documented difference: the reference divides summed own time by wall time.
        let summed = 100.0 * y.total / session;
        // Both operands are printed to 1 us: allow for that rounding.
        let slack = 0.011 + summed * (1e-6 / y.total.max(1e-6) + 1e-6 / session);
        assert!(
            (y.pct - summed).abs() <= slack,
            "{}: reference own {} % is not own/wall ({summed} %)\n{context}",
            x.name,
            y.pct
        );
        assert!(x.pct < y.pct && x.pct <= 100.0, "{context}");
        concurrent_own_rows += 1;
    }
    assert!(
        concurrent_own_rows >= 1,
        "the profile has concurrent calls with own time\n{context}"
    );

    // task_ids are lane indices into task_table; the Tokio id is the extra `tokio_id` column,
    // which the reader ignores.
    let f = hdf5::File::open(&path).unwrap();
    let index: Vec<i64> = common::read(&f, "task_table/index");
    let tokio_ids: Vec<u64> = common::read(&f, "task_table/tokio_id");
    assert_eq!(
        index,
        (0..120).collect::<Vec<i64>>(),
        "one row per request task"
    );
    let distinct: std::collections::HashSet<u64> = tokio_ids.iter().copied().collect();
    assert_eq!(distinct.len(), 120);
    assert!(!distinct.contains(&0));
    let names = common::read_strings(&f, "task_table/name");
    assert!(names
        .iter()
        .zip(&tokio_ids)
        .all(|(n, id)| *n == format!("Task-{id}")));
    let task_ids: Vec<i64> = common::read(&f, "events/task_ids");
    assert!(task_ids.iter().all(|&t| (-1..120).contains(&t)));
    let script = format!(
        "import scope_profiler as sp\n\
         r = sp.read_h5({:?})\n\
         tasks = r.tasks[0]\n\
         assert len(tasks) == 120, len(tasks)\n\
         assert sorted(t.index for t in tasks) == list(range(120))\n\
         print('ok')\n",
        path.to_str().unwrap()
    );
    let out = common::py("python", &["-c", &script]);
    assert!(out.trim_end().ends_with("ok"), "{out}");
}

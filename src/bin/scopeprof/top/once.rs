//! `scopeprof top --once`: one snapshot of the regions view, as a table or a JSON object.

use std::fmt::Write;
use std::path::Path;

use scope_profiler::read::json_str;

use super::model::{RegionRow, Snapshot, WindowSpec};
use super::source::Source;
use super::OnceFormat;

/// The snapshot of the window `spec`, ending at the present or `at` ns into the recording,
/// formatted.
pub(crate) fn snapshot(
    source: &mut Source,
    spec: WindowSpec,
    at: Option<i64>,
    format: OnceFormat,
    target: &Path,
) -> Result<String, String> {
    let span = source.span();
    let end = at
        .zip(span)
        .map(|(at, (first, _))| first.saturating_add(at));
    let snap = match spec.select(span, end) {
        Some(w) => Some(source.snapshot(w)?),
        None => None,
    };
    let open = source.open_calls();
    let mut notes: Vec<String> = Vec::new();
    notes.extend(open.reason.map(String::from));
    notes.extend(source.no_calls_reason().map(String::from));
    notes.extend(source.notice.clone());
    if snap.is_none() {
        notes.push("no calls recorded yet".into());
    }
    let names = source.region_names();
    Ok(match format {
        OnceFormat::Json => json(target, source, snap.as_ref(), &names, spec, &notes),
        OnceFormat::Text => text(target, snap.as_ref(), &notes),
    })
}

fn num(v: Option<i64>) -> String {
    v.map_or("null".into(), |v| v.to_string())
}

fn float(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.6}")
    } else {
        "null".into()
    }
}

fn region_json(r: &RegionRow) -> String {
    format!(
        "{{\"region\":{},\"calls\":{},\"calls_per_s\":{},\"wall_share\":{},\"p50_ns\":{},\
         \"p99_ns\":{},\"max_ns\":{},\"total_ns\":{},\"await_share\":{},\"open\":{}}}",
        json_str(&r.name),
        r.calls,
        float(r.calls_per_s),
        float(r.wall_share),
        num(r.p50_ns),
        num(r.p99_ns),
        num(r.max_ns),
        r.total_ns,
        r.await_share.map_or("null".into(), float),
        r.open.map_or("null".into(), |o| o.to_string()),
    )
}

fn json(
    target: &Path,
    source: &Source,
    snap: Option<&Snapshot>,
    names: &[String],
    spec: WindowSpec,
    notes: &[String],
) -> String {
    let mut s = String::from("{");
    let _ = write!(
        s,
        "\"target\":{},\"source\":{},\"window\":{},",
        json_str(&target.display().to_string()),
        json_str(if source.is_spool() { "spool" } else { "file" }),
        json_str(
            match spec {
                WindowSpec::All => "all".into(),
                WindowSpec::Last(ns) => format!("{}s", ns as f64 / 1e9),
            }
            .as_str()
        ),
    );
    let (a, b) = snap.map_or((None, None), |s| {
        (Some(s.window.start_ns), Some(s.window.end_ns))
    });
    let _ = write!(
        s,
        "\"window_start_ns\":{},\"window_end_ns\":{},",
        num(a),
        num(b)
    );
    let rows: Vec<String> = match snap {
        Some(snap) => snap.regions.iter().map(region_json).collect(),
        // Nothing recorded yet: the declared regions, without calls.
        None => names
            .iter()
            .map(|n| {
                format!(
                    "{{\"region\":{},\"calls\":0,\"p50_ns\":null,\"p99_ns\":null,\"open\":null}}",
                    json_str(n)
                )
            })
            .collect(),
    };
    let _ = write!(s, "\"regions\":[{}],", rows.join(","));
    let open_reason = source.open_calls().reason;
    let _ = write!(
        s,
        "\"open_reason\":{},\"notes\":[{}]}}",
        open_reason.map_or("null".into(), json_str),
        notes
            .iter()
            .map(|n| json_str(n))
            .collect::<Vec<_>>()
            .join(",")
    );
    s.push('\n');
    s
}

/// A duration in ns as text with a unit.
pub(crate) fn dur(ns: Option<i64>) -> String {
    match ns {
        None => "-".into(),
        Some(ns) if ns < 1_000 => format!("{ns} ns"),
        Some(ns) if ns < 1_000_000 => format!("{:.1} us", ns as f64 / 1e3),
        Some(ns) if ns < 1_000_000_000 => format!("{:.1} ms", ns as f64 / 1e6),
        Some(ns) => format!("{:.2} s", ns as f64 / 1e9),
    }
}

fn text(target: &Path, snap: Option<&Snapshot>, notes: &[String]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "scopeprof top {}", target.display());
    if let Some(snap) = snap {
        let _ = writeln!(
            s,
            "window {:.3} s ({} .. {} ns)",
            snap.window.len_ns() as f64 / 1e9,
            snap.window.start_ns,
            snap.window.end_ns
        );
        let _ = writeln!(
            s,
            "{:<28} {:>9} {:>10} {:>7} {:>10} {:>10} {:>10} {:>7} {:>5}",
            "region", "calls", "calls/s", "wall%", "p50", "p99", "max", "await%", "open"
        );
        for r in &snap.regions {
            let _ = writeln!(
                s,
                "{:<28} {:>9} {:>10.1} {:>7.1} {:>10} {:>10} {:>10} {:>7} {:>5}",
                r.name,
                r.calls,
                r.calls_per_s,
                100.0 * r.wall_share,
                dur(r.p50_ns),
                dur(r.p99_ns),
                dur(r.max_ns),
                r.await_share
                    .map_or("-".into(), |a| format!("{:.1}", 100.0 * a)),
                r.open.map_or("?".into(), |o| o.to_string()),
            );
        }
    }
    for n in notes {
        let _ = writeln!(s, "note: {n}");
    }
    s
}

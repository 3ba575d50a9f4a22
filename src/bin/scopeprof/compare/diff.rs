//! `scopeprof diff BASE CAND`: one row per region, the chosen statistics of both files and
//! their change in %, as text, Markdown or JSON. Regions only in the candidate are `new`,
//! only in the base `gone`. Percentiles come from the per-call durations (a sample of at most
//! 100 000 calls per region, see `samples`); aggregate files have no percentiles, and their
//! cells say so with `-`.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use scope_profiler::read::json_str;

use super::samples::{FileData, Region};
use super::table::{fmt_ns, fmt_pct, json_num, Align, Output, Table};
use super::SelectArgs;

/// Statistics `diff` can show.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Stat {
    /// Number of calls.
    Calls,
    /// Sum of durations.
    Total,
    /// Mean duration per call (`avg` in the reference).
    #[value(alias = "avg")]
    Mean,
    /// Shortest call.
    Min,
    /// Longest call.
    Max,
    /// Median duration (per-call data only).
    P50,
    /// 95th percentile (per-call data only).
    P95,
    /// 99th percentile (per-call data only).
    P99,
}

impl Stat {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Stat::Calls => "calls",
            Stat::Total => "total",
            Stat::Mean => "mean",
            Stat::Min => "min",
            Stat::Max => "max",
            Stat::P50 => "p50",
            Stat::P95 => "p95",
            Stat::P99 => "p99",
        }
    }

    /// The value for a region (ns, or calls), `None` when the file cannot give it.
    pub(crate) fn value(self, r: &Region) -> Option<f64> {
        match self {
            Stat::Calls => Some(r.calls as f64),
            Stat::Total => Some(r.total_ns),
            Stat::Mean => Some(r.mean_ns()),
            Stat::Min => Some(r.min_ns as f64),
            Stat::Max => Some(r.max_ns as f64),
            Stat::P50 => r.quantile(0.50),
            Stat::P95 => r.quantile(0.95),
            Stat::P99 => r.quantile(0.99),
        }
    }

    fn fmt(self, v: Option<f64>) -> String {
        match (self, v) {
            (_, None) => "-".into(),
            (Stat::Calls, Some(v)) => format!("{v:.0}"),
            (_, Some(v)) => fmt_ns(v),
        }
    }
}

/// Row order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Sort {
    /// Largest absolute change of the key statistic first.
    Delta,
    /// Largest absolute change in % first.
    Pct,
    /// By region name.
    Name,
}

/// `scopeprof diff` options.
#[derive(Args, Debug)]
pub(crate) struct DiffArgs {
    /// The baseline profile.
    pub(crate) base: PathBuf,
    /// The candidate profile.
    pub(crate) cand: PathBuf,
    /// Statistics shown as columns, comma-separated (calls, total, mean, min, max, p50, p95,
    /// p99). The first one other than `calls` is the key that --sort and --threshold use.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "calls,total,mean,p50,p99"
    )]
    pub(crate) metric: Vec<Stat>,
    /// Row order: by absolute change of the key statistic, by absolute change in %, or by name.
    #[arg(long, value_enum, default_value_t = Sort::Delta)]
    pub(crate) sort: Sort,
    /// Only regions whose key statistic changed by at least PCT % either way (new and gone
    /// regions are always shown).
    #[arg(long, value_name = "PCT")]
    pub(crate) threshold: Option<f64>,
    #[command(flatten)]
    pub(crate) select: SelectArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Output::Text)]
    pub(crate) format: Output,
    /// Text: show `base -> cand` for every statistic (about 170 columns) instead of the
    /// candidate's value and its change, which fit 100 columns.
    #[arg(long)]
    pub(crate) wide: bool,
}

/// One region of the comparison.
#[derive(Debug)]
pub(crate) struct Row<'a> {
    pub(crate) name: &'a str,
    pub(crate) base: Option<&'a Region>,
    pub(crate) cand: Option<&'a Region>,
}

impl Row<'_> {
    /// Change of `s` in % (`None` unless both sides have it and the base is not 0).
    pub(crate) fn pct(&self, s: Stat) -> Option<f64> {
        let a = s.value(self.base?)?;
        let b = s.value(self.cand?)?;
        (a != 0.0).then(|| (b - a) / a * 100.0)
    }

    /// Change of `s` in its unit, a missing side counting as 0.
    fn delta(&self, s: Stat) -> Option<f64> {
        let a = self.base.and_then(|r| s.value(r));
        let b = self.cand.and_then(|r| s.value(r));
        (a.is_some() || b.is_some()).then(|| b.unwrap_or(0.0) - a.unwrap_or(0.0))
    }

    pub(crate) fn status(&self) -> &'static str {
        match (self.base, self.cand) {
            (None, _) => "new",
            (_, None) => "gone",
            _ => "common",
        }
    }
}

/// The key statistic: the first one shown other than `calls`.
pub(crate) fn key(metrics: &[Stat]) -> Stat {
    metrics
        .iter()
        .copied()
        .find(|&s| s != Stat::Calls)
        .unwrap_or(Stat::Calls)
}

/// The rows of `base` against `cand`, filtered by `threshold` and ordered by `sort`.
pub(crate) fn rows<'a>(
    base: &'a FileData,
    cand: &'a FileData,
    key: Stat,
    sort: Sort,
    threshold: Option<f64>,
) -> Vec<Row<'a>> {
    let mut names: Vec<&str> = base.regions.iter().map(|r| r.name.as_str()).collect();
    for r in &cand.regions {
        if base.region(&r.name).is_none() {
            names.push(&r.name);
        }
    }
    let mut rows: Vec<Row<'a>> = names
        .into_iter()
        .map(|name| Row {
            name,
            base: base.region(name),
            cand: cand.region(name),
        })
        .filter(|r| match (threshold, r.pct(key)) {
            (Some(t), Some(p)) => p.abs() >= t,
            _ => true,
        })
        .collect();
    rows.sort_by(|a, b| a.name.cmp(b.name));
    let magnitude = |r: &Row<'_>| match sort {
        Sort::Delta => r.delta(key).map_or(-1.0, f64::abs),
        Sort::Pct => r.pct(key).map_or(-1.0, f64::abs),
        Sort::Name => 0.0,
    };
    if sort != Sort::Name {
        rows.sort_by(|a, b| magnitude(b).total_cmp(&magnitude(a)));
    }
    rows
}

/// Notes under the table: what is sampled, what an aggregate file lacks.
pub(crate) fn notes(files: &[&FileData], metrics: &[Stat]) -> Vec<String> {
    let mut notes = Vec::new();
    let pct = |s: &Stat| matches!(s, Stat::P50 | Stat::P95 | Stat::P99);
    for f in files {
        if !f.per_call && metrics.iter().any(pct) {
            notes.push(format!(
                "{}: aggregate layout (per-region totals only): no percentiles",
                f.path.display()
            ));
        }
        if f.sampled() && metrics.iter().any(pct) {
            notes.push(format!(
                "{}: percentiles of regions with more than {} calls are estimated from a \
                 uniform sample of {} calls",
                f.path.display(),
                super::samples::REGION_CAP,
                super::samples::REGION_CAP
            ));
        }
    }
    notes
}

/// Renders the comparison.
pub(crate) fn render(
    base: &FileData,
    cand: &FileData,
    rows: &[Row<'_>],
    metrics: &[Stat],
    format: Output,
    wide: bool,
) -> String {
    if format == Output::Json {
        return json(base, cand, rows, metrics);
    }
    let t = if wide || format == Output::Markdown {
        wide_table(rows, metrics)
    } else {
        narrow_table(rows, metrics)
    };
    let new: Vec<&str> = rows
        .iter()
        .filter(|r| r.base.is_none())
        .map(|r| r.name)
        .collect();
    let gone: Vec<&str> = rows
        .iter()
        .filter(|r| r.cand.is_none())
        .map(|r| r.name)
        .collect();
    let mut out = String::new();
    let md = format == Output::Markdown;
    if md {
        out.push_str("### scopeprof diff\n\n");
    }
    let bullet = if md { "- " } else { "" };
    out.push_str(&format!("{bullet}base: {}\n", base.title));
    out.push_str(&format!("{bullet}cand: {}\n\n", cand.title));
    if rows.is_empty() {
        out.push_str("(no regions to compare)\n");
    } else if md {
        out.push_str(&t.markdown());
    } else {
        out.push_str(&t.text());
        if !wide {
            out.push_str(
                "(each cell: cand's value, change from base; --wide shows base -> cand)\n",
            );
        }
    }
    let mut tail = Vec::new();
    if !new.is_empty() {
        tail.push(format!("new (only in cand): {}", new.join(", ")));
    }
    if !gone.is_empty() {
        tail.push(format!("gone (only in base): {}", gone.join(", ")));
    }
    tail.extend(notes(&[base, cand], metrics));
    if !tail.is_empty() {
        out.push('\n');
        for l in tail {
            out.push_str(&format!("{bullet}{l}\n"));
        }
    }
    out
}

/// `base -> cand` and the change, for every statistic.
fn wide_table(rows: &[Row<'_>], metrics: &[Stat]) -> Table {
    let mut cols: Vec<(String, Align)> = vec![("region".into(), Align::Left)];
    for m in metrics {
        cols.push((format!("{} (base -> cand)", m.name()), Align::Right));
        cols.push(("change".into(), Align::Right));
    }
    let refs: Vec<(&str, Align)> = cols.iter().map(|(s, a)| (s.as_str(), *a)).collect();
    let mut t = Table::new(&refs);
    for r in rows {
        let mut cells = vec![r.name.to_owned()];
        for &m in metrics {
            let a = m.fmt(r.base.and_then(|x| m.value(x)));
            let b = m.fmt(r.cand.and_then(|x| m.value(x)));
            cells.push(format!("{a} -> {b}"));
            cells.push(change(r, m));
        }
        t.row(cells);
    }
    t
}

/// Longest region name in the narrow table (longer ones are cut, with `…`).
const NARROW_NAME: usize = 24;

/// The candidate's value and the change, one column per statistic: the default, in 100
/// columns for the default statistics.
fn narrow_table(rows: &[Row<'_>], metrics: &[Stat]) -> Table {
    let mut cols: Vec<(String, Align)> = vec![("region".into(), Align::Left)];
    for m in metrics {
        cols.push((m.name().to_owned(), Align::Right));
    }
    let refs: Vec<(&str, Align)> = cols.iter().map(|(s, a)| (s.as_str(), *a)).collect();
    let mut t = Table::new(&refs);
    for r in rows {
        let name = if r.name.chars().count() > NARROW_NAME {
            let cut: String = r.name.chars().take(NARROW_NAME - 1).collect();
            cut + "…"
        } else {
            r.name.to_owned()
        };
        let mut cells = vec![name];
        for &m in metrics {
            let side = r.cand.or(r.base);
            let v = m.fmt(side.and_then(|x| m.value(x)));
            let pct = match (r.status(), r.pct(m)) {
                // Three digits are enough past 100 %.
                ("common", Some(p)) if p.abs() >= 100.0 && p.is_finite() => format!("{p:+.0}%"),
                _ => change(r, m),
            };
            cells.push(format!("{v} {pct}"));
        }
        t.row(cells);
    }
    t
}

/// A statistic's change in %, or `new` / `gone`.
fn change(r: &Row<'_>, m: Stat) -> String {
    match r.status() {
        "common" => fmt_pct(r.pct(m)),
        s => s.to_owned(),
    }
}

/// One side's statistics as a JSON object.
fn side_json(r: Option<&Region>) -> String {
    let Some(r) = r else {
        return "null".into();
    };
    let fields: Vec<String> = [
        Stat::Calls,
        Stat::Total,
        Stat::Mean,
        Stat::Min,
        Stat::Max,
        Stat::P50,
        Stat::P95,
        Stat::P99,
    ]
    .iter()
    .map(|&s| {
        let key = if s == Stat::Calls {
            "calls".to_owned()
        } else {
            format!("{}_ns", s.name())
        };
        format!("\"{key}\":{}", json_num(s.value(r)))
    })
    .collect();
    format!("{{{},\"sampled\":{}}}", fields.join(","), r.sampled())
}

fn json(base: &FileData, cand: &FileData, rows: &[Row<'_>], metrics: &[Stat]) -> String {
    let names: Vec<String> = metrics
        .iter()
        .map(|m| format!("\"{}\"", m.name()))
        .collect();
    let rows: Vec<String> = rows
        .iter()
        .map(|r| {
            let change: Vec<String> = metrics
                .iter()
                .map(|&m| format!("\"{}\":{}", m.name(), json_num(r.pct(m))))
                .collect();
            format!(
                "{{\"name\":{},\"status\":\"{}\",\"base\":{},\"cand\":{},\"change_pct\":{{{}}}}}",
                json_str(r.name),
                r.status(),
                side_json(r.base),
                side_json(r.cand),
                change.join(",")
            )
        })
        .collect();
    let notes: Vec<String> = notes(&[base, cand], metrics)
        .iter()
        .map(|n| json_str(n))
        .collect();
    format!(
        "{{\"base\":{},\"cand\":{},\"metrics\":[{}],\"key\":\"{}\",\"regions\":[{}],\"notes\":[{}]}}\n",
        json_str(&base.path.display().to_string()),
        json_str(&cand.path.display().to_string()),
        names.join(","),
        key(metrics).name(),
        rows.join(","),
        notes.join(",")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region(name: &str, calls: u64, mean: f64, sample: Option<Vec<f64>>) -> Region {
        Region {
            name: name.into(),
            calls,
            total_ns: calls as f64 * mean,
            min_ns: mean as i64,
            max_ns: mean as i64,
            sample,
        }
    }

    fn file(regions: Vec<Region>) -> FileData {
        FileData {
            path: "f.h5".into(),
            title: "f.h5".into(),
            per_call: regions.iter().all(|r| r.sample.is_some()),
            regions,
        }
    }

    #[test]
    fn rows_compare_sort_and_filter() {
        let base = file(vec![
            region("a", 10, 100.0, Some(vec![100.0; 10])),
            region("b", 10, 1000.0, Some(vec![1000.0; 10])),
            region("gone", 1, 5.0, Some(vec![5.0])),
        ]);
        let cand = file(vec![
            region("a", 10, 150.0, Some(vec![150.0; 10])),
            region("b", 10, 1100.0, Some(vec![1100.0; 10])),
            region("new", 2, 7.0, Some(vec![7.0; 2])),
        ]);
        let r = rows(&base, &cand, Stat::Total, Sort::Delta, None);
        let names: Vec<&str> = r.iter().map(|r| r.name).collect();
        // |delta total|: b 1000, a 500, new 14, gone 5.
        assert_eq!(names, ["b", "a", "new", "gone"]);
        assert_eq!(r[1].pct(Stat::Mean), Some(50.0));
        assert_eq!(r[0].pct(Stat::P50), Some(10.0));
        assert_eq!(r[2].status(), "new");
        assert_eq!(r[3].status(), "gone");
        let r = rows(&base, &cand, Stat::Total, Sort::Pct, None);
        assert_eq!(r[0].name, "a");
        let r = rows(&base, &cand, Stat::Total, Sort::Name, Some(20.0));
        let names: Vec<&str> = r.iter().map(|r| r.name).collect();
        assert_eq!(names, ["a", "gone", "new"]);
        assert_eq!(key(&[Stat::Calls, Stat::P99]), Stat::P99);
    }

    #[test]
    fn aggregate_files_have_no_percentiles() {
        let base = file(vec![region("a", 4, 10.0, None)]);
        let cand = file(vec![region("a", 4, 12.0, None)]);
        let r = rows(&base, &cand, Stat::Mean, Sort::Name, None);
        assert_eq!(r[0].pct(Stat::Mean), Some(20.0));
        assert_eq!(r[0].pct(Stat::P50), None);
        let text = render(
            &base,
            &cand,
            &r,
            &[Stat::Mean, Stat::P50],
            Output::Text,
            true,
        );
        assert!(text.contains("10 ns -> 12 ns"), "{text}");
        assert!(text.contains("- -> -"), "{text}");
        assert!(text.contains("aggregate layout"), "{text}");
        let narrow = render(
            &base,
            &cand,
            &r,
            &[Stat::Mean, Stat::P50],
            Output::Text,
            false,
        );
        assert!(narrow.contains("12 ns +20.0%"), "{narrow}");
        let json = render(
            &base,
            &cand,
            &r,
            &[Stat::Mean, Stat::P50],
            Output::Json,
            false,
        );
        assert!(
            json.contains("\"change_pct\":{\"mean\":20,\"p50\":null}"),
            "{json}"
        );
    }
}

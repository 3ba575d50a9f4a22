//! How `scopeprof check` reports: the rule in one line, one row per region, then each
//! failing or inconclusive region's estimate, interval and reason, and the result.

use scope_profiler::read::json_str;

use super::check::{Checked, Verdict};
use super::table::{fmt_ns, fmt_pct, json_num, Align, Output, Table};

/// PASS, FAIL or INCONCLUSIVE, from the exit status.
fn result(c: &Checked) -> &'static str {
    match c.exit {
        0 => "PASS",
        1 => "FAIL",
        _ => "INCONCLUSIVE",
    }
}

/// How the intervals were made, in one line.
fn mode(c: &Checked) -> String {
    if c.base.len() == 1 && c.cand.len() == 1 {
        let how = if c.metric.name() == "p50" {
            "Mann-Whitney bound on the Hodges-Lehmann shift of the log durations"
        } else {
            "normal bootstrap interval of ln(statistic)"
        };
        format!("one file per side: per-call samples, {how}")
    } else {
        format!(
            "{} base and {} candidate runs: between-run Student t on each run's ln({})",
            c.base.len(),
            c.cand.len(),
            c.metric.name()
        )
    }
}

fn files(f: &[std::path::PathBuf]) -> String {
    f.iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// A percentage without trailing zeros (`99.5`, `99.75`).
fn pct_plain(x: f64) -> String {
    let s = format!("{:.4}", x * 100.0);
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// The rule, the method and the files, one line each.
fn header(c: &Checked, bullet: &str) -> String {
    format!(
        "{bullet}rule: a region regressed when the {}% one-sided lower bound of its change in {} \
         exceeds {:+.1}% (confidence {} over {} tested region(s), Bonferroni)\n\
         {bullet}method: {}\n{bullet}base: {}\n{bullet}cand: {}\n\n",
        pct_plain(c.level),
        c.metric.name(),
        c.budget_pct,
        c.confidence,
        c.tested,
        mode(c),
        files(&c.base),
        files(&c.cand)
    )
}

/// One row per region.
fn table(c: &Checked, md: bool) -> String {
    if c.outcomes.is_empty() {
        return "(no regions to compare)\n".into();
    }
    let metric = c.metric.name();
    let mut t = Table::new(&[
        ("region", Align::Left),
        ("calls (base/cand)", Align::Right),
        (&format!("{metric} (base -> cand)"), Align::Right),
        ("change", Align::Right),
        ("lower bound", Align::Right),
        ("verdict", Align::Left),
    ]);
    for o in &c.outcomes {
        let v = |x: Option<f64>| x.map_or("-".to_owned(), fmt_ns);
        t.row(vec![
            o.name.clone(),
            format!("{}/{}", o.calls.0, o.calls.1),
            format!("{} -> {}", v(o.values.0), v(o.values.1)),
            fmt_pct(o.change.map(|x| x * 100.0)),
            fmt_pct(o.lower.map(|x| x * 100.0)),
            o.verdict.word().to_owned(),
        ]);
    }
    if md {
        t.markdown()
    } else {
        t.text()
    }
}

/// A line per regressed or inconclusive region (estimate, interval, why), then the notes.
fn reasons(c: &Checked, bullet: &str) -> String {
    let mut out = String::new();
    for o in &c.outcomes {
        if !matches!(o.verdict, Verdict::Regressed | Verdict::Inconclusive) {
            continue;
        }
        let method = if o.method == "-" {
            String::new()
        } else {
            format!(" ({})", o.method)
        };
        let interval = match o.lower {
            Some(l) => format!(" [interval {}, +inf)", fmt_pct(Some(l * 100.0))),
            None => String::new(),
        };
        out.push_str(&format!(
            "{bullet}{}: {}{method}{interval}: {}\n",
            o.name,
            o.verdict.word(),
            o.why
        ));
    }
    for n in &c.notes {
        out.push_str(&format!("{bullet}note: {n}\n"));
    }
    if out.is_empty() {
        out
    } else {
        format!("\n{out}")
    }
}

/// The check as text, Markdown or JSON.
pub(crate) fn render(c: &Checked, format: Output) -> String {
    if format == Output::Json {
        return json(c);
    }
    let md = format == Output::Markdown;
    let bullet = if md { "- " } else { "" };
    let mut out = String::new();
    if md {
        out.push_str(&format!("### scopeprof check: {}\n\n", result(c)));
    }
    out.push_str(&header(c, bullet));
    out.push_str(&table(c, md));
    out.push_str(&reasons(c, bullet));
    let count = |v: Verdict| c.outcomes.iter().filter(|o| o.verdict == v).count();
    let bold = if md { "**" } else { "" };
    out.push_str(&format!(
        "\n{bold}{}: {} regressed, {} inconclusive, {} ok, {} new, {} gone{bold}\n",
        result(c),
        count(Verdict::Regressed),
        count(Verdict::Inconclusive),
        count(Verdict::Ok),
        count(Verdict::New),
        count(Verdict::Gone),
    ));
    out
}

fn json(c: &Checked) -> String {
    let paths = |f: &[std::path::PathBuf]| -> String {
        f.iter()
            .map(|p| json_str(&p.display().to_string()))
            .collect::<Vec<_>>()
            .join(",")
    };
    let regions: Vec<String> = c
        .outcomes
        .iter()
        .map(|o| {
            format!(
                "{{\"name\":{},\"verdict\":\"{}\",\"calls_base\":{},\"calls_cand\":{},\
                 \"base_ns\":{},\"cand_ns\":{},\"change_pct\":{},\"lower_pct\":{},\
                 \"method\":{},\"why\":{}}}",
                json_str(&o.name),
                o.verdict.word().to_lowercase(),
                o.calls.0,
                o.calls.1,
                json_num(o.values.0),
                json_num(o.values.1),
                json_num(o.change.map(|x| x * 100.0)),
                json_num(o.lower.map(|x| x * 100.0)),
                json_str(&o.method),
                json_str(&o.why)
            )
        })
        .collect();
    let notes: Vec<String> = c.notes.iter().map(|n| json_str(n)).collect();
    format!(
        "{{\"result\":\"{}\",\"exit\":{},\"metric\":\"{}\",\"budget_pct\":{},\"confidence\":{},\
         \"tested\":{},\"level\":{},\"mode\":{},\"base\":[{}],\"cand\":[{}],\"regions\":[{}],\
         \"notes\":[{}]}}\n",
        result(c).to_lowercase(),
        c.exit,
        c.metric.name(),
        json_num(Some(c.budget_pct)),
        json_num(Some(c.confidence)),
        c.tested,
        json_num(Some(c.level)),
        json_str(&mode(c)),
        paths(&c.base),
        paths(&c.cand),
        regions.join(","),
        notes.join(",")
    )
}

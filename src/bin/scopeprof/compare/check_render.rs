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
    out.push_str(&format!(
        "{bullet}rule: a region regressed when the {:.4}% one-sided lower bound of its change \
         in {} exceeds {:+.1}% (confidence {} over {} tested region(s), Bonferroni)\n",
        c.level * 100.0,
        c.metric.name(),
        c.budget_pct,
        c.confidence,
        c.tested
    ));
    out.push_str(&format!("{bullet}method: {}\n", mode(c)));
    out.push_str(&format!("{bullet}base: {}\n", files(&c.base)));
    out.push_str(&format!("{bullet}cand: {}\n\n", files(&c.cand)));
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
    if c.outcomes.is_empty() {
        out.push_str("(no regions to compare)\n");
    } else if md {
        out.push_str(&t.markdown());
    } else {
        out.push_str(&t.text());
    }
    let told: Vec<String> = c
        .outcomes
        .iter()
        .filter(|o| matches!(o.verdict, Verdict::Regressed | Verdict::Inconclusive))
        .map(|o| {
            let interval = match o.lower {
                Some(l) => format!(" [interval {}, +inf)", fmt_pct(Some(l * 100.0))),
                None => String::new(),
            };
            format!(
                "{bullet}{}: {} ({}){interval}: {}\n",
                o.name,
                o.verdict.word(),
                o.method,
                o.why
            )
        })
        .collect();
    if !told.is_empty() || !c.notes.is_empty() {
        out.push('\n');
    }
    for l in told {
        out.push_str(&l);
    }
    for n in &c.notes {
        out.push_str(&format!("{bullet}note: {n}\n"));
    }
    let count = |v: Verdict| c.outcomes.iter().filter(|o| o.verdict == v).count();
    out.push_str(&format!(
        "\n{}{}: {} regressed, {} inconclusive, {} ok, {} new, {} gone\n",
        if md { "**" } else { "" },
        result(c),
        count(Verdict::Regressed),
        count(Verdict::Inconclusive),
        count(Verdict::Ok),
        count(Verdict::New),
        count(Verdict::Gone),
    ));
    if md {
        // Close the bold result line.
        let trimmed = out.trim_end().to_owned();
        out = trimmed + "**\n";
    }
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

//! The report page: one self-contained HTML file (the style sheet, the SVG pictures and a
//! small script inline; no network, no external font or image), and its tables.

use std::fmt::Write;

use super::scan::SlowCall;
use super::tree::Row;
use crate::compare::diff::{self, Stat};
use crate::compare::samples::Region;
use crate::compare::table::{fmt_ns, fmt_pct};
use crate::items::Tracks;

const CSS: &str = include_str!("page.css");
const JS: &str = include_str!("page.js");

/// `s` escaped for HTML text and attribute values.
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A paragraph saying what the reader should know about a section (sampling, limits).
pub(crate) fn note(text: &str) -> String {
    format!("<p class=\"note\">{}</p>", esc(text))
}

/// The page being built.
#[derive(Debug, Default)]
pub(crate) struct Page {
    title: String,
    facts: Vec<(String, String)>,
    sections: Vec<(String, String, String)>,
}

impl Page {
    pub(crate) fn new(title: &str) -> Page {
        Page {
            title: title.to_owned(),
            ..Page::default()
        }
    }

    /// A line of the header (`key: value`).
    pub(crate) fn fact(&mut self, key: &str, value: String) {
        self.facts.push((key.to_owned(), value));
    }

    /// A section with an id (for the navigation), a heading and its HTML.
    pub(crate) fn section(&mut self, id: &str, heading: &str, body: String) {
        self.sections
            .push((id.to_owned(), heading.to_owned(), body));
    }

    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        let _ = write!(
            out,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
             <link rel=\"icon\" href=\"data:,\"><title>{}</title><style>{CSS}</style></head>\
             <body><header><h1>{}</h1><dl>",
            esc(&self.title),
            esc(&self.title)
        );
        for (k, v) in &self.facts {
            let _ = write!(out, "<dt>{}</dt><dd>{}</dd>", esc(k), esc(v));
        }
        out.push_str("</dl><nav>");
        for (id, heading, _) in &self.sections {
            let _ = write!(out, "<a href=\"#{id}\">{}</a>", esc(heading));
        }
        out.push_str("</nav></header><main>");
        for (id, heading, body) in &self.sections {
            let _ = write!(
                out,
                "<section id=\"{id}\"><h2>{}</h2>{body}</section>",
                esc(heading)
            );
        }
        let _ = writeln!(
            out,
            "</main><footer>Written by scopeprof {} (scope-profiler). One self-contained file: \
             it loads nothing from the network.</footer><script>{JS}</script></body></html>",
            env!("CARGO_PKG_VERSION")
        );
        out
    }
}

/// The call tree as a table: one row per call path, indented by depth.
pub(crate) fn tree_table(rows: &[Row], names: &[String], total: u64) -> String {
    let mut out = String::from(
        "<table class=\"tree\"><thead><tr><th>region (call path)</th><th>calls</th>\
         <th>total</th><th>self (exclusive)</th><th>mean</th><th>% of total</th></tr></thead>\
         <tbody>",
    );
    for r in rows {
        let name = names.get(r.frame as usize).map_or("?", String::as_str);
        let share = r.inclusive as f64 / total.max(1) as f64 * 100.0;
        let _ = write!(
            out,
            "<tr><td class=\"name\" style=\"padding-left:{}em\"><span class=\"sw\" \
             style=\"background:{}\"></span>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td><span class=\"bar\" style=\"width:{:.1}%\"></span>{share:.1}%</td></tr>",
            0.4 + r.depth as f64 * 1.2,
            super::svg::color(name, false),
            esc(name),
            r.calls,
            fmt_ns(r.inclusive as f64),
            fmt_ns(r.exclusive as f64),
            fmt_ns(r.inclusive as f64 / r.calls.max(1) as f64),
            share.min(100.0),
        );
    }
    out.push_str("</tbody></table>");
    out
}

/// The per-region table of an aggregate file (no call tree).
pub(crate) fn flat_table(regions: &[Region]) -> String {
    let mut rs: Vec<&Region> = regions.iter().collect();
    rs.sort_by(|a, b| b.total_ns.total_cmp(&a.total_ns));
    let mut out = String::from(
        "<table class=\"tree\"><thead><tr><th>region</th><th>calls</th><th>total</th>\
         <th>mean</th><th>min</th><th>max</th></tr></thead><tbody>",
    );
    for r in rs {
        let _ = write!(
            out,
            "<tr><td class=\"name\"><span class=\"sw\" style=\"background:{}\"></span>{}</td>\
             <td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            super::svg::color(&r.name, false),
            esc(&r.name),
            r.calls,
            fmt_ns(r.total_ns),
            fmt_ns(r.mean_ns()),
            fmt_ns(r.min_ns as f64),
            fmt_ns(r.max_ns as f64)
        );
    }
    out.push_str("</tbody></table>");
    out
}

/// The class of a change cell: red shades for slower, green for faster.
fn change_class(pct: Option<f64>) -> &'static str {
    match pct {
        Some(p) if p >= 50.0 => "up3",
        Some(p) if p >= 10.0 => "up2",
        Some(p) if p >= 2.0 => "up1",
        Some(p) if p <= -50.0 => "down3",
        Some(p) if p <= -10.0 => "down2",
        Some(p) if p <= -2.0 => "down1",
        _ => "same",
    }
}

/// The diff table of `report BASE CAND`, change cells colored.
pub(crate) fn diff_table(rows: &[diff::Row<'_>], metrics: &[Stat]) -> String {
    let mut out = String::from("<table class=\"diff\"><thead><tr><th>region</th>");
    for m in metrics {
        let _ = write!(
            out,
            "<th>{0} base</th><th>{0} cand</th><th>change</th>",
            m.name()
        );
    }
    out.push_str("</tr></thead><tbody>");
    for r in rows {
        let _ = write!(out, "<tr><td class=\"name\">{}</td>", esc(r.name));
        for &m in metrics {
            let v = |x: Option<&Region>| match (m, x.and_then(|x| m.value(x))) {
                (_, None) => "-".to_owned(),
                (Stat::Calls, Some(v)) => format!("{v:.0}"),
                (_, Some(v)) => fmt_ns(v),
            };
            let pct = r.pct(m);
            let change = match r.status() {
                "common" => fmt_pct(pct),
                s => s.to_owned(),
            };
            let class = if r.status() == "common" {
                change_class(pct)
            } else {
                "status"
            };
            let _ = write!(
                out,
                "<td>{}</td><td>{}</td><td class=\"{class}\">{}</td>",
                v(r.base),
                v(r.cand),
                esc(&change)
            );
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>");
    out
}

/// The slowest calls with their polls and await time.
pub(crate) fn slow_table(
    slow: &[SlowCall],
    tracks: &Tracks,
    origin: i64,
    has_polls: bool,
) -> String {
    let mut out = String::from(
        "<table class=\"slow\"><thead><tr><th>region</th><th>lane</th><th>start</th>\
         <th>duration</th><th>polls</th><th>busy (in polls)</th><th>await</th>\
         <th>polls over the call</th></tr></thead><tbody>",
    );
    for s in slow {
        let c = &s.call;
        let dur = c.end - c.start;
        let name = tracks
            .names
            .get(c.name as usize)
            .map_or("?", String::as_str);
        let lane = tracks.tracks[c.track as usize].label();
        let (polls, busy, wait, bar) = if has_polls && s.polls > 0 {
            (
                s.polls.to_string(),
                fmt_ns(s.busy_ns as f64),
                fmt_ns((dur - s.busy_ns).max(0) as f64),
                super::svg::poll_bar((c.start, c.end), &s.drawn, 240.0),
            )
        } else {
            ("-".into(), "-".into(), "-".into(), String::new())
        };
        let _ = write!(
            out,
            "<tr><td class=\"name\">{}</td><td>{}</td><td>+{}</td><td>{}</td><td>{polls}</td>\
             <td>{busy}</td><td>{wait}</td><td>{bar}</td></tr>",
            esc(name),
            esc(&lane),
            fmt_ns((c.start - origin) as f64),
            fmt_ns(dur as f64),
        );
    }
    out.push_str("</tbody></table>");
    out
}

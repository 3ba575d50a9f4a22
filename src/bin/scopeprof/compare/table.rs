//! The tables `diff` and `check` print: aligned plain text for a terminal, GitHub-flavoured
//! Markdown for a CI job's summary, and the number formats both use.

use clap::ValueEnum;

/// Output formats of `diff` and `check`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Output {
    /// Aligned columns for a terminal or a log.
    Text,
    /// A GitHub-flavoured Markdown table (for `$GITHUB_STEP_SUMMARY`).
    Markdown,
    /// One JSON object with every number (durations in ns).
    Json,
}

/// Column alignment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Align {
    Left,
    Right,
}

/// A table of text cells.
#[derive(Debug)]
pub(crate) struct Table {
    headers: Vec<String>,
    align: Vec<Align>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub(crate) fn new(columns: &[(&str, Align)]) -> Table {
        Table {
            headers: columns.iter().map(|c| c.0.to_owned()).collect(),
            align: columns.iter().map(|c| c.1).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row (missing cells are empty).
    pub(crate) fn row(&mut self, mut cells: Vec<String>) {
        cells.resize(self.headers.len(), String::new());
        self.rows.push(cells);
    }

    /// Aligned columns, two spaces apart, the header underlined.
    pub(crate) fn text(&self) -> String {
        let width = |i: usize| {
            self.rows
                .iter()
                .map(|r| r[i].chars().count())
                .chain(std::iter::once(self.headers[i].chars().count()))
                .max()
                .unwrap_or(0)
        };
        let widths: Vec<usize> = (0..self.headers.len()).map(width).collect();
        let line = |cells: &[String]| {
            let mut s = String::new();
            for (i, c) in cells.iter().enumerate() {
                let pad = widths[i] - c.chars().count();
                if i > 0 {
                    s.push_str("  ");
                }
                match self.align[i] {
                    Align::Left => {
                        s.push_str(c);
                        s.extend(std::iter::repeat_n(' ', pad));
                    }
                    Align::Right => {
                        s.extend(std::iter::repeat_n(' ', pad));
                        s.push_str(c);
                    }
                }
            }
            s.trim_end().to_owned() + "\n"
        };
        let mut out = line(&self.headers);
        let rule: Vec<String> = widths.iter().map(|&w| "-".repeat(w)).collect();
        out.push_str(&line(&rule));
        for r in &self.rows {
            out.push_str(&line(r));
        }
        out
    }

    /// A Markdown table (cells escaped).
    pub(crate) fn markdown(&self) -> String {
        let line = |cells: &[String]| {
            let cells: Vec<String> = cells.iter().map(|c| md_escape(c)).collect();
            format!("| {} |\n", cells.join(" | "))
        };
        let mut out = line(&self.headers);
        let rule: Vec<String> = self
            .align
            .iter()
            .map(|a| match a {
                Align::Left => ":---".to_owned(),
                Align::Right => "---:".to_owned(),
            })
            .collect();
        out.push_str(&format!("|{}|\n", rule.join("|")));
        for r in &self.rows {
            out.push_str(&line(r));
        }
        out
    }
}

/// `s` safe inside a Markdown table cell.
pub(crate) fn md_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '|' | '\\' | '*' | '_' | '`' | '<' | '[' | ']' => {
                out.push('\\');
                out.push(c);
            }
            '\n' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// A duration in ns with three significant digits and a unit (`842 ns`, `19.1 us`, `3.20 s`).
pub(crate) fn fmt_ns(ns: f64) -> String {
    if !ns.is_finite() {
        return "-".into();
    }
    let three = |x: f64, unit: &str| {
        if x.abs() >= 100.0 {
            format!("{x:.0} {unit}")
        } else if x.abs() >= 10.0 {
            format!("{x:.1} {unit}")
        } else {
            format!("{x:.2} {unit}")
        }
    };
    let a = ns.abs();
    if a < 1e3 {
        format!("{ns:.0} ns")
    } else if a < 1e6 {
        three(ns / 1e3, "us")
    } else if a < 1e9 {
        three(ns / 1e6, "ms")
    } else {
        three(ns / 1e9, "s")
    }
}

/// A signed percentage (`+12.3%`), `-` when unknown.
pub(crate) fn fmt_pct(pct: Option<f64>) -> String {
    match pct {
        Some(p) if p.is_finite() => format!("{p:+.1}%"),
        Some(p) if p == f64::NEG_INFINITY => "-inf".into(),
        _ => "-".into(),
    }
}

/// A number as JSON (`null` when not finite).
pub(crate) fn json_num(x: Option<f64>) -> String {
    match x {
        Some(x) if x.is_finite() => {
            if x == x.trunc() && x.abs() < 1e15 {
                format!("{}", x as i64)
            } else {
                format!("{x}")
            }
        }
        _ => "null".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_and_escape() {
        let mut t = Table::new(&[("region", Align::Left), ("calls", Align::Right)]);
        t.row(vec!["kernel".into(), "300".into()]);
        t.row(vec!["a|b".into(), "5".into()]);
        assert_eq!(
            t.text(),
            "region  calls\n------  -----\nkernel    300\na|b         5\n"
        );
        assert_eq!(
            t.markdown(),
            "| region | calls |\n|:---|---:|\n| kernel | 300 |\n| a\\|b | 5 |\n"
        );
    }

    #[test]
    fn numbers_have_units_and_signs() {
        assert_eq!(fmt_ns(842.0), "842 ns");
        assert_eq!(fmt_ns(19_123.0), "19.1 us");
        assert_eq!(fmt_ns(3_204_000_000.0), "3.20 s");
        assert_eq!(fmt_ns(123_456_789.0), "123 ms");
        assert_eq!(fmt_pct(Some(12.345)), "+12.3%");
        assert_eq!(fmt_pct(Some(-0.04)), "-0.0%");
        assert_eq!(fmt_pct(None), "-");
        assert_eq!(json_num(Some(3.0)), "3");
        assert_eq!(json_num(Some(0.5)), "0.5");
        assert_eq!(json_num(Some(f64::NAN)), "null");
    }
}

//! Comparing runs: `scopeprof diff` (a table of per-region statistics, base against
//! candidate) and `scopeprof check` (a noise-aware regression gate for CI).
//!
//! Both read each file once, streaming its durations column (`samples`): exact calls,
//! total, min and max per region, plus a capped uniform sample of the per-call durations for
//! percentiles and the statistical test. `diff` renders rows (`diff`, `table`); `check`
//! applies the decision rule (`check`) built on the bounds of `interval` and the small
//! numerical tools of `stats`. Nothing here writes a file.

pub(crate) mod check;
mod check_args;
mod check_render;
pub(crate) mod diff;
pub(crate) mod interval;
pub(crate) mod samples;
pub(crate) mod stats;
pub(crate) mod table;

use std::io::Write;

use clap::Args;
use regex::Regex;

use self::check::CheckArgs;
use self::diff::DiffArgs;

/// Prints `text` to stdout (a closed pipe is not an error of the files).
fn print(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}

/// `scopeprof diff` (in the reading child).
pub(crate) fn run_diff(a: &DiffArgs) -> Result<(), String> {
    let select = Select::new(&a.select)?;
    let base = samples::read(&a.base, &select)?;
    let cand = samples::read(&a.cand, &select)?;
    let metrics = if a.metric.is_empty() {
        vec![diff::Stat::Total]
    } else {
        a.metric.clone()
    };
    let rows = diff::rows(&base, &cand, diff::key(&metrics), a.sort, a.threshold);
    print(&diff::render(
        &base, &cand, &rows, &metrics, a.format, a.wide,
    ));
    Ok(())
}

/// `scopeprof check` (in the reading child): the exit status.
pub(crate) fn run_check(a: &CheckArgs) -> Result<u8, String> {
    let checked = check::run(a)?;
    print(&check_render::render(&checked, a.format));
    Ok(checked.exit)
}

/// Which regions and ranks are compared (shared by `diff`, `check` and `report`).
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct SelectArgs {
    /// Only regions whose name matches this regular expression at its start (as Python's
    /// `re.match`); repeat for several (any may match).
    #[arg(long, value_name = "REGEX")]
    pub(crate) include: Vec<String>,
    /// Leave out regions whose name matches this regular expression at its start; repeat
    /// for several.
    #[arg(long, value_name = "REGEX")]
    pub(crate) exclude: Vec<String>,
    /// Only these MPI ranks, e.g. `0,2` or `0-3` (repeatable).
    #[arg(long, value_name = "RANKS", value_delimiter = ',')]
    pub(crate) ranks: Vec<String>,
}

/// The compiled selection.
#[derive(Debug, Clone, Default)]
pub(crate) struct Select {
    include: Vec<Regex>,
    exclude: Vec<Regex>,
    ranks: Option<Vec<(u32, u32)>>,
}

impl Select {
    /// Compiles the patterns and rank ranges; the error names the bad one.
    pub(crate) fn new(a: &SelectArgs) -> Result<Select, String> {
        let compile = |p: &String| {
            Regex::new(&format!("^(?:{p})")).map_err(|e| {
                // The parser's message spans lines (pattern, caret, reason): keep the reason.
                let text = e.to_string();
                let reason = text
                    .lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("");
                let reason = reason.trim().trim_start_matches("error: ");
                format!("bad region pattern `{p}`: {reason}")
            })
        };
        let mut ranks = Vec::new();
        for spec in a.ranks.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
            let bad = || format!("bad rank `{spec}`: expected N or N-M");
            let (lo, hi) = match spec.split_once('-') {
                Some((a, b)) => (a.trim().parse(), b.trim().parse()),
                None => (spec.parse(), spec.parse()),
            };
            let (lo, hi): (u32, u32) = (lo.map_err(|_| bad())?, hi.map_err(|_| bad())?);
            if lo > hi {
                return Err(bad());
            }
            ranks.push((lo, hi));
        }
        Ok(Select {
            include: a.include.iter().map(compile).collect::<Result<_, _>>()?,
            exclude: a.exclude.iter().map(compile).collect::<Result<_, _>>()?,
            ranks: (!ranks.is_empty()).then_some(ranks),
        })
    }

    /// Whether region `name` is compared.
    pub(crate) fn name(&self, name: &str) -> bool {
        (self.include.is_empty() || self.include.iter().any(|r| r.is_match(name)))
            && !self.exclude.iter().any(|r| r.is_match(name))
    }

    /// Whether calls of `rank` are counted.
    pub(crate) fn rank(&self, rank: u32) -> bool {
        self.ranks
            .as_ref()
            .is_none_or(|r| r.iter().any(|&(lo, hi)| (lo..=hi).contains(&rank)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_at_the_start_and_ranks_take_ranges() {
        let s = Select::new(&SelectArgs {
            include: vec!["ker".into(), "st.*y$".into()],
            exclude: vec!["kernel_x".into()],
            ranks: vec!["0".into(), "2-3".into()],
        })
        .unwrap();
        assert!(s.name("kernel"));
        assert!(s.name("steady"));
        assert!(!s.name("a_kernel"), "re.match anchors at the start only");
        assert!(!s.name("kernel_x1"));
        assert!(!s.name("steady2"));
        assert!(s.rank(0) && s.rank(2) && s.rank(3));
        assert!(!s.rank(1) && !s.rank(4));
        assert!(Select::default().rank(7) && Select::default().name("x"));
        let bad = |a: SelectArgs| Select::new(&a).unwrap_err();
        assert!(bad(SelectArgs {
            include: vec!["(".into()],
            ..Default::default()
        })
        .contains("bad region pattern `(`"));
        assert!(bad(SelectArgs {
            ranks: vec!["3-1".into()],
            ..Default::default()
        })
        .contains("bad rank `3-1`"));
        assert!(bad(SelectArgs {
            ranks: vec!["x".into()],
            ..Default::default()
        })
        .contains("bad rank"));
    }
}

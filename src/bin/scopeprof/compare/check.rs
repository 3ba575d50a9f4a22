//! `scopeprof check`: the regression gate and its decision rule (the same text is the
//! command's `--help`, [`RULE`], and `docs/compare.md`).
//!
//! Every region present on both sides is classified once: not comparable (missing from
//! some runs, fewer than [`MIN_CALLS`] calls on a side: *inconclusive*), compared plainly
//! (no per-call data: the reference's rule), or *tested*. The tested regions share the
//! error budget (Bonferroni), and each one's bound comes from `interval`.

use std::collections::HashMap;
use std::path::PathBuf;

pub(crate) use super::check_args::{CheckArgs, Tested, RULE};
use super::interval::{self, ln_ns, Bound};
use super::samples::{self, FileData, Region};
use super::stats::{normal_quantile, seed, Rng};
use super::Select;

/// Fewer calls than this on either side make a region inconclusive.
pub(crate) const MIN_CALLS: u64 = 30;

/// The region that times the whole run (one call per file): never checked.
pub(crate) const SESSION: &str = "scope_profiler.session";

/// What became of a region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    Ok,
    Regressed,
    Inconclusive,
    New,
    Gone,
}

impl Verdict {
    pub(crate) fn word(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::Regressed => "REGRESSED",
            Verdict::Inconclusive => "inconclusive",
            Verdict::New => "new",
            Verdict::Gone => "gone",
        }
    }
}

/// One region's outcome.
#[derive(Clone, Debug)]
pub(crate) struct Outcome {
    pub(crate) name: String,
    pub(crate) verdict: Verdict,
    /// Calls on each side (all runs).
    pub(crate) calls: (u64, u64),
    /// The statistic on each side (ns; the geometric mean over runs with several).
    pub(crate) values: (Option<f64>, Option<f64>),
    /// Estimated change (fraction, 0.1 = +10 %).
    pub(crate) change: Option<f64>,
    /// Lower confidence bound of the change (fraction).
    pub(crate) lower: Option<f64>,
    /// How the change was judged.
    pub(crate) method: String,
    /// Why this verdict, in one sentence.
    pub(crate) why: String,
}

/// One run's facts about one region.
#[derive(Clone, Debug)]
struct RunStat {
    calls: u64,
    total: f64,
    /// ln of the tested statistic (per-call data only).
    ln_value: Option<f64>,
    /// Variance of `ln_value` within the run (bootstrap).
    within: f64,
}

/// A side: its files, and per file the regions' facts (and, with one file, its samples).
struct Side {
    files: Vec<PathBuf>,
    per_call: bool,
    runs: Vec<HashMap<String, RunStat>>,
    single: Option<FileData>,
}

/// The whole check, ready to render.
#[derive(Debug)]
pub(crate) struct Checked {
    pub(crate) metric: Tested,
    pub(crate) budget_pct: f64,
    pub(crate) confidence: f64,
    pub(crate) base: Vec<PathBuf>,
    pub(crate) cand: Vec<PathBuf>,
    pub(crate) tested: usize,
    /// One-sided level of each tested region's bound.
    pub(crate) level: f64,
    pub(crate) outcomes: Vec<Outcome>,
    pub(crate) notes: Vec<String>,
    pub(crate) exit: u8,
}

/// How a side's files are read: the statistic, the side's name (for the seeds), and whether
/// the within-run variance is needed (only between runs).
#[derive(Clone, Copy)]
struct Reading<'a> {
    metric: Tested,
    side: &'a str,
    within: bool,
}

/// The within-run facts of `r`, the `index`-th file of its side.
fn run_stat(r: &Region, how: Reading<'_>, index: usize) -> RunStat {
    let metric = how.metric;
    let (ln_value, within) = match &r.sample {
        Some(s) if !s.is_empty() => {
            let stat = metric.per_call();
            let value = match metric {
                Tested::Total => r.total_ns,
                _ => stat.of(&mut s.clone()),
            };
            let se = if how.within {
                let mut rng = Rng::new(seed(&[&r.name, how.side, &index.to_string()]));
                interval::bootstrap_log_se(s, stat, &mut rng)
            } else {
                0.0
            };
            (Some(ln_ns(value)), se * se)
        }
        _ => (None, 0.0),
    };
    RunStat {
        calls: r.calls,
        total: r.total_ns,
        ln_value,
        within,
    }
}

/// Reads a side's files; with one file per side its samples are kept for the test, with
/// more each file is reduced to its facts as it is read (one file's samples at a time).
fn read_side(files: &[PathBuf], select: &Select, how: Reading<'_>) -> Result<Side, String> {
    let mut out = Side {
        files: files.to_vec(),
        per_call: true,
        runs: Vec::new(),
        single: None,
    };
    for (i, f) in files.iter().enumerate() {
        let data = samples::read(f, select)?;
        out.per_call &= data.per_call;
        let facts = data
            .regions
            .iter()
            .filter(|r| r.name != SESSION)
            .map(|r| (r.name.clone(), run_stat(r, how, i)))
            .collect();
        out.runs.push(facts);
        if !how.within {
            out.single = Some(data);
        }
    }
    Ok(out)
}

/// Runs the check: reads every file, classifies every region, returns the outcome.
pub(crate) fn run(a: &CheckArgs) -> Result<Checked, String> {
    a.validate()?;
    let (base_files, cand_files) = a.sides()?;
    let select = Select::new(&a.select)?;
    let within = base_files.len() + cand_files.len() > 2;
    let how = |side| Reading {
        metric: a.metric,
        side,
        within,
    };
    let base = read_side(&base_files, &select, how("base"))?;
    let cand = read_side(&cand_files, &select, how("cand"))?;
    let mut names: Vec<String> = Vec::new();
    for run in base.runs.iter().chain(&cand.runs) {
        let mut keys: Vec<&String> = run.keys().collect();
        keys.sort();
        for k in keys {
            if !names.contains(k) {
                names.push(k.clone());
            }
        }
    }
    let budget = a.max_regression / 100.0;
    let mut slots: Vec<Option<Outcome>> = Vec::with_capacity(names.len());
    let mut tested = Vec::new();
    for (i, name) in names.iter().enumerate() {
        match classify(name, &base, &cand, a, budget) {
            Ok(o) => slots.push(Some(o)),
            Err(t) => {
                slots.push(None);
                tested.push((i, t));
            }
        }
    }
    let m = tested.len().max(1) as f64;
    let level = 1.0 - (1.0 - a.confidence) / m;
    for (i, t) in &tested {
        slots[*i] = Some(test(t, &base, &cand, a.metric, level, budget));
    }
    let outcomes: Vec<Outcome> = slots.into_iter().flatten().collect();
    let mut notes = Vec::new();
    if !(base.per_call && cand.per_call) {
        notes.push(
            "a file has no per-call data (aggregate layout): its regions are compared plainly \
             by the pooled statistic, as the reference does, without a confidence interval"
                .to_owned(),
        );
    }
    let exit = exit_code(&outcomes, a);
    Ok(Checked {
        metric: a.metric,
        budget_pct: a.max_regression,
        confidence: a.confidence,
        base: base.files,
        cand: cand.files,
        tested: tested.len(),
        level,
        outcomes,
        notes,
        exit,
    })
}

fn exit_code(outcomes: &[Outcome], a: &CheckArgs) -> u8 {
    let failed = outcomes
        .iter()
        .any(|o| o.verdict == Verdict::Regressed || (a.fail_on_new && o.verdict == Verdict::New));
    let inconclusive = outcomes.iter().any(|o| o.verdict == Verdict::Inconclusive);
    if failed {
        1
    } else if a.strict && inconclusive {
        3
    } else {
        0
    }
}

/// A region that will be tested.
struct ToTest {
    name: String,
    calls: (u64, u64),
}

/// Classifies a region that cannot be tested (`Ok(outcome)`), or hands it to the test.
fn classify(
    name: &str,
    base: &Side,
    cand: &Side,
    a: &CheckArgs,
    budget: f64,
) -> Result<Outcome, ToTest> {
    let facts = |s: &Side| -> Vec<Option<RunStat>> {
        s.runs.iter().map(|r| r.get(name).cloned()).collect()
    };
    let (fb, fc) = (facts(base), facts(cand));
    let present = |f: &[Option<RunStat>]| f.iter().filter(|x| x.is_some()).count();
    let calls = |f: &[Option<RunStat>]| f.iter().flatten().map(|x| x.calls).sum::<u64>();
    let (cb, cc) = (calls(&fb), calls(&fc));
    let mut o = Outcome {
        name: name.to_owned(),
        verdict: Verdict::Inconclusive,
        calls: (cb, cc),
        values: (None, None),
        change: None,
        lower: None,
        method: "-".into(),
        why: String::new(),
    };
    let (pb, pc) = (present(&fb), present(&fc));
    if pb == 0 {
        o.verdict = Verdict::New;
        o.why = if a.fail_on_new {
            "only in the candidate, and --fail-on-new is set".into()
        } else {
            "only in the candidate".into()
        };
        return Ok(o);
    }
    if pc == 0 {
        o.verdict = Verdict::Gone;
        o.why = "only in the base".into();
        return Ok(o);
    }
    (o.values, o.change) = plain_values(&fb, &fc, a.metric);
    if pb < fb.len() || pc < fc.len() {
        o.why = format!(
            "missing from some runs (in {pb} of {} base and {pc} of {} candidate files)",
            fb.len(),
            fc.len()
        );
        return Ok(o);
    }
    if cb < MIN_CALLS || cc < MIN_CALLS {
        o.why = format!(
            "{cb} call(s) in the base and {cc} in the candidate: at least {MIN_CALLS} per side \
             are needed to judge"
        );
        return Ok(o);
    }
    if base.per_call && cand.per_call {
        return Err(ToTest {
            name: name.to_owned(),
            calls: (cb, cc),
        });
    }
    plain(&mut o, a.metric, budget);
    Ok(o)
}

/// The reference's rule for a region without per-call data: the pooled statistic's change
/// against the budget, no interval.
fn plain(o: &mut Outcome, metric: Tested, budget: f64) {
    o.method = "plain (no per-call data)".into();
    match o.change {
        None => {
            o.why = format!(
                "{} needs per-call durations, and a file has only per-region totals",
                metric.name()
            );
        }
        Some(c) if c > budget => {
            o.verdict = Verdict::Regressed;
            o.why = format!(
                "the pooled {} rose by {:+.1}%, above the {:+.1}% budget (plain comparison: \
                 no per-call data, no interval)",
                metric.name(),
                c * 100.0,
                budget * 100.0
            );
        }
        Some(_) => o.verdict = Verdict::Ok,
    }
}

/// The pooled statistic of each side without per-call data (mean: total / calls; total:
/// per-run average) and its change; percentiles need per-call data.
fn plain_values(
    fb: &[Option<RunStat>],
    fc: &[Option<RunStat>],
    metric: Tested,
) -> ((Option<f64>, Option<f64>), Option<f64>) {
    let pooled = |f: &[Option<RunStat>]| -> Option<f64> {
        let runs: Vec<&RunStat> = f.iter().flatten().collect();
        if runs.is_empty() {
            return None;
        }
        let total: f64 = runs.iter().map(|r| r.total).sum();
        let calls: u64 = runs.iter().map(|r| r.calls).sum();
        match metric {
            Tested::Mean => Some(total / calls.max(1) as f64),
            Tested::Total => Some(total / runs.len() as f64),
            _ => {
                // Per-call statistics: the geometric mean of the runs' values, when all have one.
                let logs: Option<Vec<f64>> = runs.iter().map(|r| r.ln_value).collect();
                logs.map(|l| (l.iter().sum::<f64>() / l.len() as f64).exp())
            }
        }
    };
    let (b, c) = (pooled(fb), pooled(fc));
    let change = match (b, c) {
        (Some(b), Some(c)) if b > 0.0 => Some(c / b - 1.0),
        _ => None,
    };
    ((b, c), change)
}

/// Tests one region at one-sided `level`.
fn test(t: &ToTest, base: &Side, cand: &Side, metric: Tested, level: f64, budget: f64) -> Outcome {
    let z = normal_quantile(level);
    let (bound, values) = match (&base.single, &cand.single) {
        (Some(b), Some(c)) => single_file(&t.name, b, c, metric, z),
        _ => {
            let logs = |s: &Side| -> Vec<(f64, f64)> {
                s.runs
                    .iter()
                    .filter_map(|r| r.get(&t.name))
                    .filter_map(|x| x.ln_value.map(|v| (v, x.within)))
                    .collect()
            };
            let (lb, lc) = (logs(base), logs(cand));
            // The typical (median) run's sampling variance: one run whose median sat between
            // two speeds of the machine must not widen every interval.
            let mut w: Vec<f64> = lb.iter().chain(&lc).map(|x| x.1).collect();
            let within = super::stats::quantile_unsorted(&mut w, 0.5);
            let vb: Vec<f64> = lb.iter().map(|x| x.0).collect();
            let vc: Vec<f64> = lc.iter().map(|x| x.0).collect();
            let geo = |v: &[f64]| (v.iter().sum::<f64>() / v.len() as f64).exp();
            (
                interval::between_runs(&vb, &vc, within, level),
                (Some(geo(&vb)), Some(geo(&vc))),
            )
        }
    };
    verdict(t, bound, values, metric, level, budget)
}

/// The bound for one file per side.
fn single_file(
    name: &str,
    b: &FileData,
    c: &FileData,
    metric: Tested,
    z: f64,
) -> (Bound, (Option<f64>, Option<f64>)) {
    let (rb, rc) = (
        b.region(name).expect("tested regions are on both sides"),
        c.region(name).expect("tested regions are on both sides"),
    );
    let (sb, sc) = (
        rb.sample.as_deref().unwrap_or_default(),
        rc.sample.as_deref().unwrap_or_default(),
    );
    let stat = metric.per_call();
    let mut bound = if metric == Tested::P50 {
        let logs = |s: &[f64]| -> Vec<f64> { s.iter().map(|&x| ln_ns(x)).collect() };
        interval::mann_whitney(&logs(sb), &logs(sc), z)
    } else {
        let mut r1 = Rng::new(seed(&[name, "base", "0"]));
        let mut r2 = Rng::new(seed(&[name, "cand", "0"]));
        interval::bootstrap(sb, sc, stat, z, (&mut r1, &mut r2))
    };
    let values = if metric == Tested::Total {
        let shift = (rc.calls as f64 / rb.calls as f64).ln();
        bound.estimate += shift;
        bound.lower += shift;
        (Some(rb.total_ns), Some(rc.total_ns))
    } else {
        (
            Some(stat.of(&mut sb.to_vec())),
            Some(stat.of(&mut sc.to_vec())),
        )
    };
    (bound, values)
}

fn verdict(
    t: &ToTest,
    bound: Bound,
    values: (Option<f64>, Option<f64>),
    metric: Tested,
    level: f64,
    budget: f64,
) -> Outcome {
    let method = match bound.method {
        interval::Method::Bootstrap => "bootstrap (per call)".to_owned(),
        interval::Method::MannWhitney => "Mann-Whitney (per call)".to_owned(),
        interval::Method::BetweenRuns { df } => format!("between runs (t, {df:.0} df)"),
    };
    let limit = (1.0 + budget).ln();
    let (change, lower) = (bound.estimate.exp_m1(), bound.lower.exp_m1());
    let said = format!(
        "{} changed by {:+.1}%; with {:.2}% confidence by at least {:+.1}%",
        metric.name(),
        change * 100.0,
        level * 100.0,
        lower * 100.0
    );
    let (verdict, why) = if bound.lower > limit {
        (
            Verdict::Regressed,
            format!("{said}, above the {:+.1}% budget", budget * 100.0),
        )
    } else if bound.estimate > limit {
        (
            Verdict::Inconclusive,
            format!(
                "{said}: the estimate is above the {:+.1}% budget but the interval reaches \
                 below it (more calls or more runs would tell)",
                budget * 100.0
            ),
        )
    } else {
        (Verdict::Ok, format!("{said}, within the budget"))
    };
    Outcome {
        name: t.name.clone(),
        verdict,
        calls: t.calls,
        values,
        change: Some(change),
        lower: Some(lower),
        method,
        why,
    }
}

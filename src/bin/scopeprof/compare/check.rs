//! `scopeprof check`: the regression gate and its decision rule (the same text is the
//! command's `--help`, [`RULE`], and `docs/compare.md`).
//!
//! Every region present on both sides is classified once: not comparable (missing from
//! some runs, fewer than [`MIN_CALLS`] calls on a side: *inconclusive*), compared plainly
//! (no per-call data: the reference's rule), or *tested*. The tested regions share the
//! error budget (Bonferroni), and each one's bound comes from `interval`.

use std::collections::HashMap;
use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::interval::{self, ln_ns, Bound, PerCall};
use super::samples::{self, FileData, Region};
use super::stats::{normal_quantile, seed, Rng};
use super::table::Output;
use super::{Select, SelectArgs};

/// Fewer calls than this on either side make a region inconclusive.
pub(crate) const MIN_CALLS: u64 = 30;

/// The region that times the whole run (one call per file): never checked.
pub(crate) const SESSION: &str = "scope_profiler.session";

/// The decision rule, as `--help` prints it.
pub(crate) const RULE: &str = "\
Decision rule. For every region present on both sides, the tested statistic (--metric: the \
mean, p50, p95 or p99 of the per-call durations; `total` is the mean scaled by the ratio of \
the call counts, so it compares total time as the reference does) is compared by its change \
c = candidate / base - 1. A region REGRESSED when the lower bound of a one-sided confidence \
interval on c exceeds --max-regression; the confidence (--confidence, default 0.99) is \
Bonferroni-corrected over the regions tested, so each region's bound has level \
1 - (1 - confidence) / regions.

With one file per side, the interval comes from the per-call samples: for p50 the \
Hodges-Lehmann shift of the log durations with its Mann-Whitney bound; for mean, p95 and \
p99 a bootstrap (400 seeded resamples per side of at most 10 000 calls) giving the standard \
error of ln(statistic), and the bound estimate - z * error. With two or more files on a side \
(what CI should use: calls of one run share that run's conditions), each run's ln(statistic) \
is one observation and the bound is Student's t over the runs (pooled between-run variance, \
never below the within-run variance of one run's estimate).

A region is INCONCLUSIVE, never regressed, when it has fewer than 30 calls on a side or is \
missing from some runs, and also when its estimate exceeds the budget but its bound does \
not. Files without per-call data (aggregate layout) fall back to the reference's plain \
comparison of the pooled statistic (percentiles then cannot be checked), and the output \
says so. Per-call samples are capped at 100 000 calls per region and 2 000 000 per file \
(reservoir sampling), so any file is checked in bounded memory. The region \
`scope_profiler.session` (the whole run, one call) is not checked.

Exit status: 0 no region regressed; 1 a region regressed (or, with --fail-on-new, a region \
is new); 2 unreadable input or bad usage; 3 with --strict, a region is inconclusive.";

/// Statistics `check` can test.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Tested {
    /// Median duration per call.
    P50,
    /// Mean duration per call (`avg` in the reference).
    #[value(alias = "avg")]
    Mean,
    /// 95th percentile of the durations.
    P95,
    /// 99th percentile of the durations.
    P99,
    /// Total time: the mean scaled by the ratio of the call counts.
    Total,
}

impl Tested {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Tested::P50 => "p50",
            Tested::Mean => "mean",
            Tested::P95 => "p95",
            Tested::P99 => "p99",
            Tested::Total => "total",
        }
    }

    fn per_call(self) -> PerCall {
        match self {
            Tested::P50 => PerCall::P50,
            Tested::Mean | Tested::Total => PerCall::Mean,
            Tested::P95 => PerCall::P95,
            Tested::P99 => PerCall::P99,
        }
    }
}

/// `scopeprof check` options.
#[derive(Args, Debug)]
pub(crate) struct CheckArgs {
    /// `BASE CAND`, or base files followed by `-- CAND...`.
    #[arg(required = true, value_name = "BASE")]
    pub(crate) files: Vec<PathBuf>,
    /// Candidate files (after `--`).
    #[arg(last = true, value_name = "CAND")]
    pub(crate) cand: Vec<PathBuf>,
    /// Largest allowed increase of the statistic, in percent.
    #[arg(long, value_name = "PCT", default_value_t = 0.0)]
    pub(crate) max_regression: f64,
    /// The statistic tested.
    #[arg(long, value_enum, default_value_t = Tested::P50)]
    pub(crate) metric: Tested,
    /// Confidence of the whole check (Bonferroni-corrected over the regions tested).
    #[arg(long, default_value_t = 0.99)]
    pub(crate) confidence: f64,
    /// Regions only in the candidate fail the check.
    #[arg(long)]
    pub(crate) fail_on_new: bool,
    /// Inconclusive regions fail the check (exit 3).
    #[arg(long)]
    pub(crate) strict: bool,
    #[command(flatten)]
    pub(crate) select: SelectArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Output::Text)]
    pub(crate) format: Output,
}

impl CheckArgs {
    /// The base and candidate files.
    pub(crate) fn sides(&self) -> Result<(Vec<PathBuf>, Vec<PathBuf>), String> {
        if !self.cand.is_empty() {
            return Ok((self.files.clone(), self.cand.clone()));
        }
        match self.files.as_slice() {
            [b, c] => Ok((vec![b.clone()], vec![c.clone()])),
            _ => Err(format!(
                "check takes BASE CAND, or BASE... -- CAND... ({} files given without `--`)",
                self.files.len()
            )),
        }
    }

    fn validate(&self) -> Result<(), String> {
        if !(self.confidence > 0.5 && self.confidence < 1.0) {
            return Err(format!(
                "--confidence {} is not between 0.5 and 1",
                self.confidence
            ));
        }
        if !(self.max_regression >= 0.0 && self.max_regression.is_finite()) {
            return Err(format!(
                "--max-regression {} must be a non-negative percentage",
                self.max_regression
            ));
        }
        Ok(())
    }
}

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

/// The within-run facts of `r`, the `index`-th file of side `side`.
fn run_stat(r: &Region, metric: Tested, side: &str, index: usize) -> RunStat {
    let (ln_value, within) = match &r.sample {
        Some(s) if !s.is_empty() => {
            let stat = metric.per_call();
            let value = match metric {
                Tested::Total => r.total_ns,
                _ => stat.of(&mut s.clone()),
            };
            let mut rng = Rng::new(seed(&[&r.name, side, &index.to_string()]));
            let se = interval::bootstrap_log_se(s, stat, &mut rng);
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

fn read_side(
    files: &[PathBuf],
    select: &Select,
    metric: Tested,
    side: &str,
) -> Result<Side, String> {
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
            .map(|r| (r.name.clone(), run_stat(r, metric, side, i)))
            .collect();
        out.runs.push(facts);
        if files.len() == 1 {
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
    let base = read_side(&base_files, &select, a.metric, "base")?;
    let cand = read_side(&cand_files, &select, a.metric, "cand")?;
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
    let plain = plain_values(&fb, &fc, a.metric);
    (o.values, o.change) = plain;
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
    o.method = "plain (no per-call data)".into();
    match o.change {
        None => {
            o.why = format!(
                "{} needs per-call durations, and a file has only per-region totals",
                a.metric.name()
            );
        }
        Some(c) if c > budget => {
            o.verdict = Verdict::Regressed;
            o.why = format!(
                "the pooled {} rose by {:+.1}%, above the {:+.1}% budget (plain comparison: \
                 no per-call data, no interval)",
                a.metric.name(),
                c * 100.0,
                budget * 100.0
            );
        }
        Some(_) => o.verdict = Verdict::Ok,
    }
    Ok(o)
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
            let within =
                lb.iter().chain(&lc).map(|x| x.1).sum::<f64>() / (lb.len() + lc.len()) as f64;
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

//! The command line of `scopeprof check`: its options, the statistics it can test, and the
//! decision rule as `--help` states it (`check` applies it).

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::interval::PerCall;
use super::table::Output;
use super::SelectArgs;

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
never below the median of the runs' within-run variances).

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

    pub(crate) fn per_call(self) -> PerCall {
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

    pub(crate) fn validate(&self) -> Result<(), String> {
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

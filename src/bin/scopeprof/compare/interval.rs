//! One-sided confidence bounds on the change of a per-call statistic from a base to a
//! candidate, on the log scale (ln(candidate / base), so a bound of ln 1.1 means "at least
//! 10 % slower"). Three constructions, one per situation of `check`:
//!
//! - [`bootstrap`]: one file per side, mean or a high percentile. Each side's per-call sample
//!   is resampled [`RESAMPLES`] times (seeded); the standard errors of ln(statistic) of the
//!   two sides add, and the bound is the estimate minus z times that error (the normal
//!   bootstrap interval, which stays usable at the small levels a Bonferroni correction asks
//!   for, where a percentile interval would need hundreds of thousands of resamples).
//! - [`mann_whitney`]: one file per side, median. The Hodges-Lehmann estimate of the shift
//!   between the log durations and its distribution-free bound from the Mann-Whitney
//!   statistic (normal approximation with the tie correction), found by bisection in
//!   O((n + m) log) time instead of forming the n x m differences.
//! - [`between_runs`]: two or more files on a side. Each file's ln(statistic) is one
//!   observation; the bound is Student's t on the difference of the sides' means, with the
//!   pooled between-run variance (never below the median of the runs' within-run variances,
//!   so three runs that agree by chance do not give a falsely tight interval).

use super::stats::{mean, quantile_unsorted, t_quantile, variance, Rng};

/// Resamples per side of the bootstrap.
pub(crate) const RESAMPLES: usize = 400;

/// Largest sample the bootstrap resamples: a larger (sorted) sample is thinned to this many
/// evenly spaced order statistics, and the error scaled by sqrt(this / n), as the standard
/// error of a mean or a quantile shrinks with sqrt(n). Keeps `check` at a few ms per region.
pub(crate) const BOOTSTRAP_MAX: usize = 10_000;

/// The per-call statistics `check` can test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PerCall {
    Mean,
    P50,
    P95,
    P99,
}

impl PerCall {
    /// The statistic of `v` (reordered in place).
    pub(crate) fn of(self, v: &mut [f64]) -> f64 {
        match self {
            PerCall::Mean => mean(v),
            PerCall::P50 => quantile_unsorted(v, 0.50),
            PerCall::P95 => quantile_unsorted(v, 0.95),
            PerCall::P99 => quantile_unsorted(v, 0.99),
        }
    }
}

/// ln of a statistic in ns (1 ns at least, so an all-zero region has a finite log).
pub(crate) fn ln_ns(x: f64) -> f64 {
    x.max(1.0).ln()
}

/// How a bound was found.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Method {
    /// Normal bootstrap interval from per-call samples.
    Bootstrap,
    /// Hodges-Lehmann / Mann-Whitney from per-call samples.
    MannWhitney,
    /// Student t over runs, with these degrees of freedom.
    BetweenRuns { df: f64 },
}

/// A one-sided bound on ln(candidate / base).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Bound {
    /// Point estimate of ln(candidate / base).
    pub(crate) estimate: f64,
    /// Lower confidence bound of ln(candidate / base).
    pub(crate) lower: f64,
    pub(crate) method: Method,
}

/// The bootstrap standard error of ln(`stat`) of `sample` (durations in ns, sorted when it
/// has more than [`BOOTSTRAP_MAX`] values).
pub(crate) fn bootstrap_log_se(sample: &[f64], stat: PerCall, rng: &mut Rng) -> f64 {
    if sample.len() > BOOTSTRAP_MAX {
        let n = sample.len();
        let thin: Vec<f64> = (0..BOOTSTRAP_MAX)
            .map(|i| sample[(2 * i + 1) * n / (2 * BOOTSTRAP_MAX)])
            .collect();
        let scale = (BOOTSTRAP_MAX as f64 / n as f64).sqrt();
        return bootstrap_log_se(&thin, stat, rng) * scale;
    }
    let n = sample.len();
    if n < 2 {
        return 0.0;
    }
    let mut buf = vec![0.0; n];
    let mut logs = Vec::with_capacity(RESAMPLES);
    for _ in 0..RESAMPLES {
        for b in buf.iter_mut() {
            *b = sample[rng.below(n as u64) as usize];
        }
        logs.push(ln_ns(stat.of(&mut buf)));
    }
    variance(&logs).sqrt()
}

/// The normal bootstrap bound at quantile `z` for one file per side.
pub(crate) fn bootstrap(
    base: &[f64],
    cand: &[f64],
    stat: PerCall,
    z: f64,
    rngs: (&mut Rng, &mut Rng),
) -> Bound {
    let est = ln_ns(stat.of(&mut cand.to_vec())) - ln_ns(stat.of(&mut base.to_vec()));
    let se_b = bootstrap_log_se(base, stat, rngs.0);
    let se_c = bootstrap_log_se(cand, stat, rngs.1);
    Bound {
        estimate: est,
        lower: est - z * (se_b * se_b + se_c * se_c).sqrt(),
        method: Method::Bootstrap,
    }
}

/// Number of differences `c - b <= d` over all pairs (`b` from `base`, `c` from `cand`, both
/// sorted ascending), in one merge pass.
fn count_le(base: &[f64], cand: &[f64], d: f64) -> u64 {
    // c - b <= d  <=>  b >= c - d; as c grows the threshold grows, so `below` only advances.
    let mut below = 0usize;
    let mut n = 0u64;
    for &c in cand {
        let t = c - d;
        while below < base.len() && base[below] < t {
            below += 1;
        }
        n += (base.len() - below) as u64;
    }
    n
}

/// The smallest pairwise difference `c - b` above `lo`, in one merge pass.
fn next_difference(base: &[f64], cand: &[f64], lo: f64) -> f64 {
    // For each c, the smallest c - b > lo has the largest b < c - lo.
    let mut below = 0usize;
    let mut best = f64::INFINITY;
    for &c in cand {
        let t = c - lo;
        while below < base.len() && base[below] < t {
            below += 1;
        }
        if below > 0 {
            best = best.min(c - base[below - 1]);
        }
    }
    best
}

/// The `k`-th smallest (1-based) of the pairwise differences `c - b`: bisection on
/// [`count_le`] down to an interval that holds it, then the exact difference.
fn kth_difference(base: &[f64], cand: &[f64], k: u64) -> f64 {
    let (b0, b1) = (base[0], base[base.len() - 1]);
    let (c0, c1) = (cand[0], cand[cand.len() - 1]);
    let (mut lo, mut hi) = (c0 - b1, c1 - b0);
    if count_le(base, cand, lo) >= k {
        return lo;
    }
    // Invariant: count_le(lo) < k <= count_le(hi).
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if count_le(base, cand, mid) >= k {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    // lo and hi are adjacent: the k-th difference is the first one above lo, computed exactly
    // (hi itself may be a rounding of it).
    let d = next_difference(base, cand, lo);
    if d.is_finite() {
        d
    } else {
        hi
    }
}

/// The variance of the Mann-Whitney U under no shift, with the tie correction.
fn u_variance(base: &[f64], cand: &[f64]) -> f64 {
    let (n, m) = (base.len() as f64, cand.len() as f64);
    let total = n + m;
    // Tie groups of the pooled sample (both sides are sorted: merge them).
    let mut ties = 0.0;
    let (mut i, mut j) = (0, 0);
    let mut last = f64::NAN;
    let mut run = 0.0f64;
    while i < base.len() || j < cand.len() {
        let x = if j >= cand.len() || (i < base.len() && base[i] <= cand[j]) {
            i += 1;
            base[i - 1]
        } else {
            j += 1;
            cand[j - 1]
        };
        if x == last {
            run += 1.0;
        } else {
            ties += run * run * run - run;
            run = 1.0;
            last = x;
        }
    }
    ties += run * run * run - run;
    n * m / 12.0 * ((total + 1.0) - ties / (total * (total - 1.0)))
}

/// The Hodges-Lehmann estimate of the shift `cand - base` and its lower bound at quantile
/// `z`: the C-th smallest of the n·m differences, C = floor(n·m/2 - z·sd(U)). Both samples
/// must be sorted ascending and non-empty (pass log durations for a ratio).
pub(crate) fn mann_whitney(base: &[f64], cand: &[f64], z: f64) -> Bound {
    let pairs = base.len() as u64 * cand.len() as u64;
    let estimate = if pairs % 2 == 1 {
        kth_difference(base, cand, pairs / 2 + 1)
    } else {
        0.5 * (kth_difference(base, cand, pairs / 2) + kth_difference(base, cand, pairs / 2 + 1))
    };
    let c = (pairs as f64 / 2.0 - z * u_variance(base, cand).sqrt()).floor();
    let lower = if c < 1.0 {
        f64::NEG_INFINITY
    } else {
        kth_difference(base, cand, c as u64)
    };
    Bound {
        estimate,
        lower,
        method: Method::MannWhitney,
    }
}

/// The between-run bound at one-sided level `level`: `base` and `cand` hold one ln(statistic)
/// per run (at least three runs in all), `within` the typical within-run variance of one
/// run's ln(statistic), the floor of the between-run variance.
pub(crate) fn between_runs(base: &[f64], cand: &[f64], within: f64, level: f64) -> Bound {
    let (nb, nc) = (base.len() as f64, cand.len() as f64);
    let df = nb + nc - 2.0;
    let pooled = ((nb - 1.0) * variance(base) + (nc - 1.0) * variance(cand)) / df;
    let var = pooled.max(within);
    let se = (var * (1.0 / nb + 1.0 / nc)).sqrt();
    let estimate = mean(cand) - mean(base);
    Bound {
        estimate,
        lower: estimate - t_quantile(level, df) * se,
        method: Method::BetweenRuns { df },
    }
}

#[cfg(test)]
mod tests {
    use super::super::stats::{normal_quantile, seed};
    use super::*;

    fn brute_kth(base: &[f64], cand: &[f64], k: usize) -> f64 {
        let mut d: Vec<f64> = cand
            .iter()
            .flat_map(|c| base.iter().map(move |b| c - b))
            .collect();
        d.sort_by(f64::total_cmp);
        d[k - 1]
    }

    #[test]
    fn kth_difference_is_the_order_statistic() {
        let mut r = Rng::new(7);
        for trial in 0..50 {
            let n = 1 + trial % 9;
            let m = 1 + (trial * 7) % 11;
            // Small integers: many ties.
            let mut b: Vec<f64> = (0..n).map(|_| r.below(6) as f64).collect();
            let mut c: Vec<f64> = (0..m).map(|_| r.below(6) as f64 + 0.5).collect();
            b.sort_by(f64::total_cmp);
            c.sort_by(f64::total_cmp);
            for k in 1..=n * m {
                let got = kth_difference(&b, &c, k as u64);
                let want = brute_kth(&b, &c, k);
                assert!(
                    (got - want).abs() < 1e-9,
                    "n {n} m {m} k {k}: {got} != {want}"
                );
            }
        }
    }

    #[test]
    fn hodges_lehmann_of_a_known_shift() {
        let base = [1.0, 2.0, 3.0, 4.0, 5.0];
        let cand = [3.0, 4.0, 5.0, 6.0, 7.0];
        let b = mann_whitney(&base, &cand, 1.644_853_627);
        assert_eq!(b.estimate, 2.0);
        // n = m = 5, no ties: sd(U) = sqrt(25 * 11 / 12) = 4.787; C = floor(12.5 - 7.874) = 4:
        // the 4th smallest difference (-2, -1, -1, 0, ...) is 0.
        assert_eq!(b.lower, 0.0);
        assert_eq!(b.lower, brute_kth(&base, &cand, 4));
        // Ties: sum(t^3 - t) over groups {3,3},{4,4},{5,5} = 18.
        let v = u_variance(&base, &cand);
        assert!(
            (v - 25.0 / 12.0 * (11.0 - 18.0 / 90.0)).abs() < 1e-12,
            "{v}"
        );
    }

    /// Samples of a skewed distribution (log-normal-ish durations around 20 us).
    fn durations(r: &mut Rng, n: usize, scale: f64) -> Vec<f64> {
        (0..n)
            .map(|_| {
                let u = (r.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                20_000.0 * scale * (0.05 * normal_quantile(u.clamp(1e-12, 1.0 - 1e-12))).exp()
            })
            .collect()
    }

    #[test]
    fn bounds_cover_the_true_change_at_their_level() {
        // 400 trials of two samples whose true ratio is 1.1; a 95 % lower bound must be above
        // ln 1.1 in about 5 % of them (20 expected; binomial sd 4.4).
        let z = normal_quantile(0.95);
        let truth = 1.1f64.ln();
        let (mut mw_miss, mut bs_miss) = (0, 0);
        let mut r = Rng::new(seed(&["coverage"]));
        for _ in 0..400 {
            let b = durations(&mut r, 60, 1.0);
            let c = durations(&mut r, 60, 1.1);
            let mut lb: Vec<f64> = b.iter().map(|x| x.ln()).collect();
            let mut lc: Vec<f64> = c.iter().map(|x| x.ln()).collect();
            lb.sort_by(f64::total_cmp);
            lc.sort_by(f64::total_cmp);
            if mann_whitney(&lb, &lc, z).lower > truth {
                mw_miss += 1;
            }
            let mut r1 = Rng::new(r.next_u64());
            let mut r2 = Rng::new(r.next_u64());
            if bootstrap(&b, &c, PerCall::Mean, z, (&mut r1, &mut r2)).lower > truth {
                bs_miss += 1;
            }
        }
        assert!(
            (8..=35).contains(&mw_miss),
            "Mann-Whitney misses {mw_miss}/400"
        );
        assert!(
            (8..=35).contains(&bs_miss),
            "bootstrap misses {bs_miss}/400"
        );
    }

    #[test]
    fn bootstrap_standard_error_of_a_mean() {
        // Uniform(0, 1) scaled to ns: sd/mean = 0.5774, so se of ln(mean) = 0.5774/sqrt(n).
        let mut r = Rng::new(3);
        let v: Vec<f64> = (0..2000)
            .map(|_| 1e6 * (r.next_u64() >> 11) as f64 / (1u64 << 53) as f64)
            .collect();
        let se = bootstrap_log_se(&v, PerCall::Mean, &mut Rng::new(4));
        let want = (1.0f64 / 3.0).sqrt() / (2000f64).sqrt();
        assert!((se / want - 1.0).abs() < 0.12, "{se} vs {want}");
        assert_eq!(
            bootstrap_log_se(&[5.0], PerCall::P99, &mut Rng::new(1)),
            0.0
        );
    }

    #[test]
    fn between_runs_by_hand() {
        let base = [0.0, 0.01, -0.01];
        let cand = [0.2, 0.21, 0.19];
        let b = between_runs(&base, &cand, 0.0, 0.99);
        // pooled variance 1e-4, se = 0.01 * sqrt(2/3), t(0.99, 4) = 3.746947388.
        let want = 0.2 - 3.746_947_388 * 0.01 * (2.0f64 / 3.0).sqrt();
        assert!((b.estimate - 0.2).abs() < 1e-12);
        assert!((b.lower - want).abs() < 1e-8, "{} != {want}", b.lower);
        assert_eq!(b.method, Method::BetweenRuns { df: 4.0 });
        // The within-run floor takes over when runs agree too well.
        let tight = between_runs(&[0.0, 0.0], &[0.2, 0.2], 1e-4, 0.99);
        let t2 = t_quantile(0.99, 2.0);
        assert!((tight.lower - (0.2 - t2 * 0.01)).abs() < 1e-9, "{tight:?}");
    }
}

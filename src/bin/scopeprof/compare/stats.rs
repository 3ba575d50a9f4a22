//! The few numerical tools `check` needs, written here rather than pulled from a statistics
//! crate: a seeded random generator (SplitMix64), sample quantiles with numpy's default
//! definition (so our p50/p95/p99 are the reference's), and the quantiles of the normal and
//! Student t distributions. Each is short and tested against published values below.

/// SplitMix64: a small, fast, seedable generator (Steele, Lea and Flood 2014). Seeded from the
/// region name and the file, so `check` gives the same answer every time it runs.
#[derive(Clone, Debug)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform integer in `0..n` (Lemire's multiply-shift; the bias, below n / 2^64, does
    /// not matter here).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

/// A seed from text parts (FNV-1a 64 over the parts, each followed by a separator byte).
pub(crate) fn seed(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in p.bytes().chain(std::iter::once(0xff)) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// The `p`-quantile of a sorted sample, numpy's default (linear interpolation between the
/// order statistics at `(n - 1) p`); NaN for an empty sample.
pub(crate) fn quantile_sorted(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let h = (sorted.len() - 1) as f64 * p.clamp(0.0, 1.0);
    let lo = h.floor() as usize;
    let frac = h - lo as f64;
    match sorted.get(lo + 1) {
        Some(&hi) if frac > 0.0 => sorted[lo] + frac * (hi - sorted[lo]),
        _ => sorted[lo],
    }
}

/// The `p`-quantile of an unsorted sample (reordered in place), as [`quantile_sorted`], in
/// linear time.
pub(crate) fn quantile_unsorted(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let h = (v.len() - 1) as f64 * p.clamp(0.0, 1.0);
    let lo = h.floor() as usize;
    let frac = h - lo as f64;
    let (_, &mut x, right) = v.select_nth_unstable_by(lo, f64::total_cmp);
    if frac == 0.0 || right.is_empty() {
        return x;
    }
    let next = right.iter().copied().fold(f64::INFINITY, f64::min);
    x + frac * (next - x)
}

/// The arithmetic mean (NaN for an empty sample).
pub(crate) fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// The sample variance (n - 1 in the denominator; 0 for fewer than two values).
pub(crate) fn variance(v: &[f64]) -> f64 {
    if v.len() < 2 {
        return 0.0;
    }
    let m = mean(v);
    v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (v.len() - 1) as f64
}

/// The standard normal quantile (Acklam's rational approximation, relative error below
/// 1.2e-9), for `0 < p < 1`.
pub(crate) fn normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    let p = p.clamp(1e-300, 1.0 - 1e-16);
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if p < 0.02425 {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - 0.02425 {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}

/// ln Γ(x) for x > 0 (Lanczos, g = 7, 9 terms; ~15 digits).
fn ln_gamma(x: f64) -> f64 {
    const G: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection.
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = G[0];
    let t = x + 7.5;
    for (i, g) in G.iter().enumerate().skip(1) {
        a += g / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// The regularized incomplete beta function I_x(a, b) (continued fraction, modified Lentz).
fn inc_beta(x: f64, a: f64, b: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let front =
        (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp();
    // The continued fraction converges fast for x < (a + 1) / (a + b + 2); else use symmetry.
    if x > (a + 1.0) / (a + b + 2.0) {
        return 1.0 - inc_beta(1.0 - x, b, a);
    }
    let tiny = 1e-300;
    let mut c = 1.0;
    let mut d = 1.0 - (a + b) * x / (a + 1.0);
    d = 1.0 / if d.abs() < tiny { tiny } else { d };
    let mut f = d;
    for m in 1..500 {
        let m = f64::from(m);
        for k in 0..2 {
            let num = if k == 0 {
                m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m))
            } else {
                -(a + m) * (a + b + m) * x / ((a + 2.0 * m) * (a + 2.0 * m + 1.0))
            };
            d = 1.0 + num * d;
            d = 1.0 / if d.abs() < tiny { tiny } else { d };
            c = 1.0 + num / c;
            c = if c.abs() < tiny { tiny } else { c };
            f *= c * d;
        }
        if (c * d - 1.0).abs() < 1e-15 {
            break;
        }
    }
    front * f / a
}

/// The Student t distribution function with `df` degrees of freedom.
pub(crate) fn t_cdf(t: f64, df: f64) -> f64 {
    let tail = 0.5 * inc_beta(df / (df + t * t), df / 2.0, 0.5);
    if t >= 0.0 {
        1.0 - tail
    } else {
        tail
    }
}

/// The Student t quantile with `df` degrees of freedom, for `0.5 <= p < 1` (bisection on
/// [`t_cdf`]).
pub(crate) fn t_quantile(p: f64, df: f64) -> f64 {
    if !df.is_finite() || df > 1e7 {
        return normal_quantile(p);
    }
    let mut hi = normal_quantile(p).max(1.0);
    while t_cdf(hi, df) < p && hi < 1e12 {
        hi *= 2.0;
    }
    let mut lo = 0.0;
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if t_cdf(mid, df) < p {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo < 1e-12 * hi {
            break;
        }
    }
    0.5 * (lo + hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs().max(1e-12)
    }

    #[test]
    fn normal_quantiles_match_the_tables() {
        for (p, z) in [
            (0.5, 0.0),
            (0.975, 1.959_963_985),
            (0.99, 2.326_347_874),
            (0.995, 2.575_829_304),
            (0.9995, 3.290_526_731),
            (0.01, -2.326_347_874),
            (0.999_999, 4.753_424_309),
        ] {
            let got = normal_quantile(p);
            assert!((got - z).abs() < 1e-8, "p {p}: {got} != {z}");
        }
    }

    #[test]
    fn t_quantiles_match_the_tables() {
        // Published two-sided critical values (e.g. NIST/SEMATECH e-Handbook, table 1.3.6.7.2).
        for (p, df, t) in [
            (0.975, 1.0, 12.706_204_736),
            (0.975, 4.0, 2.776_445_105),
            (0.99, 4.0, 3.746_947_388),
            (0.995, 10.0, 3.169_272_673),
            (0.9995, 4.0, 8.610_301_581),
            (0.95, 30.0, 1.697_260_887),
            (0.999, 2.0, 22.327_124_77),
        ] {
            let got = t_quantile(p, df);
            assert!(close(got, t, 1e-7), "p {p} df {df}: {got} != {t}");
        }
        // Large df tends to the normal.
        assert!(close(t_quantile(0.99, 1e9), 2.326_347_874, 1e-8));
        assert!(close(t_cdf(2.776_445_105, 4.0), 0.975, 1e-8));
        assert!(close(t_cdf(-2.776_445_105, 4.0), 0.025, 1e-6));
    }

    #[test]
    fn ln_gamma_matches_factorials() {
        assert!(close(ln_gamma(5.0), 24f64.ln(), 1e-13));
        assert!(close(
            ln_gamma(0.5),
            std::f64::consts::PI.sqrt().ln(),
            1e-13
        ));
        assert!(close(ln_gamma(101.0), 363.739_375_555_563_5, 1e-13));
    }

    #[test]
    fn quantiles_are_numpys() {
        // numpy.percentile([1, 2, 3, 4, 10], [0, 50, 95, 99, 100]) = 1, 3, 8.8, 9.76, 10
        let v = [1.0, 2.0, 3.0, 4.0, 10.0];
        for (p, q) in [
            (0.0, 1.0),
            (0.5, 3.0),
            (0.95, 8.8),
            (0.99, 9.76),
            (1.0, 10.0),
        ] {
            assert!(close(quantile_sorted(&v, p), q, 1e-12), "{p}");
            let mut w = [10.0, 3.0, 1.0, 4.0, 2.0];
            assert!(close(quantile_unsorted(&mut w, p), q, 1e-12), "{p}");
        }
        // numpy.percentile([1, 2, 3, 4], 50) = 2.5
        assert_eq!(quantile_sorted(&[1.0, 2.0, 3.0, 4.0], 0.5), 2.5);
        assert!(quantile_sorted(&[], 0.5).is_nan());
        assert_eq!(
            variance(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]),
            32.0 / 7.0
        );
    }

    #[test]
    fn the_generator_is_seeded_and_uniform() {
        // SplitMix64's published first outputs for seed 0.
        let mut r = Rng::new(0);
        assert_eq!(r.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(r.next_u64(), 0x6e78_9e6a_a1b9_65f4);
        let mut counts = [0u32; 10];
        let mut r = Rng::new(seed(&["a", "b"]));
        for _ in 0..100_000 {
            counts[r.below(10) as usize] += 1;
        }
        assert!(
            counts.iter().all(|&c| (9_500..10_500).contains(&c)),
            "{counts:?}"
        );
        assert_ne!(seed(&["ab", "c"]), seed(&["a", "bc"]));
    }
}

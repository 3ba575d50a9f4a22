//! The duration histogram of every exported region: 4 buckets per decade from 1 us to 100 s
//! (bounds 1, 1.78, 3.16, 5.62 x 10^k us), plus `+Inf`.
//!
//! The flusher puts every call in a bucket, so finding it must cost a few comparisons, not a
//! logarithm: the bit length of the duration picks the first bound that can hold it (a
//! power-of-two range spans 0.3 decades, so it holds at most two bounds), and at most two more
//! comparisons against the precomputed bounds finish the job.

/// Finite bucket bounds (33: 8 decades of 4, and 100 s).
pub(crate) const FINITE: usize = 33;
/// Buckets per histogram: the finite ones and `+Inf`.
pub(crate) const BUCKETS: usize = FINITE + 1;

/// The four bounds of a decade, in ns at 1 us (three significant digits of 10^(k/4)).
const MANTISSAS: [u64; 4] = [1000, 1780, 3160, 5620];

/// Upper bounds of the finite buckets, ns, ascending (a duration equal to a bound is in it).
pub(crate) const BOUNDS_NS: [u64; FINITE] = bounds();

const fn bounds() -> [u64; FINITE] {
    let mut out = [0u64; FINITE];
    let mut pow = 1u64;
    let mut decade = 0;
    while decade < 8 {
        let mut k = 0;
        while k < 4 {
            out[decade * 4 + k] = MANTISSAS[k] * pow;
            k += 1;
        }
        pow *= 10;
        decade += 1;
    }
    out[FINITE - 1] = MANTISSAS[0] * pow;
    out
}

/// For each bit length 0..=64 of a duration, the first bucket that can hold a duration of
/// that length (the number of bounds below the smallest such duration).
static START: [u8; 65] = starts();

const fn starts() -> [u8; 65] {
    let mut out = [0u8; 65];
    let mut bits = 1;
    while bits <= 64 {
        let smallest = 1u64 << (bits - 1);
        let mut i = 0;
        while i < FINITE && BOUNDS_NS[i] < smallest {
            i += 1;
        }
        out[bits] = i as u8;
        bits += 1;
    }
    out
}

/// [`BOUNDS_NS`] followed by `u64::MAX`: indexable by any `i & 63` without a bounds check.
static PADDED: [u64; 64] = padded();

const fn padded() -> [u64; 64] {
    let mut out = [u64::MAX; 64];
    let mut i = 0;
    while i < FINITE {
        out[i] = BOUNDS_NS[i];
        i += 1;
    }
    out
}

/// The bucket of a duration of `ns`: the first bound >= `ns`, or [`FINITE`] (`+Inf`). No
/// branch: the range of durations of one bit length holds at most two bounds, so two
/// comparisons after the table lookup always suffice (the tests check every bit length).
#[inline]
pub(crate) fn bucket(ns: u64) -> usize {
    let mut i = usize::from(START[(64 - ns.leading_zeros()) as usize]);
    i += usize::from(ns > PADDED[i & 63]);
    i += usize::from(ns > PADDED[i & 63]);
    i
}

/// The `le` label of finite bucket `i`: its bound in seconds, as an exact decimal
/// (`0.00000178`, `0.001`, `100`).
pub(crate) fn le_label(i: usize) -> String {
    let ns = BOUNDS_NS[i];
    let (whole, frac) = (ns / 1_000_000_000, ns % 1_000_000_000);
    if frac == 0 {
        return whole.to_string();
    }
    let digits = format!("{frac:09}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn linear(ns: u64) -> usize {
        BOUNDS_NS.iter().position(|&b| ns <= b).unwrap_or(FINITE)
    }

    #[test]
    fn bounds_span_1us_to_100s_four_per_decade() {
        assert_eq!(BOUNDS_NS[0], 1_000);
        assert_eq!(BOUNDS_NS[4], 10_000);
        assert_eq!(BOUNDS_NS[FINITE - 1], 100_000_000_000);
        assert!(BOUNDS_NS.windows(2).all(|w| w[0] < w[1]));
        for w in BOUNDS_NS.windows(2) {
            let ratio = w[1] as f64 / w[0] as f64;
            assert!((ratio - 10f64.powf(0.25)).abs() < 0.01, "{w:?}");
        }
    }

    #[test]
    fn a_bit_length_spans_at_most_two_bounds() {
        for bits in 1..64 {
            let (lo, hi) = (1u64 << (bits - 1), (1u64 << bits) - 1);
            let inside = BOUNDS_NS.iter().filter(|&&b| b >= lo && b < hi).count();
            assert!(inside <= 2, "{bits} bits: {inside} bounds");
        }
    }

    #[test]
    fn bucket_matches_a_linear_scan() {
        let mut values = vec![0, 1, 999, u64::MAX, u64::MAX - 1, 1 << 63];
        for &b in &BOUNDS_NS {
            values.extend([b - 1, b, b + 1]);
        }
        for bits in 0..64 {
            let p = 1u64 << bits;
            values.extend([p - 1, p, p + 1, p + p / 3]);
        }
        // A pseudo-random sweep over 0.1 us .. 1000 s.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            values.push(x % 1_000_000_000_000);
        }
        for v in values {
            assert_eq!(bucket(v), linear(v), "{v} ns");
        }
    }

    #[test]
    fn le_labels_are_exact_decimals() {
        assert_eq!(le_label(0), "0.000001");
        assert_eq!(le_label(1), "0.00000178");
        assert_eq!(le_label(12), "0.001");
        assert_eq!(le_label(13), "0.00178");
        assert_eq!(le_label(27), "5.62");
        assert_eq!(le_label(FINITE - 1), "100");
        for (i, &bound) in BOUNDS_NS.iter().enumerate() {
            let secs: f64 = le_label(i).parse().unwrap();
            assert!((secs * 1e9 - bound as f64).abs() < 1e-3, "{i}");
        }
    }
}

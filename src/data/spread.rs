//! A region's spread over ranks: what rank 0's [`Report`](crate::Report) and summary show in a
//! multi-rank run, with the imbalance the Python reference reports
//! (`(max per-rank total / mean per-rank total - 1) x 100`).

use crate::data::report::RegionStats;

/// One region's calls and total time on every rank of a multi-rank run
/// ([`Report::ranks`](crate::Report::ranks), on rank 0).
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct RankSpread {
    /// The region's name.
    pub name: String,
    /// Calls in this phase, by rank (0 on a rank that has none).
    pub calls: Vec<u64>,
    /// Total (inclusive) time in this phase, ns, by rank.
    pub total_ns: Vec<u64>,
}

impl RankSpread {
    /// Smallest per-rank total, ns.
    pub fn min_ns(&self) -> u64 {
        self.total_ns.iter().copied().min().unwrap_or(0)
    }

    /// Largest per-rank total, ns.
    pub fn max_ns(&self) -> u64 {
        self.total_ns.iter().copied().max().unwrap_or(0)
    }

    /// Mean per-rank total, ns (over all ranks).
    pub fn mean_ns(&self) -> f64 {
        if self.total_ns.is_empty() {
            return 0.0;
        }
        self.total_ns.iter().map(|&t| t as f64).sum::<f64>() / self.total_ns.len() as f64
    }

    /// `(max / mean - 1) x 100`, as the reference's `imbalance` column; 0 with fewer than two
    /// ranks or no time.
    pub fn imbalance_pct(&self) -> f64 {
        let mean = self.mean_ns();
        if self.total_ns.len() < 2 || mean <= 0.0 {
            return 0.0;
        }
        (self.max_ns() as f64 / mean - 1.0) * 100.0
    }
}

/// A rank's regions as bytes: per region, name length (u32 LE), name, calls, total (u64 LE).
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(crate) fn encode(regions: &[RegionStats]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in regions {
        out.extend_from_slice(&(r.name.len() as u32).to_le_bytes());
        out.extend_from_slice(r.name.as_bytes());
        out.extend_from_slice(&r.calls.to_le_bytes());
        out.extend_from_slice(&r.total_ns.to_le_bytes());
    }
    out
}

/// Every rank's [`encode`]d regions (rank order) as spreads, by name in order of first
/// appearance; truncated input ends that rank's list.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(crate) fn combine(ranks: &[Vec<u8>]) -> Vec<RankSpread> {
    let n = ranks.len();
    let mut out: Vec<RankSpread> = Vec::new();
    let mut at_name = std::collections::HashMap::new();
    for (k, bytes) in ranks.iter().enumerate() {
        let mut b = &bytes[..];
        let mut take = |len: usize| -> Option<Vec<u8>> {
            let (head, rest) = (b.get(..len)?, b.get(len..)?);
            b = rest;
            Some(head.to_vec())
        };
        while let Some(len) = take(4) {
            let len = u32::from_le_bytes(len.try_into().unwrap_or_default()) as usize;
            let (Some(name), Some(calls), Some(total)) = (take(len), take(8), take(8)) else {
                break;
            };
            let name = String::from_utf8_lossy(&name).into_owned();
            let calls = u64::from_le_bytes(calls.try_into().unwrap_or_default());
            let total = u64::from_le_bytes(total.try_into().unwrap_or_default());
            let i = *at_name.entry(name.clone()).or_insert_with(|| {
                out.push(RankSpread {
                    name,
                    calls: vec![0; n],
                    total_ns: vec![0; n],
                });
                out.len() - 1
            });
            out[i].calls[k] = calls;
            out[i].total_ns[k] = total;
        }
    }
    out.retain(|s| s.calls.iter().any(|&c| c > 0));
    out.sort_by(|a, b| b.max_ns().cmp(&a.max_ns()).then(a.name.cmp(&b.name)));
    out
}

/// The "across ranks" table printed under rank 0's summary.
pub(crate) fn render(spreads: &[RankSpread]) -> String {
    use std::fmt::Write;
    let Some(first) = spreads.first() else {
        return String::new();
    };
    let ms = |ns: f64| ns / 1e6;
    let mut s = format!(
        "Across {} ranks (per-rank total time):\n",
        first.total_ns.len()
    );
    let w = spreads
        .iter()
        .map(|r| r.name.len())
        .max()
        .unwrap_or(6)
        .max(6);
    let _ = writeln!(
        s,
        "  {:<w$}  {:>12}  {:>10}  {:>10}  {:>10}  {:>13}",
        "region", "calls", "min [ms]", "mean [ms]", "max [ms]", "imbalance [%]"
    );
    for r in spreads {
        let _ = writeln!(
            s,
            "  {:<w$}  {:>12}  {:>10.3}  {:>10.3}  {:>10.3}  {:>13.2}",
            r.name,
            r.calls.iter().sum::<u64>(),
            ms(r.min_ns() as f64),
            ms(r.mean_ns()),
            ms(r.max_ns() as f64),
            r.imbalance_pct()
        );
    }
    s
}

/// The `metadata` key naming how a multi-rank file was written (`"parallel"` or `"relay"`).
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(crate) const MPI_WRITE_KEY: &str = "mpi_write";

/// How a multi-rank phase's file was written ([`Report::mpi_write`](crate::Report::mpi_write)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MpiWrite {
    /// Every rank wrote its own rows through MPI-IO (feature `mpio`).
    Parallel,
    /// Rank 0 gathered every rank's part through the token relay.
    Relay,
}

impl MpiWrite {
    /// How the summary and `metadata/mpi_write` name it.
    pub fn as_str(self) -> &'static str {
        match self {
            MpiWrite::Parallel => "parallel",
            MpiWrite::Relay => "relay",
        }
    }
}

/// The "across ranks" table for rank 0's summary, and how the file was written ("" elsewhere).
pub(crate) fn render_spread(report: &crate::Report) -> String {
    let mut s = render(report.ranks());
    if let (false, Some(how)) = (s.is_empty(), report.mpi_write()) {
        s.push_str(match how {
            MpiWrite::Parallel => "  file written by every rank in parallel (MPI-IO)\n",
            MpiWrite::Relay => "  file gathered by rank 0 (token relay)\n",
        });
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(name: &str, calls: u64, total_ns: u64) -> RegionStats {
        RegionStats::of_total(name, calls, total_ns)
    }

    #[test]
    fn spreads_combine_ranks_and_compute_the_reference_imbalance() {
        let r0 = encode(&[stats("solve", 2, 100), stats("io", 1, 10)]);
        let r1 = encode(&[stats("solve", 4, 300)]);
        let all = combine(&[r0, r1]);
        assert_eq!(all[0].name, "solve");
        assert_eq!(all[0].calls, vec![2, 4]);
        assert_eq!((all[0].min_ns(), all[0].max_ns()), (100, 300));
        assert!((all[0].imbalance_pct() - 50.0).abs() < 1e-9); // 300 / 200 - 1
        assert_eq!(all[1].name, "io");
        assert_eq!(all[1].total_ns, vec![10, 0]);
        assert!(render(&all).contains("Across 2 ranks"));
    }

    #[test]
    fn a_truncated_rank_message_keeps_what_is_whole() {
        let mut r0 = encode(&[stats("a", 1, 5), stats("b", 1, 5)]);
        r0.truncate(r0.len() - 3);
        let all = combine(&[r0]);
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].name, "a");
    }
}

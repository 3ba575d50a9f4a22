//! A phase's region statistics as the flusher's snapshot reports them.

use crate::data::report::RegionStats;
use crate::flusher::flush::RegionSnapshot;

impl RegionStats {
    /// The statistics of a region as the flusher reported it (perf totals come later, from
    /// [`Self::set_perf`], once the sinks have finalized).
    pub(crate) fn from_snapshot(s: &RegionSnapshot) -> RegionStats {
        RegionStats {
            file: (!s.row.file.is_empty()).then(|| s.row.file.clone()),
            line: u32::try_from(s.row.line).ok(),
            lifetime_calls: s.lifetime_calls,
            gpu_calls: s.row.gpu_count,
            gpu_total_ns: s.row.gpu_total.max(0) as u64,
            ..RegionStats::new(&s.row.name, &s.row.stats)
        }
    }
}

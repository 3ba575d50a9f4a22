//! The flusher's side of the live metrics (feature `prometheus`): at the end of a round, at
//! most every `PUBLISH_EVERY` (100 ms), and at every finalize, it publishes what
//! [`fold`](super::fold) accumulated with the phase's statistics, the process-level figures
//! and the perf totals; a finalize then carries the phase's counts into the metrics before
//! handing the phase over. Without the feature, or with metrics off, this is one check per
//! round.

use super::Flusher;

#[cfg(feature = "prometheus")]
impl Flusher {
    /// Publishes a metrics snapshot if one is due (or `force`d).
    pub(super) fn publish_metrics(&mut self, force: bool) {
        if !self.metrics.as_ref().is_some_and(|m| force || m.due()) {
            return;
        }
        let chunk_bytes = crate::recording::lane::chunk::CHUNK_BYTES as u64;
        let pool = &self.shared.pool;
        let process = crate::metrics::Process {
            dropped_calls: self.dropped_calls(),
            wait_ns: pool.wait_ns.load(std::sync::atomic::Ordering::Relaxed),
            flusher_cpu_ns: crate::recording::clock::thread_cpu_ns().max(0) as u64,
            buffer_bytes: pool.allocated() as u64 * chunk_bytes,
            folded_regions: 0,
        };
        let perf = self.shared.sinks.as_ref().and_then(|s| s.counter_totals());
        let phase = &self.phase;
        if let Some(m) = &mut self.metrics {
            m.publish(|id| phase.get(id).map(|p| &p.stats), process, perf);
        }
    }

    /// At a finalize, before the phase's statistics are handed over: the metrics keep them.
    pub(super) fn carry_metrics(&mut self) {
        if let Some(m) = &mut self.metrics {
            for (id, p) in self.phase.iter().enumerate() {
                m.acc.carry(id, &p.stats);
            }
        }
    }
}

#[cfg(not(feature = "prometheus"))]
impl Flusher {
    /// Nothing to publish without the `prometheus` feature.
    #[inline(always)]
    pub(super) fn publish_metrics(&mut self, _force: bool) {}

    /// Nothing to keep without the `prometheus` feature.
    #[inline(always)]
    pub(super) fn carry_metrics(&mut self) {}
}

//! The flusher's side of the live metrics (feature `prometheus`): at the end of a round, at
//! most every [`PUBLISH_EVERY`](crate::metrics::PUBLISH_EVERY), and at every finalize, it
//! publishes what [`fold`](super::fold) accumulated, with the process-level figures and the
//! perf totals. Without the feature, or with metrics off, this is one check per round.

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
        if let Some(m) = &mut self.metrics {
            m.publish(process, perf);
        }
    }
}

#[cfg(not(feature = "prometheus"))]
impl Flusher {
    /// Nothing to publish without the `prometheus` feature.
    #[inline(always)]
    pub(super) fn publish_metrics(&mut self, _force: bool) {}
}

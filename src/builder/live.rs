//! The option for watching a program live (`scopeprof top`).

use std::time::Duration;

use super::Builder;

impl Builder {
    /// For watching the program live with `scopeprof top` (or any reader of the spool): a
    /// 200 ms [`spool_sync_interval`](Builder::spool_sync_interval) instead of 1 s, so the view is
    /// at most ~0.45 s behind the program (the interval plus the viewer's refresh) and a stuck
    /// call shows as open within that. `live(false)` restores the default. The cost is five
    /// spool writes a second instead of one, on the flusher (docs/cli.md measures it).
    ///
    /// ```
    /// let (layer, guard) = scope_profiler::ScopeLayer::builder()
    ///     .output(std::env::temp_dir().join("live_example.h5"))
    ///     .summary(false)
    ///     .live(true)
    ///     .build()?;
    /// # drop(layer);
    /// # guard.finalize()?;
    /// # Ok::<(), scope_profiler::Error>(())
    /// ```
    pub fn live(self, on: bool) -> Self {
        self.spool_sync_interval(if on {
            Duration::from_millis(200)
        } else {
            crate::config::Config::default().flush_interval
        })
    }
}

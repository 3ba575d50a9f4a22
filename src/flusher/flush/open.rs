//! The open-calls frame the flusher writes at every flush (see
//! [`crate::data::open_calls`]): the calls entered and not yet closed, oldest first, capped,
//! each linked to its enclosing open call. A viewer of the live spool and `recover` read the
//! latest one. Work: O(n log n) for n open calls, once per flush interval.

use super::fold::hidden;
use super::Flusher;
use crate::data::open_calls::{nest, OpenRaw};

impl Flusher {
    /// Buffers the open-calls frame in the spool (written by the flush that follows).
    pub(super) fn spool_open_calls(&mut self) {
        if self.spool.is_none() {
            return;
        }
        let clock = self.shared.clock;
        let (regions, cfg) = (self.asm.regions.regions(), &self.shared.config);
        let tasks = &self.asm.tasks;
        let mut all = Vec::new();
        self.asm.for_each_open(|o| {
            if hidden(regions, cfg, o.region, o.task_span) {
                return;
            }
            all.push(OpenRaw {
                region: o.region,
                start_ns: clock.to_ns(o.first),
                thread: o.lane,
                tokio_id: o.task,
                task: match o.task {
                    0 => -1,
                    t => tasks.known_index(t).unwrap_or(-1),
                },
                state: o.state,
            });
        });
        let open = all.len() as u64;
        let rows = nest(all);
        if let Some(spool) = &mut self.spool {
            spool.open_calls(clock.now_ns(), open, &rows);
        }
    }
}

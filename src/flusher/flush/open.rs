//! The open-calls frame the flusher writes at every flush (see
//! [`crate::data::open_calls`]): the calls entered and not yet closed, oldest first, capped,
//! each linked to its enclosing open call. A viewer of the live spool and `recover` read the
//! latest one. Work: O(n) for n open calls, once per flush interval, and memory O(cap)
//! whatever n: 1 M live spans must not cost the flusher a list of all of them.

use super::fold::hidden;
use super::Flusher;
use crate::data::open_calls::{nest, OpenCalls, OpenRaw};

impl Flusher {
    /// Buffers the open-calls frame in the spool (written by the flush that follows).
    pub(super) fn spool_open_calls(&mut self) {
        if self.spool.is_none() && self.flight.is_none() {
            return;
        }
        let clock = self.shared.clock;
        let (regions, cfg) = (self.asm.regions.regions(), &self.shared.config);
        let tasks = &self.asm.tasks;
        // The oldest `CAP` so far, with their arrival order (`nest` keeps it for ties): cut
        // back to them whenever twice as many are held. A parent starts no later than its
        // child, so whenever the cut keeps a call it keeps its parents.
        let mut all: Vec<(OpenRaw, u64)> = Vec::new();
        let mut open = 0u64;
        let cut = |all: &mut Vec<(OpenRaw, u64)>| {
            if all.len() > OpenCalls::CAP {
                all.select_nth_unstable_by_key(OpenCalls::CAP, |(r, seq)| (r.start_ns, *seq));
                all.truncate(OpenCalls::CAP);
            }
        };
        self.asm.for_each_open(|o| {
            if hidden(regions, cfg, o.region, o.task_span) {
                return;
            }
            let raw = OpenRaw {
                region: o.region,
                start_ns: clock.to_ns(o.first),
                thread: o.lane,
                tokio_id: o.task,
                task: match o.task {
                    0 => -1,
                    t => tasks.known_index(t).unwrap_or(-1),
                },
                state: o.state,
            };
            all.push((raw, open));
            open += 1;
            if all.len() >= 2 * OpenCalls::CAP {
                cut(&mut all);
            }
        });
        cut(&mut all);
        all.sort_unstable_by_key(|&(_, seq)| seq);
        let rows = nest(all.into_iter().map(|(r, _)| r).collect());
        let now = clock.now_ns();
        if let Some(spool) = &mut self.spool {
            spool.open_calls(now, open, &rows);
        }
        if let Some(w) = self.flight.as_mut().and_then(|r| r.writer(now)) {
            w.open_calls(now, open, &rows);
        }
    }
}

//! The flusher's side of the flight recorder (`Builder::flight_recorder`): the ring's
//! flushes and rolls, cut on the time everything is folded to, a dump's plan, the triggers'
//! checks; and task edges and `follows_from` links, which go to both the spool and the ring
//! (the spool's file keeps them for the whole run; a dump, for its window).

use super::Flusher;
use crate::data::edges::{FollowsRow, Spawn, Wake};
use crate::data::rows::ThreadRow;
use crate::flusher::flight::{DumpPlan, FlightRing};
use crate::spool::SpoolWriter;

/// Bytes of the flight recorder's main spool (statistics only) above which it is rewritten.
const COMPACT_AT: u64 = 4 << 20;

impl Flusher {
    /// Watches the flight recorder's triggers (before the thread starts).
    pub(crate) fn watch(&mut self, triggers: crate::flusher::triggers::Triggers) {
        self.triggers = Some(triggers);
    }

    /// The time up to which every completed call is folded (the watermark less its margin,
    /// ns): the flight recorder's segments are cut on it, not on the time of the flush, so a
    /// flusher behind the program (a backlog) never counts as covered what it has not folded.
    pub(super) fn folded_to_ns(&self) -> i64 {
        let passed = self.watermark.saturating_sub(self.margin);
        if passed == 0 {
            return self.shared.start_ns;
        }
        self.shared.clock.to_ns(passed)
    }

    /// A dump's segments, once everything folded is in the ring (see [`Command::Dump`]).
    pub(super) fn dump_plan(&mut self) -> Result<DumpPlan, String> {
        let all = self.threads();
        let now = self.folded_to_ns();
        match &mut self.flight {
            Some(ring) => Ok(ring.for_dump(&all, now)),
            None => Err("this profiler has no flight recorder (Builder::flight_recorder)".into()),
        }
    }

    /// At a flush: the ring's share (`threads`: the rows the spool got), then the triggers.
    pub(super) fn flush_ring(&mut self, threads: &[ThreadRow]) {
        if self.flight.is_none() {
            return;
        }
        let all = self.threads();
        let now = self.folded_to_ns();
        if let Some(ring) = &mut self.flight {
            ring.flush(threads, &all, now);
        }
        if let Some(t) = &mut self.triggers {
            t.check(now);
        }
    }

    /// With the flight recorder, the spool holds statistics only: rewritten whole once it
    /// passes [`COMPACT_AT`], so it stays small on a run of days.
    pub(super) fn compact_spool(&mut self, agg: &[(u32, crate::data::stats::Stats)]) {
        let big = self
            .spool
            .as_ref()
            .is_some_and(|s| s.bytes_on_disk() > COMPACT_AT);
        if self.flight.is_none() || !big {
            return;
        }
        let all = self.threads();
        if let Some(spool) = &mut self.spool {
            if let Err(e) = spool.compact(&all, agg) {
                eprintln!(
                    "scope-profiler: cannot compact the spool {} ({e}); it keeps growing",
                    spool.path().display()
                );
            }
            self.shared.fork.spool_fd(spool.raw_fd());
        }
    }

    /// After a round: a segment full before the next flush rolls now.
    pub(super) fn roll_full_ring(&mut self) {
        if !self.flight.as_ref().is_some_and(|r| r.segment_full()) {
            return;
        }
        let (all, now) = (self.threads(), self.folded_to_ns());
        if let Some(ring) = &mut self.flight {
            ring.roll_full(&all, now);
        }
    }
}

/// The spool and the ring, either of them absent.
pub(super) struct Both<'a> {
    pub(super) spool: Option<&'a mut SpoolWriter>,
    pub(super) ring: Option<&'a mut FlightRing>,
}

impl Both<'_> {
    /// The writers that get a record of time `ns` (the ring begins a segment at it if it has
    /// none).
    fn each(&mut self, ns: i64, mut f: impl FnMut(&mut SpoolWriter)) {
        if let Some(s) = self.spool.as_deref_mut() {
            f(s);
        }
        if let Some(w) = self.ring.as_deref_mut().and_then(|r| r.writer(ns)) {
            f(w);
        }
    }

    pub(super) fn wake(&mut self, w: Wake) {
        self.each(w.tick_ns, |s| s.wake(w));
    }

    pub(super) fn spawn(&mut self, sp: Spawn) {
        self.each(sp.tick_ns, |s| s.spawn(sp));
    }

    pub(super) fn follows(&mut self, f: FollowsRow) {
        self.each(f.tick_ns, |s| s.follows(f));
    }
}

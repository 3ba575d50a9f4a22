//! Task edges and `follows_from` links go to both the spool and the flight recorder's ring
//! (the spool's file keeps them for the whole run; a dump, for its window).

use crate::data::edges::{FollowsRow, Spawn, Wake};
use crate::flusher::flight::FlightRing;
use crate::spool::SpoolWriter;

/// The spool and the ring, either of them absent.
pub(super) struct Both<'a> {
    pub(super) spool: &'a mut Option<SpoolWriter>,
    pub(super) ring: &'a mut Option<FlightRing>,
}

impl Both<'_> {
    /// The writers that get a record of time `ns` (the ring begins a segment at it if it has
    /// none).
    fn each(&mut self, ns: i64, mut f: impl FnMut(&mut SpoolWriter)) {
        if let Some(s) = self.spool.as_mut() {
            f(s);
        }
        if let Some(w) = self.ring.as_mut().and_then(|r| r.writer(ns)) {
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

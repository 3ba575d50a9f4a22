//! `follows_from` links into the spool (frame 13): each link recorded on the side channel
//! ([`crate::recording::follows`]) is resolved once the watermark has passed it, when every
//! record before it (its spans' creations) has been read: each span becomes its region and
//! first enter as they stand then. A link whose span is unknown (filtered out, or completed
//! and gone) is counted and left out; without a spool links are not kept.

use super::Flusher;
use crate::data::edges::FollowsRow;

impl Flusher {
    /// Takes the links recorded since the last round and writes those the watermark `passed`
    /// has passed (called before the round completes calls, so their spans are still there).
    pub(super) fn resolve_follows(&mut self, passed: u64) {
        self.shared.follows.take_into(&mut self.follows);
        if self.follows.is_empty() {
            return;
        }
        if self.spool.is_none() && self.flight.is_none() {
            self.follows.clear();
            return;
        }
        let clock = self.shared.clock;
        let mut links = std::mem::take(&mut self.follows);
        links.retain(|l| {
            if l.tick > passed {
                return true; // the next round's
            }
            let (a, b) = (self.asm.span_now(l.span), self.asm.span_now(l.follows));
            let (Some((span_region, a)), Some((follows_region, b))) = (a, b) else {
                self.follows_unresolved += 1;
                return false;
            };
            let ns = |t: Option<u64>| t.map_or(-1, |t| clock.to_ns(t));
            // With the flight recorder the spool holds statistics only: links go to the ring.
            let ring = self.flight.as_mut();
            let spool = if ring.is_some() {
                None
            } else {
                self.spool.as_mut()
            };
            let mut to = super::flight::Both { spool, ring };
            to.follows(FollowsRow {
                tick_ns: clock.to_ns(l.tick),
                span_region,
                span_start_ns: ns(a),
                follows_region,
                follows_start_ns: ns(b),
            });
            false
        });
        self.follows = links;
    }
}

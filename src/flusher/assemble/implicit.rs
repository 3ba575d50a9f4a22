//! Instances created at their first record, for `ScopeSubscriber`, which writes no creation
//! record.
//!
//! A `ScopeSubscriber` span id carries its callsite's index and is never reused (see
//! `crate::recording::subscriber`), so the `NEW` record that `ScopeLayer` writes says nothing
//! the id does not: leaving it out saves one record per span on the program's thread and in
//! the flusher. The instance of such an id is made when any record of it is read first,
//! whatever its lane: an enter on one thread, or the close on the thread that created it,
//! read before that enter. Either comes before the span's completion, which waits for the
//! watermark as always. Ids are unique, so a record of a known id always belongs to its one
//! instance, even one closed on the record's own lane.
//!
//! The one-step path for sync spans (`super::fast`) takes an enter flagged *fresh* (its thread
//! created the span just before) with its exit and close when no instance of the id exists
//! yet, and holds the call until the watermark has passed its close: records of the span
//! that another thread wrote meanwhile (entered before, between or after the creator's
//! enter, and read after the creator's records) have made an instance of their own by then,
//! and the held call joins it (`super::fast`), so the span is one call.
//!
//! Tokio's spawn spans are the exception: their spawn record (`NEW`, wake, site) carries the
//! task's spawn, so their other records wait for it as `ScopeLayer`'s do (the stash).

use std::sync::Arc;

use super::Assembler;
use crate::recording::lane::record::Record;
use crate::recording::subscriber::{index_of_id, SpanSites};

/// No region known yet for this callsite index.
const UNKNOWN: u32 = u32::MAX;
/// A Tokio spawn callsite: its instances are made by their spawn record.
const SPAWN: u32 = u32::MAX - 1;

/// The subscriber's callsite table and the region of each index, resolved once.
pub(crate) struct Implicit {
    sites: Arc<SpanSites>,
    regions: Vec<u32>,
}

impl Implicit {
    pub(crate) fn new(sites: Arc<SpanSites>) -> Implicit {
        Implicit {
            sites,
            regions: Vec::new(),
        }
    }
}

impl Assembler {
    /// The region of span `id`'s instances when they are made implicitly; `None` without
    /// implicit creation, for a spawn span, or an id of no known callsite.
    #[inline]
    pub(super) fn implicit_region(&mut self, id: u64) -> Option<u32> {
        let imp = self.implicit.as_mut()?;
        let index = index_of_id(id)? as usize;
        match imp.regions.get(index) {
            Some(&SPAWN) => None,
            Some(&r) if r != UNKNOWN => Some(r),
            _ => self.implicit_region_slow(index),
        }
    }

    #[cold]
    fn implicit_region_slow(&mut self, index: usize) -> Option<u32> {
        let imp = self.implicit.as_mut()?;
        let meta = imp.sites.get(index as u32)?;
        let region = if crate::recording::tokio::is_spawn_callsite(meta) {
            SPAWN
        } else {
            let addr = meta as *const tracing_core::Metadata<'static> as usize;
            self.regions.region_of(addr)?
        };
        let imp = self.implicit.as_mut()?;
        if imp.regions.len() <= index {
            imp.regions.resize(index + 1, UNKNOWN);
        }
        imp.regions[index] = region;
        (region != SPAWN).then_some(region)
    }

    /// The instance record `r` of lane `lane` belongs to, made now if it is the first record
    /// of its span (implicit creation); `None`: it waits for its `NEW` (the stash).
    #[inline]
    pub(super) fn route_or_create(&mut self, lane: u32, r: &Record) -> Option<u32> {
        if self.implicit.is_none() {
            return self.route(lane, r);
        }
        // Ids are never reused: the newest instance is the only one.
        if let Some(k) = self.insts.newest(r.id) {
            return Some(k);
        }
        let region = self.implicit_region(r.id)?;
        Some(self.insts.create(r.id, region))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recording::region::Callsites;
    // The other assembler tests' callsite (`r`), and their drain to the end.
    use crate::flusher::assemble::tests::{next_drain as drain, CS, META};
    use tracing_core::{Kind, Level, Metadata};

    static SPAWN_META: Metadata<'static> = tracing_core::metadata! {
        name: "runtime.spawn",
        target: "tokio::task",
        level: Level::INFO,
        fields: &[],
        callsite: &CS,
        kind: Kind::SPAN,
    };

    /// An assembler of a subscriber that registered `META` (index 0) and `SPAWN_META` (1).
    fn assembler() -> Assembler {
        let callsites = Arc::new(Callsites::default());
        callsites.register(&META);
        callsites.register(&SPAWN_META);
        let sites = Arc::new(SpanSites::new());
        assert_eq!(sites.register(&META), Some(0));
        assert_eq!(sites.register(&SPAWN_META), Some(1));
        let mut a = Assembler::new(callsites);
        a.implicit = Some(Implicit::new(sites));
        a
    }

    /// A subscriber's id of callsite index `index` (see `recording::subscriber::spans`).
    fn id(index: u64, seq: u64) -> u64 {
        (index + 1) << 44 | seq
    }

    #[test]
    fn a_fresh_sync_span_is_one_call_without_a_creation_record() {
        let mut a = assembler();
        let mut out = vec![];
        let s = id(0, 5);
        let recs = [
            Record::enter_fresh(s, 10),
            Record::exit(s, 20),
            Record::close(s),
        ];
        a.feed(0, &recs, &mut out);
        drain(&mut a, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].start, out[0].end, out[0].polls), (10, 20, 1));
        assert_eq!(a.regions.regions()[out[0].region as usize].name, "r");
        assert_eq!(a.open_instances(), 0);
    }

    #[test]
    fn a_close_read_before_the_enters_of_another_lane_ends_one_call() {
        let mut a = assembler();
        let mut out = vec![];
        let s = id(0, 6);
        // Created and closed on lane 0, entered on lane 1, whose records are read later.
        a.feed(0, &[Record::close(s)], &mut out);
        a.feed(1, &[Record::enter(s, 10), Record::exit(s, 20)], &mut out);
        drain(&mut a, &mut out);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!((out[0].start, out[0].end, out[0].lane), (10, 20, 1));
        assert_eq!(a.open_instances(), 0);
    }

    #[test]
    fn enters_on_two_lanes_are_one_call() {
        let mut a = assembler();
        let mut out = vec![];
        let s = id(0, 7);
        a.feed(1, &[Record::enter(s, 10), Record::exit(s, 15)], &mut out);
        let last = [Record::enter(s, 20), Record::exit(s, 30), Record::close(s)];
        a.feed(0, &last, &mut out);
        drain(&mut a, &mut out);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!((out[0].start, out[0].end, out[0].polls), (10, 30, 2));
    }

    #[test]
    fn a_span_never_entered_is_no_call_and_a_lost_one_is_counted() {
        let mut a = assembler();
        let mut out = vec![];
        a.feed(0, &[Record::close(id(0, 8))], &mut out);
        // Everything of span 9 lost: its marker alone says so.
        a.feed(0, &[Record::lost(id(0, 9), true)], &mut out);
        drain(&mut a, &mut out);
        assert!(out.is_empty(), "{out:?}");
        assert_eq!(a.dropped_calls, 1);
        assert_eq!(a.open_instances(), 0);
    }

    #[test]
    fn a_spawn_span_waits_for_its_creation_record() {
        let mut a = assembler();
        let mut out = vec![];
        let s = id(1, 1);
        a.feed(1, &[Record::enter(s, 10), Record::exit(s, 20)], &mut out);
        assert_eq!(a.open_instances(), 0, "not made from an enter: stashed");
        a.feed(
            0,
            &[Record::new_span(s, &SPAWN_META), Record::close(s)],
            &mut out,
        );
        drain(&mut a, &mut out);
        assert_eq!(a.orphans, 0);
        assert_eq!(out.len(), 1, "its stashed poll replayed into it: {out:?}");
        assert_eq!((out[0].start, out[0].end, out[0].lane), (10, 20, 1));
        assert_eq!(a.open_instances(), 0);
    }
}

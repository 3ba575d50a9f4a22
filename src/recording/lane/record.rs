//! The 24-byte slot record the hot path appends: span id, raw TSC ticks and one tagged word.
//!
//! Seven kinds, tagged in the word's low three bits. One per `tracing` span callback: `NEW`
//! carries the address of the callsite's `&'static Metadata` (8-aligned, so the low three bits
//! are free; the flusher only looks it up, see `region::Callsites`), `ENTER` carries the Tokio
//! task id (shifted left by three; 0 = outside a task), `EXIT` and `CLOSE` carry nothing else.
//! Three more: `AUX` carries a sink's 56-bit payload for the span (e.g. a CUDA event pair) to
//! the flusher, `EVENT` the address of a `tracing` event's callsite (line timing), and `LOST`
//! marks where the owner had to drop a record of the span. Only `ENTER` and `EXIT` read the clock: a call is
//! first enter to last exit, and an id is never reused while its span is open, so `NEW` and
//! `CLOSE` need no time; they store 0.

use tracing_core::Metadata;

/// Kind tag of a span creation record.
pub(crate) const NEW: u64 = 0;
/// Kind tag of an enter (start of a poll).
pub(crate) const ENTER: u64 = 1;
/// Kind tag of an exit (end of a poll).
pub(crate) const EXIT: u64 = 2;
/// Kind tag of a span close (end of the call).
pub(crate) const CLOSE: u64 = 3;
/// Kind tag of a sink payload attached to the span's current call.
pub(crate) const AUX: u64 = 4;
/// Kind tag of a line-timing checkpoint: a `tracing` event inside the span (`Builder::line_timing`).
/// The word holds the event callsite's address, which the flusher only looks up among the
/// callsites the layer registered (see [`crate::flusher::lines`]), never dereferences.
pub(crate) const EVENT: u64 = 5;
/// Kind tag of a lost-record marker: a record of this span could not be buffered here (payload
/// 1: the lost record was its close). Written by the owner, in stream order, as soon as it has
/// a buffer again; the flusher drops the span's call whole (see `lane::writer`).
pub(crate) const LOST: u64 = 6;
const KIND_MASK: u64 = 7;
const KIND_BITS: u32 = 3;

/// One slot of a lane buffer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub(crate) struct Record {
    /// `tracing` span id (`Id::into_u64`).
    pub id: u64,
    /// Raw clock ticks ([`crate::recording::clock::Clock::raw`]).
    pub tsc: u64,
    /// The tagged word: the kind in the low three bits, the payload (callsite or event
    /// address, task id, sink payload, lost-close flag) above.
    pub word: u64,
}

impl Record {
    /// A creation record for a span of callsite `meta`.
    #[inline(always)]
    pub(crate) fn new_span(id: u64, tsc: u64, meta: &'static Metadata<'static>) -> Record {
        let ptr = meta as *const Metadata<'static> as u64;
        debug_assert_eq!(ptr & KIND_MASK, 0);
        Record {
            id,
            tsc,
            word: ptr | NEW,
        }
    }

    /// An enter record; `task` is the Tokio task id or 0.
    #[inline(always)]
    pub(crate) fn enter(id: u64, tsc: u64, task: u64) -> Record {
        Record {
            id,
            tsc,
            word: (task << KIND_BITS) | ENTER,
        }
    }

    /// A sink payload (at most 56 bits) for span `id`.
    #[inline(always)]
    pub(crate) fn aux(id: u64, tsc: u64, payload: u64) -> Record {
        Record {
            id,
            tsc,
            word: (payload << KIND_BITS) | AUX,
        }
    }

    /// A line-timing checkpoint of span `id`: the event callsite `site` fired at `tsc`.
    #[inline(always)]
    pub(crate) fn event(id: u64, tsc: u64, site: &'static Metadata<'static>) -> Record {
        let ptr = site as *const Metadata<'static> as u64;
        debug_assert_eq!(ptr & KIND_MASK, 0);
        Record {
            id,
            tsc,
            word: ptr | EVENT,
        }
    }

    /// The event callsite address of an `EVENT` record (a lookup key, not to be dereferenced).
    #[inline(always)]
    pub(crate) fn site(&self) -> usize {
        (self.word & !KIND_MASK) as usize
    }

    /// A lost-record marker for span `id` (`closed`: the lost record was its close).
    #[inline(always)]
    pub(crate) fn lost(id: u64, closed: bool) -> Record {
        Record {
            id,
            tsc: 0,
            word: (u64::from(closed) << KIND_BITS) | LOST,
        }
    }

    /// The payload of an `AUX` record.
    #[inline(always)]
    pub(crate) fn payload(&self) -> u64 {
        self.word >> KIND_BITS
    }

    /// An exit or close record.
    #[inline(always)]
    pub(crate) fn plain(kind: u64, id: u64, tsc: u64) -> Record {
        Record {
            id,
            tsc,
            word: kind,
        }
    }

    /// The kind tag.
    #[inline(always)]
    pub(crate) fn kind(&self) -> u64 {
        self.word & KIND_MASK
    }

    /// The Tokio task id of an enter record (0 = none).
    #[inline(always)]
    pub(crate) fn task(&self) -> u64 {
        self.word >> KIND_BITS
    }

    /// The callsite address of a creation record. It is only an address: the flusher looks it
    /// up among the callsites the layer registered (`region::Callsites`) and never
    /// dereferences it, so a torn record cannot send it to a wild pointer.
    #[inline(always)]
    pub(crate) fn callsite_addr(&self) -> usize {
        (self.word & !KIND_MASK) as usize
    }

    /// Whether the kind tag is one the layer writes (a torn record may carry another).
    #[inline(always)]
    pub(crate) fn kind_is_valid(&self) -> bool {
        self.kind() <= EVENT || self.kind() == LOST
    }
}

/// The numeric id of a Tokio task, 0 outside a task.
///
/// `tokio::task::Id` has no public integer accessor; its derived `Hash` writes exactly its
/// `NonZeroU64`, which this hasher captures (< 1 ns, no `tokio_unstable`).
#[inline(always)]
pub(crate) fn current_task_id() -> u64 {
    use std::hash::{Hash, Hasher};
    struct Capture(u64);
    impl Hasher for Capture {
        fn finish(&self) -> u64 {
            self.0
        }
        fn write(&mut self, bytes: &[u8]) {
            for &b in bytes {
                self.0 = (self.0 << 8) | u64::from(b);
            }
        }
        fn write_u64(&mut self, v: u64) {
            self.0 = v;
        }
    }
    match tokio::task::try_id() {
        Some(id) => {
            let mut h = Capture(0);
            id.hash(&mut h);
            h.0 & (u64::MAX >> KIND_BITS)
        }
        None => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Cs;
    impl tracing_core::Callsite for Cs {
        fn set_interest(&self, _: tracing_core::Interest) {}
        fn metadata(&self) -> &Metadata<'_> {
            unreachable!("not registered")
        }
    }
    static CS: Cs = Cs;

    #[test]
    fn tags_round_trip() {
        let e = Record::enter(7, 100, 42);
        assert_eq!((e.kind(), e.task(), e.id, e.tsc), (ENTER, 42, 7, 100));
        assert_eq!(Record::plain(EXIT, 1, 2).kind(), EXIT);
        assert_eq!(Record::plain(CLOSE, 1, 2).kind(), CLOSE);
        let a = Record::aux(3, 4, 0xAB_CDEF);
        assert_eq!((a.kind(), a.payload()), (AUX, 0xAB_CDEF));
        let site: &'static Metadata<'static> = Box::leak(Box::new(Metadata::new(
            "e",
            "t",
            tracing_core::Level::INFO,
            None,
            None,
            None,
            tracing_core::field::FieldSet::new(&[], tracing_core::identify_callsite!(&CS)),
            tracing_core::Kind::EVENT,
        )));
        let ev = Record::event(9, 10, site);
        assert_eq!((ev.kind(), ev.site()), (EVENT, site as *const _ as usize));
        assert_eq!(std::mem::size_of::<Record>(), 24);
    }

    #[test]
    fn task_ids_are_tokio_ids() {
        assert_eq!(current_task_id(), 0);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let (a, b) = rt.block_on(async {
            let h = tokio::spawn(async { (current_task_id(), tokio::task::id().to_string()) });
            h.await.unwrap()
        });
        assert_eq!(a.to_string(), b);
        assert_ne!(a, 0);
    }
}

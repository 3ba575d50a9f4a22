//! The 16-byte slot record the hot path appends: a 64-bit key (the span id, mostly) and one
//! tagged word.
//!
//! Sixteen bytes, so a sync span (`NEW`, `ENTER`, `EXIT`, `CLOSE`) fills exactly one 64-byte
//! cache line: half the memory traffic of the earlier 24-byte slots once the task id left the
//! `ENTER` record. Eight kinds, tagged in the word's low three bits; the payload sits above:
//!
//! | kind | `id` | payload |
//! |---|---|---|
//! | `NEW` | span id | address of the callsite's `&'static Metadata` (8-aligned, so the low bits are free; the flusher only looks it up, see `region::Callsites`) |
//! | `ENTER` | span id | clock ticks; bit 60 set: the span's first record, written by the thread that created it just before (`ScopeSubscriber`, which writes no `NEW`) |
//! | `EXIT` | span id | clock ticks |
//! | `CLOSE` | span id | nothing: a call ends at its last exit, so a close needs no time |
//! | `AUX` | span id | a sink's 61-bit payload for the span (e.g. a CUDA event pair) |
//! | `EVENT` | span id | clock ticks of a line-timing checkpoint; the next slot, always in the same chunk, is its [`event_site`](Record::event_site) |
//! | `LOST` | span id | flags of the lost records (bit 0: the span's close was among them, bit 1: an in-call record, so the span was entered), and the callsite address when its creation (`NEW`) was among them, else 0 |
//! | `TASK` | Tokio task id (0: none) | 0: the lane's enters from here on run in this task |
//! | `TASK` | span id of a Tokio task's `runtime.spawn` span | clock ticks (never 0): a *wake* of that task (see [`crate::recording::tokio`]) |
//!
//! A Tokio task's spawn is three slots written together: its `NEW`, a wake at the spawn (a
//! task is runnable from its spawn on) and a site slot: kind `EVENT`, payload 0, `id` the
//! interned spawn site (the shape of a checkpoint's site slot, which never follows a wake).
//!
//! The task id is written only when it changes on a lane (`TASK`), not in every enter: a
//! thread running one task's spans, or no task at all, pays nothing for it. Ticks are raw
//! clock values ([`crate::recording::clock::ticks`]), below 2^60 (the TSC of a machine up for
//! 12 years at 3 GHz).

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
/// Kind tag of a line-timing checkpoint: a `tracing` event inside the span
/// (`Builder::line_timing`), followed by its site slot.
pub(crate) const EVENT: u64 = 5;
/// Kind tag of a lost-record marker: records of this span could not be buffered here (see
/// [`Record::lost_marker`]). Left by the owner on its lane's cold list at the loss, at its
/// position in the stream; the flusher reads it there and drops the span's call whole (see
/// `lane::writer`).
pub(crate) const LOST: u64 = 6;
/// Kind tag of a task switch: the lane's following enters run in Tokio task `id` (0: none).
pub(crate) const TASK: u64 = 7;
const KIND_MASK: u64 = 7;
const KIND_BITS: u32 = 3;
/// An `ENTER`'s flag above its ticks: the span's first record, by its creator (see the table).
const FRESH: u64 = 1 << 60;
/// The largest payload a record holds (61 bits).
pub(crate) const PAYLOAD_MAX: u64 = u64::MAX >> KIND_BITS;

/// One slot of a lane buffer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub(crate) struct Record {
    /// The span id (`Id::into_u64`); the task id of a `TASK` record; the event callsite's
    /// address in an event's site slot.
    pub id: u64,
    /// The tagged word: the kind in the low three bits, the payload above.
    pub word: u64,
}

impl Record {
    #[inline(always)]
    const fn tagged(id: u64, payload: u64, kind: u64) -> Record {
        Record {
            id,
            word: (payload << KIND_BITS) | kind,
        }
    }

    /// A creation record for a span of callsite `meta`.
    #[inline(always)]
    pub(crate) fn new_span(id: u64, meta: &'static Metadata<'static>) -> Record {
        let ptr = meta as *const Metadata<'static> as u64;
        debug_assert_eq!(ptr & KIND_MASK, 0);
        Record {
            id,
            word: ptr | NEW,
        }
    }

    /// An enter record at `ticks`.
    #[inline(always)]
    pub(crate) const fn enter(id: u64, ticks: u64) -> Record {
        Record::tagged(id, ticks, ENTER)
    }

    /// The enter record of a span its thread created just before, at `ticks`: its first
    /// record anywhere (`ScopeSubscriber` writes no `NEW`; see `flusher::assemble::fast`).
    #[inline(always)]
    pub(crate) const fn enter_fresh(id: u64, ticks: u64) -> Record {
        Record::tagged(id, ticks | FRESH, ENTER)
    }

    /// Whether this is the enter of a span its thread created just before.
    #[inline(always)]
    pub(crate) const fn is_fresh(&self) -> bool {
        self.kind() == ENTER && self.payload() & FRESH != 0
    }

    /// An exit record at `ticks`.
    #[inline(always)]
    pub(crate) const fn exit(id: u64, ticks: u64) -> Record {
        Record::tagged(id, ticks, EXIT)
    }

    /// A close record.
    #[inline(always)]
    pub(crate) const fn close(id: u64) -> Record {
        Record::tagged(id, 0, CLOSE)
    }

    /// A sink payload (at most [`PAYLOAD_MAX`]) for span `id`.
    #[inline(always)]
    pub(crate) const fn aux(id: u64, payload: u64) -> Record {
        Record::tagged(id, payload & PAYLOAD_MAX, AUX)
    }

    /// A line-timing checkpoint of span `id` at `ticks`; [`event_site`](Self::event_site)
    /// must follow it in the same chunk.
    #[inline(always)]
    pub(crate) const fn event(id: u64, ticks: u64) -> Record {
        Record::tagged(id, ticks, EVENT)
    }

    /// The slot after an `EVENT`: the event callsite `site` (an address the flusher only looks
    /// up among the callsites the layer registered, see [`crate::flusher::lines`]). Its kind
    /// is `EVENT` with payload 0, which no checkpoint has (its ticks are never 0).
    #[inline(always)]
    pub(crate) fn event_site(site: &'static Metadata<'static>) -> Record {
        Record::tagged(site as *const Metadata<'static> as u64, 0, EVENT)
    }

    /// A lost-record marker for span `id` of an entered span (`closed`: its close was among
    /// the lost records).
    #[cfg(test)]
    pub(crate) const fn lost(id: u64, closed: bool) -> Record {
        Record::lost_marker(id, 0, true, closed)
    }

    /// A lost-record marker for span `id`: `site` is the callsite address when the span's
    /// creation record was among the lost ones (0 if not), `entered` when a record inside a
    /// call was (an enter, exit, checkpoint or sink payload), `closed` when its close was.
    #[inline(always)]
    pub(crate) const fn lost_marker(id: u64, site: usize, entered: bool, closed: bool) -> Record {
        let flags = (entered as u64) << 1 | closed as u64;
        Record::tagged(id, (site as u64 & !KIND_MASK) | flags, LOST)
    }

    /// A lost marker's: whether the span's close was lost.
    #[inline(always)]
    pub(crate) const fn lost_closed(&self) -> bool {
        self.payload() & 1 != 0
    }

    /// A lost marker's: whether a record inside a call was lost (the span was entered).
    #[inline(always)]
    pub(crate) const fn lost_entered(&self) -> bool {
        self.payload() & 2 != 0
    }

    /// A lost marker's: the callsite address of a span whose creation was lost (0: it was not).
    #[inline(always)]
    pub(crate) const fn lost_site(&self) -> usize {
        (self.payload() & !KIND_MASK) as usize
    }

    /// A task switch: the lane's next enters run in Tokio task `task` (0: none).
    #[inline(always)]
    pub(crate) const fn task(task: u64) -> Record {
        Record::tagged(task, 0, TASK)
    }

    /// A wake of the Tokio task whose `runtime.spawn` span is `span`, at `ticks` (never 0).
    #[inline(always)]
    pub(crate) const fn wake(span: u64, ticks: u64) -> Record {
        Record::tagged(span, ticks, TASK)
    }

    /// The third slot of a spawn: the interned spawn site `site` (see the module docs).
    #[inline(always)]
    pub(crate) const fn spawn_site(site: u32) -> Record {
        Record::tagged(site as u64, 0, EVENT)
    }

    /// Whether this is a wake (a `TASK` record with ticks).
    #[inline(always)]
    pub(crate) const fn is_wake(&self) -> bool {
        self.kind() == TASK && self.payload() != 0
    }

    /// The kind tag.
    #[inline(always)]
    pub(crate) const fn kind(&self) -> u64 {
        self.word & KIND_MASK
    }

    /// The payload above the kind: ticks (`ENTER`, `EXIT`, `EVENT`), the sink payload
    /// (`AUX`), the lost-close flag (`LOST`).
    #[inline(always)]
    pub(crate) const fn payload(&self) -> u64 {
        self.word >> KIND_BITS
    }

    /// The clock ticks of a record that has them (`ENTER`, `EXIT`, a checkpoint, a wake),
    /// else 0.
    #[inline(always)]
    pub(crate) const fn ticks(&self) -> u64 {
        match self.kind() {
            ENTER | EXIT | EVENT | TASK => self.payload() & (FRESH - 1),
            _ => 0,
        }
    }

    /// The callsite address of a creation record. It is only an address: the flusher looks it
    /// up among the callsites the layer registered (`region::Callsites`) and never
    /// dereferences it, so a torn record cannot send it to a wild pointer.
    #[inline(always)]
    pub(crate) const fn callsite_addr(&self) -> usize {
        (self.word & !KIND_MASK) as usize
    }

    /// Whether this is the site slot that follows an `EVENT` record.
    #[inline(always)]
    pub(crate) const fn is_event_site(&self) -> bool {
        self.kind() == EVENT && self.payload() == 0
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
            h.0
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
        assert_eq!(std::mem::size_of::<Record>(), 16);
        let e = Record::enter(7, 100);
        assert_eq!((e.kind(), e.ticks(), e.id), (ENTER, 100, 7));
        assert!(!e.is_fresh());
        let f = Record::enter_fresh(7, FRESH - 1);
        assert_eq!(
            (f.kind(), f.ticks(), f.is_fresh()),
            (ENTER, FRESH - 1, true)
        );
        let x = Record::exit(1, FRESH - 1);
        assert_eq!(
            (x.kind(), x.ticks(), x.is_fresh()),
            (EXIT, FRESH - 1, false)
        );
        assert_eq!(
            (Record::close(1).kind(), Record::close(1).ticks()),
            (CLOSE, 0)
        );
        let a = Record::aux(3, 0xAB_CDEF);
        assert_eq!((a.kind(), a.payload(), a.ticks()), (AUX, 0xAB_CDEF, 0));
        let t = Record::task(u64::MAX);
        assert_eq!(
            (t.kind(), t.id, t.ticks(), t.is_wake()),
            (TASK, u64::MAX, 0, false)
        );
        let w = Record::wake(9, 1234);
        assert_eq!(
            (w.kind(), w.id, w.ticks(), w.is_wake()),
            (TASK, 9, 1234, true)
        );
        let site = Record::spawn_site(3);
        assert!(site.is_event_site() && site.id == 3);
        let l = Record::lost(5, true);
        assert_eq!(
            (l.kind(), l.lost_closed(), l.lost_entered(), l.lost_site()),
            (LOST, true, true, 0)
        );
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
        let ev = Record::event(9, 10);
        assert!(!ev.is_event_site());
        assert_eq!((ev.kind(), ev.ticks()), (EVENT, 10));
        let s = Record::event_site(site);
        assert!(s.is_event_site());
        assert_eq!(s.id, site as *const _ as u64);
        let m = Record::lost_marker(4, site as *const _ as usize, false, true);
        assert_eq!(
            (m.lost_closed(), m.lost_entered(), m.lost_site()),
            (true, false, site as *const _ as usize)
        );
        let n = Record::new_span(4, site);
        assert_eq!(
            (n.kind(), n.callsite_addr()),
            (NEW, site as *const _ as usize)
        );
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

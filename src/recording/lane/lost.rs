//! A lane's lost-record markers: what its owner could not buffer, each at its place in the
//! stream, for the flusher to read there (issue 34).
//!
//! A record is lost only when its owner has no chunk: the one it filled was handed off, and
//! the pool gave none. Everything the owner wrote before the loss is therefore in chunks
//! numbered below the writer's next sequence number, and everything after it in that chunk or
//! later ones: a marker's place in the stream is that number ([`Pending::at`]), "before chunk
//! `at`". The owner leaves the marker on this cold list at once (a lock, on the loss path
//! only), so the flusher never waits for the thread to get a buffer again, exit, or run its
//! thread-local destructors: a parked thread holds nothing back, and the watermark never
//! passes a loss the flusher has not read (the loss is on the list before the lane shows any
//! later record). The flusher takes the list after the chunks of a drain and feeds each marker
//! before the first record of chunk `at` (see [`super::Lane::drain`]).
//!
//! Consecutive lost records of one span instance share a marker (nothing was written between
//! them: the same `at`, and the marker still on the list). A span whose every record on this
//! lane was lost, creation to close, and that was entered here, needs no marker: nothing of it
//! is in this lane's stream, and it is counted as a dropped call at once. One not entered here
//! keeps its marker: it may have been entered on another lane, whose records then find the
//! instance the marker makes, and the call counts once, there.

use super::record::{Record, AUX, CLOSE, ENTER, EVENT, EXIT, NEW};

/// A marker waiting for the flusher: records of span `id` were lost before chunk `at`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pending {
    /// The marker's place: before the first record of the chunk with this sequence number.
    pub at: u64,
    pub id: u64,
    /// The callsite address when the span's creation was among the lost records (0: not).
    pub site: usize,
    /// A record inside a call was among them (the span was entered).
    pub entered: bool,
    /// The span's close was among them.
    pub closed: bool,
}

impl Pending {
    /// The marker record the flusher reads.
    pub(crate) fn record(&self) -> Record {
        Record::lost_marker(self.id, self.site, self.entered, self.closed)
    }
}

/// The markers of one lane not taken by the flusher yet, oldest first.
#[derive(Debug, Default)]
pub(crate) struct LostList(std::sync::Mutex<Vec<Pending>>);

impl LostList {
    /// The owner lost `rec` at place `at` (its next chunk's sequence number). Returns true
    /// when this completed a span lost whole on this lane that was entered: a dropped call
    /// with no marker (the caller counts it).
    #[cold]
    pub(crate) fn note(&self, at: u64, rec: &Record) -> bool {
        let kind = rec.kind();
        let closed = kind == CLOSE;
        let entered = matches!(kind, ENTER | EXIT | EVENT | AUX);
        let mut list = self.0.lock().unwrap_or_else(|e| e.into_inner());
        // After a close the id may be reused, so a closed marker is never extended.
        let last = list
            .last_mut()
            .filter(|p| p.at == at && p.id == rec.id && !p.closed);
        if let Some(last) = last {
            last.closed = closed;
            last.entered |= entered;
            if closed && last.site != 0 && last.entered {
                // Creation to close, all lost here: nothing of it is in this lane's stream.
                list.pop();
                return true;
            }
            return false;
        }
        let site = if kind == NEW { rec.callsite_addr() } else { 0 };
        list.push(Pending {
            at,
            id: rec.id,
            site,
            entered,
            closed,
        });
        false
    }

    /// Markers on the list now (the model tests follow which ones a loss made).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Flusher: moves every marker left so far to the end of `to`.
    pub(crate) fn take_into(&self, to: &mut std::collections::VecDeque<Pending>) {
        let mut list = self.0.lock().unwrap_or_else(|e| e.into_inner());
        to.extend(list.drain(..));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    fn taken(l: &LostList) -> Vec<Pending> {
        let mut v = VecDeque::new();
        l.take_into(&mut v);
        v.into()
    }

    #[test]
    fn consecutive_losses_of_a_span_share_a_marker_and_a_whole_one_needs_none() {
        let l = LostList::default();
        assert!(!l.note(3, &Record::enter(7, 0)));
        assert!(!l.note(3, &Record::exit(7, 1)));
        assert!(!l.note(3, &Record::close(7)));
        // Reused id after the close: a marker of its own.
        assert!(!l.note(3, &Record::exit(7, 2)));
        // Another place: another marker, even for the same instance.
        assert!(!l.note(4, &Record::close(7)));
        let got = taken(&l);
        let flags: Vec<_> = got.iter().map(|p| (p.at, p.entered, p.closed)).collect();
        assert_eq!(flags, [(3, true, true), (3, true, false), (4, false, true)]);
        // Creation to close lost here: counted, no marker; never entered: neither.
        let site = 0x1000;
        let new = Record {
            id: 9,
            word: site as u64,
        };
        assert!(!l.note(5, &new));
        assert!(!l.note(5, &Record::enter(9, 0)));
        assert!(l.note(5, &Record::close(9)), "an entered span lost whole");
        assert!(taken(&l).is_empty());
        // Not entered here: the marker stays (another lane may have entered it).
        assert!(!l.note(5, &new));
        assert!(!l.note(5, &Record::close(9)));
        let kept = taken(&l);
        assert_eq!(
            kept.iter()
                .map(|p| (p.site, p.entered, p.closed))
                .collect::<Vec<_>>(),
            [(site, false, true)]
        );
        // Taken meanwhile: the close gets a marker of its own.
        assert!(!l.note(6, &new));
        let first = taken(&l);
        assert_eq!(first[0].site, site);
        assert!(!l.note(6, &Record::close(9)));
        let second = taken(&l);
        assert_eq!((second[0].site, second[0].closed), (0, true));
    }
}

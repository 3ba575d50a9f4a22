//! `follows_from` links (`Span::follows_from`), which a program records rarely: a side
//! channel beside the lanes, not a record kind of theirs. A bounded list under a mutex that
//! the flusher takes whole once per round; a link beyond the bound is counted and dropped.
//! The flusher resolves each link's spans once the watermark has passed it (see
//! `crate::flusher::flush`).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Links held at most between two rounds of the flusher.
pub(crate) const CAP: usize = 65_536;

/// One link as recorded: span `span` follows from span `follows`, at `tick` (raw ticks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Link {
    pub span: u64,
    pub follows: u64,
    pub tick: u64,
}

/// The links recorded since the flusher last took them.
#[derive(Debug, Default)]
pub(crate) struct Follows {
    links: Mutex<Vec<Link>>,
    /// Links waiting (so that an empty channel costs the flusher one load).
    waiting: AtomicUsize,
    /// Links dropped because the list was full.
    pub(crate) dropped: AtomicU64,
}

impl Follows {
    /// Records that span `span` follows from span `follows` (cold: a lock and a push).
    pub(crate) fn record(&self, span: u64, follows: u64) {
        let tick = crate::recording::clock::ticks();
        let mut links = self.links.lock().unwrap_or_else(|e| e.into_inner());
        if links.len() >= CAP {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        links.push(Link {
            span,
            follows,
            tick,
        });
        self.waiting.store(links.len(), Ordering::Release);
    }

    /// Moves the links recorded so far to the end of `out` (nothing, and no lock, when there
    /// are none).
    pub(crate) fn take_into(&self, out: &mut Vec<Link>) {
        if self.waiting.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut links = self.links.lock().unwrap_or_else(|e| e.into_inner());
        out.append(&mut links);
        self.waiting.store(0, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_taken_once_and_bounded() {
        let f = Follows::default();
        let mut out = Vec::new();
        f.take_into(&mut out);
        assert!(out.is_empty());
        for k in 0..CAP as u64 + 3 {
            f.record(k, k + 1);
        }
        assert_eq!(f.dropped.load(Ordering::Relaxed), 3);
        f.take_into(&mut out);
        assert_eq!(out.len(), CAP);
        assert_eq!((out[1].span, out[1].follows), (1, 2));
        assert!(out[0].tick <= out[CAP - 1].tick);
        f.take_into(&mut out);
        assert_eq!(out.len(), CAP);
    }
}

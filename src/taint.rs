//! Calls that lost a record are dropped whole.
//!
//! When a recording thread cannot buffer a record (no chunk within the backpressure bound, or
//! `lossy` mode), the layer marks the span here (cold path). The flusher takes the marks at the
//! start of every complete drain and discards everything of a marked span: the records it has
//! already assembled, any that arrive later, and the call itself, which is counted as one
//! dropped call. So a profile never holds half a call, and never a close without its enter.
//! A mark is forgotten one complete drain after the span's close (seen or itself dropped), the
//! same delay after which calls are completed, by which time no record of it is in flight.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// Spans marked by recording threads, waiting for the flusher.
#[derive(Default)]
pub(crate) struct Taint {
    any: AtomicBool,
    marks: Mutex<Vec<Mark>>,
}

/// One lost record: the span it belonged to, and whether it was the span's close.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Mark {
    pub id: u64,
    pub closed: bool,
}

impl Taint {
    /// Marks span `id` as having lost a record (`closed`: the lost record was its close).
    #[cold]
    pub(crate) fn mark(&self, id: u64, closed: bool) {
        self.marks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Mark { id, closed });
        self.any.store(true, Ordering::Release);
    }

    /// Takes every mark made so far (flusher).
    pub(crate) fn take(&self) -> Vec<Mark> {
        if !self.any.swap(false, Ordering::Acquire) {
            return Vec::new();
        }
        std::mem::take(&mut *self.marks.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

//! The runtime switch: [`FlushGuard::pause`](crate::FlushGuard::pause) / [`resume`](crate::FlushGuard::resume), or a cloneable
//! [`Switch`] for services that toggle profiling from elsewhere.
//!
//! While paused every callback of the layer returns after one relaxed atomic load, so the layer
//! costs next to nothing beside the other layers of the subscriber (which keep seeing every span
//! and event). A call that was running when the profiler paused, or that started while it was
//! paused, has lost some of its records; it is reported not at all rather than in part: the
//! flusher drops every call whose time overlaps a pause window, and at its first drain after a
//! pause began it marks every call still open as not to be reported (a call created just after
//! a short pause may be left out with them; none is ever reported in part). Records of a span
//! created while paused and entered after `resume` have no creation record and are counted as
//! orphans.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::recording::shared::Shared;

/// The shared pause flag and the pause windows (raw clock ticks; end `u64::MAX` while paused).
#[derive(Debug, Default)]
pub(crate) struct PauseState {
    /// Read by every callback (also set for good in `Mode::Disabled`).
    pub paused: AtomicBool,
    /// `Mode::Disabled`: `resume` does nothing.
    disabled: AtomicBool,
    windows: Mutex<Vec<(u64, u64)>>,
}

impl PauseState {
    /// Sets the flag for good (`Mode::Disabled`), so the callbacks test one flag only.
    pub(crate) fn disable(&self) {
        self.disabled.store(true, Ordering::Relaxed);
        self.paused.store(true, Ordering::SeqCst);
    }

    fn pause(&self, now: u64) {
        let mut w = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        if !self.paused.load(Ordering::Relaxed) {
            // The window opens before the flag is set: every skipped record is inside it.
            w.push((now, u64::MAX));
            self.paused.store(true, Ordering::SeqCst);
        }
    }

    fn resume(&self, clock: &crate::recording::clock::Clock) {
        let mut w = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        if self.paused.load(Ordering::Relaxed) && !self.disabled.load(Ordering::Relaxed) {
            self.paused.store(false, Ordering::SeqCst);
            // ... and closes after the flag is cleared: every skipped record is inside it.
            let now = clock.raw();
            if let Some(last) = w.last_mut() {
                last.1 = now;
            }
        }
    }

    /// How many times the profiler has paused.
    pub(crate) fn windows_len(&self) -> usize {
        self.windows.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// The pause windows so far (for the flusher; a handful per run).
    pub(crate) fn windows(&self) -> Vec<(u64, u64)> {
        self.windows
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// Whether a call from `start` to `end` (ticks) overlaps one of `windows`.
pub(crate) fn overlaps(windows: &[(u64, u64)], start: u64, end: u64) -> bool {
    windows.iter().any(|&(a, b)| start <= b && end >= a)
}

/// A cloneable handle that pauses and resumes one profiler (see [`FlushGuard::switch`](crate::FlushGuard::switch)).
///
/// ```
/// # use scope_profiler::ScopeLayer;
/// let (_layer, guard) = ScopeLayer::builder().no_output().summary(false).build()?;
/// let switch = guard.switch();
/// std::thread::spawn(move || switch.pause()).join().unwrap();
/// assert!(guard.is_paused());
/// guard.resume();
/// # Ok::<(), scope_profiler::Error>(())
/// ```
#[derive(Clone)]
pub struct Switch {
    shared: Arc<Shared>,
}

impl Switch {
    pub(crate) fn new(shared: Arc<Shared>) -> Switch {
        Switch { shared }
    }

    /// Stops recording until [`resume`](Self::resume). Idempotent.
    pub fn pause(&self) {
        if self.shared.fork.is_forked_child() {
            return; // off for good there (`crate::fork`); its lock may be the parent's
        }
        self.shared.pause.pause(self.shared.clock.raw());
    }

    /// Records again. Idempotent. (Never in a process forked from the one that built the
    /// profiler: recording stays off there.)
    pub fn resume(&self) {
        if self.shared.fork.is_forked_child() {
            return;
        }
        self.shared.pause.resume(self.shared.clock);
    }

    /// Whether the profiler is paused (always `true` in `Mode::Disabled`).
    pub fn is_paused(&self) -> bool {
        self.shared.pause.paused.load(Ordering::Relaxed)
    }
}

impl std::fmt::Debug for Switch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Switch")
            .field("paused", &self.is_paused())
            .finish()
    }
}

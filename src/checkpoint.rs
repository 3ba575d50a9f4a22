//! Named points of a finalize where a fault-injection test acts: the flusher's snapshot
//! (before the phase's spool is moved aside), the publication (before the file is written),
//! the HDF5 write (the temporary file begun) and the rename (the temporary file complete).
//!
//! The fault matrix (`tests/faults.rs`) stops a child process at one of them to kill it there,
//! fill its disk or make its directory read-only, so each row hits its moment every time
//! instead of by luck. Set through the hidden `Builder::__checkpoints` (feature `testing`); unset (always, outside
//! those tests) a point costs one atomic load, once per finalize.

use std::sync::OnceLock;

static HOOK: OnceLock<fn(&'static str)> = OnceLock::new();

/// Calls the hook, if one is set, with the point's name.
pub(crate) fn reach(point: &'static str) {
    if let Some(hook) = HOOK.get() {
        hook(point);
    }
}

/// Sets the hook for the rest of the process (the first one set stays).
#[cfg(feature = "testing")]
pub(crate) fn set(hook: fn(&'static str)) {
    let _ = HOOK.set(hook);
}

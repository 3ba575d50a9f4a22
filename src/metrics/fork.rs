//! A forked child must not serve the parent's metrics: its copy of the listening socket would
//! keep the port bound after the parent exits, and connections queued there would never be
//! answered. `exec` already drops it (std opens sockets close-on-exec); for a plain `fork`, a
//! `pthread_atfork` child handler closes every live listener's descriptor in the child.
//!
//! The handler runs in the child between `fork` and the return to the program, where only
//! async-signal-safe calls are allowed, so it reads a fixed table of atomics (no lock, no
//! allocation) and calls `close`. A listener takes a slot while it serves and gives it back
//! before its descriptor is closed in the parent, so the child never closes a reused number.
//! The child's copy of the server is then inert: [`in_forked_child`] tells its drop to touch
//! nothing (its threads do not exist there, and its descriptor is already closed).
//!
//! Self-contained on purpose: the profiler's general fork handling (issue 26) may replace it.

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Once;

/// Listeners protected at once (a process rarely has more than one profiler).
const SLOTS: usize = 64;

static FDS: [AtomicI32; SLOTS] = [const { AtomicI32::new(-1) }; SLOTS];
static INSTALL: Once = Once::new();

/// The `pthread_atfork` child handler: closes every protected descriptor.
extern "C" fn in_child() {
    for slot in &FDS {
        let fd = slot.swap(-1, Ordering::SeqCst);
        if fd >= 0 {
            // SAFETY: close is async-signal-safe; `fd` is a listener descriptor inherited
            // from the parent, which no other code of the child owns (its owner, the server
            // thread, does not exist in the child).
            unsafe {
                libc::close(fd);
            }
        }
    }
}

/// A descriptor closed in forked children while this guard lives (it gives its slot back
/// when dropped, before the caller closes the descriptor).
#[derive(Debug)]
pub(crate) struct Protected {
    slot: Option<usize>,
    pid: u32,
}

/// Protects `fd`. With every slot taken the descriptor is not protected, and a warning says so.
pub(crate) fn protect(fd: i32) -> Protected {
    INSTALL.call_once(|| {
        // SAFETY: registers a handler that only makes async-signal-safe calls (see `in_child`).
        let rc = unsafe { libc::pthread_atfork(None, None, Some(in_child)) };
        if rc != 0 {
            eprintln!(
                "scope-profiler: pthread_atfork failed ({rc}); a forked child keeps the \
                 metrics listener open"
            );
        }
    });
    let slot = FDS.iter().position(|s| {
        s.compare_exchange(-1, fd, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    });
    if slot.is_none() {
        eprintln!(
            "scope-profiler: more than {SLOTS} metrics endpoints; a forked child keeps this \
             one's listener open"
        );
    }
    Protected {
        slot,
        pid: std::process::id(),
    }
}

impl Protected {
    /// Whether this is a forked child's copy (the process is not the one that protected it).
    pub(crate) fn in_forked_child(&self) -> bool {
        std::process::id() != self.pid
    }
}

impl Drop for Protected {
    fn drop(&mut self) {
        if let Some(slot) = self.slot {
            if !self.in_forked_child() {
                FDS[slot].store(-1, Ordering::SeqCst);
            }
        }
    }
}

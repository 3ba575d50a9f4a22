//! The edges between tasks the timelines settle: wakes, with the task they are attributed to,
//! and spawns, with the task that spawned. The flusher streams them to the spool (frames 11
//! and 12, see [`crate::data::edges`]); nothing is kept without a spool.
//!
//! Attribution happens where the wake's record is read, on the waking lane (see
//! `crate::flusher::assemble::tokio`): a wake belongs to task T when a poll of T's span is in
//! progress on that lane (the innermost, when task spans nest, as `block_in_place` or a
//! nested runtime makes them), or when it is the lane's next record after the close of T's
//! span (T's completion wakes its `JoinHandle` right after Tokio drops its future); otherwise
//! to the runtime's driver (a timer, I/O readiness, or a thread outside any task). A wake
//! replayed from the stash (read before its task's spawn) has lost its lane's context and
//! counts as the driver's.
//!
//! Cost: a wake already costs the flusher one event; an attributed one adds the walk of its
//! lane's polls in progress (usually one or two) and, with a spool, one 32-byte entry here and
//! about 6 bytes in the spool.

/// One settled edge, in raw ticks and Tokio task ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EdgeOut {
    /// Task `woken` was woken at `tick` on lane `lane`, by task `by` (0: the driver).
    Wake {
        tick: u64,
        lane: u32,
        by: u64,
        woken: u64,
    },
    /// Task `child` was spawned at `tick` on lane `lane`, by task `by` (0: the thread).
    Spawn {
        tick: u64,
        lane: u32,
        by: u64,
        child: u64,
    },
}

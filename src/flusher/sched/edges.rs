//! The edges between tasks the timelines settle: wakes, with the task they are attributed to,
//! and spawns, with the task that spawned. The flusher streams them to the spool (frames 11
//! and 12, see [`crate::data::edges`]); nothing is kept without a spool.
//!
//! Only the wakes that queued their task are kept: the one that ended a suspension, or the
//! first during a poll (see [`super::timeline`]); an extra wake of a task already queued
//! changes nothing a critical path follows, and is only counted (`tokio_extra_wakes`).
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
//! Cost: a wake already costs the flusher one event; attribution adds the walk of its lane's
//! polls in progress (usually one or two), and a kept wake one 32-byte entry here, its
//! conversion (two task-index lookups, a clock conversion) and about 6 bytes in the spool.
//! Measured with `crates/tokio-unstable-tests/examples/cost.rs` (release, 3 x 3 rounds, an
//! Intel Xeon KVM guest, kept edges against a build that keeps none): the flusher's CPU per
//! iteration of the `yield` shape (one kept wake each) went from 93-96 ns to 106-109 ns,
//! +12 ns per kept wake; per wake of the `wake` shape (a million wakes of one idle task,
//! nearly all extra, so not kept) it stayed at 16-18 ns.

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

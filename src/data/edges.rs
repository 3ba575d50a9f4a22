//! The edges between Tokio tasks that a profile keeps: who woke whom, who spawned whom, and
//! the `follows_from` links a program records. The flusher streams them through the spool
//! (frames 11-13) and the writer stores them under `/scope_profiler_rs/` (see
//! `docs/latency.md`); [`crate::read::Profile`] reads them back.
//!
//! Plain data: nothing here reads or writes a file. Times are absolute ns on the clock of the
//! file's `events`; tasks are dense task indices (`task_table/index`).

/// One wake of a Tokio task (recorded with Tokio's instrumentation, `--cfg tokio_unstable`)
/// that queued it: it ended a suspension, or was the first during a poll (an extra wake of a
/// task already queued is only counted, in `metadata/tokio_extra_wakes`).
///
/// The attribution rule: a wake belongs to task T only when it happens inside one of T's polls
/// on the waking thread, or on that thread right at T's completion (a `JoinHandle` wake fires
/// after the child's span has closed). Otherwise it is the runtime's (`waker_task` is `None`):
/// a timer, I/O readiness, or a thread outside any task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Wake {
    /// When (ns).
    pub tick_ns: i64,
    /// The waking thread (a `thread_table` index).
    pub thread: u32,
    /// The waking task (`None`: the runtime's driver, or a thread outside any task).
    pub waker_task: Option<i64>,
    /// The task woken.
    pub woken_task: i64,
}

/// One spawn of a Tokio task (recorded with Tokio's instrumentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Spawn {
    /// When (ns).
    pub tick_ns: i64,
    /// The spawning thread (a `thread_table` index).
    pub thread: u32,
    /// The spawning task, the one in a poll on that thread then (`None`: the thread itself,
    /// outside any task).
    pub parent_task: Option<i64>,
    /// The task spawned.
    pub child_task: i64,
}

/// One `follows_from` link a program recorded (`Span::follows_from`): span `span` follows
/// from span `follows`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct FollowsFrom {
    /// When the link was recorded (ns).
    pub tick_ns: i64,
    /// The region of the span that follows.
    pub span_region: String,
    /// That span's first enter (ns), when the flusher knew it: it resolves a link once it
    /// has read every record before it (usually a few ms later), so an enter soon after the
    /// link is known too.
    pub span_start_ns: Option<i64>,
    /// The region of the span it follows from.
    pub follows_region: String,
    /// That span's first enter (ns), when the flusher knew it.
    pub follows_start_ns: Option<i64>,
}

/// A `follows_from` link as the spool stores it: regions by id, -1 for an unknown start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FollowsRow {
    pub tick_ns: i64,
    pub span_region: u32,
    pub span_start_ns: i64,
    pub follows_region: u32,
    pub follows_start_ns: i64,
}

/// A phase's edges, as one reading of its spool files collects them (finalize, recover).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Edges {
    pub wakes: Vec<Wake>,
    pub spawns: Vec<Spawn>,
    pub follows: Vec<FollowsRow>,
}

/// `Option<i64>` as the spool and the file store it: -1 for `None`.
pub(crate) fn or_none(v: Option<i64>) -> i64 {
    v.unwrap_or(-1)
}

/// `-1` (or any negative value) as `None`.
pub(crate) fn none_if_negative(v: i64) -> Option<i64> {
    (v >= 0).then_some(v)
}

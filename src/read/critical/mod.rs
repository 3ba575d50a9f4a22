//! The critical path of a call across Tokio tasks: where a request's wall time went, and what
//! it was waiting *for* while it was suspended.
//!
//! For a call C the walk starts at C's end and goes backwards over the polls of C's task:
//! inside a poll the task was [`Kind::Running`]; between two polls it was either
//! [`Kind::Scheduled`] (woken, waiting for a worker: the poll's `scheduled_ns`) or idle. An
//! idle gap is followed to the wake that ended it (`/scope_profiler_rs/wakes`): to the waking
//! task, whose own time then lies on the path ([`Kind::BlockedOn`] while it ran), to the
//! runtime's [`Kind::Driver`] (a timer, I/O readiness), or to a thread outside the tasks
//! ([`Kind::Outside`]); a gap with no wake recorded is [`Kind::IdleUnknown`]. Before a task's
//! first poll the walk follows its spawn edge to the spawning task. It stops at C's start.
//! The segments tile C's wall time exactly: each nanosecond of `start..end` lies in one.
//!
//! Files without Tokio's instrumentation have no wakes, no spawns and no `scheduled_ns`.
//! There the walk infers one edge, a `JoinHandle` await: a gap of C's task that ends after
//! another task's last poll ended inside it is taken as waiting for that task, which is
//! walked instead ([`Segment::inferred`] marks every segment that rests on such an edge).
//! Everything else a gap could be (a timer, a channel, a mutex) is [`Kind::IdleUnknown`]
//! there. `docs/latency.md` ("The critical path") says what each mode can attribute.
//!
//! The index ([`CriticalPaths::build`]) holds every task poll and wake of the file in memory
//! (about 180 bytes per task poll at its peak, measured on a file of 1 M requests with a child
//! each: `crates/tokio-unstable-tests/examples/critical_scale.rs`); each walk then costs time
//! linear in the polls and wakes it passes over (binary searches to find them).
//!
//! ```
//! use scope_profiler::read::critical::{CriticalPaths, Kind};
//! use scope_profiler::read::Profile;
//! use scope_profiler::ScopeLayer;
//! use tracing::Instrument;
//! use tracing_subscriber::prelude::*;
//!
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("request.h5");
//! let (layer, guard) = ScopeLayer::builder()
//!     .output(&path)
//!     .track_async(true)
//!     .summary(false)
//!     .build()?;
//! let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
//! let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
//! tracing::dispatcher::with_default(&dispatch, || {
//!     rt.block_on(async {
//!         let request = async { tokio::time::sleep(std::time::Duration::from_millis(2)).await };
//!         tokio::spawn(request.instrument(tracing::info_span!("request"))).await
//!     })
//! })?;
//! drop(rt);
//! guard.finalize()?;
//!
//! let profile = Profile::open(&path)?;
//! let paths = CriticalPaths::build(&profile)?;
//! let call = paths.calls(&profile, "request")?[0].clone();
//! let path = paths.walk(&call);
//! // The segments tile the call, whatever they are.
//! let sum: i64 = path.segments.iter().map(|s| s.end_ns - s.start_ns).sum();
//! assert_eq!(sum, path.wall_ns());
//! assert_eq!(path.segments.last().unwrap().kind, Kind::Running);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod index;
#[cfg(test)]
mod tests;
mod walk;

use std::sync::Arc;

pub use index::CriticalPaths;

/// What a segment of a critical path was.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Kind {
    /// The call's own task was in a poll.
    Running,
    /// A task on the path was woken and waited for a worker ([`Segment::behind`] names the
    /// tasks polled meanwhile), or was spawned and not polled yet.
    Scheduled,
    /// The path continues in another task, which was in a poll: the call waited for it.
    BlockedOn,
    /// Waiting for a wake from the runtime's driver: a timer or I/O readiness.
    Driver,
    /// Waiting for a wake from a thread outside the tasks (or a spawn from one).
    Outside,
    /// Waiting, and the file does not say for what (no wake recorded, or a file without
    /// Tokio's instrumentation).
    IdleUnknown,
}

impl Kind {
    /// Every kind, in the order summaries list them.
    pub const ALL: [Kind; 6] = [
        Kind::Running,
        Kind::Scheduled,
        Kind::BlockedOn,
        Kind::Driver,
        Kind::Outside,
        Kind::IdleUnknown,
    ];

    /// The kind's name: `running`, `scheduled`, `blocked-on`, `driver`, `outside`,
    /// `idle-unknown`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Running => "running",
            Kind::Scheduled => "scheduled",
            Kind::BlockedOn => "blocked-on",
            Kind::Driver => "driver",
            Kind::Outside => "outside",
            Kind::IdleUnknown => "idle-unknown",
        }
    }
}

/// Where a segment lies: a Tokio task or a thread (both by their dense index in the file's
/// `task_table` / `thread_table`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Lane {
    /// A task index.
    Task(i64),
    /// A thread index.
    Thread(i64),
}

/// One piece of a critical path.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Segment {
    /// What the path was doing.
    pub kind: Kind,
    /// The task or thread the segment lies in: for `running` and `blocked-on`, the one in a
    /// poll; for `scheduled` and the waits, the one waiting; for `outside`, the waking thread.
    pub lane: Lane,
    /// The regions in a poll there, outermost first (Tokio's own `runtime.spawn` left out;
    /// empty in a wait).
    pub stack: Arc<[String]>,
    /// Start (ns, the clock of the file's `events`).
    pub start_ns: i64,
    /// End (ns).
    pub end_ns: i64,
    /// The segment rests on an edge inferred without Tokio's instrumentation (a
    /// `JoinHandle` await that ended when another task's last poll ended).
    pub inferred: bool,
    /// For `scheduled`: the tasks polled meanwhile (the ones that held the workers), with
    /// their time in polls inside the segment (ns), most first, at most three.
    pub behind: Vec<(i64, i64)>,
}

impl Segment {
    /// Its length (ns).
    pub fn dur_ns(&self) -> i64 {
        self.end_ns - self.start_ns
    }

    /// The innermost region of its stack, if any.
    pub fn region(&self) -> Option<&str> {
        self.stack.last().map(String::as_str)
    }
}

/// A call to walk: its region, its time and its lane.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CallRef {
    /// The call's region.
    pub region: String,
    /// Its number among the region's calls, in file order (what `--call` names).
    pub ordinal: u64,
    /// Start (ns).
    pub start_ns: i64,
    /// End (ns).
    pub end_ns: i64,
    /// Its task index, -1 outside a task.
    pub task: i64,
    /// Its thread index, -1 when unknown.
    pub thread: i64,
}

impl CallRef {
    /// A call of `region` from `start_ns` to `end_ns` in `task` (-1: none) on `thread`.
    pub fn new(region: &str, start_ns: i64, end_ns: i64, task: i64, thread: i64) -> CallRef {
        CallRef {
            region: region.to_owned(),
            ordinal: 0,
            start_ns,
            end_ns: end_ns.max(start_ns),
            task,
            thread,
        }
    }
}

/// The critical path of one call: segments in time order that tile its wall time.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CriticalPath {
    /// The call.
    pub call: CallRef,
    /// The segments, in time order: the first starts at the call's start, each starts where
    /// the one before ends, the last ends at the call's end.
    pub segments: Vec<Segment>,
}

impl CriticalPath {
    /// The call's wall time (ns).
    pub fn wall_ns(&self) -> i64 {
        self.call.end_ns - self.call.start_ns
    }

    /// Time per kind (ns), every kind with time, in [`Kind::ALL`]'s order.
    pub fn by_kind(&self) -> Vec<(Kind, i64)> {
        Kind::ALL
            .iter()
            .map(|&k| {
                let ns = self
                    .segments
                    .iter()
                    .filter(|s| s.kind == k)
                    .map(Segment::dur_ns);
                (k, ns.sum())
            })
            .filter(|&(_, ns)| ns > 0)
            .collect()
    }

    /// Time per (lane, innermost region) of the segments in a poll (`running`,
    /// `blocked-on`), most first.
    pub fn by_region(&self) -> Vec<((Lane, String), i64)> {
        let mut m: std::collections::HashMap<(Lane, String), i64> = Default::default();
        for s in &self.segments {
            if matches!(s.kind, Kind::Running | Kind::BlockedOn) {
                let r = s.region().unwrap_or("(task)").to_owned();
                *m.entry((s.lane, r)).or_default() += s.dur_ns();
            }
        }
        let mut v: Vec<_> = m.into_iter().collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        v
    }

    /// The segments with neighbours of the same kind, lane and stack joined (a poll split
    /// by a nested region's boundary stays split: the stacks differ).
    pub fn joined(&self) -> Vec<Segment> {
        let mut out: Vec<Segment> = Vec::with_capacity(self.segments.len());
        for s in &self.segments {
            match out.last_mut() {
                Some(l)
                    if l.kind == s.kind
                        && l.lane == s.lane
                        && l.stack == s.stack
                        && l.inferred == s.inferred
                        && l.end_ns == s.start_ns =>
                {
                    l.end_ns = s.end_ns;
                }
                _ => out.push(s.clone()),
            }
        }
        out
    }
}

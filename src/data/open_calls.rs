//! The calls still open at one moment: what the flusher writes into the spool at every flush
//! (the open-calls frame, tag 10), what a viewer of a live spool and `recover` read back, and
//! what a recovered file keeps under `/scope_profiler_rs/open_calls`.
//!
//! Plain data: nothing here reads or writes a file.

/// Where a call's Tokio task stood at that moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TaskState {
    /// Not known: the call runs in no task, or nothing says.
    #[default]
    Unknown,
    /// In a poll: on a CPU (for a call outside a task: entered on its thread now).
    Running,
    /// Woken, waiting for a worker (Tokio's instrumentation, `--cfg tokio_unstable`).
    Scheduled,
    /// Suspended, waiting for a wake (Tokio's instrumentation).
    Idle,
    /// Suspended, scheduled or idle: without Tokio's instrumentation they are not told apart.
    Suspended,
}

impl TaskState {
    /// The state's code in the spool and the file: 0 unknown, 1 running, 2 scheduled, 3 idle,
    /// 4 suspended.
    pub fn code(self) -> u8 {
        match self {
            TaskState::Unknown => 0,
            TaskState::Running => 1,
            TaskState::Scheduled => 2,
            TaskState::Idle => 3,
            TaskState::Suspended => 4,
        }
    }

    /// The state of a code ([`TaskState::code`]); `None` for a code that names none.
    pub fn from_code(code: i64) -> Option<TaskState> {
        Some(match code {
            0 => TaskState::Unknown,
            1 => TaskState::Running,
            2 => TaskState::Scheduled,
            3 => TaskState::Idle,
            4 => TaskState::Suspended,
            _ => return None,
        })
    }

    /// Its name: `unknown`, `running`, `scheduled`, `idle` or `suspended`.
    pub fn name(self) -> &'static str {
        match self {
            TaskState::Unknown => "unknown",
            TaskState::Running => "running",
            TaskState::Scheduled => "scheduled",
            TaskState::Idle => "idle",
            TaskState::Suspended => "suspended",
        }
    }
}

/// One call open at [`OpenCalls::at_ns`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct OpenCall {
    /// Its region's name.
    pub region: String,
    /// Its first enter (ns, the clock of the file's `events`).
    pub start_ns: i64,
    /// The thread of its first enter (a `thread_table` index).
    pub thread: u32,
    /// Tokio's id of its task (`None`: it runs in no task).
    pub tokio_id: Option<u64>,
    /// Its task's dense index in the phase (`task_table/index`), when the task has one yet.
    pub task: Option<i64>,
    /// The enclosing open call: an index into the same [`OpenCalls::calls`] (`None`: a
    /// root of its lane, or left out).
    pub parent: Option<u32>,
    /// Where its task stood.
    pub state: TaskState,
}

/// The calls open at one moment, oldest first, at most [`OpenCalls::CAP`] of them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct OpenCalls {
    /// When the flusher took them (ns, the clock of the file's `events`).
    pub at_ns: i64,
    /// Calls open then, all of them (`calls` holds the oldest of them).
    pub open: u64,
    /// The oldest open calls, oldest first.
    pub calls: Vec<OpenCall>,
}

impl OpenCalls {
    /// The most calls one frame holds; the rest are counted ([`OpenCalls::left_out`]).
    pub const CAP: usize = 4096;

    /// Open calls not in [`OpenCalls::calls`] (above the cap).
    pub fn left_out(&self) -> u64 {
        self.open.saturating_sub(self.calls.len() as u64)
    }

    /// How long `call` had been open at [`OpenCalls::at_ns`] (ns).
    pub fn age_ns(&self, call: &OpenCall) -> i64 {
        self.at_ns.saturating_sub(call.start_ns).max(0)
    }
}

/// What the recorder knows of one open call, before the cap and the parents: the flusher
/// collects these, and [`nest`] orders, caps and links them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OpenRaw {
    pub region: u32,
    pub start_ns: i64,
    pub thread: u32,
    /// Tokio id (0: none).
    pub tokio_id: u64,
    /// Dense task index (-1: none yet).
    pub task: i64,
    pub state: TaskState,
}

/// One open call as the spool stores it (region by id).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OpenRow {
    pub raw: OpenRaw,
    /// Index of the enclosing open call in the same list (-1: none).
    pub parent: i64,
}

/// Orders `all` oldest first, keeps the oldest [`OpenCalls::CAP`] and links each to its
/// enclosing open call: calls nest within a lane (a task, or a thread outside tasks), so the
/// open calls of one lane are a chain and a call's parent is the one before it there.
/// Work: O(n log n) for n open calls.
pub(crate) fn nest(mut all: Vec<OpenRaw>) -> Vec<OpenRow> {
    // Lane by lane, in start order: ties keep the order they came in (creation order).
    let lane = |r: &OpenRaw| {
        if r.tokio_id != 0 {
            (1u8, r.tokio_id)
        } else {
            (0u8, u64::from(r.thread))
        }
    };
    all.sort_by_key(|r| (lane(r), r.start_ns));
    let mut parent_at = vec![usize::MAX; all.len()];
    for i in 1..all.len() {
        if lane(&all[i - 1]) == lane(&all[i]) {
            parent_at[i] = i - 1;
        }
    }
    // Oldest first: a parent starts no later than its child, so it sorts first (the depth
    // breaks ties) and the cap keeps it whenever it keeps the child.
    let mut depth = vec![0u32; all.len()];
    for i in 0..all.len() {
        if parent_at[i] != usize::MAX {
            depth[i] = depth[parent_at[i]] + 1;
        }
    }
    let mut order: Vec<usize> = (0..all.len()).collect();
    order.sort_by_key(|&i| (all[i].start_ns, depth[i]));
    order.truncate(OpenCalls::CAP);
    let mut at = vec![u32::MAX; all.len()];
    for (k, &i) in order.iter().enumerate() {
        at[i] = k as u32;
    }
    order
        .iter()
        .map(|&i| OpenRow {
            raw: all[i],
            parent: match parent_at[i] {
                usize::MAX => -1,
                p if at[p] != u32::MAX => i64::from(at[p]),
                _ => -1,
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(start_ns: i64, thread: u32, tokio_id: u64) -> OpenRaw {
        OpenRaw {
            region: 0,
            start_ns,
            thread,
            tokio_id,
            task: -1,
            state: TaskState::Unknown,
        }
    }

    #[test]
    fn open_calls_nest_within_their_lane_oldest_first() {
        // Thread 0: 10 ⊃ 20 ⊃ 30; task 7 (on thread 1): 15 ⊃ 25; thread 1 alone: 5.
        let rows = nest(vec![
            raw(30, 0, 0),
            raw(25, 1, 7),
            raw(10, 0, 0),
            raw(5, 1, 0),
            raw(20, 0, 0),
            raw(15, 1, 7),
        ]);
        let starts: Vec<i64> = rows.iter().map(|r| r.raw.start_ns).collect();
        assert_eq!(starts, [5, 10, 15, 20, 25, 30]);
        let parents: Vec<i64> = rows.iter().map(|r| r.parent).collect();
        assert_eq!(parents, [-1, -1, -1, 1, 2, 3]);
    }

    #[test]
    fn the_cap_keeps_the_oldest_and_counts_the_rest() {
        let all: Vec<OpenRaw> = (0..OpenCalls::CAP as i64 + 10)
            .rev()
            .map(|k| raw(k, 0, 0))
            .collect();
        let rows = nest(all);
        assert_eq!(rows.len(), OpenCalls::CAP);
        assert_eq!(rows[0].raw.start_ns, 0);
        assert_eq!(rows.last().unwrap().raw.start_ns, OpenCalls::CAP as i64 - 1);
        assert!(rows.iter().skip(1).all(|r| r.parent >= 0));
        for code in 0..5 {
            let s = TaskState::from_code(code).unwrap();
            assert_eq!(i64::from(s.code()), code);
        }
        assert_eq!(TaskState::from_code(5), None);
    }
}

//! Tokio task identity and per-task accounting, on the flusher.
//!
//! Task ids come from the stable `tokio::task::try_id()` read at every enter (see
//! [`crate::lane::record::current_task_id`]); here each id seen in a phase gets a dense index
//! and a `task_table` row. We only see a task through its spans, so a task's row describes its
//! *outermost* calls (those no other call of the same task contains): their polls are the
//! task's steps, their busy time its running time, their await time its suspended time.

use crate::fasthash::FastMap;
use crate::output::model::TaskRow;

/// An outermost call of a task.
#[derive(Clone, Copy, Debug)]
struct Root {
    start_ns: i64,
    end_ns: i64,
    polls: u32,
    busy_ns: i64,
    await_ns: i64,
    region: u32,
}

#[derive(Debug)]
struct TaskAcc {
    index: i64,
    tokio_id: u64,
    roots: Vec<Root>,
    last_end_ns: i64,
    last_thread: u32,
}

/// Dense task indices and accounting for one phase.
#[derive(Default)]
pub(crate) struct Tasks {
    by_id: FastMap<u64, TaskAcc>,
}

/// One completed call as the task table sees it.
pub(crate) struct TaskCall {
    pub tokio_id: u64,
    pub start_ns: i64,
    pub end_ns: i64,
    pub polls: u32,
    pub busy_ns: i64,
    pub region: u32,
    pub last_thread: u32,
}

impl Tasks {
    /// The dense index of a Tokio task id (assigned on first sight in this phase).
    pub(crate) fn index(&mut self, tokio_id: u64) -> i64 {
        let next = self.by_id.len() as i64;
        self.by_id
            .entry(tokio_id)
            .or_insert_with(|| TaskAcc {
                index: next,
                tokio_id,
                roots: Vec::new(),
                last_end_ns: i64::MIN,
                last_thread: 0,
            })
            .index
    }

    /// Accounts one completed call of a task; returns its dense index.
    pub(crate) fn add_call(&mut self, c: &TaskCall) -> i64 {
        let index = self.index(c.tokio_id);
        let acc = self.by_id.get_mut(&c.tokio_id).expect("indexed above");
        if c.end_ns >= acc.last_end_ns {
            acc.last_end_ns = c.end_ns;
            acc.last_thread = c.last_thread;
        }
        let inside = |outer: &Root, s: i64, e: i64| outer.start_ns <= s && e <= outer.end_ns;
        if acc.roots.iter().any(|r| inside(r, c.start_ns, c.end_ns)) {
            return index;
        }
        acc.roots
            .retain(|r| !(c.start_ns <= r.start_ns && r.end_ns <= c.end_ns));
        acc.roots.push(Root {
            start_ns: c.start_ns,
            end_ns: c.end_ns,
            polls: c.polls,
            busy_ns: c.busy_ns,
            await_ns: (c.end_ns - c.start_ns - c.busy_ns).max(0),
            region: c.region,
        });
        index
    }

    /// The phase's task rows (index order), and a fresh start for the next phase.
    pub(crate) fn take_rows(&mut self, region_name: impl Fn(u32) -> String) -> Vec<TaskRow> {
        let mut rows: Vec<TaskRow> = self
            .by_id
            .drain()
            .map(|(_, acc)| {
                let first = acc.roots.iter().min_by_key(|r| r.start_ns);
                TaskRow {
                    index: acc.index,
                    tokio_id: acc.tokio_id,
                    thread_index: acc.last_thread,
                    created_ns: first.map_or(-1, |r| r.start_ns),
                    done_ns: acc.roots.iter().map(|r| r.end_ns).max().unwrap_or(-1),
                    steps: acc.roots.iter().map(|r| i64::from(r.polls)).sum(),
                    running_ns: acc.roots.iter().map(|r| r.busy_ns).sum(),
                    suspended_ns: acc.roots.iter().map(|r| r.await_ns).sum(),
                    root_region: first.map_or_else(String::new, |r| region_name(r.region)),
                }
            })
            .collect();
        rows.sort_by_key(|r| r.index);
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: u64, s: i64, e: i64, polls: u32, busy: i64, region: u32) -> TaskCall {
        TaskCall {
            tokio_id: id,
            start_ns: s,
            end_ns: e,
            polls,
            busy_ns: busy,
            region,
            last_thread: region,
        }
    }

    #[test]
    fn outermost_calls_make_the_task_row() {
        let mut t = Tasks::default();
        // Inner call completes first, then the outer one that contains it, then a second
        // sequential root.
        assert_eq!(t.add_call(&call(77, 20, 30, 1, 10, 1)), 0);
        assert_eq!(t.add_call(&call(77, 10, 100, 6, 40, 0)), 0);
        assert_eq!(t.add_call(&call(5, 1, 2, 1, 1, 0)), 1);
        t.add_call(&call(77, 200, 260, 2, 30, 2));
        let rows = t.take_rows(|r| format!("r{r}"));
        assert_eq!(rows.len(), 2);
        let r = &rows[0];
        assert_eq!((r.tokio_id, r.created_ns, r.done_ns), (77, 10, 260));
        assert_eq!((r.steps, r.running_ns, r.suspended_ns), (8, 70, 50 + 30));
        assert_eq!(r.root_region, "r0");
        assert_eq!(r.thread_index, 2, "thread of the latest poll");
        assert!(t.take_rows(|_| String::new()).is_empty(), "reset per phase");
    }
}

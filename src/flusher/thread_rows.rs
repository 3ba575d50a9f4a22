//! The rows of exited threads, kept compactly after their lanes are dropped.
//!
//! A service that spawns threads for years must not pay a lane per dead thread: the flusher
//! drops a lane once its thread has exited and everything it recorded is drained, keeping only
//! its `thread_table` row. Rows are stored in 40 bytes with interned names (most threads share
//! a few names: `tokio-rt-worker`, or none at all), so 100 000 dead threads cost about 4 MiB.
//! With a spool, each row is written to it once, when its thread exits (and again at the head
//! of every later phase's spool, so a phase's spool always holds the whole table); a flush
//! writes only the rows of live threads, never the whole table.

use std::collections::HashMap;

use crate::data::rows::ThreadRow;

/// Exited threads' rows, in exit order.
#[derive(Default)]
pub(crate) struct ExitedThreads {
    rows: Vec<Compact>,
    /// Rows before this one are in the current spool phase already.
    spooled: usize,
    names: Vec<Box<str>>,
    by_name: HashMap<Box<str>, u32>,
}

struct Compact {
    index: u32,
    name: u32,
    native_id: i64,
    start_ns: i64,
    end_ns: i64,
    cpu_ns: i64,
}

impl ExitedThreads {
    /// Keeps `row`.
    pub(crate) fn push(&mut self, row: ThreadRow) {
        let name = match self.by_name.get(row.name.as_str()) {
            Some(&n) => n,
            None => {
                let n = self.names.len() as u32;
                self.names.push(row.name.clone().into_boxed_str());
                self.by_name.insert(row.name.into_boxed_str(), n);
                n
            }
        };
        self.rows.push(Compact {
            index: row.index,
            name,
            native_id: row.native_id,
            start_ns: row.start_ns,
            end_ns: row.end_ns,
            cpu_ns: row.cpu_ns,
        });
    }

    /// Every row, as the writers take them.
    pub(crate) fn rows(&self) -> impl Iterator<Item = ThreadRow> + '_ {
        self.rows_from(0)
    }

    /// The rows not in the current spool phase yet, marked as spooled now.
    pub(crate) fn take_unspooled(&mut self) -> Vec<ThreadRow> {
        let from = std::mem::replace(&mut self.spooled, self.rows.len());
        self.rows_from(from).collect()
    }

    /// A new spool phase holds none of the rows yet.
    pub(crate) fn new_phase(&mut self) {
        self.spooled = 0;
    }

    fn rows_from(&self, from: usize) -> impl Iterator<Item = ThreadRow> + '_ {
        self.rows[from..].iter().map(|c| ThreadRow {
            index: c.index,
            name: self.names[c.name as usize].to_string(),
            native_id: c.native_id,
            start_ns: c.start_ns,
            end_ns: c.end_ns,
            cpu_ns: c.cpu_ns,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_come_back_with_their_names() {
        let mut t = ExitedThreads::default();
        for i in 0..3 {
            t.push(ThreadRow {
                index: i,
                name: if i == 1 { "io".into() } else { "worker".into() },
                native_id: 100 + i64::from(i),
                start_ns: 1,
                end_ns: 2,
                cpu_ns: 3,
            });
        }
        let rows: Vec<ThreadRow> = t.rows().collect();
        let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["worker", "io", "worker"]);
        assert_eq!(t.names.len(), 2);
        assert_eq!(rows[2].native_id, 102);
    }
}

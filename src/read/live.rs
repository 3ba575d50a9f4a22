//! Reading a running program's spool: the phase's completed calls as the flusher writes them,
//! for live viewers (`scopeprof top`).
//!
//! A program profiled with an output file writes every completed call to its *spool*,
//! `<dir>/.<name>.spool` beside the output ([`spool_path`]), at every `spool_sync_interval`.
//! A [`SpoolFollower`] reads it without disturbing the program: read-only, links never
//! followed, no lock taken, nothing written beside it. Each [`SpoolFollower::refresh`] reads
//! only the frames added since the last one and keeps a small index of the calls frames by
//! time, so [`SpoolFollower::calls_between`] re-reads just the frames of a time window:
//! memory is bounded by the window shown, not by the length of the run.
//!
//! A write the program undoes (it cuts the file back after a failed write) is noticed and the
//! frames it took are dropped ([`Refresh::rewound`]); a rotation (finalize renames the spool
//! aside and starts a new one) is told by [`SpoolFollower::moved`].
//!
//! ```no_run
//! use scope_profiler::read::live::{spool_path, SpoolFollower};
//!
//! let mut spool = SpoolFollower::open(&spool_path("profiling_data.h5".as_ref()))?;
//! let mut calls = 0;
//! spool.refresh(|_region, new| calls += new.len(), |_tasks| {})?;
//! println!("{calls} calls so far");
//! # Ok::<(), std::io::Error>(())
//! ```

use std::io;
use std::path::{Path, PathBuf};

use super::Call;
use crate::data::rows::{CallRecord, TaskRow};
use crate::spool::tail::{CallsFrame, Tail};

/// The spool a program writes for the output path `output`: `<dir>/.<name>.spool`.
pub fn spool_path(output: &Path) -> PathBuf {
    crate::spool::spool_path(output)
}

/// What the spool's header says about the run.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SpoolInfo {
    /// Wall-clock start of the session (ns since the Unix epoch).
    pub start_time_ns: i64,
    /// The session's label, if any.
    pub label: Option<String>,
    /// Calls carry thread indices.
    pub track_threads: bool,
    /// Calls carry Tokio task indices (`Builder::track_async`).
    pub track_async: bool,
    /// Aggregate mode: the spool holds per-region totals, no calls.
    pub aggregate: bool,
}

/// One row of the spool's thread table.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SpoolThread {
    /// Dense thread index (what [`Call::thread`] holds).
    pub index: i64,
    /// Thread name.
    pub name: String,
    /// OS thread id.
    pub native_id: i64,
    /// Registration time (ns).
    pub start_ns: i64,
    /// Exit time (ns), -1 while alive.
    pub end_ns: i64,
}

/// A Tokio task that finished during the phase (a tasks frame's row).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RetiredTask {
    /// Dense task index (what [`Call::task`] holds).
    pub index: i64,
    /// Tokio's task id.
    pub tokio_id: u64,
    /// Start of its first outermost call (ns).
    pub created_ns: i64,
    /// End of its last outermost call (ns).
    pub done_ns: i64,
    /// Polls of its outermost calls.
    pub polls: i64,
    /// Time its outermost calls held a thread (ns).
    pub busy_ns: i64,
    /// Time its outermost calls were suspended in `.await` (ns).
    pub await_ns: i64,
    /// Region id of its first outermost call.
    pub root_region: Option<u32>,
}

/// What one [`SpoolFollower::refresh`] found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Refresh {
    /// New bytes read.
    pub bytes: u64,
    /// Bytes dropped because the program cut the file back (an undone write).
    pub rewound: u64,
    /// The file was rewritten under everything read: it was read again from the start.
    pub restarted: bool,
}

/// A spool followed as its program writes it. See the [module docs](self).
#[derive(Debug)]
pub struct SpoolFollower {
    tail: Tail,
    calls: Vec<Call>,
}

fn to_call(c: &CallRecord) -> Call {
    Call {
        start_ns: c.start_ns,
        dur_ns: c.dur_ns.max(0),
        thread: i64::from(c.thread),
        task: c.task,
        gpu_ns: c.gpu_ns,
        scheduled_ns: c.sched_ns,
        await_ns: c.await_ns,
    }
}

fn to_task(t: &TaskRow) -> RetiredTask {
    RetiredTask {
        index: t.index,
        tokio_id: t.tokio_id,
        created_ns: t.created_ns,
        done_ns: t.done_ns,
        polls: t.steps,
        busy_ns: t.running_ns,
        await_ns: t.suspended_ns,
        root_region: (t.root_region != u32::MAX).then_some(t.root_region),
    }
}

impl SpoolFollower {
    /// Opens the spool file at `path` (read only; a link or a non-regular file is refused).
    ///
    /// # Errors
    /// It cannot be opened, or is not a regular file.
    pub fn open(path: &Path) -> io::Result<SpoolFollower> {
        Ok(SpoolFollower {
            tail: Tail::open(path)?,
            calls: Vec::new(),
        })
    }

    /// The path it was opened at.
    pub fn path(&self) -> &Path {
        self.tail.path()
    }

    /// Bytes read so far.
    pub fn position(&self) -> u64 {
        self.tail.position()
    }

    /// Whether the path no longer names the file being read: a rotation renamed it aside (the
    /// open file then holds the whole phase; read it to its end with a last refresh) or the
    /// phase was published and its spool removed.
    pub fn moved(&self) -> bool {
        self.tail.moved()
    }

    /// Reads the frames added since the last call: `on_calls(region, calls)` for each new
    /// calls frame, `on_tasks(rows)` for each frame of retired tasks.
    ///
    /// # Errors
    /// Reading fails, the file is not a spool, or a frame is malformed.
    pub fn refresh(
        &mut self,
        mut on_calls: impl FnMut(u32, &[Call]),
        mut on_tasks: impl FnMut(&[RetiredTask]),
    ) -> io::Result<Refresh> {
        let buf = &mut self.calls;
        let r = self.tail.refresh(
            &mut |region, calls| {
                buf.clear();
                buf.extend(calls.iter().map(to_call));
                on_calls(region, buf);
            },
            &mut |rows| {
                let rows: Vec<RetiredTask> = rows.iter().map(to_task).collect();
                on_tasks(&rows);
            },
        )?;
        Ok(Refresh {
            bytes: r.bytes,
            rewound: r.rewound,
            restarted: r.restarted,
        })
    }

    /// The header, once read.
    pub fn info(&self) -> Option<SpoolInfo> {
        self.tail.header.as_ref().map(|h| SpoolInfo {
            start_time_ns: h.start_time_ns,
            label: h.label.clone(),
            track_threads: h.track_threads,
            track_async: h.track_async,
            aggregate: h.aggregate,
        })
    }

    /// The calls open at the program's latest flush (its spool's latest open-calls frame):
    /// `None` before the first one, or in a version-1 spool, which has none.
    pub fn open_calls(&self) -> Option<crate::read::OpenCalls> {
        let regions = &self.tail.regions;
        self.tail.open_calls.as_ref().map(|o| o.named(regions))
    }

    /// The region names declared so far (index = region id).
    pub fn region_names(&self) -> Vec<String> {
        self.tail.regions.iter().map(|r| r.name.clone()).collect()
    }

    /// The thread table as last written.
    pub fn threads(&self) -> Vec<SpoolThread> {
        self.tail
            .threads
            .iter()
            .map(|t| SpoolThread {
                index: i64::from(t.index),
                name: t.name.clone(),
                native_id: t.native_id,
                start_ns: t.start_ns,
                end_ns: t.end_ns,
            })
            .collect()
    }

    /// Per-region `(region, calls)` totals of an aggregate-mode spool (empty otherwise).
    pub fn aggregate_counts(&self) -> Vec<(u32, u64)> {
        self.tail
            .aggregate
            .iter()
            .map(|(r, s)| (*r, s.count))
            .collect()
    }

    /// Frames of kinds this reader does not know (written by a newer version), skipped.
    pub fn unknown_frames(&self) -> u64 {
        self.tail.unknown_frames
    }

    /// The earliest start and latest end of the calls read so far.
    pub fn time_span(&self) -> Option<(i64, i64)> {
        let f = &self.tail.frames;
        let first = f.iter().map(|f| f.first_start_ns).min()?;
        let last = f.iter().map(|f| f.last_end_ns).max()?;
        Some((first, last))
    }

    /// Calls read so far, per bucket of `width_ns` from `from_ns` (`buckets` buckets), counted
    /// by each calls frame's latest end: a cheap picture of the phase from the index alone.
    pub fn density(&self, from_ns: i64, width_ns: i64, buckets: usize) -> Vec<u64> {
        let mut out = vec![0u64; buckets];
        let width = width_ns.max(1);
        for f in &self.tail.frames {
            let k = (f.last_end_ns.saturating_sub(from_ns)) / width;
            if (0..buckets as i64).contains(&k) {
                out[k as usize] += u64::from(f.calls);
            }
        }
        out
    }

    /// Reads again every calls frame that may hold a call overlapping `from_ns..to_ns` and
    /// hands its calls to `on_calls(region, calls)` (the caller filters the calls themselves).
    ///
    /// # Errors
    /// Reading fails, or a frame is malformed.
    pub fn calls_between(
        &mut self,
        from_ns: i64,
        to_ns: i64,
        mut on_calls: impl FnMut(u32, &[Call]),
    ) -> io::Result<()> {
        let wanted: Vec<CallsFrame> = self
            .tail
            .frames
            .iter()
            .filter(|f| f.last_end_ns >= from_ns && f.first_start_ns <= to_ns)
            .copied()
            .collect();
        let buf = &mut self.calls;
        self.tail.reread(&wanted, &mut |region, calls| {
            buf.clear();
            buf.extend(calls.iter().map(to_call));
            on_calls(region, buf);
        })
    }
}

//! This crate's own datasets of spool version 2, read back: the calls open at a crash
//! (`/scope_profiler_rs/open_calls`, in a file `recover` wrote) and the edges between Tokio
//! tasks (`wakes`, `spawns`, `follows_from`); and the open calls of a live or crashed spool.
//! Each table is small next to the calls (read whole), and every column is checked against
//! the first one's length.

use std::path::Path;

use super::columns::H5;
use super::{Profile, ReadError};
use crate::data::edges::{none_if_negative, FollowsFrom, Spawn, Wake};
use crate::data::open_calls::{OpenCall, OpenCalls, TaskState};

/// The calls open at the latest flush of the spool at `spool` (a live program's, or one a
/// crash left): what its latest open-calls frame holds (`None`: no such frame yet, or a spool
/// of version 1). Reads the spool's small frames and skips its calls.
///
/// ```no_run
/// let open = scope_profiler::read::spool_open_calls(".profile.h5.spool")?;
/// for call in open.iter().flat_map(|o| o.calls.iter().map(move |c| (o, c))) {
///     println!("{} open for {} ns", call.1.region, call.0.age_ns(call.1));
/// }
/// # Ok::<(), scope_profiler::read::ReadError>(())
/// ```
///
/// # Errors
/// The file cannot be read or is not a spool, or a frame is malformed.
pub fn spool_open_calls(spool: impl AsRef<Path>) -> Result<Option<OpenCalls>, ReadError> {
    let spool = spool.as_ref();
    let c = crate::spool::scan(spool, false, None).map_err(|e| ReadError {
        path: spool.to_path_buf(),
        problem: e.to_string(),
    })?;
    Ok(c.open_calls.map(|o| o.named(&c.regions)))
}

/// Integer column `group/name`, of `n` elements.
fn col(h5: &H5<'_>, group: &str, name: &str, n: u64) -> Result<Vec<i64>, ReadError> {
    h5.ints(&format!("{group}/{name}"), Some(n))
}

/// The length of `group`'s first column `first` (0 when the group is absent).
fn len(h5: &H5<'_>, group: &str, first: &str) -> Result<Option<u64>, ReadError> {
    if !h5.exists(group) {
        return Ok(None);
    }
    Ok(Some(h5.dataset(&format!("{group}/{first}"))?.1))
}

/// A value that must be a thread index.
fn thread(h5: &H5<'_>, v: i64, what: &str) -> Result<u32, ReadError> {
    u32::try_from(v).map_err(|_| (h5.err)(format!("{what}: thread id {v} is out of range")))
}

impl Profile {
    /// Runs `f` with the file's typed accessor.
    pub(super) fn with_h5<T>(
        &self,
        f: impl FnOnce(&H5<'_>) -> Result<T, ReadError>,
    ) -> Result<T, ReadError> {
        let err = |p: String| self.err(p);
        f(&H5 {
            file: &self._file,
            err: &err,
        })
    }

    /// The calls that were open at the crash, in a file `recover` wrote from a spool that had
    /// them (`/scope_profiler_rs/open_calls`); `None` in any other file.
    ///
    /// # Errors
    /// The group is there but malformed (a column missing, of another length or type, a
    /// parent that does not come before its child, an unknown state).
    pub fn open_calls(&self) -> Result<Option<OpenCalls>, ReadError> {
        self.with_h5(|h5| {
            const G: &str = "scope_profiler_rs/open_calls";
            let Some(n) = len(h5, G, "start_ns")? else {
                return Ok(None);
            };
            let regions = h5.strings(&format!("{G}/regions"), Some(n))?;
            let states = h5.strings(&format!("{G}/states"), Some(n))?;
            let [start, threads, tokio, tasks, parents] =
                ["start_ns", "thread_ids", "tokio_ids", "task_ids", "parents"]
                    .map(|c| col(h5, G, c, n));
            let (start, threads, tokio, tasks, parents) =
                (start?, threads?, tokio?, tasks?, parents?);
            let mut calls = Vec::with_capacity(n as usize);
            for (i, region) in regions.into_iter().enumerate() {
                let state = (0..5)
                    .filter_map(TaskState::from_code)
                    .find(|s| s.name() == states[i])
                    .ok_or_else(|| (h5.err)(format!("{G}: unknown state `{}`", states[i])))?;
                let parent = match parents[i] {
                    -1 => None,
                    p if p >= 0 && (p as usize) < i => Some(p as u32),
                    p => return Err((h5.err)(format!("{G}: row {i} has parent {p}"))),
                };
                calls.push(OpenCall {
                    region,
                    start_ns: start[i],
                    thread: thread(h5, threads[i], G)?,
                    tokio_id: u64::try_from(tokio[i]).ok(),
                    task: none_if_negative(tasks[i]),
                    parent,
                    state,
                });
            }
            Ok(Some(OpenCalls {
                at_ns: h5.int_attr(G, "at_ns").unwrap_or(0),
                open: h5.int_attr(G, "open").map_or(n, |o| o.max(0) as u64),
                calls,
            }))
        })
    }

    /// The wakes of Tokio tasks the file keeps (`/scope_profiler_rs/wakes`; empty without
    /// Tokio's instrumentation), in the order the flusher settled them.
    ///
    /// # Errors
    /// The group is there but malformed.
    pub fn wakes(&self) -> Result<Vec<Wake>, ReadError> {
        self.with_h5(|h5| {
            const G: &str = "scope_profiler_rs/wakes";
            let Some(n) = len(h5, G, "tick_ns")? else {
                return Ok(Vec::new());
            };
            let [t, th, by, woken] = ["tick_ns", "thread_ids", "waker_task_ids", "woken_task_ids"]
                .map(|c| col(h5, G, c, n));
            let (t, th, by, woken) = (t?, th?, by?, woken?);
            (0..n as usize)
                .map(|i| {
                    Ok(Wake {
                        tick_ns: t[i],
                        thread: thread(h5, th[i], G)?,
                        waker_task: none_if_negative(by[i]),
                        woken_task: woken[i],
                    })
                })
                .collect()
        })
    }

    /// The spawns of Tokio tasks the file keeps (`/scope_profiler_rs/spawns`).
    ///
    /// # Errors
    /// The group is there but malformed.
    pub fn spawns(&self) -> Result<Vec<Spawn>, ReadError> {
        self.with_h5(|h5| {
            const G: &str = "scope_profiler_rs/spawns";
            let Some(n) = len(h5, G, "tick_ns")? else {
                return Ok(Vec::new());
            };
            let [t, th, parent, child] =
                ["tick_ns", "thread_ids", "parent_task_ids", "child_task_ids"]
                    .map(|c| col(h5, G, c, n));
            let (t, th, parent, child) = (t?, th?, parent?, child?);
            (0..n as usize)
                .map(|i| {
                    Ok(Spawn {
                        tick_ns: t[i],
                        thread: thread(h5, th[i], G)?,
                        parent_task: none_if_negative(parent[i]),
                        child_task: child[i],
                    })
                })
                .collect()
        })
    }

    /// The `follows_from` links the file keeps (`/scope_profiler_rs/follows_from`).
    ///
    /// # Errors
    /// The group is there but malformed.
    pub fn follows_from(&self) -> Result<Vec<FollowsFrom>, ReadError> {
        self.with_h5(|h5| {
            const G: &str = "scope_profiler_rs/follows_from";
            let Some(n) = len(h5, G, "tick_ns")? else {
                return Ok(Vec::new());
            };
            let spans = h5.strings(&format!("{G}/span_regions"), Some(n))?;
            let follows = h5.strings(&format!("{G}/follows_regions"), Some(n))?;
            let [t, a, b] =
                ["tick_ns", "span_start_ns", "follows_start_ns"].map(|c| col(h5, G, c, n));
            let (t, a, b) = (t?, a?, b?);
            Ok((0..n as usize)
                .map(|i| FollowsFrom {
                    tick_ns: t[i],
                    span_region: spans[i].clone(),
                    span_start_ns: none_if_negative(a[i]),
                    follows_region: follows[i].clone(),
                    follows_start_ns: none_if_negative(b[i]),
                })
                .collect())
        })
    }
}

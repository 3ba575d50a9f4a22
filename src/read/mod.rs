//! Reading profiles back: any schema-3 file, written by this crate or by the Python package.
//!
//! [`Profile::open`] reads and checks everything small (region names, the index rows, the lane
//! tables) and leaves the per-call columns on disk; [`Profile::for_each_call`] and
//! [`Profile::for_each_poll`] then stream them in bounded chunks, so a file with a billion
//! calls is read in constant memory ([`Profile::for_each_duration`] reads only the durations,
//! for per-call statistics). Every inconsistency (a missing or mistyped dataset, rows
//! that run past the event columns or overlap, a region id out of range, a lane index that no
//! table row has) is a [`ReadError`] naming the file and the problem; nothing here panics on a
//! bad file. The `scopeprof` command-line tool is built on this module.
//!
//! ```
//! use scope_profiler::read::Profile;
//! use scope_profiler::ScopeLayer;
//! use tracing_subscriber::prelude::*;
//!
//! // A profile to read: three `solve` calls, each holding one `step`.
//! let dir = std::env::temp_dir().join(format!("scope-read-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! let path = dir.join("profile.h5");
//! let (layer, guard) = ScopeLayer::builder().output(&path).summary(false).build()?;
//! tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
//!     for _ in 0..3 {
//!         let _solve = tracing::info_span!("solve").entered();
//!         tracing::info_span!("step").in_scope(|| std::hint::black_box(1));
//!     }
//! });
//! guard.finalize()?;
//!
//! let profile = Profile::open(&path)?;
//! let mut solves = 0;
//! profile.for_each_call(65_536, |row, chunk| {
//!     if profile.region_name(row.region) == "solve" {
//!         solves += chunk.len();
//!     }
//!     Ok(())
//! })?;
//! assert_eq!(solves, 3);
//! let mut calls = 0;
//! profile.for_each_duration(65_536, |_, durations| {
//!     calls += durations.len() as u64;
//!     Ok(())
//! })?;
//! assert_eq!(calls, profile.event_count());
//! let summary = profile.summary()?;
//! assert_eq!(summary.report().region("step").unwrap().calls, 3);
//! print!("{}", summary.render());
//! # std::fs::remove_dir_all(&dir).unwrap();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod columns;
pub mod critical;
mod edges;
mod flight;
pub mod live;
mod stream;
mod summary;
mod tasks;

use std::path::{Path, PathBuf};

use ::hdf5::{Dataset, File};

pub use crate::data::edges::{FollowsFrom, Spawn, Wake};
pub use crate::data::open_calls::{OpenCall, OpenCalls, TaskState};
use columns::{short, H5};
pub use edges::spool_open_calls;
pub use flight::{BelowParent, FlightInfo};
pub use summary::{json_str, Calls, Summary};
pub use tasks::TaskWaits;

/// A file that cannot be read as a profile, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReadError {
    /// The file.
    pub path: PathBuf,
    /// What is wrong with it, in one line.
    pub problem: String,
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.problem)
    }
}

impl std::error::Error for ReadError {}

/// How the file stores its calls (root attribute `storage_layout`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StorageLayout {
    /// One record per call in `events/*`.
    Columnar,
    /// Per-region totals only; there are no calls to stream.
    Aggregate,
}

/// One `rank_region_index` row: where one (rank, region) pair's calls lie.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct IndexRow {
    /// Region id (index into the region names).
    pub region: u32,
    /// MPI rank.
    pub rank: u32,
    /// First event of the row in every `events/*` column.
    pub offset: u64,
    /// Number of calls.
    pub count: u64,
    /// Stored sum of exclusive times (ns), `None` when absent or -1.
    pub exclusive_ns: Option<i64>,
}

/// Per-region totals of the aggregate layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct AggregateRow {
    /// Region id.
    pub region: u32,
    /// MPI rank.
    pub rank: u32,
    /// Calls.
    pub count: u64,
    /// Sum of durations (ns).
    pub total_ns: i64,
    /// Shortest call (ns).
    pub min_ns: i64,
    /// Longest call (ns).
    pub max_ns: i64,
}

/// One `thread_table` row.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ThreadInfo {
    /// MPI rank.
    pub rank: u32,
    /// Dense thread index (what the calls' `thread` holds).
    pub index: i64,
    /// OS thread id.
    pub native_id: i64,
    /// Thread name.
    pub name: String,
}

/// One `task_table` row.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskInfo {
    /// MPI rank.
    pub rank: u32,
    /// Dense task index (what the calls' `task` holds).
    pub index: i64,
    /// Task name (`Task-<tokio id>` in this crate's files).
    pub name: String,
    /// Name of the task's root region (coroutine name in the Python package's files).
    pub root: String,
    /// Tokio's task id (this crate's files; 0 when absent).
    pub tokio_id: u64,
    /// The task's polls from Tokio's own instrumentation (`--cfg tokio_unstable`), when the
    /// file has them (see `docs/latency.md`).
    pub sched: Option<TaskWaits>,
}

/// One call, decoded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Call {
    /// Absolute start (ns).
    pub start_ns: i64,
    /// Duration (ns, >= 0; negative stored durations read as 0).
    pub dur_ns: i64,
    /// Thread index, -1 when unknown or not recorded.
    pub thread: i64,
    /// Task index, -1 outside a task or not recorded.
    pub task: i64,
    /// Device time (ns), -1 when not measured.
    pub gpu_ns: i64,
    /// Scheduled time of its task's suspensions while it was open (ns,
    /// `/scope_profiler_rs/call_scheduled_ns`), -1 outside a task or not recorded.
    pub scheduled_ns: i64,
    /// Time the call was suspended between its polls (`events/await_ns`: its duration minus
    /// its busy time), 0 when the file has no such column.
    pub await_ns: i64,
}

/// One poll of `/scope_profiler_rs/polls` (this crate's files only; rank 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Poll {
    /// Index into [`Profile::poll_region_names`].
    pub region: u32,
    /// Absolute start (ns).
    pub start_ns: i64,
    /// Duration (ns, >= 0).
    pub dur_ns: i64,
    /// Thread index.
    pub thread: i64,
    /// Task index, -1 outside a task.
    pub task: i64,
    /// A task's poll: from the wake that ended its previous suspension to its start (ns); -1
    /// for a task's first poll, for polls of other spans and when not recorded.
    pub scheduled_ns: i64,
}

/// The event columns of the file and how starts are encoded.
#[derive(Debug)]
struct EventColumns {
    /// `start_deltas` (schema 3) or `start_times` (schema 2).
    starts: Dataset,
    /// Whether `starts` holds per-row deltas.
    deltas: bool,
    /// `durations` (schema 3) or `end_times` (schema 2).
    ends: Dataset,
    thread_ids: Option<Dataset>,
    task_ids: Option<Dataset>,
    gpu: Option<Dataset>,
    /// `/scope_profiler_rs/call_scheduled_ns`.
    scheduled: Option<Dataset>,
    /// `events/await_ns` (files with task lanes).
    awaits: Option<Dataset>,
}

/// A profile file opened for reading. See the [module docs](self).
#[derive(Debug)]
pub struct Profile {
    path: PathBuf,
    layout: StorageLayout,
    names: Vec<String>,
    rows: Vec<IndexRow>,
    aggregates: Vec<AggregateRow>,
    events: u64,
    columns: Option<EventColumns>,
    threads: Vec<ThreadInfo>,
    tasks: Vec<TaskInfo>,
    polls: Option<(Vec<String>, u64)>,
    start_time_ns: Option<i64>,
    label: Option<String>,
    // Keeps the file open while the datasets are read.
    _file: File,
}

impl Profile {
    /// Opens `path` and checks its structure.
    ///
    /// # Errors
    /// A [`ReadError`] naming the file and the first problem found: not HDF5, not schema 2 or
    /// 3, a required dataset missing or of the wrong type or length, index rows out of bounds
    /// or overlapping, ids out of range.
    pub fn open(path: impl AsRef<Path>) -> Result<Profile, ReadError> {
        let path = path.as_ref().to_path_buf();
        let err = |problem: String| ReadError {
            path: path.clone(),
            problem,
        };
        match std::fs::metadata(&path) {
            Err(e) => return Err(err(format!("cannot open: {e}"))),
            Ok(m) if !m.is_file() => return Err(err("not a regular file".into())),
            Ok(_) => {}
        }
        ::hdf5::silence_errors(true);
        let file = File::with_options()
            .with_fapl(|p| p.file_locking(false))
            .open(&path)
            .map_err(|e| err(format!("not a readable HDF5 file ({})", short(&e))))?;
        let h5 = H5 {
            file: &file,
            err: &err,
        };
        let schema = h5.int_attr("", "scope_profiler_schema").ok_or_else(|| {
            err(
                "no integer root attribute `scope_profiler_schema`: not a scope-profiler file"
                    .into(),
            )
        })?;
        if !(2..=3).contains(&schema) {
            return Err(err(format!(
                "schema version {schema} is not supported (2 or 3 expected)"
            )));
        }
        let layout = match h5.str_attr("", "storage_layout").as_deref() {
            Some("aggregate") => StorageLayout::Aggregate,
            _ => StorageLayout::Columnar,
        };
        let names = h5.strings("region_table/names", None)?;
        let mut p = Profile {
            path: path.clone(),
            layout,
            names,
            rows: Vec::new(),
            aggregates: Vec::new(),
            events: 0,
            columns: None,
            threads: Vec::new(),
            tasks: Vec::new(),
            polls: None,
            start_time_ns: h5.int_attr("metadata", "start_time_ns"),
            label: h5.str_attr("metadata", "label"),
            _file: file.clone(),
        };
        match layout {
            StorageLayout::Aggregate => p.aggregates = read_aggregates(&h5, p.names.len())?,
            StorageLayout::Columnar => {
                p.read_index(&h5)?;
                p.read_lanes(&h5)?;
            }
        }
        Ok(p)
    }

    /// Reads `rank_region_index` and the event columns' shapes, and checks the rows.
    fn read_index(&mut self, h5: &H5<'_>) -> Result<(), ReadError> {
        let err = h5.err;
        let ids: Vec<u64> = h5.ints("rank_region_index/region_ids", None)?;
        let r = Some(ids.len() as u64);
        let ranks: Vec<u64> = h5.ints("rank_region_index/ranks", r)?;
        let offsets: Vec<u64> = h5.ints("rank_region_index/event_offsets", r)?;
        let counts: Vec<u64> = h5.ints("rank_region_index/event_counts", r)?;
        let exclusive: Option<Vec<i64>> = if h5.exists("rank_region_index/exclusive_totals") {
            Some(h5.ints("rank_region_index/exclusive_totals", r)?)
        } else {
            None
        };
        let (columns, n) = h5.event_columns()?;
        self.columns = Some(columns);
        self.events = n;
        for (i, &id) in ids.iter().enumerate() {
            if id >= self.names.len() as u64 {
                return Err(err(format!(
                    "rank_region_index row {i} names region {id}, but only {} region names exist",
                    self.names.len()
                )));
            }
            let rank = u32::try_from(ranks[i]).map_err(|_| {
                err(format!(
                    "rank_region_index row {i} has rank {}",
                    ranks[i] as i64
                ))
            })?;
            let end = offsets[i].checked_add(counts[i]).filter(|&e| e <= n);
            if end.is_none() {
                return Err(err(format!(
                    "rank_region_index row {i}: offset {} + count {} runs past the {n} events",
                    offsets[i] as i64, counts[i] as i64
                )));
            }
            self.rows.push(IndexRow {
                region: id as u32,
                rank,
                offset: offsets[i],
                count: counts[i],
                exclusive_ns: exclusive.as_ref().map(|x| x[i]).filter(|&x| x >= 0),
            });
        }
        check_no_overlap(&self.rows, err)
    }

    /// Reads `thread_table`, `task_table` and the shape of `/scope_profiler_rs/polls`.
    fn read_lanes(&mut self, h5: &H5<'_>) -> Result<(), ReadError> {
        if h5.exists("thread_table") {
            let ranks: Vec<u64> = h5.ints("thread_table/ranks", None)?;
            let n = Some(ranks.len() as u64);
            let index: Vec<i64> = h5.ints("thread_table/index", n)?;
            let tid: Vec<i64> = h5.ints("thread_table/native_id", n)?;
            let name = h5.strings("thread_table/name", n)?;
            for i in 0..ranks.len() {
                self.threads.push(ThreadInfo {
                    rank: ranks[i].min(u64::from(u32::MAX)) as u32,
                    index: index[i],
                    native_id: tid[i],
                    name: name[i].clone(),
                });
            }
        }
        if h5.exists("task_table") {
            let ranks: Vec<u64> = h5.ints("task_table/ranks", None)?;
            let n = Some(ranks.len() as u64);
            let index: Vec<i64> = h5.ints("task_table/index", n)?;
            let name = h5.strings("task_table/name", n)?;
            let root = h5.strings("task_table/coro_name", n)?;
            let tokio: Option<Vec<i64>> = if h5.exists("task_table/tokio_id") {
                Some(h5.ints("task_table/tokio_id", n)?)
            } else {
                None
            };
            let waits = tasks::task_waits(h5, n)?;
            for i in 0..ranks.len() {
                self.tasks.push(TaskInfo {
                    rank: ranks[i].min(u64::from(u32::MAX)) as u32,
                    index: index[i],
                    name: name[i].clone(),
                    root: root[i].clone(),
                    tokio_id: tokio.as_ref().map_or(0, |t| t[i] as u64),
                    sched: waits.as_ref().and_then(|w| w.row(i)),
                });
            }
        }
        let polls = "scope_profiler_rs/polls";
        if h5.exists(polls) {
            let names = h5.strings("scope_profiler_rs/region_names", None)?;
            let (_, n) = h5.int_dataset(&format!("{polls}/start_ns"))?;
            for col in ["region_ids", "durations", "thread_ids", "task_ids"]
                .into_iter()
                .chain(
                    h5.exists(&format!("{polls}/scheduled_ns"))
                        .then_some("scheduled_ns"),
                )
            {
                let (_, len) = h5.int_dataset(&format!("{polls}/{col}"))?;
                if len != n {
                    return Err((h5.err)(format!(
                        "`{polls}/{col}` has {len} elements, expected {n}"
                    )));
                }
            }
            self.polls = Some((names, n));
        }
        Ok(())
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Columnar or aggregate.
    pub fn layout(&self) -> StorageLayout {
        self.layout
    }

    /// The region names (index = region id).
    pub fn region_names(&self) -> &[String] {
        &self.names
    }

    /// The name of region `id` (`"?"` when out of range, which [`Profile::open`] rules out for
    /// index rows).
    pub fn region_name(&self, id: u32) -> &str {
        self.names.get(id as usize).map_or("?", String::as_str)
    }

    /// The index rows of the columnar layout, in file order.
    pub fn rows(&self) -> &[IndexRow] {
        &self.rows
    }

    /// The per-region totals of the aggregate layout.
    pub fn aggregates(&self) -> &[AggregateRow] {
        &self.aggregates
    }

    /// Number of calls in the event columns.
    pub fn event_count(&self) -> u64 {
        self.events
    }

    /// The thread table (empty when the file has none).
    pub fn threads(&self) -> &[ThreadInfo] {
        &self.threads
    }

    /// The task table (empty when the file has none).
    pub fn tasks(&self) -> &[TaskInfo] {
        &self.tasks
    }

    /// Whether the calls carry thread indices (`events/thread_ids`).
    pub fn has_thread_ids(&self) -> bool {
        self.columns
            .as_ref()
            .is_some_and(|c| c.thread_ids.is_some())
    }

    /// Whether the calls carry device times (`events/gpu_durations`).
    pub fn has_gpu(&self) -> bool {
        self.columns.as_ref().is_some_and(|c| c.gpu.is_some())
    }

    /// Number of polls in `/scope_profiler_rs/polls` (0 when the group is absent).
    pub fn poll_count(&self) -> u64 {
        self.polls.as_ref().map_or(0, |p| p.1)
    }

    /// Region names the polls refer to (`/scope_profiler_rs/region_names`).
    pub fn poll_region_names(&self) -> &[String] {
        self.polls.as_ref().map_or(&[], |p| &p.0)
    }

    /// `metadata/start_time_ns`, when recorded.
    pub fn start_time_ns(&self) -> Option<i64> {
        self.start_time_ns
    }

    /// `metadata/label`, when recorded.
    pub fn label(&self) -> Option<&str> {
        self.label.as_deref()
    }

    fn err(&self, problem: String) -> ReadError {
        ReadError {
            path: self.path.clone(),
            problem,
        }
    }
}

/// The aggregate layout's per-region columns.
fn read_aggregates(h5: &H5<'_>, names: usize) -> Result<Vec<AggregateRow>, ReadError> {
    let ids: Vec<u64> = h5.ints("rank_region_index/region_ids", None)?;
    let r = Some(ids.len() as u64);
    let ranks: Vec<u64> = h5.ints("rank_region_index/ranks", r)?;
    let counts: Vec<u64> = h5.ints("rank_region_index/aggregate_counts", r)?;
    let totals: Vec<i64> = h5.ints("rank_region_index/aggregate_totals", r)?;
    let mins: Vec<i64> = h5.ints("rank_region_index/aggregate_minimums", r)?;
    let maxs: Vec<i64> = h5.ints("rank_region_index/aggregate_maximums", r)?;
    let mut out = Vec::with_capacity(ids.len());
    for i in 0..ids.len() {
        if ids[i] >= names as u64 {
            return Err((h5.err)(format!(
                "rank_region_index row {i} names region {}, but only {names} region names exist",
                ids[i] as i64
            )));
        }
        out.push(AggregateRow {
            region: ids[i] as u32,
            rank: ranks[i].min(u64::from(u32::MAX)) as u32,
            count: counts[i],
            total_ns: totals[i],
            min_ns: mins[i],
            max_ns: maxs[i],
        });
    }
    Ok(out)
}

/// Checks that no two non-empty index `rows` share events.
fn check_no_overlap(rows: &[IndexRow], err: &dyn Fn(String) -> ReadError) -> Result<(), ReadError> {
    let mut by_offset: Vec<&IndexRow> = rows.iter().filter(|r| r.count > 0).collect();
    by_offset.sort_by_key(|r| r.offset);
    for w in by_offset.windows(2) {
        if w[0].offset + w[0].count > w[1].offset {
            return Err(err(format!(
                "rank_region_index rows overlap: events {}..{} and {}..",
                w[0].offset,
                w[0].offset + w[0].count,
                w[1].offset
            )));
        }
    }
    Ok(())
}

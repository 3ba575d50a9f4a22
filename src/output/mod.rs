//! Stage 4, output: a phase as rows ([`model::PhaseData`]) and the formats written from it.
//!
//! - `model`: the rows one finalize hands to the writers (regions, calls, threads, tasks,
//!   polls), with the calls in memory or in spool files;
//! - `events`: the two passes over a phase's calls (counts, statistics and nesting, then the
//!   event columns) in bounded memory;
//! - `hdf5`: the schema-3 file (`mod`: core groups and publishing; `ctx`: errors naming the
//!   file and object; `lanes`: thread and task tables, polls; `lines`: line profiles and the
//!   profiler's own cost; `aux`: the `rank0` perf and LIKWID groups);
//! - `summary`: the table printed at finalize;
//! - `tasks`: its tasks box (Tokio tasks' busy, idle and scheduled time);
//! - `source`: the source text of each region;
//! - `files`: creating, checking and publishing files safely.

pub(crate) mod events;
pub(crate) mod hdf5;
pub(crate) mod source;
pub(crate) mod summary;
pub(crate) mod tasks;

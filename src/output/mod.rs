//! Stage 6, output formats: the files and text written from a phase's rows
//! (`crate::data::rows::PhaseData`, its calls read through `crate::spool`) and a finalize's
//! first pass (`crate::data::scan::Scan`, made by `crate::finalize::scan`).
//!
//! - `events`: the second pass over a phase's calls: the event columns, in bounded memory;
//! - `hdf5`: the schema-3 file (`mod`: core groups and publishing; `ctx`: errors naming the
//!   file and object; `lanes`: thread and task tables, polls; `lines`: line profiles and the
//!   profiler's own cost; `aux`: the `rank0` perf and LIKWID groups);
//! - `summary`: the table printed at finalize;
//! - `tasks`: its tasks box (Tokio tasks' busy, idle and scheduled time);
//! - `source`: the source text of each region.

pub(crate) mod events;
pub(crate) mod hdf5;
pub(crate) mod source;
pub(crate) mod summary;
pub(crate) mod tasks;

//! Stage 1, plain data and helpers: what every stage above may use, and which uses none of
//! them (only `crate::error`, `crate::config`, `crate::fasthash` and `crate::checkpoint`, which
//! belong to this stage too).
//!
//! - `rows`: a phase's rows (regions, calls, threads, tasks, polls, perf and LIKWID results);
//! - `stats`: exact per-region statistics (Welford, mergeable);
//! - `report`: the [`Report`](crate::Report) a finalize returns, and its parts;
//! - `scan`: what a finalize's first pass learns (counts, summary rows, nesting results);
//! - `lines`: line-timing profiles;
//! - `tasks`: Tokio tasks' figures ([`TaskStats`](crate::TaskStats)) and their summary;
//! - `sites`: Tokio spawn sites, interned;
//! - `spread`: a region's spread over MPI ranks, and how a multi-rank file was written;
//! - `launcher`: an MPI launcher's environment (rank, size) without the `mpi` feature;
//! - `metrics_options`: the live metrics' options and their checks;
//! - `files`: creating, checking and publishing files safely;
//! - `host`: which process on which host made a temporary file, and whether it still runs;
//! - `time`: the monotonic clock that names temporary files;
//! - `flight`: the time a flight-recorder dump covers;
//! - `trigger`: when the flight recorder dumps by itself ([`Trigger`](crate::Trigger)).

pub(crate) mod edges;
pub(crate) mod files;
pub(crate) mod flight;
pub(crate) mod host;
pub(crate) mod launcher;
pub(crate) mod lines;
#[cfg(feature = "prometheus")]
pub(crate) mod metrics_options;
pub(crate) mod open_calls;
pub(crate) mod report;
pub(crate) mod rows;
pub(crate) mod scan;
pub(crate) mod sites;
pub(crate) mod spread;
pub(crate) mod stats;
pub(crate) mod tasks;
pub(crate) mod time;
pub(crate) mod trigger;

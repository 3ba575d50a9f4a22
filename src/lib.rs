//! # scope-profiler
//!
//! A profiler for Rust programs that already use [`tracing`]: add one
//! [`tracing_subscriber::Layer`], [`ScopeLayer`], and every span callsite becomes a *region*
//! with exact call statistics, every call's start and end on its thread lane, and one HDF5
//! file in the format of the Python package scope-profiler 0.7.5 (schema 3), so its CLI
//! (`scope-profiler inspect`, `report`, `diff`) works on Rust programs unchanged.
//!
//! ```
//! use scope_profiler::{Mode, ScopeLayer};
//! use tracing_subscriber::prelude::*;
//!
//! let (layer, guard) = ScopeLayer::builder()
//!     .mode(Mode::TimeOnly)
//!     .no_output()          // or .output("profiling_data.h5")
//!     .summary(false)       // print the table at finalize (default true)
//!     .build()?;
//! let subscriber = tracing_subscriber::registry().with(layer);
//! tracing::subscriber::with_default(subscriber, || {
//!     for _ in 0..10 {
//!         let _outer = tracing::info_span!("solve").entered();
//!         tracing::info_span!("step").in_scope(|| std::hint::black_box(1 + 1));
//!     }
//! });
//! let report = guard.finalize()?;
//! assert_eq!(report.region("solve").unwrap().calls, 10);
//! assert_eq!(report.region("step").unwrap().calls, 10);
//! # Ok::<(), scope_profiler::Error>(())
//! ```
//!
//! ## Vocabulary
//! - **region**: a span name; all callsites with that name pool into one region.
//! - **call**: one span instance, from its first enter to its last exit. An `#[instrument]`ed
//!   async fn is one call per invocation, however many polls it takes.
//! - **poll**: one enter -> exit interval.
//!
//! ## Architecture
//!
//! Data flows one way, through stages that each live in folders of `src/`. A stage uses only
//! its own modules and the stages below it, never one above; `scripts/check-layers.sh` lists
//! every `crate::` edge between stages and fails on an upward one (CI runs it, see `.ci/run`;
//! test-only code is exempt). Bottom to top:
//!
//! 1. **Plain data and helpers** (`data/`, with `error`, `config`, `fasthash`,
//!    `checkpoint`): a phase's rows (`rows`), exact statistics (`stats`), the [`Report`] and
//!    its parts (`report`), a finalize's first-pass results and nesting results (`scan`),
//!    line profiles, Tokio tasks' figures and spawn sites, the MPI launcher's environment and
//!    a region's spread over ranks, the monotonic clock and file-system helpers (`files`:
//!    creating, checking and publishing files safely).
//! 2. **Storage** (`spool/`): the varint *spool* file beside the output that a phase's calls,
//!    task rows and polls stream to, its writer, its readers (whole, or following the file
//!    while the flusher writes it) and the reading of a `PhaseData`'s calls wherever they are.
//!    Beneath both the flusher (which writes it) and finalize (which reads it back).
//! 3. **Sinks** (`sink/`: perf, LIKWID, NVTX, CUDA), hooked into recording at every
//!    enter/exit and adding their results at finalize; and the **live metrics** (`metrics/`,
//!    feature `prometheus`): per-region counters and a duration histogram the flusher feeds
//!    and publishes a few times a second, served by a small HTTP endpoint
//!    (`Builder::prometheus`) and `FlushGuard::metrics_text` in the Prometheus text format.
//! 4. **Recording** (`recording/`: `layer`, `subscriber`, `lane`, `clock`, `pause`, `events`,
//!    `tokio`, `region`, `shared`; and `fork`, which works on that state alone). The only
//!    code on the program's threads. Each callback of [`ScopeLayer`] (or [`ScopeSubscriber`])
//!    reads the TSC and appends one 16-byte record to its thread's *lane*: chunks of records
//!    taken from one pool (the [buffer budget](Builder::buffer_budget)), handed to the flusher
//!    when full, with no lock and no allocation in steady state. When the pool is empty the
//!    thread waits for the flusher (bounded) or drops whole calls ([`Builder::lossy`]); a lost
//!    record leaves a marker in the stream, so no call is ever written in part.
//!    `recording::shared::Shared` is what the front ends, lanes, flusher and guard share.
//! 5. **Flusher** (`flusher/`: `flush`, `assemble`, `task`, `sched`, `lines`, `thread_rows`,
//!    `flight`, `triggers`).
//!    One background thread drains every lane every 2 ms (up to 32 ms apart while there is
//!    little to read), gives the chunks back to the pool, and *assembles* records into calls
//!    (first enter to last exit, across threads), polls and task rows. It folds each call
//!    into its region's exact statistics and appends it to the spool (or keeps it in memory
//!    without a file). Its work is amortized O(1) per record, and its memory is bounded by
//!    what is open, not by what finished. With [`Builder::flight_recorder`] the calls go to a
//!    rolling ring of spool segments instead (`flight`), and the flusher checks the dump
//!    triggers (`triggers`).
//! 6. **Output formats** (`output/`: `hdf5/`, `events`, `summary`, `tasks`, `source`): a
//!    phase written as the scope-profiler 0.7.5 schema-3 HDF5 file (its event columns in a
//!    second, streaming pass) and as the printed summary.
//! 7. **Finalize** (`finalize/`: `guard`, `pipeline`, `load`, `scan`, `nesting`,
//!    `read_back`, `publish`, `recover`; and `mpi/`). [`FlushGuard::finalize`] asks the
//!    flusher for a snapshot of the phase, then streams the spool twice: first to count,
//!    summarize and nest the calls (`scan`; call ids, exclusive times, the call tree, on disk
//!    above 1.5 M calls), then to write them. It builds the [`Report`] and publishes the file
//!    atomically. How a phase goes out is chosen once per phase, a `mpi::Publisher`: this
//!    process alone, or one rank of a [`Builder::mpi`] run, where every rank writes its own
//!    rows through MPI-IO (`mpio`) or rank 0 gathers them (the relay). `recover` turns a
//!    spool left by a crash into a profile. `dump` (with `dump_signal` and `dump_triggers`)
//!    writes a flight-recorder dump from the ring's segments the way `recover` writes a spool.
//! 8. **Read** ([`read`]): any schema-3 file read back.
//! 9. **The session**: the crate root and `builder` (with the overhead probe,
//!    `builder::overhead`, which runs a whole profiler at `build()`), which build every stage
//!    and hand the user the layer and the guard.
//! 10. **The command line** (`src/bin`, feature `cli`), on the public API.
//!
//! Span ids: the profiler relies on the subscriber never reusing a span id while that span
//! is open, which `tracing_subscriber::Registry` guarantees (a slot is freed only after the
//! span closes; its generation counter then gives the next span a new id, and the id comes
//! back after 8 191 reuses of the slot). The assembler tells instances of a reused id apart
//! by stream order (a record belongs to the newest instance of its id). [`ScopeSubscriber`]'s
//! ids come from a counter and carry their callsite: never reused, they need no creation
//! record, and the flusher makes a span's instance when it reads its first record.
//!
//! ## How it stays cheap
//! The callbacks only read the TSC and append a 16-byte record to a thread-local buffer; a
//! background flusher reassembles calls, folds statistics and writes files. See
//! `benches/cost.rs` and `docs/performance.md` for the measured cost.

#![deny(missing_docs)]

#[cfg(not(target_os = "linux"))]
compile_error!(
    "scope-profiler supports Linux only: it uses gettid, perf_event_open and unix file APIs"
);

mod builder;
mod checkpoint;
mod config;
mod data;
mod error;
mod fasthash;
mod finalize;
mod flusher;
mod fork;
#[cfg(feature = "prometheus")]
mod metrics;
mod mpi;
mod output;
pub mod read;
mod recording;
mod sink;
mod spool;
#[cfg(test)]
mod testing;

/// The README's Rust examples, compiled by `cargo test --doc` so they cannot rot
/// (`tests/readme.rs` also builds and runs its Tokio example as a new project).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

pub use builder::Builder;
pub use config::{Mode, DEFAULT_BUFFER_BUDGET, DEFAULT_FLIGHT_DISK_BUDGET, MIN_BUFFER_BUDGET};
pub use data::report::{DetailLost, RegionStats, Report};
pub use data::rows::SESSION_REGION;
pub use data::tasks::TaskStats;
pub use data::trigger::{Trigger, DEFAULT_TRIGGER_COOLDOWN};
pub use error::Error;
pub use finalize::dump::DumpHandle;
pub use finalize::dump_triggers::MAX_TRIGGER_DUMPS;
pub use finalize::guard::FlushGuard;
pub use finalize::recover::{recover, recover_spool, Recovered};
pub use mpi::merge::{merge_ranks, Merged};
pub use mpi::{MpiWrite, RankSpread};
pub use recording::layer::ScopeLayer;
pub use recording::pause::Switch;
pub use recording::subscriber::ScopeSubscriber;

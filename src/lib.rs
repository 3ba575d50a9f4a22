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
//! ## How it stays cheap
//! The layer's callbacks only read the TSC and append a 24-byte record to a thread-local
//! buffer; a background flusher reassembles calls, folds statistics and writes files. See
//! `benches/overhead.rs` and the README for the measured cost.

#![deny(missing_docs)]

#[cfg(not(target_os = "linux"))]
compile_error!(
    "scope-profiler supports Linux only: it uses gettid, perf_event_open and unix file APIs"
);

mod assemble;
mod builder;
mod clock;
mod config;
mod error;
mod fasthash;
mod files;
mod finalize;
mod flush;
mod guard;
mod lane;
mod layer;
mod lines;
mod mpi;
mod nesting;
mod output;
mod overhead;
mod pause;
pub mod read;
mod recover;
mod region;
mod report;
mod sink;
mod spool;
mod state;
mod stats;
mod task;
#[cfg(test)]
mod testing;
mod thread_rows;

pub use builder::Builder;
pub use config::{Mode, DEFAULT_BUFFER_BUDGET, MIN_BUFFER_BUDGET};
pub use error::Error;
pub use guard::FlushGuard;
pub use layer::ScopeLayer;
pub use mpi::merge::{merge_ranks, Merged};
pub use output::model::SESSION_REGION;
pub use pause::Switch;
pub use recover::{recover, recover_spool, Recovered};
pub use report::{RegionStats, Report};

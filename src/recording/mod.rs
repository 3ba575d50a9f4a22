//! Stage 4, recording: the only code that runs on the program's threads (see the crate's
//! "Architecture"; it uses only `crate::data`, `crate::spool` helpers and `crate::sink`).
//!
//! - `layer`: the `tracing_subscriber::Layer` callbacks (one record each, after one pause-flag
//!   load);
//! - `subscriber`: the same records from a `tracing::Subscriber` of its own, with no registry
//!   (span ids from a counter, handles of cloned spans, each thread's entered spans);
//! - `lane`: the per-thread record streams, their chunks, the shared pool (the buffer budget),
//!   backpressure and the loss markers, with the drain protocol the flusher follows;
//! - `clock`: the TSC read on every enter/exit and its conversion to nanoseconds;
//! - `pause`: the runtime switch checked by every callback;
//! - `events`: line-timing checkpoints (`tracing` events inside spans);
//! - `shared`: the state one profiler's front end, lanes, flusher and guard share (config,
//!   clock, pool, callsites, sinks); the session's MPI is not in it (the guard holds that);
//! - `region`: the callsite registry the front ends fill and the flusher reads;
//! - `follows`: `follows_from` links, a bounded side channel to the flusher;
//! - `tokio`: Tokio's own instrumentation (`--cfg tokio_unstable`): task spawns and wakes
//!   (the spawn-site table is `crate::data::sites`).
//!
//! Nothing here assembles or writes: records go to the flusher (`crate::flusher`).

pub(crate) mod clock;
pub(crate) mod events;
pub(crate) mod follows;
pub(crate) mod lane;
pub(crate) mod layer;
pub(crate) mod pause;
pub(crate) mod region;
pub(crate) mod shared;
pub(crate) mod subscriber;
pub(crate) mod tokio;

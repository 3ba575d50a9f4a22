//! Stage 5, the flusher: one background thread that turns the lanes' records into calls.
//!
//! - `flush`: the thread's loop (drain every 2 to 32 ms, recycle chunks, fold, survive its own
//!   panics) and the snapshot it hands to a finalize;
//! - `assemble`: records -> calls and polls, across lanes and reused span ids;
//! - `task`: Tokio task rows, settled as calls complete;
//! - `sched`: Tokio tasks' idle and scheduled time (Tokio's own instrumentation);
//! - `lines`: line-timing tables folded from checkpoints;
//! - `id_index`: span and task ids to slab entries, 4 bytes a bucket;
//! - `thread_rows`: rows of threads whose lanes are gone.
//!
//! It reads what `crate::recording` wrote (and its callsite registry, `recording::region`),
//! folds calls into `crate::data::stats`, streams them to `crate::spool`, and hands phases
//! to `crate::finalize`, which asks for them (it never looks up at finalize).

pub(crate) mod assemble;
pub(crate) mod flight;
pub(crate) mod flush;
pub(crate) mod id_index;
pub(crate) mod lines;
pub(crate) mod sched;
pub(crate) mod task;
pub(crate) mod thread_rows;
pub(crate) mod triggers;

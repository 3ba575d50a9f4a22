//! Stage 7, finalize: from the flusher's snapshot of a phase to a published profile.
//!
//! - `guard`: [`FlushGuard`](crate::FlushGuard), the user's handle (finalize, pause, rotation,
//!   drop);
//! - `pipeline`: one finalize as named steps (snapshot, load, read back, sinks, report,
//!   publish, print);
//! - `load`: the phase's rows from the snapshot, and the report;
//! - `scan`: the first pass over the calls (counts, summary rows, nesting);
//! - `regions`: region statistics from the snapshot;
//! - `failure`: a phase whose spool could not be written whole, as the finalize reports it;
//! - `read_back`: the phase's calls and lanes read back from the spool on two threads, the
//!   file begun with the lane tables meanwhile;
//! - `publish`: where the phase's file goes, and writing it there;
//! - `nesting`: call ids, parents, exclusive times and the call tree, in memory or by an
//!   external sort;
//! - `names`: where a phase goes (numbered, late and recovered file names);
//! - `recover`: a profile from the spool a crashed run left.
//!
//! It takes phases from `crate::flusher` and writes them through `crate::output`; a phase's
//! [`Publisher`](crate::mpi::Publisher) (`crate::mpi`, this stage too) says once whether it
//! goes out alone or as one rank of a collective. The [`Report`](crate::Report) type is
//! plain data (`crate::data::report`).

pub(crate) mod dump;
pub(crate) mod dump_signal;
pub(crate) mod dump_triggers;
mod failure;
pub(crate) mod guard;
mod load;
pub(crate) mod names;
pub(crate) mod nesting;
pub(crate) mod pipeline;
mod publish;
mod read_back;
pub(crate) mod recover;
mod regions;
pub(crate) mod scan;

//! Stage 3, finalize: from the flusher's snapshot of a phase to a published profile.
//!
//! - `guard`: [`FlushGuard`](crate::FlushGuard), the user's handle (finalize, pause, rotation,
//!   drop);
//! - `pipeline`: one finalize as named steps (snapshot, load, read back, sinks, report,
//!   publish, print);
//! - `failure`: a phase whose spool could not be written whole, as the finalize reports it;
//! - `read_back`: the phase's calls and lanes read back from the spool on two threads, the
//!   file begun with the lane tables meanwhile;
//! - `publish`: where the phase's file goes, and writing it there;
//! - `nesting`: call ids, parents, exclusive times and the call tree, in memory or by an
//!   external sort;
//! - `names`: where a phase goes (numbered, late and recovered file names);
//! - `report`: the [`Report`](crate::Report) a finalize returns;
//! - `recover`: a profile from the spool a crashed run left.
//!
//! It takes phases from `crate::flusher` and writes them through `crate::output`.

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

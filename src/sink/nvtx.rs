//! The NVTX sink: one NVTX range per call, for Nsight Systems and other NVTX tools.
//!
//! Every call (span instance) becomes one *start/end* range in the domain `scope-profiler`,
//! named after its region (the span name). The range starts at the span's first enter and ends
//! when the span closes. Start/end ranges, not push/pop ranges: an `#[instrument]`ed future is
//! entered once per poll, possibly on several threads, and its span may close on yet another
//! thread, which push/pop (thread-local stacks) cannot express. The ranges of nested spans nest
//! like the spans (a child's range starts after and ends before its parent's).
//!
//! Costs, and where state lives:
//! - region names are registered with NVTX (`nvtxDomainRegisterStringA`) once per callsite and
//!   cached in a sharded map keyed by the callsite's address, so later calls pass a string
//!   handle: no string is copied or formatted per call;
//! - the open range of each span lives in a sharded map (`DashMap`) keyed by span id: inserted
//!   at the first enter, looked up at every later enter, removed (which ends the range) at
//!   close. One shard lock per enter and per close, no global lock, and no allocation once the
//!   map has grown to the number of spans open at once. A sharded map rather than a per-thread
//!   one because the enter and the close of one span may happen on different threads.
//!
//! Without an attached tool (no `NVTX_INJECTION64_PATH`, e.g. outside Nsight) the NVTX calls are
//! no-ops, but the bookkeeping above still runs; only enable the sink when profiling with a tool.

use std::ffi::CString;
use std::sync::OnceLock;

use dashmap::DashMap;
use nvtx::domain::{Range, RegisteredString};
use nvtx::{Domain, Str};
use tracing_core::Metadata;

use crate::config::Config;
use crate::fasthash::IdHasher;
use crate::Error;

type IdBuild = std::hash::BuildHasherDefault<IdHasher>;

/// The NVTX domain of every range this crate emits.
pub(crate) const DOMAIN_NAME: &str = "scope-profiler";

/// The process-wide domain. NVTX domains are process-wide anyway (creating one twice with the
/// same name yields the same domain), and a `'static` domain lets open ranges be stored in the
/// sink without borrowing from it.
fn domain() -> &'static Domain {
    static DOMAIN: OnceLock<Domain> = OnceLock::new();
    DOMAIN.get_or_init(|| Domain::new(ascii(DOMAIN_NAME)))
}

/// A name as an NVTX "A" (`char*`, UTF-8) string, interior NULs removed. (The nvtx crate's
/// `Str::from_str_lossy` makes wide strings, which tools show just as well but log as `W`
/// calls; narrow strings are the common case in NVTX tools.)
fn ascii(name: &str) -> Str {
    let bytes: Vec<u8> = name.bytes().filter(|&b| b != 0).collect();
    Str::from(CString::new(bytes).unwrap_or_default())
}

/// Emits one NVTX range per call.
pub(crate) struct NvtxSink {
    domain: &'static Domain,
    /// Callsite address -> registered region name.
    names: DashMap<usize, RegisteredString<'static>, IdBuild>,
    /// Span id -> its open range (ended when dropped).
    open: DashMap<u64, Range<'static>, IdBuild>,
}

impl NvtxSink {
    /// Creates the sink. NVTX itself never fails: without a tool its calls do nothing.
    pub(crate) fn new(_config: &Config) -> Result<Self, Error> {
        Ok(Self::create())
    }

    fn create() -> Self {
        NvtxSink {
            domain: domain(),
            names: DashMap::with_hasher(IdBuild::default()),
            open: DashMap::with_hasher(IdBuild::default()),
        }
    }

    /// The registered name of a callsite, registering it on first sight (cold).
    fn name(&self, meta: &'static Metadata<'static>) -> RegisteredString<'static> {
        let key = meta as *const Metadata<'static> as usize;
        if let Some(name) = self.names.get(&key) {
            return *name;
        }
        *self
            .names
            .entry(key)
            .or_insert_with(|| self.domain.register_string(ascii(meta.name())))
    }

    /// Number of ranges currently open (for tests).
    #[cfg(test)]
    fn open_ranges(&self) -> usize {
        self.open.len()
    }
}

impl super::Sink for NvtxSink {
    fn enter(&self, id: u64, meta: &'static Metadata<'static>) {
        // The first enter starts the call's range; later polls find it open.
        if let dashmap::Entry::Vacant(slot) = self.open.entry(id) {
            let name = self.name(meta);
            slot.insert(self.domain.range(name));
        }
    }

    fn exit(&self, _id: u64, _meta: &'static Metadata<'static>, _emit: &mut dyn FnMut(u64)) {
        // The range spans the whole call; it ends at close.
    }

    fn close(&self, id: u64, _emit: &mut dyn FnMut(u64)) {
        // Dropping the range ends it (nvtxDomainRangeEnd), on whichever thread closes the span.
        drop(self.open.remove(&id));
    }
}

#[cfg(test)]
mod tests {
    use super::super::Sink;
    use super::*;

    #[test]
    fn one_open_range_per_span_until_close() {
        let sink = NvtxSink::create();
        // A registry enables the span, so it carries its callsite's metadata.
        let meta = tracing::subscriber::with_default(tracing_subscriber::registry(), || {
            tracing::info_span!("nvtx unit").metadata().unwrap()
        });
        let mut emit = |_| panic!("nvtx emits no payloads");
        sink.enter(1, meta);
        sink.exit(1, meta, &mut emit);
        sink.enter(1, meta); // a second poll of the same call
        sink.enter(2, meta);
        assert_eq!(sink.open_ranges(), 2);
        assert_eq!(sink.names.len(), 1, "one registered name per callsite");
        sink.exit(1, meta, &mut emit);
        sink.close(1, &mut emit);
        assert_eq!(sink.open_ranges(), 1);
        sink.exit(2, meta, &mut emit);
        sink.close(2, &mut emit);
        sink.close(3, &mut emit); // never entered: nothing to end
        assert_eq!(sink.open_ranges(), 0);
    }
}

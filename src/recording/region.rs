//! Regions: span callsites pooled by name, and the callsites the layer has seen.
//!
//! Every `&'static Metadata` of a span callsite maps to a dense region id; callsites with the
//! same span name share one region, and the first callsite seen supplies its source file and
//! line (as in the Python package, where a region is a name). Lookups happen on the flusher,
//! never on the hot path.
//!
//! A creation record carries its callsite as a bare address. The flusher never dereferences
//! such an address: it looks it up among the callsites that `register_callsite` handed to the
//! layer ([`Callsites`]), which `tracing` guarantees for every callsite before its first span.
//! An address that is not there (a torn or corrupt record) is rejected and counted.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tracing_core::Metadata;

use crate::fasthash::FastMap;

/// One region's identity.
#[derive(Clone, Debug)]
pub(crate) struct RegionInfo {
    pub name: &'static str,
    pub file: Option<&'static str>,
    pub line: Option<u32>,
    /// One of Tokio's own spans (`--cfg tokio_unstable`), which are not written as regions
    /// unless asked for (see [`crate::recording::tokio`]).
    pub tokio: Option<TokioSpan>,
}

/// Which of Tokio's own spans a region is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TokioSpan {
    /// `runtime.spawn`: a task (or a `block_on` future).
    Spawn,
    /// `runtime.resource*`: timers, channels, semaphores and their operations.
    Resource,
}

/// Span callsites registered with the layer (appended by `register_callsite`, or by a
/// thread's first span of a callsite whose registration another thread has not finished;
/// cold either way).
#[derive(Default)]
pub(crate) struct Callsites {
    list: Mutex<(Vec<&'static Metadata<'static>>, FastMap<usize, ()>)>,
    len: AtomicUsize,
}

impl Callsites {
    /// Records a callsite the layer was told about (once: a second registration of the same
    /// callsite changes nothing).
    pub(crate) fn register(&self, meta: &'static Metadata<'static>) {
        let mut list = self.list.lock().unwrap_or_else(|e| e.into_inner());
        let addr = meta as *const Metadata<'static> as usize;
        if list.1.insert(addr, ()).is_none() {
            list.0.push(meta);
            self.len.store(list.0.len(), Ordering::Release);
        }
    }

    /// Copies the callsites registered after the first `seen` into `into`.
    fn load_from(
        &self,
        seen: usize,
        into: &mut FastMap<usize, &'static Metadata<'static>>,
    ) -> usize {
        if self.len.load(Ordering::Acquire) <= seen {
            return seen;
        }
        let list = self.list.lock().unwrap_or_else(|e| e.into_inner());
        for meta in &list.0[seen..] {
            into.insert(*meta as *const Metadata<'static> as usize, meta);
        }
        list.0.len()
    }
}

/// Callsite -> region id, and the regions in id order.
#[derive(Default)]
pub(crate) struct RegionTable {
    callsites: Arc<Callsites>,
    valid: FastMap<usize, &'static Metadata<'static>>,
    seen: usize,
    by_callsite: FastMap<usize, u32>,
    /// The callsite looked up last and its region: consecutive calls mostly share one.
    last: (usize, u32),
    by_name: HashMap<&'static str, u32>,
    regions: Vec<RegionInfo>,
    /// Whether a region is one of Tokio's own spans (calls of others need no check).
    any_tokio: bool,
}

impl RegionTable {
    /// A table that accepts the callsites registered in `callsites`.
    pub(crate) fn new(callsites: Arc<Callsites>) -> RegionTable {
        RegionTable {
            callsites,
            // No callsite address is odd: nothing matches before the first lookup.
            last: (usize::MAX, 0),
            ..RegionTable::default()
        }
    }

    /// The region of the span callsite at `addr`, registering the region on first sight;
    /// `None` when `addr` is no callsite the layer has seen (a corrupt record).
    #[inline]
    pub(crate) fn region_of(&mut self, addr: usize) -> Option<u32> {
        if self.last.0 == addr {
            return Some(self.last.1);
        }
        let id = match self.by_callsite.get(&addr) {
            Some(&id) => id,
            None => self.region_of_slow(addr)?,
        };
        self.last = (addr, id);
        Some(id)
    }

    #[cold]
    fn region_of_slow(&mut self, addr: usize) -> Option<u32> {
        let meta = match self.valid.get(&addr) {
            Some(m) => *m,
            None => {
                self.seen = self.callsites.load_from(self.seen, &mut self.valid);
                *self.valid.get(&addr)?
            }
        };
        let next = self.regions.len() as u32;
        let id = *self.by_name.entry(meta.name()).or_insert(next);
        if id == next {
            let tokio = if crate::recording::tokio::is_spawn_callsite(meta) {
                Some(TokioSpan::Spawn)
            } else if crate::recording::tokio::is_resource_callsite(meta) {
                Some(TokioSpan::Resource)
            } else {
                None
            };
            self.any_tokio |= tokio.is_some();
            self.regions.push(RegionInfo {
                name: meta.name(),
                file: meta.file(),
                line: meta.line(),
                tokio,
            });
        }
        self.by_callsite.insert(addr, id);
        Some(id)
    }

    /// All regions, indexed by id.
    pub(crate) fn regions(&self) -> &[RegionInfo] {
        &self.regions
    }

    /// Whether any region is one of Tokio's own spans ([`RegionInfo::tokio`]).
    pub(crate) fn any_tokio(&self) -> bool {
        self.any_tokio
    }
}

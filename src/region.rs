//! Regions: span callsites pooled by name.
//!
//! Every `&'static Metadata` of a span callsite maps to a dense region id; callsites with the
//! same span name share one region, and the first callsite seen supplies its source file and
//! line (as in the Python package, where a region is a name). Lookups happen on the flusher,
//! never on the hot path.

use std::collections::HashMap;

use tracing_core::Metadata;

use crate::fasthash::FastMap;

/// One region's identity.
#[derive(Clone, Debug)]
pub(crate) struct RegionInfo {
    pub name: &'static str,
    pub file: Option<&'static str>,
    pub line: Option<u32>,
}

/// Callsite -> region id, and the regions in id order.
#[derive(Default)]
pub(crate) struct RegionTable {
    by_callsite: FastMap<usize, u32>,
    by_name: HashMap<&'static str, u32>,
    regions: Vec<RegionInfo>,
}

impl RegionTable {
    /// The region of a span callsite, registering it on first sight.
    #[inline]
    pub(crate) fn region_of(&mut self, meta: &'static Metadata<'static>) -> u32 {
        let key = meta as *const Metadata<'static> as usize;
        if let Some(&id) = self.by_callsite.get(&key) {
            return id;
        }
        let next = self.regions.len() as u32;
        let id = *self.by_name.entry(meta.name()).or_insert(next);
        if id == next {
            self.regions.push(RegionInfo {
                name: meta.name(),
                file: meta.file(),
                line: meta.line(),
            });
        }
        self.by_callsite.insert(key, id);
        id
    }

    /// All regions, indexed by id.
    pub(crate) fn regions(&self) -> &[RegionInfo] {
        &self.regions
    }
}

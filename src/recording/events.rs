//! Line-timing checkpoints on the recording side: the event callsites the layer has seen
//! ([`EventSites`], cold) and the hot path of an event inside a span ([`record_event`]: one
//! `EVENT` record and its site slot). The flusher turns them into line tables (`crate::flusher::lines`).

use std::collections::HashMap;
use std::sync::Mutex;

use tracing_core::{Event, Metadata, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

use crate::recording::lane::local::with_local;
use crate::recording::lane::record::Record;
use crate::recording::shared::Shared;

/// Where an event callsite is: its source file and line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct EventSite {
    pub file: Option<&'static str>,
    pub line: Option<u32>,
}

/// Every event callsite the layer has seen registered, by address (shared, cold path only).
#[derive(Debug, Default)]
pub(crate) struct EventSites(Mutex<HashMap<usize, EventSite>>);

impl EventSites {
    /// Registers the callsite at address `key`.
    pub(crate) fn insert(&self, key: usize, site: EventSite) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, site);
    }

    /// The callsite registered at address `site`, if any (cold: once per site and phase).
    pub(crate) fn get(&self, site: usize) -> Option<EventSite> {
        let map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.get(&site).copied()
    }
}

/// Remembers an event callsite (from `Layer::register_callsite`).
pub(crate) fn register_event_site(sites: &EventSites, meta: &'static Metadata<'static>) {
    let key = meta as *const Metadata<'static> as usize;
    let site = EventSite {
        file: meta.file(),
        line: meta.line(),
    };
    sites.insert(key, site);
}

/// The hot path of an event: one `EVENT` record for the span the event belongs to.
#[inline]
pub(crate) fn record_event<S>(shared: &Shared, event: &Event<'_>, ctx: &Context<'_, S>)
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let id = if let Some(parent) = event.parent() {
        parent.into_u64()
    } else if event.is_contextual() {
        match ctx.current_span().id() {
            Some(id) => id.into_u64(),
            None => return,
        }
    } else {
        return; // an explicit root event belongs to no call
    };
    record_checkpoint(shared, id, event.metadata());
}

/// One `EVENT` record (and its site slot) for span `id`: event callsite `site` fired now.
#[inline]
pub(crate) fn record_checkpoint(shared: &Shared, id: u64, site: &'static Metadata<'static>) {
    with_local(shared, |l| {
        l.push_pair(
            || Record::event(id, crate::recording::clock::ticks()),
            Record::event_site(site),
        )
    });
}

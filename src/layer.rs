//! `impl Layer for ScopeLayer`: the thin routing from `tracing` callbacks to the lanes.
//!
//! This is the hot path. Each callback reads the TSC once and appends one 24-byte record to
//! the calling thread's lane ([`crate::lane::local`]); nothing is looked up, allocated, locked
//! or formatted here. Region names, statistics, nesting and files are all the flusher's work.

use std::sync::Arc;

use tracing_core::span::{Attributes, Id};
use tracing_core::subscriber::Interest;
use tracing_core::{Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

use crate::lane::local::with_local;
use crate::lane::record::{self, Record};
use crate::state::Shared;
use crate::{Builder, Mode};

/// The profiler, as a `tracing_subscriber` [`Layer`].
///
/// Build it with [`ScopeLayer::builder`]; see the crate docs for a complete example.
#[derive(Clone)]
pub struct ScopeLayer {
    shared: Arc<Shared>,
    disabled: bool,
    track_async: bool,
}

impl ScopeLayer {
    /// Starts configuring a profiler.
    ///
    /// ```
    /// let (layer, guard) = scope_profiler::ScopeLayer::builder().no_output().build()?;
    /// # Ok::<(), scope_profiler::Error>(())
    /// ```
    pub fn builder() -> Builder {
        Builder::default()
    }

    pub(crate) fn new(shared: Arc<Shared>) -> ScopeLayer {
        ScopeLayer {
            disabled: shared.config.mode == Mode::Disabled,
            track_async: shared.config.track_async,
            shared,
        }
    }

    /// The mode this layer records in (after environment overrides).
    pub fn mode(&self) -> Mode {
        self.shared.config.mode
    }
}

impl std::fmt::Debug for ScopeLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScopeLayer")
            .field("mode", &self.shared.config.mode)
            .finish_non_exhaustive()
    }
}

impl<S> Layer<S> for ScopeLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        // Disabled: switch span callsites off for good, so `tracing` skips them without
        // calling any subscriber. Events are none of our business either way.
        if self.disabled && meta.is_span() {
            Interest::never()
        } else {
            if meta.is_span() {
                // The flusher accepts creation records only for callsites registered here.
                self.shared.callsites.register(meta);
            }
            Interest::always()
        }
    }

    fn enabled(&self, meta: &Metadata<'_>, _ctx: Context<'_, S>) -> bool {
        !(self.disabled && meta.is_span())
    }

    #[inline]
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _ctx: Context<'_, S>) {
        if self.disabled {
            return;
        }
        // No clock read: an id is never reused while its span is open, and the flusher tells
        // instances of a reused id apart by their order in the lanes (see `assemble`).
        with_local(&self.shared, |l| {
            l.push(Record::new_span(id.into_u64(), 0, attrs.metadata()))
        });
        if let Some(sinks) = &self.shared.sinks {
            sinks.new_span(id.into_u64(), attrs.metadata());
        }
    }

    #[inline]
    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        if self.disabled {
            return;
        }
        if let Some(sinks) = &self.shared.sinks {
            // Only with sinks configured: they need the callsite, which costs a lookup.
            if let Some(meta) = ctx.metadata(id) {
                sinks.enter(id.into_u64(), meta);
            }
        }
        let task = if self.track_async {
            record::current_task_id()
        } else {
            0
        };
        with_local(&self.shared, |l| {
            // Read the clock last, so the call's time excludes our bookkeeping.
            let tsc = self.shared.clock.raw();
            l.push(Record::enter(id.into_u64(), tsc, task))
        });
    }

    #[inline]
    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        if self.disabled {
            return;
        }
        let id = id.into_u64();
        if let Some(sinks) = &self.shared.sinks {
            sinks.before_exit(id);
        }
        // Read the clock first, for the same reason.
        let tsc = self.shared.clock.raw();
        with_local(&self.shared, |l| {
            l.push(Record::plain(record::EXIT, id, tsc))
        });
        if let Some(sinks) = &self.shared.sinks {
            if let Some(meta) = ctx.metadata(&Id::from_u64(id)) {
                sinks.exit(id, meta, &mut |payload| {
                    with_local(&self.shared, |l| l.push(Record::aux(id, tsc, payload)));
                });
            }
        }
    }

    #[inline]
    fn on_close(&self, id: Id, _ctx: Context<'_, S>) {
        if self.disabled {
            return;
        }
        // No clock read either: a call ends at its last exit.
        let tsc = 0;
        let id = id.into_u64();
        if let Some(sinks) = &self.shared.sinks {
            // Sink payloads go before the CLOSE record, so they reach the call before the
            // flusher completes it.
            sinks.close(id, &mut |payload| {
                with_local(&self.shared, |l| l.push(Record::aux(id, tsc, payload)));
            });
        }
        with_local(&self.shared, |l| {
            l.push(Record::plain(record::CLOSE, id, tsc))
        });
    }
}

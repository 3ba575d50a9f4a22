//! `impl Layer for ScopeLayer`: the thin routing from `tracing` callbacks to the lanes.
//!
//! This is the hot path. Each callback appends one 16-byte record to the calling thread's lane
//! ([`crate::recording::lane::local`]); an enter or exit also reads the TSC, once. Nothing is
//! looked up, allocated, locked or formatted here. Region names, statistics, nesting and files
//! are all the flusher's work.
//!
//! Where the clock is read decides what a call's time includes: an exit reads it first, before
//! anything else touches memory, and an enter last, once its slot in the buffer is secured. A
//! call's time therefore holds none of our bookkeeping, not even the handoff of a full buffer.
//! (What `tracing` itself does around our callbacks, such as the registry's own exit, which
//! runs before a layer's `on_exit`, is inside the call; `ScopeSubscriber` has none of it.)

use std::any::TypeId;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tracing_core::span::{Attributes, Id};
use tracing_core::subscriber::Interest;
use tracing_core::{Event, LevelFilter, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Identity, Layer};
use tracing_subscriber::registry::LookupSpan;

use crate::recording::clock::ticks;
use crate::recording::lane::local::with_local;
use crate::recording::lane::record::{self, Record};
use crate::recording::shared::Shared;
use crate::Mode;

/// The profiler, as a `tracing_subscriber` [`Layer`].
///
/// Build it with [`ScopeLayer::builder`]; see the crate docs for a complete example.
///
/// Not `Clone`: one layer is one profiler's span-id space; a copy installed in a second
/// registry would mix two registries' reused span ids in one assembler. Build a second
/// profiler for a second registry.
pub struct ScopeLayer {
    shared: Arc<Shared>,
    disabled: bool,
    track_async: bool,
    line_timing: bool,
}

impl ScopeLayer {
    pub(crate) fn new(shared: Arc<Shared>) -> ScopeLayer {
        if shared.config.mode == Mode::Disabled {
            shared.pause.disable();
        }
        ScopeLayer {
            disabled: shared.config.mode == Mode::Disabled,
            track_async: shared.config.track_async,
            line_timing: shared.config.line_timing,
            shared,
        }
    }

    /// The mode this layer records in (after environment overrides).
    pub fn mode(&self) -> Mode {
        self.shared.config.mode
    }

    /// Registers span callsite `meta` with the flusher (which accepts creation records only
    /// for registered callsites): from `register_callsite`, or from a span's creation when
    /// this thread has not seen the callsite registered yet (see `Writer::known_callsite`).
    /// Not in a process forked from a profiled one: the registry's lock may have been held by
    /// another thread of the parent at the fork (profiling is off there, see `crate::fork`).
    #[cold]
    fn register_span_site(&self, meta: &'static Metadata<'static>) {
        if !self.disabled && !crate::fork::inherited() {
            self.shared.callsites.register(meta);
        }
    }

    /// Whether to skip this callback: paused ([`FlushGuard::pause`](crate::FlushGuard::pause))
    /// or disabled (a disabled layer's flag is set for good at `build()`). One relaxed load.
    #[inline(always)]
    fn skip(&self) -> bool {
        self.shared.pause.paused.load(Ordering::Relaxed)
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
        // Never `never`: that would hide the callsite from every other layer of the
        // subscriber too. A disabled layer switches itself off through `max_level_hint`.
        // In a process forked from a profiled one (profiling is off there, see
        // `crate::fork`), no registry lock is taken: another thread of the parent may have
        // held it at the fork, and nobody would ever release it in the child.
        if !self.disabled && !crate::fork::inherited() {
            if meta.is_span() {
                self.register_span_site(meta);
            } else if self.line_timing && meta.is_event() {
                crate::recording::events::register_event_site(&self.shared.lines, meta);
            }
            if self.track_async {
                // Tokio's own instrumentation (`--cfg tokio_unstable`), see `recording::tokio`.
                self.shared.tokio.register(meta);
            }
        }
        Interest::always()
    }

    fn enabled(&self, _meta: &Metadata<'_>, _ctx: Context<'_, S>) -> bool {
        // This layer filters nothing for the others (tracing-subscriber's docs on `enabled`).
        true
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        // Disabled: `OFF`, so that alone in a registry `tracing` skips every span and event
        // before calling the subscriber; `downcast_raw` marks the layer as "none", so beside
        // other layers their hints win (as for `Option::<Layer>::None`).
        self.disabled.then_some(LevelFilter::OFF)
    }

    unsafe fn downcast_raw(&self, id: TypeId) -> Option<*const ()> {
        if id == TypeId::of::<Self>() {
            return Some(self as *const Self as *const ());
        }
        if self.disabled && id != TypeId::of::<Option<Identity>>() {
            // Answers tracing-subscriber's private "is this layer `None`?" probe exactly as an
            // `Option::None` layer does (a pointer to its static marker, never dereferenced by
            // us); any other type id gets `None` from it.
            let none: Option<Identity> = None;
            // SAFETY: `downcast_raw` of `Option<Identity>` has no preconditions beyond a valid
            // `self`; the returned pointer refers to a static of tracing-subscriber.
            return unsafe { <Option<Identity> as Layer<S>>::downcast_raw(&none, id) };
        }
        None
    }

    #[inline]
    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        if !(self.line_timing || self.track_async) || self.skip() {
            return;
        }
        if self.track_async
            && self.shared.tokio.seen()
            && crate::recording::tokio::on_event(&self.shared, event)
        {
            return; // a Tokio waker event
        }
        if self.line_timing {
            crate::recording::events::record_event(&self.shared, event, &ctx);
        }
    }

    #[inline(always)]
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _ctx: Context<'_, S>) {
        if self.skip() {
            return;
        }
        if self.track_async
            && self.shared.tokio.seen()
            && crate::recording::tokio::on_new_span(&self.shared, id.into_u64(), attrs)
        {
            return; // a Tokio task's spawn (its records are written)
        }
        // No clock read: an id is never reused while its span is open, and the flusher tells
        // instances of a reused id apart by their order in the lanes (see `assemble`).
        let meta = attrs.metadata();
        with_local(&self.shared, move |l| {
            l.known_callsite(meta as *const Metadata<'static> as usize, || {
                self.register_span_site(meta)
            });
            l.push(Record::new_span(id.into_u64(), meta))
        });
    }

    fn on_follows_from(&self, span: &Id, follows: &Id, _ctx: Context<'_, S>) {
        if !self.skip() {
            self.shared
                .follows
                .record(span.into_u64(), follows.into_u64());
        }
    }

    #[inline(always)]
    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        if self.skip() {
            return;
        }
        if let Some(sinks) = &self.shared.sinks {
            // Only with sinks configured: they need the callsite, which costs a lookup.
            if let Some(meta) = ctx.metadata(id) {
                sinks.enter(id.into_u64(), meta);
            }
        }
        // The task id goes into the stream only when it changes on this lane.
        let task = self.track_async.then(record::current_task_id);
        with_local(&self.shared, move |l| {
            l.push_enter(id.into_u64(), task, false)
        });
    }

    #[inline(always)]
    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        // The clock first (see the module docs).
        let t = ticks();
        if self.skip() {
            return;
        }
        let id = id.into_u64();
        if let Some(sinks) = &self.shared.sinks {
            sinks.before_exit(id);
        }
        with_local(&self.shared, move |l| l.push(Record::exit(id, t)));
        if let Some(sinks) = &self.shared.sinks {
            if let Some(meta) = ctx.metadata(&Id::from_u64(id)) {
                sinks.exit(id, meta, &mut |payload| {
                    with_local(&self.shared, move |l| l.push(Record::aux(id, payload)));
                });
            }
        }
    }

    #[inline(always)]
    fn on_close(&self, id: Id, _ctx: Context<'_, S>) {
        if self.skip() {
            return;
        }
        // No clock read either: a call ends at its last exit.
        let id = id.into_u64();
        if let Some(sinks) = &self.shared.sinks {
            // Sink payloads go before the CLOSE record, so they reach the call before the
            // flusher completes it.
            sinks.close(id, &mut |payload| {
                with_local(&self.shared, move |l| l.push(Record::aux(id, payload)));
            });
        }
        with_local(&self.shared, move |l| l.push(Record::close(id)));
    }
}

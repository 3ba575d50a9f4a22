//! `ScopeSubscriber`: the profiler as a `tracing::Subscriber` of its own, for programs that use
//! `tracing` only to profile.
//!
//! A `ScopeLayer` can never cost less than the registry it sits on (its sharded slab, the
//! per-span reference counts, extensions and the thread-local span stack). `ScopeSubscriber`
//! keeps nothing per span but what the profile needs: an id from a counter (which also names
//! the span's callsite, see [`spans`]), the extra handles of cloned spans only, and each
//! thread's stack of entered spans (for `Span::current()`). Its callbacks append the same
//! records to the same lanes as the layer's, so the flusher, the file and every reader are the
//! same.
//!
//! What it is not: a `LookupSpan` registry. No `Layer` (`fmt`, `tracing-error`,
//! `tracing-opentelemetry`, filters) can sit on it, and events are not logged (with
//! `line_timing` they are checkpoints of their span, as with the layer). Programs that need
//! those use `ScopeLayer`.

mod entered;
mod spans;

pub(crate) use spans::{index_of_id, Callsites as SpanSites};

use std::sync::Arc;

use tracing_core::span::{Attributes, Current, Id, Record};
use tracing_core::subscriber::Interest;
use tracing_core::{Event, LevelFilter, Metadata, Subscriber};

use crate::recording::clock::ticks;
use crate::recording::lane::local::with_local;
use crate::recording::lane::record::{self, Record as Slot};
use crate::recording::shared::Shared;
use crate::Mode;

/// The id of a span that records nothing (see `new_span`).
const NO_ID: u64 = u64::MAX;

/// The profiler as a [`tracing::Subscriber`]: what [`ScopeLayer`](crate::ScopeLayer)
/// records, in the same file, for what bare `tracing` costs.
///
/// Build it with [`Builder::build_subscriber`](crate::Builder::build_subscriber), in place of
/// `registry().with(layer)`; filter with [`Builder::max_level`](crate::Builder::max_level).
///
/// ```
/// use scope_profiler::ScopeLayer;
///
/// let (subscriber, guard) = ScopeLayer::builder()
///     .no_output()
///     .summary(false)
///     .build_subscriber()?;
/// tracing::subscriber::with_default(subscriber, || {
///     for _ in 0..10 {
///         let _outer = tracing::info_span!("solve").entered();
///         tracing::info_span!("step").in_scope(|| std::hint::black_box(1 + 1));
///     }
/// });
/// let report = guard.finalize()?;
/// assert_eq!(report.region("solve").unwrap().calls, 10);
/// assert_eq!(report.region("step").unwrap().calls, 10);
/// # Ok::<(), scope_profiler::Error>(())
/// ```
///
/// It is not a `LookupSpan` registry: no [`Layer`](tracing_subscriber::Layer) can be added to
/// it, and `tracing` events are not logged (with
/// [`line_timing`](crate::Builder::line_timing) they time the lines of their span). Use
/// `ScopeLayer` on a registry when the program needs either.
pub struct ScopeSubscriber {
    shared: Arc<Shared>,
    ids: spans::Ids,
    handles: spans::Handles,
    max_level: LevelFilter,
    disabled: bool,
    track_async: bool,
    line_timing: bool,
    /// Whether the flusher knows the callsites by index (`Shared::span_sites`): then no
    /// creation record is written, the id says everything it would.
    implicit: bool,
}

impl ScopeSubscriber {
    pub(crate) fn new(shared: Arc<Shared>) -> ScopeSubscriber {
        let disabled = shared.config.mode == Mode::Disabled;
        if disabled {
            shared.pause.disable();
        }
        ScopeSubscriber {
            ids: spans::Ids::new(
                shared.uid,
                shared
                    .span_sites
                    .clone()
                    .unwrap_or_else(|| Arc::new(SpanSites::new())),
            ),
            implicit: shared.span_sites.is_some(),
            handles: spans::Handles::new(),
            max_level: if disabled {
                LevelFilter::OFF
            } else {
                shared.config.max_level.unwrap_or(LevelFilter::TRACE)
            },
            disabled,
            track_async: shared.config.track_async,
            line_timing: shared.config.line_timing,
            shared,
        }
    }

    /// The mode this subscriber records in (after environment overrides).
    pub fn mode(&self) -> Mode {
        self.shared.config.mode
    }

    /// Registers span callsite `meta` with the flusher and the id table; false beyond a
    /// million span callsites.
    fn register_span_site(&self, meta: &'static Metadata<'static>) -> bool {
        // The flusher accepts creation records only for callsites registered here.
        self.shared.callsites.register(meta);
        self.ids.callsites.register(meta).is_some()
    }

    /// A new span's id, and whether it needs a creation record.
    #[inline]
    fn next_id(&self, meta: &'static Metadata<'static>) -> Option<(u64, bool)> {
        match self.ids.next(meta) {
            Some(next) => Some(next),
            None => self.next_id_unregistered(meta),
        }
    }

    /// `tracing` may create a span of a callsite whose `register_callsite` with this
    /// subscriber has not run yet: another thread is registering it, or the callsite's
    /// interest was cached before this subscriber existed. It is registered here, so its
    /// calls are recorded like any other (before, they got an id that recorded nothing and
    /// their records were counted lost: about one run in 25 of a test that creates a span on
    /// two Tokio workers at once).
    #[cold]
    #[inline(never)]
    fn next_id_unregistered(&self, meta: &'static Metadata<'static>) -> Option<(u64, bool)> {
        if crate::fork::inherited() || !self.register_span_site(meta) {
            return None;
        }
        if self.track_async {
            self.shared.tokio.register(meta);
        }
        self.ids.next(meta)
    }

    /// Whether to skip this callback: paused or disabled. One relaxed load.
    #[inline(always)]
    fn skip(&self) -> bool {
        self.shared
            .pause
            .paused
            .load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl std::fmt::Debug for ScopeSubscriber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScopeSubscriber")
            .field("mode", &self.shared.config.mode)
            .field("max_level", &self.max_level)
            .finish_non_exhaustive()
    }
}

impl Subscriber for ScopeSubscriber {
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        // In a process forked from a profiled one, profiling is off (see `crate::fork`), and
        // the registration locks below may have been held by another thread of the parent
        // at the fork, for ever in the child: its new callsites are not recorded.
        if self.disabled || *meta.level() > self.max_level || crate::fork::inherited() {
            return Interest::never();
        }
        if self.track_async {
            // Tokio's own instrumentation (`--cfg tokio_unstable`), see `recording::tokio`.
            self.shared.tokio.register(meta);
        }
        if meta.is_span() {
            if !self.register_span_site(meta) {
                return Interest::never(); // beyond a million span callsites
            }
        } else if self.track_async && crate::recording::tokio::is_waker_callsite(meta) {
            // Tokio's waker events: wakes of its tasks.
        } else if self.line_timing && meta.is_event() {
            crate::recording::events::register_event_site(&self.shared.lines, meta);
        } else {
            // Events are not logged: without line timing nobody wants them.
            return Interest::never();
        }
        Interest::always()
    }

    fn enabled(&self, meta: &Metadata<'_>) -> bool {
        !self.disabled && *meta.level() <= self.max_level
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(self.max_level)
    }

    #[inline]
    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let meta = attrs.metadata();
        let Some((id, explicit)) = self.next_id(meta) else {
            // Beyond a million span callsites, or in a forked child: an id that records
            // nothing (every callback checks for it).
            return Id::from_u64(NO_ID);
        };
        if self.skip() {
            return Id::from_u64(id);
        }
        // A Tokio task's spawn writes its own records (see `recording::tokio`).
        let spawn = self.track_async
            && self.shared.tokio.seen()
            && crate::recording::tokio::on_new_span(&self.shared, id, attrs);
        // No creation record when the flusher reads the callsite from the id (one record
        // less per span on this thread and in the flusher); a task's spawn has its own.
        if !spawn && (!self.implicit || explicit) {
            with_local(&self.shared, move |l| l.push(Slot::new_span(id, meta)));
        }
        Id::from_u64(id)
    }

    fn record(&self, _span: &Id, _values: &Record<'_>) {}

    fn record_follows_from(&self, span: &Id, follows: &Id) {
        let (span, follows) = (span.into_u64(), follows.into_u64());
        if span != NO_ID && follows != NO_ID && !self.skip() {
            self.shared.follows.record(span, follows);
        }
    }

    fn event_enabled(&self, _event: &Event<'_>) -> bool {
        self.line_timing || self.track_async
    }

    fn event(&self, event: &Event<'_>) {
        if !(self.line_timing || self.track_async) || self.skip() {
            return;
        }
        if self.track_async
            && self.shared.tokio.seen()
            && crate::recording::tokio::on_event(&self.shared, event)
        {
            return; // a Tokio waker event
        }
        if !self.line_timing {
            return;
        }
        let id = if let Some(parent) = event.parent() {
            parent.into_u64()
        } else if event.is_contextual() {
            match entered::current(self.shared.uid) {
                Some(id) => id,
                None => return,
            }
        } else {
            return;
        };
        if id != NO_ID {
            crate::recording::events::record_checkpoint(&self.shared, id, event.metadata());
        }
    }

    #[inline]
    fn enter(&self, span: &Id) {
        let id = span.into_u64();
        entered::push(self.shared.uid, id);
        if self.skip() || id == NO_ID {
            return;
        }
        if let Some(sinks) = &self.shared.sinks {
            if let Some(meta) = self.ids.meta(id) {
                sinks.enter(id, meta);
            }
        }
        let task = self.track_async.then(record::current_task_id);
        // Its first record, when this thread created it just before (the flusher's fast path).
        let fresh = self.implicit && spans::take_fresh(self.shared.uid, id);
        with_local(&self.shared, move |l| l.push_enter(id, task, fresh));
    }

    #[inline]
    fn exit(&self, span: &Id) {
        // The clock first, before anything touches memory (see `crate::recording::layer`).
        let t = ticks();
        let id = span.into_u64();
        entered::pop(self.shared.uid, id);
        if self.skip() || id == NO_ID {
            return;
        }
        if let Some(sinks) = &self.shared.sinks {
            sinks.before_exit(id);
        }
        with_local(&self.shared, move |l| l.push(Slot::exit(id, t)));
        if let Some(sinks) = &self.shared.sinks {
            if let Some(meta) = self.ids.meta(id) {
                sinks.exit(id, meta, &mut |payload| {
                    with_local(&self.shared, move |l| l.push(Slot::aux(id, payload)));
                });
            }
        }
    }

    fn clone_span(&self, span: &Id) -> Id {
        self.handles.add(span.into_u64());
        span.clone()
    }

    #[inline]
    fn try_close(&self, span: Id) -> bool {
        let id = span.into_u64();
        if !self.handles.release(id) {
            return false;
        }
        if !self.skip() && id != NO_ID {
            if let Some(sinks) = &self.shared.sinks {
                sinks.close(id, &mut |payload| {
                    with_local(&self.shared, move |l| l.push(Slot::aux(id, payload)));
                });
            }
            with_local(&self.shared, move |l| l.push(Slot::close(id)));
        }
        true
    }

    fn current_span(&self) -> Current {
        match entered::current(self.shared.uid) {
            Some(id) => match self.ids.meta(id) {
                Some(meta) => Current::new(Id::from_u64(id), meta),
                // Not an id of ours (cannot happen: ids are made with their callsite).
                None => Current::none(),
            },
            None => Current::none(),
        }
    }
}

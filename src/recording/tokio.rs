//! Tokio's own instrumentation on the recording side: what a program built with
//! `RUSTFLAGS="--cfg tokio_unstable"` and Tokio's `tracing` feature emits, turned into records.
//!
//! Tokio then creates a `runtime.spawn` span per task (targets `tokio::task` and
//! `tokio::task::blocking`; fields `kind`, `task.name`, `task.id`, `loc.file`, `loc.line`,
//! `loc.col`), enters it around every poll of the task, and emits a `tokio::task::waker` event
//! (`op = "waker.wake" | "waker.wake_by_ref" | "waker.clone" | "waker.drop"`) whenever one of
//! the task's wakers is used; its `task.id` field is the **span id** of the task's
//! `runtime.spawn` span.
//!
//! Nothing here is configured: [`TokioSites::register`] recognises those callsites when
//! `tracing` registers them, and only then do the hot-path checks below find anything. A program
//! without them pays one relaxed load per span creation and event, and only with
//! `track_async(true)`.
//!
//! Records written (see [`crate::recording::lane::record`]):
//! - a spawn: the span's `NEW`, a wake stamp of the span at the spawn (a task is runnable from
//!   its spawn on) and a site slot naming its spawn site ([`sites`]), three slots written
//!   together;
//! - a wake (`waker.wake` or `waker.wake_by_ref`): one wake record (span id, ticks). Clones and
//!   drops of wakers are not recorded.
//!
//! `block_on` futures get a `runtime.spawn` span too (`kind = "block_on"`); they are no task
//! (no Tokio task id, no waker events) and are recorded as plain spans. So are the runtime's
//! own worker threads, which the multi-thread scheduler runs as blocking tasks (`kind =
//! "blocking"`, spawned in Tokio's `runtime/scheduler`): one "poll" as long as the runtime,
//! no work of the program. The program's own `spawn_blocking` tasks are tasks.
//!
//! The functions take the [`Shared`] state, not a `Layer` context, so both front ends
//! (`ScopeLayer` and `ScopeSubscriber`, whose span ids come from a counter and are never
//! reused) call them from their span-creation and event callbacks.

pub(crate) use crate::data::sites;

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};

use tracing_core::field::{Field, Visit};
use tracing_core::span::Attributes;
use tracing_core::{Event, Metadata};

use crate::recording::lane::local::with_local;
use crate::recording::lane::record::Record;
use crate::recording::shared::Shared;
use sites::SiteKey;

/// Waker op of a callsite: not known yet.
const OP_UNKNOWN: u8 = 0;
/// Waker op of a callsite: it wakes (`waker.wake`, `waker.wake_by_ref`).
const OP_WAKE: u8 = 1;
/// Waker op of a callsite: it does not wake (`waker.clone`, `waker.drop`).
const OP_OTHER: u8 = 2;

/// Tokio's callsites as this layer has seen them register, and its spawn sites.
#[derive(Debug, Default)]
pub(crate) struct TokioSites {
    /// Whether any Tokio callsite registered: the gate the hot path checks first.
    seen: AtomicBool,
    /// Addresses of the `runtime.spawn` span callsites (task, blocking); 0 = free.
    spawn: [AtomicUsize; 4],
    /// Addresses of the `tokio::task::waker` event callsites (one per op); 0 = free.
    waker: [AtomicUsize; 8],
    /// Each waker callsite's op, once an event told it ([`OP_UNKNOWN`] before).
    waker_op: [AtomicU8; 8],
    /// Interned spawn sites (name and location).
    pub(crate) sites: sites::Sites,
}

/// Whether `meta` is a span callsite of Tokio's `runtime.spawn`.
pub(crate) fn is_spawn_callsite(meta: &Metadata<'_>) -> bool {
    meta.is_span() && meta.name() == "runtime.spawn" && meta.target().starts_with("tokio::task")
}

/// Whether `meta` is one of Tokio's resource spans (`runtime.resource`,
/// `runtime.resource.async_op`, `runtime.resource.async_op.poll`).
pub(crate) fn is_resource_callsite(meta: &Metadata<'_>) -> bool {
    meta.is_span() && meta.name().starts_with("runtime.resource")
}

/// Whether `meta` is an event callsite of Tokio's wakers (`tokio::task::waker`).
pub(crate) fn is_waker_callsite(meta: &Metadata<'_>) -> bool {
    meta.is_event() && meta.target() == "tokio::task::waker"
}

/// Puts `addr` into the first free slot of `slots` (no-op when it is there or all are taken).
fn remember(slots: &[AtomicUsize], addr: usize) {
    for s in slots {
        match s.compare_exchange(0, addr, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return,
            Err(now) if now == addr => return,
            Err(_) => {}
        }
    }
}

impl TokioSites {
    /// Notes a callsite `tracing` registers (cold). Spawn spans and waker events switch the
    /// hot-path checks on.
    pub(crate) fn register(&self, meta: &'static Metadata<'static>) {
        let addr = meta as *const Metadata<'static> as usize;
        if is_spawn_callsite(meta) {
            remember(&self.spawn, addr);
        } else if is_waker_callsite(meta) {
            remember(&self.waker, addr);
        } else {
            return;
        }
        self.seen.store(true, Ordering::Release);
    }

    /// Whether any Tokio callsite registered (one relaxed load).
    #[inline(always)]
    pub(crate) fn seen(&self) -> bool {
        self.seen.load(Ordering::Relaxed)
    }

    fn is_spawn(&self, addr: usize) -> bool {
        self.spawn.iter().any(|s| s.load(Ordering::Relaxed) == addr)
    }

    /// The waker slot of event callsite `addr`, if it is one.
    fn waker_slot(&self, addr: usize) -> Option<&AtomicU8> {
        let i = self
            .waker
            .iter()
            .position(|a| a.load(Ordering::Relaxed) == addr)?;
        Some(&self.waker_op[i])
    }
}

/// A span was created: if it is a Tokio task's `runtime.spawn` span, writes its spawn records
/// and returns true (the caller writes nothing more); false for every other span.
#[inline]
pub(crate) fn on_new_span(shared: &Shared, id: u64, attrs: &Attributes<'_>) -> bool {
    let meta = attrs.metadata();
    if !shared.tokio.is_spawn(meta as *const Metadata<'_> as usize) {
        return false;
    }
    on_spawn(shared, id, attrs)
}

#[cold]
#[inline(never)]
fn on_spawn(shared: &Shared, id: u64, attrs: &Attributes<'_>) -> bool {
    let mut v = SpawnFields::default();
    attrs.record(&mut v);
    if v.block_on || v.runtime_thread() {
        return false; // not a task of the program: a plain span
    }
    let site = shared.tokio.sites.intern(&v.key);
    let meta = attrs.metadata();
    with_local(shared, |l| {
        l.push_with_ticks(|t| {
            [
                Record::new_span(id, meta),
                Record::wake(id, t),
                Record::spawn_site(site),
            ]
        })
    });
    true
}

/// An event: if it is a Tokio waker event that wakes a task, writes its wake record. Returns
/// true when the event was Tokio's (whatever its op), so nothing else looks at it.
#[inline]
pub(crate) fn on_event(shared: &Shared, event: &Event<'_>) -> bool {
    let addr = event.metadata() as *const Metadata<'_> as usize;
    let Some(op) = shared.tokio.waker_slot(addr) else {
        return false;
    };
    if op.load(Ordering::Relaxed) == OP_OTHER {
        return true;
    }
    on_waker(shared, event, op);
    true
}

#[cold]
#[inline(never)]
fn on_waker(shared: &Shared, event: &Event<'_>, op: &AtomicU8) {
    let mut v = WakerFields::default();
    event.record(&mut v);
    if op.load(Ordering::Relaxed) == OP_UNKNOWN {
        if let Some(wakes) = v.wakes {
            // One callsite per op (each `trace!` in Tokio's waker names its op literally).
            op.store(if wakes { OP_WAKE } else { OP_OTHER }, Ordering::Relaxed);
        }
    }
    if v.wakes != Some(true) || v.span == 0 {
        return;
    }
    let span = v.span;
    with_local(shared, |l| l.push_marker(|t| Record::wake(span, t)));
}

/// The fields of a `runtime.spawn` span that matter here.
#[derive(Default)]
struct SpawnFields {
    key: SiteKey,
    block_on: bool,
    blocking: bool,
}

impl SpawnFields {
    /// A worker thread of Tokio's multi-thread runtime, which its scheduler spawns as a
    /// blocking task (see the module docs).
    fn runtime_thread(&self) -> bool {
        let file = self.key.file();
        self.blocking && file.contains("tokio") && file.contains("runtime/scheduler/")
    }
}

impl Visit for SpawnFields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "task.name" => self.key.set_name(value),
            "kind" => {
                let mut k = sites::Short::default();
                let _ = std::fmt::write(&mut k, format_args!("{value:?}"));
                self.block_on = k.as_str() == "block_on";
                self.blocking = k.as_str() == "blocking";
            }
            _ => {}
        }
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "loc.file" => self.key.set_file(value),
            "task.name" => self.key.set_name(&value),
            _ => {}
        }
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        match field.name() {
            "loc.line" => self.key.line = value.min(u64::from(u32::MAX)) as u32,
            "loc.col" => self.key.col = value.min(u64::from(u32::MAX)) as u32,
            _ => {}
        }
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.record_u64(field, value.max(0) as u64);
    }
}

/// The fields of a waker event: its op and the task's span id.
#[derive(Default)]
struct WakerFields {
    /// Whether the op wakes the task (`None`: no op field).
    wakes: Option<bool>,
    span: u64,
}

impl Visit for WakerFields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "op" {
            let mut k = sites::Short::default();
            let _ = std::fmt::write(&mut k, format_args!("{value:?}"));
            self.record_str(field, k.as_str().trim_matches('"'));
        }
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "op" {
            self.wakes = Some(matches!(value, "waker.wake" | "waker.wake_by_ref"));
        }
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        if field.name() == "task.id" {
            self.span = value;
        }
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.record_u64(field, value as u64);
    }
}

#[cfg(test)]
mod tests;

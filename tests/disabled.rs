//! `Mode::Disabled` changes nothing for the other layers, and the runtime pause switch.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use scope_profiler::{Mode, ScopeLayer};
use tracing::level_filters::LevelFilter;
use tracing::Subscriber;
use tracing_subscriber::prelude::*;

#[derive(Clone, Default)]
struct Buf(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Buf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn fmt_layer<S>(buf: &Buf) -> impl tracing_subscriber::Layer<S>
where
    S: Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    let w = buf.clone();
    tracing_subscriber::fmt::layer()
        .with_writer(move || w.clone())
        .with_ansi(false)
        .without_time()
        .with_thread_ids(false)
}

fn disabled() -> (ScopeLayer, scope_profiler::FlushGuard) {
    ScopeLayer::builder()
        .mode(Mode::Disabled)
        .line_timing(true)
        .no_output()
        .summary(false)
        .build()
        .unwrap()
}

/// Spans with fields, nested, events at several levels, a span entered twice.
fn workload() {
    let outer = tracing::info_span!("outer", job = 7);
    outer.in_scope(|| {
        tracing::info!(answer = 42, "inside outer");
        tracing::debug_span!("inner", step = 1).in_scope(|| {
            tracing::trace!("deep");
            tracing::warn!("warned");
        });
    });
    outer.in_scope(|| tracing::error!("second poll"));
    tracing::info!("no span");
}

fn output(sub: impl Subscriber + Send + Sync + 'static, buf: &Buf) -> String {
    tracing::subscriber::with_default(sub, workload);
    let s = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    buf.0.lock().unwrap().clear();
    s
}

#[test]
fn a_disabled_layer_changes_nothing_for_fmt() {
    let buf = Buf::default();
    let plain = output(tracing_subscriber::registry().with(fmt_layer(&buf)), &buf);
    assert!(
        plain.contains("outer{job=7}:inner{step=1}: disabled: deep"),
        "the workload logs span context: {plain}"
    );

    let (layer, guard) = disabled();
    let below = output(
        tracing_subscriber::registry()
            .with(layer)
            .with(fmt_layer(&buf)),
        &buf,
    );
    assert_eq!(below, plain, "Disabled ScopeLayer below fmt");

    let (layer2, guard2) = disabled();
    let above = output(
        tracing_subscriber::registry()
            .with(fmt_layer(&buf))
            .with(layer2),
        &buf,
    );
    assert_eq!(above, plain, "Disabled ScopeLayer above fmt");
    assert!(guard.finalize().unwrap().regions().is_empty());
    assert!(guard2.finalize().unwrap().regions().is_empty());
    // A disabled profiler cannot be resumed into recording.
    guard.resume();
    assert!(guard.is_paused());
}

#[test]
fn alone_a_disabled_layer_turns_every_level_off() {
    let (layer, _guard) = disabled();
    let alone = tracing_subscriber::registry().with(layer);
    assert_eq!(alone.max_level_hint(), Some(LevelFilter::OFF));
    // Beside fmt (no opinion of its own) the level stays open, in either order.
    let buf = Buf::default();
    let (layer, _g) = disabled();
    let with_fmt = tracing_subscriber::registry()
        .with(layer)
        .with(fmt_layer(&buf));
    assert_eq!(with_fmt.max_level_hint(), None);
    let (layer, _g) = disabled();
    let filtered = tracing_subscriber::registry()
        .with(layer)
        .with(LevelFilter::DEBUG);
    assert_eq!(filtered.max_level_hint(), Some(LevelFilter::DEBUG));
    // An enabled profiler has no opinion either.
    let (layer, _g) = ScopeLayer::builder()
        .no_output()
        .summary(false)
        .build()
        .unwrap();
    assert_eq!(
        tracing_subscriber::registry().with(layer).max_level_hint(),
        None
    );
}

/// Counts the spans every layer sees, beside the profiler.
#[derive(Clone, Default)]
struct Count(Arc<AtomicU64>);
impl<S: Subscriber> tracing_subscriber::Layer<S> for Count {
    fn on_new_span(
        &self,
        _: &tracing::span::Attributes<'_>,
        _: &tracing::Id,
        _: tracing_subscriber::layer::Context<'_, S>,
    ) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn pause_and_resume_count_exactly() {
    let (layer, guard) = ScopeLayer::builder()
        .no_output()
        .summary(false)
        .track_threads(true)
        .build()
        .unwrap();
    let seen = Count::default();
    let sub = tracing_subscriber::registry()
        .with(layer)
        .with(seen.clone());
    let switch = guard.switch();
    tracing::subscriber::with_default(sub, || {
        let work = |n| {
            for _ in 0..n {
                tracing::info_span!("p_work").in_scope(|| ());
            }
        };
        work(5);
        // Running when the pause starts, ends while paused: never reported in part.
        let straddle = tracing::info_span!("p_straddle").entered();
        // Running across the whole pause, ends after resume: not reported either.
        let across = tracing::info_span!("p_across");
        let across_entered = across.enter();
        // Created before the pause, first entered after it.
        let later = tracing::info_span!("p_later");
        std::thread::sleep(std::time::Duration::from_millis(10));
        guard.pause();
        assert!(switch.is_paused());
        work(7);
        drop(straddle);
        std::thread::sleep(std::time::Duration::from_millis(10));
        switch.resume();
        assert!(!guard.is_paused());
        drop(across_entered);
        drop(across);
        std::thread::sleep(std::time::Duration::from_millis(10));
        later.in_scope(|| ());
        work(11);
    });
    let r = guard.finalize().unwrap();
    assert_eq!(r.region("p_work").map(|s| s.calls), Some(16));
    assert!(r.region("p_straddle").is_none_or(|s| s.calls == 0));
    assert!(r.region("p_across").is_none_or(|s| s.calls == 0));
    // `p_later` was open (created) when the pause began: reported whole or not at all; its
    // only poll came after resume, so if reported it has its one call.
    assert!(r.region("p_later").is_none_or(|s| s.calls == 1));
    assert_eq!(
        r.in_flight(),
        0,
        "calls left out are not counted as running"
    );
    // The layer beside saw every span: 5 + 7 + 11 + 3.
    assert_eq!(seen.0.load(Ordering::Relaxed), 26);
}

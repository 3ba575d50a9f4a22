//! `ScopeSubscriber`'s span semantics, the ones programs rely on without knowing it:
//! `Span::current()`, nested enters across `.await` and `in_scope`, spans entered on another
//! thread than their creator's, `Span::none()`, a span that closes once when its last handle
//! drops, and level filtering through `Builder::max_level`. (The files it writes are checked
//! by the other suites, run once per front end: `SCOPE_FRONT_END=subscriber`.)

use scope_profiler::{FlushGuard, Report, ScopeLayer, ScopeSubscriber};
use tracing::level_filters::LevelFilter;
use tracing::{info_span, trace_span, Span, Subscriber};

fn subscriber() -> (ScopeSubscriber, FlushGuard) {
    ScopeLayer::builder()
        .no_output()
        .summary(false)
        .track_async(true)
        .build_subscriber()
        .expect("build")
}

fn calls(r: &Report, name: &str) -> u64 {
    r.region(name).map_or(0, |s| s.calls)
}

#[test]
fn the_current_span_is_the_innermost_entered() {
    let (s, guard) = subscriber();
    tracing::subscriber::with_default(s, || {
        assert!(Span::current().is_none(), "nothing entered");
        let outer = info_span!("outer");
        outer.in_scope(|| {
            assert_eq!(Span::current().metadata().unwrap().name(), "outer");
            info_span!("inner").in_scope(|| {
                let current = Span::current();
                assert_eq!(current.metadata().unwrap().name(), "inner");
                // A handle of the current span: cloning it and dropping it must not close it.
                drop(current);
            });
            assert_eq!(Span::current().id(), outer.id());
        });
        assert!(Span::current().is_none());
    });
    let r = guard.finalize().unwrap();
    assert_eq!((calls(&r, "outer"), calls(&r, "inner")), (1, 1));
}

#[test]
fn a_span_closes_once_when_its_last_handle_drops() {
    let (s, guard) = subscriber();
    let dispatch = tracing::Dispatch::new(s);
    tracing::dispatcher::with_default(&dispatch, || {
        let a = info_span!("shared");
        let b = a.clone();
        let c = b.clone();
        a.in_scope(|| ());
        drop(a);
        b.in_scope(|| ());
        drop(b);
        c.in_scope(|| ());
        // Still open: no call completes while a handle is alive.
        guard.sync().unwrap();
        drop(c);
    });
    let r = guard.finalize().unwrap();
    assert_eq!(calls(&r, "shared"), 1, "three handles, one span, one call");
    assert_eq!(r.in_flight(), 0);
}

#[test]
fn a_span_entered_on_another_thread_is_one_call_there() {
    let (s, guard) = subscriber();
    let dispatch = tracing::Dispatch::new(s);
    let span = tracing::dispatcher::with_default(&dispatch, || info_span!("moved"));
    let d = dispatch.clone();
    std::thread::spawn(move || {
        tracing::dispatcher::with_default(&d, || {
            span.in_scope(|| std::thread::sleep(std::time::Duration::from_millis(2)));
            assert_eq!(Span::current().id(), None);
        })
    })
    .join()
    .unwrap();
    let r = guard.finalize().unwrap();
    let moved = r.region("moved").unwrap();
    assert_eq!(moved.calls, 1);
    assert!(moved.total_ns >= 2_000_000, "{moved:?}");
}

#[tracing::instrument]
async fn polled(n: u32) {
    for _ in 0..n {
        tokio::task::yield_now().await;
        info_span!("step").in_scope(|| std::hint::black_box(n));
    }
}

#[test]
fn an_instrumented_future_is_one_call_across_its_awaits() {
    let (s, guard) = subscriber();
    let dispatch = tracing::Dispatch::new(s);
    let d = dispatch.clone();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .on_thread_start(move || std::mem::forget(tracing::dispatcher::set_default(&d)))
        .build()
        .unwrap();
    tracing::dispatcher::with_default(&dispatch, || {
        rt.block_on(async {
            let hs: Vec<_> = (0..20).map(|_| tokio::spawn(polled(5))).collect();
            for h in hs {
                h.await.unwrap();
            }
        })
    });
    drop(rt);
    let r = guard.finalize().unwrap();
    assert_eq!((calls(&r, "polled"), calls(&r, "step")), (20, 100));
    let p = r.region("polled").unwrap();
    assert!(p.mean_ns > 0.0);
}

#[test]
fn none_spans_cost_nothing_and_record_nothing() {
    let (s, guard) = subscriber();
    tracing::subscriber::with_default(s, || {
        let none = Span::none();
        none.in_scope(|| ());
        let _e = none.enter();
        assert!(Span::current().is_none());
    });
    let r = guard.finalize().unwrap();
    assert!(
        r.regions().iter().all(|s| s.calls == 0),
        "{:?}",
        r.regions()
    );
}

#[test]
fn max_level_filters_and_is_reported() {
    let (s, guard) = ScopeLayer::builder()
        .no_output()
        .summary(false)
        .max_level(LevelFilter::INFO)
        .build_subscriber()
        .unwrap();
    assert_eq!(s.max_level_hint(), Some(LevelFilter::INFO));
    let dispatch = tracing::Dispatch::new(s);
    tracing::dispatcher::with_default(&dispatch, || {
        let t = trace_span!("too_fine");
        assert!(t.is_disabled());
        t.in_scope(|| ());
        info_span!("kept").in_scope(|| ());
    });
    let r = guard.finalize().unwrap();
    assert_eq!((calls(&r, "too_fine"), calls(&r, "kept")), (0, 1));
    // The layer takes its filters from tracing-subscriber: the option is refused there.
    let e = ScopeLayer::builder()
        .no_output()
        .max_level(LevelFilter::INFO)
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("max_level"), "{e}");
}

#[test]
fn a_disabled_subscriber_creates_no_span() {
    let (s, guard) = ScopeLayer::builder()
        .no_output()
        .summary(false)
        .mode(scope_profiler::Mode::Disabled)
        .build_subscriber()
        .unwrap();
    assert_eq!(s.max_level_hint(), Some(LevelFilter::OFF));
    let dispatch = tracing::Dispatch::new(s);
    tracing::dispatcher::with_default(&dispatch, || {
        assert!(info_span!("off").is_disabled());
    });
    assert!(guard.finalize().unwrap().regions().is_empty());
}

#[path = "common/unregistered.rs"]
mod unregistered;
use unregistered::UNREGISTERED;

#[test]
fn a_span_created_before_its_callsite_is_registered_is_recorded() {
    let (s, guard) = subscriber();
    let values = UNREGISTERED.fields().value_set(&[]);
    for _ in 0..3 {
        let id = s.new_span(&tracing_core::span::Attributes::new(&UNREGISTERED, &values));
        assert_ne!(id.into_u64(), u64::MAX, "an id that records");
        s.enter(&id);
        s.exit(&id);
        assert!(s.try_close(id));
    }
    let r = guard.finalize().unwrap();
    assert_eq!(calls(&r, "registered_late"), 3);
    assert_eq!((r.dropped(), r.dropped_calls()), (0, 0));
}

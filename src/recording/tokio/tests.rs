//! The recording side against spans and events shaped exactly as Tokio's (same names, targets
//! and fields; the real thing is tested in `crates/tokio-unstable-tests`): which callsites are
//! recognised and what the visitors read.

use super::*;

/// A subscriber that only visits, as the layer's callbacks do.
struct Visits {
    spawns: std::sync::Mutex<Vec<(bool, String)>>,
    wakes: std::sync::Mutex<Vec<(Option<bool>, u64)>>,
}

impl tracing_core::Subscriber for Visits {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, attrs: &Attributes<'_>) -> tracing_core::span::Id {
        let mut v = SpawnFields::default();
        attrs.record(&mut v);
        let sites = sites::Sites::default();
        let id = sites.intern(&v.key);
        let site = sites
            .since(0)
            .into_iter()
            .find(|(i, _)| *i == id)
            .unwrap()
            .1;
        let text = format!("{}|{}", site.lane_name(), site.location());
        self.spawns.lock().unwrap().push((v.block_on, text));
        tracing_core::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing_core::span::Id, _: &tracing_core::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing_core::span::Id, _: &tracing_core::span::Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut v = WakerFields::default();
        event.record(&mut v);
        self.wakes.lock().unwrap().push((v.wakes, v.span));
    }
    fn enter(&self, _: &tracing_core::span::Id) {}
    fn exit(&self, _: &tracing_core::span::Id) {}
}

#[test]
fn the_visitors_read_tokios_fields() {
    let s = std::sync::Arc::new(Visits {
        spawns: Default::default(),
        wakes: Default::default(),
    });
    tracing::subscriber::with_default(s.clone(), || {
        // Exactly Tokio's fields (tokio/src/util/trace.rs, runtime/task/waker.rs).
        let (name, file): (Option<&str>, &str) = (None, "src/main.rs");
        let _a = tracing::trace_span!(target: "tokio::task", parent: None, "runtime.spawn",
            kind = %"task", task.name = %name.unwrap_or_default(), task.id = 7u64,
            original_size.bytes = Option::<usize>::None, size.bytes = 64usize,
            loc.file = file, loc.line = 42u32, loc.col = 5u32);
        let _b = tracing::trace_span!(target: "tokio::task", parent: None, "runtime.spawn",
            kind = %"task", task.name = %"worker", task.id = 8u64, loc.file = file,
            loc.line = 43u32, loc.col = 9u32);
        let _c = tracing::trace_span!(target: "tokio::task", parent: None, "runtime.spawn",
            kind = %"block_on", task.name = %"", task.id = 9u64, loc.file = file,
            loc.line = 1u32, loc.col = 1u32);
        for op in [
            "waker.wake",
            "waker.wake_by_ref",
            "waker.clone",
            "waker.drop",
        ] {
            tracing::trace!(target: "tokio::task::waker", op = op, task.id = 1234u64);
        }
    });
    assert_eq!(
        *s.spawns.lock().unwrap(),
        [
            (false, "task src/main.rs:42|src/main.rs:42:5".to_owned()),
            (false, "worker|src/main.rs:43:9".to_owned()),
            (true, "task src/main.rs:1|src/main.rs:1:1".to_owned()),
        ]
    );
    assert_eq!(
        *s.wakes.lock().unwrap(),
        [
            (Some(true), 1234),
            (Some(true), 1234),
            (Some(false), 1234),
            (Some(false), 1234)
        ]
    );
}

#[test]
fn tokio_callsites_are_recognised_by_name_and_target() {
    let s = std::sync::Arc::new(Visits {
        spawns: Default::default(),
        wakes: Default::default(),
    });
    tracing::subscriber::with_default(s, || {
        let spawn = tracing::trace_span!(target: "tokio::task", "runtime.spawn");
        let blocking = tracing::trace_span!(target: "tokio::task::blocking", "runtime.spawn");
        let mine = tracing::trace_span!(target: "my_app", "runtime.spawn");
        let resource = tracing::trace_span!("runtime.resource.async_op");
        let plain = tracing::info_span!("runtime");
        for (span, is_spawn, is_resource) in [
            (&spawn, true, false),
            (&blocking, true, false),
            (&mine, false, false),
            (&resource, false, true),
            (&plain, false, false),
        ] {
            let meta = span.metadata().expect("metadata");
            assert_eq!(is_spawn_callsite(meta), is_spawn, "{meta:?}");
            assert_eq!(is_resource_callsite(meta), is_resource, "{meta:?}");
        }
    });
}

//! `SCOPE_PROFILER=off` forces Disabled at build(). Its own test binary, because it sets a
//! process-wide environment variable.

use scope_profiler::{Mode, ScopeLayer};
use tracing_subscriber::prelude::*;

#[test]
fn scope_profiler_off_forces_disabled() {
    std::env::set_var("SCOPE_PROFILER", "off");
    let (layer, guard) = ScopeLayer::builder()
        .mode(Mode::TimeOnly)
        .output("/nonexistent-dir/never-written.h5")
        .summary(false)
        .build()
        .expect("a disabled profiler does not check or write its output");
    assert_eq!(layer.mode(), Mode::Disabled);
    let subscriber = tracing_subscriber::registry().with(layer);
    tracing::subscriber::with_default(subscriber, || {
        for _ in 0..100 {
            tracing::info_span!("invisible").in_scope(|| ());
        }
    });
    let r = guard.finalize().unwrap();
    assert!(r.region("invisible").is_none());
    assert!(!std::path::Path::new("/nonexistent-dir/never-written.h5").exists());
}

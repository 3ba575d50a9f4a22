//! `SCOPE_PROFILER=off` forces Disabled at build(). Its own test binary, because it sets a
//! process-wide environment variable.

use scope_profiler::{Mode, ScopeLayer};
use tracing_subscriber::prelude::*;

/// The tests of this binary set the one process-wide variable: one at a time.
static ENV: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn scope_profiler_off_forces_disabled() {
    let _one = ENV.lock().unwrap();
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

/// An unknown value is an error at build(), not silently "on" (the same binary: the variable
/// is process-wide, so the two values are set one after the other by one test).
#[test]
fn unknown_values_are_an_error_at_build() {
    let _one = ENV.lock().unwrap();
    std::env::set_var("SCOPE_PROFILER", "bogus");
    let e = ScopeLayer::builder().no_output().summary(false).build();
    std::env::set_var("SCOPE_PROFILER", "off");
    match e {
        Err(scope_profiler::Error::InvalidEnv { var, value, .. }) => {
            assert_eq!((var, value.as_str()), ("SCOPE_PROFILER", "bogus"));
        }
        other => panic!("{:?}", other.map(|_| ())),
    }
}

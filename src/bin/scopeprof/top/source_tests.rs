//! The source over a real program's phases: followed as it grows, then through a finalize
//! (the finished file), then into the next phase.

use std::time::{Duration, Instant};

use scope_profiler::read::live::spool_path;
use scope_profiler::ScopeLayer;
use tracing_subscriber::prelude::*;

use super::*;
use crate::top::model::WindowSpec;

/// Calls of region `name` over the whole recording the source shows.
fn calls(source: &mut Source, name: &str) -> u64 {
    let Some(w) = WindowSpec::All.select(source.span(), None) else {
        return 0;
    };
    let snap = source.snapshot(w).unwrap();
    snap.regions
        .iter()
        .find(|r| r.name == name)
        .map_or(0, |r| r.calls)
}

/// Refreshes until region `name` shows `n` calls (the spool is written every 10 ms).
fn wait_for(source: &mut Source, name: &str, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        source.refresh().unwrap();
        let got = calls(source, name);
        if got == n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{got} of {n} `{name}` calls shown"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn follows_a_program_through_its_phases() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("phases.h5");
    let (layer, guard) = ScopeLayer::builder()
        .output(&out)
        .summary(false)
        .spool_sync_interval(Duration::from_millis(10))
        .build()
        .unwrap();
    let d = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    let record = |name: &'static str, n: usize| {
        tracing::dispatcher::with_default(&d, || {
            for _ in 0..n {
                match name {
                    "a" => tracing::info_span!("a").in_scope(|| ()),
                    _ => tracing::info_span!("b").in_scope(|| ()),
                }
            }
        });
        guard.sync().unwrap();
    };
    record("a", 100);
    let target = Target::Spool {
        spool: spool_path(&out),
        output: out.clone(),
    };
    let mut source = Source::open(&target).unwrap();
    assert!(source.is_spool());
    wait_for(&mut source, "a", 100);
    record("a", 50);
    wait_for(&mut source, "a", 150);
    // Nothing is open between the calls: the spool's open-calls frame says 0 (or, before the
    // first flush wrote one, the source says it cannot tell).
    let open = source.open_calls();
    match open.per_region {
        Some(v) => assert!(v.iter().all(|&n| n == 0), "{v:?}"),
        None => assert!(open.reason.is_some()),
    }

    // A finalize publishes the phase: the source shows the finished file.
    guard.finalize().unwrap();
    source.refresh().unwrap();
    assert!(!source.is_spool(), "{:?}", source.notice);
    assert_eq!(
        source.notice.as_deref(),
        Some("phase ended, showing the finished file")
    );
    assert_eq!(calls(&mut source, "a"), 150);
    let open = source.open_calls().per_region.unwrap();
    assert!(!open.is_empty() && open.iter().all(|&n| n == 0), "{open:?}");

    // The next phase: followed once its spool holds calls.
    record("b", 30);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !source.is_spool() {
        assert!(Instant::now() < deadline, "the new phase was not followed");
        std::thread::sleep(Duration::from_millis(10));
        source.refresh().unwrap();
    }
    assert!(source.notice.as_deref().unwrap().contains("new phase"));
    wait_for(&mut source, "b", 30);
    assert_eq!(calls(&mut source, "a"), 0, "the new phase's calls only");
    drop(d);
    guard.finalize().unwrap();
}

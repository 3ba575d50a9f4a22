//! `follows_from` links (`Span::follows_from`) land in the file under
//! `/scope_profiler_rs/follows_from`, with both spans' regions and first enters, through both
//! front ends.

use scope_profiler::read::Profile;
use scope_profiler::ScopeLayer;
use tracing_subscriber::prelude::*;

/// Records `cause` (entered), then `effect` following from it, entered after the link.
fn program() {
    let cause = tracing::info_span!("cause");
    cause.in_scope(|| std::hint::black_box(1));
    let effect = tracing::info_span!("effect");
    effect.follows_from(&cause);
    effect.in_scope(|| std::hint::black_box(2));
    // A link to a span the profiler never sees (disabled by level) is left out.
    let quiet = tracing::trace_span!("quiet");
    effect.follows_from(&quiet);
}

fn check(path: &std::path::Path) {
    let p = Profile::open(path).unwrap();
    let links = p.follows_from().unwrap();
    assert_eq!(links.len(), 1, "{links:?}");
    let l = &links[0];
    assert_eq!(
        (l.span_region.as_str(), l.follows_region.as_str()),
        ("effect", "cause")
    );
    let (mut cause_start, mut effect_start) = (None, None);
    p.for_each_call(1024, |row, calls| {
        match p.region_name(row.region) {
            "cause" => cause_start = Some(calls[0].start_ns),
            "effect" => effect_start = Some(calls[0].start_ns),
            _ => {}
        }
        Ok(())
    })
    .unwrap();
    assert_eq!(l.follows_start_ns, cause_start);
    // Entered after the link, before the flusher resolved it: known.
    assert_eq!(l.span_start_ns, effect_start);
    assert!(l.tick_ns >= cause_start.unwrap());
}

#[test]
fn follows_from_links_land_in_the_file_through_the_layer() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("f.h5");
    let (layer, guard) = ScopeLayer::builder()
        .output(&out)
        .summary(false)
        .build()
        .unwrap();
    let filter = tracing_subscriber::filter::LevelFilter::DEBUG;
    let subscriber = tracing_subscriber::registry().with(layer).with(filter);
    tracing::subscriber::with_default(subscriber, program);
    guard.finalize().unwrap();
    check(&out);
}

#[test]
fn follows_from_links_land_in_the_file_through_the_subscriber() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("f.h5");
    let (subscriber, guard) = ScopeLayer::builder()
        .output(&out)
        .summary(false)
        .max_level(tracing::level_filters::LevelFilter::DEBUG)
        .build_subscriber()
        .unwrap();
    tracing::subscriber::with_default(subscriber, program);
    guard.finalize().unwrap();
    check(&out);
}

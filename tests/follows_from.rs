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
    // The quiet span is no span at all (disabled): nothing was left out.
    let f = hdf5::File::open(&out).unwrap();
    assert!(f
        .group("metadata")
        .unwrap()
        .attr("follows_from_lost")
        .is_err());
}

/// A link to a span that is gone by the time the flusher resolves it is left out, and counted
/// in `metadata/follows_from_lost`.
#[test]
fn a_link_to_a_span_already_gone_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("f.h5");
    let (layer, guard) = ScopeLayer::builder()
        .output(&out)
        .summary(false)
        .build()
        .unwrap();
    let subscriber = tracing_subscriber::registry().with(layer);
    tracing::subscriber::with_default(subscriber, || {
        let gone = tracing::info_span!("gone");
        gone.in_scope(|| std::hint::black_box(1));
        let id = gone.id();
        drop(gone);
        // Completed and forgotten by the flusher.
        guard.sync().unwrap();
        let effect = tracing::info_span!("effect");
        effect.follows_from(id);
        effect.in_scope(|| std::hint::black_box(2));
    });
    guard.finalize().unwrap();
    assert!(Profile::open(&out)
        .unwrap()
        .follows_from()
        .unwrap()
        .is_empty());
    let f = hdf5::File::open(&out).unwrap();
    let lost: i64 = f
        .group("metadata")
        .unwrap()
        .attr("follows_from_lost")
        .unwrap()
        .read_scalar()
        .unwrap();
    assert_eq!(lost, 1);
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

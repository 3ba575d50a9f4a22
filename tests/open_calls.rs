//! The open-calls frame of spool version 2: a live spool says which calls are open now, with
//! their parents, and `recover` keeps the calls open at a crash in the file.

mod common;

use scope_profiler::read::{spool_open_calls, Profile, TaskState};
use scope_profiler::ScopeLayer;
use tracing_subscriber::prelude::*;

#[test]
fn a_live_spool_names_the_open_calls_and_recover_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p.h5");
    let (layer, guard) = ScopeLayer::builder()
        .output(&out)
        .summary(false)
        .build()
        .unwrap();
    let _default = tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));
    let spool = dir.path().join(".p.h5.spool");
    {
        let _outer = tracing::info_span!("outer").entered();
        for _ in 0..3 {
            tracing::info_span!("done").in_scope(|| std::hint::black_box(1));
        }
        let _inner = tracing::info_span!("inner").entered();
        std::thread::sleep(std::time::Duration::from_millis(5));
        guard.sync().unwrap();
        let open = spool_open_calls(&spool)
            .unwrap()
            .expect("an open-calls frame");
        let names: Vec<&str> = open.calls.iter().map(|c| c.region.as_str()).collect();
        assert_eq!(names, ["outer", "inner"], "{open:?}");
        assert_eq!(open.open, 2);
        assert_eq!(open.left_out(), 0);
        assert_eq!(open.calls[0].parent, None);
        assert_eq!(open.calls[1].parent, Some(0));
        assert!(open.calls.iter().all(|c| c.state == TaskState::Running));
        assert!(open
            .calls
            .iter()
            .all(|c| c.tokio_id.is_none() && c.task.is_none()));
        assert!(open.age_ns(&open.calls[0]) >= 5_000_000, "{open:?}");
        assert!(open.calls[0].start_ns <= open.calls[1].start_ns);

        // A crash now: what the spool holds is recovered, and the open calls with it.
        let crashed = dir.path().join("crashed.spool");
        std::fs::copy(&spool, &crashed).unwrap();
        let rec = dir.path().join("rec.h5");
        let r = scope_profiler::recover_spool(&crashed, &rec).unwrap();
        assert_eq!(r.calls, 3);
        let kept = r.open_calls.clone().expect("the open calls");
        assert_eq!(kept, open);
        let said = r.to_string();
        assert!(
            said.contains("2 call(s) were open") && said.contains("oldest: outer ("),
            "{said}"
        );
        let p = Profile::open(&rec).unwrap();
        assert_eq!(p.open_calls().unwrap(), Some(open));
        assert!(p.wakes().unwrap().is_empty());
        // The reference reader ignores the group.
        let said = common::py("scope-profiler", &["inspect", rec.to_str().unwrap()]);
        assert!(said.contains("done"), "{said}");
    }
    // Closed since: the next frame says so.
    guard.sync().unwrap();
    let open = spool_open_calls(&spool).unwrap().expect("a frame");
    assert_eq!((open.open, open.calls.len()), (0, 0));
    let report = guard.finalize().unwrap();
    assert_eq!(report.region("done").unwrap().calls, 3);
    // A finalized file keeps no open calls.
    assert_eq!(Profile::open(&out).unwrap().open_calls().unwrap(), None);
}

/// More calls open than a frame lists: the frame keeps the oldest 4096 (the outermost of a
/// deep nest here), each with its parent, says how many were open, and the flusher never
/// holds a list of all of them (see `flush/open.rs`).
#[test]
fn a_frame_keeps_the_oldest_calls_and_their_parents() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("deep.h5");
    let (layer, guard) = ScopeLayer::builder()
        .output(&out)
        .summary(false)
        .build()
        .unwrap();
    let _default = tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));
    let spool = dir.path().join(".deep.h5.spool");
    const N: usize = 10_000;
    let mut held = Vec::with_capacity(N);
    for _ in 0..N {
        held.push(tracing::info_span!("level").entered());
    }
    guard.sync().unwrap();
    let open = spool_open_calls(&spool).unwrap().expect("a frame");
    assert_eq!(open.open, N as u64);
    assert_eq!(open.calls.len(), 4096);
    assert_eq!(open.left_out(), (N - 4096) as u64);
    for (i, c) in open.calls.iter().enumerate() {
        assert_eq!(c.parent, i.checked_sub(1).map(|p| p as u32), "call {i}");
        if i > 0 {
            assert!(open.calls[i - 1].start_ns <= c.start_ns, "oldest first");
        }
    }
    while let Some(g) = held.pop() {
        drop(g);
    }
    let report = guard.finalize().unwrap();
    assert_eq!(report.region("level").unwrap().calls, N as u64);
}

//! The frames of spool version 2: open calls (the latest replaces earlier ones) and task
//! edges (streamed, read by `edges::scan_edges` alone), round trip and refusal.

use super::edges::{read_edges, OpenFrame};
use super::*;
use crate::data::edges::{FollowsRow, Spawn, Wake};
use crate::data::open_calls::{nest, OpenRaw, TaskState};

fn header() -> Header {
    Header {
        timestamp: "t".into(),
        ..Header::default()
    }
}

fn raw(region: u32, start_ns: i64, state: TaskState) -> OpenRaw {
    OpenRaw {
        region,
        start_ns,
        thread: 1,
        tokio_id: 9,
        task: 2,
        state,
    }
}

/// A spool with two open-calls frames and edges of every kind, flushed.
fn spool_with_edges(path: &Path) -> SpoolWriter {
    let mut w = SpoolWriter::create(path.to_path_buf(), header(), false).unwrap();
    w.region(0, "a", "", -1);
    w.region(1, "b", "", -1);
    w.open_calls(100, 1, &nest(vec![raw(0, 50, TaskState::Idle)]));
    w.flush(&[], &[]);
    let rows = nest(vec![
        raw(1, 70, TaskState::Scheduled),
        raw(0, 60, TaskState::Scheduled),
    ]);
    w.open_calls(200, 5, &rows);
    for k in 0..5_000i64 {
        w.wake(Wake {
            tick_ns: 1_000 + k,
            thread: (k % 3) as u32,
            waker_task: (k % 2 == 0).then_some(k),
            woken_task: k + 1,
        });
    }
    w.spawn(Spawn {
        tick_ns: 7,
        thread: 0,
        parent_task: None,
        child_task: 4,
    });
    w.follows(FollowsRow {
        tick_ns: 8,
        span_region: 1,
        span_start_ns: -1,
        follows_region: 0,
        follows_start_ns: 3,
    });
    w.flush(&[], &[]);
    w
}

#[test]
fn the_latest_open_calls_frame_wins_and_edges_stream_through_frames() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let _w = spool_with_edges(&path);
    let c = read(&path).unwrap();
    let open: OpenFrame = c.open_calls.expect("an open-calls frame");
    assert_eq!((open.at_ns, open.open, open.rows.len()), (200, 5, 2));
    assert_eq!(open.rows[0].raw, raw(0, 60, TaskState::Scheduled));
    assert_eq!(open.rows[1].parent, 0, "the same task's older call");
    let named = open.named(&c.regions);
    assert_eq!(named.calls[1].region, "b");
    assert_eq!(named.left_out(), 3);
    assert_eq!(named.calls[0].tokio_id, Some(9));

    let (edges, regions) = read_edges(std::slice::from_ref(&path)).unwrap();
    assert_eq!(regions.len(), 2);
    assert_eq!(edges.wakes.len(), 5_000, "two frames of wakes");
    assert_eq!(edges.wakes[4_999].woken_task, 5_000);
    assert_eq!(edges.wakes[4].waker_task, Some(4));
    assert_eq!(edges.wakes[5].waker_task, None);
    assert_eq!(edges.spawns[0].child_task, 4);
    assert_eq!(edges.follows[0].follows_start_ns, 3);
    // A version-2 frame in a file read by a pass over the calls is skipped unread.
    assert!(c.calls.iter().all(Vec::is_empty));
}

#[test]
fn a_malformed_open_calls_frame_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let mut w = SpoolWriter::create(path.clone(), header(), false).unwrap();
    w.region(0, "a", "", -1);
    let mut rows = nest(vec![raw(0, 1, TaskState::Idle), raw(0, 2, TaskState::Idle)]);
    // A parent after its child.
    rows[0].parent = 1;
    w.open_calls(5, 2, &rows);
    w.flush(&[], &[]);
    let e = read(&path).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidData);
    assert!(e.to_string().contains("malformed open-calls frame"), "{e}");
    // An undeclared region, and more rows than calls open.
    for (region, open) in [(3, 2), (0, 1)] {
        let path = dir.path().join(format!("s{region}{open}"));
        let mut w = SpoolWriter::create(path.clone(), header(), false).unwrap();
        w.region(0, "a", "", -1);
        let rows = nest(vec![
            raw(region, 1, TaskState::Idle),
            raw(0, 2, TaskState::Idle),
        ]);
        w.open_calls(5, open, &rows);
        w.flush(&[], &[]);
        assert!(read(&path).is_err(), "region {region}, open {open}");
    }
}

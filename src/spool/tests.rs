use super::*;

fn call(start: i64, dur: i64) -> CallRecord {
    CallRecord {
        start_ns: start,
        dur_ns: dur,
        thread: 1,
        task: 3,
        await_ns: 4,
        gpu_ns: -1,
        call_id: -1,
        parent_id: -1,
    }
}

fn header() -> Header {
    Header {
        start_time_ns: 77,
        timestamp: "t".into(),
        label: Some("l".into()),
        track_threads: true,
        track_async: false,
        aggregate: false,
    }
}

#[test]
fn round_trip_and_rotation() {
    let dir = tempfile::tempdir().unwrap();
    let path = spool_path(&dir.path().join("out.h5"));
    assert!(path.ends_with(".out.h5.spool"));
    let mut w = SpoolWriter::create(path.clone(), header(), false).unwrap();
    w.region(0, "a b/ü", "src/x.rs", 12);
    w.region(1, "b", "", -1);
    for k in 0..10_000 {
        w.call(0, call(k, 5));
    }
    w.call(1, call(1, 2));
    let thread = ThreadRow {
        index: 0,
        name: "main".into(),
        native_id: 9,
        start_ns: 1,
        end_ns: -1,
        cpu_ns: 5,
    };
    w.flush(std::slice::from_ref(&thread), &[]);
    let c = read(&path).unwrap();
    assert_eq!(c.header, header());
    assert_eq!(c.regions[0], ("a b/ü".into(), "src/x.rs".into(), 12));
    assert_eq!(c.calls[0].len(), 10_000);
    assert_eq!(c.calls[0][9_999], call(9_999, 5));
    assert_eq!(c.calls[1], vec![call(1, 2)]);
    assert_eq!(c.threads, vec![thread.clone()]);
    assert_eq!(c.torn_bytes, 0);

    let moved = w.rotate(1, &[], &[]).unwrap();
    assert_eq!(read(&moved).unwrap().calls[0].len(), 10_000);
    w.call(1, call(7, 1));
    w.flush(&[], &[]);
    let fresh = read(&path).unwrap();
    assert_eq!(fresh.regions.len(), 2, "the region table is repeated");
    assert!(fresh.calls[0].is_empty());
    assert_eq!(fresh.calls[1], vec![call(7, 1)]);
}

#[test]
fn a_torn_last_frame_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let mut w = SpoolWriter::create(path.clone(), header(), false).unwrap();
    w.region(0, "r", "", -1);
    w.call(0, call(1, 1));
    w.flush(&[], &[]);
    let full = std::fs::read(&path).unwrap();
    std::fs::write(&path, &full[..full.len() - 3]).unwrap();
    let c = read(&path).unwrap();
    assert!(c.torn_bytes > 0);
    assert!(c.calls[0].is_empty());
    std::fs::write(&path, b"garbage!").unwrap();
    assert!(read(&path).is_err());
}

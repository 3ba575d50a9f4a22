use std::time::Duration;

use super::*;
use crate::data::rows::CallRecord;

const S: i64 = 1_000_000_000;

fn header() -> Header {
    Header {
        start_time_ns: 0,
        timestamp: "t".into(),
        aggregate: true, // the run's main spool; the ring's segments are time-only
        ..Header::default()
    }
}

fn thread() -> Vec<ThreadRow> {
    vec![ThreadRow {
        index: 0,
        name: "main".into(),
        native_id: 1,
        start_ns: 0,
        end_ns: -1,
        cpu_ns: 0,
    }]
}

fn ring(dir: &Path, window_s: u64, budget: u64) -> FlightRing {
    let opts = FlightOptions {
        window: Duration::from_secs(window_s),
        disk_budget: budget,
        min_duration: Duration::ZERO,
    };
    FlightRing::new(&dir.join("p.h5"), header(), false, opts, S / 10, 0)
}

/// One call per 10 ms from `from` to `to` (seconds), flushed every 100 ms.
fn record(r: &mut FlightRing, from: i64, to: i64) {
    let threads = thread();
    let mut t = from * S;
    while t < to * S {
        for k in 0..10 {
            let start = t + k * S / 100;
            r.writer(start)
                .unwrap()
                .call(0, CallRecord::new(start, S / 200, 0));
        }
        t += S / 10;
        r.flush(&threads, &threads, t);
    }
}

fn calls_in(files: &[PathBuf]) -> (u64, i64) {
    let mut n = 0;
    let mut first = i64::MAX;
    for f in files {
        let p = crate::finalize::recover::pass0(f).unwrap();
        for (_, st) in p.region_stats() {
            n += st.count;
        }
        let c = crate::spool::read(f).unwrap();
        assert!(!c.header.aggregate, "a segment is time-only");
        assert_eq!(c.regions.len(), 1, "every segment declares the regions");
        assert_eq!(c.threads.len(), 1, "every segment has the thread table");
        first = first.min(p_start(f));
    }
    (n, first)
}

fn p_start(f: &Path) -> i64 {
    let mut first = i64::MAX;
    crate::spool::scan(
        f,
        false,
        Some(&mut |_, calls: &[CallRecord]| {
            for c in calls {
                first = first.min(c.start_ns);
            }
        }),
    )
    .unwrap();
    first
}

#[test]
fn the_ring_keeps_the_window_and_deletes_what_is_older() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = ring(dir.path(), 4, 256 << 20);
    r.region(0, "work", "src/w.rs", 3, 0);
    record(&mut r, 0, 20);
    // Segments of a quarter window (1 s): at most the window plus one segment on disk.
    let on_disk = std::fs::read_dir(dir.path()).unwrap().count();
    assert!((4..=6).contains(&on_disk), "{on_disk} segment files");
    let plan = r.for_dump(&thread(), 20 * S);
    let (n, first) = calls_in(&plan.files);
    // The calls of at least the last 4 s (100 a second), and not much more than 5 s.
    assert!((400..=500).contains(&n), "{n} calls");
    assert!(first <= 16 * S, "covers the window: first call at {first}");
    assert!(plan.covered_from_ns <= 16 * S && plan.covered_from_ns >= 15 * S);
    assert_eq!(plan.shrunk_to_ns, None);
}

#[test]
fn a_dump_pins_its_segments_until_it_is_done() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = ring(dir.path(), 2, 256 << 20);
    r.region(0, "work", "", -1, 0);
    record(&mut r, 0, 4);
    let plan = r.for_dump(&thread(), 4 * S);
    record(&mut r, 4, 12);
    assert!(
        plan.files.iter().all(|f| f.exists()),
        "a pinned segment was deleted"
    );
    let kept = plan.files.clone();
    drop(plan);
    record(&mut r, 12, 13);
    assert!(
        kept.iter().all(|f| !f.exists()),
        "old segments stay once the dump is done"
    );
}

#[test]
fn the_disk_budget_shrinks_the_window_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    // 1 MiB for a 60 s window of 100 calls a second of ~4 bytes each is plenty; force it
    // with bigger calls: one thousand per 10 ms.
    let mut r = ring(dir.path(), 60, 1 << 20);
    r.region(0, "work", "", -1, 0);
    let threads = thread();
    for step in 0..300 {
        let t = step * S / 10;
        for k in 0..2000 {
            let start = t + k * 50;
            r.writer(start)
                .unwrap()
                .call(0, CallRecord::new(start, 1_000_003 + k, (k % 7) as u32));
        }
        r.flush(&threads, &threads, t + S / 10);
    }
    assert!(r.bytes() <= 1 << 20, "{} bytes, over the budget", r.bytes());
    let shrunk = r.shrunk_to_ns().expect("the budget cut the window");
    assert!(shrunk < 60 * S);
    let plan = r.for_dump(&threads, 30 * S);
    assert!(plan.covered_from_ns > 0, "the oldest segments went");
}

#[test]
fn remove_all_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = ring(dir.path(), 1, 256 << 20);
    r.region(0, "work", "", -1, 0);
    record(&mut r, 0, 3);
    r.remove_all();
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn disk_stays_flat_over_a_run_ten_times_as_long() {
    let held = |seconds: i64| {
        let dir = tempfile::tempdir().unwrap();
        let mut r = ring(dir.path(), 4, 256 << 20);
        r.region(0, "work", "", -1, 0);
        record(&mut r, 0, seconds);
        let files = std::fs::read_dir(dir.path()).unwrap().count();
        (r.bytes(), files)
    };
    let (short, short_files) = held(20);
    let (long, long_files) = held(200);
    assert_eq!(short_files, long_files, "segment files held");
    assert!(
        long <= short + short / 10,
        "{long} bytes after 200 s against {short} after 20 s"
    );
}

#[test]
fn a_segment_that_cannot_be_made_is_tried_again_once_per_flush() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("out");
    std::fs::create_dir(&sub).unwrap();
    let mut r = ring(&sub, 4, 256 << 20);
    std::fs::remove_dir(&sub).unwrap();
    for _ in 0..1000 {
        assert!(r.writer(0).is_none());
        r.lost_call();
    }
    std::fs::create_dir(&sub).unwrap();
    assert!(
        r.writer(0).is_none(),
        "not tried again before the next flush"
    );
    r.flush(&thread(), &thread(), S);
    assert!(r.writer(S).is_some(), "tried again at the flush");
    let plan = r.for_dump(&thread(), 2 * S);
    assert_eq!(plan.lost_calls, 1000);
}

/// Left-out calls are counted per segment through its writer (moved to the segment as it
/// closes), and a dump sums the closed segments' counts and reads their places back.
#[test]
fn left_out_calls_are_counted_in_the_segments_a_dump_reads() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = ring(dir.path(), 4, 256 << 20);
    r.region(0, "work", "", -1, 0);
    r.region(1, "fast", "", -1, 0);
    let threads = thread();
    // 10 left-out calls of region 1 per 100 ms for 6 s: segments of 1 s roll under them.
    for tick in 0..60 {
        let t = tick * S / 10;
        for k in 0..10 {
            r.below(1, t + k * 1000, t + k * 1000 + 500, -2);
        }
        r.flush(&threads, &threads, t + S / 10);
    }
    let plan = r.for_dump(&thread(), 6 * S);
    let mut places = 0u64;
    crate::spool::below::for_each_below(&plan.files, |b| {
        assert_eq!(b.lane, -2);
        places += 1;
    })
    .unwrap();
    let counted: u64 = plan.below.iter().map(|&(_, n)| n).sum();
    assert_eq!(plan.below.iter().map(|&(r, _)| r).collect::<Vec<_>>(), [1]);
    // Every segment the dump reads counted exactly the calls whose places it holds: the
    // window (4 s) and its current segment at least, never more than were recorded.
    assert_eq!(counted, places);
    assert!((400..=600).contains(&counted), "{counted}");
}

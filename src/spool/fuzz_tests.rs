//! Mutated spools never make a reader panic or allocate beyond the file: every frame kind the
//! writer makes (header, regions, calls, polls in runs, task rows, sites, threads, aggregate,
//! and version 2's open calls, wakes, spawns, `follows_from` links and left-out calls)
//! is mutated where its ids and counts live, then read by [`super::scan`] with the lanes kept,
//! by the edges' reader and by the lane follower. (`tests/planted_spools.rs` fuzzes the public `recover_spool` with
//! an allocation cap checked by a counting allocator.)

use super::*;
use crate::data::rows::{CallRecord, PollRecord, TaskTotals};

/// A spool holding one frame of every kind, and its bytes.
fn every_frame_kind(dir: &Path) -> Vec<u8> {
    let path = spool_path(&dir.join("all.h5"));
    let header = Header {
        start_time_ns: 5,
        timestamp: "t".into(),
        label: None,
        track_threads: true,
        track_async: true,
        aggregate: false,
    };
    let mut w = SpoolWriter::create(path.clone(), header, false).unwrap();
    w.region(0, "a", "src/a.rs", 1);
    w.region(1, "b", "", -1);
    w.scheduled_columns();
    w.sites(vec![(1, crate::data::sites::SiteInfo::default())]);
    for k in 0..50 {
        w.call(k % 2, CallRecord::new(k as i64 * 10, 5, k % 3));
        w.poll(PollRecord {
            region: k % 2,
            start_ns: k as i64 * 10,
            dur_ns: 2,
            thread: 0,
            task: i64::from(k / 10),
            sched_ns: 3,
        });
    }
    w.tasks(&[TaskTotals {
        index: 0,
        tokio_id: 9,
        thread_index: 0,
        created_ns: 1,
        done_ns: 90,
        steps: 3,
        running_ns: 20,
        suspended_ns: 10,
        root_region: 0,
        polls: Default::default(),
    }]);
    let thread = ThreadRow {
        index: 0,
        native_id: 1,
        start_ns: 0,
        end_ns: 9,
        cpu_ns: 1,
        name: "main".into(),
    };
    // Version 2: the open calls and the task edges.
    let open = crate::data::open_calls::OpenRaw {
        region: 1,
        start_ns: 3,
        thread: 0,
        tokio_id: 9,
        task: 0,
        state: crate::data::open_calls::TaskState::Running,
    };
    let open = crate::data::open_calls::nest(vec![open, open]);
    w.open_calls(100, 2, &open);
    let (waker_task, woken_task) = (Some(0), 1);
    w.wake(crate::data::edges::Wake {
        tick_ns: 5,
        thread: 0,
        waker_task,
        woken_task,
    });
    let (parent_task, child_task) = (None, 1);
    w.spawn(crate::data::edges::Spawn {
        tick_ns: 4,
        thread: 0,
        parent_task,
        child_task,
    });
    w.follows(crate::data::edges::FollowsRow {
        tick_ns: 6,
        span_region: 1,
        span_start_ns: -1,
        follows_region: 0,
        follows_start_ns: 2,
    });
    // Version 2: the calls a flight recorder's threshold left out.
    w.below_call(0, 30, -2);
    w.below_call(1, 35, 0);
    w.below_call(1, 32, -7);
    w.below_call(1, 40, -7);
    w.flush(&[thread], &[(0, Stats::default())]);
    std::fs::read(&path).unwrap()
}

#[test]
fn left_out_calls_read_back_as_written() {
    let dir = tempfile::tempdir().unwrap();
    every_frame_kind(dir.path());
    let mut got = Vec::new();
    below::for_each_below(&[spool_path(&dir.path().join("all.h5"))], |b| got.push(b)).unwrap();
    let b = |start_ns, lane| below::BelowCall { start_ns, lane };
    assert_eq!(got, vec![b(30, -2), b(35, 0), b(32, -7), b(40, -7)]);
}

#[test]
fn mutated_spools_are_read_or_refused_never_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let base = every_frame_kind(dir.path());
    let mut heads = Vec::new();
    let mut at = 0;
    while at + 5 <= base.len() {
        heads.push(at);
        at += 5 + u32::from_le_bytes(base[at + 1..at + 5].try_into().unwrap()) as usize;
    }
    let tags: std::collections::HashSet<u8> = heads.iter().map(|&h| base[h]).collect();
    for tag in [
        TAG_OPEN_CALLS,
        TAG_WAKES,
        TAG_SPAWNS,
        TAG_FOLLOWS,
        TAG_BELOW,
        TAG_POLL_RUNS,
        TAG_SITES,
    ] {
        assert!(tags.contains(&tag), "frame {tag} in {tags:?}");
    }
    let target = dir.path().join("mutant");
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n.max(1) as u64) as usize
    };
    let (mut read_back, mut refused) = (0, 0);
    for _ in 0..2_000 {
        let mut m = base.clone();
        for _ in 0..=next(2) {
            // A frame's length or one of the first u32s of its payload: ids and counts.
            let at = heads[next(heads.len())] + 1 + 4 * next(4);
            let v = [u32::MAX, 0xFFFF_FF00, 1 << 30, 1 << 20, 0][next(5)];
            if at + 4 <= m.len() {
                m[at..at + 4].copy_from_slice(&v.to_le_bytes());
            }
            let flip = next(m.len());
            m[flip] ^= 1 << next(8);
        }
        std::fs::write(&target, &m).unwrap();
        match scan(&target, true, Some(&mut |_, _| {})) {
            Ok(_) => read_back += 1,
            Err(e) => {
                assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
                refused += 1;
            }
        }
        match edges::read_edges(std::slice::from_ref(&target)) {
            Ok(_) => read_back += 1,
            Err(e) => {
                assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
                refused += 1;
            }
        }
        match below::for_each_below(std::slice::from_ref(&target), |_| {}) {
            Ok(()) => read_back += 1,
            Err(e) => {
                assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
                refused += 1;
            }
        }
        let mut follower = follow::LaneFollower::open(&target).unwrap();
        let _ = follower.read_available();
    }
    assert!(read_back > 0 && refused > 0, "{read_back} / {refused}");
}

use super::*;

fn call(start: i64, dur: i64) -> CallRecord {
    CallRecord {
        task: 3,
        await_ns: 4,
        ..CallRecord::new(start, dur, 1)
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
    assert_eq!(
        c.regions[0],
        SpoolRegion {
            name: "a b/ü".into(),
            file: "src/x.rs".into(),
            line: 12
        }
    );
    assert_eq!(c.calls[0].len(), 10_000);
    assert_eq!(c.calls[0][9_999], call(9_999, 5));
    assert_eq!(c.calls[1], vec![call(1, 2)]);
    assert_eq!(c.threads, vec![thread.clone()]);
    assert_eq!(c.torn_bytes, 0);

    let rotated = w.rotate(1, &[], &[]);
    assert!(rotated.failure.is_none());
    assert_eq!(rotated.calls, 10_001);
    let moved = rotated.file.expect("moved aside");
    assert_eq!(read(&moved).unwrap().calls[0].len(), 10_000);
    w.call(1, call(7, 1));
    w.flush(&[], &[]);
    let fresh = read(&path).unwrap();
    assert_eq!(fresh.regions.len(), 2, "the region table is repeated");
    assert!(fresh.calls[0].is_empty());
    assert_eq!(fresh.calls[1], vec![call(7, 1)]);
}

/// A spool at `dir/s` holding one call of region `r`, flushed.
fn one_call(dir: &Path) -> (PathBuf, SpoolWriter) {
    let path = dir.join("s");
    let mut w = SpoolWriter::create(path.clone(), header(), false).unwrap();
    w.region(0, "r", "", -1);
    w.call(0, call(1, 1));
    w.flush(&[], &[]);
    (path, w)
}

#[test]
fn a_torn_last_frame_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _w) = one_call(dir.path());
    let full = std::fs::read(&path).unwrap();
    std::fs::write(&path, &full[..full.len() - 3]).unwrap();
    let c = read(&path).unwrap();
    assert!(c.torn_bytes > 0);
    assert!(c.calls[0].is_empty());
    std::fs::write(&path, b"garbage!").unwrap();
    assert!(read(&path).is_err());
}

#[test]
fn polls_and_retired_task_rows_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = spool_path(&dir.path().join("t.h5"));
    let mut w = SpoolWriter::create(path.clone(), header(), false).unwrap();
    w.region(0, "conn", "", -1);
    let polls: Vec<PollRecord> = (0..5_000)
        .map(|k| PollRecord {
            region: 0,
            start_ns: 1_000 + 7 * k,
            dur_ns: 3,
            thread: (k % 2) as u32,
            task: if k % 3 == 0 { -1 } else { k },
            sched_ns: -1,
        })
        .collect();
    for p in &polls {
        w.poll(*p);
    }
    let task = crate::data::rows::TaskTotals {
        index: 4,
        tokio_id: 1 << 40,
        thread_index: 1,
        created_ns: 10,
        done_ns: 20,
        steps: 2,
        running_ns: 6,
        suspended_ns: 4,
        root_region: 0,
        polls: Default::default(),
    };
    w.tasks(&[task]);
    w.flush(&[], &[]);
    let c = read(&path).unwrap();
    assert_eq!(c.polls, polls);
    assert_eq!(c.tasks, vec![task.row(false)]);
}

#[test]
fn a_torn_frame_reads_the_same_whether_it_is_read_or_skipped() {
    // The calls pass skips the lanes' frames unread and the lanes pass the calls' frames; a
    // frame cut short is torn either way, and what precedes it is read the same.
    let dir = tempfile::tempdir().unwrap();
    let (path, mut w) = one_call(dir.path());
    for k in 0..100 {
        w.poll(PollRecord {
            region: 0,
            start_ns: k,
            dur_ns: 1,
            thread: 0,
            task: -1,
            sched_ns: -1,
        });
    }
    w.flush(&[], &[]);
    assert_eq!(scan(&path, true, None).unwrap().polls.len(), 100);
    let full = std::fs::read(&path).unwrap();
    std::fs::write(&path, &full[..full.len() - 3]).unwrap();
    let mut calls = 0;
    let skipping_polls = scan(&path, false, Some(&mut |_, c| calls += c.len())).unwrap();
    let skipping_calls = scan(&path, true, None).unwrap();
    assert_eq!(calls, 1, "the calls frame before the torn one");
    assert!(skipping_polls.torn_bytes > 5);
    assert_eq!(skipping_polls.torn_bytes, skipping_calls.torn_bytes);
    assert!(
        skipping_calls.polls.is_empty(),
        "the torn polls frame is not read"
    );
}

#[test]
fn a_follower_reads_the_lanes_of_a_spool_while_it_grows() {
    // A spool with calls, polls and task rows (one frame of them larger than the follower's
    // 4 MiB block), replayed into a second file in pieces of odd sizes: the follower reads
    // between pieces (frames cut anywhere) and ends with what a whole scan reads.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let mut w = SpoolWriter::create(path.clone(), header(), false).unwrap();
    w.region(0, "r", "", -1);
    let task = |k: i64| crate::data::rows::TaskTotals {
        index: k,
        tokio_id: 1_000_000_007 * k as u64,
        thread_index: 1,
        created_ns: 1_000_000_000 + k,
        done_ns: 2_000_000_000 + k,
        steps: 2,
        running_ns: 600_000 + k,
        suspended_ns: 400_000 + k,
        root_region: 0,
        polls: Default::default(),
    };
    for k in 0..20_000 {
        w.call(0, call(k, 5));
        w.poll(PollRecord {
            region: 0,
            start_ns: 1_000 + 7 * k,
            dur_ns: 3,
            thread: 0,
            task: k,
            sched_ns: -1,
        });
    }
    w.tasks(&(0..10).map(task).collect::<Vec<_>>());
    w.tasks(&(10..300_000).map(task).collect::<Vec<_>>());
    w.flush(&[], &[]);
    let full = std::fs::read(&path).unwrap();
    assert!(full.len() > 5 << 20, "a frame above the block size");
    let grown = dir.path().join("grown");
    let mut out = std::fs::File::create(&grown).unwrap();
    let mut f = LaneFollower::open(&grown).unwrap();
    let (mut at, mut k) = (0, 0);
    while at < full.len() {
        let piece = [1, 4, 5, 3_000, 70_001, 1 << 20][k % 6].min(full.len() - at);
        std::io::Write::write_all(&mut out, &full[at..at + piece]).unwrap();
        at += piece;
        k += 1;
        f.read_available().unwrap();
    }
    let (tasks, polls) = f.finish((0, 0)).unwrap();
    let whole = scan(&path, true, None).unwrap();
    assert_eq!(polls.len(), 20_000);
    assert_eq!(tasks.len(), 300_000);
    assert_eq!(polls, whole.polls);
    assert_eq!(tasks, whole.tasks);
}

#[test]
fn thread_rows_of_later_frames_replace_earlier_ones_by_index() {
    let dir = tempfile::tempdir().unwrap();
    let path = spool_path(&dir.path().join("t.h5"));
    let mut w = SpoolWriter::create(path.clone(), header(), false).unwrap();
    let row = |index: u32, end_ns: i64| ThreadRow {
        index,
        name: format!("t{index}"),
        native_id: 100 + i64::from(index),
        start_ns: 1,
        end_ns,
        cpu_ns: 5,
    };
    // Live rows at every flush; an exited thread's row once.
    w.flush(&[row(1, -1), row(0, -1)], &[]);
    w.flush(&[row(1, -1), row(0, 40)], &[]);
    w.flush(&[row(1, -1), row(2, -1)], &[]);
    let c = read(&path).unwrap();
    assert_eq!(c.threads, vec![row(0, 40), row(1, -1), row(2, -1)]);
}

/// A spool on a 64 KiB tmpfs: the writes that do not fit lose their calls (counted, with
/// their time range), the file keeps whole frames only, writing resumes once there is room,
/// and a rotation reports the phase as failed; the next phase is whole.
#[test]
fn a_full_disk_loses_counted_calls_and_writing_resumes() {
    let fs = crate::testing::Tmpfs::mount("64k");
    let path = spool_path(&fs.path().join("out.h5"));
    let filler = fs.path().join("filler");
    let mut w = SpoolWriter::create(path.clone(), header(), false).unwrap();
    w.region(0, "r", "", -1);
    let mut n = 0i64;
    let mut batch = |w: &mut SpoolWriter, calls: i64| {
        for _ in 0..calls {
            w.call(0, call(1_000 + n, 5));
            n += 1;
        }
        w.flush(&[], &[]);
    };
    batch(&mut w, 1_000);
    // Fill what is left, then one more batch cannot be written.
    let _ = std::fs::write(&filler, vec![1u8; 64 << 10]);
    batch(&mut w, 2_000);
    assert_eq!(w.lost.calls, 2_000);
    assert_eq!((w.lost.first_ns, w.lost.last_ns), (2_000, 4_004));
    assert_eq!(
        read(&path).unwrap().calls[0].len(),
        1_000,
        "whole frames only"
    );
    assert_eq!(read(&path).unwrap().torn_bytes, 0);
    // Room again: the next write goes in.
    std::fs::remove_file(&filler).unwrap();
    batch(&mut w, 500);
    let r = w.rotate(1, &[], &[]);
    let failure = r.failure.expect("the phase lost calls");
    assert_eq!(failure.lost.calls, 2_000);
    assert_eq!(failure.error.kind(), io::ErrorKind::StorageFull);
    assert_eq!(r.calls, 1_500);
    let moved = r.file.expect("moved aside");
    assert_eq!(read(&moved).unwrap().calls[0].len(), 1_500);
    batch(&mut w, 10);
    let next = w.rotate(2, &[], &[]);
    assert!(next.failure.is_none());
    assert_eq!(read(&next.file.unwrap()).unwrap().calls[0].len(), 10);
}

/// The spool's directory goes read-only (a read-only bind mount over it: files open before
/// stay writable, as a read-only remount of a file system with open files is refused): the
/// phase's file cannot be moved aside, so its
/// calls stay readable where they are (reported), later calls are lost (counted) until the
/// directory is writable again; then the old file is moved aside and a new phase begins.
#[test]
fn a_read_only_directory_keeps_the_phase_in_place() {
    let fs = crate::testing::Tmpfs::mount("1m");
    let path = spool_path(&fs.path().join("out.h5"));
    let mut w = SpoolWriter::create(path.clone(), header(), false).unwrap();
    w.region(0, "r", "", -1);
    w.call(0, call(1, 1));
    w.flush(&[], &[]);
    fs.cover_read_only();
    w.call(0, call(2, 1));
    let r = w.rotate(1, &[], &[]);
    let failure = r.failure.expect("failed");
    assert_eq!(failure.kept_at.as_deref(), Some(path.as_path()));
    // Written through the open file: kept; only the move aside failed.
    assert_eq!((r.calls, failure.lost.calls), (2, 0));
    assert_eq!(failure.error.kind(), io::ErrorKind::ReadOnlyFilesystem);
    assert!(r.file.is_none());
    assert_eq!(read(&path).unwrap().calls[0].len(), 2);
    w.call(0, call(3, 1));
    w.flush(&[], &[]);
    assert_eq!(w.lost.calls, 1, "no file for the next phase yet");
    fs.uncover();
    w.call(0, call(4, 1));
    let r = w.rotate(2, &[], &[]);
    assert_eq!(r.failure.expect("lost one").lost.calls, 1);
    assert_eq!(read(&r.file.unwrap()).unwrap().calls[0], vec![call(4, 1)]);
    let aside = PathBuf::from(format!("{}.1", path.display()));
    assert_eq!(read(&aside).unwrap().calls[0], vec![call(1, 1), call(2, 1)]);
}

#[test]
fn tokio_scheduling_data_round_trips_and_rotates_with_its_sites() {
    use crate::data::rows::PollTotals;
    use crate::data::sites::SiteInfo;
    use crate::flusher::task::polls::TaskPoll;
    let dir = tempfile::tempdir().unwrap();
    let path = spool_path(&dir.path().join("t.h5"));
    let mut w = SpoolWriter::create(path.clone(), header(), false).unwrap();
    w.region(0, "handler", "", -1);
    let site = SiteInfo {
        name: "worker".into(),
        file: "src/main.rs".into(),
        line: 42,
        col: 5,
    };
    w.scheduled_columns();
    w.sites(vec![(1, site.clone())]);
    // Calls: one frame with scheduled time, one (another region) without.
    w.region(1, "sync", "", -1);
    w.call(
        0,
        CallRecord {
            sched_ns: 1_500,
            ..call(10, 20)
        },
    );
    w.call(1, call(40, 5));
    w.poll(PollRecord {
        region: 0,
        start_ns: 5,
        dur_ns: 3,
        thread: 0,
        task: 0,
        sched_ns: 700,
    });
    let mut polls = PollTotals::default();
    polls.add(&TaskPoll {
        tokio_id: 9,
        site: 1,
        lane: 0,
        start_ns: 100,
        end_ns: 130,
        sched_ns: None,
        idle_ns: 0,
        first_delay_ns: Some(12),
        spawn_ns: Some(88),
    });
    polls.end(1, Some(130));
    let task = crate::data::rows::TaskTotals {
        index: 0,
        tokio_id: 9,
        thread_index: 0,
        created_ns: i64::MAX,
        done_ns: -1,
        steps: 0,
        running_ns: 0,
        suspended_ns: 0,
        root_region: u32::MAX,
        polls,
    };
    w.tasks(&[task]);
    w.flush(&[], &[]);
    let c = read(&path).unwrap();
    assert_eq!(c.calls[0][0].sched_ns, 1_500);
    assert_eq!(c.calls[1][0].sched_ns, -1, "a frame without scheduled time");
    assert_eq!(c.polls[0].sched_ns, 700);
    assert_eq!(c.sites, std::slice::from_ref(&site));
    let row = &c.tasks[0];
    assert_eq!(row, &task.row(false));
    assert_eq!(
        (
            row.sched.polls,
            row.sched.busy_ns,
            row.sched.first_poll_delay_ns
        ),
        (1, 30, 12)
    );
    assert_eq!(
        (row.created_ns, row.done_ns, row.steps),
        (88, 130, 1),
        "a task without calls: lane columns from its polls"
    );
    // The next phase's file declares the sites again.
    w.rotate(1, &[], &[]);
    w.flush(&[], &[]);
    assert_eq!(read(&path).unwrap().sites, [site]);
}

#[test]
fn polls_in_runs_take_a_few_bytes_each_and_old_poll_frames_still_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = spool_path(&dir.path().join("r.h5"));
    let mut w = SpoolWriter::create(path.clone(), header(), false).unwrap();
    w.region(0, "r", "", -1);
    w.region(1, "s", "", -1);
    // Long runs (a span polled in a loop), then runs of one (alternating regions and tasks).
    let mut polls: Vec<PollRecord> = (0..3_000)
        .map(|k| PollRecord {
            region: 0,
            start_ns: 10 * k,
            dur_ns: 4,
            thread: 1,
            task: 7,
            sched_ns: -1,
        })
        .collect();
    polls.extend((0..1_000).map(|k| PollRecord {
        region: (k % 2) as u32,
        start_ns: 40_000 + 10 * k,
        dur_ns: 3,
        thread: (k % 3) as u32,
        task: if k % 2 == 0 { -1 } else { 1_000 + k },
        sched_ns: -1,
    }));
    for p in &polls {
        w.poll(*p);
    }
    w.flush(&[], &[]);
    let size = std::fs::metadata(&path).unwrap().len();
    assert_eq!(read(&path).unwrap().polls, polls);
    // Two bytes for the long runs' polls (start delta, duration): far under the 5+ of one
    // varint per field.
    assert!(size < 3_000 * 3 + 1_000 * 9, "{size} bytes");
    // A frame of the earlier layout (tag 6: every field per poll) reads the same.
    let old = dir.path().join(".old.spool");
    let mut w = SpoolWriter::create(old.clone(), header(), false).unwrap();
    w.flush(&[], &[]);
    let mut payload = 2u32.to_le_bytes().to_vec();
    for v in [0i64, 5, 2, 1, -1, 0, 3, 4, 0, 9] {
        super::put_varint(&mut payload, v);
    }
    let mut bytes = std::fs::read(&old).unwrap();
    super::frame(&mut bytes, TAG_POLLS, &payload);
    std::fs::write(&old, bytes).unwrap();
    let got = read(&old).unwrap().polls;
    let want = |start_ns, dur_ns, thread, task| PollRecord {
        region: 0,
        start_ns,
        dur_ns,
        thread,
        task,
        sched_ns: -1,
    };
    assert_eq!(got, vec![want(5, 2, 1, -1), want(8, 4, 0, 9)]);
}

#[test]
fn call_frames_store_constant_columns_once_and_old_call_frames_still_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = spool_path(&dir.path().join("c.h5"));
    let mut w = SpoolWriter::create(path.clone(), header(), false).unwrap();
    w.region(0, "sync", "", -1);
    w.region(1, "mixed", "", -1);
    // Region 0: one thread, no task, no await, no GPU: start and duration only.
    let sync: Vec<CallRecord> = (0..4_096).map(|k| call(10 * k, 3)).collect();
    for c in &sync {
        w.call(0, *c);
    }
    let size_sync = {
        w.flush(&[], &[]);
        std::fs::metadata(&path).unwrap().len()
    };
    // Region 1: every column varies somewhere.
    let mixed: Vec<CallRecord> = (0..100)
        .map(|k| CallRecord {
            thread: (k % 3) as u32,
            task: if k % 2 == 0 { -1 } else { k },
            await_ns: k % 5,
            gpu_ns: if k == 7 { 1_234 } else { -1 },
            ..call(50_000 + 10 * k, 4)
        })
        .collect();
    for c in &mixed {
        w.call(1, *c);
    }
    w.flush(&[], &[]);
    let c = read(&path).unwrap();
    assert_eq!((c.calls[0].clone(), c.calls[1].clone()), (sync, mixed));
    assert!(
        size_sync < 4_096 * 4,
        "{size_sync} bytes for 4 096 sync calls"
    );
    // A frame of the earlier layout (tag 2: every column per call) reads the same.
    let old = dir.path().join(".old.spool");
    let mut w = SpoolWriter::create(old.clone(), header(), false).unwrap();
    w.region(0, "r", "", -1);
    w.flush(&[], &[]);
    let mut payload = 0u32.to_le_bytes().to_vec();
    payload.extend_from_slice(&1u32.to_le_bytes());
    for v in [100i64, 5, 2, 9, 1, -1] {
        super::put_varint(&mut payload, v);
    }
    let mut bytes = std::fs::read(&old).unwrap();
    super::frame(&mut bytes, TAG_CALLS, &payload);
    std::fs::write(&old, bytes).unwrap();
    let got = read(&old).unwrap().calls;
    let want = CallRecord {
        thread: 2,
        task: 9,
        await_ns: 1,
        gpu_ns: -1,
        ..call(100, 5)
    };
    assert_eq!(got[0], vec![want]);
}

/// A spool of version 1 (magic `SPRSPOL1`, the frames of that version) is still read; one
/// written now is version 2; a third magic is refused.
#[test]
fn version_one_spools_still_read_and_new_ones_are_version_two() {
    let dir = tempfile::tempdir().unwrap();
    let (path, w) = one_call(dir.path());
    drop(w);
    let now = read(&path).unwrap();
    assert_eq!(now.version, 2);
    let mut bytes = std::fs::read(&path).unwrap();
    // The header frame's payload begins with the magic, after its 5-byte head.
    assert_eq!(bytes[0], TAG_HEADER);
    assert_eq!(&bytes[5..13], b"SPRSPOL2");
    bytes[5..13].copy_from_slice(b"SPRSPOL1");
    let old = dir.path().join("old");
    std::fs::write(&old, &bytes).unwrap();
    let c = read(&old).unwrap();
    assert_eq!(c.version, 1);
    assert_eq!(c.header, header());
    assert_eq!(c.calls[0], vec![call(1, 1)]);
    bytes[5..13].copy_from_slice(b"SPRSPOL9");
    std::fs::write(&old, &bytes).unwrap();
    let e = read(&old).unwrap_err();
    assert!(e.to_string().contains("bad magic"), "{e}");
}

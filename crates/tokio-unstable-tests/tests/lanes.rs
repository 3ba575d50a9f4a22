//! Every Tokio task gets a lane and a `task_table` row, instrumented or not; Tokio's own spans
//! are not regions by default; the file stays readable by the Python reader and its Perfetto
//! trace parses with Perfetto's own protos; `scopeprof inspect` shows the tasks box and the
//! worst scheduled delays.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use scope_profiler_tokio_unstable_tests::{
    profile, repo_root, run_ok, scopeprof, spin, venv_program, Read, Run,
};

/// Uninstrumented tasks from three spawn sites (one of them named), a channel, a timer, and a
/// task that holds the only worker while others are woken. Returns the run and the line of
/// each spawn site.
fn program(
    dir: &std::path::Path,
    name: &str,
    task_regions: bool,
) -> (Run, HashMap<&'static str, u32>) {
    let lines = Arc::new(Mutex::new(HashMap::new()));
    let l = lines.clone();
    let run = profile(
        dir,
        name,
        1,
        |b| b.task_regions(task_regions),
        |rt, _| {
            rt.block_on(async move {
                let (tx, mut rx) = tokio::sync::mpsc::channel::<u32>(4);
                #[rustfmt::skip]
            let (line, consumer) = (line!(), tokio::spawn(async move {
                let mut n = 0;
                while let Some(v) = rx.recv().await {
                    n += v;
                }
                n
            }));
                l.lock().unwrap().insert("consumer", line);
                let mut producers = Vec::new();
                for k in 0..4u32 {
                    let tx = tx.clone();
                    #[rustfmt::skip]
                let (line, h) = (line!(), tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(2 + u64::from(k))).await;
                    tx.send(k).await.unwrap();
                }));
                    l.lock().unwrap().insert("producer", line);
                    producers.push(h);
                }
                drop(tx);
                #[rustfmt::skip]
            let (line, hog) = (line!(), tokio::task::Builder::new().name("hog").spawn(async {
                tokio::time::sleep(Duration::from_millis(1)).await;
                spin(Duration::from_millis(6));
            }).unwrap());
                l.lock().unwrap().insert("hog", line);
                for p in producers {
                    p.await.unwrap();
                }
                hog.await.unwrap();
                assert_eq!(consumer.await.unwrap(), 6);
            })
        },
    );
    let lines = lines.lock().unwrap().clone();
    (run, lines)
}

#[test]
fn every_task_gets_a_lane_named_from_its_spawn() {
    let dir = tempfile::tempdir().unwrap();
    let (run, lines) = program(dir.path(), "lanes", false);
    let read = Read::open(&run.path);
    let file = file!();
    assert_eq!(read.spawned_at(file, lines["consumer"]).len(), 1);
    assert_eq!(read.spawned_at(file, lines["producer"]).len(), 4);
    let hog = read.spawned_at(file, lines["hog"]);
    assert_eq!(hog.len(), 1);
    assert_eq!(hog[0].name, "hog", "named from task.name");
    let consumer = read.spawned_at(file, lines["consumer"])[0];
    // Named by its spawn site and its task index (the four producers share a site).
    assert_eq!(
        consumer.name,
        format!("task {file}:{} #{}", lines["consumer"], consumer.index)
    );
    let producers: std::collections::BTreeSet<&str> = read
        .spawned_at(file, lines["producer"])
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(producers.len(), 4, "{producers:?}");
    let loc = &consumer.sched.as_ref().unwrap().spawn_location;
    let col: u32 = loc.rsplit(':').next().unwrap().parse().unwrap();
    assert!(col > 1, "file:line:col, got {loc}");
    for t in read.tasks.iter().filter(|t| t.sched.is_some()) {
        let s = t.sched.as_ref().unwrap();
        assert!(t.tokio_id > 0);
        assert!(
            s.polls >= 1 && s.busy_ns > 0 && s.idle_ns >= 0 && s.scheduled_ns >= 0,
            "{t:?}"
        );
        assert!(
            s.first_poll_delay_ns >= 0,
            "every row holds its task's first poll: {t:?}"
        );
        // Its lane: the polls of the task are on it.
        let polls = read.task_polls(t.index);
        assert_eq!(polls.len() as i64, s.polls, "{t:?}");
        let sched: i64 = polls.iter().map(|p| p.scheduled_ns.max(0)).sum();
        assert_eq!(sched, s.scheduled_ns, "{t:?}");
        assert_eq!(polls[0].scheduled_ns, -1, "the first poll has none");
    }
    // The consumer was woken by the producers while the hog held the worker.
    let hog_busy = hog[0].sched.as_ref().unwrap().busy_ns;
    assert!(hog_busy >= 6_000_000);
    // Tokio's spans are no regions: no `runtime.spawn`, no `runtime.resource*`.
    let names = read.profile.region_names();
    assert!(
        names.iter().all(|n| !n.starts_with("runtime.")),
        "Tokio's spans are not regions by default: {names:?}"
    );
    // Every task is a lane of its own: its polls' task index names its row.
    let rows: Vec<i64> = read.tasks.iter().map(|t| t.index).collect();
    assert!(read
        .polls
        .iter()
        .all(|p| p.task < 0 || rows.contains(&p.task)));
    // The report's tasks box lists them, most scheduled first.
    let tasks = run.report.tasks();
    assert!(!tasks.is_empty());
    assert!(tasks
        .windows(2)
        .all(|w| w[0].scheduled_ns >= w[1].scheduled_ns));
    let (n, all) = run.report.all_tasks().unwrap();
    assert_eq!(
        n,
        read.tasks.iter().filter(|t| t.sched.is_some()).count() as u64
    );
    assert!(all.busy_ns as i64 >= hog_busy);
}

#[test]
fn with_task_regions_each_task_is_a_root_call() {
    let dir = tempfile::tempdir().unwrap();
    let (run, _) = program(dir.path(), "regions", true);
    let read = Read::open(&run.path);
    let calls = read.calls_of("runtime.spawn");
    let tasks = read.tasks.iter().filter(|t| t.sched.is_some()).count();
    assert_eq!(calls.len(), tasks, "one call per task");
    assert!(calls.iter().all(|c| c.task >= 0));
    assert!(calls.iter().all(|c| c.scheduled_ns >= 0));
}

#[test]
fn the_python_reader_reads_it_and_perfetto_parses_the_scheduled_slices() {
    let dir = tempfile::tempdir().unwrap();
    let (run, _) = program(dir.path(), "views", false);
    let path = run.path.to_str().unwrap();
    // The reference reader (scope-profiler 0.7.5).
    let check = repo_root().join("scripts/check_h5.py");
    let out = run_ok(
        &venv_program("SCOPE_PY_VENV", "python"),
        &[check.to_str().unwrap(), path],
    );
    assert!(out.contains("ok"), "{out}");
    run_ok(
        &venv_program("SCOPE_PY_VENV", "scope-profiler"),
        &["inspect", path],
    );
    // scopeprof inspect: the tasks box and the worst delays.
    let text = run_ok(&scopeprof(), &["inspect", path]);
    eprintln!("{text}");
    assert!(
        text.contains("scheduled [s]") && text.contains("hog"),
        "{text}"
    );
    assert!(text.contains("Worst scheduled delays"), "{text}");
    // The Perfetto trace: `scheduled` slices on the tasks' tracks, parsed by Perfetto's protos.
    let trace = dir.path().join("views.pftrace");
    run_ok(
        &scopeprof(),
        &["export", path, "-o", trace.to_str().unwrap()],
    );
    let facts = run_ok(
        &venv_program("SCOPEPROF_PERFETTO_VENV", "python"),
        &["-c", SCHEDULED_SLICES, trace.to_str().unwrap()],
    );
    eprintln!("{facts}");
    let (slices, on_tasks) = facts.trim().split_once(' ').unwrap();
    let slices: u64 = slices.parse().unwrap();
    assert!(slices > 0, "{facts}");
    assert_eq!(on_tasks, "all-on-task-tracks", "{facts}");
}

/// Counts the `scheduled` slices of a trace and checks that each is on a task's track (a named
/// track, not a thread's).
const SCHEDULED_SLICES: &str = r#"
import sys
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
t = pb.Trace()
t.ParseFromString(open(sys.argv[1], "rb").read())
names, thread_tracks, named_tracks = {}, set(), set()
for p in t.packet:
    if p.HasField("interned_data"):
        for n in p.interned_data.event_names:
            names[n.iid] = n.name
    if p.HasField("track_descriptor"):
        d = p.track_descriptor
        (thread_tracks if d.HasField("thread") else named_tracks).add(d.uuid)
n, ok = 0, True
for p in t.packet:
    if p.HasField("track_event") and p.track_event.type == 1:
        if names.get(p.track_event.name_iid) == "scheduled":
            n += 1
            ok &= p.track_event.track_uuid in named_tracks
print(n, "all-on-task-tracks" if ok else "some-elsewhere")
"#;

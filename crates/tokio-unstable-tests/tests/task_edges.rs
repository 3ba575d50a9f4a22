//! The edges between tasks that a profile keeps under `/scope_profiler_rs/` (spool frames 11
//! and 12): a spawned child's spawn edge names the task that spawned it, and the wake of the
//! `JoinHandle` its parent awaits is attributed to the child, which completed just then.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use scope_profiler_tokio_unstable_tests::{profile, spin, Read};
use tracing::Instrument;

#[test]
fn a_spawned_childs_spawn_edge_and_its_join_wake_land_in_the_file() {
    let dir = tempfile::tempdir().unwrap();
    // Tokio ids of the parent and the child, as they saw them.
    let ids: Arc<Mutex<(u64, u64)>> = Arc::default();
    let seen = ids.clone();
    let run = profile(
        dir.path(),
        "task_edges",
        1,
        |b| b,
        |rt, _| {
            rt.block_on(async move {
                let parent = tokio::spawn(
                    async move {
                        seen.lock().unwrap().0 = id();
                        let s = seen.clone();
                        let child = tokio::spawn(
                            async move {
                                s.lock().unwrap().1 = id();
                                spin(Duration::from_millis(5));
                            }
                            .instrument(tracing::info_span!("child")),
                        );
                        child.await.unwrap();
                    }
                    .instrument(tracing::info_span!("parent")),
                );
                parent.await.unwrap();
            })
        },
    );
    let (parent_id, child_id) = *ids.lock().unwrap();
    let read = Read::open(&run.path);
    let index = |tokio: u64| {
        read.tasks
            .iter()
            .find(|t| t.tokio_id == tokio)
            .unwrap_or_else(|| panic!("task {tokio} has a row: {:?}", read.tasks))
            .index
    };
    let (parent, child) = (index(parent_id), index(child_id));
    let spawns = read.profile.spawns().unwrap();
    let wakes = read.profile.wakes().unwrap();
    eprintln!("spawns {spawns:?}\nwakes {wakes:?}");
    // The child was spawned by the parent, in a poll of it.
    let s = spawns
        .iter()
        .find(|s| s.child_task == child)
        .expect("the child's spawn edge");
    assert_eq!(s.parent_task, Some(parent));
    // The parent was spawned from `block_on`, no task.
    let p = spawns
        .iter()
        .find(|s| s.child_task == parent)
        .expect("the parent's spawn edge");
    assert_eq!(p.parent_task, None);
    assert!(p.tick_ns <= s.tick_ns);
    // The child's spawn lies inside the parent's call.
    let call = read.calls_of("parent")[0];
    assert!(s.tick_ns >= call.start_ns && s.tick_ns <= call.start_ns + call.dur_ns);
    // The JoinHandle's wake: the parent woken by the child, after the child's 5 ms.
    let child_call = read.calls_of("child")[0];
    let child_end = child_call.start_ns + child_call.dur_ns;
    let join = wakes
        .iter()
        .filter(|w| w.woken_task == parent && w.waker_task == Some(child))
        .collect::<Vec<_>>();
    assert_eq!(join.len(), 1, "{wakes:?}");
    let w = join[0];
    assert!(
        w.tick_ns >= child_end && w.tick_ns <= call.start_ns + call.dur_ns,
        "the join wake at {} lies between the child's end {child_end} and the parent's end",
        w.tick_ns
    );
    assert!(child_call.dur_ns >= 5_000_000);
    // Every wake names a task with a row, and a thread with one.
    let threads = read.profile.threads().len() as u32;
    for w in &wakes {
        assert!(read.tasks.iter().any(|t| t.index == w.woken_task), "{w:?}");
        assert!(w.thread < threads, "{w:?}");
    }
}

/// The id of the task this runs in.
fn id() -> u64 {
    tokio::task::id().to_string().parse().unwrap()
}

/// A live spool's open-calls frame says where an open call's task stands: a task waiting on
/// a channel is idle, and the task that reads the spool is running.
#[test]
fn the_open_calls_frame_gives_each_open_calls_task_state() {
    let dir = tempfile::tempdir().unwrap();
    let spool = dir.path().join(".open_states.h5.spool");
    let seen: Arc<Mutex<Option<scope_profiler::read::OpenCalls>>> = Arc::default();
    let stuck_id: Arc<Mutex<u64>> = Arc::default();
    let (s2, id2) = (seen.clone(), stuck_id.clone());
    profile(
        dir.path(),
        "open_states",
        1,
        |b| b.spool_sync_interval(Duration::from_millis(20)),
        |rt, _| {
            rt.block_on(async move {
                let (tx, rx) = tokio::sync::oneshot::channel::<()>();
                let stuck = tokio::spawn(
                    async move {
                        *id2.lock().unwrap() = id();
                        rx.await.unwrap();
                    }
                    .instrument(tracing::info_span!("stuck")),
                );
                let looker = tokio::spawn(
                    async move {
                        // Many flush intervals (20 ms), in this task's poll.
                        spin(Duration::from_millis(300));
                        *s2.lock().unwrap() = scope_profiler::read::spool_open_calls(&spool)
                            .expect("read the live spool");
                    }
                    .instrument(tracing::info_span!("looker")),
                );
                looker.await.unwrap();
                tx.send(()).unwrap();
                stuck.await.unwrap();
            })
        },
    );
    let open = seen.lock().unwrap().clone().expect("an open-calls frame");
    eprintln!("{open:?}");
    let stuck = open
        .calls
        .iter()
        .find(|c| c.region == "stuck")
        .expect("the stuck call is open");
    assert_eq!(stuck.tokio_id, Some(*stuck_id.lock().unwrap()));
    assert_eq!(stuck.state, scope_profiler::read::TaskState::Idle);
    assert!(open.age_ns(stuck) > 0);
    let looker = open.calls.iter().find(|c| c.region == "looker").unwrap();
    assert_eq!(looker.state, scope_profiler::read::TaskState::Running);
}

//! The edge cases of the idle/scheduled split (defined in `docs/latency.md`, "Edge cases"),
//! each with real Tokio on one worker:
//! - wakes from another thread count like any other, by reference (`wake_by_ref`) and by
//!   value (`wake`) alike;
//! - a wake from a thread that does not report to the profiler is not seen: that suspension
//!   is idle throughout, and counted (`tokio_unwoken_suspensions`);
//! - a wake during a poll (the task's own `cx.waker().wake_by_ref()`, or another thread's)
//!   counts from the poll's end: idle 0, scheduled from the end of that poll;
//! - `yield_now` (a self-wake Tokio defers past the poll) is an ordinary wake;
//! - a wake of a task that has ended is counted (`tokio_wakes_of_ended_tasks`) and changes no
//!   task;
//! - Tokio's resource spans are no regions unless asked for, and counted
//!   (`tokio_hidden_calls`).

use std::future::poll_fn;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use scope_profiler::read::{Poll as FilePoll, TaskWaits};
use scope_profiler_tokio_unstable_tests::{ms, profile, spin, tokio_metadata, Read};
use tokio::task::JoinHandle;

type Slot = Arc<Mutex<Option<Waker>>>;
type When = Arc<Mutex<Option<Instant>>>;

fn at(w: &When) -> Instant {
    w.lock().unwrap().expect("the program noted this time")
}

fn now(w: &When) {
    *w.lock().unwrap() = Some(Instant::now());
}

/// Spawns a task named `name` that parks once (its waker in `slot`, the time in `parked`) and
/// completes when polled again.
fn park_once(name: &str, slot: Slot, parked: When) -> JoinHandle<()> {
    let mut first = true;
    tokio::task::Builder::new()
        .name(name)
        .spawn(poll_fn(move |cx| {
            if std::mem::take(&mut first) {
                *slot.lock().unwrap() = Some(cx.waker().clone());
                now(&parked);
                Poll::Pending
            } else {
                Poll::Ready(())
            }
        }))
        .unwrap()
}

/// The one row of task `name` with Tokio's data, and its polls.
fn task(read: &Read, name: &str) -> (TaskWaits, Vec<FilePoll>) {
    let rows: Vec<_> = read
        .tasks
        .iter()
        .filter(|t| t.name == name && t.sched.is_some())
        .collect();
    assert_eq!(rows.len(), 1, "one row for {name}: {:?}", read.tasks);
    let w = rows[0].sched.clone().unwrap();
    eprintln!(
        "{name}: polls {} busy {:.3} ms idle {:.3} ms scheduled {:.3} ms",
        w.polls,
        ms(w.busy_ns),
        ms(w.idle_ns),
        ms(w.scheduled_ns)
    );
    (w, read.task_polls(rows[0].index))
}

/// The gap between two polls (ns): the suspension, idle + scheduled.
fn gap(polls: &[FilePoll]) -> i64 {
    polls[1].start_ns - (polls[0].start_ns + polls[0].dur_ns)
}

fn near(what: &str, ours: i64, seen: i64, within_ns: i64) {
    assert!(
        (ours - seen).abs() <= within_ns,
        "{what}: {} ms in the file, {} ms expected",
        ms(ours),
        ms(seen)
    );
}

#[test]
fn wakes_from_other_threads_by_reference_and_by_value_count_alike() {
    const NAMES: [&str; 3] = ["by_ref", "by_value", "unseen"];
    let dir = tempfile::tempdir().unwrap();
    let parked: Vec<When> = (0..3).map(|_| When::default()).collect();
    let woke: Vec<When> = (0..3).map(|_| When::default()).collect();
    let (p, w) = (parked.clone(), woke.clone());
    let run = profile(
        dir.path(),
        "threads",
        1,
        |b| b,
        |rt, dispatch| {
            rt.block_on(async move {
                let slots: Vec<Slot> = (0..3).map(|_| Slot::default()).collect();
                let handles: Vec<_> = (0..3)
                    .map(|i| park_once(NAMES[i], slots[i].clone(), p[i].clone()))
                    .collect();
                let d = dispatch.clone();
                let waking = std::thread::spawn(move || {
                    let mut wakers: Vec<Waker> = loop {
                        let got: Option<Vec<Waker>> =
                            slots.iter().map(|s| s.lock().unwrap().take()).collect();
                        match got {
                            Some(v) => break v,
                            None => std::thread::sleep(Duration::from_millis(1)),
                        }
                    };
                    std::thread::sleep(Duration::from_millis(10));
                    // This thread reports to the profiler.
                    tracing::dispatcher::with_default(&d, || {
                        now(&w[0]);
                        wakers[0].wake_by_ref();
                        now(&w[1]);
                        wakers.remove(1).wake();
                    });
                    // A thread that does not (no dispatcher of its own, no global one).
                    let (unseen, w2) = (wakers.pop().unwrap(), w[2].clone());
                    std::thread::spawn(move || {
                        now(&w2);
                        unseen.wake();
                    })
                    .join()
                    .unwrap();
                });
                for h in handles {
                    h.await.unwrap();
                }
                waking.join().unwrap();
            })
        },
    );
    let read = Read::open(&run.path);
    for i in 0..2 {
        let (t, polls) = task(&read, NAMES[i]);
        assert_eq!(t.polls, 2, "{:?}", polls);
        let idle_seen = at(&woke[i]).duration_since(at(&parked[i])).as_nanos() as i64;
        near(NAMES[i], t.idle_ns, idle_seen, 1_000_000);
        assert!(t.idle_ns >= 10_000_000);
        assert_eq!(polls[0].scheduled_ns, -1, "the first poll has none");
        assert_eq!(polls[1].scheduled_ns, t.scheduled_ns);
        near(
            "idle + scheduled",
            t.idle_ns + t.scheduled_ns,
            gap(&polls),
            1_000,
        );
    }
    // The unseen wake: idle throughout, and counted.
    let (t, polls) = task(&read, NAMES[2]);
    assert_eq!((t.polls, t.scheduled_ns), (2, 0));
    assert_eq!(polls[1].scheduled_ns, 0);
    near("unseen: idle", t.idle_ns, gap(&polls), 1_000);
    assert!(t.idle_ns >= 10_000_000);
    let meta = tokio_metadata(&run.path);
    assert_eq!(meta["tokio_unwoken_suspensions"], 1, "{meta:?}");
}

#[test]
fn a_wake_during_a_poll_counts_from_the_polls_end() {
    let dir = tempfile::tempdir().unwrap();
    let (end1, resumed) = (When::default(), When::default());
    let (e, r) = (end1.clone(), resumed.clone());
    let run = profile(
        dir.path(),
        "in_poll",
        1,
        |b| b,
        |rt, dispatch| {
            rt.block_on(async move {
                // The task's own wake during its poll; a task it spawns (Tokio runs it first,
                // from the worker's LIFO slot) holds the worker for 5 ms meanwhile.
                let mut first = true;
                let self_wake = tokio::task::Builder::new()
                    .name("self_wake")
                    .spawn(poll_fn(move |cx| {
                        if std::mem::take(&mut first) {
                            cx.waker().wake_by_ref();
                            tokio::task::Builder::new()
                                .name("hog")
                                .spawn(async { spin(Duration::from_millis(5)) })
                                .unwrap();
                            now(&e);
                            Poll::Pending
                        } else {
                            now(&r);
                            Poll::Ready(())
                        }
                    }))
                    .unwrap();
                self_wake.await.unwrap();
                // Another thread's wake while the task is in its poll, 3 ms before its end.
                let (tx, rx) = std::sync::mpsc::channel::<Waker>();
                let woken = Arc::new(AtomicBool::new(false));
                let w = woken.clone();
                let d = dispatch.clone();
                let waking = std::thread::spawn(move || {
                    let waker = rx.recv().unwrap();
                    tracing::dispatcher::with_default(&d, || waker.wake_by_ref());
                    w.store(true, SeqCst);
                });
                let mut first = true;
                tokio::task::Builder::new()
                    .name("woken_in_poll")
                    .spawn(poll_fn(move |cx| {
                        if !std::mem::take(&mut first) {
                            return Poll::Ready(());
                        }
                        tx.send(cx.waker().clone()).unwrap();
                        while !woken.load(SeqCst) {
                            std::hint::spin_loop();
                        }
                        spin(Duration::from_millis(3));
                        Poll::Pending
                    }))
                    .unwrap()
                    .await
                    .unwrap();
                waking.join().unwrap();
                // `yield_now`: Tokio defers the task's wake past its poll.
                tokio::task::Builder::new()
                    .name("yielder")
                    .spawn(async {
                        spin(Duration::from_millis(1));
                        tokio::task::yield_now().await;
                    })
                    .unwrap()
                    .await
                    .unwrap();
            })
        },
    );
    let read = Read::open(&run.path);
    // Self-wake: idle 0, scheduled from the poll's end to the next poll's start.
    let (t, polls) = task(&read, "self_wake");
    assert_eq!((t.polls, t.idle_ns), (2, 0), "{polls:?}");
    let seen = at(&resumed).duration_since(at(&end1)).as_nanos() as i64;
    near("self_wake: scheduled", t.scheduled_ns, seen, 1_000_000);
    near(
        "self_wake: scheduled is the gap",
        t.scheduled_ns,
        gap(&polls),
        1_000,
    );
    // Another thread's wake during the poll: counted from the poll's end, not from the wake
    // (3 ms earlier).
    let (t, polls) = task(&read, "woken_in_poll");
    assert_eq!((t.polls, t.idle_ns), (2, 0), "{polls:?}");
    assert!(polls[0].dur_ns >= 3_000_000, "{polls:?}");
    near(
        "woken_in_poll: scheduled is the gap",
        t.scheduled_ns,
        gap(&polls),
        1_000,
    );
    assert!(t.scheduled_ns < 3_000_000, "counted from the poll's end");
    // `yield_now`: an ordinary wake (woken, so no unwoken suspension in this run).
    let (t, polls) = task(&read, "yielder");
    assert_eq!(t.polls, 2, "{polls:?}");
    near(
        "yielder: idle + scheduled",
        t.idle_ns + t.scheduled_ns,
        gap(&polls),
        1_000,
    );
    assert_eq!(polls[1].scheduled_ns, t.scheduled_ns);
    let meta = tokio_metadata(&run.path);
    assert_eq!(meta["tokio_unwoken_suspensions"], 0, "{meta:?}");
}

#[test]
fn a_wake_of_a_task_that_has_ended_is_counted_and_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let run = profile(
        dir.path(),
        "ended",
        1,
        |b| b,
        |rt, _| {
            rt.block_on(async {
                let slot = Slot::default();
                let s = slot.clone();
                tokio::task::Builder::new()
                    .name("ended")
                    .spawn(poll_fn(move |cx| {
                        *s.lock().unwrap() = Some(cx.waker().clone());
                        Poll::Ready(())
                    }))
                    .unwrap()
                    .await
                    .unwrap();
                let waker = slot.lock().unwrap().take().unwrap();
                for _ in 0..3 {
                    waker.wake_by_ref();
                }
            })
        },
    );
    let read = Read::open(&run.path);
    let (t, _) = task(&read, "ended");
    assert_eq!((t.polls, t.idle_ns, t.scheduled_ns), (1, 0, 0));
    let meta = tokio_metadata(&run.path);
    assert_eq!(meta["tokio_wakes_of_ended_tasks"], 3, "{meta:?}");
    assert_eq!(meta["tokio_extra_wakes"], 0, "{meta:?}");
}

#[test]
fn resource_spans_are_counted_not_regions_unless_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let sleeper = |rt: &tokio::runtime::Runtime, _: &tracing::Dispatch| {
        rt.block_on(async {
            tokio::spawn(async {
                for _ in 0..2 {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            })
            .await
            .unwrap()
        })
    };
    let is_resource = |n: &String| n.starts_with("runtime.resource");
    let plain = profile(dir.path(), "plain", 1, |b| b, sleeper);
    let read = Read::open(&plain.path);
    assert!(!read.profile.region_names().iter().any(is_resource));
    let hidden = tokio_metadata(&plain.path)["tokio_hidden_calls"];
    assert!(hidden >= 2, "the timers' spans are counted: {hidden}");
    let asked = profile(dir.path(), "asked", 1, |b| b.tokio_resources(true), sleeper);
    let read = Read::open(&asked.path);
    let calls = read.calls.iter().filter(|(n, _)| is_resource(n)).count();
    assert!(calls >= 2, "{:?}", read.profile.region_names());
    let hidden_then = tokio_metadata(&asked.path)["tokio_hidden_calls"];
    assert_eq!(
        hidden - hidden_then,
        calls as i64,
        "what was hidden is written"
    );
}

#[test]
fn spawn_blocking_tasks_are_tasks_and_the_runtimes_own_threads_are_not() {
    let dir = tempfile::tempdir().unwrap();
    let line = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let l = line.clone();
    let run = profile(
        dir.path(),
        "blocking",
        1,
        |b| b,
        |rt, _| {
            rt.block_on(async move {
                #[rustfmt::skip]
                let (at, h) = (line!(), tokio::task::spawn_blocking(|| spin(Duration::from_millis(3))));
                l.store(at, SeqCst);
                h.await.unwrap();
            })
        },
    );
    let read = Read::open(&run.path);
    let rows = read.spawned_at(file!(), line.load(SeqCst));
    assert_eq!(rows.len(), 1, "{:?}", read.tasks);
    let t = rows[0].sched.clone().unwrap();
    assert_eq!(t.polls, 1);
    assert!(t.busy_ns >= 3_000_000, "{t:?}");
    assert!(t.first_poll_delay_ns >= 0);
    // The multi-thread runtime runs its worker threads as blocking tasks: no rows of theirs.
    let runtime = |t: &&scope_profiler::read::TaskInfo| {
        t.sched
            .as_ref()
            .is_some_and(|s| s.spawn_location.contains("runtime/scheduler/"))
    };
    assert_eq!(
        read.tasks.iter().filter(runtime).count(),
        0,
        "{:?}",
        read.tasks
    );
    let names = read.profile.region_names();
    assert!(names.iter().all(|n| n != "runtime.spawn"), "{names:?}");
}

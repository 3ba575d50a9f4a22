//! Tokio's own instrumentation through the whole pipeline, in the main build: spans and events
//! shaped exactly as Tokio emits them with `--cfg tokio_unstable` (names, targets, fields),
//! written by the test itself, since this build's Tokio has no such flag; and, with the real
//! Tokio of this build, that a program without the instrumentation gets the same file as
//! before. The real instrumentation is tested in `crates/tokio-unstable-tests`
//! (`scripts/tokio-unstable-tests.sh`). Both front ends: `SCOPE_FRONT_END=subscriber` runs it
//! against `ScopeSubscriber` (see `tests/common`).

mod common;

use std::time::Duration;

use scope_profiler::ScopeLayer;

/// A task's spawn span as Tokio makes it (`tokio/src/util/trace.rs`).
fn spawn_span(name: &str, line: u32) -> tracing::Span {
    tracing::trace_span!(target: "tokio::task", parent: None, "runtime.spawn",
        kind = %"task", task.name = %name, task.id = 1u64, original_size.bytes = Option::<usize>::None,
        size.bytes = 64usize, loc.file = "src/server.rs", loc.line = line, loc.col = 9u32)
}

/// A waker event as Tokio emits it (`tokio/src/runtime/task/waker.rs`).
fn waker(op: &'static str, span: &tracing::Span) {
    let id = span.id().expect("enabled").into_u64();
    tracing::trace!(target: "tokio::task::waker", op = op, task.id = id);
}

#[test]
fn tokio_shaped_spans_make_task_rows_with_idle_and_scheduled_time() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokio.h5");
    let (d, guard) = common::dispatch(ScopeLayer::builder().output(&path).track_async(true));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    tracing::dispatcher::with_default(&d, || {
        rt.block_on(async {
            tokio::spawn(async {
                // Inside a real Tokio task (its id is the lane's), driven by hand: spawn, a
                // poll, 20 ms idle, a wake (and a clone, which is no wake), 5 ms scheduled, a
                // poll that calls an instrumented span, and the drop of the future.
                let task = spawn_span("", 42);
                std::thread::sleep(Duration::from_millis(2));
                task.in_scope(|| std::thread::sleep(Duration::from_millis(1)));
                std::thread::sleep(Duration::from_millis(20));
                waker("waker.wake_by_ref", &task);
                waker("waker.clone", &task);
                std::thread::sleep(Duration::from_millis(5));
                task.in_scope(|| tracing::info_span!("handler").in_scope(|| {}));
                task.in_scope(|| {}); // the drop
            })
            .await
            .unwrap();
            tokio::spawn(async {
                let named = spawn_span("worker", 43);
                named.in_scope(|| {});
                named.in_scope(|| {});
            })
            .await
            .unwrap();
        })
    });
    let report = guard.finalize().unwrap();
    assert!(report.region("runtime.spawn").is_none(), "no region");
    assert_eq!(report.region("handler").unwrap().calls, 1);
    let tasks = report.tasks();
    assert_eq!(tasks.len(), 2, "{tasks:?}");
    let t = tasks
        .iter()
        .find(|t| t.name.starts_with("task src/server.rs:42 #"))
        .unwrap();
    assert_eq!(t.spawn_location, "src/server.rs:42:9");
    assert_eq!(t.polls, 2, "the last enter was the drop");
    let ms = |ns: u64| ns as f64 / 1e6;
    assert!(
        (19.0..40.0).contains(&ms(t.idle_ns)),
        "idle {} ms",
        ms(t.idle_ns)
    );
    assert!(
        (4.5..20.0).contains(&ms(t.scheduled_ns)),
        "scheduled {} ms",
        ms(t.scheduled_ns)
    );
    let delay = t.first_poll_delay_ns.unwrap();
    assert!(
        (1.5..15.0).contains(&ms(delay)),
        "first poll after {} ms",
        ms(delay)
    );
    assert!(tasks.iter().any(|t| t.name == "worker"));
    // The file.
    let f = hdf5::File::open(&path).unwrap();
    let names = common::read_strings(&f, "task_table/name");
    assert!(names.contains(&"worker".to_owned()), "{names:?}");
    let polls = common::read::<i64>(&f, "task_table/polls");
    assert_eq!(polls.len(), names.len());
    for col in ["busy_ns", "idle_ns", "scheduled_ns", "first_poll_delay_ns"] {
        assert_eq!(
            common::read::<i64>(&f, &format!("task_table/{col}")).len(),
            names.len()
        );
    }
    let locations = common::read_strings(&f, "task_table/spawn_location");
    assert!(locations.contains(&"src/server.rs:43:9".to_owned()));
    let sched = common::read::<i64>(&f, "scope_profiler_rs/polls/scheduled_ns");
    assert_eq!(
        sched.iter().filter(|&&s| s == -1).count(),
        3,
        "two tasks' first polls and the handler's poll: {sched:?}"
    );
    assert!(sched.iter().any(|&s| s >= 4_500_000));
    let call_sched = common::read::<i64>(&f, "scope_profiler_rs/call_scheduled_ns");
    let events = common::read::<i64>(&f, "events/durations");
    assert_eq!(
        call_sched.len(),
        events.len(),
        "one value per row of events"
    );
    let meta = f.group("metadata").unwrap();
    let attr = |k: &str| meta.attr(k).unwrap().read_scalar::<i64>().unwrap();
    assert_eq!(attr("tokio_tasks"), 2);
    assert_eq!(attr("tokio_wakes"), 1, "a clone is no wake");
}

#[test]
fn without_tokio_unstable_the_file_is_as_before() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plain.h5");
    let (d, guard) = common::dispatch(ScopeLayer::builder().output(&path).track_async(true));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    tracing::dispatcher::with_default(&d, || {
        rt.block_on(async {
            use tracing::Instrument;
            let h = tokio::spawn(
                async {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    tokio::task::yield_now().await;
                }
                .instrument(tracing::info_span!("handler")),
            );
            h.await.unwrap();
        })
    });
    let report = guard.finalize().unwrap();
    assert!(report.tasks().is_empty() && report.all_tasks().is_none());
    let f = hdf5::File::open(&path).unwrap();
    let names = common::read_strings(&f, "task_table/name");
    assert!(names.iter().all(|n| n.starts_with("Task-")), "{names:?}");
    for gone in [
        "task_table/polls",
        "task_table/spawn_location",
        "scope_profiler_rs/polls/scheduled_ns",
        "scope_profiler_rs/call_scheduled_ns",
    ] {
        assert!(f.dataset(gone).is_err(), "{gone} must not exist");
    }
    assert!(f.dataset("scope_profiler_rs/polls/start_ns").is_ok());
    let meta = f.group("metadata").unwrap();
    assert!(meta.attr("tokio_tasks").is_err());
}

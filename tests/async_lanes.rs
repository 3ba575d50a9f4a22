//! Threads, Tokio tasks, await-suspended time and call nesting, on real runtimes, checked in
//! the report, in the written file and with the Python reader.

mod common;

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use common::{dispatch, read, read_strings, region_rows, runtime};
use scope_profiler::ScopeLayer;
use tracing::{info_span, instrument};

#[instrument]
async fn job(i: u64) -> u64 {
    let mut acc = i;
    for _ in 0..5 {
        // A yield is always one suspension (a 2 ms sleep may already be over when it is
        // first polled on a loaded machine), so a job has at least 6 polls.
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(2)).await;
        acc = info_span!("work").in_scope(|| (0..2_000u64).fold(acc, |a, x| a.wrapping_add(x * x)));
    }
    acc
}

#[test]
fn four_hundred_tasks_on_four_workers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.h5");
    let (d, guard) = dispatch(ScopeLayer::builder().output(&path).track_async(true));
    let rt = runtime(&d, 4);
    tracing::dispatcher::with_default(&d, || {
        rt.block_on(async {
            let handles: Vec<_> = (0..400).map(|i| tokio::spawn(job(i))).collect();
            for h in handles {
                h.await.unwrap();
            }
        })
    });
    drop(rt);
    let report = guard.finalize().unwrap();
    assert_eq!(report.region("job").unwrap().calls, 400);
    assert_eq!(report.region("work").unwrap().calls, 2_000);
    assert_eq!(report.dropped(), 0);

    let f = hdf5::File::open(&path).unwrap();
    let jobs = region_rows(&f, "job");
    let task_ids: Vec<i64> = read(&f, "events/task_ids");
    let await_ns: Vec<i64> = read(&f, "events/await_ns");
    let durations: Vec<i64> = read(&f, "events/durations");
    let distinct: HashSet<i64> = task_ids[jobs.clone()].iter().copied().collect();
    assert_eq!(distinct.len(), 400, "one task per job");
    assert!(distinct.iter().all(|&t| t >= 0));
    for k in jobs.clone() {
        assert!(
            await_ns[k] >= 10_000_000,
            "call {k}: await {} < 10 ms",
            await_ns[k]
        );
        assert!(
            await_ns[k] <= durations[k],
            "call {k}: await exceeds duration"
        );
    }
    // Every nested call runs inside its job's task lane and has the job as parent.
    let works = region_rows(&f, "work");
    let call_ids: Vec<i64> = read(&f, "events/call_ids");
    let parent_ids: Vec<i64> = read(&f, "events/parent_ids");
    let job_ids: HashMap<i64, i64> = jobs.clone().map(|k| (call_ids[k], task_ids[k])).collect();
    for k in works {
        let parent_task = job_ids
            .get(&parent_ids[k])
            .expect("a work call's parent is a job");
        assert_eq!(*parent_task, task_ids[k]);
        assert!(parent_ids[k] < call_ids[k]);
    }
    // Polls: at least 6 per job (first poll + one per sleep), in our own group.
    let names = read_strings(&f, "scope_profiler_rs/region_names");
    let job_region = names.iter().position(|n| n == "job").unwrap() as u32;
    let poll_regions: Vec<u32> = read(&f, "scope_profiler_rs/polls/region_ids");
    let poll_tasks: Vec<i64> = read(&f, "scope_profiler_rs/polls/task_ids");
    let mut polls: HashMap<i64, usize> = HashMap::new();
    for (r, t) in poll_regions.iter().zip(&poll_tasks) {
        if *r == job_region {
            *polls.entry(*t).or_default() += 1;
        }
    }
    assert_eq!(polls.len(), 400);
    assert!(
        polls.values().all(|&n| n >= 6),
        "{:?}",
        polls.values().min()
    );
    // Thread table: the Tokio workers are there; task table: one row per task.
    let thread_names = read_strings(&f, "thread_table/name");
    // Tokio names its workers `tokio-runtime-worker` (older) or `tokio-rt-worker` (1.5x).
    assert!(
        thread_names
            .iter()
            .filter(|n| n.starts_with("tokio-r"))
            .count()
            >= 2,
        "{thread_names:?}"
    );
    // Workers share Tokio's name: numbered from the second on, so every name is distinct.
    let distinct: std::collections::BTreeSet<&String> = thread_names.iter().collect();
    assert_eq!(distinct.len(), thread_names.len(), "{thread_names:?}");
    assert!(
        thread_names.iter().any(|n| n.ends_with(" #2")),
        "{thread_names:?}"
    );
    let task_index: Vec<i64> = read(&f, "task_table/index");
    assert_eq!(task_index.len(), 400);
    let steps: Vec<i64> = read(&f, "task_table/steps");
    assert!(steps.iter().all(|&s| s >= 6));

    // The Python reader accepts the file, nests it (no fallback to a flat table) and shows the
    // per-thread rows.
    let out = common::py("scope-profiler", &["inspect", path.to_str().unwrap()]);
    assert!(out.contains("└─ work"), "nested under job:\n{out}");
    let script = format!(
        "import scope_profiler as sp\n\
         r = sp.read_h5({:?})\n\
         rows = r.thread_summary(0)\n\
         print(rows)\n\
         assert 'tokio-r' in str(rows), rows\n\
         r.call_graph()\n\
         print('ok')\n",
        path.to_str().unwrap()
    );
    let out = common::py("python", &["-c", &script]);
    assert!(out.trim_end().ends_with("ok"), "{out}");
}

#[test]
fn blocking_pools_current_thread_runtimes_and_plain_threads() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mixed.h5");
    let (d, guard) = dispatch(ScopeLayer::builder().output(&path).track_async(true));
    let rt = runtime(&d, 2);
    tracing::dispatcher::with_default(&d, || {
        rt.block_on(async {
            tokio::task::spawn_blocking(|| info_span!("blocking").in_scope(|| ()))
                .await
                .unwrap();
            tokio::spawn(async {
                tokio::task::block_in_place(|| info_span!("in_place").in_scope(|| ()));
            })
            .await
            .unwrap();
        });
        let ct = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        ct.block_on(async {
            tokio::spawn(job(1)).await.unwrap();
        });
    });
    let named = {
        let d = d.clone();
        std::thread::Builder::new()
            .name("plain-worker".into())
            .spawn(move || {
                tracing::dispatcher::with_default(&d, || info_span!("plain").in_scope(|| ()))
            })
            .unwrap()
    };
    named.join().unwrap();
    // A span created here, entered and closed on another thread.
    let span = tracing::dispatcher::with_default(&d, || info_span!("moved"));
    {
        let d = d.clone();
        std::thread::spawn(move || {
            tracing::dispatcher::with_default(&d, || {
                span.in_scope(|| ());
                drop(span);
            })
        })
        .join()
        .unwrap();
    }
    drop(rt);
    let r = guard.finalize().unwrap();
    for name in ["blocking", "in_place", "job", "plain", "moved"] {
        assert_eq!(r.region(name).map(|s| s.calls), Some(1), "{name}");
    }
    assert_eq!(r.region("work").unwrap().calls, 5);
    assert_eq!(r.dropped(), 0);
    let f = hdf5::File::open(&path).unwrap();
    let names = read_strings(&f, "thread_table/name");
    assert!(names.iter().any(|n| n == "plain-worker"), "{names:?}");
    let end_ns: Vec<i64> = read(&f, "thread_table/end_ns");
    let plain = names.iter().position(|n| n == "plain-worker").unwrap();
    assert!(end_ns[plain] > 0, "an exited thread has its end time");
    let cpu: Vec<i64> = read(&f, "thread_table/cpu_ns");
    assert!(cpu.iter().all(|&c| c >= 0));
    common::py("scope-profiler", &["inspect", path.to_str().unwrap()]);
}

#[test]
fn a_span_never_closed_is_in_flight_and_reported_later() {
    let (d, guard) = dispatch(ScopeLayer::builder().no_output().track_threads(true));
    let open = tracing::dispatcher::with_default(&d, || {
        let s = info_span!("never_closed");
        s.in_scope(|| ());
        s
    });
    let r = guard.finalize().unwrap();
    assert!(r.region("never_closed").is_none());
    assert_eq!(r.in_flight(), 1);
    drop(open);
    let r = guard.finalize().unwrap();
    assert_eq!(r.region("never_closed").unwrap().calls, 1);
}

fn deep(n: u32) {
    let _s = info_span!("deep").entered();
    if n > 0 {
        deep(n - 1);
    }
}

#[test]
fn ten_thousand_deep_recursion() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("deep.h5");
    let (d, guard) = dispatch(ScopeLayer::builder().output(&path).track_threads(true));
    // Debug builds need a large stack for 10 000 frames with spans.
    let d2 = d.clone();
    std::thread::Builder::new()
        .stack_size(512 << 20)
        .spawn(move || tracing::dispatcher::with_default(&d2, || deep(9_999)))
        .unwrap()
        .join()
        .unwrap();
    let r = guard.finalize().unwrap();
    assert_eq!(r.region("deep").unwrap().calls, 10_000);
    let f = hdf5::File::open(&path).unwrap();
    let rows = region_rows(&f, "deep");
    let parents: Vec<i64> = read(&f, "events/parent_ids");
    let ids: Vec<i64> = read(&f, "events/call_ids");
    let deep_ids: HashSet<i64> = rows.clone().map(|k| ids[k]).collect();
    // Every call but the outermost has a `deep` parent (the outermost one's parent is the
    // session row, which spans the phase on this thread's lane).
    let outermost = rows
        .clone()
        .filter(|&k| !deep_ids.contains(&parents[k]))
        .count();
    assert_eq!(outermost, 1, "one chain of 10 000 nested calls");
    common::py("scope-profiler", &["inspect", path.to_str().unwrap()]);
}

#[test]
fn a_one_millisecond_busy_loop_measures_one_millisecond() {
    let (d, guard) = dispatch(ScopeLayer::builder().no_output());
    let (tx, rx) = std::sync::mpsc::channel();
    tracing::dispatcher::with_default(&d, || {
        for _ in 0..21 {
            let _s = info_span!("spin").entered();
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_millis(1) {
                std::hint::spin_loop();
            }
            tx.send(t0.elapsed()).unwrap();
        }
    });
    let r = guard.finalize().unwrap();
    let s = r.region("spin").unwrap();
    assert_eq!(s.calls, 21);
    let mut measured: Vec<f64> = rx.try_iter().map(|d| d.as_nanos() as f64).collect();
    measured.sort_by(f64::total_cmp);
    let loop_median = measured[10];
    // The region's mean may include a preemption; its minimum and mean bracket the truth.
    assert!(s.min_ns as f64 >= 0.99 * 1e6, "{s:?}");
    assert!(
        (s.min_ns as f64 - measured[0]).abs() <= 0.01 * 1e6,
        "shortest region {} ns vs shortest loop {} ns",
        s.min_ns,
        measured[0]
    );
    assert!((loop_median - 1e6).abs() < 0.5e6);
}

#[test]
fn await_time_of_ten_five_millisecond_sleeps() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sleeper.h5");
    let (d, guard) = dispatch(ScopeLayer::builder().output(&path).track_async(true));
    let rt = runtime(&d, 2);
    let slept = tracing::dispatcher::with_default(&d, || {
        rt.block_on(async {
            tokio::spawn(
                async {
                    let mut slept = Duration::ZERO;
                    for _ in 0..10 {
                        let t = Instant::now();
                        tokio::time::sleep(Duration::from_millis(5)).await;
                        slept += t.elapsed();
                    }
                    slept
                }
                .instrument_span(),
            )
            .await
            .unwrap()
        })
    });
    drop(rt);
    let r = guard.finalize().unwrap();
    assert_eq!(r.region("sleeper").unwrap().calls, 1);
    let f = hdf5::File::open(&path).unwrap();
    let rows = region_rows(&f, "sleeper");
    let await_ns = read::<i64>(&f, "events/await_ns")[rows.start] as f64;
    let slept_ns = slept.as_nanos() as f64;
    assert!(slept_ns >= 50e6);
    // Tokio's timer rounds each 5 ms sleep up to its next tick, so compare with the time the
    // task actually spent in `.await`, measured inside it.
    assert!(
        (await_ns - slept_ns).abs() < 2e6,
        "await {await_ns} ns vs {slept_ns} ns asleep"
    );
}

trait InstrumentSpan: Sized {
    fn instrument_span(self) -> tracing::instrument::Instrumented<Self>;
}
impl<F: std::future::Future> InstrumentSpan for F {
    fn instrument_span(self) -> tracing::instrument::Instrumented<Self> {
        tracing::Instrument::instrument(self, info_span!("sleeper"))
    }
}

#[instrument]
async fn request(k: u64) -> u64 {
    tokio::task::yield_now().await;
    k
}

#[instrument]
async fn other(k: u64) -> u64 {
    k
}

/// `n` short tasks (one span each), at most 500 alive at once; with `mixed`, every third
/// task's root region is `other` instead of `request`.
fn many_tasks(path: &std::path::Path, n: u64, mixed: bool) {
    let (d, guard) = dispatch(ScopeLayer::builder().output(path).track_async(true));
    let rt = runtime(&d, 2);
    tracing::dispatcher::with_default(&d, || {
        rt.block_on(async {
            for batch in 0..n / 500 {
                let hs: Vec<_> = (batch * 500..(batch + 1) * 500)
                    .map(|k| {
                        if mixed && k % 3 == 0 {
                            tokio::spawn(other(k))
                        } else {
                            tokio::spawn(request(k))
                        }
                    })
                    .collect();
                for h in hs {
                    h.await.unwrap();
                }
            }
        })
    });
    drop(rt);
    let report = guard.finalize().unwrap();
    assert_eq!(report.dropped(), 0);
}

#[test]
fn task_tables_of_thousands_of_rows_read_the_same_in_every_reader() {
    // Above 1024 rows, a string column whose values are all equal is written as a fill value
    // (no string per row): `kind` always, `coro_name` when every task has the same root. Both
    // shapes, checked with the hdf5 crate and the Python reader.
    let dir = tempfile::tempdir().unwrap();
    for mixed in [false, true] {
        let path = dir.path().join(format!("tasks-{mixed}.h5"));
        many_tasks(&path, 3_000, mixed);
        let f = hdf5::File::open(&path).unwrap();
        let kind = read_strings(&f, "task_table/kind");
        let name = read_strings(&f, "task_table/name");
        let coro = read_strings(&f, "task_table/coro_name");
        let tokio_id: Vec<u64> = read(&f, "task_table/tokio_id");
        let index: Vec<i64> = read(&f, "task_table/index");
        assert_eq!(kind.len(), 3_000, "one row per task");
        // The fill-value form is what these shapes take (chunked, nothing written).
        let chunked = |c: &str| f.dataset(c).unwrap().is_chunked();
        assert!(chunked("task_table/kind"));
        assert_eq!(chunked("task_table/coro_name"), !mixed);
        assert!(
            !chunked("task_table/name"),
            "all different: written row by row"
        );
        assert!(kind.iter().all(|k| k == "task"), "kind");
        assert_eq!(
            index,
            (0..3_000).collect::<Vec<i64>>(),
            "rows in index order"
        );
        for (n, id) in name.iter().zip(&tokio_id) {
            assert_eq!(n, &format!("Task-{id}"));
        }
        let others = coro.iter().filter(|c| *c == "other").count();
        let requests = coro.iter().filter(|c| *c == "request").count();
        assert_eq!(
            (others, requests),
            if mixed { (1_000, 2_000) } else { (0, 3_000) }
        );
        // The root region of each row is the region of that task's call.
        let task_ids: Vec<i64> = read(&f, "events/task_ids");
        for region in ["request", "other"] {
            let Some(rows) = (mixed || region == "request").then(|| region_rows(&f, region)) else {
                continue;
            };
            for k in rows {
                assert_eq!(coro[task_ids[k] as usize], region, "call {k}");
            }
        }
        // This crate's reader (which opens without HDF5's file lock: close ours first).
        drop(f);
        let p = scope_profiler::read::Profile::open(&path).unwrap();
        assert_eq!(p.tasks().len(), 3_000);
        let roots = p.tasks().iter().filter(|t| t.root == "request").count();
        assert_eq!(roots, requests, "roots read back");
        assert!(p.tasks().iter().all(|t| t.name.starts_with("Task-")));
        let script = format!(
            "import collections, scope_profiler as sp\n\
             tasks = sp.read_h5({:?}).tasks[0]\n\
             assert len(tasks) == 3000, len(tasks)\n\
             assert {{t.kind for t in tasks}} == {{'task'}}, {{t.kind for t in tasks}}\n\
             assert all(t.name.startswith('Task-') for t in tasks)\n\
             print(sorted(collections.Counter(t.coro_name for t in tasks).items()))\n",
            path.to_str().unwrap()
        );
        let out = common::py("python", &["-c", &script]);
        let want = if mixed {
            "[('other', 1000), ('request', 2000)]"
        } else {
            "[('request', 3000)]"
        };
        assert_eq!(out.trim_end().lines().last(), Some(want), "{out}");
    }
}

#[test]
fn a_late_phase_with_tasks_is_written_whole_at_its_own_name() {
    // With tasks tracked the file is begun with its lane tables while the calls are read
    // back: a phase after the explicit finalize lands whole at the late name, the first file
    // stays as it was, and no temporary file is left behind.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("app.h5");
    let (d, guard) = dispatch(ScopeLayer::builder().output(&out).track_async(true));
    let rt = runtime(&d, 2);
    let run = |n: u64| {
        tracing::dispatcher::with_default(&d, || {
            rt.block_on(async {
                for k in 0..n {
                    tokio::spawn(request(k)).await.unwrap();
                }
            })
        })
    };
    run(50);
    assert_eq!(
        guard.finalize().unwrap().region("request").unwrap().calls,
        50
    );
    run(7);
    drop(rt);
    drop(guard);
    let rows = |p: &std::path::Path| read::<i64>(&hdf5::File::open(p).unwrap(), "task_table/index");
    assert_eq!(rows(&out).len(), 50);
    assert_eq!(
        rows(&dir.path().join("app.late.h5")),
        (0..7).collect::<Vec<_>>()
    );
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["app.h5", "app.late.h5"]);
}

/// A sync span entered by its creator, then by a scoped thread, then closed by its creator:
/// one call, whose time covers both polls, whichever lane the flusher happens to read first
/// (read creator-first, the creator's four records look like a whole one-poll call).
#[test]
fn a_span_shared_with_a_scoped_thread_is_one_call_with_both_polls() {
    for run in 0..10 {
        let builder = ScopeLayer::builder().no_output();
        // With the test hook, the flusher reads nothing until the finalize, and then the
        // creator's lane (registered first) before the scoped thread's: the order that cut
        // the call short.
        #[cfg(feature = "testing")]
        let builder = builder.__hold_flusher();
        let (d, guard) = dispatch(builder);
        tracing::dispatcher::with_default(&d, || {
            let span = tracing::info_span!("shared");
            span.in_scope(|| std::hint::black_box(1));
            std::thread::scope(|s| {
                s.spawn(|| {
                    tracing::dispatcher::with_default(&d, || {
                        span.in_scope(|| std::thread::sleep(std::time::Duration::from_millis(3)))
                    })
                });
            });
            drop(span);
        });
        let r = guard.finalize().unwrap();
        let st = r.region("shared").expect("the shared span's region");
        assert_eq!(st.calls, 1, "run {run}");
        assert!(st.total_ns >= 3_000_000, "run {run}: {} ns", st.total_ns);
        assert_eq!(
            (r.dropped(), r.dropped_calls(), r.in_flight()),
            (0, 0, 0),
            "run {run}"
        );
    }
}

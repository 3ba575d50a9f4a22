//! The cross-check against a real peer: tokio-metrics' `TaskMonitor`, wrapped around the same
//! futures in the same run, must see the same polls and, per task, the same mean scheduled and
//! idle durations (within 5 %).
//!
//! The workload: tasks on one worker, each waking in the three usual ways (a timer, a channel
//! fed by another task, `yield_now`: a self-wake Tokio defers until after the poll), with a
//! task that holds the worker for milliseconds at a time, so scheduled delays are real. With one
//! worker and no foreign thread no wake can land inside a poll, the one case the two count
//! differently (a wake during a poll counts from the poll's end here, from the wake in
//! `TaskMonitor`): self-wakes are counted alike.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use scope_profiler_tokio_unstable_tests::{ms, profile, spin, Read};
use tokio_metrics::TaskMonitor;

const TASKS: u64 = 6;
const ROUNDS: u64 = 9;

#[test]
fn idle_and_scheduled_agree_with_tokio_metrics_task_monitor() {
    let dir = tempfile::tempdir().unwrap();
    let monitors: Arc<Mutex<HashMap<u64, TaskMonitor>>> = Arc::default();
    let m = monitors.clone();
    let run = profile(
        dir.path(),
        "monitor",
        1,
        |b| b,
        |rt, _| {
            rt.block_on(async move {
                let mut handles = Vec::new();
                let mut senders = Vec::new();
                for i in 0..TASKS {
                    let (tx, mut rx) = tokio::sync::mpsc::channel::<()>(ROUNDS as usize);
                    senders.push(tx);
                    let monitor = TaskMonitor::new();
                    let m = m.clone();
                    let mon = monitor.clone();
                    let work = async move {
                        let id: u64 = tokio::task::id().to_string().parse().unwrap();
                        m.lock().unwrap().insert(id, mon);
                        for k in 0..ROUNDS {
                            spin(Duration::from_micros(800));
                            match k % 3 {
                                0 => {
                                    tokio::time::sleep(Duration::from_micros(1500 + 300 * i)).await
                                }
                                1 => tokio::task::yield_now().await,
                                _ => rx.recv().await.unwrap(),
                            }
                        }
                    };
                    handles.push(tokio::spawn(monitor.instrument(work)));
                }
                // Feeds the channels, a few milliseconds apart.
                let feeder = tokio::spawn(async move {
                    for _ in 0..ROUNDS / 3 {
                        tokio::time::sleep(Duration::from_millis(4)).await;
                        for tx in &senders {
                            tx.send(()).await.unwrap();
                        }
                    }
                });
                // Holds the only worker, so woken tasks wait.
                let hog = tokio::spawn(async {
                    for _ in 0..10 {
                        spin(Duration::from_millis(3));
                        tokio::time::sleep(Duration::from_micros(500)).await;
                    }
                });
                for h in handles {
                    h.await.unwrap();
                }
                feeder.await.unwrap();
                hog.await.unwrap();
            })
        },
    );
    let read = Read::open(&run.path);
    let monitors = monitors.lock().unwrap();
    assert_eq!(monitors.len() as u64, TASKS);
    for (&tokio_id, monitor) in monitors.iter() {
        let tm = monitor.cumulative();
        let rows: Vec<_> = read
            .tasks
            .iter()
            .filter(|t| t.tokio_id == tokio_id && t.sched.is_some())
            .collect();
        assert_eq!(rows.len(), 1, "task {tokio_id}: {:?}", read.tasks);
        let row = rows[0];
        let ours = row.sched.clone().unwrap();
        // Per poll: idle of each suspension, from the polls.
        let polls = read.task_polls(row.index);
        let mut idles = Vec::new();
        for w in polls.windows(2) {
            let gap = w[1].start_ns - (w[0].start_ns + w[0].dur_ns);
            idles.push(gap - w[1].scheduled_ns);
        }
        let idled: Vec<i64> = idles.into_iter().filter(|&i| i > 0).collect();
        let our_idle = idled.iter().sum::<i64>() as f64 / idled.len().max(1) as f64;
        let our_sched = ours.scheduled_ns as f64 / (ours.polls - 1).max(1) as f64;
        let tm_idle = tm.mean_idle_duration().as_nanos() as f64;
        let tm_sched = tm.mean_scheduled_duration().as_nanos() as f64;
        eprintln!(
            "task {tokio_id}: polls {} (monitor {}), mean scheduled {:.3} ms (monitor {:.3}, \
             {} and {} of them), mean idle {:.3} ms (monitor {:.3}, {} and {})",
            ours.polls,
            tm.total_poll_count,
            ms(our_sched as i64),
            ms(tm_sched as i64),
            ours.polls - 1,
            tm.total_scheduled_count,
            ms(our_idle as i64),
            ms(tm_idle as i64),
            idled.len(),
            tm.total_idled_count,
        );
        assert_eq!(
            ours.polls as u64, tm.total_poll_count,
            "task {tokio_id}: polls"
        );
        assert_eq!(
            (ours.polls - 1) as u64,
            tm.total_scheduled_count,
            "task {tokio_id}: every suspension ended with a wake"
        );
        assert_eq!(idled.len() as u64, tm.total_idled_count, "task {tokio_id}");
        let within = |ours: f64, theirs: f64, what: &str| {
            assert!(
                (ours - theirs).abs() <= 0.05 * theirs,
                "task {tokio_id}: mean {what} {} ms here, {} ms by TaskMonitor",
                ours / 1e6,
                theirs / 1e6
            );
        };
        within(our_sched, tm_sched, "scheduled");
        within(our_idle, tm_idle, "idle");
        assert!(
            tm_sched > 200_000.0,
            "the hog made woken tasks wait: {tm_sched} ns"
        );
    }
}

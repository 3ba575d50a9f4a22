//! A call's await time inside `join!`: it also covers the time its task spent polling the
//! sibling futures, so idle is not simply `await_ns - call_scheduled_ns`. The split (see
//! docs/latency.md), for a call of task T open from s to e:
//!
//! ```text
//! await_ns = (e - s) - busy of the call
//!          = idle of T in [s, e] + scheduled of T in [s, e] + (busy of T in [s, e] - busy of the call)
//! call_scheduled_ns = scheduled of T in [s, e]
//! ```

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use scope_profiler_tokio_unstable_tests::{ms, profile, spin, Read};
use tracing::Instrument;

/// What the sibling measured: its spins.
type Spins = Arc<Mutex<Vec<(Instant, Instant)>>>;

#[test]
fn a_call_in_join_splits_into_idle_scheduled_and_sibling_time() {
    let dir = tempfile::tempdir().unwrap();
    let spins: Spins = Arc::default();
    let window: Arc<Mutex<Option<(Instant, Instant)>>> = Arc::default();
    let (sp, win) = (spins.clone(), window.clone());
    let run = profile(
        dir.path(),
        "join",
        1,
        |b| b,
        |rt, dispatch| {
            rt.block_on(async move {
                let (tx, rx) = tokio::sync::oneshot::channel::<()>();
                let (hog_tx, hog_rx) = tokio::sync::oneshot::channel::<()>();
                let d = dispatch.clone();
                // Wakes the hog, then the call: both wakes come from outside the runtime, so
                // both tasks go to the runtime's injection queue in that order, and the only
                // worker runs the hog's 3 ms spin before it polls the woken task. (A hog on
                // its own timer met the task's wakes only when the timing happened to line
                // up: scheduled 0.07 ms in one run under load.)
                let sender = std::thread::spawn(move || {
                    tracing::dispatcher::with_default(&d, || {
                        std::thread::sleep(Duration::from_millis(12));
                        hog_tx.send(()).unwrap();
                        tx.send(()).unwrap();
                    })
                });
                // The waiting call and its busy sibling, joined in one task.
                let a = async move {
                    let start = Instant::now();
                    rx.await.unwrap();
                    *win.lock().unwrap() = Some((start, Instant::now()));
                }
                .instrument(tracing::info_span!("a"));
                let b = async move {
                    for _ in 0..4 {
                        let t0 = Instant::now();
                        spin(Duration::from_millis(1));
                        sp.lock().unwrap().push((t0, Instant::now()));
                        tokio::time::sleep(Duration::from_millis(3)).await;
                    }
                }
                .instrument(tracing::info_span!("b"));
                let task = tokio::spawn(async move {
                    tokio::join!(a, b);
                });
                // Holds the worker when the call is woken, so the task waits after its wake.
                let hog = tokio::spawn(async move {
                    hog_rx.await.unwrap();
                    spin(Duration::from_millis(3));
                });
                task.await.unwrap();
                hog.await.unwrap();
                sender.join().unwrap();
            })
        },
    );
    let read = Read::open(&run.path);
    let a = read.calls_of("a");
    assert_eq!(a.len(), 1);
    let a = a[0];
    let (s, e) = (a.start_ns, a.start_ns + a.dur_ns);
    let task = read
        .tasks
        .iter()
        .find(|t| t.index == a.task)
        .expect("the call's task has a row");
    assert!(task.sched.is_some());
    // The task's polls inside the call, and the call's own polls.
    let task_polls: Vec<_> = read
        .task_polls(a.task)
        .into_iter()
        .filter(|p| read.profile.poll_region_names()[p.region as usize] == "runtime.spawn")
        .collect();
    let inside: Vec<_> = task_polls
        .iter()
        .filter(|p| p.start_ns + p.dur_ns > s && p.start_ns < e)
        .collect();
    let sched_inside: i64 = inside
        .iter()
        .filter(|p| p.start_ns > s)
        .map(|p| p.scheduled_ns.max(0))
        .sum();
    let task_busy: i64 = inside
        .iter()
        .map(|p| (p.start_ns + p.dur_ns).min(e) - p.start_ns.max(s))
        .sum();
    let call_busy: i64 = read
        .polls
        .iter()
        .filter(|p| read.profile.poll_region_names()[p.region as usize] == "a")
        .map(|p| p.dur_ns)
        .sum();
    let await_ns = a.dur_ns - call_busy;
    let siblings = task_busy - call_busy;
    let idle = await_ns - a.scheduled_ns - siblings;
    // What the sibling measured of its own spinning inside the call's window.
    let (ws, we) = window.lock().unwrap().unwrap();
    let spun: i64 = spins
        .lock()
        .unwrap()
        .iter()
        .map(|&(a, b)| b.min(we).saturating_duration_since(a.max(ws)).as_nanos() as i64)
        .sum();
    eprintln!(
        "a: {:.3} ms, await {:.3} = idle {:.3} + scheduled {:.3} + siblings {:.3} (b measured \
         {:.3} of spinning)",
        ms(a.dur_ns),
        ms(await_ns),
        ms(idle),
        ms(a.scheduled_ns),
        ms(siblings),
        ms(spun)
    );
    assert!(
        (a.scheduled_ns - sched_inside).abs() <= 1_000,
        "call_scheduled_ns {} = the scheduled time of the task's polls inside the call {}",
        a.scheduled_ns,
        sched_inside
    );
    assert!(
        a.scheduled_ns > 1_000_000,
        "the hog delayed the task inside the call"
    );
    assert!(idle >= 0, "idle {idle} ns");
    assert!(
        siblings >= spun && siblings - spun < 1_000_000,
        "the task polled b inside a for {} ms; b spun {} ms of it",
        ms(siblings),
        ms(spun)
    );
    assert!(
        await_ns > a.scheduled_ns + siblings,
        "a waited for its channel too"
    );
}

//! Idle and scheduled time of Tokio tasks, against intervals the test measures itself with
//! `Instant`: a task idles on a channel for ~20 ms and is woken (from another thread) while the
//! only worker spins ~5 ms in another task.

use std::time::{Duration, Instant};

use scope_profiler_tokio_unstable_tests::{ms, profile, spin, Read};

/// What the test measured itself.
#[derive(Clone, Copy, Debug, Default)]
struct Seen {
    /// Just before the waiter awaited the channel (its first poll ends right after).
    before_await: Option<Instant>,
    /// Just before the wake was sent.
    wake: Option<Instant>,
    /// When the spinner stopped spinning.
    spin_end: Option<Instant>,
    /// Just after the waiter's await returned (inside its second poll).
    resumed: Option<Instant>,
}

fn between(a: Option<Instant>, b: Option<Instant>) -> i64 {
    b.unwrap().duration_since(a.unwrap()).as_nanos() as i64
}

#[test]
fn idle_and_scheduled_match_the_intervals_the_program_measures() {
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::SeqCst};
    use std::sync::{Arc, Mutex};
    let dir = tempfile::tempdir().unwrap();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let (s1, s2, s3) = (seen.clone(), seen.clone(), seen.clone());
    let spinning = Arc::new(AtomicBool::new(false));
    let woken = Arc::new(AtomicBool::new(false));
    let (spinning2, woken2) = (spinning.clone(), woken.clone());
    let waiter_line = Arc::new(AtomicU32::new(0));
    let wl = waiter_line.clone();
    let run = profile(
        dir.path(),
        "latency",
        1,
        |b| b,
        |rt, dispatch| {
            rt.block_on(async move {
                let (tx, rx) = tokio::sync::oneshot::channel::<()>();
                // The waiter: idles on the channel.
                #[rustfmt::skip]
            let (line, waiter) = (line!(), tokio::spawn(async move {
                s1.lock().unwrap().before_await = Some(Instant::now());
                rx.await.unwrap();
                s1.lock().unwrap().resumed = Some(Instant::now());
            }));
                wl.store(line, SeqCst);
                // The spinner: holds the only worker until 5 ms after the wake.
                let spinner = tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(15)).await;
                    spinning2.store(true, SeqCst);
                    while !woken2.load(SeqCst) {
                        std::hint::spin_loop();
                    }
                    spin(Duration::from_millis(5));
                    s2.lock().unwrap().spin_end = Some(Instant::now());
                });
                // The wake, from a thread of its own, 20 ms after the waiter's await, while the
                // worker spins.
                let d = dispatch.clone();
                let sender = std::thread::spawn(move || {
                    tracing::dispatcher::with_default(&d, || {
                        let since = loop {
                            if let Some(t) = s3.lock().unwrap().before_await {
                                break t;
                            }
                            std::thread::yield_now();
                        };
                        std::thread::sleep((since + Duration::from_millis(20)) - Instant::now());
                        while !spinning.load(SeqCst) {
                            std::thread::yield_now();
                        }
                        s3.lock().unwrap().wake = Some(Instant::now());
                        tx.send(()).unwrap();
                        woken.store(true, SeqCst);
                    })
                });
                waiter.await.unwrap();
                spinner.await.unwrap();
                sender.join().unwrap();
            })
        },
    );
    let seen = *seen.lock().unwrap();
    let read = Read::open(&run.path);
    let rows = read.spawned_at(file!(), waiter_line.load(SeqCst));
    assert_eq!(rows.len(), 1, "one row for the waiter: {:?}", read.tasks);
    let w = rows[0].sched.clone().unwrap();
    let idle_seen = between(seen.before_await, seen.wake);
    let sched_seen = between(seen.wake, seen.resumed);
    let spin_left = between(seen.wake, seen.spin_end);
    eprintln!(
        "waiter: polls {} busy {:.3} ms idle {:.3} ms (seen {:.3}) scheduled {:.3} ms (seen {:.3}, \
         spin left {:.3}) first poll delay {:.3} ms",
        w.polls,
        ms(w.busy_ns),
        ms(w.idle_ns),
        ms(idle_seen),
        ms(w.scheduled_ns),
        ms(sched_seen),
        ms(spin_left),
        ms(w.first_poll_delay_ns),
    );
    assert_eq!(w.polls, 2, "one poll to wait, one to finish");
    let close = |what: &str, ours: i64, seen: i64| {
        assert!(
            (ours - seen).abs() < 1_000_000,
            "{what}: {} ms in the file, {} ms measured",
            ms(ours),
            ms(seen)
        );
    };
    close("idle", w.idle_ns, idle_seen);
    close("scheduled", w.scheduled_ns, sched_seen);
    close("scheduled against the spin", w.scheduled_ns, spin_left);
    assert!(idle_seen >= 20_000_000 && spin_left >= 5_000_000);
    assert!(w.first_poll_delay_ns >= 0);
    // Its polls: the first has no scheduled time, the second the whole delay.
    let polls = read.task_polls(rows[0].index);
    assert_eq!(polls.len(), 2, "{polls:?}");
    assert_eq!(polls[0].scheduled_ns, -1);
    assert_eq!(polls[1].scheduled_ns, w.scheduled_ns);
}

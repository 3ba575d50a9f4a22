//! The critical path of a request (`scope_profiler::read::critical`) without Tokio's
//! instrumentation (this build's Tokio has no `--cfg tokio_unstable`): the five programs of
//! `tests/support/critical_programs.rs`, whose files have no wakes, no spawns and no
//! `scheduled_ns`. What the walk can attribute there, as `docs/latency.md` ("The critical
//! path") says: a `JoinHandle` await, inferred from the awaited task's last poll ending in
//! the gap, and marked `inferred`; every other wait is `idle-unknown`; never `driver`,
//! `outside`, or a `scheduled` / `blocked-on` segment that is not inferred. The same programs
//! with the instrumentation: `crates/tokio-unstable-tests/tests/critical.rs`.

mod common;

#[path = "support/critical_programs.rs"]
#[allow(dead_code, unreachable_pub)]
mod programs;

use programs::{near, owned, Walked, EDGE_NS, RUNS};
use scope_profiler::ScopeLayer;

/// Profiles `program` on a multi-thread runtime of `workers` workers (each reporting to the
/// profiler) and walks the request.
fn walk(
    name: &str,
    workers: usize,
    program: fn(&tokio::runtime::Runtime, &tracing::Dispatch),
) -> Walked {
    for _ in 0..RUNS {
        let w = walk_once(name, workers, program);
        // Every run, preempted or not, keeps to what a stable file can show.
        assert_stable_limits(&w);
        if !w.preempted() {
            return w;
        }
        eprintln!("{name}: the request was preempted in a poll; again");
    }
    panic!("{name}: the request was preempted in a poll in each of {RUNS} runs");
}

/// One profiled run of `program`, walked.
fn walk_once(
    name: &str,
    workers: usize,
    program: fn(&tokio::runtime::Runtime, &tracing::Dispatch),
) -> Walked {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(format!("{name}.h5"));
    let (dispatch, guard) = common::dispatch(ScopeLayer::builder().output(&path).track_async(true));
    let d = dispatch.clone();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .on_thread_start(move || std::mem::forget(tracing::dispatcher::set_default(&d)))
        .build()
        .unwrap();
    tracing::dispatcher::with_default(&dispatch, || program(&rt, &dispatch));
    drop(rt);
    guard.finalize().unwrap();
    Walked::open(&path)
}

/// What no stable file can show: a driver or outside wake, a wait on another task that is
/// not inferred.
fn assert_stable_limits(w: &Walked) {
    for s in &w.path.segments {
        let k = s.kind.name();
        assert!(k != "driver" && k != "outside", "{}", w.describe());
        if k == "blocked-on" || (k == "scheduled") {
            assert!(s.inferred, "{}", w.describe());
        }
    }
}

#[test]
fn a_join_is_inferred_from_the_childs_last_poll() {
    let w = walk("join", 1, programs::join);
    assert_eq!(w.waits(EDGE_NS), owned(&[("blocked-on", "child", true)]));
    let child = w.call("child");
    let s = w
        .long(EDGE_NS)
        .into_iter()
        .find(|s| s.kind.name() == "blocked-on")
        .unwrap();
    assert_eq!(s.region(), Some("child"));
    near(
        "blocked-on starts at the child's start",
        s.start_ns,
        child.start_ns,
    );
    // Up to the child's last poll (the inferred edge's end).
    near(
        "blocked-on ends at the child's last poll",
        s.end_ns,
        w.task_ends[&child.task],
    );
    assert!(w.time("blocked-on", "child") >= 4_500_000);
    // The request's own unknown time is a sliver at most: in a stable file the drop of an
    // instrumented future, after its last poll, looks like one more poll after a gap.
    assert!(
        w.time("idle-unknown", "request") < EDGE_NS,
        "{}",
        w.describe()
    );
}

#[test]
fn a_ping_pong_goes_back_through_the_echos_life_its_waits_unknown() {
    // The request's last wait (the echo's `JoinHandle`) is inferred from the echo's end; the
    // walk then stays in the echo back to its first poll: its 101 runs (100 answers and the
    // one that saw the channel closed) lie on the path, and the gaps between them are unknown,
    // all of it marked inferred.
    let w = walk("ping_pong", 1, programs::ping_pong);
    let coarse = w.coarse();
    let echo: Vec<_> = coarse
        .iter()
        .filter(|s| w.owner(s.lane) == "echo")
        .collect();
    assert!(echo.iter().all(|s| s.inferred), "{}", w.describe());
    let runs = echo
        .iter()
        .filter(|s| s.kind.name() == "blocked-on")
        .count();
    // (And the drop of the echo's instrumented future, after its last poll: one more.)
    assert!((101..=102).contains(&runs), "{runs}: {}", w.describe());
    assert!(w.time("idle-unknown", "echo") > 0, "{}", w.describe());
    let first = echo.iter().find(|s| s.kind.name() == "blocked-on").unwrap();
    near(
        "the echo's first run",
        first.start_ns,
        w.call("echo").start_ns,
    );
}

#[test]
fn a_mutex_wait_is_inferred_from_the_holders_end() {
    // The holder's only poll ends right after it releases the lock: inside the request's
    // wait, so the walk takes it for the task the request awaited. Right here, by chance of
    // the construction: a holder that lived on would leave the wait unknown.
    let w = walk("mutex", 2, programs::mutex);
    assert_eq!(w.waits(EDGE_NS), owned(&[("blocked-on", "holder", true)]));
    assert!(
        w.time("blocked-on", "holder") >= 2_900_000,
        "{}",
        w.describe()
    );
}

#[test]
fn a_wait_for_the_worker_is_taken_for_the_hog_that_ended_in_it() {
    // The request was woken by a thread 0.5 ms into the hog's poll and waited for the
    // worker: a stable file cannot tell this from a `JoinHandle` of the hog, whose last poll
    // ended in the gap. The path names the hog, marked inferred.
    let w = walk("scheduled", 1, programs::scheduled);
    assert_eq!(w.waits(EDGE_NS), owned(&[("blocked-on", "hog", true)]));
    let s = w
        .long(EDGE_NS)
        .into_iter()
        .find(|s| s.kind.name() == "blocked-on")
        .unwrap();
    let hog = w.call("hog").task;
    near(
        "blocked-on ends at the hog's last poll",
        s.end_ns,
        w.task_ends[&hog],
    );
}

#[test]
fn a_timer_wait_is_idle_unknown() {
    let w = walk("timer", 1, programs::timer);
    assert_eq!(
        w.waits(EDGE_NS),
        owned(&[("idle-unknown", "request", false)])
    );
    assert!(
        w.time("idle-unknown", "request") >= 2_800_000,
        "{}",
        w.describe()
    );
}

//! The critical path of a request (`scope_profiler::read::critical`) with Tokio's
//! instrumentation, on the five programs of `tests/support/critical_programs.rs` where the
//! truth is known by construction. Each test checks the path's shape (its segments of 0.2 ms
//! or more: kinds and owners), the edges that the program fixes against the file's own calls
//! (within 0.2 ms), and that the segments tile the call exactly. The same programs without
//! the instrumentation: `tests/critical_path.rs` in the main crate.

#[path = "../../../tests/support/critical_programs.rs"]
#[allow(missing_docs, dead_code)]
mod programs;

use programs::{near, owned, Walked, EDGE_NS, RUNS};
use scope_profiler_tokio_unstable_tests::{profile, run_ok, scopeprof};

fn walk(
    name: &str,
    workers: usize,
    program: fn(&tokio::runtime::Runtime, &tracing::Dispatch),
) -> Walked {
    for _ in 0..RUNS {
        let dir = tempfile::tempdir().unwrap();
        let run = profile(dir.path(), name, workers, |b| b, program);
        let w = Walked::open(&run.path);
        if !w.preempted() {
            return w;
        }
        eprintln!("{name}: the request was preempted in a poll; again");
    }
    panic!("{name}: the request was preempted in a poll in each of {RUNS} runs");
}

/// The path's first segment of 0.2 ms or more that is not the request's own time, nor a
/// wake-up latency (`scheduled`; see [`Walked::waits`]).
fn main(w: &Walked) -> scope_profiler::read::critical::Segment {
    let mut long = w.long(EDGE_NS).into_iter();
    long.find(|s| !matches!(s.kind.name(), "running" | "scheduled"))
        .expect("a wait")
}

#[test]
fn a_join_goes_through_the_spawned_childs_computation() {
    let w = walk("join", 1, programs::join);
    assert_eq!(w.waits(EDGE_NS), owned(&[("blocked-on", "child", false)]));
    let child = w.call("child");
    let s = &main(&w);
    assert_eq!(s.region(), Some("child"));
    near(
        "blocked-on starts at the child's start",
        s.start_ns,
        child.start_ns,
    );
    // Up to the child task's completion, which wakes the request (its last poll, Tokio's
    // `runtime.spawn`, ends just after the child's call).
    let done = w.task_ends[&child.task];
    near("blocked-on ends at the child's completion", s.end_ns, done);
    assert!(done >= child.end_ns);
    assert!(w.time("blocked-on", "child") >= 4_500_000);
    // Before the child's first poll it was scheduled (the spawn edge), and after its end the
    // request was: nothing of the request's wait is unknown.
    assert!(w.time("scheduled", "child") > 0);
    assert_eq!(w.time("idle-unknown", "request"), 0);
    assert!(w.path.segments.iter().all(|s| !s.inferred));
}

#[test]
fn a_ping_pong_alternates_between_the_request_and_the_echo() {
    let w = walk("ping_pong", 1, programs::ping_pong);
    let joined = w.coarse();
    let echo_runs = joined
        .iter()
        .filter(|s| s.kind.name() == "blocked-on" && w.owner(s.lane) == "echo")
        .count();
    // 100 messages answered, and the run that saw the channel closed.
    assert_eq!(echo_runs, 101, "{}", w.describe());
    let request_runs = joined
        .iter()
        .filter(|s| s.kind.name() == "running" && w.owner(s.lane) == "request")
        .count();
    assert!(request_runs >= 100, "{}", w.describe());
    // Every wait is explained by the other task: no unknown time, no driver, no thread.
    for k in ["idle-unknown", "driver", "outside"] {
        assert!(
            joined.iter().all(|s| s.kind.name() != k),
            "{k}: {}",
            w.describe()
        );
    }
    // Each blocked-on segment lies in the echo's call.
    let echo = w.call("echo");
    for s in joined.iter().filter(|s| s.kind.name() == "blocked-on") {
        // (Its first poll's edge lies in Tokio's spawn span, a few µs before the call.)
        assert!(s.start_ns >= echo.start_ns - EDGE_NS && s.end_ns <= echo.end_ns + EDGE_NS);
        assert_eq!(w.owner(s.lane), "echo");
    }
}

#[test]
fn a_mutex_wait_is_the_holders_time() {
    let w = walk("mutex", 2, programs::mutex);
    assert_eq!(w.waits(EDGE_NS), owned(&[("blocked-on", "holder", false)]));
    let s = &main(&w);
    assert_eq!(s.region(), Some("holder"));
    // The holder kept the lock 3 ms after the request asked: all of it lies on the path,
    // up to the release (the holder's last poll ends just after).
    assert!(s.dur_ns() >= 2_900_000, "{}", w.describe());
    near(
        "blocked-on ends at the release",
        s.end_ns,
        w.call("holder").end_ns,
    );
    near(
        "blocked-on starts at the request's start",
        s.start_ns,
        w.path.call.start_ns,
    );
}

#[test]
fn a_request_woken_behind_a_hog_is_scheduled_naming_the_hog() {
    let w = walk("scheduled", 1, programs::scheduled);
    assert_eq!(
        w.middle(EDGE_NS),
        owned(&[
            ("outside", "thread", false),
            ("scheduled", "request", false)
        ])
    );
    let long: Vec<_> = w
        .long(EDGE_NS)
        .into_iter()
        .filter(|s| s.kind.name() != "running")
        .collect();
    let s = &long[1];
    let hog = w.call("hog");
    assert_eq!(
        s.behind.first().map(|b| b.0),
        Some(hog.task),
        "{}",
        w.describe()
    );
    // At least until the hog's task completed and freed the worker (later when the OS keeps
    // the worker's thread from running, on a loaded machine).
    assert!(s.end_ns >= w.task_ends[&hog.task], "{}", w.describe());
    // The hog went on 3 ms after the wake.
    assert!(s.dur_ns() >= 2_900_000, "{}", w.describe());
    // The wake came from the thread, whose time the path shows from the request's park.
    let own = w.coarse();
    assert_eq!(long[0].start_ns, own[0].end_ns);
}

#[test]
fn a_timer_wait_is_the_drivers() {
    let w = walk("timer", 1, programs::timer);
    assert_eq!(w.waits(EDGE_NS), owned(&[("driver", "request", false)]));
    let s = &main(&w);
    assert!(s.dur_ns() >= 2_800_000, "{}", w.describe());
    // From the end of the request's first poll.
    let own: Vec<_> = w
        .coarse()
        .into_iter()
        .filter(|s| s.kind.name() == "running")
        .collect();
    assert_eq!(s.start_ns, own[0].end_ns);
    // The timer fired at its deadline (3 ms after the sleep began, in the request's first
    // poll) or later, never before; then the request waited for the worker (scheduled).
    assert!(
        s.end_ns >= w.path.call.start_ns + 3_000_000 - EDGE_NS,
        "{}",
        w.describe()
    );
    assert!(s.end_ns <= own.last().unwrap().start_ns);
}

#[test]
fn scopeprof_critical_path_names_the_hog_a_request_was_scheduled_behind() {
    let dir = tempfile::tempdir().unwrap();
    let run = profile(dir.path(), "scheduled", 1, |b| b, programs::scheduled);
    let w = Walked::open(&run.path);
    let hog = w.call("hog").task;
    let f = run.path.to_str().unwrap();
    let text = run_ok(&scopeprof(), &["critical-path", f, "--region", "request"]);
    let line = text
        .lines()
        .find(|l| l.contains(" scheduled ") && l.contains("behind"))
        .unwrap_or_else(|| panic!("a scheduled line:\n{text}"));
    assert!(line.contains(&format!("(#{hog})")), "hog #{hog}:\n{text}");
    assert!(
        text.lines()
            .any(|l| l.contains(" outside ") && l.contains("thread")),
        "{text}"
    );
}

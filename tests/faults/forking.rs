//! The fork scenario: the profiled process records, forks with a call open, and its child
//! records and leaves either through a return from `main` (after a finalize, which must fail
//! at once; the guard drops on the way) or through `std::process::exit` (without touching
//! the guard); the parent waits for it, records more and finalizes.

use super::child::{mono_ns, report_outcome, result, Env};

/// Calls the parent records before the fork, and after.
pub(crate) const BEFORE: u64 = 500;
pub(crate) const AFTER: u64 = 2_000;
/// Calls the child records.
pub(crate) const IN_CHILD: u64 = 1_000;

fn work(n: u64) {
    for _ in 0..n {
        tracing::info_span!("work").in_scope(|| std::hint::black_box(1));
    }
}

pub(crate) fn run(env: &Env, exit: bool) {
    let guard = super::child::build(env).expect("build");
    work(BEFORE);
    let outer = tracing::info_span!("outer").entered();
    // SAFETY: a plain fork, as a daemonizing program does; the child goes on with arbitrary
    // code, which is what the profiler must survive.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        work(IN_CHILD);
        // A callsite the parent never saw: registered in the child, where the profiler's
        // registration locks are not taken (one held at the fork would never be released).
        tracing::info_span!("child_only").in_scope(|| std::hint::black_box(1));
        result("child_last_call_ns", mono_ns());
        let t = std::time::Instant::now();
        let e = guard
            .finalize()
            .expect_err("a forked child's finalize fails");
        result("child_finalize_us", t.elapsed().as_micros());
        result("child_error", e.to_string());
        if exit {
            std::process::exit(0);
        }
        // A return from `main`: `outer` and the guard drop on the way.
        return;
    }
    let mut status = 0;
    // SAFETY: waits for our own child; `status` is a valid out-pointer.
    let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
    result("child_exit_ns", mono_ns());
    assert_eq!(waited, pid);
    result(
        "child_status",
        if libc::WIFEXITED(status) {
            libc::WEXITSTATUS(status)
        } else {
            -1
        },
    );
    work(AFTER);
    drop(outer);
    result("last_call_ns", mono_ns());
    result("completed", BEFORE + AFTER + 1);
    report_outcome(guard.finalize());
    drop(guard);
}

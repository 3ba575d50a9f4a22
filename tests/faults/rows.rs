//! The rows of the fault matrix: each starts the child, causes its fault, counts what
//! survived and checks the pass conditions (see the crate docs of `tests/faults.rs`).

use std::path::PathBuf;

use super::common::Tmpfs;
use super::forking::{AFTER, BEFORE};
use super::run::{completed_in_last, spawn, Ended};
use super::table::{calls_in, entries, env, fill, recover, recover_kept, secs, with, Row, Table};

/// Calls a row's program completes (the disk-full-at-spool row: more, to fill the spool).
const CALLS: u64 = 20_000;
/// Calls before a `kill -9` that loses the last flush interval: about 2 s of recording, so
/// the bound on what it may lose (~0.3 s of calls and the lane buffers) is a small part.
const KILL_CALLS: u64 = 200_000;
/// The children's flush interval.
pub(crate) const FLUSH_MS: u64 = 50;
/// Calls the lane buffers hold at most: the buffer budget (the smallest, 1 MiB) over four
/// 16-byte records a call (creation, enter, exit, close).
const LANE_CALLS: u64 = scope_profiler::MIN_BUFFER_BUDGET as u64 / 64;
/// What a `kill -9` may take besides the lane buffers: the calls of the last flush interval,
/// the flusher's longest pause between rounds (32 ms) and a margin for a loaded machine.
const WINDOW_NS: u64 = (FLUSH_MS + 32 + 200) * 1_000_000;
type RowFn = fn(&mut Table, &str) -> Row;

/// Every row, in order (the first is the baseline the exit times are held against).
const ROWS: &[(&str, RowFn)] = &[
    ("no fault", no_fault),
    ("kill -9 while recording", kill_while_recording),
    ("kill -9 during the snapshot", |t, n| {
        kill_at(t, n, "snapshot")
    }),
    ("kill -9 during the HDF5 write", |t, n| {
        kill_at(t, n, "write")
    }),
    ("kill -9 between the write and the rename", |t, n| {
        kill_at(t, n, "rename")
    }),
    (
        "kill -9 during the HDF5 write, neighbours' temporary files beside it",
        kill_with_neighbours,
    ),
    (
        "full disk at the spool (then room again)",
        disk_full_at_spool,
    ),
    ("full disk at finalize", disk_full_at_finalize),
    ("full disk at publish", disk_full_at_publish),
    ("output directory removed during the run", directory_removed),
    ("read-only output directory at build()", read_only_at_build),
    (
        "read-only output directory at finalize",
        read_only_at_finalize,
    ),
    ("fork, child returns from main", |t, n| fork(t, n, false)),
    ("fork, child calls std::process::exit", |t, n| {
        fork(t, n, true)
    }),
    ("SIGTERM, a signal thread finalizes", sigterm),
    (
        "flight recorder: a dump onto a full disk",
        super::flight::dump_full,
    ),
    (
        "flight recorder: kill -9 during a dump",
        super::flight::dump_kill,
    ),
    (
        "flight recorder: a fork during a dump",
        super::flight::dump_fork,
    ),
];

/// Runs every row whose name contains `filter` (the baseline always).
pub(crate) fn run_all(filter: Option<&str>) -> Table {
    let mut table = Table::default();
    for (i, (name, row)) in ROWS.iter().enumerate() {
        if i > 0 && filter.is_some_and(|f| !name.contains(f)) {
            continue;
        }
        eprintln!("fault matrix: {name}");
        let outcome =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| row(&mut table, name)));
        match outcome {
            Ok(r) => table.rows.push(r),
            Err(_) => table
                .problems
                .push(format!("{name}: the row panicked (see above)")),
        }
    }
    table
}

fn no_fault(t: &mut Table, name: &str) -> Row {
    let dir = tempfile::tempdir().expect("a directory");
    let out = dir.path().join("out.h5");
    let e = spawn("record", &env(&out, CALLS), None).end();
    let completed = e.num("completed");
    let readable = calls_in(&out, "work");
    t.check(
        name,
        e.status.success(),
        format!("exit status {}", e.status),
    );
    t.check(
        name,
        readable == completed,
        format!("{readable} of {completed} in the file"),
    );
    let exit = e.exit_s("last_call_ns");
    t.baseline_exit_s = exit;
    Row {
        fault: name.into(),
        completed,
        readable,
        lost: Some(0),
        exit: secs(exit),
        survives: "everything, in the output".into(),
        remedy: "-",
    }
}

/// Checks what a kill left against the bound, and makes its row.
fn after_kill(
    t: &mut Table,
    name: &str,
    e: &Ended,
    completed: u64,
    readable: u64,
    whole: bool,
) -> Row {
    t.check(
        name,
        readable <= completed + 1,
        format!("{readable} readable of {completed}"),
    );
    let missing = completed.saturating_sub(readable);
    let bound = if whole {
        0
    } else {
        completed_in_last(&e.samples, WINDOW_NS) + LANE_CALLS
    };
    t.check(
        name,
        missing <= bound,
        format!("{missing} calls missing, more than the bound {bound}"),
    );
    let survives = if whole {
        "every call, in the phase's spool".to_owned()
    } else {
        format!("all but {missing} calls (bound: {bound}), in the spool")
    };
    Row {
        fault: name.into(),
        completed,
        readable,
        lost: None,
        exit: "killed".into(),
        survives,
        remedy: "`scopeprof recover OUT.h5`, or run again (`build()` recovers into `OUT.recovered-N.h5`)",
    }
}

fn kill_while_recording(t: &mut Table, name: &str) -> Row {
    let dir = tempfile::tempdir().expect("a directory");
    let out = dir.path().join("out.h5");
    let progress = t.scratch().join("progress-recording");
    let mut c = spawn("record", &env(&out, 0), Some(&progress));
    c.until_progress(KILL_CALLS);
    let e = c.kill9();
    let completed = e.samples.last().map_or(0, |s| s.1);
    let readable = recover(&out);
    after_kill(t, name, &e, completed, readable, false)
}

fn kill_at(t: &mut Table, name: &str, point: &str) -> Row {
    let dir = tempfile::tempdir().expect("a directory");
    let out = dir.path().join("out.h5");
    let progress = t.scratch().join(format!("progress-{point}"));
    // Before the snapshot, long enough that the bound is a small part of the run.
    let calls = if point == "snapshot" {
        KILL_CALLS
    } else {
        CALLS
    };
    let env = with(env(&out, calls), "SCOPE_FAULT_STOP_AT", point);
    let mut c = spawn("finalize", &env, Some(&progress));
    c.at_checkpoint(point);
    let e = c.kill9();
    let completed = e.num("completed");
    let readable = recover(&out);
    let left: Vec<_> = entries(dir.path())
        .into_iter()
        .filter(|n| n != "out.h5")
        .collect();
    t.check(
        name,
        left.is_empty(),
        format!("left behind after recovery: {left:?}"),
    );
    // Past the snapshot the phase's spool is complete and moved aside: nothing may miss.
    after_kill(t, name, &e, completed, readable, point != "snapshot")
}

/// Temporary profiles of other processes beside the output, as a shared file system or a
/// shared directory gathers them: one of another host (another boot id), one of another
/// container of this host (another pid namespace), one in the old pid-only format.
const NEIGHBOURS: [&str; 3] = [
    ".out.h5.4242-1-1-00000000deadbeef.0.tmp",
    ".out.h5.4242-1-1-{boot}.0.tmp",
    ".out.h5.4242.0.tmp",
];

/// A `kill -9` during the HDF5 write, with neighbours' temporary files planted beside the
/// output: recovery removes the killed process's temporary file and keeps every neighbour's
/// (their processes cannot be judged from here, so they count as alive).
fn kill_with_neighbours(t: &mut Table, name: &str) -> Row {
    let dir = tempfile::tempdir().expect("a directory");
    let out = dir.path().join("out.h5");
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").expect("a boot id");
    let boot: String = boot.trim().chars().filter(|c| *c != '-').take(16).collect();
    let planted: Vec<String> = NEIGHBOURS
        .iter()
        .map(|n| n.replace("{boot}", &boot))
        .collect();
    for n in &planted {
        std::fs::write(dir.path().join(n), b"a neighbour's").expect("planted");
    }
    let progress = t.scratch().join("progress-neighbours");
    let env = with(env(&out, CALLS), "SCOPE_FAULT_STOP_AT", "write");
    let mut c = spawn("finalize", &env, Some(&progress));
    c.at_checkpoint("write");
    let e = c.kill9();
    let completed = e.num("completed");
    let ours = entries(dir.path())
        .into_iter()
        .filter(|n| n.ends_with(".tmp") && !planted.contains(n))
        .count();
    t.check(
        name,
        ours == 1,
        format!("{ours} temporary files of the killed process"),
    );
    let readable = recover(&out);
    let mut left: Vec<_> = entries(dir.path())
        .into_iter()
        .filter(|n| n != "out.h5")
        .collect();
    left.sort();
    let mut want = planted.clone();
    want.sort();
    t.check(
        name,
        left == want,
        format!("left after recovery: {left:?}, expected the neighbours' {want:?}"),
    );
    let mut row = after_kill(t, name, &e, completed, readable, true);
    row.survives = format!(
        "{}; the killed process's temporary file removed, the {} neighbours' kept",
        row.survives,
        planted.len()
    );
    row
}

/// What a finalize that failed reported, checked: exact statistics, completed = readable +
/// lost.
fn check_partial(t: &mut Table, name: &str, e: &Ended, readable: u64) -> (u64, u64) {
    let completed = e.num("completed");
    let lost = e.num("lost");
    t.check(name, e.get("error").is_some(), "finalize did not fail");
    t.check(
        name,
        e.num("stat_calls") == completed,
        format!("statistics count {} of {completed}", e.num("stat_calls")),
    );
    t.check(
        name,
        completed == readable + lost,
        format!("completed {completed} != readable {readable} + lost {lost}"),
    );
    (completed, lost)
}

fn disk_full_at_spool(t: &mut Table, name: &str) -> Row {
    let fs = Tmpfs::mount("2m");
    let out = fs.path().join("out.h5");
    let filler = fs.path().join("filler");
    std::fs::write(&filler, vec![1u8; (2 << 20) - (128 << 10)]).expect("the filler");
    let env = with(
        env(&out, 50_000),
        "SCOPE_FAULT_FILLER",
        &filler.display().to_string(),
    );
    let e = spawn("phases", &env, None).end();
    let readable = recover_kept(t, e.get("kept"));
    let (completed, lost) = check_partial(t, name, &e, readable);
    t.check(name, lost > 0, "nothing was lost: the disk did not fill");
    t.check(
        name,
        e.stderr.contains("calls' detail lost: disk full"),
        format!("the summary does not say so:\n{}", e.stderr),
    );
    let second = e.num("second_completed");
    let second_file = PathBuf::from(e.get("second_file").unwrap_or_default());
    t.check(
        name,
        e.num("second_stat_calls") == second && calls_in(&second_file, "work") == second,
        format!(
            "the second phase ({second} calls) is not whole in {}",
            second_file.display()
        ),
    );
    let exit = e.exit_s("last_call_ns");
    t.check_exit(name, exit);
    Row {
        fault: name.into(),
        completed,
        readable,
        lost: Some(lost),
        exit: secs(exit),
        survives: format!(
            "exact statistics of all calls (`Error::Partial`'s report); the calls written before \
             the disk filled, in the kept spool; the next phase whole ({second} of {second} calls)"
        ),
        remedy: "free space; `scopeprof recover --spool SPOOL OTHER.h5` for the written calls",
    }
}

fn disk_full_at_finalize(t: &mut Table, name: &str) -> Row {
    let fs = Tmpfs::mount("2m");
    let out = fs.path().join("out.h5");
    // Nothing reaches the disk before finalize (10 s flush interval).
    let env = with(
        with(env(&out, CALLS), "SCOPE_FAULT_STOP_AT", "snapshot"),
        "SCOPE_FAULT_FLUSH_MS",
        "10000",
    );
    let mut c = spawn("finalize", &env, None);
    c.at_checkpoint("snapshot");
    let filler = fill(fs.path());
    c.release();
    let e = c.end();
    std::fs::remove_file(filler).expect("free the space");
    let readable = recover_kept(t, e.get("kept"));
    let (completed, lost) = check_partial(t, name, &e, readable);
    let exit = e.exit_s("last_call_ns");
    t.check_exit(name, exit);
    Row {
        fault: name.into(),
        completed,
        readable,
        lost: Some(lost),
        exit: secs(exit),
        survives: "exact statistics of all calls; the calls' detail that was still in memory is \
                   lost (counted, with its time range)"
            .into(),
        remedy: "free space; the next phase records normally",
    }
}

fn disk_full_at_publish(t: &mut Table, name: &str) -> Row {
    let fs = Tmpfs::mount("2m");
    let out = fs.path().join("out.h5");
    let env = with(env(&out, CALLS), "SCOPE_FAULT_STOP_AT", "publish");
    let mut c = spawn("finalize", &env, None);
    c.at_checkpoint("publish");
    let filler = fill(fs.path());
    c.release();
    let e = c.end();
    std::fs::remove_file(filler).expect("free the space");
    let readable = recover_kept(t, e.get("kept"));
    let (completed, lost) = check_partial(t, name, &e, readable);
    t.check(name, lost == 0, format!("{lost} calls lost"));
    let error = e.get("error").unwrap_or_default();
    t.check(
        name,
        error.contains("No space left on device"),
        format!("the error does not say why: {error}"),
    );
    let left = entries(fs.path());
    t.check(
        name,
        left.iter().all(|n| n.starts_with(".out.h5.spool")),
        format!("left behind: {left:?}"),
    );
    let exit = e.exit_s("last_call_ns");
    t.check_exit(name, exit);
    Row {
        fault: name.into(),
        completed,
        readable,
        lost: Some(lost),
        exit: secs(exit),
        survives: "every call, in the phase's spool (named by `Error::Unpublished`); exact \
                   statistics in the error's report"
            .into(),
        remedy: "free space; `scopeprof recover --spool SPOOL OUT.h5`",
    }
}

fn directory_removed(t: &mut Table, name: &str) -> Row {
    let base = tempfile::tempdir().expect("a directory");
    let dir = base.path().join("outdir");
    std::fs::create_dir(&dir).expect("the output directory");
    let out = dir.join("out.h5");
    let progress = t.scratch().join("progress-removed");
    let mut c = spawn("finalize", &env(&out, CALLS), Some(&progress));
    c.until_progress(CALLS / 4);
    std::fs::remove_dir_all(&dir).expect("remove the output directory");
    let e = c.end();
    let (completed, lost) = check_partial(t, name, &e, 0);
    let error = e.get("error").unwrap_or_default();
    t.check(
        name,
        error.contains(&dir.display().to_string()) && error.contains("is gone"),
        format!("the error does not name the directory: {error}"),
    );
    let exit = e.exit_s("last_call_ns");
    t.check_exit(name, exit);
    Row {
        fault: name.into(),
        completed,
        readable: 0,
        lost: Some(lost),
        exit: secs(exit),
        survives: "exact statistics of all calls (the error names the directory); the spool \
                   went with the directory"
            .into(),
        remedy: "recreate the directory; the next phase records normally",
    }
}

fn read_only_at_build(t: &mut Table, name: &str) -> Row {
    let fs = Tmpfs::mount("1m");
    fs.cover_read_only();
    let out = fs.path().join("out.h5");
    let e = spawn("build", &env(&out, CALLS), None).end();
    let error = e.get("build_error").unwrap_or_default().to_owned();
    t.check(
        name,
        error.contains("Read-only file system") && error.contains(&fs.path().display().to_string()),
        format!("build() error: {error}"),
    );
    t.check(
        name,
        e.num("unprofiled") == CALLS,
        "the program did not go on",
    );
    let exit = e.exit_s("last_call_ns");
    t.check_exit(name, exit);
    Row {
        fault: name.into(),
        completed: 0,
        readable: 0,
        lost: Some(0),
        exit: secs(exit),
        survives: format!(
            "nothing to lose: `build()` returns `Error::OutputPath` naming the path (read-only \
             file system); the program ran its {CALLS} calls unprofiled"
        ),
        remedy: "choose a writable output (or `.no_output()`)",
    }
}

fn read_only_at_finalize(t: &mut Table, name: &str) -> Row {
    let fs = Tmpfs::mount("2m");
    let out = fs.path().join("out.h5");
    let env = with(env(&out, CALLS), "SCOPE_FAULT_STOP_AT", "snapshot");
    let mut c = spawn("finalize", &env, None);
    c.at_checkpoint("snapshot");
    fs.cover_read_only();
    c.release();
    let e = c.end();
    fs.uncover();
    let readable = recover_kept(t, e.get("kept"));
    let (completed, lost) = check_partial(t, name, &e, readable);
    let exit = e.exit_s("last_call_ns");
    t.check_exit(name, exit);
    Row {
        fault: name.into(),
        completed,
        readable,
        lost: Some(lost),
        exit: secs(exit),
        survives: "every call written, in the spool left in place (named by the error); exact \
                   statistics in the error's report"
            .into(),
        remedy: "`scopeprof recover --spool SPOOL OTHER.h5` (reads a read-only spool)",
    }
}

fn fork(t: &mut Table, name: &str, exit: bool) -> Row {
    let dir = tempfile::tempdir().expect("a directory");
    let out = dir.path().join("out.h5");
    let scenario = if exit { "fork-exit" } else { "fork-return" };
    let e = spawn(scenario, &env(&out, 0), None).end();
    let child_exit = e
        .num("child_exit_ns")
        .saturating_sub(e.num("child_last_call_ns")) as f64
        / 1e9;
    t.check(
        name,
        child_exit <= 1.0,
        format!("the child took {child_exit:.3} s to exit"),
    );
    t.check(name, e.num("child_status") == 0, "the child's exit status");
    t.check(
        name,
        e.get("child_error")
            .is_some_and(|m| m.contains("was forked from")),
        format!("the child's finalize: {:?}", e.get("child_error")),
    );
    t.check(
        name,
        e.stderr.contains("profiling is off in it"),
        format!("no stderr line from the child:\n{}", e.stderr),
    );
    let completed = e.num("completed");
    let (work, outer) = (calls_in(&out, "work"), calls_in(&out, "outer"));
    t.check(
        name,
        (work, outer) == (BEFORE + AFTER, 1),
        format!("the parent's file holds {work} work and {outer} outer calls"),
    );
    let parent_exit = e.exit_s("last_call_ns");
    t.check_exit(name, parent_exit);
    Row {
        fault: name.into(),
        completed,
        readable: work + outer,
        lost: Some(e.num("lost")),
        exit: format!("child {}, parent {}", secs(child_exit), secs(parent_exit)),
        survives: "the parent's profile, whole (with the call open at the fork); the child \
                   records nothing and says so on stderr"
            .into(),
        remedy: "-",
    }
}

fn sigterm(t: &mut Table, name: &str) -> Row {
    let dir = tempfile::tempdir().expect("a directory");
    let out = dir.path().join("out.h5");
    let progress = t.scratch().join("progress-sigterm");
    let mut c = spawn("sigterm", &env(&out, 0), Some(&progress));
    c.until("the signal thread", |l| l == "RESULT ready=1");
    c.until_progress(CALLS);
    c.signal(libc::SIGTERM);
    let e = c.end();
    let completed = e.num("completed");
    let readable = calls_in(&out, "work");
    let lost = e.num("lost");
    t.check(
        name,
        e.status.success(),
        format!("exit status {}", e.status),
    );
    t.check(
        name,
        completed == readable + lost,
        format!("completed {completed} != readable {readable} + lost {lost}"),
    );
    let exit = e.exit_ns.saturating_sub(e.num("sigterm_ns")) as f64 / 1e9;
    t.check_exit(name, exit);
    Row {
        fault: name.into(),
        completed,
        readable,
        lost: Some(lost),
        exit: secs(exit),
        survives: "everything, in the output".into(),
        remedy: "-",
    }
}

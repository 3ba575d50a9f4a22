//! Reading untrusted files in a child process, so that nothing the HDF5 C library does on a
//! corrupt file (crash, abort, endless loop) reaches the user as anything but one line.
//!
//! The parent re-runs itself with [`CHILD_ENV`] set, stdout inherited and stderr piped. The
//! child prints results to stdout, at most one error line to stderr, and a heartbeat
//! ([`TICK`]) to stderr at most once a second while it reads. The parent forwards ordinary
//! stderr lines, and turns a death by signal, or no heartbeat for the stall limit, into one
//! line naming the file; it exits 2 for every bad input.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStderr, Command, ExitCode, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Set in the child's environment.
pub(crate) const CHILD_ENV: &str = "SCOPEPROF_CHILD";
/// The heartbeat line.
pub(crate) const TICK: &str = "\u{1}scopeprof-tick";

/// Exit status for bad input (and usage errors, as clap uses).
pub(crate) const BAD_INPUT: u8 = 2;

/// Whether this process is the reading child.
pub(crate) fn is_child() -> bool {
    std::env::var_os(CHILD_ENV).is_some()
}

/// Runs `f`, a pure computation that touches no file (nesting, sorting in memory), with a
/// heartbeat from a helper thread, so a long but healthy computation is not taken for a hang.
pub(crate) fn busy<T>(f: impl FnOnce() -> T) -> T {
    if !is_child() {
        return f();
    }
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = done.clone();
    let ticker = std::thread::spawn(move || {
        while !flag.load(std::sync::atomic::Ordering::Relaxed) {
            std::thread::park_timeout(Duration::from_secs(1));
            let _ = writeln!(std::io::stderr(), "{TICK}");
        }
    });
    let out = f();
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    ticker.thread().unpark();
    let _ = ticker.join();
    out
}

/// A heartbeat for the child's reading loops (rate-limited to one per second).
pub(crate) struct Heartbeat {
    last: Instant,
    on: bool,
}

impl Heartbeat {
    pub(crate) fn new() -> Heartbeat {
        Heartbeat {
            last: Instant::now(),
            on: is_child(),
        }
    }

    pub(crate) fn tick(&mut self) {
        if self.on && self.last.elapsed() >= Duration::from_secs(1) {
            self.last = Instant::now();
            let _ = writeln!(std::io::stderr(), "{TICK}");
        }
    }
}

/// Runs this binary again as the reading child and reports its outcome for `file`. Exit
/// statuses in `verdicts` (e.g. `check`'s 1 and 3) are results, not failures: they pass
/// through with the child's messages.
pub(crate) fn run_child(file: &str, stall: Duration, verdicts: &[u8]) -> ExitCode {
    let fail = |msg: String| {
        eprintln!("scopeprof: {file}: {msg}");
        ExitCode::from(BAD_INPUT)
    };
    let mut child = match spawn_child() {
        Ok(c) => c,
        Err(msg) => return fail(msg),
    };
    let stderr = child.stderr.take().expect("piped by spawn_child");
    let (rx, reader) = forward_lines(stderr);
    let (lines, stalled) = watch_child(&mut child, &rx, stall);
    let status = child.wait();
    let _ = reader.join();
    if stalled {
        return fail(format!(
            "reading made no progress for {} s and was stopped (the HDF5 library looped on what \
             is probably a corrupt file)",
            stall.as_secs()
        ));
    }
    match status {
        Ok(s) => child_outcome(s, &lines, verdicts).unwrap_or_else(fail),
        Err(e) => fail(format!("lost the reading child process: {e}")),
    }
}

/// Starts this executable again, with this process's arguments, as the reading child (stdin
/// closed, stdout inherited, stderr piped); the error is the message for the user.
fn spawn_child() -> Result<Child, String> {
    let exe = std::env::current_exe().map_err(|e| {
        format!("cannot find the scopeprof executable to read in a child process: {e}")
    })?;
    Command::new(exe)
        .args(std::env::args_os().skip(1))
        .env(CHILD_ENV, "1")
        .stdin(Stdio::null())
        .stdout(Stdio::inherit())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start the reading child process: {e}"))
}

/// Sends each line of the child's `stderr` through the returned channel from a reader
/// thread, then `None` at its end.
fn forward_lines(stderr: ChildStderr) -> (mpsc::Receiver<Option<String>>, JoinHandle<()>) {
    let (tx, rx) = mpsc::channel::<Option<String>>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            match line {
                Ok(l) => {
                    if tx.send(Some(l)).is_err() {
                        break;
                    }
                }
                Err(_) => break,
            }
        }
        let _ = tx.send(None);
    });
    (rx, reader)
}

/// Collects the child's stderr lines from `rx` (heartbeats dropped, the last 64 kept) until
/// they end, or kills the child when no line came for `stall`; returns the lines and whether
/// it stalled.
fn watch_child(
    child: &mut Child,
    rx: &mpsc::Receiver<Option<String>>,
    stall: Duration,
) -> (Vec<String>, bool) {
    let mut lines: Vec<String> = Vec::new();
    let mut last = Instant::now();
    let stalled = loop {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(Some(l)) => {
                last = Instant::now();
                if l != TICK {
                    lines.push(l);
                    if lines.len() > 64 {
                        lines.remove(0);
                    }
                }
            }
            Ok(None) | Err(mpsc::RecvTimeoutError::Disconnected) => break false,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if last.elapsed() >= stall {
                    let _ = child.kill();
                    break true;
                }
            }
        }
    };
    (lines, stalled)
}

/// The exit code for a child that ended with `status` after writing `lines` to stderr, or
/// the failure message for the user: success and `verdicts` pass through with the lines, a
/// signal is a crash, and a child's own `scopeprof:` error line is forwarded as it is.
fn child_outcome(
    status: ExitStatus,
    lines: &[String],
    verdicts: &[u8],
) -> Result<ExitCode, String> {
    let verdict = status
        .code()
        .and_then(|c| u8::try_from(c).ok())
        .filter(|c| verdicts.contains(c));
    if status.success() || verdict.is_some() {
        for l in lines {
            eprintln!("{l}");
        }
        return Ok(ExitCode::from(verdict.unwrap_or(0)));
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            return Err(format!(
                "the HDF5 library crashed reading this file ({}); the file is corrupt",
                signal_name(sig)
            ));
        }
    }
    match (status.code(), lines.last()) {
        (Some(2), Some(l)) if l.starts_with("scopeprof: ") => {
            eprintln!("{l}");
            Ok(ExitCode::from(BAD_INPUT))
        }
        (code, last) => Err(format!(
            "reading failed (exit status {}): {}",
            code.map_or_else(|| "?".into(), |c| c.to_string()),
            last.map_or("no message", String::as_str)
        )),
    }
}

fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGILL => "SIGILL",
        libc::SIGKILL => "SIGKILL",
        _ => return format!("signal {sig}"),
    };
    format!("signal {sig}, {name}")
}

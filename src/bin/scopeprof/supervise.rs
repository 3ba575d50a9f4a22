//! Reading untrusted files in a child process, so that nothing the HDF5 C library does on a
//! corrupt file (crash, abort, endless loop) reaches the user as anything but one line.
//!
//! The parent re-runs itself with [`CHILD_ENV`] set, stdout inherited and stderr piped. The
//! child prints results to stdout, at most one error line to stderr, and a heartbeat
//! ([`TICK`]) to stderr at most once a second while it reads. The parent forwards ordinary
//! stderr lines, and turns a death by signal, or no heartbeat for the stall limit, into one
//! line naming the file; it exits 2 for every bad input.
//!
//! The child runs with a data limit (`RLIMIT_DATA`, [`DEFAULT_DATA_LIMIT_MIB`] unless
//! `--data-limit-mib` or [`DATA_LIMIT_ENV`] says otherwise; 0: none): a small file that
//! declares a huge dataset makes an allocation fail in the child, which the parent reports as
//! one line naming the limit, instead of exhausting the machine's memory. libhdf5 runs in the
//! child too, so whatever it does on a corrupt file (a crash, an abort) stays there.

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
/// The reading child's data limit when neither the option nor the environment sets one.
pub(crate) const DEFAULT_DATA_LIMIT_MIB: u64 = 2048;
/// Environment variable with the data limit in MiB (`--data-limit-mib` wins; 0: none).
pub(crate) const DATA_LIMIT_ENV: &str = "SCOPEPROF_DATA_LIMIT_MIB";

/// The data limit in MiB (`None`: unlimited) from the option, else the environment, else the
/// default; the error is the message for the user.
pub(crate) fn data_limit(option: Option<u64>) -> Result<Option<u64>, String> {
    let mib = match option {
        Some(m) => m,
        None => match std::env::var(DATA_LIMIT_ENV) {
            Ok(v) => v.trim().parse().map_err(|_| {
                format!("{DATA_LIMIT_ENV}={v:?} is not a number of MiB (0: no limit)")
            })?,
            Err(_) => DEFAULT_DATA_LIMIT_MIB,
        },
    };
    Ok((mib > 0).then_some(mib))
}

/// In the child: sets the soft `RLIMIT_DATA` to `mib` MiB (at most the hard limit), so an
/// allocation beyond it fails instead of exhausting memory.
pub(crate) fn limit_data(mib: Option<u64>) {
    let Some(mib) = mib else {
        return;
    };
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one `rlimit` into `lim`, which outlives the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_DATA, &mut lim) } != 0 {
        return;
    }
    lim.rlim_cur = mib.saturating_mul(1 << 20).min(lim.rlim_max);
    // SAFETY: setrlimit reads one `rlimit` from `lim`.
    unsafe { libc::setrlimit(libc::RLIMIT_DATA, &lim) };
}

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
pub(crate) fn run_child(
    file: &str,
    stall: Duration,
    verdicts: &[u8],
    limit_mib: Option<u64>,
) -> ExitCode {
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
        Ok(s) => child_outcome(s, &lines, verdicts, limit_mib).unwrap_or_else(fail),
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
    limit_mib: Option<u64>,
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
            let oom = lines.iter().any(|l| l.starts_with("memory allocation of"));
            if let (true, Some(mib)) = (oom, limit_mib) {
                return Err(format!(
                    "reading needed more memory than the data limit of {mib} MiB (the file \
                     declares more data than it is likely to hold; raise the limit with \
                     --data-limit-mib or {DATA_LIMIT_ENV}, 0 for none)"
                ));
            }
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

//! Dumps on a signal (`Builder::dump_on_signal`): the handler only writes a byte to a pipe;
//! a thread of the guard's reads it and dumps the flight recorder's window beside the output,
//! as `<stem>.dump-<SIGNAL>-<unix seconds>.h5` (`-2`, `-3`, ... when that name is taken).
//!
//! The handler is registered through `signal-hook-registry`, as `tokio::signal` registers
//! its own: a handler the program already had (installed with `sigaction` before, or through
//! the registry at any time) keeps running. A raw `sigaction` installed *after* `build()`
//! replaces the registry's and with it this one. In a forked child the handler does
//! nothing (it checks the process id, which is async-signal-safe): the ring and the flusher
//! are the parent's.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

use crate::finalize::dump::DumpHandle;
use crate::Error;

/// The byte a signal writes, and the one the guard's drop writes to stop the thread.
const DUMP: u8 = 1;
const STOP: u8 = 0;

/// A signal's dumps: the registered handler, the pipe and the thread that dumps.
pub(crate) struct SignalDumps {
    id: signal_hook_registry::SigId,
    write: OwnedFd,
    thread: Option<JoinHandle<()>>,
}

impl SignalDumps {
    /// Registers the handler of `signal` and starts the thread that dumps through `handle`
    /// beside `output`.
    ///
    /// # Errors
    /// The signal cannot be handled (`SIGKILL`, `SIGSTOP`, the faults the registry refuses,
    /// an unknown number), or the pipe or the thread cannot be made.
    pub(crate) fn start(handle: DumpHandle, signal: i32, output: &Path) -> Result<Self, Error> {
        let mut fds = [0i32; 2];
        // SAFETY: `fds` has room for the two descriptors pipe2 writes.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io_error("making the dump-on-signal pipe", output));
        }
        // SAFETY: pipe2 succeeded: both descriptors are fresh and owned by nobody else.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // The handler never blocks: a full pipe (dumps asked for faster than they are
        // written) drops the byte, which asked for a dump that is coming anyway.
        // SAFETY: fcntl on a descriptor we own.
        unsafe {
            let flags = libc::fcntl(fds[1], libc::F_GETFL);
            libc::fcntl(fds[1], libc::F_SETFL, flags | libc::O_NONBLOCK);
        }
        let (fd, pid) = (write.as_raw_fd(), std::process::id() as libc::pid_t);
        let action = move || {
            // Async-signal-safe only: getpid and write, no allocation, no lock.
            // SAFETY: both calls are async-signal-safe; `fd` outlives the registration (it
            // is closed only after `unregister` in `drop`).
            unsafe {
                if libc::getpid() == pid {
                    libc::write(fd, [DUMP].as_ptr().cast(), 1);
                }
            }
        };
        // SAFETY: the action is async-signal-safe (see above).
        let id = unsafe { signal_hook_registry::register(signal, action) }.map_err(|e| {
            Error::InvalidOption {
                option: "dump_on_signal",
                reason: format!("signal {signal} cannot be handled: {e}"),
            }
        })?;
        let output = output.to_path_buf();
        let name = signal_name(signal);
        let thread = std::thread::Builder::new()
            .name("scope-profiler-signal".into())
            .spawn(move || serve(read, handle, &output, &name))
            .map_err(|source| {
                signal_hook_registry::unregister(id);
                Error::ThreadSpawn {
                    thread: "scope-profiler-signal",
                    source,
                }
            })?;
        Ok(SignalDumps {
            id,
            write,
            thread: Some(thread),
        })
    }
}

impl Drop for SignalDumps {
    fn drop(&mut self) {
        signal_hook_registry::unregister(self.id);
        // SAFETY: writing one byte from a live buffer to the pipe we own.
        unsafe { libc::write(self.write.as_raw_fd(), [STOP].as_ptr().cast(), 1) };
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The thread: one dump per byte until the stop byte (or the pipe fails).
fn serve(read: OwnedFd, handle: DumpHandle, output: &Path, signal: &str) {
    let mut byte = [0u8; 1];
    loop {
        // SAFETY: reading at most one byte into a live one-byte buffer from a pipe we own.
        let n = unsafe { libc::read(read.as_raw_fd(), byte.as_mut_ptr().cast(), 1) };
        if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        if n != 1 || byte[0] == STOP {
            return;
        }
        let path = dump_name(output, signal);
        match handle.dump(&path) {
            Ok(r) => eprintln!(
                "scope-profiler: {signal}: dumped the last {:.1} s to {}",
                r.window_ns().unwrap_or(0) as f64 / 1e9,
                path.display()
            ),
            Err(e) => eprintln!("scope-profiler: {signal}: the dump failed: {e}"),
        }
    }
}

/// `<stem>.dump-<why>-<unix seconds>.h5` beside `output`, the first of `-2`, `-3`, ... not
/// taken.
pub(crate) fn dump_name(output: &Path, why: &str) -> PathBuf {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let stem = output
        .file_stem()
        .map_or_else(|| "profile".into(), |s| s.to_string_lossy().into_owned());
    let base = format!("{stem}.dump-{why}-{secs}");
    (1..)
        .map(|n| match n {
            1 => output.with_file_name(format!("{base}.h5")),
            n => output.with_file_name(format!("{base}-{n}.h5")),
        })
        .find(|p| std::fs::symlink_metadata(p).is_err())
        .unwrap_or_else(|| output.with_file_name(format!("{base}.h5")))
}

/// `SIGUSR2` and the like, or `signal-<n>`.
fn signal_name(signal: i32) -> String {
    let known = [
        (libc::SIGUSR1, "SIGUSR1"),
        (libc::SIGUSR2, "SIGUSR2"),
        (libc::SIGHUP, "SIGHUP"),
        (libc::SIGQUIT, "SIGQUIT"),
        (libc::SIGPWR, "SIGPWR"),
    ];
    (known.iter().find(|(s, _)| *s == signal))
        .map_or_else(|| format!("signal-{signal}"), |(_, n)| (*n).to_owned())
}

fn io_error(context: &str, path: &Path) -> Error {
    Error::Io {
        context: context.into(),
        path: path.to_path_buf(),
        source: std::io::Error::last_os_error(),
    }
}

//! Running one child of the fault matrix: its `RESULT` and `CHECKPOINT` lines, the count of
//! calls it completed (sampled while it runs, readable after a `kill -9`), going on from a
//! checkpoint, killing it, and when it exited.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use super::child::mono_ns;

/// How long a child may take to reach the next line before the row fails.
const LINE_LIMIT: Duration = Duration::from_secs(60);

/// A running child.
pub(crate) struct Running {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: std::thread::JoinHandle<String>,
    pub results: HashMap<String, String>,
    progress: Option<PathBuf>,
    /// (mono ns, calls completed) every few ms while waiting.
    pub samples: Vec<(u64, u64)>,
    /// When the matrix last let it go on from a checkpoint (mono ns).
    pub released_ns: u64,
}

/// What a child left when it ended.
pub(crate) struct Ended {
    pub results: HashMap<String, String>,
    pub stderr: String,
    pub status: std::process::ExitStatus,
    /// When `wait` returned (mono ns).
    pub exit_ns: u64,
    pub samples: Vec<(u64, u64)>,
    pub released_ns: u64,
}

impl Ended {
    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.results.get(key).map(String::as_str)
    }

    pub(crate) fn num(&self, key: &str) -> u64 {
        self.get(key)
            .unwrap_or_else(|| {
                panic!(
                    "the child reported no {key}: {:?}\n{}",
                    self.results, self.stderr
                )
            })
            .parse()
            .unwrap_or_else(|_| panic!("{key} is no number: {:?}", self.results))
    }

    /// Seconds from the later of its last call and the last release to its exit.
    pub(crate) fn exit_s(&self, from_key: &str) -> f64 {
        let from = self.num(from_key).max(self.released_ns);
        self.exit_ns.saturating_sub(from) as f64 / 1e9
    }
}

/// Starts this binary as the child running `scenario` with `env`.
pub(crate) fn spawn(scenario: &str, env: &[(&str, String)], progress: Option<&Path>) -> Running {
    let mut cmd = Command::new(std::env::current_exe().expect("this test binary"));
    cmd.env("SCOPE_FAULT_CHILD", scenario)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(p) = progress {
        let _ = std::fs::remove_file(p);
        cmd.env("SCOPE_FAULT_PROGRESS", p);
    }
    let mut child = cmd.spawn().expect("start the child");
    let stdout = child.stdout.take().expect("piped");
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let mut stderr = child.stderr.take().expect("piped");
    let stderr = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    Running {
        stdin: child.stdin.take(),
        child,
        lines,
        stderr,
        results: HashMap::new(),
        progress: progress.map(Path::to_path_buf),
        samples: Vec::new(),
        released_ns: 0,
    }
}

impl Running {
    /// Calls completed so far, from the shared progress file.
    pub(crate) fn progress(&self) -> u64 {
        let Some(p) = &self.progress else { return 0 };
        match std::fs::read(p) {
            Ok(b) if b.len() >= 8 => u64::from_le_bytes(b[..8].try_into().expect("8 bytes")),
            _ => 0,
        }
    }

    fn sample(&mut self) {
        let n = self.progress();
        self.samples.push((mono_ns(), n));
    }

    /// Reads lines (keeping the results) until one satisfies `want`; panics after a minute
    /// or when the child's output ends first.
    pub(crate) fn until(&mut self, what: &str, mut want: impl FnMut(&str) -> bool) {
        let deadline = Instant::now() + LINE_LIMIT;
        loop {
            match self.lines.recv_timeout(Duration::from_millis(2)) {
                Ok(line) => {
                    if let Some((k, v)) =
                        line.strip_prefix("RESULT ").and_then(|r| r.split_once('='))
                    {
                        self.results.insert(k.to_owned(), v.to_owned());
                    }
                    if want(&line) {
                        return;
                    }
                }
                Err(RecvTimeoutError::Timeout) => self.sample(),
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("the child ended before {what}: {:?}", self.results)
                }
            }
            assert!(Instant::now() < deadline, "no {what} within {LINE_LIMIT:?}");
        }
    }

    /// Waits until the child stops at checkpoint `name`.
    pub(crate) fn at_checkpoint(&mut self, name: &str) {
        let want = format!("CHECKPOINT {name}");
        self.until(&want.clone(), |l| l == want);
    }

    /// Waits (sampling) until the child has completed `calls` calls.
    pub(crate) fn until_progress(&mut self, calls: u64) {
        let deadline = Instant::now() + LINE_LIMIT;
        while self.progress() < calls {
            self.sample();
            assert!(Instant::now() < deadline, "no progress to {calls} calls");
            std::thread::sleep(Duration::from_millis(2));
        }
        self.sample();
    }

    /// Lets it go on from a checkpoint.
    pub(crate) fn release(&mut self) {
        self.released_ns = mono_ns();
        let stdin = self.stdin.as_mut().expect("stdin");
        stdin.write_all(b"go\n").expect("write to the child");
        stdin.flush().expect("flush");
    }

    /// Sends `signal` to it.
    pub(crate) fn signal(&self, signal: i32) {
        // SAFETY: kill on our own child's pid; no memory is involved.
        let r = unsafe { libc::kill(self.child.id() as i32, signal) };
        assert_eq!(r, 0, "kill");
    }

    /// Waits for it to end, reading the rest of its output.
    pub(crate) fn end(mut self) -> Ended {
        drop(self.stdin.take());
        let status = self.child.wait().expect("wait");
        let exit_ns = mono_ns();
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(5)) {
            if let Some((k, v)) = line.strip_prefix("RESULT ").and_then(|r| r.split_once('=')) {
                self.results.insert(k.to_owned(), v.to_owned());
            }
        }
        let n = self.progress();
        self.samples.push((exit_ns, n));
        let stderr = self.stderr.join().unwrap_or_default();
        if std::env::var_os("SCOPE_FAULT_VERBOSE").is_some() {
            eprintln!("--- the child's stderr:\n{stderr}---");
        }
        Ended {
            results: self.results,
            stderr,
            status,
            exit_ns,
            samples: self.samples,
            released_ns: self.released_ns,
        }
    }

    /// `kill -9`, then [`end`](Self::end).
    pub(crate) fn kill9(self) -> Ended {
        self.signal(libc::SIGKILL);
        self.end()
    }
}

/// Calls completed in the `window_ns` before the last sample.
pub(crate) fn completed_in_last(samples: &[(u64, u64)], window_ns: u64) -> u64 {
    let Some(&(t_end, n_end)) = samples.last() else {
        return 0;
    };
    let since = t_end.saturating_sub(window_ns);
    // The latest sample at or before the window's start (the earliest one if none).
    let before = samples
        .iter()
        .rev()
        .find(|(t, _)| *t <= since)
        .or(samples.first())
        .map_or(0, |s| s.1);
    n_end - before.min(n_end)
}

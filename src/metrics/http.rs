//! The endpoint's thread: one thread serves every connection with non-blocking sockets and
//! `poll(2)`, so no client, however slow or silent, delays another or the guard's drop.
//!
//! - Up to [`MAX_CONNECTIONS`] connections are served at once; each must send its request head
//!   (at most [`request::MAX_HEAD`] bytes) within [`request::READ_LIMIT`] of being accepted and
//!   take its answer within [`request::WRITE_LIMIT`], or it is closed. A silent or slow client
//!   costs one slot and a head buffer until then, never a thread.
//! - A connection beyond that many is answered `503 Service Unavailable` at once (one
//!   non-blocking write) and closed: memory stays bounded however many scrapers come, and a
//!   flood of idle connections ends in an answer, not a hang.
//! - The listening socket is non-blocking too: accepting never blocks the thread.
//!
//! The text served is the hub's snapshot, rendered once per published snapshot and shared by
//! every scrape; nothing here ever waits for the flusher.
//!
//! Stopping: the guard's drop marks the server stopped and closes its end of a wake-up socket
//! pair, which ends the thread's `poll` at once; it joins the thread, which closes every open
//! connection as it returns. The thread only ever makes non-blocking calls, so the drop waits
//! for at most one pass of the loop, never for a scraper.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::fork::{self, Protected};
use super::request::{self, Answer};
use super::Hub;
use crate::Error;

/// Connections served at once; the next one is answered 503.
pub(crate) const MAX_CONNECTIONS: usize = 256;
/// How long accepting pauses after an error such as running out of descriptors.
const ACCEPT_PAUSE: Duration = Duration::from_millis(10);

/// The running endpoint (stopped when dropped).
#[derive(Debug)]
pub(crate) struct Server {
    // Field order matters: the fork slot is given back before the listener is closed.
    protected: Protected,
    /// `None` only in a forked child's copy, which must not close it.
    listener: Option<Arc<TcpListener>>,
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    /// Closed to wake the serving thread.
    wake: Option<UnixStream>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// Starts serving `hub` on `listener` (already bound, so a failed bind is the caller's
    /// error at `build()`).
    ///
    /// # Errors
    /// [`Error::ThreadSpawn`] when the thread cannot be started; [`Error::MetricsEndpoint`]
    /// when the socket's address cannot be read or the socket cannot be made non-blocking.
    pub(crate) fn start(listener: TcpListener, hub: Arc<Hub>) -> Result<Server, Error> {
        let endpoint_err = |source| Error::MetricsEndpoint {
            addr: "the bound endpoint".into(),
            source,
        };
        let addr = listener.local_addr().map_err(endpoint_err)?;
        listener.set_nonblocking(true).map_err(endpoint_err)?;
        let (wake, woken) = UnixStream::pair().map_err(endpoint_err)?;
        woken.set_nonblocking(true).map_err(endpoint_err)?;
        let protected = fork::protect(listener.as_raw_fd());
        let listener = Arc::new(listener);
        let stop = Arc::new(AtomicBool::new(false));
        let (l, s) = (listener.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("scope-profiler-metrics".into())
            .spawn(move || Loop::new(&l, &woken, &s, &hub).run())
            .map_err(|source| Error::ThreadSpawn {
                thread: "scope-profiler-metrics",
                source,
            })?;
        Ok(Server {
            protected,
            listener: Some(listener),
            addr,
            stop,
            wake: Some(wake),
            thread: Some(thread),
        })
    }

    /// The address it listens on (with the port the system chose for port 0).
    pub(crate) fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.protected.in_forked_child() {
            // The child's copy: its thread does not exist here and the descriptor was closed
            // at the fork; joining or closing anything would touch what is not ours.
            std::mem::forget(self.thread.take());
            std::mem::forget(self.listener.take());
            std::mem::forget(self.wake.take());
            return;
        }
        self.stop.store(true, Ordering::SeqCst);
        // Closing our end makes the thread's end readable (end of file): its poll returns.
        drop(self.wake.take());
        if let Some(h) = self.thread.take() {
            let _ = h.join();
        }
        // Then the fields drop: the fork slot first, then the listener (closed).
    }
}

/// One connection being served.
struct Conn {
    stream: TcpStream,
    /// When it is closed whatever its state.
    deadline: Instant,
    state: State,
}

enum State {
    /// Reading the request head: the bytes so far, and where a blank line may start.
    Reading { buf: Vec<u8>, scanned: usize },
    /// Writing the answer: `written` bytes of it are out.
    Writing { answer: Answer, written: usize },
    /// Finished or failed: closed on the next pass.
    Done,
}

/// The serving thread's state.
struct Loop<'a> {
    listener: &'a TcpListener,
    woken: &'a UnixStream,
    stop: &'a AtomicBool,
    hub: &'a Hub,
    conns: Vec<Conn>,
    fds: Vec<libc::pollfd>,
    /// Accepting resumes at this instant (after an error such as `EMFILE`).
    paused: Option<Instant>,
}

impl<'a> Loop<'a> {
    fn new(l: &'a TcpListener, woken: &'a UnixStream, stop: &'a AtomicBool, hub: &'a Hub) -> Self {
        Loop {
            listener: l,
            woken,
            stop,
            hub,
            conns: Vec::new(),
            fds: Vec::new(),
            paused: None,
        }
    }

    fn run(mut self) {
        while !self.stop.load(Ordering::SeqCst) {
            let now = Instant::now();
            self.conns
                .retain(|c| c.deadline > now && !matches!(c.state, State::Done));
            if self.paused.is_some_and(|p| p <= now) {
                self.paused = None;
            }
            if !self.wait(now) {
                continue;
            }
            // Only the drop closing its end makes the wake-up socket ready.
            if self.fds[1].revents != 0 {
                return;
            }
            for (c, fd) in self.conns.iter_mut().zip(&self.fds[2..]) {
                if fd.revents != 0 {
                    c.progress(self.hub);
                }
            }
            if self.fds[0].revents != 0 {
                self.accept_all();
            }
        }
    }

    /// Polls the listener, the wake-up socket and every connection until one is ready or
    /// the nearest deadline; false when interrupted or failed (the caller loops).
    fn wait(&mut self, now: Instant) -> bool {
        let pollfd = |fd: i32, events: i16| libc::pollfd {
            fd,
            events,
            revents: 0,
        };
        self.fds.clear();
        let accept = if self.paused.is_some() {
            0
        } else {
            libc::POLLIN
        };
        self.fds.push(pollfd(self.listener.as_raw_fd(), accept));
        self.fds.push(pollfd(self.woken.as_raw_fd(), libc::POLLIN));
        for c in &self.conns {
            let events = match c.state {
                State::Writing { .. } => libc::POLLOUT,
                _ => libc::POLLIN,
            };
            self.fds.push(pollfd(c.stream.as_raw_fd(), events));
        }
        let next = self
            .conns
            .iter()
            .map(|c| c.deadline)
            .chain(self.paused)
            .min();
        let timeout = next.map_or(-1, |d| {
            // Rounded up, so a deadline is past when poll returns.
            let ms = d.saturating_duration_since(now).as_micros().div_ceil(1000);
            ms.min(i32::MAX as u128) as i32
        });
        // SAFETY: `fds` is a valid array of `fds.len()` pollfd structures that outlives the
        // call; every descriptor in it is open (owned by `self`).
        let n = unsafe { libc::poll(self.fds.as_mut_ptr(), self.fds.len() as _, timeout) };
        n >= 0
    }

    /// Accepts every waiting connection: served while there is room, answered 503 beyond.
    fn accept_all(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    if self.conns.len() >= MAX_CONNECTIONS || stream.set_nonblocking(true).is_err()
                    {
                        refuse(stream);
                        continue;
                    }
                    self.conns.push(Conn {
                        stream,
                        deadline: Instant::now() + request::READ_LIMIT,
                        state: State::Reading {
                            buf: Vec::new(),
                            scanned: 0,
                        },
                    });
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                // Out of descriptors or a transient network error: do not spin on it.
                Err(_) => {
                    self.paused = Some(Instant::now() + ACCEPT_PAUSE);
                    return;
                }
            }
        }
    }
}

/// Answers a connection beyond [`MAX_CONNECTIONS`] with one non-blocking write and closes it.
fn refuse(mut stream: TcpStream) {
    let _ = stream.set_nonblocking(true);
    let _ = stream.write(request::UNAVAILABLE);
    let _ = stream.shutdown(Shutdown::Write);
}

impl Conn {
    /// Reads or writes what the socket allows now.
    fn progress(&mut self, hub: &Hub) {
        match &mut self.state {
            State::Reading { buf, scanned } => match read_some(&mut self.stream, buf, scanned) {
                Some(Some(answer)) => {
                    self.deadline = Instant::now() + request::WRITE_LIMIT;
                    let answer = answer.resolve(|| hub.text(), || hub.start_dump());
                    self.state = State::Writing { answer, written: 0 };
                    self.progress(hub);
                }
                Some(None) => {}
                None => self.state = State::Done,
            },
            State::Writing { answer, written } => {
                match write_some(&mut self.stream, answer, written) {
                    Some(false) => {}
                    Some(true) => {
                        let _ = self.stream.shutdown(Shutdown::Write);
                        self.state = State::Done;
                    }
                    None => self.state = State::Done,
                }
            }
            State::Done => {}
        }
    }
}

/// Reads what is there into `buf`: `Some(Some(answer))` once the head is complete (or too
/// large), `Some(None)` to wait for more, `None` when the client closed or failed.
fn read_some(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    scanned: &mut usize,
) -> Option<Option<request::Pending>> {
    const CHUNK: usize = 2048;
    let mut chunk = [0u8; CHUNK];
    loop {
        let room = request::MAX_HEAD - buf.len();
        match stream.read(&mut chunk[..room.min(CHUNK)]) {
            Ok(0) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Some(None),
            Err(_) => return None,
        }
        if let Some(end) = request::head_end(buf, *scanned) {
            return Some(Some(request::Pending::Parsed(request::parse(&buf[..end]))));
        }
        // A blank line split across reads starts at most 3 bytes before the end.
        *scanned = buf.len().saturating_sub(3);
        if buf.len() == request::MAX_HEAD {
            return Some(Some(request::Pending::TooLarge));
        }
    }
}

/// Writes what the socket takes of `answer`: `Some(true)` when all is out, `Some(false)` to
/// wait, `None` when the client failed.
fn write_some(stream: &mut TcpStream, answer: &Answer, written: &mut usize) -> Option<bool> {
    loop {
        let Some(rest) = answer.rest(*written) else {
            return Some(true);
        };
        match stream.write(rest) {
            Ok(0) => return None,
            Ok(n) => *written += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Some(false),
            Err(_) => return None,
        }
    }
}

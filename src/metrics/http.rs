//! The endpoint's threads: one accepts connections and hands them to [`WORKERS`] workers
//! through a bounded queue; each worker serves one connection at a time (see
//! [`super::request`]). When every worker is busy and the queue is full, new connections wait
//! in the kernel's backlog, so memory stays bounded however many scrapers come; a slow or
//! malformed client holds one worker for at most the request time-outs. The text served is the
//! hub's snapshot, rendered once per published snapshot and shared by every scrape; nothing here
//! ever waits for the flusher.
//!
//! Stopping: the guard's drop marks the server stopped and shuts the listening socket down,
//! which wakes the accepting thread (Linux returns `EINVAL` from a blocked `accept`); it
//! joins that thread. Workers finish the connection they serve and exit when the queue
//! closes, within the time-outs; the guard does not wait for them.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::fork::{self, Protected};
use super::Hub;
use crate::Error;

/// Connections served at once.
pub(crate) const WORKERS: usize = 4;
/// Accepted connections waiting for a worker.
const QUEUE: usize = 16;

/// The running endpoint (stopped when dropped).
#[derive(Debug)]
pub(crate) struct Server {
    // Field order matters: the fork slot is given back before the listener is closed.
    protected: Protected,
    /// `None` only in a forked child's copy, which must not close it.
    listener: Option<Arc<TcpListener>>,
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

impl Server {
    /// Starts serving `hub` on `listener` (already bound, so a failed bind is the caller's
    /// error at `build()`).
    ///
    /// # Errors
    /// [`Error::ThreadSpawn`] when a thread cannot be started; [`Error::MetricsEndpoint`] when
    /// the socket's address cannot be read.
    pub(crate) fn start(listener: TcpListener, hub: Arc<Hub>) -> Result<Server, Error> {
        let addr = listener
            .local_addr()
            .map_err(|source| Error::MetricsEndpoint {
                addr: "the bound endpoint".into(),
                source,
            })?;
        let protected = fork::protect(listener.as_raw_fd());
        let listener = Arc::new(listener);
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = sync_channel::<TcpStream>(QUEUE);
        let rx = Arc::new(Mutex::new(rx));
        for _ in 0..WORKERS {
            let (rx, hub) = (rx.clone(), hub.clone());
            spawn("scope-profiler-metrics-worker", move || work(&rx, &hub))?;
        }
        let (l, s) = (listener.clone(), stop.clone());
        let acceptor = spawn("scope-profiler-metrics", move || {
            while !s.load(Ordering::SeqCst) {
                match l.accept() {
                    Ok((conn, _)) => {
                        if s.load(Ordering::SeqCst) || tx.send(conn).is_err() {
                            return;
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    // Out of descriptors or a transient network error: do not spin.
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        })?;
        Ok(Server {
            listener: Some(listener),
            addr,
            stop,
            acceptor: Some(acceptor),
            protected,
        })
    }

    /// The address it listens on (with the port the system chose for port 0).
    pub(crate) fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

fn spawn(name: &'static str, f: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>, Error> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .map_err(|source| Error::ThreadSpawn {
            thread: name,
            source,
        })
}

/// A worker: serves queued connections until the queue closes.
fn work(rx: &Mutex<Receiver<TcpStream>>, hub: &Hub) {
    loop {
        let next = rx.lock().unwrap_or_else(|e| e.into_inner()).recv();
        match next {
            Ok(conn) => super::request::serve(conn, || hub.text()),
            Err(_) => return,
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.protected.in_forked_child() {
            // The child's copy: its threads do not exist here and the descriptor was closed
            // at the fork; joining or closing anything would touch what is not ours.
            std::mem::forget(self.acceptor.take());
            std::mem::forget(self.listener.take());
            return;
        }
        self.stop.store(true, Ordering::SeqCst);
        if let Some(l) = &self.listener {
            // SAFETY: shutdown on a descriptor this server owns and keeps open (the Arc)
            // until after the accepting thread has been joined.
            unsafe {
                libc::shutdown(l.as_raw_fd(), libc::SHUT_RDWR);
            }
        }
        if let Some(h) = self.acceptor.take() {
            let _ = h.join();
        }
        // Then the fields drop: the fork slot first, then the listener (closed).
    }
}

//! A `Write` that hands full 1 MiB buffers to a writer thread, so copying the output into the
//! kernel overlaps with reading and encoding. At most [`DEPTH`] buffers wait, so memory stays
//! bounded; an I/O error of the thread is returned by the next write or by [`Pipe::finish`].

use std::fs::File;
use std::io::Write;
use std::sync::mpsc::{sync_channel, SyncSender};
use std::thread::JoinHandle;

/// Buffer size handed over.
const BUF: usize = 1 << 20;
/// Buffers in flight.
const DEPTH: usize = 4;

/// The writing end.
pub(crate) struct Pipe {
    buf: Vec<u8>,
    tx: Option<SyncSender<Vec<u8>>>,
    thread: Option<JoinHandle<std::io::Result<File>>>,
}

impl Pipe {
    /// Starts the writer thread for `file`.
    pub(crate) fn new(mut file: File) -> Pipe {
        let (tx, rx) = sync_channel::<Vec<u8>>(DEPTH);
        let thread = std::thread::spawn(move || {
            for buf in rx {
                file.write_all(&buf)?;
            }
            Ok(file)
        });
        Pipe {
            buf: Vec::with_capacity(BUF),
            tx: Some(tx),
            thread: Some(thread),
        }
    }

    fn send(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let full = std::mem::replace(&mut self.buf, Vec::with_capacity(BUF));
        let sent = self.tx.as_ref().map(|tx| tx.send(full));
        match sent {
            Some(Ok(())) => Ok(()),
            // The thread ended early: it failed; `finish` returns its error.
            _ => self.finish().map(drop),
        }
    }

    /// Writes what is left, stops the thread and returns the file (or the first I/O error).
    pub(crate) fn finish(&mut self) -> std::io::Result<File> {
        if !self.buf.is_empty() {
            let last = std::mem::take(&mut self.buf);
            if let Some(tx) = &self.tx {
                let _ = tx.send(last);
            }
        }
        self.tx = None;
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(std::io::Error::other("the output writer thread panicked")),
            None => Err(std::io::Error::other("the output was already finished")),
        }
    }
}

impl Write for Pipe {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.write_all(data)?;
        Ok(data.len())
    }

    fn write_all(&mut self, data: &[u8]) -> std::io::Result<()> {
        if self.buf.len() + data.len() > BUF {
            self.send()?;
        }
        self.buf.extend_from_slice(data);
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.send()
    }
}

impl Drop for Pipe {
    fn drop(&mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

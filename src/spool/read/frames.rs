//! The frames of a spool file, read one after another: each a 5-byte head (tag,
//! little-endian `u32` length), then its payload.

use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// A spool file read frame by frame: a 5-byte head (tag, little-endian `u32` length), then
/// the payload.
pub(crate) struct Frames {
    input: BufReader<File>,
    /// Offset in the file of the next byte `input` yields.
    pos: u64,
    /// The file's length, which a skipped frame is checked against (a spool read back is no
    /// longer written to).
    file_len: u64,
    /// The payload of the latest frame read.
    pub(crate) payload: Vec<u8>,
}

/// What [`Frames::next`] found.
pub(crate) enum Frame {
    /// A whole frame with this tag; its payload is in [`Frames::payload`].
    Read(u8),
    /// A whole frame skipped unread.
    Skipped,
    /// The end of the spool, with this many bytes after the last whole frame.
    Torn(u64),
}

impl Frames {
    /// Opens the spool at `path`: a regular file only. A link at `path` is not followed and a
    /// FIFO or device is refused without blocking (`O_NOFOLLOW | O_NONBLOCK`, then `fstat`),
    /// since a spool may be a file someone else planted beside the output.
    pub(crate) fn open(path: &Path) -> io::Result<Frames> {
        let file = open_regular(path)?;
        let file_len = file.metadata()?.len();
        Ok(Frames {
            input: BufReader::with_capacity(1 << 20, file),
            pos: 0,
            file_len,
            payload: Vec::new(),
        })
    }

    /// Reads the next frame, or skips its payload unread when `skip(tag)`.
    pub(crate) fn next(&mut self, skip: impl Fn(u8) -> bool) -> io::Result<Frame> {
        let mut head = [0u8; 5];
        let got = read_full(&mut self.input, &mut head)?;
        if got < 5 {
            return Ok(Frame::Torn(got as u64));
        }
        let tag = head[0];
        let len = u32::from_le_bytes([head[1], head[2], head[3], head[4]]) as usize;
        self.pos += 5;
        if skip(tag) {
            if self.pos + len as u64 > self.file_len {
                return Ok(Frame::Torn(5 + self.file_len.saturating_sub(self.pos)));
            }
            self.input.seek_relative(len as i64)?;
            self.pos += len as u64;
            return Ok(Frame::Skipped);
        }
        self.payload.clear();
        let got = (&mut self.input)
            .take(len as u64)
            .read_to_end(&mut self.payload)?;
        if got < len {
            return Ok(Frame::Torn((5 + got) as u64));
        }
        self.pos += len as u64;
        Ok(Frame::Read(tag))
    }
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
fn read_full(input: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match input.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Opens `path` for reading only if it is a regular file: `O_NOFOLLOW` (a symbolic link is an
/// error, never followed) and `O_NONBLOCK` (opening a FIFO never waits for a writer), then the
/// open file itself is checked, so nothing swapped in between the check and the open is read.
pub(crate) fn open_regular(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "a symbolic link, not a spool file (links are never followed)",
                )
            } else {
                e
            }
        })?;
    if !file.metadata()?.file_type().is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file (a FIFO, device or directory is never read as a spool)",
        ));
    }
    Ok(file)
}

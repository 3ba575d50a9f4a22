//! What the spool keeps and loses when its file cannot be written (a full disk, a read-only
//! or removed directory): calls counted with their time range, the phase's failure, and the
//! file operations that undo a write cut short.
//!
//! A write that fails loses exactly the frames of that write: the file is cut back to the end
//! of the last write that succeeded (always a frame boundary), so what stays on disk reads
//! back whole, and the calls of the lost frames are counted ([`CallSpan`]). Nothing stops the
//! next write from succeeding once there is room again; the phase is reported as failed
//! ([`SpoolFailure`]) all the same, since its file no longer holds all of its calls.

use std::fs::File;
use std::io::{self, Seek, Write};
use std::path::{Path, PathBuf};

/// A number of calls and the time they cover (clock ns; first start, last end).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CallSpan {
    pub calls: u64,
    pub first_ns: i64,
    pub last_ns: i64,
}

impl CallSpan {
    /// Counts one call from `start` to `end`.
    #[inline]
    pub(crate) fn add(&mut self, start: i64, end: i64) {
        if self.calls == 0 {
            (self.first_ns, self.last_ns) = (start, end);
        } else {
            self.first_ns = self.first_ns.min(start);
            self.last_ns = self.last_ns.max(end);
        }
        self.calls += 1;
    }

    /// Adds `other`'s calls and range.
    pub(crate) fn merge(&mut self, other: CallSpan) {
        if other.calls == 0 {
            return;
        }
        if self.calls == 0 {
            *self = other;
            return;
        }
        self.calls += other.calls;
        self.first_ns = self.first_ns.min(other.first_ns);
        self.last_ns = self.last_ns.max(other.last_ns);
    }
}

/// Why a phase's spool does not hold all of the phase's calls.
#[derive(Debug)]
pub(crate) struct SpoolFailure {
    /// What was being done (`"writing the spool"`, ...).
    pub context: &'static str,
    /// The file concerned.
    pub path: PathBuf,
    /// The first error of the phase.
    pub error: io::Error,
    /// Calls of the phase whose per-call detail is lost (their statistics are not).
    pub lost: CallSpan,
    /// Where the calls that were written are, when the phase's file could not be moved aside
    /// (it stays at the spool's own name until a later phase can move it).
    pub kept_at: Option<PathBuf>,
}

/// What a rotation hands over: the phase's file and what it holds.
#[derive(Debug, Default)]
pub(crate) struct Rotated {
    /// The phase's file, moved aside (`None`: the phase has none).
    pub file: Option<PathBuf>,
    /// Calls the file holds, readable.
    pub calls: u64,
    /// Task rows and polls it holds.
    pub lanes: super::LaneCounts,
    /// Set when the file does not hold every call of the phase.
    pub failure: Option<SpoolFailure>,
}

/// Writes all of `buf` at the file's position. On failure the file is cut back to `keep`
/// bytes (where this write began) and the position put there; `Err(true)` when that worked,
/// `Err(false)` when the file may now end in a torn frame (the error is the write's).
pub(crate) fn write_or_undo(
    file: &mut File,
    buf: &[u8],
    keep: u64,
) -> Result<(), (io::Error, bool)> {
    let mut done = 0;
    while done < buf.len() {
        match file.write(&buf[done..]) {
            Ok(0) => {
                let e = io::Error::new(io::ErrorKind::WriteZero, "the spool took no bytes");
                return Err((e, undo(file, keep)));
            }
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err((e, undo(file, keep))),
        }
    }
    Ok(())
}

/// Cuts `file` back to `len` bytes (freeing the space the failed write took); whether it
/// worked.
fn undo(file: &mut File, len: u64) -> bool {
    file.set_len(len).is_ok() && file.seek(io::SeekFrom::Start(len)).is_ok()
}

/// Whether `path` is still the file `file` is open on.
pub(crate) fn still_at(path: &Path, file: &File) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::symlink_metadata(path), file.metadata()) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// What an `io::Error` means for the user, in a few words ("disk full", ...).
pub(crate) fn cause(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::StorageFull => "disk full".into(),
        io::ErrorKind::QuotaExceeded => "disk quota exceeded".into(),
        io::ErrorKind::ReadOnlyFilesystem => "read-only file system".into(),
        io::ErrorKind::NotFound => "the output's directory is gone".into(),
        io::ErrorKind::PermissionDenied => "permission denied".into(),
        _ => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_count_and_widen() {
        let mut a = CallSpan::default();
        a.add(10, 20);
        a.add(5, 8);
        assert_eq!((a.calls, a.first_ns, a.last_ns), (2, 5, 20));
        let mut b = CallSpan::default();
        b.merge(CallSpan::default());
        assert_eq!(b, CallSpan::default());
        b.add(30, 40);
        b.merge(a);
        assert_eq!((b.calls, b.first_ns, b.last_ns), (3, 5, 40));
    }

    #[test]
    fn causes_read_as_words() {
        let full = io::Error::from_raw_os_error(libc::ENOSPC);
        assert_eq!(cause(&full), "disk full");
        let ro = io::Error::from_raw_os_error(libc::EROFS);
        assert_eq!(cause(&ro), "read-only file system");
    }
}

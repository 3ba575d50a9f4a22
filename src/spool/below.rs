//! Frame 14 (version 2; only in the flight recorder's segments): the calls that
//! `Builder::flight_min_duration` left out, as much of each as nesting needs to count it under
//! its parent, and no more: its start, its duration and its lane, three varints (~4-6 bytes,
//! where a kept call costs its full row and every column). A dump reads them back to give
//! each kept call the exact number of short calls it enclosed (see
//! [`crate::finalize::nesting`]).
//!
//! Each row is `start - previous start`, `dur`, `lane` (a `task_table` index when `>= 0`, else
//! `-2 - thread`, the lane nesting uses), zigzag LEB128 varints written by the same code as
//! the task edges ([`super::edges`]), buffered up to [`super::CALLS_PER_FRAME`] rows and written
//! at every flush.

use std::io;
use std::path::PathBuf;

use super::read::Cursor;
use super::{SpoolWriter, CALLS_PER_FRAME, TAG_BELOW, WRITE_THRESHOLD};

/// A left-out call as nesting sees it: absolute start and end (ns), and its lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BelowCall {
    pub start_ns: i64,
    pub end_ns: i64,
    /// A task index (`>= 0`), else `-2 - thread`.
    pub lane: i64,
}

impl SpoolWriter {
    /// Buffers one call left out by the threshold (the flusher's cold path for such a call:
    /// three integers into a vector; encoded a frame at a time).
    pub(crate) fn below_call(&mut self, start_ns: i64, dur_ns: i64, lane: i64) {
        self.below.push([start_ns, dur_ns, lane]);
        if self.below.len() >= CALLS_PER_FRAME {
            self.put_below();
            if self.buf.len() >= WRITE_THRESHOLD {
                self.write_out();
            }
        }
    }

    /// Frames the buffered left-out calls (called by `flush`, and when a frame is full).
    pub(super) fn put_below(&mut self) {
        if self.below.is_empty() {
            return;
        }
        self.put_preamble();
        let rows = std::mem::take(&mut self.below);
        super::edges::put_rows(&mut self.buf, TAG_BELOW, rows.iter().copied());
        let mut rows = rows;
        rows.clear();
        self.below = rows; // its capacity, for the next ones
    }
}

/// Hands every left-out call of the spool files `files` to `f`, in spool order: one pass per
/// file that skips every other frame. Memory: one frame.
///
/// # Errors
/// A file cannot be read, or a frame 14 is malformed (the error names the file).
pub(crate) fn for_each_below(files: &[PathBuf], mut f: impl FnMut(BelowCall)) -> io::Result<()> {
    use super::read::frames::{Frame, Frames};
    let mut rows = Vec::new();
    for path in files {
        let mut frames = Frames::open(path)?;
        loop {
            match frames.next(|tag| tag != TAG_BELOW)? {
                Frame::Read(_) => {}
                Frame::Skipped => continue,
                Frame::Torn(_) => break,
            }
            let mut r = Cursor {
                d: &frames.payload,
                at: 0,
            };
            rows.clear();
            super::edges::get_rows(&mut r, &mut rows, |[start, dur, lane]: [i64; 3]| {
                // A duration is never negative and a lane is a task index or -2 - thread.
                let end = start.checked_add(dur).filter(|_| dur >= 0)?;
                (lane >= 0 || (-2 - i64::from(u32::MAX)..=-2).contains(&lane)).then_some(
                    BelowCall {
                        start_ns: start,
                        end_ns: end,
                        lane,
                    },
                )
            })
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "spool {}: a malformed frame of left-out calls",
                        path.display()
                    ),
                )
            })?;
            rows.iter().copied().for_each(&mut f);
        }
    }
    Ok(())
}

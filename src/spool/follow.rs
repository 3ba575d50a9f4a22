//! Reading a spool's lanes (task rows and polls) while the flusher still writes it.
//!
//! A finalize first waits for the flusher to catch up with the recording threads' backlog
//! (up to the buffer budget: ~0.2 s for a task-per-request phase on two cores), then reads
//! the phase's spool back. A [`LaneFollower`] opened on the spool before the finalize asks for
//! the snapshot reads the lanes' frames written so far while it waits, on the thread that
//! would otherwise sleep; after the snapshot has rotated the spool (a rename: the open file
//! stays the phase's), [`LaneFollower::finish`] reads the rest. The calls' frames are
//! skipped: they are read in a pass of their own.

use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;

use super::read::{poll_runs, polls, tasks, Cursor};
use super::{TAG_POLLS, TAG_POLL_RUNS, TAG_TASKS};
use crate::data::rows::{PollRecord, TaskRow};

/// Bytes read at a time.
const BLOCK: usize = 4 << 20;

/// The lanes of one spool file, read as far as it is written.
#[derive(Debug)]
pub(crate) struct LaneFollower {
    file: File,
    /// Start of the next frame not read yet.
    pos: u64,
    block: Vec<u8>,
    tasks: Vec<TaskRow>,
    polls: Vec<PollRecord>,
}

impl LaneFollower {
    /// Opens the spool at `path` (read only; the flusher keeps writing it).
    ///
    /// # Errors
    /// It cannot be opened.
    pub(crate) fn open(path: &Path) -> io::Result<LaneFollower> {
        Ok(LaneFollower {
            file: File::open(path)?,
            pos: 0,
            block: Vec::new(),
            tasks: Vec::new(),
            polls: Vec::new(),
        })
    }

    /// `(device, inode)` of the file it reads: the phase's spool once the snapshot has renamed
    /// it, unless the flusher had to create a new one.
    pub(crate) fn identity(&self) -> io::Result<(u64, u64)> {
        let m = self.file.metadata()?;
        Ok((m.dev(), m.ino()))
    }

    /// Reads every whole frame written so far; returns whether it read any. A frame still
    /// being written is read next time.
    ///
    /// # Errors
    /// Reading fails, or a lanes frame is malformed.
    pub(crate) fn read_available(&mut self) -> io::Result<bool> {
        let end = self.file.metadata()?.len();
        let start = self.pos;
        while self.pos + 5 <= end {
            let want = ((end - self.pos) as usize).min(BLOCK);
            self.block.resize(want, 0);
            self.file.read_exact_at(&mut self.block, self.pos)?;
            let used = self.frames()?;
            if used == 0 {
                // A frame longer than a block: read it whole, or wait for the rest of it.
                let len = frame_len(&self.block) as u64;
                if self.pos + 5 + len > end {
                    break;
                }
                self.block.resize(5 + len as usize, 0);
                self.file.read_exact_at(&mut self.block, self.pos)?;
                let used = self.frames()?;
                self.pos += used as u64;
                continue;
            }
            self.pos += used as u64;
        }
        Ok(self.pos > start)
    }

    /// Decodes the whole frames at the start of `block`; returns the bytes they take.
    fn frames(&mut self) -> io::Result<usize> {
        let mut at = 0;
        while at + 5 <= self.block.len() {
            let len = frame_len(&self.block[at..]);
            let Some(payload) = self.block.get(at + 5..at + 5 + len) else {
                break;
            };
            let mut r = Cursor { d: payload, at: 0 };
            let ok = match self.block[at] {
                TAG_POLLS => polls(&mut r, &mut self.polls),
                TAG_POLL_RUNS => poll_runs(&mut r, &mut self.polls),
                TAG_TASKS => tasks(&mut r, &mut self.tasks),
                // Header, regions, calls, threads, aggregate: not the lanes'.
                _ => Some(()),
            };
            if ok.is_none() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "spool: a lanes frame is malformed",
                ));
            }
            at += 5 + len;
        }
        Ok(at)
    }

    /// Reads the rest (the file is complete: the snapshot has rotated it) and returns the
    /// task rows and polls, with room for `total` task rows and polls in all (the file's and
    /// those the caller adds). A torn last frame is left out, as [`super::scan`] leaves it out.
    ///
    /// # Errors
    /// As [`LaneFollower::read_available`].
    pub(crate) fn finish(
        mut self,
        (total_tasks, total_polls): (usize, usize),
    ) -> io::Result<(Vec<TaskRow>, Vec<PollRecord>)> {
        self.tasks
            .reserve(total_tasks.saturating_sub(self.tasks.len()));
        self.polls
            .reserve(total_polls.saturating_sub(self.polls.len()));
        self.read_available()?;
        Ok((self.tasks, self.polls))
    }
}

/// The payload length in a frame's 5-byte head (tag, u32 length).
fn frame_len(head: &[u8]) -> usize {
    u32::from_le_bytes([head[1], head[2], head[3], head[4]]) as usize
}

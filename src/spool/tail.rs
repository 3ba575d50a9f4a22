//! Following a spool while its program writes it, for viewers: each [`Tail::refresh`] reads
//! only the whole frames added since the last one, and keeps an index of the calls frames
//! (offset, region, time range) so a viewer re-reads just the frames of the time window it
//! shows ([`Tail::reread`]). Memory: the index (32 bytes per calls frame), the thread table and
//! the region names; never the calls.
//!
//! The file is only read: opened `O_NOFOLLOW | O_NONBLOCK`, never locked, never written. A
//! write the flusher undoes (it cuts the file back to its last whole frame) is noticed by
//! hashing the last frame read at each refresh: when its bytes changed or the file is shorter,
//! the tail walks back to the last frame that is still intact and reads on from there
//! ([`Refreshed::rewound`]). A rotation (the spool renamed aside, a new one created at the
//! path) is told by [`Tail::moved`]: the open file is still the old phase's, read to its end.

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::hash::{Hash, Hasher};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use super::read::frames::open_regular;
use super::read::{
    aggregate, call_columns, calls, header, merge_threads, region, tasks, threads, Cursor,
};
use super::{
    Header, SpoolRegion, TAG_AGGREGATE, TAG_CALLS, TAG_CALL_COLUMNS, TAG_HEADER, TAG_OPEN_CALLS,
    TAG_REGION, TAG_TASKS, TAG_THREADS,
};
use crate::data::rows::{CallRecord, TaskRow, ThreadRow};
use crate::data::stats::Stats;

/// Bytes read at a time.
const BLOCK: usize = 4 << 20;
/// Frames remembered (with a hash of their bytes) to walk back over when a write is undone.
const RECENT: usize = 4096;

/// One calls frame of the spool: where it is and what time it covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CallsFrame {
    /// Offset of its 5-byte head in the file.
    pub offset: u64,
    /// Payload length.
    pub len: u32,
    /// Region id of its calls.
    pub region: u32,
    /// Calls in it.
    pub calls: u32,
    /// Earliest start of its calls (ns).
    pub first_start_ns: i64,
    /// Latest end of its calls (ns).
    pub last_end_ns: i64,
}

/// What one [`Tail::refresh`] found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Refreshed {
    /// New bytes read.
    pub bytes: u64,
    /// Bytes dropped because the file was cut back (an undone write) or rewritten.
    pub rewound: u64,
    /// Nothing read before could be trusted: everything was read again from the start.
    pub restarted: bool,
}

/// A spool file followed as it grows. See the [module docs](self).
#[derive(Debug)]
pub(crate) struct Tail {
    path: PathBuf,
    file: File,
    ident: (u64, u64),
    /// Start of the next frame not read yet.
    pos: u64,
    /// The latest frames read: (offset, payload length, hash of head and payload).
    recent: VecDeque<(u64, u32, u64)>,
    pub(crate) header: Option<Header>,
    pub(crate) regions: Vec<SpoolRegion>,
    pub(crate) threads: Vec<ThreadRow>,
    thread_at: HashMap<u32, usize>,
    /// The latest aggregate statistics (aggregate mode), by region id.
    pub(crate) aggregate: Vec<(u32, Stats)>,
    /// The index of calls frames, in file order.
    pub(crate) frames: Vec<CallsFrame>,
    /// Frames of tags this reader does not know (a newer spool), skipped.
    pub(crate) unknown_frames: u64,
    /// The latest open-calls frame (spool version 2): a later one replaces it.
    pub(crate) open_calls: Option<super::edges::OpenFrame>,
    block: Vec<u8>,
    calls: Vec<CallRecord>,
}

fn bad(path: &Path, what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("spool {}: {what}", path.display()),
    )
}

fn hash_of(bytes: &[u8]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

impl Tail {
    /// Opens the spool at `path` (a regular file, links never followed) for reading only.
    ///
    /// # Errors
    /// It cannot be opened or is not a regular file.
    pub(crate) fn open(path: &Path) -> io::Result<Tail> {
        let file = open_regular(path)?;
        let m = file.metadata()?;
        Ok(Tail {
            path: path.to_path_buf(),
            file,
            ident: (m.dev(), m.ino()),
            pos: 0,
            recent: VecDeque::new(),
            header: None,
            regions: Vec::new(),
            threads: Vec::new(),
            thread_at: HashMap::new(),
            aggregate: Vec::new(),
            frames: Vec::new(),
            unknown_frames: 0,
            open_calls: None,
            block: Vec::new(),
            calls: Vec::new(),
        })
    }

    /// The path it was opened at.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes read so far (the end of the last whole frame).
    pub(crate) fn position(&self) -> u64 {
        self.pos
    }

    /// Whether the path no longer names the open file (renamed aside by a rotation, or
    /// removed once its phase was published): the open file then holds the whole phase.
    pub(crate) fn moved(&self) -> bool {
        match std::fs::symlink_metadata(&self.path) {
            Ok(m) => (m.dev(), m.ino()) != self.ident,
            Err(_) => true,
        }
    }

    /// Reads every whole frame added since the last call, handing the calls of each new calls
    /// frame to `on_calls` and the rows of each tasks frame to `on_tasks`. A frame still being
    /// written is read next time.
    ///
    /// # Errors
    /// Reading fails, the file is not a spool, or a frame is malformed.
    pub(crate) fn refresh(
        &mut self,
        on_calls: &mut dyn FnMut(u32, &[CallRecord]),
        on_tasks: &mut dyn FnMut(&[TaskRow]),
    ) -> io::Result<Refreshed> {
        let mut out = Refreshed::default();
        let end = self.file.metadata()?.len();
        self.check_rewrite(end, &mut out)?;
        let start = self.pos;
        while self.pos + 5 <= end {
            let want = ((end - self.pos) as usize).min(BLOCK);
            self.block.resize(want, 0);
            self.file.read_exact_at(&mut self.block, self.pos)?;
            let mut used = self.frames_in_block(on_calls, on_tasks)?;
            if used == 0 {
                // A frame longer than a block: read it whole, or wait for the rest of it.
                let len = frame_len(&self.block) as u64;
                if self.pos + 5 + len > end {
                    break;
                }
                self.block.resize(5 + len as usize, 0);
                self.file.read_exact_at(&mut self.block, self.pos)?;
                used = self.frames_in_block(on_calls, on_tasks)?;
                if used == 0 {
                    break;
                }
            }
            self.pos += used as u64;
        }
        out.bytes = self.pos - start;
        Ok(out)
    }

    /// Notices a file cut back or rewritten under the frames read, and walks back to the last
    /// frame that is still intact (or to the start).
    fn check_rewrite(&mut self, end: u64, out: &mut Refreshed) -> io::Result<()> {
        let before = self.pos;
        while let Some(&(offset, len, hash)) = self.recent.back() {
            let frame_end = offset + 5 + u64::from(len);
            if frame_end <= end {
                let mut bytes = vec![0u8; 5 + len as usize];
                self.file.read_exact_at(&mut bytes, offset)?;
                if hash_of(&bytes) == hash {
                    break;
                }
            }
            self.recent.pop_back();
            self.pos = offset;
        }
        if self.recent.is_empty() && self.pos > 0 {
            // Walked past every remembered frame: read the file again from its start.
            self.pos = 0;
            out.restarted = true;
        }
        if self.pos < before {
            out.rewound = before - self.pos;
            // It may come from the undone part; the next flush writes a fresh one.
            self.open_calls = None;
            let keep = self.pos;
            self.frames.retain(|f| f.offset < keep);
            if self.pos == 0 {
                self.header = None;
                self.regions.clear();
                self.threads.clear();
                self.thread_at.clear();
                self.aggregate.clear();
                self.frames.clear();
            }
        }
        Ok(())
    }

    /// Decodes the whole frames at the start of `block` (which starts at `pos`); returns the
    /// bytes they take.
    fn frames_in_block(
        &mut self,
        on_calls: &mut dyn FnMut(u32, &[CallRecord]),
        on_tasks: &mut dyn FnMut(&[TaskRow]),
    ) -> io::Result<usize> {
        let mut at = 0;
        let block = std::mem::take(&mut self.block);
        let result = loop {
            if at + 5 > block.len() {
                break Ok(at);
            }
            let len = frame_len(&block[at..]);
            let Some(payload) = block.get(at + 5..at + 5 + len) else {
                break Ok(at);
            };
            let offset = self.pos + at as u64;
            if let Err(e) = self.frame(block[at], offset, payload, on_calls, on_tasks) {
                break Err(e);
            }
            self.recent
                .push_back((offset, len as u32, hash_of(&block[at..at + 5 + len])));
            if self.recent.len() > RECENT {
                self.recent.pop_front();
            }
            at += 5 + len;
        };
        self.block = block;
        result
    }

    /// Decodes one frame (`tag`, at `offset`).
    fn frame(
        &mut self,
        tag: u8,
        offset: u64,
        payload: &[u8],
        on_calls: &mut dyn FnMut(u32, &[CallRecord]),
        on_tasks: &mut dyn FnMut(&[TaskRow]),
    ) -> io::Result<()> {
        let mut r = Cursor { d: payload, at: 0 };
        if self.header.is_none() && tag != TAG_HEADER {
            return Err(bad(
                &self.path,
                "does not begin with a header (not a spool)",
            ));
        }
        match tag {
            TAG_HEADER => {
                self.header = Some(header(&mut r).map_err(|e| bad(&self.path, e))?.0);
            }
            TAG_REGION => region(&mut r, &mut self.regions)
                .ok_or_else(|| bad(&self.path, "a malformed region frame"))?,
            TAG_CALLS | TAG_CALL_COLUMNS => {
                let region = self.decode_calls(tag, payload)?;
                let (mut first, mut last) = (i64::MAX, i64::MIN);
                for c in &self.calls {
                    first = first.min(c.start_ns);
                    last = last.max(c.start_ns.saturating_add(c.dur_ns.max(0)));
                }
                if !self.calls.is_empty() {
                    self.frames.push(CallsFrame {
                        offset,
                        len: payload.len() as u32,
                        region,
                        calls: self.calls.len() as u32,
                        first_start_ns: first,
                        last_end_ns: last,
                    });
                    on_calls(region, &self.calls);
                }
            }
            TAG_THREADS => {
                let rows =
                    threads(&mut r).ok_or_else(|| bad(&self.path, "a malformed threads frame"))?;
                merge_threads(&mut self.threads, &mut self.thread_at, rows);
            }
            TAG_TASKS => {
                let mut rows = Vec::new();
                tasks(&mut r, &mut rows)
                    .ok_or_else(|| bad(&self.path, "a malformed tasks frame"))?;
                on_tasks(&rows);
            }
            TAG_AGGREGATE => {
                self.aggregate = aggregate(&mut r)
                    .ok_or_else(|| bad(&self.path, "a malformed aggregate frame"))?;
            }
            TAG_OPEN_CALLS => {
                let open = super::edges::open_frame(&mut r, self.regions.len())
                    .ok_or_else(|| bad(&self.path, "a malformed open-calls frame"))?;
                self.open_calls = Some(open);
            }
            // Polls, spawn sites, task edges and the places of calls a flight recorder's
            // threshold left out: not what a viewer of calls reads.
            6 | 7 | 9 | 11..=14 => {}
            _ => self.unknown_frames += 1,
        }
        Ok(())
    }

    /// Decodes a calls frame's payload into `self.calls`; returns its region.
    fn decode_calls(&mut self, tag: u8, payload: &[u8]) -> io::Result<u32> {
        let mut r = Cursor { d: payload, at: 0 };
        let declared = self.regions.len();
        if tag == TAG_CALLS {
            calls(&mut r, declared, &mut self.calls)
        } else {
            call_columns(&mut r, declared, &mut self.calls)
        }
        .map_err(|e| bad(&self.path, e))
    }

    /// Reads the calls frames `frames` (from [`Tail::frames`]) again, handing each one's calls
    /// to `on_calls`.
    ///
    /// # Errors
    /// Reading fails (the file was cut back since), or a frame is malformed.
    pub(crate) fn reread(
        &mut self,
        frames: &[CallsFrame],
        on_calls: &mut dyn FnMut(u32, &[CallRecord]),
    ) -> io::Result<()> {
        let mut bytes = Vec::new();
        for f in frames {
            bytes.resize(5 + f.len as usize, 0);
            self.file.read_exact_at(&mut bytes, f.offset)?;
            let region = self.decode_calls(bytes[0], &bytes[5..])?;
            on_calls(region, &self.calls);
        }
        Ok(())
    }
}

/// The payload length in a frame's 5-byte head (tag, u32 length).
fn frame_len(head: &[u8]) -> usize {
    u32::from_le_bytes([head[1], head[2], head[3], head[4]]) as usize
}

//! The spool: the flusher's append-only, on-disk copy of every completed call not yet
//! published in a profile file, so memory stays bounded on long runs and a killed process
//! loses at most the last flush interval.
//!
//! It lives beside the output (`<dir>/.<file name>.spool`) and is a sequence of frames, each
//! `tag: u8, len: u32 LE, payload` (all integers little-endian, strings as `u32 len + UTF-8`):
//!
//! | tag | frame | payload |
//! |---|---|---|
//! | 0 | header | magic `SPRSPOL1`, `start_time_ns` i64, `timestamp` str, `label` str ("" = none), `track_threads` u8, `track_async` u8, `aggregate` u8 |
//! | 1 | region | `id` u32, `line` i64, `name` str, `file` str |
//! | 2 | calls | `region` u32, `n` u32, then n x (`start - previous start`, `dur`, `thread`, `task`, `await`, `gpu`), each a zigzag LEB128 varint (7 bytes per call, typically, against 44 fixed) |
//! | 3 | threads | `n` u32, then n x (`index` u32, `native_id` i64, `start` i64, `end` i64, `cpu` i64, `name` str): rows of the thread table; a later row of the same index replaces an earlier one (an exited thread's row is written once, when it exits; live threads' rows at every flush) |
//! | 4 | aggregate | `n` u32, then n x (`region` u32, `count` u64, `total` u64, `min` u64, `max` u64, `mean` f64, `m2` f64) |
//! | 5 | tasks | `n` u32, then n x (`index`, `tokio_id`, `thread_index`, `created`, `done`, `steps`, `running`, `suspended`, `root_region` (-1 = none)), each a zigzag LEB128 varint: rows of tasks retired during the phase (see [`crate::flusher::task`]) |
//! | 6 | polls | `n` u32, then n x (`region`, `start - previous start`, `dur`, `thread`, `task`), each a zigzag LEB128 varint |
//!
//! A frame cut short by a crash is ignored on reading. The flusher writes frames at every
//! flush interval (and whenever 1 MiB is buffered; fsynced with `durable`); each finalize moves
//! the spool aside as that phase's file (`<spool>.<phase>`, deleted once published) and starts
//! a fresh one, so the spool always holds exactly the unpublished calls. The spool is created
//! with `O_CREAT|O_EXCL|O_NOFOLLOW`, mode 0600, and locked (`flock`) while its process runs, so
//! a later `build()` can tell a crashed run's spool from a live one.
//! [`crate::recover()`] turns a spool into a schema-3 file.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::flusher::stats::Stats;
use crate::output::model::{CallRecord, PollRecord, ThreadRow};

const MAGIC: &[u8; 8] = b"SPRSPOL1";
pub(crate) const TAG_HEADER: u8 = 0;
pub(crate) const TAG_REGION: u8 = 1;
pub(crate) const TAG_CALLS: u8 = 2;
pub(crate) const TAG_THREADS: u8 = 3;
pub(crate) const TAG_AGGREGATE: u8 = 4;
pub(crate) const TAG_TASKS: u8 = 5;
pub(crate) const TAG_POLLS: u8 = 6;
/// Calls buffered per region before they become a frame.
const CALLS_PER_FRAME: usize = 4096;
/// Bytes buffered before they are written out.
const WRITE_THRESHOLD: usize = 1 << 20;

/// The spool path of an output file: `<dir>/.<name>.spool`.
pub(crate) fn spool_path(output: &Path) -> PathBuf {
    let name = output
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "profile".into());
    output.with_file_name(format!(".{name}.spool"))
}

/// What the header records about the run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Header {
    pub start_time_ns: i64,
    pub timestamp: String,
    pub label: Option<String>,
    pub track_threads: bool,
    pub track_async: bool,
    pub aggregate: bool,
}

/// A region as the spool declares it (frame 1): its id is its position.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct SpoolRegion {
    pub name: String,
    /// Source file, "" when unknown.
    pub file: String,
    /// Source line, -1 when unknown.
    pub line: i64,
}

/// The flusher's writing end.
pub(crate) struct SpoolWriter {
    path: PathBuf,
    file: File,
    header: Header,
    buf: Vec<u8>,
    pending: Vec<Vec<CallRecord>>,
    pending_polls: Vec<PollRecord>,
    regions: Vec<SpoolRegion>,
    written_regions: usize,
    /// The first I/O error; once set, nothing more is written.
    error: Option<io::Error>,
    /// Calls that could not be spooled because of `error`.
    pub(crate) lost_calls: u64,
    /// Calls spooled since the spool was created or last rotated.
    pub(crate) unpublished: u64,
    /// Task rows and polls spooled since then (what reading them back reserves room for).
    pub(crate) lanes: LaneCounts,
    /// fsync every write (`Builder::durable`).
    durable: bool,
}

/// How many task rows and polls a spool phase holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct LaneCounts {
    pub tasks: u64,
    pub polls: u64,
}

/// Creates a spool file: never through a link, mode 0600, locked against a second process.
fn create_file(path: &Path) -> io::Result<File> {
    let file = crate::output::files::create_new(path, 0o600)?;
    // The lock tells a later run that this spool belongs to a live process (see
    // `crate::finalize::recover`); a file system without locks is no reason to stop.
    let _ = crate::output::files::try_lock(&file);
    Ok(file)
}

impl SpoolWriter {
    /// Creates the spool (which must not exist yet) and writes its header; with `durable`,
    /// every write is followed by an fsync.
    pub(crate) fn create(path: PathBuf, header: Header, durable: bool) -> io::Result<SpoolWriter> {
        let file = create_file(&path)?;
        let mut w = SpoolWriter {
            path,
            file,
            header,
            buf: Vec::new(),
            pending: Vec::new(),
            pending_polls: Vec::new(),
            regions: Vec::new(),
            written_regions: 0,
            error: None,
            lost_calls: 0,
            unpublished: 0,
            lanes: LaneCounts::default(),
            durable,
        };
        if durable {
            if let Err(e) = crate::output::files::sync_dir(&w.path) {
                w.error = Some(e);
            }
        }
        w.put_header();
        w.write_out();
        w.error.take().map_or(Ok(w), Err)
    }

    /// The spool's path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The first I/O error, if any.
    pub(crate) fn error(&self) -> Option<&io::Error> {
        self.error.as_ref()
    }

    fn put_header(&mut self) {
        let mut p = Vec::new();
        p.extend_from_slice(MAGIC);
        p.extend_from_slice(&self.header.start_time_ns.to_le_bytes());
        put_str(&mut p, &self.header.timestamp);
        put_str(&mut p, self.header.label.as_deref().unwrap_or(""));
        p.push(u8::from(self.header.track_threads));
        p.push(u8::from(self.header.track_async));
        p.push(u8::from(self.header.aggregate));
        frame(&mut self.buf, TAG_HEADER, &p);
    }

    /// Declares region `id` (ids are dense and declared in order).
    pub(crate) fn region(&mut self, id: u32, name: &str, file: &str, line: i64) {
        debug_assert_eq!(id as usize, self.regions.len());
        self.regions.push(SpoolRegion {
            name: name.to_owned(),
            file: file.to_owned(),
            line,
        });
        self.pending.push(Vec::new());
    }

    /// Buffers one completed call of region `id`.
    pub(crate) fn call(&mut self, region: u32, c: CallRecord) {
        if self.error.is_some() {
            self.lost_calls += 1;
            return;
        }
        self.unpublished += 1;
        let p = &mut self.pending[region as usize];
        p.push(c);
        if p.len() >= CALLS_PER_FRAME {
            self.put_calls(region);
            if self.buf.len() >= WRITE_THRESHOLD {
                self.write_out();
            }
        }
    }

    /// Buffers one poll (with task tracking, polls are streamed like calls).
    pub(crate) fn poll(&mut self, p: PollRecord) {
        if self.error.is_some() {
            return;
        }
        self.pending_polls.push(p);
        if self.pending_polls.len() >= CALLS_PER_FRAME {
            self.put_polls();
            if self.buf.len() >= WRITE_THRESHOLD {
                self.write_out();
            }
        }
    }

    fn put_polls(&mut self) {
        if self.pending_polls.is_empty() {
            return;
        }
        self.lanes.polls += self.pending_polls.len() as u64;
        let at = self.buf.len();
        self.buf.push(TAG_POLLS);
        self.buf.extend_from_slice(&[0; 4]);
        self.buf
            .extend_from_slice(&(self.pending_polls.len() as u32).to_le_bytes());
        let mut previous = 0i64;
        for p in &self.pending_polls {
            put_varint(&mut self.buf, i64::from(p.region));
            put_varint(&mut self.buf, p.start_ns.wrapping_sub(previous));
            previous = p.start_ns;
            put_varint(&mut self.buf, p.dur_ns);
            put_varint(&mut self.buf, i64::from(p.thread));
            put_varint(&mut self.buf, p.task);
        }
        let len = (self.buf.len() - at - 5) as u32;
        self.buf[at + 1..at + 5].copy_from_slice(&len.to_le_bytes());
        self.pending_polls.clear();
    }

    /// Buffers thread-table rows (one frame; a later row of an index replaces an earlier one).
    pub(crate) fn thread_rows(&mut self, threads: &[ThreadRow]) {
        if self.error.is_some() || threads.is_empty() {
            return;
        }
        let mut p = Vec::new();
        p.extend_from_slice(&(threads.len() as u32).to_le_bytes());
        for t in threads {
            p.extend_from_slice(&t.index.to_le_bytes());
            p.extend_from_slice(&t.native_id.to_le_bytes());
            p.extend_from_slice(&t.start_ns.to_le_bytes());
            p.extend_from_slice(&t.end_ns.to_le_bytes());
            p.extend_from_slice(&t.cpu_ns.to_le_bytes());
            put_str(&mut p, &t.name);
        }
        frame(&mut self.buf, TAG_THREADS, &p);
        if self.buf.len() >= WRITE_THRESHOLD {
            self.write_out();
        }
    }

    /// Buffers the rows of retired tasks (one frame).
    pub(crate) fn tasks(&mut self, rows: &[crate::flusher::task::TaskTotals]) {
        if self.error.is_some() || rows.is_empty() {
            return;
        }
        self.put_region_frames();
        self.lanes.tasks += rows.len() as u64;
        let at = self.buf.len();
        self.buf.push(TAG_TASKS);
        self.buf.extend_from_slice(&[0; 4]);
        self.buf
            .extend_from_slice(&(rows.len() as u32).to_le_bytes());
        for t in rows {
            let region = if t.root_region == u32::MAX {
                -1
            } else {
                i64::from(t.root_region)
            };
            for v in [
                t.index,
                t.tokio_id as i64,
                i64::from(t.thread_index),
                t.created_ns,
                t.done_ns,
                t.steps,
                t.running_ns,
                t.suspended_ns,
                region,
            ] {
                put_varint(&mut self.buf, v);
            }
        }
        let len = (self.buf.len() - at - 5) as u32;
        self.buf[at + 1..at + 5].copy_from_slice(&len.to_le_bytes());
        if self.buf.len() >= WRITE_THRESHOLD {
            self.write_out();
        }
    }

    fn put_region_frames(&mut self) {
        while self.written_regions < self.regions.len() {
            let r = &self.regions[self.written_regions];
            let mut p = Vec::new();
            p.extend_from_slice(&(self.written_regions as u32).to_le_bytes());
            p.extend_from_slice(&r.line.to_le_bytes());
            put_str(&mut p, &r.name);
            put_str(&mut p, &r.file);
            frame(&mut self.buf, TAG_REGION, &p);
            self.written_regions += 1;
        }
    }

    fn put_calls(&mut self, region: u32) {
        self.put_region_frames();
        let calls = std::mem::take(&mut self.pending[region as usize]);
        if calls.is_empty() {
            return;
        }
        // Encoded straight into the output buffer: header now, length patched afterwards.
        let at = self.buf.len();
        self.buf.push(TAG_CALLS);
        self.buf.extend_from_slice(&[0; 4]);
        self.buf.extend_from_slice(&region.to_le_bytes());
        self.buf
            .extend_from_slice(&(calls.len() as u32).to_le_bytes());
        let mut previous = 0i64;
        for c in &calls {
            put_varint(&mut self.buf, c.start_ns.wrapping_sub(previous));
            previous = c.start_ns;
            put_varint(&mut self.buf, c.dur_ns);
            put_varint(&mut self.buf, i64::from(c.thread));
            put_varint(&mut self.buf, c.task);
            put_varint(&mut self.buf, c.await_ns);
            put_varint(&mut self.buf, c.gpu_ns);
        }
        let len = (self.buf.len() - at - 5) as u32;
        self.buf[at + 1..at + 5].copy_from_slice(&len.to_le_bytes());
        // Reuse the allocation.
        let mut calls = calls;
        calls.clear();
        self.pending[region as usize] = calls;
    }

    /// Writes everything buffered, plus the thread table and (aggregate mode) the statistics.
    /// Called at every flush interval and finalize.
    pub(crate) fn flush(&mut self, threads: &[ThreadRow], aggregate: &[(u32, Stats)]) {
        if self.error.is_some() {
            return;
        }
        for r in 0..self.pending.len() {
            self.put_calls(r as u32);
        }
        self.put_polls();
        self.put_region_frames();
        self.thread_rows(threads);
        if !aggregate.is_empty() {
            let mut p = Vec::new();
            p.extend_from_slice(&(aggregate.len() as u32).to_le_bytes());
            for (r, s) in aggregate {
                p.extend_from_slice(&r.to_le_bytes());
                for v in [s.count, s.total, s.min, s.max] {
                    p.extend_from_slice(&v.to_le_bytes());
                }
                p.extend_from_slice(&s.mean.to_le_bytes());
                p.extend_from_slice(&s.m2.to_le_bytes());
            }
            frame(&mut self.buf, TAG_AGGREGATE, &p);
        }
        // Written; fsynced only when durable: the kernel keeps written data when the process
        // is killed, which is the failure the spool is for by default.
        self.write_out();
        self.sync();
    }

    fn write_out(&mut self) {
        if self.error.is_none() && !self.buf.is_empty() {
            if let Err(e) = self.file.write_all(&self.buf) {
                self.error = Some(e);
            }
        }
        self.buf.clear();
        // A big frame (a phase's whole thread table) must not keep its buffer for the run.
        if self.buf.capacity() > 2 * WRITE_THRESHOLD {
            self.buf.shrink_to(WRITE_THRESHOLD);
        }
    }

    /// With `durable`, makes everything written so far survive power loss.
    fn sync(&mut self) {
        if self.durable && self.error.is_none() {
            if let Err(e) = self.file.sync_data() {
                self.error = Some(e);
            }
        }
    }

    /// Ends the current phase: flushes, moves the spool aside to `<spool>.<phase>` and starts
    /// a fresh spool (header and region table) for the next phase. Returns the moved file,
    /// which the caller publishes and then deletes, and how many task rows and polls it holds.
    pub(crate) fn rotate(
        &mut self,
        phase: u64,
        threads: &[ThreadRow],
        aggregate: &[(u32, Stats)],
    ) -> io::Result<(PathBuf, LaneCounts)> {
        self.flush(threads, aggregate);
        if let Some(e) = self.error.take() {
            // Keep what is on disk; the caller reports where it is.
            self.error = Some(io::Error::new(e.kind(), e.to_string()));
            return Err(e);
        }
        let moved = PathBuf::from(format!("{}.{phase}", self.path.display()));
        std::fs::rename(&self.path, &moved)?;
        self.unpublished = 0;
        let lanes = std::mem::take(&mut self.lanes);
        match create_file(&self.path) {
            Ok(f) => {
                self.file = f;
                self.written_regions = 0;
                self.put_header();
                self.put_region_frames();
                self.write_out();
            }
            Err(e) => self.error = Some(e),
        }
        Ok((moved, lanes))
    }

    /// Removes the spool (at shutdown, when everything was published).
    pub(crate) fn remove(self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Appends `v` as a zigzag LEB128 varint (small magnitudes of either sign take one byte).
#[inline]
fn put_varint(buf: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        buf.push((z as u8) | 0x80);
        z >>= 7;
    }
    buf.push(z as u8);
}

fn put_str(p: &mut Vec<u8>, s: &str) {
    p.extend_from_slice(&(s.len() as u32).to_le_bytes());
    p.extend_from_slice(s.as_bytes());
}

fn frame(buf: &mut Vec<u8>, tag: u8, payload: &[u8]) {
    buf.push(tag);
    buf.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    buf.extend_from_slice(payload);
}

mod follow;
mod read;
pub(crate) use follow::LaneFollower;
#[cfg(test)]
pub(crate) use read::read;
pub(crate) use read::{scan, scan_into, SpoolContents};

#[cfg(test)]
mod tests;

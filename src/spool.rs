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
//! | 3 | threads | `n` u32, then n x (`index` u32, `native_id` i64, `start` i64, `end` i64, `cpu` i64, `name` str) |
//! | 4 | aggregate | `n` u32, then n x (`region` u32, `count` u64, `total` u64, `min` u64, `max` u64, `mean` f64, `m2` f64) |
//! | 6 | polls | `n` u32, then n x (`region`, `start - previous start`, `dur`, `thread`, `task`), each a zigzag LEB128 varint |
//! | 5 | tasks | `n` u32, then n x (`index`, `tokio_id`, `thread_index`, `created`, `done`, `steps`, `running`, `suspended`, `root_region` (-1 = none)), each a zigzag LEB128 varint: rows of tasks retired during the phase (see [`crate::task`]) |
//!
//! A frame cut short by a crash is ignored on reading. The flusher writes frames at every
//! flush interval (and whenever 1 MiB is buffered) and truncates the spool after each
//! successful finalize, so the spool always holds exactly the unpublished calls.
//! [`crate::recover`] turns a spool into a schema-3 file.

use std::fs::File;
use std::io::{self, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use crate::output::model::{CallRecord, PollRecord, TaskRow, ThreadRow};
use crate::stats::Stats;

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

/// The flusher's writing end.
pub(crate) struct SpoolWriter {
    path: PathBuf,
    file: File,
    header: Header,
    buf: Vec<u8>,
    pending: Vec<Vec<CallRecord>>,
    pending_polls: Vec<PollRecord>,
    regions: Vec<(String, String, i64)>,
    written_regions: usize,
    /// The first I/O error; once set, nothing more is written.
    error: Option<io::Error>,
    /// Calls that could not be spooled because of `error`.
    pub(crate) lost_calls: u64,
    /// Calls spooled since the spool was created or last rotated.
    pub(crate) unpublished: u64,
}

impl SpoolWriter {
    /// Creates (truncates) the spool and writes its header.
    pub(crate) fn create(path: PathBuf, header: Header) -> io::Result<SpoolWriter> {
        let file = File::create(&path)?;
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
        };
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
        self.regions.push((name.to_owned(), file.to_owned(), line));
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

    /// Buffers the rows of retired tasks (one frame).
    pub(crate) fn tasks(&mut self, rows: &[crate::task::TaskTotals]) {
        if self.error.is_some() || rows.is_empty() {
            return;
        }
        self.put_region_frames();
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
            let (name, file, line) = &self.regions[self.written_regions];
            let mut p = Vec::new();
            p.extend_from_slice(&(self.written_regions as u32).to_le_bytes());
            p.extend_from_slice(&line.to_le_bytes());
            put_str(&mut p, name);
            put_str(&mut p, file);
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
        if !threads.is_empty() {
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
        }
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
        // Written, not fsynced: the kernel keeps written data when the process is killed,
        // which is the failure the spool is for; syncing every interval would stall the
        // flusher on the disk.
        self.write_out();
    }

    fn write_out(&mut self) {
        if self.error.is_none() && !self.buf.is_empty() {
            if let Err(e) = self.file.write_all(&self.buf) {
                self.error = Some(e);
            }
        }
        self.buf.clear();
    }

    /// Ends the current phase: flushes, moves the spool aside to `<spool>.<phase>` and starts
    /// a fresh spool (header and region table) for the next phase. Returns the moved file,
    /// which the caller publishes and then deletes.
    pub(crate) fn rotate(
        &mut self,
        phase: u64,
        threads: &[ThreadRow],
        aggregate: &[(u32, Stats)],
    ) -> io::Result<PathBuf> {
        self.flush(threads, aggregate);
        if let Some(e) = self.error.take() {
            // Keep what is on disk; the caller reports where it is.
            self.error = Some(io::Error::new(e.kind(), e.to_string()));
            return Err(e);
        }
        let moved = PathBuf::from(format!("{}.{phase}", self.path.display()));
        std::fs::rename(&self.path, &moved)?;
        self.unpublished = 0;
        match File::create(&self.path) {
            Ok(f) => {
                self.file = f;
                self.written_regions = 0;
                self.put_header();
                self.put_region_frames();
                self.write_out();
            }
            Err(e) => self.error = Some(e),
        }
        Ok(moved)
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

/// Reads a zigzag LEB128 varint.
#[inline]
fn get_varint(d: &[u8], at: &mut usize) -> Option<i64> {
    let mut z = 0u64;
    let mut shift = 0;
    loop {
        let b = *d.get(*at)?;
        *at += 1;
        z |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Some(((z >> 1) as i64) ^ -((z & 1) as i64));
        }
        shift += 7;
        if shift > 63 {
            return None;
        }
    }
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

/// Everything a spool holds, read back.
#[derive(Debug, Default)]
pub(crate) struct SpoolContents {
    pub header: Header,
    /// (name, file, line) by region id.
    pub regions: Vec<(String, String, i64)>,
    /// Calls per region id, in spool order.
    pub calls: Vec<Vec<CallRecord>>,
    /// The latest thread table.
    pub threads: Vec<ThreadRow>,
    /// The latest aggregate statistics, by region id.
    pub aggregate: Vec<(u32, Stats)>,
    /// Rows of tasks retired during the phase.
    pub tasks: Vec<TaskRow>,
    /// Polls, in spool order.
    pub polls: Vec<PollRecord>,
    /// Bytes at the end that did not form a whole frame (a write cut short).
    pub torn_bytes: u64,
}

/// Reads a whole spool (tolerating a torn last frame), one frame at a time.
pub(crate) fn read(path: &Path) -> io::Result<SpoolContents> {
    let mut input = BufReader::with_capacity(1 << 20, File::open(path)?);
    let bad = |what: &str| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("spool {}: {what}", path.display()),
        )
    };
    let mut out = SpoolContents::default();
    let mut saw_header = false;
    let mut payload = Vec::new();
    loop {
        let mut head = [0u8; 5];
        let got = read_full(&mut input, &mut head)?;
        if got < 5 {
            out.torn_bytes = got as u64;
            break;
        }
        let tag = head[0];
        let len = u32::from_le_bytes(head[1..5].try_into().expect("4 bytes")) as usize;
        payload.clear();
        let got = (&mut input).take(len as u64).read_to_end(&mut payload)?;
        if got < len {
            out.torn_bytes = (5 + got) as u64;
            break;
        }
        let mut r = Cursor { d: &payload, at: 0 };
        match tag {
            TAG_HEADER => {
                if r.take(8).ok_or_else(|| bad("short header"))? != MAGIC {
                    return Err(bad("not a scope-profiler spool (bad magic)"));
                }
                out.header = Header {
                    start_time_ns: r.i64().ok_or_else(|| bad("header"))?,
                    timestamp: r.str().ok_or_else(|| bad("header"))?,
                    label: Some(r.str().ok_or_else(|| bad("header"))?).filter(|l| !l.is_empty()),
                    track_threads: r.u8().ok_or_else(|| bad("header"))? != 0,
                    track_async: r.u8().ok_or_else(|| bad("header"))? != 0,
                    aggregate: r.u8().ok_or_else(|| bad("header"))? != 0,
                };
                saw_header = true;
            }
            TAG_REGION => {
                let id = r.u32().ok_or_else(|| bad("region"))? as usize;
                let line = r.i64().ok_or_else(|| bad("region"))?;
                let name = r.str().ok_or_else(|| bad("region"))?;
                let file = r.str().ok_or_else(|| bad("region"))?;
                if out.regions.len() <= id {
                    out.regions.resize(id + 1, Default::default());
                    out.calls.resize_with(id + 1, Vec::new);
                }
                out.regions[id] = (name, file, line);
            }
            TAG_CALLS => {
                let region = r.u32().ok_or_else(|| bad("calls"))? as usize;
                let n = r.u32().ok_or_else(|| bad("calls"))? as usize;
                if region >= out.calls.len() {
                    return Err(bad("calls of an undeclared region"));
                }
                let calls = &mut out.calls[region];
                calls.reserve(n);
                let (d, mut at) = (r.d, r.at);
                let mut previous = 0i64;
                for _ in 0..n {
                    let mut next = || get_varint(d, &mut at);
                    let c = (|| {
                        let start_ns = previous.wrapping_add(next()?);
                        Some(CallRecord {
                            start_ns,
                            dur_ns: next()?,
                            thread: u32::try_from(next()?).ok()?,
                            task: next()?,
                            await_ns: next()?,
                            gpu_ns: next()?,
                            call_id: -1,
                            parent_id: -1,
                        })
                    })()
                    .ok_or_else(|| bad("calls"))?;
                    previous = c.start_ns;
                    calls.push(c);
                }
            }
            TAG_THREADS => {
                let n = r.u32().ok_or_else(|| bad("threads"))?;
                out.threads.clear();
                for _ in 0..n {
                    let t = (|| {
                        Some(ThreadRow {
                            index: r.u32()?,
                            native_id: r.i64()?,
                            start_ns: r.i64()?,
                            end_ns: r.i64()?,
                            cpu_ns: r.i64()?,
                            name: r.str()?,
                        })
                    })()
                    .ok_or_else(|| bad("threads"))?;
                    out.threads.push(t);
                }
            }
            TAG_AGGREGATE => {
                let n = r.u32().ok_or_else(|| bad("aggregate"))?;
                out.aggregate.clear();
                for _ in 0..n {
                    let s = (|| {
                        let region = r.u32()?;
                        Some((
                            region,
                            Stats {
                                count: r.u64()?,
                                total: r.u64()?,
                                min: r.u64()?,
                                max: r.u64()?,
                                mean: f64::from_bits(r.u64()?),
                                m2: f64::from_bits(r.u64()?),
                            },
                        ))
                    })()
                    .ok_or_else(|| bad("aggregate"))?;
                    out.aggregate.push(s);
                }
            }
            TAG_POLLS => {
                let n = r.u32().ok_or_else(|| bad("polls"))?;
                let (d, mut at) = (r.d, r.at);
                let mut previous = 0i64;
                out.polls.reserve(n as usize);
                for _ in 0..n {
                    let mut next = || get_varint(d, &mut at);
                    let p = (|| {
                        let region = u32::try_from(next()?).ok()?;
                        let start_ns = previous.wrapping_add(next()?);
                        Some(PollRecord {
                            region,
                            start_ns,
                            dur_ns: next()?,
                            thread: u32::try_from(next()?).ok()?,
                            task: next()?,
                        })
                    })()
                    .ok_or_else(|| bad("polls"))?;
                    previous = p.start_ns;
                    out.polls.push(p);
                }
            }
            TAG_TASKS => {
                let n = r.u32().ok_or_else(|| bad("tasks"))?;
                let (d, mut at) = (r.d, r.at);
                for _ in 0..n {
                    let mut v = [0i64; 9];
                    for x in &mut v {
                        *x = get_varint(d, &mut at).ok_or_else(|| bad("tasks"))?;
                    }
                    let totals = crate::task::TaskTotals {
                        index: v[0],
                        tokio_id: v[1] as u64,
                        thread_index: u32::try_from(v[2]).map_err(|_| bad("tasks"))?,
                        created_ns: v[3],
                        done_ns: v[4],
                        steps: v[5],
                        running_ns: v[6],
                        suspended_ns: v[7],
                        root_region: u32::try_from(v[8]).unwrap_or(u32::MAX),
                    };
                    let regions = &out.regions;
                    out.tasks.push(totals.row(false, |id| {
                        regions
                            .get(id as usize)
                            .map(|r| r.0.clone())
                            .unwrap_or_default()
                    }));
                }
            }
            _ => return Err(bad(&format!("unknown frame tag {tag}"))),
        }
    }
    if !saw_header {
        return Err(bad("no header (empty or not a spool)"));
    }
    Ok(out)
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

struct Cursor<'a> {
    d: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let s = self.d.get(self.at..self.at + n)?;
        self.at += n;
        Some(s)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|b| u32::from_le_bytes(b.try_into().expect("4")))
    }
    fn u64(&mut self) -> Option<u64> {
        self.take(8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8")))
    }
    fn i64(&mut self) -> Option<i64> {
        self.u64().map(|v| v as i64)
    }
    fn str(&mut self) -> Option<String> {
        let n = self.u32()? as usize;
        Some(String::from_utf8_lossy(self.take(n)?).into_owned())
    }
}

#[cfg(test)]
mod tests;

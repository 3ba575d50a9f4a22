//! The spool: the flusher's append-only, on-disk copy of every completed call not yet
//! published in a profile file, so memory stays bounded on long runs and a killed process
//! loses at most the last flush interval.
//!
//! It lives beside the output (`<dir>/.<file name>.spool`) and is a sequence of frames, each
//! `tag: u8, len: u32 LE, payload` (all integers little-endian, strings as `u32 len + UTF-8`):
//!
//! | tag | frame | payload |
//! |---|---|---|
//! | 0 | header | magic `SPRSPOL2` (`SPRSPOL1`: version 1, still read; it has no frames 10-14), `start_time_ns` i64, `timestamp` str, `label` str ("" = none), `track_threads` u8, `track_async` u8, `aggregate` u8 |
//! | 1 | region | `id` u32, `line` i64, `name` str, `file` str |
//! | 2 | calls (read, no longer written) | `region` u32, `n` u32, then n x (`start - previous start`, `dur`, `thread`, `task`, `await`, `gpu`), each a zigzag LEB128 varint |
//! | 8 | calls | `region` u32, `n` u32, `varying` u8 (bit 0 thread, 1 task, 2 await, 3 gpu), then each column that does not vary in the frame once (`thread`, `task`, `await`, `gpu`, those whose bit is clear), then n x (`start - previous start`, `dur`, and the varying columns), every value a zigzag LEB128 varint: a sync span's call on one thread costs its start and duration, 3-4 bytes; then, only when a call of the frame ran in a Tokio task with a timeline, n x `scheduled` (-1 = none) |
//! | 3 | threads | `n` u32, then n x (`index` u32, `native_id` i64, `start` i64, `end` i64, `cpu` i64, `name` str): rows of the thread table; a later row of the same index replaces an earlier one (an exited thread's row is written once, when it exits; live threads' rows at every flush) |
//! | 4 | aggregate | `n` u32, then n x (`region` u32, `count` u64, `total` u64, `min` u64, `max` u64, `mean` f64, `m2` f64) |
//! | 5 | tasks | `n` u32, then n x (`index`, `tokio_id`, `thread_index`, `created`, `done`, `steps`, `running`, `suspended`, `root_region` (-1 = none)), each a zigzag LEB128 varint: rows of tasks retired during the phase (see [`crate::flusher::task`]); then, only when a row has polls from Tokio's instrumentation, n x the ten values of [`crate::data::rows::PollTotals::to_spool`] |
//! | 6 | polls (read, no longer written) | `n` u32, then n x (`region`, `start - previous start`, `dur`, `thread`, `task`), each a zigzag LEB128 varint |
//! | 7 | polls in runs | `n` u32, then runs until n polls: `len`, `region`, `thread`, `task - previous run's task`, then len x (`start - previous start`, `dur`); every value a zigzag LEB128 varint. A run is consecutive polls of one region, thread and task (a span polled in a loop, a sync span's one poll per call under `track_async`): those three cost nothing per poll; then, only when a poll of the frame has one (a Tokio task's, see [`crate::flusher::sched`]), n x `scheduled` in poll order (-1 = none) |
//! | 9 | sites | `n` u32, then n x (`id` u32, `line` u32, `col` u32, `name` str, `file` str): Tokio spawn sites (see [`crate::data::sites`]) |
//! | 10 | open calls (version 2) | `at_ns` i64, `open` u64 (calls open then, all of them), `n` u32 (at most 4096: the oldest), then n x (`region`, `start - previous start`, `thread`, `tokio_id` (0 = none), `task` (dense index, -1 = none yet), `parent` (index of the enclosing open call in this frame, -1 = none), `state` (0 unknown, 1 running, 2 scheduled, 3 idle, 4 suspended)), each a zigzag LEB128 varint, oldest first: the calls open at that flush (see [`crate::data::open_calls`]); a later frame replaces an earlier one |
//! | 11 | wakes (version 2) | `n` u32, then n x (`tick - previous tick`, `thread` (waking), `waker_task` (-1 = the runtime's driver or a thread outside tasks), `woken_task`), each a zigzag LEB128 varint (see [`crate::data::edges::Wake`]) |
//! | 12 | spawns (version 2) | `n` u32, then n x (`tick - previous tick`, `thread`, `parent_task` (-1 = the thread, outside tasks), `child_task`), varints as above |
//! | 13 | follows_from links (version 2) | `n` u32, then n x (`tick - previous tick`, `span_region`, `span_start` (-1 = not entered when the flusher resolved the link), `follows_region`, `follows_start`), varints as above |
//! | 14 | calls left out (version 2; flight-recorder segments only) | `n` u32, then n x (LEB128 `zigzag(start - previous start) << 1 \| lane changed`, then, when it changed, zigzag LEB128 `lane - previous lane`; a lane: task index, or `-2 - thread`): the calls `Builder::flight_min_duration` left out (see [`below`]) |
//!
//! A file may hold several *segments* ([`SpoolWriter::new_segment`], see [`segment`]): each
//! begins with the header, every region and site and the thread table again, so the bytes
//! from a segment's start read as a spool of their own.
//!
//! A frame cut short by a crash is ignored on reading. The flusher writes frames at every
//! flush interval (and whenever 1 MiB is buffered; fsynced with `durable`); each finalize moves
//! the spool aside as that phase's file (`<spool>.<phase>`, deleted once published) and starts
//! a fresh one, so the spool always holds exactly the unpublished calls. The spool is created
//! with `O_CREAT|O_EXCL|O_NOFOLLOW`, mode 0600, and locked (`flock`) while its process runs, so
//! a later `build()` can tell a crashed run's spool from a live one.
//! [`crate::recover()`] turns a spool into a schema-3 file.
//!
//! When a write fails (a full disk, a read-only or removed directory), that write's calls are
//! lost and counted, the file keeps every frame written before, and writing goes on as soon
//! as there is room again (see [`loss`]); the statistics, folded by the flusher before
//! anything is spooled, are never affected.

pub(crate) use crate::data::rows::LaneCounts;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use crate::data::rows::{CallRecord, PollRecord, ThreadRow};
use crate::data::stats::Stats;
use encode::{columns_of, frame, put_str, put_varint};
use loss::CallSpan;

/// The magic of the spools written now (version 2: the open-calls frame and the task
/// edges, tags 10-13, and the flight recorder's left-out calls, tag 14).
const MAGIC: &[u8; 8] = b"SPRSPOL2";
/// The magic of version 1, still read (a spool left by an older build).
const MAGIC_V1: &[u8; 8] = b"SPRSPOL1";
pub(crate) const TAG_HEADER: u8 = 0;
pub(crate) const TAG_REGION: u8 = 1;
pub(crate) const TAG_CALLS: u8 = 2;
pub(crate) const TAG_CALL_COLUMNS: u8 = 8;
pub(crate) const TAG_THREADS: u8 = 3;
pub(crate) const TAG_AGGREGATE: u8 = 4;
pub(crate) const TAG_TASKS: u8 = 5;
pub(crate) const TAG_POLLS: u8 = 6;
pub(crate) const TAG_POLL_RUNS: u8 = 7;
pub(crate) const TAG_SITES: u8 = 9;
pub(crate) const TAG_OPEN_CALLS: u8 = 10;
pub(crate) const TAG_WAKES: u8 = 11;
pub(crate) const TAG_SPAWNS: u8 = 12;
pub(crate) const TAG_FOLLOWS: u8 = 13;
pub(crate) const TAG_BELOW: u8 = 14;
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
///
/// A write that fails (a full disk, say) loses that write's frames and nothing else: the file
/// is cut back to its last whole frame, the lost calls are counted with their time range, and
/// later writes go on as usual once there is room (see [`loss`]). A rotation reports a phase
/// that lost any detail as failed ([`loss::Rotated::failure`]).
pub(crate) struct SpoolWriter {
    path: PathBuf,
    /// The phase's file at `path` (`None`: it could not be created yet).
    file: Option<File>,
    /// The file may end in a torn frame (a failed write could not be undone): nothing more
    /// is written to it this phase.
    torn: bool,
    /// An earlier phase's file still at `path` (its rotation could not move it aside): its
    /// phase number, and the file, kept open so its lock tells other processes it is ours.
    leftover: Option<(u64, File)>,
    header: Header,
    /// The next frames begin a file: the header goes first.
    need_header: bool,
    buf: Vec<u8>,
    /// Calls encoded in `buf`, and task rows and polls.
    in_buf: CallSpan,
    lanes_in_buf: LaneCounts,
    /// Bytes of the file written whole (a frame boundary).
    on_disk: u64,
    pending: Vec<Vec<CallRecord>>,
    pending_polls: Vec<PollRecord>,
    regions: Vec<SpoolRegion>,
    /// Regions whose frame is in `buf` or on disk, and on disk.
    written_regions: usize,
    regions_on_disk: usize,
    /// Calls and polls may have scheduled time (Tokio's instrumentation is on): frames look
    /// for it (without it they never do, at no cost per record).
    sched_columns: bool,
    /// Tokio spawn sites declared, and those written (in `buf` or on disk) and on disk.
    sites: Vec<(u32, crate::data::sites::SiteInfo)>,
    written_sites: usize,
    sites_on_disk: usize,
    /// This phase's first error, and what was being done.
    failure: Option<(&'static str, io::Error)>,
    /// This phase's calls on disk, and lost.
    kept: CallSpan,
    lost: CallSpan,
    lost_lanes: u64,
    /// Calls whose detail was lost since the spool was created.
    pub(crate) lost_calls: u64,
    /// Task rows and polls on disk this phase (what reading them back reserves room for).
    pub(crate) lanes: LaneCounts,
    /// fsync every write (`Builder::durable`).
    durable: bool,
    /// Task edges not yet in a frame (see [`edges`]).
    edges: edges::PendingEdges,
    /// Calls the flight recorder's threshold left out, not yet in a frame (see [`below`]).
    below: below::PendingBelow,
    /// Where the current segment begins in the file (see [`segment`]): 0, or where
    /// [`SpoolWriter::new_segment`] began one.
    segment_start: u64,
}

impl LaneCounts {
    fn total(&self) -> u64 {
        self.tasks + self.polls
    }
}

/// Creates a spool file: never through a link, mode 0600, locked against a second process.
fn create_file(path: &Path) -> io::Result<File> {
    let file = crate::data::files::create_new(path, 0o600)?;
    // The lock tells a later run that this spool belongs to a live process (see
    // `crate::finalize::recover`); a file system without locks is no reason to stop.
    let _ = crate::data::files::try_lock(&file);
    Ok(file)
}

impl SpoolWriter {
    /// Creates the spool (which must not exist yet) and writes its header; with `durable`,
    /// every write is followed by an fsync.
    pub(crate) fn create(path: PathBuf, header: Header, durable: bool) -> io::Result<SpoolWriter> {
        let file = create_file(&path)?;
        let mut w = SpoolWriter {
            path,
            file: Some(file),
            torn: false,
            leftover: None,
            header,
            need_header: true,
            buf: Vec::new(),
            in_buf: CallSpan::default(),
            lanes_in_buf: LaneCounts::default(),
            on_disk: 0,
            pending: Vec::new(),
            pending_polls: Vec::new(),
            regions: Vec::new(),
            written_regions: 0,
            regions_on_disk: 0,
            sched_columns: false,
            sites: Vec::new(),
            written_sites: 0,
            sites_on_disk: 0,
            failure: None,
            kept: CallSpan::default(),
            lost: CallSpan::default(),
            lost_lanes: 0,
            lost_calls: 0,
            lanes: LaneCounts::default(),
            durable,
            edges: Default::default(),
            below: Default::default(),
            segment_start: 0,
        };
        if durable {
            if let Err(e) = crate::data::files::sync_dir(&w.path) {
                w.fail("syncing the spool's directory", e);
            }
        }
        w.put_preamble();
        w.write_out();
        match w.failure.take() {
            Some((_, e)) => {
                let _ = std::fs::remove_file(&w.path);
                Err(e)
            }
            None => Ok(w),
        }
    }

    /// The spool's path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes of the file written whole so far (the flight recorder's budget counts them).
    pub(crate) fn bytes_on_disk(&self) -> u64 {
        self.on_disk
    }

    /// The raw descriptor of the file being written (`-1`: none), for a forked child to close.
    pub(crate) fn raw_fd(&self) -> i32 {
        use std::os::fd::AsRawFd;
        self.file.as_ref().map_or(-1, |f| f.as_raw_fd())
    }

    /// Remembers the phase's first error.
    fn fail(&mut self, context: &'static str, e: io::Error) {
        if self.failure.is_none() {
            self.failure = Some((context, e));
        }
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
        self.put_preamble();
        self.lanes_in_buf.polls += self.pending_polls.len() as u64;
        let at = self.buf.len();
        self.buf.push(TAG_POLL_RUNS);
        self.buf.extend_from_slice(&[0; 4]);
        self.buf
            .extend_from_slice(&(self.pending_polls.len() as u32).to_le_bytes());
        let (mut previous, mut previous_task) = (0i64, 0i64);
        for run in self
            .pending_polls
            .chunk_by(|a, b| (a.region, a.thread, a.task) == (b.region, b.thread, b.task))
        {
            let p = run[0];
            put_varint(&mut self.buf, run.len() as i64);
            put_varint(&mut self.buf, i64::from(p.region));
            put_varint(&mut self.buf, i64::from(p.thread));
            put_varint(&mut self.buf, p.task.wrapping_sub(previous_task));
            previous_task = p.task;
            for p in run {
                put_varint(&mut self.buf, p.start_ns.wrapping_sub(previous));
                previous = p.start_ns;
                put_varint(&mut self.buf, p.dur_ns);
            }
        }
        if self.sched_columns && self.pending_polls.iter().any(|p| p.sched_ns != -1) {
            for p in &self.pending_polls {
                put_varint(&mut self.buf, p.sched_ns);
            }
        }
        let len = (self.buf.len() - at - 5) as u32;
        self.buf[at + 1..at + 5].copy_from_slice(&len.to_le_bytes());
        self.pending_polls.clear();
    }

    /// Buffers thread-table rows (one frame; a later row of an index replaces an earlier one).
    pub(crate) fn thread_rows(&mut self, threads: &[ThreadRow]) {
        if threads.is_empty() {
            return;
        }
        self.put_preamble();
        self.put_threads(threads);
        if self.buf.len() >= WRITE_THRESHOLD {
            self.write_out();
        }
    }

    fn put_threads(&mut self, threads: &[ThreadRow]) {
        if threads.is_empty() {
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
    }

    /// Buffers the rows of retired tasks (one frame).
    pub(crate) fn tasks(&mut self, rows: &[crate::data::rows::TaskTotals]) {
        if rows.is_empty() {
            return;
        }
        self.put_preamble();
        self.lanes_in_buf.tasks += rows.len() as u64;
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
        if rows.iter().any(|t| t.polls.sched.has()) {
            for t in rows {
                for v in t.polls.to_spool() {
                    put_varint(&mut self.buf, v);
                }
            }
        }
        let len = (self.buf.len() - at - 5) as u32;
        self.buf[at + 1..at + 5].copy_from_slice(&len.to_le_bytes());
        if self.buf.len() >= WRITE_THRESHOLD {
            self.write_out();
        }
    }

    /// What must precede the next frame: the header when it begins a file, and the frames
    /// of regions declared since the last ones.
    fn put_preamble(&mut self) {
        if self.need_header {
            self.put_header();
            self.need_header = false;
        }
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
        self.put_sites();
    }

    fn put_calls(&mut self, region: u32) {
        let calls = std::mem::take(&mut self.pending[region as usize]);
        if calls.is_empty() {
            return;
        }
        self.put_preamble();
        let (frame_span, varying) = columns_of(&calls);
        self.in_buf.merge(frame_span);
        // Encoded straight into the output buffer: header now, length patched afterwards.
        let at = self.buf.len();
        self.buf.reserve(14 + 4 * 10 + calls.len() * 6 * 10);
        self.buf.push(TAG_CALL_COLUMNS);
        self.buf.extend_from_slice(&[0; 4]);
        self.buf.extend_from_slice(&region.to_le_bytes());
        self.buf
            .extend_from_slice(&(calls.len() as u32).to_le_bytes());
        self.buf.push(varying);
        let first = &calls[0];
        let columns = [
            i64::from(first.thread),
            first.task,
            first.await_ns,
            first.gpu_ns,
        ];
        for (bit, v) in columns.into_iter().enumerate() {
            if varying & (1 << bit) == 0 {
                put_varint(&mut self.buf, v);
            }
        }
        let mut previous = 0i64;
        for c in &calls {
            put_varint(&mut self.buf, c.start_ns.wrapping_sub(previous));
            previous = c.start_ns;
            put_varint(&mut self.buf, c.dur_ns);
            if varying != 0 {
                let values = [i64::from(c.thread), c.task, c.await_ns, c.gpu_ns];
                for (bit, v) in values.into_iter().enumerate() {
                    if varying & (1 << bit) != 0 {
                        put_varint(&mut self.buf, v);
                    }
                }
            }
        }
        if self.sched_columns && calls.iter().any(|c| c.sched_ns != -1) {
            for c in &calls {
                put_varint(&mut self.buf, c.sched_ns);
            }
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
        for r in 0..self.pending.len() {
            self.put_calls(r as u32);
        }
        self.put_polls();
        self.put_edges();
        self.put_below();
        self.put_preamble();
        self.put_threads(threads);
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
        // is killed, which is the failure the spool is for by default. A failed sync loses
        // nothing that can be read now, so it counts nothing as lost.
        self.write_out();
        if self.durable {
            if let Some(Err(e)) = self.file.as_ref().map(File::sync_data) {
                self.fail("syncing the spool", e);
            }
        }
    }

    /// Writes `buf` to the phase's file (creating it if need be) and empties it. When that
    /// fails, its frames are lost (counted) and the file is cut back to its last whole frame.
    fn write_out(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        match self.try_write() {
            Ok(()) => {
                self.on_disk += self.buf.len() as u64;
                self.regions_on_disk = self.written_regions;
                self.sites_on_disk = self.written_sites;
                self.kept.merge(self.in_buf);
                self.lanes.tasks += self.lanes_in_buf.tasks;
                self.lanes.polls += self.lanes_in_buf.polls;
            }
            Err((context, e)) => {
                self.lost.merge(self.in_buf);
                self.lost_calls += self.in_buf.calls;
                self.lost_lanes += self.lanes_in_buf.total();
                // What this write would have declared is declared again by the next one.
                self.written_regions = self.regions_on_disk;
                self.written_sites = self.sites_on_disk;
                self.need_header = self.on_disk == self.segment_start;
                self.fail(context, e);
            }
        }
        self.buf.clear();
        // A big frame (a phase's whole thread table) must not keep its buffer for the run.
        if self.buf.capacity() > 2 * WRITE_THRESHOLD {
            self.buf.shrink_to(WRITE_THRESHOLD);
        }
        self.in_buf = CallSpan::default();
        self.lanes_in_buf = LaneCounts::default();
    }

    fn try_write(&mut self) -> Result<(), (&'static str, io::Error)> {
        self.ensure_file()?;
        if self.torn {
            let e = io::Error::other(
                "a write cut short could not be undone; this phase's spool takes no more",
            );
            return Err(("writing the spool", e));
        }
        let (Some(file), keep) = (self.file.as_mut(), self.on_disk) else {
            return Err(("writing the spool", io::Error::other("no spool file")));
        };
        loss::write_or_undo(file, &self.buf, keep).map_err(|(e, undone)| {
            self.torn = !undone;
            ("writing the spool", e)
        })
    }
}

pub(crate) mod below;
mod compact;
pub(crate) mod edges;
mod encode;
mod follow;
pub(crate) mod loss;
mod phase;
mod phase_data;
mod read;
mod segment;
mod sites;
pub(crate) mod tail;
pub(crate) use follow::LaneFollower;
pub(crate) use loss::SpoolFailure;
#[cfg(test)]
pub(crate) use read::read;
pub(crate) use read::{scan, scan_into, SpoolContents};

#[cfg(test)]
mod edges_tests;
#[cfg(test)]
mod fuzz_tests;
#[cfg(test)]
mod tests;

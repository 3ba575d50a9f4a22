//! Reading a spool back: frame by frame, calls handed to a callback one at a time, so a phase
//! of any length is read in constant memory ([`scan`]); `read` collects everything (tests and
//! small spools only).

use std::io;
use std::path::Path;

use super::{
    Header, SpoolRegion, MAGIC, MAGIC_V1, TAG_AGGREGATE, TAG_CALLS, TAG_CALL_COLUMNS, TAG_HEADER,
    TAG_OPEN_CALLS, TAG_POLLS, TAG_POLL_RUNS, TAG_REGION, TAG_SITES, TAG_TASKS, TAG_THREADS,
};
use crate::data::rows::{CallRecord, PollRecord, TaskRow, ThreadRow};
use crate::data::sites::SiteInfo;
use crate::data::stats::Stats;

pub(super) mod frames;

use frames::{Frame, Frames};

/// Reads a zigzag LEB128 varint.
#[inline]
pub(super) fn get_varint(d: &[u8], at: &mut usize) -> Option<i64> {
    // Most values (deltas, small ids, zeros) fit one byte.
    let b = *d.get(*at)?;
    if b < 0x80 {
        *at += 1;
        let z = u64::from(b);
        return Some(((z >> 1) as i64) ^ -((z & 1) as i64));
    }
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

/// Everything a spool holds, read back.
#[derive(Debug, Default)]
pub(crate) struct SpoolContents {
    pub header: Header,
    /// The spool format's version: 1 (`SPRSPOL1`) or 2 (`SPRSPOL2`, see [`super`]).
    pub version: u8,
    /// The regions, by id.
    pub regions: Vec<SpoolRegion>,
    /// Calls per region id, in spool order.
    #[cfg(test)]
    pub calls: Vec<Vec<CallRecord>>,
    /// The latest thread table.
    pub threads: Vec<ThreadRow>,
    /// The latest aggregate statistics, by region id.
    pub aggregate: Vec<(u32, Stats)>,
    /// Rows of tasks retired during the phase.
    pub tasks: Vec<TaskRow>,
    /// Polls, in spool order (kept in memory: only written with `track_async`).
    pub polls: Vec<PollRecord>,
    /// Tokio spawn sites, site `id` at index `id - 1` (empty without Tokio's instrumentation).
    pub sites: Vec<SiteInfo>,
    /// Bytes at the end that did not form a whole frame (a write cut short).
    pub torn_bytes: u64,
    /// The calls open at the latest flush (the latest open-calls frame; version 2).
    pub open_calls: Option<super::edges::OpenFrame>,
}

/// Reads a whole spool (tolerating a torn last frame) into memory.
#[cfg(test)]
pub(crate) fn read(path: &Path) -> io::Result<SpoolContents> {
    let mut calls: Vec<Vec<CallRecord>> = Vec::new();
    let mut out = scan(
        path,
        true,
        Some(&mut |region, c| {
            let region = region as usize;
            if calls.len() <= region {
                calls.resize_with(region + 1, Vec::new);
            }
            calls[region].extend_from_slice(c);
        }),
    )?;
    calls.resize_with(out.regions.len().max(calls.len()), Vec::new);
    out.calls = calls;
    Ok(out)
}

/// What [`scan`] hands the calls of each calls frame to, with their region id.
pub(crate) type OnCalls<'a> = dyn FnMut(u32, &[CallRecord]) + 'a;

/// Reads a spool (tolerating a torn last frame) one frame at a time, handing the calls of
/// every calls frame to `on_calls` with their region id (`None`: calls frames are skipped
/// undecoded); returns everything else it holds (`calls` stays empty; tasks and polls only
/// with `keep_lanes`). Memory: one frame, plus the lanes when kept. One function per frame tag
/// below, mirroring the writer's `put_*`.
pub(crate) fn scan(
    path: &Path,
    keep_lanes: bool,
    on_calls: Option<&mut OnCalls<'_>>,
) -> io::Result<SpoolContents> {
    scan_into(path, keep_lanes, on_calls, SpoolContents::default())
}

/// [`scan`], adding to `out` (whose lanes may have room reserved) instead of a new value; the
/// header, regions and thread table are replaced by this spool's.
pub(crate) fn scan_into(
    path: &Path,
    keep_lanes: bool,
    mut on_calls: Option<&mut OnCalls<'_>>,
    mut out: SpoolContents,
) -> io::Result<SpoolContents> {
    let mut frame_calls: Vec<CallRecord> = Vec::new();
    let mut frames = Frames::open(path)?;
    let bad = |what: &str| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("spool {}: {what}", path.display()),
        )
    };
    out.regions.clear();
    out.threads.clear();
    let mut thread_at = std::collections::HashMap::new();
    out.torn_bytes = 0;
    let mut saw_header = false;
    let want_calls = on_calls.is_some();
    loop {
        let tag = match frames.next(|tag| skips(tag, want_calls, keep_lanes))? {
            Frame::Read(tag) => tag,
            Frame::Skipped => continue,
            Frame::Torn(bytes) => {
                out.torn_bytes = bytes;
                break;
            }
        };
        let mut r = Cursor {
            d: &frames.payload,
            at: 0,
        };
        match tag {
            TAG_HEADER => {
                (out.header, out.version) = header(&mut r).map_err(&bad)?;
                saw_header = true;
            }
            TAG_CALLS | TAG_CALL_COLUMNS => {
                if let Some(on_calls) = on_calls.as_mut() {
                    let declared = out.regions.len();
                    let region = if tag == TAG_CALLS {
                        calls(&mut r, declared, &mut frame_calls)
                    } else {
                        call_columns(&mut r, declared, &mut frame_calls)
                    }
                    .map_err(&bad)?;
                    on_calls(region, &frame_calls);
                }
            }
            _ => decode_frame(tag, &mut r, &mut out, &mut thread_at, keep_lanes, &bad)?,
        }
    }
    if !saw_header {
        return Err(bad("no header (empty or not a spool)"));
    }
    out.threads.sort_unstable_by_key(|t| t.index);
    Ok(out)
}

/// Whether a pass skips frames tagged `tag` unread: calls frames without `want_calls`, the
/// lanes without `keep_lanes` (a finalize reads the calls and the lanes of one spool in two
/// passes, each skipping the other's frames).
fn skips(tag: u8, want_calls: bool, keep_lanes: bool) -> bool {
    match tag {
        TAG_CALLS | TAG_CALL_COLUMNS => !want_calls,
        TAG_POLLS | TAG_POLL_RUNS | TAG_TASKS => !keep_lanes,
        // Read by `spool::edges::scan_edges` and `spool::below::for_each_below` alone.
        t => t == super::TAG_BELOW || super::edges::is_edge_tag(t),
    }
}

/// Decodes one frame other than the header and calls (`tag`, its payload in `r`) into `out`;
/// `thread_at` indexes `out.threads` by thread id.
fn decode_frame(
    tag: u8,
    r: &mut Cursor<'_>,
    out: &mut SpoolContents,
    thread_at: &mut std::collections::HashMap<u32, usize>,
    keep_lanes: bool,
    bad: &dyn Fn(&str) -> io::Error,
) -> io::Result<()> {
    match tag {
        TAG_REGION => region(r, &mut out.regions).ok_or_else(|| bad("a malformed region frame"))?,
        TAG_POLLS if keep_lanes => {
            polls(r, &mut out.polls).ok_or_else(|| bad("a malformed polls frame"))?
        }
        TAG_POLL_RUNS if keep_lanes => {
            poll_runs(r, &mut out.polls).ok_or_else(|| bad("a malformed polls frame"))?
        }
        TAG_TASKS if keep_lanes => {
            tasks(r, &mut out.tasks).ok_or_else(|| bad("a malformed tasks frame"))?
        }
        TAG_THREADS => {
            let rows = threads(r).ok_or_else(|| bad("a malformed threads frame"))?;
            merge_threads(&mut out.threads, thread_at, rows);
        }
        TAG_AGGREGATE => {
            out.aggregate = aggregate(r).ok_or_else(|| bad("a malformed aggregate frame"))?
        }
        TAG_SITES => sites(r, &mut out.sites).ok_or_else(|| bad("a malformed sites frame"))?,
        TAG_OPEN_CALLS => {
            let open = super::edges::open_frame(r, out.regions.len())
                .ok_or_else(|| bad("a malformed open-calls frame"))?;
            out.open_calls = Some(open);
        }
        _ => return Err(bad(&format!("unknown frame tag {tag}"))),
    }
    Ok(())
}

/// Frame 0: the magic (either version), then the run's header; returns the version too.
pub(super) fn header(r: &mut Cursor<'_>) -> Result<(Header, u8), &'static str> {
    let version = match r.take(8).ok_or("short header")? {
        m if m == MAGIC => 2,
        m if m == MAGIC_V1 => 1,
        _ => return Err("not a scope-profiler spool (bad magic)"),
    };
    let mut read = || -> Option<Header> {
        Some(Header {
            start_time_ns: r.i64()?,
            timestamp: r.str()?,
            label: Some(r.str()?).filter(|l| !l.is_empty()),
            track_threads: r.u8()? != 0,
            track_async: r.u8()? != 0,
            aggregate: r.u8()? != 0,
        })
    };
    read().map(|h| (h, version)).ok_or("header")
}

/// Frame 1: one region declared at its id. The writer declares a file's regions densely, from
/// 0 (a later frame may repeat an id), so an id past the next one is malformed: an id read
/// from a file never sizes an allocation by itself (a planted `u32::MAX` would otherwise ask
/// for hundreds of gigabytes).
pub(super) fn region(r: &mut Cursor<'_>, regions: &mut Vec<SpoolRegion>) -> Option<()> {
    let id = r.u32()? as usize;
    let line = r.i64()?;
    let name = r.str()?;
    let file = r.str()?;
    let region = SpoolRegion { name, file, line };
    match id.cmp(&regions.len()) {
        std::cmp::Ordering::Less => regions[id] = region,
        std::cmp::Ordering::Equal => regions.push(region),
        std::cmp::Ordering::Greater => return None,
    }
    Some(())
}

/// Room to reserve for `n` records declared by a frame whose records take at least
/// `min_bytes` each of the `left` payload bytes: never more than the payload can hold, so a
/// declared count read from a file cannot size an allocation beyond the file's own size.
fn room(n: usize, left: usize, min_bytes: usize) -> usize {
    n.min(left / min_bytes)
}

/// What a calls frame that cannot be decoded is called.
const MALFORMED_CALLS: &str = "a malformed calls frame";

/// Frame 2: calls of one declared region, start times delta-coded; returns the region.
pub(super) fn calls(
    r: &mut Cursor<'_>,
    declared: usize,
    out: &mut Vec<CallRecord>,
) -> Result<u32, &'static str> {
    let region = r.u32().ok_or(MALFORMED_CALLS)?;
    let n = r.u32().ok_or(MALFORMED_CALLS)? as usize;
    if region as usize >= declared {
        return Err("a calls frame of an undeclared region");
    }
    let (d, mut at) = (r.d, r.at);
    let mut previous = 0i64;
    out.clear();
    // Six varints of at least a byte each per call.
    out.reserve(room(n, d.len().saturating_sub(at), 6));
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
                sched_ns: -1,
            })
        })()
        .ok_or(MALFORMED_CALLS)?;
        previous = c.start_ns;
        out.push(c);
    }
    Ok(region)
}

/// Frame 8: calls, the columns that do not vary stored once (see the writer).
pub(super) fn call_columns(
    r: &mut Cursor<'_>,
    declared: usize,
    out: &mut Vec<CallRecord>,
) -> Result<u32, &'static str> {
    let region = r.u32().ok_or(MALFORMED_CALLS)?;
    let n = r.u32().ok_or(MALFORMED_CALLS)? as usize;
    let varying = r.u8().ok_or(MALFORMED_CALLS)?;
    if region as usize >= declared {
        return Err("a calls frame of an undeclared region");
    }
    let (d, mut at) = (r.d, r.at);
    let mut fixed = [0i64; 4];
    for (bit, v) in fixed.iter_mut().enumerate() {
        if varying & (1 << bit) == 0 {
            *v = get_varint(d, &mut at).ok_or(MALFORMED_CALLS)?;
        }
    }
    let mut previous = 0i64;
    out.clear();
    // A start and a duration of at least a byte each per call.
    out.reserve(room(n, d.len().saturating_sub(at), 2));
    for _ in 0..n {
        let c = (|| {
            let start_ns = previous.wrapping_add(get_varint(d, &mut at)?);
            let dur_ns = get_varint(d, &mut at)?;
            let mut v = fixed;
            for (bit, x) in v.iter_mut().enumerate() {
                if varying & (1 << bit) != 0 {
                    *x = get_varint(d, &mut at)?;
                }
            }
            Some(CallRecord {
                start_ns,
                dur_ns,
                thread: u32::try_from(v[0]).ok()?,
                task: v[1],
                await_ns: v[2],
                gpu_ns: v[3],
                call_id: -1,
                parent_id: -1,
                sched_ns: -1,
            })
        })()
        .ok_or(MALFORMED_CALLS)?;
        previous = c.start_ns;
        out.push(c);
    }
    if at < d.len() {
        // Scheduled time of calls in Tokio tasks.
        for c in out.iter_mut() {
            c.sched_ns = get_varint(d, &mut at).ok_or(MALFORMED_CALLS)?;
        }
    }
    Ok(region)
}

/// Frame 9: Tokio spawn sites, each at its id (from 1).
fn sites(r: &mut Cursor<'_>, all: &mut Vec<SiteInfo>) -> Option<()> {
    let n = r.u32()?;
    for _ in 0..n {
        let (id, line, col) = (r.u32()? as usize, r.u32()?, r.u32()?);
        let site = SiteInfo {
            line,
            col,
            name: r.str()?,
            file: r.str()?,
        };
        // Sites are declared densely from 1 (a later frame may repeat one): an id past the
        // next one is malformed, and never sizes an allocation.
        match id.checked_sub(1)? {
            at if at < all.len() => all[at] = site,
            at if at == all.len() => all.push(site),
            _ => return None,
        }
    }
    Some(())
}

/// Adds thread rows to `all`: a row of an index already there replaces it (`at`: index ->
/// position in `all`).
pub(super) fn merge_threads(
    all: &mut Vec<ThreadRow>,
    at: &mut std::collections::HashMap<u32, usize>,
    rows: Vec<ThreadRow>,
) {
    for row in rows {
        match at.get(&row.index) {
            Some(&k) => all[k] = row,
            None => {
                at.insert(row.index, all.len());
                all.push(row);
            }
        }
    }
}

/// Frame 3: rows of the thread table (a later row of an index replaces an earlier one).
pub(super) fn threads(r: &mut Cursor<'_>) -> Option<Vec<ThreadRow>> {
    let n = r.u32()?;
    let mut rows = Vec::with_capacity(n.min(1 << 16) as usize);
    for _ in 0..n {
        rows.push(ThreadRow {
            index: r.u32()?,
            native_id: r.i64()?,
            start_ns: r.i64()?,
            end_ns: r.i64()?,
            cpu_ns: r.i64()?,
            name: r.str()?,
        });
    }
    Some(rows)
}

/// Frame 4: every region's aggregate statistics (the latest frame wins).
pub(super) fn aggregate(r: &mut Cursor<'_>) -> Option<Vec<(u32, Stats)>> {
    let n = r.u32()?;
    let mut all = Vec::with_capacity(n.min(1 << 16) as usize);
    for _ in 0..n {
        let region = r.u32()?;
        all.push((
            region,
            Stats {
                count: r.u64()?,
                total: r.u64()?,
                min: r.u64()?,
                max: r.u64()?,
                mean: f64::from_bits(r.u64()?),
                m2: f64::from_bits(r.u64()?),
            },
        ));
    }
    Some(all)
}

/// Frame 6: polls, start times delta-coded.
pub(super) fn polls(r: &mut Cursor<'_>, out: &mut Vec<PollRecord>) -> Option<()> {
    let n = r.u32()?;
    let (d, mut at) = (r.d, r.at);
    let mut previous = 0i64;
    // Five varints of at least a byte each per poll.
    out.reserve(room(n as usize, d.len().saturating_sub(at), 5));
    for _ in 0..n {
        let mut next = || get_varint(d, &mut at);
        let region = u32::try_from(next()?).ok()?;
        let start_ns = previous.wrapping_add(next()?);
        let p = PollRecord {
            region,
            start_ns,
            dur_ns: next()?,
            thread: u32::try_from(next()?).ok()?,
            task: next()?,
            sched_ns: -1,
        };
        previous = p.start_ns;
        out.push(p);
    }
    Some(())
}

/// Frame 7: polls in runs of one region, thread and task (see the writer).
pub(super) fn poll_runs(r: &mut Cursor<'_>, out: &mut Vec<PollRecord>) -> Option<()> {
    let n = r.u32()? as usize;
    let (d, mut at) = (r.d, r.at);
    let (mut previous, mut task) = (0i64, 0i64);
    // A start and a duration of at least a byte each per poll.
    out.reserve(room(n, d.len().saturating_sub(at), 2));
    let first = out.len();
    let mut read = 0usize;
    while read < n {
        let mut next = || get_varint(d, &mut at);
        let len = usize::try_from(next()?)
            .ok()
            .filter(|&l| l > 0 && l <= n - read)?;
        let region = u32::try_from(next()?).ok()?;
        let thread = u32::try_from(next()?).ok()?;
        task = task.wrapping_add(next()?);
        for _ in 0..len {
            let start_ns = previous.wrapping_add(get_varint(d, &mut at)?);
            previous = start_ns;
            out.push(PollRecord {
                region,
                start_ns,
                dur_ns: get_varint(d, &mut at)?,
                thread,
                task,
                sched_ns: -1,
            });
        }
        read += len;
    }
    if at < d.len() {
        // Scheduled time of Tokio tasks' polls.
        for p in &mut out[first..] {
            p.sched_ns = get_varint(d, &mut at)?;
        }
    }
    Some(())
}

/// Frame 5: rows of retired tasks (their root region by region id).
pub(super) fn tasks(r: &mut Cursor<'_>, rows: &mut Vec<TaskRow>) -> Option<()> {
    let n = r.u32()?;
    let (d, mut at) = (r.d, r.at);
    rows.reserve(n.min(1 << 16) as usize);
    let mut all = Vec::with_capacity(n.min(1 << 16) as usize);
    for _ in 0..n {
        let mut v = [0i64; 9];
        for x in &mut v {
            *x = get_varint(d, &mut at)?;
        }
        all.push(v);
    }
    let with_polls = at < d.len();
    for v in all {
        let mut p = [0i64; 10];
        if with_polls {
            for x in &mut p {
                *x = get_varint(d, &mut at)?;
            }
        }
        let totals = crate::data::rows::TaskTotals {
            index: v[0],
            tokio_id: v[1] as u64,
            thread_index: u32::try_from(v[2]).ok()?,
            created_ns: v[3],
            done_ns: v[4],
            steps: v[5],
            running_ns: v[6],
            suspended_ns: v[7],
            root_region: u32::try_from(v[8]).unwrap_or(u32::MAX),
            polls: if with_polls {
                crate::data::rows::PollTotals::from_spool(&p)
            } else {
                Default::default()
            },
        };
        rows.push(totals.row(false));
    }
    Some(())
}

/// A frame's payload being decoded.
pub(super) struct Cursor<'a> {
    pub(super) d: &'a [u8],
    pub(super) at: usize,
}

impl Cursor<'_> {
    pub(super) fn take(&mut self, n: usize) -> Option<&[u8]> {
        let s = self.d.get(self.at..self.at + n)?;
        self.at += n;
        Some(s)
    }
    pub(super) fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    pub(super) fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|b| u32::from_le_bytes(b.try_into().expect("4")))
    }
    pub(super) fn u64(&mut self) -> Option<u64> {
        self.take(8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8")))
    }
    pub(super) fn i64(&mut self) -> Option<i64> {
        self.u64().map(|v| v as i64)
    }
    pub(super) fn str(&mut self) -> Option<String> {
        let n = self.u32()? as usize;
        Some(String::from_utf8_lossy(self.take(n)?).into_owned())
    }
}

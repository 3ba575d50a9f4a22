//! Reading a spool back: frame by frame, calls handed to a callback one at a time, so a phase
//! of any length is read in constant memory ([`scan`]); `read` collects everything (tests and
//! small spools only).

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;

use super::{
    Header, MAGIC, TAG_AGGREGATE, TAG_CALLS, TAG_HEADER, TAG_POLLS, TAG_REGION, TAG_TASKS,
    TAG_THREADS,
};
use crate::flusher::stats::Stats;
use crate::output::model::{CallRecord, PollRecord, TaskRow, ThreadRow};

/// Reads a zigzag LEB128 varint.
#[inline]
fn get_varint(d: &[u8], at: &mut usize) -> Option<i64> {
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
    /// (name, file, line) by region id.
    pub regions: Vec<(String, String, i64)>,
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
    /// Bytes at the end that did not form a whole frame (a write cut short).
    pub torn_bytes: u64,
}

/// Reads a whole spool (tolerating a torn last frame) into memory.
#[cfg(test)]
pub(crate) fn read(path: &Path) -> io::Result<SpoolContents> {
    let mut calls: Vec<Vec<CallRecord>> = Vec::new();
    let mut out = scan(path, true, &mut |region, c| {
        let region = region as usize;
        if calls.len() <= region {
            calls.resize_with(region + 1, Vec::new);
        }
        calls[region].extend_from_slice(c);
    })?;
    calls.resize_with(out.regions.len().max(calls.len()), Vec::new);
    out.calls = calls;
    Ok(out)
}

/// Reads a spool (tolerating a torn last frame) one frame at a time, handing the calls of
/// every calls frame to `on_calls` with their region id; returns everything else it holds
/// (`calls` stays empty; tasks and polls only with `keep_lanes`). Memory: one frame, plus the
/// polls when kept.
pub(crate) fn scan(
    path: &Path,
    keep_lanes: bool,
    on_calls: &mut dyn FnMut(u32, &[CallRecord]),
) -> io::Result<SpoolContents> {
    let mut frame_calls: Vec<CallRecord> = Vec::new();
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
                }
                out.regions[id] = (name, file, line);
            }
            TAG_CALLS => {
                let region = r.u32().ok_or_else(|| bad("calls"))? as usize;
                let n = r.u32().ok_or_else(|| bad("calls"))? as usize;
                if region >= out.regions.len() {
                    return Err(bad("calls of an undeclared region"));
                }
                let (d, mut at) = (r.d, r.at);
                let mut previous = 0i64;
                frame_calls.clear();
                frame_calls.reserve(n);
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
                    frame_calls.push(c);
                }
                on_calls(region as u32, &frame_calls);
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
            TAG_POLLS | TAG_TASKS if !keep_lanes => {}
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
                    let totals = crate::flusher::task::TaskTotals {
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

//! The frames of spool version 2 (see the table in [`super`]): the calls open at the latest
//! flush (tag 10, a later frame replaces an earlier one) and the task edges, streamed like
//! calls (tags 11 wakes, 12 spawns, 13 `follows_from` links), each buffered up to
//! [`super::CALLS_PER_FRAME`] rows and written at every flush, so the flusher never holds more
//! than a frame of them.
//!
//! Every row is a few zigzag LEB128 varints, its time delta-coded against the row before. A
//! reader checks what it decodes (ids declared, parents before their children, known state
//! codes) and never sizes an allocation by a count read from the file.

use std::io;
use std::path::{Path, PathBuf};

use super::read::{get_varint, Cursor};
use super::{
    frame, put_varint, SpoolRegion, SpoolWriter, CALLS_PER_FRAME, TAG_FOLLOWS, TAG_OPEN_CALLS,
    TAG_REGION, TAG_SPAWNS, TAG_WAKES,
};
use crate::data::edges::{none_if_negative, or_none, Edges, FollowsRow, Spawn, Wake};
use crate::data::open_calls::{OpenCall, OpenCalls, OpenRaw, OpenRow, TaskState};

/// The open-calls frame as the spool holds it: regions by id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct OpenFrame {
    pub at_ns: i64,
    /// Open calls in all (`rows` holds the oldest).
    pub open: u64,
    pub rows: Vec<OpenRow>,
}

impl OpenFrame {
    /// The frame with its regions named (`regions`: the spool's, by id).
    pub(crate) fn named(&self, regions: &[SpoolRegion]) -> OpenCalls {
        OpenCalls {
            at_ns: self.at_ns,
            open: self.open,
            calls: self
                .rows
                .iter()
                .map(|r| OpenCall {
                    region: regions
                        .get(r.raw.region as usize)
                        .map_or_else(String::new, |g| g.name.clone()),
                    start_ns: r.raw.start_ns,
                    thread: r.raw.thread,
                    tokio_id: (r.raw.tokio_id != 0).then_some(r.raw.tokio_id),
                    task: none_if_negative(r.raw.task),
                    parent: u32::try_from(r.parent).ok(),
                    state: r.raw.state,
                })
                .collect(),
        }
    }
}

/// Edges waiting in the writer for their frames.
#[derive(Debug, Default)]
pub(crate) struct PendingEdges {
    wakes: Vec<Wake>,
    spawns: Vec<Spawn>,
    follows: Vec<FollowsRow>,
}

impl SpoolWriter {
    /// Buffers the open-calls frame: `open` calls open at `at_ns`, the oldest of them `rows`
    /// (see [`crate::data::open_calls::nest`]). Written with the next flush.
    pub(crate) fn open_calls(&mut self, at_ns: i64, open: u64, rows: &[OpenRow]) {
        self.put_preamble();
        let mut p = Vec::with_capacity(20 + rows.len() * 8);
        p.extend_from_slice(&at_ns.to_le_bytes());
        p.extend_from_slice(&open.to_le_bytes());
        p.extend_from_slice(&(rows.len() as u32).to_le_bytes());
        let mut previous = 0i64;
        for r in rows {
            let o = &r.raw;
            for v in [
                i64::from(o.region),
                o.start_ns.wrapping_sub(previous),
                i64::from(o.thread),
                o.tokio_id as i64,
                o.task,
                r.parent,
                i64::from(o.state.code()),
            ] {
                put_varint(&mut p, v);
            }
            previous = o.start_ns;
        }
        frame(&mut self.buf, TAG_OPEN_CALLS, &p);
    }

    /// Buffers one wake.
    pub(crate) fn wake(&mut self, w: Wake) {
        self.edges.wakes.push(w);
        if self.edges.wakes.len() >= CALLS_PER_FRAME {
            self.put_edges();
        }
    }

    /// Buffers one spawn.
    pub(crate) fn spawn(&mut self, s: Spawn) {
        self.edges.spawns.push(s);
        if self.edges.spawns.len() >= CALLS_PER_FRAME {
            self.put_edges();
        }
    }

    /// Buffers one `follows_from` link.
    pub(crate) fn follows(&mut self, f: FollowsRow) {
        self.edges.follows.push(f);
        if self.edges.follows.len() >= CALLS_PER_FRAME {
            self.put_edges();
        }
    }

    /// Frames the buffered edges (called by `flush`, and when a kind fills a frame).
    pub(super) fn put_edges(&mut self) {
        let e = std::mem::take(&mut self.edges);
        if !(e.wakes.is_empty() && e.spawns.is_empty() && e.follows.is_empty()) {
            self.put_preamble();
        }
        put_rows(
            &mut self.buf,
            TAG_WAKES,
            e.wakes.iter().map(|w| {
                let t = i64::from(w.thread);
                [w.tick_ns, t, or_none(w.waker_task), w.woken_task]
            }),
        );
        put_rows(
            &mut self.buf,
            TAG_SPAWNS,
            e.spawns.iter().map(|s| {
                let t = i64::from(s.thread);
                [s.tick_ns, t, or_none(s.parent_task), s.child_task]
            }),
        );
        put_rows(
            &mut self.buf,
            TAG_FOLLOWS,
            e.follows.iter().map(|f| {
                [
                    f.tick_ns,
                    i64::from(f.span_region),
                    f.span_start_ns,
                    i64::from(f.follows_region),
                    f.follows_start_ns,
                ]
            }),
        );
        // The buffers, emptied, for the next ones.
        let mut e = e;
        e.wakes.clear();
        e.spawns.clear();
        e.follows.clear();
        self.edges = e;
    }
}

/// Appends a frame `tag` of `rows`, each `K` varints with the first (the time) delta-coded;
/// nothing for no rows.
fn put_rows<const K: usize>(
    buf: &mut Vec<u8>,
    tag: u8,
    rows: impl ExactSizeIterator<Item = [i64; K]>,
) {
    let n = rows.len();
    if n == 0 {
        return;
    }
    let at = buf.len();
    buf.push(tag);
    buf.extend_from_slice(&[0; 4]);
    buf.extend_from_slice(&(n as u32).to_le_bytes());
    let mut previous = 0i64;
    for mut row in rows {
        let t = row[0];
        row[0] = t.wrapping_sub(previous);
        previous = t;
        for v in row {
            put_varint(buf, v);
        }
    }
    let len = (buf.len() - at - 5) as u32;
    buf[at + 1..at + 5].copy_from_slice(&len.to_le_bytes());
}

/// Decodes the rows of a frame written by [`put_rows`] into `out`, each passed through
/// `row` (which refuses a malformed one with `None`).
fn get_rows<const K: usize, T>(
    r: &mut Cursor<'_>,
    out: &mut Vec<T>,
    row: impl Fn([i64; K]) -> Option<T>,
) -> Option<()> {
    let n = r.u32()? as usize;
    let (d, mut at) = (r.d, r.at);
    // K varints of at least a byte each per row: the count cannot reserve beyond the payload.
    out.reserve(n.min(d.len().saturating_sub(at) / K));
    let mut previous = 0i64;
    for _ in 0..n {
        let mut v = [0i64; K];
        for x in &mut v {
            *x = get_varint(d, &mut at)?;
        }
        v[0] = previous.wrapping_add(v[0]);
        previous = v[0];
        out.push(row(v)?);
    }
    (at == d.len()).then_some(())
}

/// A thread index read from a file.
fn thread(v: i64) -> Option<u32> {
    u32::try_from(v).ok()
}

/// A task index read from a file (`>= 0`), or, where `-1` is allowed, `None`.
fn task(v: i64) -> Option<i64> {
    (v >= 0).then_some(v)
}

fn maybe_task(v: i64) -> Option<Option<i64>> {
    match v {
        -1 => Some(None),
        v => task(v).map(Some),
    }
}

/// A region id read from a file: one of the `declared` regions.
fn region(v: i64, declared: usize) -> Option<u32> {
    u32::try_from(v).ok().filter(|&r| (r as usize) < declared)
}

/// Frame 10: the calls open at the latest flush; `declared` regions so far.
pub(super) fn open_frame(r: &mut Cursor<'_>, declared: usize) -> Option<OpenFrame> {
    let at_ns = r.i64()?;
    let open = r.u64()?;
    let n = r.u32()? as usize;
    if (n as u64) > open || n > OpenCalls::CAP {
        return None;
    }
    let (d, mut at) = (r.d, r.at);
    let mut rows = Vec::with_capacity(n.min(d.len().saturating_sub(at) / 7));
    let mut previous = 0i64;
    for k in 0..n {
        let mut v = [0i64; 7];
        for x in &mut v {
            *x = get_varint(d, &mut at)?;
        }
        let start_ns = previous.wrapping_add(v[1]);
        previous = start_ns;
        // A parent comes before its child (oldest first).
        let parent = match v[5] {
            -1 => -1,
            p if p >= 0 && (p as usize) < k => p,
            _ => return None,
        };
        rows.push(OpenRow {
            raw: OpenRaw {
                region: region(v[0], declared)?,
                start_ns,
                thread: thread(v[2])?,
                tokio_id: v[3] as u64,
                task: maybe_task(v[4])?.unwrap_or(-1),
                state: TaskState::from_code(v[6])?,
            },
            parent,
        });
    }
    (at == d.len()).then_some(OpenFrame { at_ns, open, rows })
}

/// Decodes edge frame `tag` (11-13) into `out`; `declared` regions so far.
pub(super) fn edge_frame(
    tag: u8,
    r: &mut Cursor<'_>,
    declared: usize,
    out: &mut Edges,
) -> Option<()> {
    match tag {
        TAG_WAKES => get_rows(r, &mut out.wakes, |[t, th, by, woken]| {
            Some(Wake {
                tick_ns: t,
                thread: thread(th)?,
                waker_task: maybe_task(by)?,
                woken_task: task(woken)?,
            })
        }),
        TAG_SPAWNS => get_rows(r, &mut out.spawns, |[t, th, parent, child]| {
            Some(Spawn {
                tick_ns: t,
                thread: thread(th)?,
                parent_task: maybe_task(parent)?,
                child_task: task(child)?,
            })
        }),
        TAG_FOLLOWS => get_rows(r, &mut out.follows, |[t, a, a_start, b, b_start]| {
            Some(FollowsRow {
                tick_ns: t,
                span_region: region(a, declared)?,
                span_start_ns: a_start.max(-1),
                follows_region: region(b, declared)?,
                follows_start_ns: b_start.max(-1),
            })
        }),
        _ => None,
    }
}

/// Whether `tag` is an edge frame's (read only by [`scan_edges`]).
pub(super) fn is_edge_tag(tag: u8) -> bool {
    matches!(tag, TAG_WAKES | TAG_SPAWNS | TAG_FOLLOWS)
}

/// Hands the edges of the spool files `files` (a phase's, in order) to `f`, one frame at a
/// time (`Edges` holding that frame's rows only) with the regions declared so far: one pass
/// per file that skips every frame but regions and edges. Memory: one frame.
///
/// # Errors
/// A file cannot be read, or an edge frame is malformed (the error names the file).
pub(crate) fn scan_edges(
    files: &[PathBuf],
    mut f: impl FnMut(&Edges, &[SpoolRegion]),
) -> io::Result<()> {
    for file in files {
        edges_of(file, &mut f)?;
    }
    Ok(())
}

/// Every edge of the spool files `files`, collected (tests).
#[cfg(test)]
pub(crate) fn read_edges(files: &[PathBuf]) -> io::Result<(Edges, Vec<SpoolRegion>)> {
    let mut out = Edges::default();
    let mut regions = Vec::new();
    scan_edges(files, |e, r| {
        out.wakes.extend_from_slice(&e.wakes);
        out.spawns.extend_from_slice(&e.spawns);
        out.follows.extend_from_slice(&e.follows);
        regions = r.to_vec();
    })?;
    Ok((out, regions))
}

fn edges_of(path: &Path, f: &mut impl FnMut(&Edges, &[SpoolRegion])) -> io::Result<()> {
    use super::read::frames::{Frame, Frames};
    let mut frames = Frames::open(path)?;
    let mut regions = Vec::new();
    let mut out = Edges::default();
    let bad = |what: &str| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("spool {}: a malformed {what} frame", path.display()),
        )
    };
    loop {
        let tag = match frames.next(|tag| tag != TAG_REGION && !is_edge_tag(tag))? {
            Frame::Read(tag) => tag,
            Frame::Skipped => continue,
            Frame::Torn(_) => break,
        };
        let mut r = Cursor {
            d: &frames.payload,
            at: 0,
        };
        if tag == TAG_REGION {
            super::read::region(&mut r, &mut regions).ok_or_else(|| bad("region"))?;
        } else {
            edge_frame(tag, &mut r, regions.len(), &mut out).ok_or_else(|| bad("edges"))?;
            f(&out, &regions);
            out.wakes.clear();
            out.spawns.clear();
            out.follows.clear();
        }
    }
    Ok(())
}

//! Frame 14 (version 2; only in the flight recorder's segments): the calls that
//! `Builder::flight_min_duration` left out, as much of each as nesting needs to count it under
//! its parent and no more: where it started and its lane, one or two varints (mostly 2 bytes,
//! where a kept call costs its full row). A dump reads them back to give each kept call the
//! exact number of short calls it enclosed (see [`crate::finalize::nesting`]): the innermost
//! call of the lane open at the short call's start.
//!
//! The payload is `n` u32, then n rows, each the LEB128 varint `zigzag(start - previous start)
//! << 1 | lane changed`, followed, when the lane changed, by the zigzag LEB128 varint
//! `lane - previous lane` (the previous row's start and lane are 0 before the frame's first
//! row). A lane is a `task_table` index when `>= 0`, else `-2 - thread`, the lane nesting
//! uses. A run of short calls on one lane costs a varint each, mostly 2 bytes. The rows are
//! encoded as they come (no second pass), up to [`super::CALLS_PER_FRAME`] a frame, and
//! written at every flush.

use std::io;
use std::path::PathBuf;

use super::read::Cursor;
use super::{SpoolWriter, CALLS_PER_FRAME, TAG_BELOW, WRITE_THRESHOLD};

/// A left-out call as nesting sees it: its absolute start (ns) and its lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BelowCall {
    pub start_ns: i64,
    /// A task index (`>= 0`), else `-2 - thread`.
    pub lane: i64,
}

/// Left-out calls encoded and not yet framed.
#[derive(Debug, Default)]
pub(crate) struct PendingBelow {
    /// Left-out calls per region id, since the file began.
    counts: Vec<u64>,
    rows: Vec<u8>,
    n: u32,
    /// The previous row's start and lane (the deltas' base).
    previous: (i64, i64),
}

/// Bytes of a LEB128 varint of a `u64`, at most.
const MAX_VARINT: usize = 10;

impl SpoolWriter {
    /// Buffers one call of `region` left out by the threshold, which started at `start_ns`
    /// on `lane`, and counts it (the flusher's path for such a call: a count and a varint or
    /// two).
    pub(crate) fn below_call(&mut self, region: u32, start_ns: i64, lane: i64) {
        let b = &mut self.below;
        match b.counts.get_mut(region as usize) {
            Some(n) => *n += 1,
            None => {
                b.counts.resize(region as usize + 1, 0);
                b.counts[region as usize] = 1;
            }
        }
        // One varint for a call on the previous call's lane (the usual case: a run of short
        // calls on one thread or task), encoded on the stack and appended at once.
        let d = zigzag(start_ns.wrapping_sub(b.previous.0));
        let mut row = [0u8; 2 * MAX_VARINT];
        let same_lane = lane == b.previous.1;
        let mut len = put_u64(&mut row, 0, (d << 1) | u64::from(!same_lane));
        if !same_lane {
            len = put_u64(&mut row, len, zigzag(lane.wrapping_sub(b.previous.1)));
        }
        // A constant-length copy (a single store) for the usual row of at most 4 bytes, cut
        // back to its length; a call to `memcpy` otherwise.
        let at = b.rows.len();
        if len <= 4 {
            b.rows.extend_from_slice(&row[..4]);
            b.rows.truncate(at + len);
        } else {
            b.rows.extend_from_slice(&row[..len]);
        }
        b.previous = (start_ns, lane);
        b.n += 1;
        if b.n as usize >= CALLS_PER_FRAME {
            self.put_below();
            if self.buf.len() >= WRITE_THRESHOLD {
                self.write_out();
            }
        }
    }

    /// Frames the buffered left-out calls (called by `flush`, and when a frame is full).
    pub(super) fn put_below(&mut self) {
        if self.below.n == 0 {
            return;
        }
        self.put_preamble();
        let b = &mut self.below;
        self.buf.push(TAG_BELOW);
        self.buf
            .extend_from_slice(&(4 + b.rows.len() as u32).to_le_bytes());
        self.buf.extend_from_slice(&b.n.to_le_bytes());
        self.buf.extend_from_slice(&b.rows);
        b.rows.clear();
        b.n = 0;
        b.previous = (0, 0);
    }
}

impl SpoolWriter {
    /// The left-out calls counted per region id since the file began (and forgets them).
    pub(crate) fn take_below_counts(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.below.counts)
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
            below_frame(&mut r, &mut rows).ok_or_else(|| {
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

/// Zigzag: small magnitudes of either sign become small unsigned values.
fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Writes `v` as LEB128 into `row` at `at`; returns the end.
fn put_u64(row: &mut [u8; 2 * MAX_VARINT], mut at: usize, mut v: u64) -> usize {
    while v >= 0x80 {
        row[at] = (v as u8) | 0x80;
        v >>= 7;
        at += 1;
    }
    row[at] = v as u8;
    at + 1
}

/// Reads a LEB128 `u64` (the reader's side of [`put_u64`]).
fn get_u64(d: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *d.get(*at)?;
        *at += 1;
        v |= u64::from(b & 0x7F) << shift;
        if b < 0x80 {
            return Some(v);
        }
    }
    None
}

/// The inverse of [`zigzag`].
fn unzigzag(z: u64) -> i64 {
    ((z >> 1) as i64) ^ -((z & 1) as i64)
}

/// Decodes one frame 14 into `out`, checking each lane (a task index, or `-2 - thread`).
fn below_frame(r: &mut Cursor<'_>, out: &mut Vec<BelowCall>) -> Option<()> {
    let n = r.u32()? as usize;
    let (d, mut at) = (r.d, r.at);
    // A row is at least a byte: the count cannot reserve beyond the payload.
    out.reserve(n.min(d.len().saturating_sub(at)));
    let (mut start_ns, mut lane) = (0i64, 0i64);
    let lanes = -2 - i64::from(u32::MAX)..=-2;
    for _ in 0..n {
        let first = get_u64(d, &mut at)?;
        start_ns = start_ns.wrapping_add(unzigzag(first >> 1));
        if first & 1 == 1 {
            lane = lane.wrapping_add(unzigzag(get_u64(d, &mut at)?));
        }
        if lane < 0 && !lanes.contains(&lane) {
            return None;
        }
        out.push(BelowCall { start_ns, lane });
    }
    (at == d.len()).then_some(())
}

//! The spool's encodings on the writing side: zigzag LEB128 varints, length-prefixed strings,
//! frames (`tag`, `u32` length, payload) and which columns of a calls frame vary.

use super::loss::CallSpan;
use crate::data::rows::CallRecord;

/// The calls' count and time range, and which of their columns (bit 0 thread, 1 task,
/// 2 await, 3 gpu) vary within them.
pub(super) fn columns_of(calls: &[CallRecord]) -> (CallSpan, u8) {
    let first = &calls[0];
    let mut span = CallSpan::default();
    let mut varying = 0u8;
    for c in calls {
        span.add(c.start_ns, c.start_ns + c.dur_ns.max(0));
        varying |= u8::from(c.thread != first.thread)
            | u8::from(c.task != first.task) << 1
            | u8::from(c.await_ns != first.await_ns) << 2
            | u8::from(c.gpu_ns != first.gpu_ns) << 3;
    }
    (span, varying)
}

/// Appends `v` as a zigzag LEB128 varint (small magnitudes of either sign take one byte).
#[inline]
pub(super) fn put_varint(buf: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    if z < 0x80 {
        // Most values (ids, zeros, small deltas): one byte.
        buf.push(z as u8);
        return;
    }
    while z >= 0x80 {
        buf.push((z as u8) | 0x80);
        z >>= 7;
    }
    buf.push(z as u8);
}

pub(super) fn put_str(p: &mut Vec<u8>, s: &str) {
    p.extend_from_slice(&(s.len() as u32).to_le_bytes());
    p.extend_from_slice(s.as_bytes());
}

pub(super) fn frame(buf: &mut Vec<u8>, tag: u8, payload: &[u8]) {
    buf.push(tag);
    buf.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    buf.extend_from_slice(payload);
}

//! A small multiplicative hasher for integer keys (span ids, callsite addresses) on the
//! flusher, where SipHash would cost more than the rest of the bookkeeping.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Fibonacci hashing of one u64; fine for keys that are ids or addresses, not for untrusted
/// input.
#[derive(Default, Clone, Copy)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (v ^ self.0)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .rotate_left(29);
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
}

/// A HashMap keyed by integers, hashed with [`IdHasher`].
pub(crate) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

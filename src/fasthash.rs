//! A small multiplicative hasher for integer keys (span ids, callsite addresses) on the
//! flusher, where SipHash would cost more than the rest of the bookkeeping.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Murmur3's 64-bit finalizer over one u64: cheap, and it mixes every input bit into every
/// output bit, which matters here: span ids differ mostly in their high (generation) bits and
/// addresses in their middle bits. Not for untrusted input.
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
        let mut x = v ^ self.0;
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^= x >> 33;
        x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        x ^= x >> 33;
        self.0 = x;
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
}

/// A HashMap keyed by integers, hashed with [`IdHasher`].
pub(crate) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::{BuildHasher, BuildHasherDefault};

    #[test]
    fn ids_differing_only_in_high_bits_spread_over_buckets_and_tags() {
        let b = BuildHasherDefault::<IdHasher>::default();
        let hashes: Vec<u64> = (0..1024u64).map(|g| b.hash_one((g << 40) | 5)).collect();
        let low: std::collections::HashSet<u64> = hashes.iter().map(|h| h & 1023).collect();
        let top: std::collections::HashSet<u64> = hashes.iter().map(|h| h >> 57).collect();
        assert!(low.len() > 500, "{}", low.len());
        assert!(top.len() > 100, "{}", top.len());
    }
}

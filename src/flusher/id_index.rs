//! An index from 64-bit ids (span ids, Tokio task ids) to the slab entries that hold them,
//! which keeps only the 4-byte entry number per bucket: the id is read back from the slab.
//!
//! A map from `u64` to `u32` stores 16 bytes per bucket (the pair, padded); at a million live
//! spans, with the table between half and seven eighths full, that is 34 bytes per live span,
//! more than half of what the span's slab entry itself costs. Here a bucket is the `u32` and
//! hashbrown's control byte: 10 bytes per live span at the same load. A lookup reads the slab
//! entry of the candidate it finds, which the caller reads next anyway, and the control bytes'
//! 7 hash bits make a false candidate rare.
//!
//! The caller keeps one rule: every entry of the index names a live slab entry whose id is
//! the one it was inserted under, since the table rehashes (on growth and shrink) by reading
//! the ids back through `key_of`. An entry is removed before its slab entry is freed.

use std::hash::Hasher;

use hashbrown::HashTable;

use crate::fasthash::IdHasher;

/// `id`'s hash: the murmur finalizer of [`IdHasher`] (span ids differ mostly in their high
/// bits, and hashbrown takes both the bucket and the control bits from the hash).
#[inline]
fn hash(id: u64) -> u64 {
    let mut h = IdHasher::default();
    h.write_u64(id);
    h.finish()
}

/// Ids to slab entry numbers (see the module docs).
#[derive(Default)]
pub(crate) struct IdIndex {
    table: HashTable<u32>,
}

impl IdIndex {
    /// The entry of `id`, if any; `key_of(k)` is the id slab entry `k` holds.
    #[inline]
    pub(crate) fn get(&self, id: u64, key_of: impl Fn(u32) -> u64) -> Option<u32> {
        self.table.find(hash(id), |&k| key_of(k) == id).copied()
    }

    /// Makes `k` the entry of `id`, replacing the one it had (the newest instance of a reused
    /// span id). `key_of` reads slab entries, `k` included (it must hold `id` already).
    pub(crate) fn insert(&mut self, id: u64, k: u32, key_of: impl Fn(u32) -> u64) {
        debug_assert_eq!(key_of(k), id);
        let h = hash(id);
        match self.table.find_mut(h, |&e| key_of(e) == id) {
            Some(e) => *e = k,
            None => {
                self.table.insert_unique(h, k, |&e| hash(key_of(e)));
            }
        }
    }

    /// Removes the entry of `id` if it is `k` (an older instance of a reused id is not in
    /// the index); returns whether it was.
    pub(crate) fn remove_if(&mut self, id: u64, k: u32, key_of: impl Fn(u32) -> u64) -> bool {
        match self.table.find_entry(hash(id), |&e| key_of(e) == id) {
            Ok(entry) if *entry.get() == k => {
                entry.remove();
                true
            }
            _ => false,
        }
    }

    /// Entries.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.table.len()
    }

    /// True when it has no entry.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// Buckets' worth of entries it holds without growing.
    pub(crate) fn capacity(&self) -> usize {
        self.table.capacity()
    }

    /// Gives memory back down to room for `min` entries (rehashes through `key_of`).
    pub(crate) fn shrink_to(&mut self, min: usize, key_of: impl Fn(u32) -> u64) {
        self.table.shrink_to(min, |&e| hash(key_of(e)));
    }

    /// Frees the table when it is much larger than its entries need (a burst has passed):
    /// above `keep` and 8 times the entries, down to twice them.
    pub(crate) fn shrink_after_burst(&mut self, keep: usize, key_of: impl Fn(u32) -> u64) {
        if self.capacity() > keep.max(8 * self.len()) {
            self.shrink_to(keep.max(2 * self.len()), key_of);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A slab of ids and an index over it, checked against a plain map through inserts,
    /// replacements, removals and shrinks (a table that grows and shrinks rehashes by
    /// reading the slab back).
    #[test]
    fn agrees_with_a_map_through_growth_reuse_and_shrink() {
        let mut slab: Vec<u64> = Vec::new();
        let mut index = IdIndex::default();
        let mut model = std::collections::HashMap::new();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for step in 0..200_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Ids in a small space, so they are reused often; high bits set as in span ids.
            let id = (x % 5_000 + 1) << 40 | (x % 5_000 + 1);
            if step % 3 == 2 {
                if let Some(&k) = model.get(&id) {
                    assert!(index.remove_if(id, k, |e| slab[e as usize]));
                    model.remove(&id);
                    // A second removal, or one of another entry number, finds nothing.
                    assert!(!index.remove_if(id, k, |e| slab[e as usize]));
                    slab[k as usize] = 0;
                }
            } else {
                slab.push(id);
                let k = (slab.len() - 1) as u32;
                index.insert(id, k, |e| slab[e as usize]);
                if let Some(old) = model.insert(id, k) {
                    assert!(!index.remove_if(id, old, |e| slab[e as usize]));
                }
            }
            if step % 50_000 == 0 {
                index.shrink_to(0, |e| slab[e as usize]);
            }
        }
        assert_eq!(index.len(), model.len());
        for (&id, &k) in &model {
            assert_eq!(index.get(id, |e| slab[e as usize]), Some(k));
        }
        assert_eq!(index.get(u64::MAX, |e| slab[e as usize]), None);
    }
}

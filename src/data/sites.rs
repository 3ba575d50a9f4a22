//! Spawn sites: a Tokio task's name (`task.name`) and spawn location (`loc.file`, `loc.line`,
//! `loc.col`), interned to a small id that the spawn records carry.
//!
//! A spawn hashes its site while its fields are visited (no allocation) and finds the id in a
//! per-thread cache; only a site seen for the first time on a thread takes the table's lock.
//! The table holds at most [`MAX_SITES`] sites: past that, a site is interned by its location
//! alone (task names can be made per request; locations are bounded by the code), and past
//! that too it gets id 0, "unknown". Names and file paths are kept up to [`SHORT`] bytes.

use std::cell::Cell;
use std::fmt::Write as _;
use std::hash::Hasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::fasthash::{FastMap, IdHasher};

/// Sites kept with their name; beyond, by location only.
pub(crate) const MAX_SITES: usize = 4096;
/// Bytes of a name or file path kept (longer ones are cut at a character boundary).
const SHORT: usize = 160;
/// Entries of the per-thread cache.
const CACHE: usize = 64;

/// A short string written through `fmt::Write`: the first [`SHORT`] bytes kept, every byte
/// hashed.
#[derive(Clone)]
pub(crate) struct Short {
    buf: [u8; SHORT],
    len: usize,
    hash: IdHasher,
}

impl Default for Short {
    fn default() -> Self {
        Short {
            buf: [0; SHORT],
            len: 0,
            hash: IdHasher::default(),
        }
    }
}

impl std::fmt::Write for Short {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.hash.write(s.as_bytes());
        let mut take = s.len().min(SHORT - self.len);
        while !s.is_char_boundary(take) {
            take -= 1;
        }
        self.buf[self.len..self.len + take].copy_from_slice(&s.as_bytes()[..take]);
        self.len += take;
        Ok(())
    }
}

impl Short {
    /// What was kept.
    pub(crate) fn as_str(&self) -> &str {
        // Only whole characters were copied in.
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or("")
    }

    fn hash(&self) -> u64 {
        self.hash.finish()
    }

    fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// A spawn site as its fields are visited.
#[derive(Clone, Default)]
pub(crate) struct SiteKey {
    name: Short,
    file: Short,
    pub(crate) line: u32,
    pub(crate) col: u32,
}

impl SiteKey {
    /// Sets the task's name (an empty one is no name).
    pub(crate) fn set_name(&mut self, name: &dyn std::fmt::Debug) {
        self.name = Short::default();
        let _ = write!(self.name, "{name:?}");
    }

    /// The spawn location's file, as far as it is kept.
    pub(crate) fn file(&self) -> &str {
        self.file.as_str()
    }

    /// Sets the spawn location's file.
    pub(crate) fn set_file(&mut self, file: &str) {
        self.file = Short::default();
        let _ = self.file.write_str(file);
    }

    /// The key's hash, with or without its name.
    fn hash(&self, with_name: bool) -> u64 {
        let mut h = IdHasher::default();
        h.write_u64(if with_name { self.name.hash() } else { 0 });
        h.write_u64(self.file.hash());
        h.write_u64((u64::from(self.line) << 32) | u64::from(self.col));
        h.finish() | 1 // never 0, the empty cache entry
    }
}

/// One interned spawn site.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct SiteInfo {
    /// `task.name` ("" = none).
    pub name: String,
    /// `loc.file` ("" = unknown).
    pub file: String,
    pub line: u32,
    pub col: u32,
}

impl SiteInfo {
    /// `file:line:col`, or "" when the location is unknown.
    pub(crate) fn location(&self) -> String {
        if self.file.is_empty() {
            String::new()
        } else {
            format!("{}:{}:{}", self.file, self.line, self.col)
        }
    }

    /// The task's lane name: its name, else `task file:line`, else "".
    pub(crate) fn lane_name(&self) -> String {
        if !self.name.is_empty() {
            self.name.clone()
        } else if !self.file.is_empty() {
            format!("task {}:{}", self.file, self.line)
        } else {
            String::new()
        }
    }
}

/// The interned sites of one layer (id 0 = unknown; ids from 1).
#[derive(Debug)]
pub(crate) struct Sites {
    /// Unique per table, so the per-thread caches of two layers never mix.
    uid: u64,
    table: Mutex<Table>,
}

#[derive(Debug, Default)]
struct Table {
    by_hash: FastMap<u64, u32>,
    /// Site `id` at index `id - 1`.
    list: Vec<SiteInfo>,
}

impl Default for Sites {
    fn default() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Sites {
            uid: NEXT.fetch_add(1, Ordering::Relaxed),
            table: Mutex::default(),
        }
    }
}

thread_local! {
    /// Recently interned (table uid, key hash, site id), by the hash's low bits.
    static CACHE_TL: [Cell<(u64, u64, u32)>; CACHE] = const {
        [const { Cell::new((0, 0, 0)) }; CACHE]
    };
}

impl Sites {
    /// The id of `key`'s site, interning it on first sight.
    pub(crate) fn intern(&self, key: &SiteKey) -> u32 {
        let hash = key.hash(true);
        let slot = (hash as usize) % CACHE;
        let cached = CACHE_TL.try_with(|c| c[slot].get()).unwrap_or((0, 0, 0));
        if cached.0 == self.uid && cached.1 == hash {
            return cached.2;
        }
        let id = self.intern_slow(key, hash);
        let _ = CACHE_TL.try_with(|c| c[slot].set((self.uid, hash, id)));
        id
    }

    #[cold]
    fn intern_slow(&self, key: &SiteKey, hash: u64) -> u32 {
        let mut t = self.table.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&id) = t.by_hash.get(&hash) {
            return id;
        }
        let (hash, name) = if t.list.len() < MAX_SITES || key.name.is_empty() {
            (hash, key.name.as_str())
        } else {
            // Full: by location only (a name per request must not grow the table).
            let h = key.hash(false);
            if let Some(&id) = t.by_hash.get(&h) {
                return id;
            }
            (h, "")
        };
        if t.list.len() >= 2 * MAX_SITES {
            return 0;
        }
        t.list.push(SiteInfo {
            name: name.to_owned(),
            file: key.file.as_str().to_owned(),
            line: key.line,
            col: key.col,
        });
        let id = t.list.len() as u32;
        t.by_hash.insert(hash, id);
        id
    }

    /// The sites interned after the first `from`, as (id, site) (cold: the flusher declares
    /// them to the spool, finalize names the tasks).
    pub(crate) fn since(&self, from: usize) -> Vec<(u32, SiteInfo)> {
        let t = self.table.lock().unwrap_or_else(|e| e.into_inner());
        t.list
            .iter()
            .enumerate()
            .skip(from)
            .map(|(i, s)| (i as u32 + 1, s.clone()))
            .collect()
    }

    /// How many sites are interned.
    pub(crate) fn len(&self) -> usize {
        self.table
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .list
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str, file: &str, line: u32) -> SiteKey {
        let mut k = SiteKey::default();
        k.set_name(&format_args!("{name}"));
        k.set_file(file);
        k.line = line;
        k.col = 5;
        k
    }

    #[test]
    fn sites_intern_once_and_name_their_lane() {
        let s = Sites::default();
        let a = s.intern(&key("", "src/main.rs", 42));
        let b = s.intern(&key("worker", "src/main.rs", 42));
        assert_ne!(a, b);
        assert_eq!(s.intern(&key("", "src/main.rs", 42)), a, "cached");
        assert_eq!(s.len(), 2);
        let all = s.since(0);
        assert_eq!(all[0].0, a);
        assert_eq!(all[0].1.lane_name(), "task src/main.rs:42");
        assert_eq!(all[0].1.location(), "src/main.rs:42:5");
        assert_eq!(all[1].1.lane_name(), "worker");
        assert_eq!(s.since(1).len(), 1);
    }

    #[test]
    fn names_past_the_cap_fall_back_to_the_location() {
        let s = Sites::default();
        for k in 0..MAX_SITES {
            s.intern(&key(&format!("req-{k}"), "src/a.rs", 1));
        }
        let x = s.intern(&key("req-late-1", "src/a.rs", 1));
        let y = s.intern(&key("req-late-2", "src/a.rs", 1));
        assert_eq!(x, y, "one location-only site for every later name");
        assert_eq!(s.since(MAX_SITES)[0].1.name, "");
        assert_eq!(s.len(), MAX_SITES + 1);
    }

    #[test]
    fn long_names_are_cut_at_a_character_boundary() {
        let long = "é".repeat(200);
        let s = Sites::default();
        let id = s.intern(&key(&long, "f.rs", 1));
        let info = &s.since(0)[0].1;
        assert_eq!(id, 1);
        assert!(info.name.len() <= SHORT && info.name.chars().all(|c| c == 'é'));
    }
}

//! Sorting items in bounded memory: runs of at most `run_items` items are sorted in memory;
//! when more come, each run is spilled to a temporary file and the runs are merged, so the
//! resident set stays near `run_items` x 32 bytes whatever the file's size. Spilled items are
//! delta-encoded varints (start as the gap to the previous item's, end as a duration), about
//! 8 bytes each instead of 29.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::items::{Item, Kind};
use crate::proto::varint;

/// Items per in-memory run by default (~96 MiB).
pub(crate) const DEFAULT_RUN_ITEMS: usize = 3 << 20;

/// Collects items, then yields them in [`Item::order`].
pub(crate) struct Sorter {
    run_items: usize,
    buf: Vec<Item>,
    spill: Option<Spill>,
    spill_path: PathBuf,
}

/// The temporary file holding the sorted runs, removed on drop.
struct Spill {
    path: PathBuf,
    file: BufWriter<File>,
    /// (offset in bytes, items) of each run.
    runs: Vec<(u64, u64)>,
    written: u64,
}

impl Drop for Spill {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Sorter {
    /// A sorter that spills next to `spill_path` (a file name it may create and will remove).
    pub(crate) fn new(run_items: usize, spill_path: PathBuf) -> Sorter {
        Sorter {
            run_items: run_items.max(2),
            buf: Vec::new(),
            spill: None,
            spill_path,
        }
    }

    /// Adds one item.
    #[inline]
    pub(crate) fn push(&mut self, item: Item) -> std::io::Result<()> {
        if self.buf.len() == self.run_items {
            self.spill_run()?;
        }
        if self.buf.capacity() == 0 {
            self.buf.reserve_exact(self.run_items.min(1 << 16));
        }
        self.buf.push(item);
        Ok(())
    }

    fn spill_run(&mut self) -> std::io::Result<()> {
        self.buf.sort_unstable_by(Item::order);
        if self.spill.is_none() {
            // Private (it holds the profile's calls), never through a link.
            let file = File::options()
                .read(true)
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&self.spill_path)?;
            self.spill = Some(Spill {
                path: self.spill_path.clone(),
                file: BufWriter::with_capacity(1 << 20, file),
                runs: Vec::new(),
                written: 0,
            });
        }
        let spill = self.spill.as_mut().expect("created above");
        let mut bytes = Vec::with_capacity(1 << 16);
        let mut previous = 0i64;
        let start = spill.written;
        for chunk in self.buf.chunks(4096) {
            bytes.clear();
            for it in chunk {
                encode(it, previous, &mut bytes);
                previous = it.start;
            }
            spill.file.write_all(&bytes)?;
            spill.written += bytes.len() as u64;
        }
        spill.runs.push((start, self.buf.len() as u64));
        self.buf.clear();
        Ok(())
    }

    /// Calls `f` with every item in order.
    pub(crate) fn finish<E: From<std::io::Error>>(
        mut self,
        mut f: impl FnMut(&Item) -> Result<(), E>,
    ) -> Result<(), E> {
        if self.spill.is_none() {
            self.buf.sort_unstable_by(Item::order);
            for it in &self.buf {
                f(it)?;
            }
            return Ok(());
        }
        if !self.buf.is_empty() {
            self.spill_run()?;
        }
        self.buf = Vec::new();
        let spill = self.spill.as_mut().expect("checked above");
        spill.file.flush()?;
        let mut readers = Vec::with_capacity(spill.runs.len());
        for &(offset, n) in &spill.runs {
            let mut file = File::open(&spill.path)?;
            file.seek(SeekFrom::Start(offset))?;
            readers.push(Run {
                file,
                buf: Vec::new(),
                at: 0,
                left: n,
                previous: 0,
            });
        }
        let mut heap = BinaryHeap::with_capacity(readers.len());
        for (i, r) in readers.iter_mut().enumerate() {
            if let Some(item) = r.next()? {
                heap.push(Head { item, run: i });
            }
        }
        while let Some(Head { item, run }) = heap.pop() {
            f(&item)?;
            if let Some(next) = readers[run].next()? {
                heap.push(Head { item: next, run });
            }
        }
        Ok(())
    }
}

/// A spill file name beside `out`.
pub(crate) fn spill_path(out: &Path) -> PathBuf {
    let name = out
        .file_name()
        .map_or_else(|| "out".into(), |n| n.to_string_lossy().into_owned());
    out.with_file_name(format!(".{name}.{}.sort.tmp", std::process::id()))
}

/// Appends `it` to a spill: zigzag start gap to `previous`, duration, name, track, other + 1
/// (0 = none), kind.
fn encode(it: &Item, previous: i64, out: &mut Vec<u8>) {
    let gap = it.start.wrapping_sub(previous);
    varint(out, ((gap << 1) ^ (gap >> 63)) as u64);
    varint(out, it.end.wrapping_sub(it.start) as u64);
    varint(out, u64::from(it.name));
    varint(out, u64::from(it.track));
    varint(out, u64::from(it.other.wrapping_add(1)));
    out.push(it.kind as u8);
}

/// One sorted run being read back.
struct Run {
    file: File,
    buf: Vec<u8>,
    at: usize,
    left: u64,
    previous: i64,
}

/// Largest encoded item (five 10-byte varints and the kind).
const MAX_ENCODED: usize = 51;

impl Run {
    fn next(&mut self) -> std::io::Result<Option<Item>> {
        if self.left == 0 {
            return Ok(None);
        }
        if self.buf.len() - self.at < MAX_ENCODED {
            // Refill: keep the unread tail, read up to 64 KiB more (bounded by the run's end
            // only through `left`; reading into the next run's bytes is harmless).
            self.buf.drain(..self.at);
            self.at = 0;
            let have = self.buf.len();
            self.buf.resize(have + (1 << 16), 0);
            let n = read_full(&mut self.file, &mut self.buf[have..])?;
            self.buf.truncate(have + n);
        }
        let b = &self.buf;
        let mut at = self.at;
        let bad = || std::io::Error::new(std::io::ErrorKind::InvalidData, "corrupt sort file");
        let mut next = || -> std::io::Result<u64> {
            let mut v = 0u64;
            for shift in (0..64).step_by(7) {
                let byte = *b.get(at).ok_or_else(bad)?;
                at += 1;
                v |= u64::from(byte & 0x7f) << shift;
                if byte < 0x80 {
                    return Ok(v);
                }
            }
            Err(bad())
        };
        let z = next()?;
        let gap = ((z >> 1) as i64) ^ -((z & 1) as i64);
        let dur = next()? as i64;
        let name = next()? as u32;
        let track = next()? as u32;
        let other = (next()? as u32).wrapping_sub(1);
        let kind = Kind::from_u8(*b.get(at).ok_or_else(bad)?);
        at += 1;
        self.at = at;
        self.left -= 1;
        let start = self.previous.wrapping_add(gap);
        self.previous = start;
        Ok(Some(Item {
            start,
            end: start.wrapping_add(dur),
            name,
            track,
            other,
            kind,
        }))
    }
}

/// Reads until `buf` is full or the file ends.
fn read_full(f: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// Heap entry: the smallest item first.
struct Head {
    item: Item,
    run: usize,
}

impl PartialEq for Head {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Head {}
impl PartialOrd for Head {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Head {
    fn cmp(&self, o: &Self) -> Ordering {
        // BinaryHeap is a max-heap: reverse.
        o.item.order(&self.item).then(o.run.cmp(&self.run))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]
        #[test]
        fn spilled_runs_merge_in_order(
            v in proptest::collection::vec(
                (prop_oneof![3 => -50i64..50, 1 => -(1i64 << 61)..(1i64 << 61)], 0i64..(1 << 40),
                 any::<u32>(), 0u32..4, prop_oneof![Just(u32::MAX), any::<u32>()], 0u8..4),
                0..300),
            run in 2usize..40,
        ) {
            let dir = std::env::temp_dir().join(format!("scopeprof-sort-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let path = dir.join(format!("s{}-{}.tmp", run, v.len()));
            let _ = std::fs::remove_file(&path);
            let mut s = Sorter::new(run, path.clone());
            let items: Vec<Item> = v.iter().map(|&(a, d, name, track, other, kind)| Item {
                start: a, end: a + d, name, track, other, kind: Kind::from_u8(kind),
            }).collect();
            for it in &items {
                s.push(*it).unwrap();
            }
            let mut out = Vec::new();
            s.finish(|it| { out.push(*it); Ok::<(), std::io::Error>(()) }).unwrap();
            let mut want = items.clone();
            want.sort_by(Item::order);
            prop_assert_eq!(out, want);
            prop_assert!(!path.exists(), "spill file removed");
        }
    }
}

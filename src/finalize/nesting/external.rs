//! Nesting a phase too large to sort in memory: an external merge sort.
//!
//! Calls are collected in runs of [`RUN`] spans; each full run is sorted (start ascending, end
//! descending) and appended to one anonymous temporary file (created beside the output with
//! `O_EXCL | O_NOFOLLOW`, unlinked at once, so a crash leaves nothing behind). Then the runs
//! are merged through a heap, one buffered reader per run, and the calls are handed to the
//! [`Nester`](super::Nester) in sorted order. Memory: one run (32 bytes per span) plus 64 KiB
//! per run being merged; disk: 32 bytes per call, read back once.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::Span;

/// Spans per run (32 MiB, plus 16 MiB while it is sorted).
pub(crate) const RUN: usize = 1 << 20;
/// Bytes of one span on disk.
const SPAN_BYTES: usize = 40;
/// Spans read at a time from one run while merging.
const READ_SPANS: usize = 2048;

/// Sorted runs of spans in a temporary file.
pub(crate) struct Runs {
    file: File,
    /// (offset in spans, length in spans) of each run.
    runs: Vec<(u64, u64)>,
    written: u64,
    buf: Vec<Span>,
}

fn encode(s: &Span, out: &mut Vec<u8>) {
    out.extend_from_slice(&s.start.to_le_bytes());
    out.extend_from_slice(&s.end.to_le_bytes());
    out.extend_from_slice(&s.lane.to_le_bytes());
    out.extend_from_slice(&s.row.to_le_bytes());
    out.extend_from_slice(&s.g.to_le_bytes());
    out.extend_from_slice(&s.busy.to_le_bytes());
}

fn decode(b: &[u8]) -> Span {
    let i = |k: usize| i64::from_le_bytes(b[k..k + 8].try_into().expect("8 bytes"));
    let u = |k: usize| u32::from_le_bytes(b[k..k + 4].try_into().expect("4 bytes"));
    Span {
        start: i(0),
        end: i(8),
        lane: i(16),
        row: u(24),
        g: u(28),
        busy: i(32),
    }
}

impl Runs {
    /// Starts the runs with the spans collected so far, in a temporary file in `dir`.
    pub(crate) fn new(dir: &Path, first: Vec<Span>) -> io::Result<Runs> {
        let mut attempt = 0u32;
        let file = loop {
            let path = dir.join(format!(
                ".scope-profiler-nest.{}.{:x}.{attempt}.tmp",
                std::process::id(),
                crate::data::time::monotonic_ns()
            ));
            match crate::data::files::create_new(&path, 0o600) {
                Ok(f) => {
                    let _ = std::fs::remove_file(&path);
                    break f;
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 8 => attempt += 1,
                Err(e) => return Err(e),
            }
        };
        let mut r = Runs {
            file,
            runs: Vec::new(),
            written: 0,
            buf: first,
        };
        if r.buf.len() >= RUN {
            r.spill()?;
        }
        Ok(r)
    }

    /// Adds one span.
    pub(crate) fn push(&mut self, s: Span) -> io::Result<()> {
        self.buf.push(s);
        if self.buf.len() >= RUN {
            self.spill()?;
        }
        Ok(())
    }

    fn spill(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        super::sort(&mut self.buf);
        let mut bytes = Vec::with_capacity(1 << 20);
        let mut w = io::BufWriter::with_capacity(1 << 20, &self.file);
        for s in &self.buf {
            encode(s, &mut bytes);
            if bytes.len() >= 1 << 20 {
                w.write_all(&bytes)?;
                bytes.clear();
            }
        }
        w.write_all(&bytes)?;
        w.flush()?;
        let n = self.buf.len() as u64;
        self.runs.push((self.written, n));
        self.written += n;
        self.buf.clear();
        Ok(())
    }

    /// Hands every span to `f` in sorted order; stops at `f`'s first error.
    pub(crate) fn merge<E>(
        mut self,
        mut f: impl FnMut(&Span) -> Result<(), E>,
    ) -> io::Result<Result<(), E>> {
        self.spill()?;
        self.buf = Vec::new();
        let mut readers: Vec<Reader> = self
            .runs
            .iter()
            .map(|&(at, len)| Reader {
                next: at,
                end: at + len,
                buf: Vec::new(),
                pos: 0,
            })
            .collect();
        let mut heap = BinaryHeap::new();
        for (k, r) in readers.iter_mut().enumerate() {
            if let Some(s) = r.next(&self.file)? {
                heap.push(Reverse((s.start, Reverse(s.end), k, Key(s))));
            }
        }
        while let Some(mut top) = heap.peek_mut() {
            let Reverse((_, _, k, Key(s))) = *top;
            if let Err(e) = f(&s) {
                return Ok(Err(e));
            }
            // Replace the top in place (one sift instead of a pop and a push).
            match readers[k].next(&self.file)? {
                Some(n) => *top = Reverse((n.start, Reverse(n.end), k, Key(n))),
                None => {
                    std::collections::binary_heap::PeekMut::pop(top);
                }
            }
        }
        Ok(Ok(()))
    }
}

/// A span carried through the heap without taking part in the ordering.
#[derive(Clone, Copy)]
struct Key(Span);

impl PartialEq for Key {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl Eq for Key {}
impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Key {
    fn cmp(&self, _: &Self) -> std::cmp::Ordering {
        std::cmp::Ordering::Equal
    }
}

/// Reads one run back, [`READ_SPANS`] at a time.
struct Reader {
    next: u64,
    end: u64,
    buf: Vec<u8>,
    pos: usize,
}

impl Reader {
    fn next(&mut self, file: &File) -> io::Result<Option<Span>> {
        if self.pos >= self.buf.len() {
            if self.next >= self.end {
                return Ok(None);
            }
            let n = (self.end - self.next).min(READ_SPANS as u64);
            self.buf.resize(n as usize * SPAN_BYTES, 0);
            file.read_exact_at(&mut self.buf, self.next * SPAN_BYTES as u64)?;
            self.next += n;
            self.pos = 0;
        }
        let s = decode(&self.buf[self.pos..self.pos + SPAN_BYTES]);
        self.pos += SPAN_BYTES;
        Ok(Some(s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs merge into the same order, and the same nesting, as one in-memory sort.
    #[test]
    fn merged_runs_nest_like_memory() {
        // Three lanes of nested calls: a root per 1000 ns, four children each, in end order
        // (as the spool holds them), split over several runs.
        let mut spans = Vec::new();
        for lane in 0..3i64 {
            for k in 0..2000i64 {
                let base = k * 1000 + lane;
                for c in 0..4 {
                    spans.push((base + 10 + c * 200, base + 100 + c * 200, lane, 1));
                }
                spans.push((base, base + 990, lane, 0));
            }
        }
        let spans: Vec<Span> = spans
            .into_iter()
            .enumerate()
            .map(|(g, (start, end, lane, row))| Span {
                start,
                end,
                lane: -2 - lane,
                row,
                g: g as u32,
                busy: end - start,
            })
            .collect();
        let names = ["root", "child"];
        let memory = super::super::nest_spans(spans.clone(), &names, 0, true, 0).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut runs = Runs::new(dir.path(), Vec::new()).unwrap();
        let mut order = Vec::new();
        // Small runs: push in chunks and spill by hand.
        for chunk in spans.chunks(7_000) {
            for s in chunk {
                runs.push(*s).unwrap();
            }
            runs.spill().unwrap();
        }
        assert!(runs.runs.len() > 1);
        let mut nester = super::super::Nester::new(&names, 0, true, None);
        runs.merge(|s| {
            order.push(s.start);
            nester.push(s)
        })
        .unwrap()
        .unwrap();
        assert!(order.windows(2).all(|w| w[0] <= w[1]), "sorted by start");
        let external = nester.finish();
        assert_eq!(external.exclusive, memory.exclusive);
        assert_eq!(external.tree, memory.tree);
        assert_eq!(external.next_id(), memory.next_id());
        assert!(!external.has_ids());
        assert!(
            std::fs::read_dir(dir.path()).unwrap().next().is_none(),
            "no file left"
        );
    }
}

//! The flight recorder's ring (`Builder::flight_recorder`): the per-call detail of a recent
//! window in a rolling sequence of spool segment files, `<dir>/.<name>.flight-<n>`.
//!
//! Each segment is a spool file of its own ([`SpoolWriter`]): it begins with the header,
//! every region and spawn site declared so far and the whole thread table, so the newest
//! segments read alone once older ones are deleted. The flusher feeds the ring what it would
//! spool in time-only mode (calls, polls, task rows, wakes, spawns, `follows_from` links, the
//! open-calls frame); the main spool gets the aggregate statistics as in aggregate mode.
//!
//! A segment covers a quarter of the window (`SEGMENTS_PER_WINDOW`), at least one flush
//! interval, and at most an eighth of the disk budget in bytes. At each flush the oldest
//! segment is deleted once the next one began at least a window ago (so the rest still
//! cover the window), and while the ring is over its disk budget (the window then shrinks;
//! [`FlightRing::shrunk_to_ns`] says to what). A dump ([`FlightRing::for_dump`]) rolls the
//! ring, so every segment it reads is closed, and pins them: nothing is deleted while a dump
//! reads.
//!
//! Work per record: one more `SpoolWriter` call than time-only mode's; per flush: one stat of
//! the bytes written; memory O(regions + sites), the segments' metadata O(segments).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::config::FlightOptions;
use crate::data::rows::ThreadRow;
use crate::data::sites::SiteInfo;
use crate::spool::{Header, SpoolWriter};

/// Segments a window is cut into: the ring holds the window plus at most one segment.
const SEGMENTS_PER_WINDOW: i64 = 4;
/// Parts of the disk budget one segment may take before the ring rolls.
const SEGMENTS_PER_BUDGET: u64 = 8;

/// A closed or current segment file.
#[derive(Clone, Debug)]
struct Segment {
    path: PathBuf,
    /// When it began (profiler clock, ns): it holds every call completed since then and
    /// before the next segment began.
    began_ns: i64,
    /// Bytes on disk.
    bytes: u64,
    /// Calls per region left out of it for being shorter than the threshold.
    below: Vec<u64>,
}

/// What a dump reads: the ring's closed segments, pinned until it is dropped.
pub(crate) struct DumpPlan {
    /// The segment files, oldest first.
    pub files: Vec<PathBuf>,
    /// The start of the time covered (the oldest segment's beginning, ns).
    pub covered_from_ns: i64,
    /// When the dump was asked for (ns).
    pub at_ns: i64,
    /// The window asked for (ns).
    pub window_ns: i64,
    /// The narrowest window the disk budget left since the ring started (`None`: never
    /// shrunk).
    pub shrunk_to_ns: Option<i64>,
    /// Calls per region id left out of the segments for being shorter than the threshold
    /// (`Builder::flight_min_duration`), those with any.
    pub below: Vec<(u32, u64)>,
    /// Calls whose detail the ring could not write since recording began.
    pub lost_calls: u64,
    _pin: Pin,
}

/// Holds the ring's segments on disk while a dump reads them.
struct Pin(Arc<AtomicUsize>);

impl Drop for Pin {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The rolling ring of segment files.
pub(crate) struct FlightRing {
    /// `<dir>/.<name>.flight`: segment `n` is `<base>-<n>`.
    base: PathBuf,
    header: Header,
    durable: bool,
    window_ns: i64,
    segment_ns: i64,
    budget: u64,
    next_no: u64,
    /// The segment being written (`None`: it could not be created; tried again at each flush).
    writer: Option<SpoolWriter>,
    /// It has not had its whole thread table yet.
    needs_threads: bool,
    /// Every segment on disk, oldest first; the last is the current one when `writer` is set.
    segments: VecDeque<Segment>,
    regions: Vec<(String, String, i64)>,
    sites: Vec<(u32, SiteInfo)>,
    sched_columns: bool,
    /// Dumps reading segments now.
    pins: Arc<AtomicUsize>,
    shrunk_to_ns: Option<i64>,
    /// When recording began (ns): the first segment covers the run from then.
    recording_began_ns: Option<i64>,
    /// The last error creating or deleting a segment, said once.
    said: Option<String>,
    /// A segment could not be created: not tried again before the next flush (a removed or
    /// full directory must not cost a failed `open` per call).
    create_failed: bool,
    /// Calls whose detail could not be written (no segment could be created), since the start.
    lost_calls: u64,
}

impl FlightRing {
    /// A ring beside `output` whose segments carry `header` (written time-only), for a
    /// recording that began at `start_ns`.
    pub(crate) fn new(
        output: &Path,
        mut header: Header,
        durable: bool,
        opts: FlightOptions,
        flush_interval_ns: i64,
        start_ns: i64,
    ) -> FlightRing {
        header.aggregate = false;
        let name = output
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "profile".into());
        let window_ns = i64::try_from(opts.window.as_nanos()).unwrap_or(i64::MAX);
        FlightRing {
            base: output.with_file_name(format!(".{name}.flight")),
            header,
            durable,
            window_ns,
            segment_ns: (window_ns / SEGMENTS_PER_WINDOW).max(flush_interval_ns),
            budget: opts.disk_budget,
            next_no: 0,
            writer: None,
            needs_threads: true,
            segments: VecDeque::new(),
            regions: Vec::new(),
            sites: Vec::new(),
            sched_columns: false,
            pins: Arc::new(AtomicUsize::new(0)),
            shrunk_to_ns: None,
            recording_began_ns: Some(start_ns),
            said: None,
            create_failed: false,
            lost_calls: 0,
        }
    }

    /// The segment being written, begun at `now_ns` if there is none.
    pub(crate) fn writer(&mut self, now_ns: i64) -> Option<&mut SpoolWriter> {
        if self.writer.is_none() && !self.create_failed {
            self.begin(now_ns);
        }
        self.writer.as_mut()
    }

    /// Declares region `id` (dense, in order) to this segment and every later one.
    pub(crate) fn region(&mut self, id: u32, name: &str, file: &str, line: i64, now_ns: i64) {
        debug_assert_eq!(id as usize, self.regions.len());
        self.regions.push((name.into(), file.into(), line));
        // A segment begun now declares every region itself.
        match &mut self.writer {
            Some(w) => w.region(id, name, file, line),
            None => self.begin(now_ns),
        }
    }

    /// Declares spawn sites to this segment and every later one.
    pub(crate) fn sites(&mut self, sites: Vec<(u32, SiteInfo)>, now_ns: i64) {
        self.sites.extend(sites.iter().cloned());
        match &mut self.writer {
            Some(w) => w.sites(sites),
            None => self.begin(now_ns),
        }
    }

    /// Calls and polls may have scheduled time, in this segment and every later one.
    pub(crate) fn scheduled_columns(&mut self, now_ns: i64) {
        self.sched_columns = true;
        match &mut self.writer {
            Some(w) => w.scheduled_columns(),
            None => self.begin(now_ns),
        }
    }

    /// Writes what is buffered with `threads` (`all_threads`, the whole table, when the
    /// segment has not had it yet), then rolls the ring when the segment is full or a
    /// quarter window old, and deletes what the window and the budget no longer need.
    pub(crate) fn flush(&mut self, threads: &[ThreadRow], all_threads: &[ThreadRow], now_ns: i64) {
        self.create_failed = false; // one more try per flush
        let full = self.needs_threads;
        if let Some(w) = self.writer(now_ns) {
            w.flush(if full { all_threads } else { threads }, &[]);
            self.needs_threads = false;
        }
        self.note_bytes();
        let due = self
            .segments
            .back()
            .is_some_and(|s| now_ns - s.began_ns >= self.segment_ns);
        if due || self.segment_full() {
            self.roll(all_threads, now_ns);
        }
        self.prune(now_ns);
    }

    /// The most bytes one segment takes before the ring rolls.
    fn segment_cap(&self) -> u64 {
        self.budget / SEGMENTS_PER_BUDGET
    }

    /// Whether the current segment has reached its share of the disk budget (checked after
    /// every round: a burst must not wait for the flush interval to roll).
    pub(crate) fn segment_full(&self) -> bool {
        (self.writer.as_ref()).is_some_and(|w| w.bytes_on_disk() >= self.segment_cap())
    }

    /// A full segment, between flushes: rolls the ring and deletes what it no longer needs.
    pub(crate) fn roll_full(&mut self, all_threads: &[ThreadRow], now_ns: i64) {
        self.roll(all_threads, now_ns);
        self.prune(now_ns);
    }

    /// Closes the current segment and begins the next one at `now_ns`.
    fn roll(&mut self, all_threads: &[ThreadRow], now_ns: i64) {
        if let Some(mut w) = self.writer.take() {
            w.flush(all_threads, &[]);
            self.note_bytes_of(&w);
            if let Some(s) = self.segments.iter_mut().rev().find(|s| s.path == w.path()) {
                s.below = w.take_below_counts();
            }
        }
        self.begin(now_ns);
    }

    /// Begins segment `next_no` with the header, the regions and the sites.
    fn begin(&mut self, now_ns: i64) {
        let path = PathBuf::from(format!("{}-{}", self.base.display(), self.next_no));
        match SpoolWriter::create(path.clone(), self.header.clone(), self.durable) {
            Ok(mut w) => {
                self.next_no += 1;
                for (id, (name, file, line)) in self.regions.iter().enumerate() {
                    w.region(id as u32, name, file, *line);
                }
                if !self.sites.is_empty() {
                    w.sites(self.sites.clone());
                }
                if self.sched_columns {
                    w.scheduled_columns();
                }
                // The first segment holds everything since recording began.
                let began_ns = self
                    .recording_began_ns
                    .take()
                    .map_or(now_ns, |s| s.min(now_ns));
                self.segments.push_back(Segment {
                    path,
                    began_ns,
                    bytes: w.bytes_on_disk(),
                    below: Vec::new(),
                });
                self.writer = Some(w);
                self.needs_threads = true;
            }
            Err(e) => {
                // A segment number taken by another file: the next one is tried next time.
                self.next_no += 1;
                self.create_failed = true;
                let dir = crate::data::files::dir_of(&path);
                self.say(format!(
                    "the flight recorder cannot create its segments in {} ({e}); the detail \
                     of the calls until it can is lost (their statistics are not)",
                    dir.display()
                ));
            }
        }
    }

    /// Updates the current segment's size.
    fn note_bytes(&mut self) {
        if let Some(w) = self.writer.take() {
            self.note_bytes_of(&w);
            self.writer = Some(w);
        }
    }

    fn note_bytes_of(&mut self, w: &SpoolWriter) {
        if let Some(s) = self.segments.iter_mut().rev().find(|s| s.path == w.path()) {
            s.bytes = w.bytes_on_disk();
        }
    }

    /// Deletes the oldest segments the window does not need, and those over the budget
    /// (which shrinks the window). Not while a dump reads them.
    fn prune(&mut self, now_ns: i64) {
        if self.pins.load(Ordering::Acquire) > 0 {
            return;
        }
        let keep_from = now_ns.saturating_sub(self.window_ns);
        while self.segments.len() > 1 && self.segments[1].began_ns <= keep_from {
            self.delete_oldest();
        }
        // Room for the current segment to grow to its cap: the ring never holds more than
        // the budget.
        let keep_bytes = self.budget.saturating_sub(self.segment_cap());
        self.note_bytes();
        while self.segments.len() > 1 && self.bytes() > keep_bytes {
            self.delete_oldest();
            let covered = now_ns - self.segments[0].began_ns;
            self.shrunk_to_ns = Some(self.shrunk_to_ns.map_or(covered, |s| s.min(covered)));
        }
    }

    fn delete_oldest(&mut self) {
        if let Some(s) = self.segments.pop_front() {
            if let Err(e) = std::fs::remove_file(&s.path) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    self.say(format!(
                        "the flight recorder cannot delete its old segment {} ({e})",
                        s.path.display()
                    ));
                }
            }
        }
    }

    /// A call's detail could not be written: no segment could be created.
    pub(crate) fn lost_call(&mut self) {
        self.lost_calls += 1;
    }

    /// A call of `region` (`start_ns` to `end_ns`, on `lane`: a task index, else
    /// `-2 - thread`) was shorter than the threshold: counted in the current segment, and
    /// only its place written (frame 14), so a dump counts it under its parent.
    pub(crate) fn below(&mut self, region: u32, start_ns: i64, end_ns: i64, lane: i64) {
        // The segment's writer counts it too (moved to the segment when it closes): one
        // lookup per left-out call.
        if let Some(w) = self.writer(end_ns) {
            w.below_call(region, start_ns, lane);
        }
    }

    /// Bytes of every segment on disk.
    pub(crate) fn bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.bytes).sum()
    }

    /// The narrowest window the budget has left so far (`None`: never shrunk).
    #[cfg(test)]
    pub(crate) fn shrunk_to_ns(&self) -> Option<i64> {
        self.shrunk_to_ns
    }

    /// For a dump asked for at `now_ns`, after the flush that wrote everything folded so
    /// far: closes the current segment (a new one begins) and pins every closed one.
    pub(crate) fn for_dump(&mut self, all_threads: &[ThreadRow], now_ns: i64) -> DumpPlan {
        if self.writer.is_none() {
            // Nothing recorded yet (or its segment could not be made): a dump of nothing
            // still has the header and the thread table.
            self.begin(now_ns);
        }
        self.roll(all_threads, now_ns);
        self.pins.fetch_add(1, Ordering::AcqRel);
        let closed = self.segments.len() - usize::from(self.writer.is_some());
        let files: Vec<PathBuf> = (self.segments.iter().take(closed))
            .map(|s| s.path.clone())
            .collect();
        let mut below: Vec<u64> = Vec::new();
        for s in self.segments.iter().take(closed) {
            if below.len() < s.below.len() {
                below.resize(s.below.len(), 0);
            }
            for (b, n) in below.iter_mut().zip(&s.below) {
                *b += n;
            }
        }
        let below = (below.into_iter().enumerate())
            .filter(|&(_, n)| n > 0)
            .map(|(r, n)| (r as u32, n))
            .collect();
        DumpPlan {
            covered_from_ns: self.segments.front().map_or(now_ns, |s| s.began_ns),
            files,
            at_ns: now_ns,
            window_ns: self.window_ns,
            shrunk_to_ns: self.shrunk_to_ns,
            below,
            lost_calls: self.lost_calls,
            _pin: Pin(self.pins.clone()),
        }
    }

    /// At shutdown: deletes every segment (the dumps are what the user keeps).
    pub(crate) fn remove_all(&mut self) {
        self.writer = None;
        while !self.segments.is_empty() {
            self.delete_oldest();
        }
    }

    /// Says `what` on stderr, once per distinct message in a row.
    fn say(&mut self, what: String) {
        if self.said.as_ref() != Some(&what) {
            eprintln!("scope-profiler: {what}");
            self.said = Some(what);
        }
    }
}

#[cfg(test)]
mod tests;

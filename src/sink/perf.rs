//! The perf sink: Linux `perf_event_open` counters summed per region (`Builder::perf_events`),
//! written to `rank0/perf_events/<region>` (schema spec §4.1).
//!
//! **Counters.** Each thread opens its counters once, lazily at its first enter: one counter
//! per configured event, as one group led by the first event when the kernel accepts it (a
//! single `read` then returns every value), otherwise as individual counters (one `read`
//! each). They count the calling thread only (`pid = 0`, any CPU), user space only like the
//! Python package, with one exception: `context-switches` is counted *with* the kernel
//! (`include_kernel()`), because a context switch always happens in kernel mode and a user-only
//! counter would read 0; where that is not permitted (`perf_event_paranoid` > 1 without
//! `CAP_PERFMON`) the event fails its probe at build like any other uncountable event. Hardware
//! events that had to be time-shared (more events than counters) are read unscaled, and say so
//! in a warning.
//!
//! **Hot path.** At enter the thread reads its counters and pushes `(span id, values)` on a
//! per-thread stack; at exit it reads them again, pops the matching entry and adds the delta
//! to the thread's own totals for the span's callsite, so nested regions count inclusively.
//! Totals are atomics written only by their thread (a load and a store, no read-modify-write,
//! no lock); the finalizing thread only reads them. Per-thread state lives in a thread-local
//! list keyed by the sink's unique id, so several profilers in one process never mix. Nothing
//! is allocated in steady state: the stack keeps its capacity, and a callsite's totals are
//! allocated (and registered under a lock) only the first time a thread exits it.
//!
//! **Phases.** Totals only grow. The sink's `finalize` pools every thread's totals by region
//! name, subtracts what earlier finalizes reported, and reports the regions that completed
//! calls in this phase, with those calls' count. A region without calls in this phase keeps
//! accumulating until a phase in which its calls complete (e.g. a long async call), so no
//! count is lost or reported twice. The live metrics (feature `prometheus`) read the same
//! totals, pooled by name and never reset (`counter_totals`, on the flusher).
//!
//! **Failures.** An unknown event name is an error at build; an event the machine cannot count
//! is one too, unless `perf_skip_unsupported` drops it with a warning. A thread whose counters
//! cannot be opened later counts nothing and adds a warning; the program never panics.

use std::cell::RefCell;
use std::collections::HashMap;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use perf_event::events::{Hardware, Software};
use perf_event::{Builder, Counter, ReadFormat};
use tracing_core::Metadata;

use crate::config::Config;
use crate::data::rows::{PerfRegion, PerfTotals, PhaseData};
use crate::fasthash::FastMap;
use crate::Error;

/// Event names the sink understands (`perf stat -e` spelling), hardware first.
pub(crate) const SUPPORTED: [&str; 10] = [
    "cycles",
    "instructions",
    "cache-references",
    "cache-misses",
    "branches",
    "branch-misses",
    "cpu-clock",
    "task-clock",
    "page-faults",
    "context-switches",
];

/// Most events one sink counts (each supported name at most once).
const MAX_EVENTS: usize = SUPPORTED.len();
/// Words of one group read: nr, time_enabled, time_running, then (value, id) per event.
const GROUP_WORDS: usize = 3 + 2 * MAX_EVENTS;
/// Deepest stack of open polls per thread; deeper polls are not counted (guards leaked with
/// `mem::forget` must not grow the stack without bound).
const MAX_DEPTH: usize = 1024;
/// Most distinct per-thread warnings kept.
const MAX_WARNINGS: usize = 16;

/// One supported event.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Hw(Hardware),
    Sw(Software),
}

impl Kind {
    /// The event named `name`, if supported.
    fn parse(name: &str) -> Option<Kind> {
        Some(match name {
            "cycles" => Kind::Hw(Hardware::CPU_CYCLES),
            "instructions" => Kind::Hw(Hardware::INSTRUCTIONS),
            "cache-references" => Kind::Hw(Hardware::CACHE_REFERENCES),
            "cache-misses" => Kind::Hw(Hardware::CACHE_MISSES),
            "branches" => Kind::Hw(Hardware::BRANCH_INSTRUCTIONS),
            "branch-misses" => Kind::Hw(Hardware::BRANCH_MISSES),
            "cpu-clock" => Kind::Sw(Software::CPU_CLOCK),
            "task-clock" => Kind::Sw(Software::TASK_CLOCK),
            "page-faults" => Kind::Sw(Software::PAGE_FAULTS),
            "context-switches" => Kind::Sw(Software::CONTEXT_SWITCHES),
            _ => return None,
        })
    }

    /// A builder for this event on the calling thread, any CPU, disabled until enabled.
    fn builder(self, read_format: ReadFormat) -> Builder<'static> {
        let mut b = match self {
            Kind::Hw(e) => Builder::new(e),
            Kind::Sw(e) => Builder::new(e),
        };
        // Builder::new already excludes the kernel and the hypervisor; context switches only
        // happen in the kernel, so that one event must include it to count anything.
        if matches!(self, Kind::Sw(Software::CONTEXT_SWITCHES)) {
            b.include_kernel();
        }
        b.read_format(read_format);
        b
    }
}

/// Why `err` happened, with a hint for the usual causes.
fn reason(err: &io::Error) -> String {
    let hint = match err.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::EOPNOTSUPP) => {
            "; this machine exposes no counter for it (no hardware PMU, e.g. in a virtual machine)"
        }
        Some(libc::EACCES) | Some(libc::EPERM) => {
            "; not permitted: lower /proc/sys/kernel/perf_event_paranoid or grant CAP_PERFMON"
        }
        Some(libc::ENOSYS) => "; the kernel has no perf_event_open",
        _ => "",
    };
    format!("{err}{hint}")
}

/// One thread's open counters.
enum Counters {
    /// One group, read with a single `read` of the leader.
    Group {
        leader: Counter,
        _members: Vec<Counter>,
    },
    /// One counter per event, one `read` each.
    Single(Vec<Counter>),
}

impl Counters {
    /// Opens and enables counters for `kinds` on the calling thread: a group if the kernel
    /// takes one, else individual counters.
    fn open(kinds: &[Kind]) -> io::Result<Counters> {
        let times = ReadFormat::TOTAL_TIME_ENABLED | ReadFormat::TOTAL_TIME_RUNNING;
        let group = || -> io::Result<Counters> {
            let mut leader = kinds[0].builder(times | ReadFormat::GROUP).build()?;
            let mut members = Vec::with_capacity(kinds.len() - 1);
            for k in &kinds[1..] {
                // Members are created *enabled* (they count while their disabled leader is
                // off, i.e. not at all, until the group is enabled): a member created disabled
                // is not reliably enabled by the leader's group-enable on Linux 6.x, and then
                // reads 0 forever (seen here: page faults read 0 while task-clock counted).
                let mut b = k.builder(times);
                b.enabled(true);
                members.push(b.build_with_group(&mut leader)?);
            }
            leader.enable_group()?;
            Ok(Counters::Group {
                leader,
                _members: members,
            })
        };
        group().or_else(|_| {
            let mut counters = Vec::with_capacity(kinds.len());
            for k in kinds {
                let mut c = k.builder(times).build()?;
                c.enable()?;
                counters.push(c);
            }
            Ok(Counters::Single(counters))
        })
    }

    /// Reads the `n` current values into `out`; `Err(())` when a read fails. Sets `*shared_pmu`
    /// when a counter ran for less time than it was enabled (time-shared hardware counters).
    #[inline]
    fn read(&self, n: usize, out: &mut [u64; MAX_EVENTS], shared_pmu: &mut bool) -> Result<(), ()> {
        match self {
            Counters::Group { leader, .. } => {
                let mut buf = [0u64; GROUP_WORDS];
                let want = (3 + 2 * n) * 8;
                if raw_read(leader, &mut buf[..3 + 2 * n]) != want || buf[0] as usize != n {
                    return Err(());
                }
                *shared_pmu |= buf[2] < buf[1];
                for (i, v) in out.iter_mut().take(n).enumerate() {
                    *v = buf[3 + 2 * i];
                }
            }
            Counters::Single(counters) => {
                for (c, v) in counters.iter().zip(out.iter_mut()) {
                    let mut buf = [0u64; 3];
                    if raw_read(c, &mut buf) != 24 {
                        return Err(());
                    }
                    *shared_pmu |= buf[2] < buf[1];
                    *v = buf[0];
                }
            }
        }
        Ok(())
    }
}

/// One `read(2)` of a counter's fd into `buf`; the byte count, or 0 on error.
#[inline]
fn raw_read(c: &Counter, buf: &mut [u64]) -> usize {
    // SAFETY: `buf` is a live, writable buffer of exactly `size_of_val(buf)` bytes, and the fd
    // belongs to `c`, which is open for the duration of the call.
    let n = unsafe {
        libc::read(
            c.as_raw_fd(),
            buf.as_mut_ptr().cast(),
            std::mem::size_of_val(buf),
        )
    };
    usize::try_from(n).unwrap_or(0)
}

/// One thread's running totals for one callsite. Written only by that thread; cache-line
/// aligned so two threads' totals never share a line.
#[repr(align(64))]
struct Totals {
    values: [AtomicU64; MAX_EVENTS],
}

/// A callsite's totals on one thread, as the finalizer sees them.
struct Entry {
    /// The region name (`meta.name()`).
    name: &'static str,
    totals: Arc<Totals>,
    /// What earlier finalizes already reported.
    reported: [u64; MAX_EVENTS],
}

/// State shared by the sink and the threads that count for it.
struct Registry {
    /// Every (thread, callsite) totals; locked by a thread the first time it exits a callsite,
    /// and by finalize.
    entries: Mutex<Vec<Entry>>,
    /// Problems found on threads after build.
    warnings: Mutex<Vec<String>>,
    /// A read failed on some thread (reported once).
    read_failed: AtomicBool,
    /// Some counter was time-shared (reported once).
    shared_pmu: AtomicBool,
}

impl Registry {
    /// Adds a warning (cold path), keeping at most [`MAX_WARNINGS`] distinct ones.
    fn warn(&self, w: String) {
        let mut ws = self.warnings.lock().unwrap_or_else(|e| e.into_inner());
        if ws.len() < MAX_WARNINGS && !ws.contains(&w) {
            ws.push(w);
        }
    }
}

/// Counts the configured perf events per region.
pub(crate) struct PerfSink {
    /// Unique per sink in this process (never 0).
    uid: u64,
    names: Vec<String>,
    kinds: Vec<Kind>,
    /// Events dropped at build (`perf_skip_unsupported`).
    dropped: Vec<String>,
    registry: Arc<Registry>,
}

impl PerfSink {
    /// Validates the event names and probes each on the calling thread.
    ///
    /// Unknown names are [`Error::UnknownPerfEvent`]; events the machine cannot count are
    /// [`Error::PerfUnavailable`], or dropped with a warning under `perf_skip_unsupported`
    /// (an error still when none is left). A name given twice is counted once.
    pub(crate) fn new(config: &Config) -> Result<PerfSink, Error> {
        let mut requested: Vec<(&str, Kind)> = Vec::new();
        for name in &config.perf_events {
            let kind = Kind::parse(name).ok_or_else(|| Error::UnknownPerfEvent {
                event: name.clone(),
                supported: SUPPORTED.to_vec(),
            })?;
            if !requested.iter().any(|(n, _)| n == name) {
                requested.push((name, kind));
            }
        }
        let mut failed = Vec::new();
        let (mut names, mut kinds) = (Vec::new(), Vec::new());
        for (name, kind) in requested {
            match kind.builder(ReadFormat::empty()).build() {
                Ok(_probe) => {
                    names.push(name.to_owned());
                    kinds.push(kind);
                }
                Err(e) => failed.push((name.to_owned(), reason(&e))),
            }
        }
        if !failed.is_empty() && (!config.perf_skip_unsupported || kinds.is_empty()) {
            return Err(Error::PerfUnavailable { events: failed });
        }
        static NEXT_UID: AtomicU64 = AtomicU64::new(1);
        Ok(PerfSink {
            uid: NEXT_UID.fetch_add(1, Ordering::Relaxed),
            names,
            kinds,
            dropped: failed
                .into_iter()
                .map(|(name, why)| format!("perf: `{name}` not counted: {why}"))
                .collect(),
            registry: Arc::new(Registry {
                entries: Mutex::new(Vec::new()),
                warnings: Mutex::new(Vec::new()),
                read_failed: AtomicBool::new(false),
                shared_pmu: AtomicBool::new(false),
            }),
        })
    }

    /// Runs `f` on the calling thread's state for this sink, creating it (and opening the
    /// counters) on first use. Does nothing during thread teardown or re-entrantly.
    #[inline]
    fn with_thread(&self, f: impl FnOnce(&mut ThreadPerf)) {
        super::per_thread::with_state(&THREADS, self.uid, || ThreadPerf::open(self), f);
    }

    /// Pools the totals by region name and takes this phase's part of them (see module docs).
    fn take_phase(&self, calls: &[(&str, u64)]) -> PerfTotals {
        let n = self.kinds.len();
        let mut entries = self
            .registry
            .entries
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let mut by_name: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, e) in entries.iter().enumerate() {
            by_name.entry(e.name).or_default().push(i);
        }
        let mut regions = Vec::new();
        for &(name, count) in calls {
            let Some(indices) = by_name.get(name) else {
                continue;
            };
            if count == 0 {
                continue;
            }
            let mut values = vec![0u64; n];
            for &i in indices {
                let e = &mut entries[i];
                for (k, v) in values.iter_mut().enumerate() {
                    let now = e.totals.values[k].load(Ordering::Relaxed);
                    *v += now.wrapping_sub(e.reported[k]);
                    e.reported[k] = now;
                }
            }
            regions.push(PerfRegion {
                name: name.to_owned(),
                calls: count,
                values,
            });
        }
        PerfTotals {
            event_names: self.names.clone(),
            regions,
        }
    }
}

impl super::per_thread::ThreadState for ThreadPerf {
    fn uid(&self) -> u64 {
        self.uid
    }
    fn orphaned(&self) -> bool {
        self.registry.strong_count() == 0
    }
}

impl super::Sink for PerfSink {
    #[inline]
    fn enter(&self, id: u64, _meta: &'static Metadata<'static>) {
        self.with_thread(|t| {
            let Some(counters) = &t.counters else {
                return;
            };
            if t.stack.len() >= MAX_DEPTH {
                return;
            }
            let mut snap = [0u64; MAX_EVENTS];
            let mut shared_pmu = false;
            if counters.read(t.n, &mut snap, &mut shared_pmu).is_err() {
                t.read_failed();
                return;
            }
            t.stack.push((id, snap));
        });
    }

    #[inline]
    fn exit(&self, id: u64, meta: &'static Metadata<'static>, _emit: &mut dyn FnMut(u64)) {
        self.with_thread(|t| {
            let Some(counters) = &t.counters else {
                return;
            };
            let mut now = [0u64; MAX_EVENTS];
            let mut shared_pmu = false;
            let read = counters.read(t.n, &mut now, &mut shared_pmu);
            // Polls exit in LIFO order on a thread except when guards are dropped out of order.
            let Some(pos) = t.stack.iter().rposition(|(i, _)| *i == id) else {
                return;
            };
            let (_, before) = t.stack.remove(pos);
            if read.is_err() {
                t.read_failed();
                return;
            }
            if shared_pmu {
                t.shared_pmu();
            }
            let n = t.n;
            let totals = t.totals_for(meta);
            for k in 0..n {
                // Only this thread writes these totals: a load and a store suffice.
                let v = &totals.values[k];
                let delta = now[k].wrapping_sub(before[k]);
                v.store(
                    v.load(Ordering::Relaxed).wrapping_add(delta),
                    Ordering::Relaxed,
                );
            }
        });
    }

    fn finalize(&self, phase: &mut PhaseData) -> Result<(), Error> {
        let calls: Vec<(&str, u64)> = phase
            .regions
            .iter()
            .map(|r| (r.name.as_str(), r.stats.count))
            .collect();
        let totals = self.take_phase(&calls);
        phase.perf = Some(totals);
        Ok(())
    }

    fn counter_totals(&self) -> Option<super::CounterTotals> {
        let n = self.kinds.len();
        let mut by_name: HashMap<&'static str, Vec<u64>> = HashMap::new();
        let entries = self
            .registry
            .entries
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        for e in entries.iter() {
            let totals = by_name.entry(e.name).or_insert_with(|| vec![0; n]);
            for (k, t) in totals.iter_mut().enumerate() {
                *t = t.wrapping_add(e.totals.values[k].load(Ordering::Relaxed));
            }
        }
        drop(entries);
        Some(super::CounterTotals {
            events: self.names.clone(),
            regions: by_name.into_iter().collect(),
        })
    }

    fn warnings(&self) -> Vec<String> {
        let mut out = self.dropped.clone();
        let reg = &self.registry;
        out.extend(
            reg.warnings
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .cloned(),
        );
        if reg.read_failed.load(Ordering::Relaxed) {
            out.push(
                "perf: reading the counters failed on some thread; those polls are not counted"
                    .into(),
            );
        }
        if reg.shared_pmu.load(Ordering::Relaxed) {
            out.push(
                "perf: hardware counters were time-shared (more events than counters); \
                 values are unscaled"
                    .into(),
            );
        }
        out
    }
}

thread_local! {
    /// This thread's state for every live perf sink, the one used last first.
    static THREADS: RefCell<Vec<ThreadPerf>> = const { RefCell::new(Vec::new()) };
}

/// One thread's counters, open polls and totals for one sink.
struct ThreadPerf {
    uid: u64,
    registry: Weak<Registry>,
    /// `None` when the counters could not be opened on this thread (nothing is counted).
    counters: Option<Counters>,
    /// Number of events.
    n: usize,
    /// Open polls: (span id, counter values at enter).
    stack: Vec<(u64, [u64; MAX_EVENTS])>,
    /// Callsite address -> this thread's totals for it.
    totals: FastMap<usize, Arc<Totals>>,
}

impl ThreadPerf {
    /// Opens the calling thread's counters for `sink` (cold: once per thread and sink).
    fn open(sink: &PerfSink) -> ThreadPerf {
        let counters = match Counters::open(&sink.kinds) {
            Ok(c) => Some(c),
            Err(e) => {
                let thread = std::thread::current();
                sink.registry.warn(format!(
                    "perf: counters could not be opened on thread `{}`: {}; nothing is counted there",
                    thread.name().unwrap_or("<unnamed>"),
                    reason(&e)
                ));
                None
            }
        };
        ThreadPerf {
            uid: sink.uid,
            registry: Arc::downgrade(&sink.registry),
            counters,
            n: sink.kinds.len(),
            stack: Vec::with_capacity(64),
            totals: FastMap::default(),
        }
    }

    /// This thread's totals for callsite `meta`, registered on first use.
    #[inline]
    fn totals_for(&mut self, meta: &'static Metadata<'static>) -> &Totals {
        let key = meta as *const Metadata<'static> as usize;
        if !self.totals.contains_key(&key) {
            self.register(key, meta.name());
        }
        &self.totals[&key]
    }

    /// Allocates and registers this thread's totals for one callsite (cold).
    #[cold]
    #[inline(never)]
    fn register(&mut self, key: usize, name: &'static str) {
        let totals = Arc::new(Totals {
            values: std::array::from_fn(|_| AtomicU64::new(0)),
        });
        if let Some(reg) = self.registry.upgrade() {
            reg.entries
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(Entry {
                    name,
                    totals: totals.clone(),
                    reported: [0; MAX_EVENTS],
                });
        }
        self.totals.insert(key, totals);
    }

    #[cold]
    fn read_failed(&self) {
        if let Some(reg) = self.registry.upgrade() {
            reg.read_failed.store(true, Ordering::Relaxed);
        }
    }

    #[cold]
    fn shared_pmu(&self) {
        if let Some(reg) = self.registry.upgrade() {
            reg.shared_pmu.store(true, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests;

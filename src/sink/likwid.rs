//! The LIKWID sink: every region is a LIKWID marker region of the same name
//! (`Builder::likwid`), so `likwid-perfctr -m` measures hardware counters per region.
//!
//! **Library.** `liblikwid` (GPL) is never linked: it is loaded at run time with `libloading`
//! from `$SCOPE_PROFILER_LIKWID_LIB` when set, else as `liblikwid.so`, `liblikwid.so.5`,
//! `liblikwid.so.5.2`, `liblikwid.so.4` through the dynamic loader's search path. Only the six
//! marker functions of `likwid.h` (LIKWID 5) are bound. A library that cannot be loaded is
//! [`Error::LibraryMissing`] at build. Loaded libraries stay loaded for the process's life
//! (unloading LIKWID while its state is live is not safe).
//!
//! **Call order.** `likwid_markerInit` once at build; `likwid_markerThreadInit` once per
//! thread, before the thread's first region; `likwid_markerRegisterRegion` once per region
//! name and thread, at its first enter; `likwid_markerStartRegion` at enter and
//! `likwid_markerStopRegion` at exit, on the polling thread; `likwid_markerClose` once, when
//! the sink is closed ([`LikwidSink::close_markers`], at the latest when it is dropped). After
//! that no LIKWID function is called again. LIKWID refuses to start a region that is already
//! running on the thread, so a region nested in itself (recursion) is started by its outermost
//! poll only and LIKWID counts that poll once.
//!
//! LIKWID's marker state is process-wide: per library, one sink at a time may drive it, and
//! once closed (which writes the results file) it is not initialized again; building another
//! LIKWID profiler then is an error that says so.
//!
//! **Hot path.** Region names are turned into C strings once per callsite and thread (a
//! thread-local map keyed by the callsite's address); enter and exit then cost a map lookup
//! and the LIKWID call, with no allocation and no lock.
//!
//! **Errors.** Marker calls return negative codes when LIKWID cannot count (not started under
//! `likwid-perfctr -m`, no MSR access: -14 here). The first such code becomes a warning in
//! the report; the program carries on.
//!
//! **Results.** `likwid_markerClose` writes LIKWID's marker file at `$LIKWID_FILEPATH`. The
//! first finalize after the close parses it (as the Python package's `parse_marker_file` does:
//! source `marker_file`, per-thread call counts, run times and raw counter values) into the
//! file's `rank0/likwid` group. Event names are read from `$LIKWID_EVENTS` when it is a custom
//! event list (`NAME:COUNTER,...`); for a named group (`CLOCK`) they stay positional
//! (`event_0`, ...), and derived metrics, which exist only in LIKWID's group files, are not
//! computed.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CString};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use tracing_core::Metadata;

use crate::config::Config;
use crate::data::rows::{LikwidRegion, LikwidResults, PhaseData};
use crate::fasthash::FastMap;
use crate::Error;

/// Environment variable naming the LIKWID library to load.
pub(crate) const LIB_ENV: &str = "SCOPE_PROFILER_LIKWID_LIB";
/// Library names tried, in order, when [`LIB_ENV`] is unset.
const DEFAULT_NAMES: [&str; 4] = [
    "liblikwid.so",
    "liblikwid.so.5",
    "liblikwid.so.5.2",
    "liblikwid.so.4",
];

/// `void f(void)`.
type VoidFn = unsafe extern "C" fn();
/// `int f(const char* regionTag)`.
type TagFn = unsafe extern "C" fn(*const c_char) -> c_int;

/// The bound marker functions of one loaded library.
struct Api {
    /// What was loaded (the path or name given to the loader).
    name: String,
    init: VoidFn,
    thread_init: VoidFn,
    register: TagFn,
    start: TagFn,
    stop: TagFn,
    close: VoidFn,
    _lib: libloading::Library,
}

impl Api {
    /// Loads `name` and binds the marker functions.
    fn load(name: &str) -> Result<Api, String> {
        // SAFETY: loading runs the library's initializers; liblikwid's (or a stand-in with its
        // interface) have no preconditions. The library stays loaded for the process's life.
        let lib = unsafe { libloading::Library::new(name) }.map_err(|e| e.to_string())?;
        /// Binds one symbol as a function pointer of type `T`.
        fn sym<T: Copy>(lib: &libloading::Library, name: &str) -> Result<T, String> {
            // SAFETY: every `T` used below is the C signature of the symbol of that name in
            // LIKWID 5's `likwid.h` (checked against Debian's likwid 5.2.2 headers).
            unsafe { lib.get::<T>(name.as_bytes()) }
                .map(|s| *s)
                .map_err(|e| format!("symbol `{name}` missing: {e}"))
        }
        Ok(Api {
            name: name.to_owned(),
            init: sym(&lib, "likwid_markerInit")?,
            thread_init: sym(&lib, "likwid_markerThreadInit")?,
            register: sym(&lib, "likwid_markerRegisterRegion")?,
            start: sym(&lib, "likwid_markerStartRegion")?,
            stop: sym(&lib, "likwid_markerStopRegion")?,
            close: sym(&lib, "likwid_markerClose")?,
            _lib: lib,
        })
    }
}

/// Where a loaded library's marker state stands.
#[derive(Clone, Copy, PartialEq, Eq)]
enum LibState {
    /// Loaded, not initialized.
    Idle,
    /// Initialized and driven by the sink with this uid.
    Active(u64),
    /// Closed; never initialized again in this process.
    Closed,
}

/// Every library loaded so far, with its state.
static LIBRARIES: Mutex<Vec<(&'static Api, LibState)>> = Mutex::new(Vec::new());

/// Loads (or finds) the library named by the environment.
fn library() -> Result<&'static Api, Error> {
    let explicit = std::env::var(LIB_ENV).ok().filter(|s| !s.is_empty());
    let names: Vec<String> = match &explicit {
        Some(p) => vec![p.clone()],
        None => DEFAULT_NAMES.iter().map(|s| s.to_string()).collect(),
    };
    load_first(&names).map_err(|tried| {
        let hint = match explicit {
            Some(_) => format!("check ${LIB_ENV}"),
            None => format!(
                "install LIKWID 5 (Debian/Ubuntu: `apt-get install likwid`) or set ${LIB_ENV} \
                 to the path of liblikwid.so"
            ),
        };
        Error::LibraryMissing {
            library: explicit.unwrap_or_else(|| "liblikwid".to_owned()),
            reason: format!("{tried}; {hint}"),
        }
    })
}

/// The first of `names` that loads (or was loaded before); else what each attempt said.
fn load_first(names: &[String]) -> Result<&'static Api, String> {
    let mut libs = LIBRARIES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((api, _)) = libs.iter().find(|(a, _)| names.contains(&a.name)) {
        return Ok(api);
    }
    let mut tried = Vec::new();
    for name in names {
        match Api::load(name) {
            Ok(api) => {
                // The same library under another name (a path, a symlink): the loader handed
                // out the same image, so keep one entry and one marker state for it.
                let same = |a: &&Api| a.init as usize == api.init as usize;
                if let Some((known, _)) = libs.iter().find(|(a, _)| same(a)) {
                    return Ok(known);
                }
                let api: &'static Api = Box::leak(Box::new(api));
                libs.push((api, LibState::Idle));
                return Ok(api);
            }
            Err(e) => tried.push(format!("{name}: {e}")),
        }
    }
    Err(tried.join("; "))
}

/// Drives LIKWID marker regions named after the profiler's regions.
pub(crate) struct LikwidSink {
    uid: u64,
    api: &'static Api,
    /// Held by the sink only; threads keep a `Weak` to drop their state once it is gone.
    alive: Arc<()>,
    /// Set (under `close_lock`) once `likwid_markerClose` ran: no LIKWID call after that.
    closed: AtomicBool,
    /// Serializes closing with reading the results back.
    close_lock: Mutex<bool>,
    /// A marker call returned an error (the first one is in `error`).
    errored: AtomicBool,
    error: Mutex<Option<String>>,
    /// `LIKWID_*` environment at build.
    env: Vec<(String, String)>,
    /// Warnings known at build, and later problems reading results back.
    notes: Mutex<Vec<String>>,
}

impl LikwidSink {
    /// Loads the library and initializes the marker API (see the module docs).
    pub(crate) fn new(_config: &Config) -> Result<LikwidSink, Error> {
        let env = std::env::vars()
            .filter(|(k, _)| k.starts_with("LIKWID_"))
            .collect();
        LikwidSink::start(library()?, env)
    }

    /// Initializes the marker API of `api` for a new sink.
    fn start(api: &'static Api, env: Vec<(String, String)>) -> Result<LikwidSink, Error> {
        static NEXT_UID: AtomicU64 = AtomicU64::new(1);
        let uid = NEXT_UID.fetch_add(1, Ordering::Relaxed);
        {
            let mut libs = LIBRARIES.lock().unwrap_or_else(|e| e.into_inner());
            let state = libs
                .iter_mut()
                .find(|(a, _)| std::ptr::eq(*a, api))
                .map(|(_, s)| s);
            let message = match state.as_deref() {
                None => Some("the library is not registered"),
                Some(LibState::Idle) => None,
                Some(LibState::Active(_)) => Some(
                    "another profiler in this process drives LIKWID's \
                     markers already; LIKWID's marker state is process-wide",
                ),
                Some(LibState::Closed) => Some(
                    "LIKWID's markers were closed already in this process \
                     (likwid_markerClose writes the results once); build one LIKWID profiler \
                     per process",
                ),
            };
            if let Some(m) = message {
                return Err(Error::Sink {
                    sink: "likwid",
                    message: format!("{m} ({})", api.name),
                });
            }
            // SAFETY: likwid_markerInit takes no arguments; it is called once per library
            // (guarded by the state under this lock).
            unsafe { (api.init)() };
            if let Some(state) = state {
                *state = LibState::Active(uid);
            }
        }
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        let mut notes = Vec::new();
        if get("LIKWID_FILEPATH").is_none() || get("LIKWID_EVENTS").is_none() {
            notes.push(
                "likwid: not started under `likwid-perfctr -m` (LIKWID_FILEPATH and \
                 LIKWID_EVENTS are unset): LIKWID records nothing"
                    .to_owned(),
            );
        }
        Ok(LikwidSink {
            uid,
            api,
            alive: Arc::new(()),
            closed: AtomicBool::new(false),
            close_lock: Mutex::new(false),
            errored: AtomicBool::new(false),
            error: Mutex::new(None),
            env,
            notes: Mutex::new(notes),
        })
    }

    /// Calls `likwid_markerClose` (once; later calls do nothing), which writes LIKWID's
    /// results file. Regions still running are not stopped first. Threads check `closed`
    /// before each marker call, so none is made after this returns, except by a thread that
    /// was already past that check (a window of one marker call, without a lock on the hot
    /// path to close it).
    pub(crate) fn close_markers(&self) {
        let _guard = self.close_lock.lock().unwrap_or_else(|e| e.into_inner());
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        // SAFETY: likwid_markerClose takes no arguments; `closed` makes this the only call,
        // after which this sink calls nothing in the library.
        unsafe { (self.api.close)() };
        let mut libs = LIBRARIES.lock().unwrap_or_else(|e| e.into_inner());
        for (api, state) in libs.iter_mut() {
            if std::ptr::eq(*api, self.api) {
                *state = LibState::Closed;
            }
        }
    }

    /// The `LIKWID_*` variable `key` at build.
    fn var(&self, key: &str) -> Option<&str> {
        let found = self.env.iter().find(|(k, _)| k == key);
        found.map(|(_, v)| v.as_str())
    }

    /// After [`Self::close_markers`]: the results in `$LIKWID_FILEPATH`, once (later calls and
    /// calls before the close return `None`).
    fn take_results(&self) -> Option<LikwidResults> {
        let mut read = self.close_lock.lock().unwrap_or_else(|e| e.into_inner());
        if !self.closed.load(Ordering::Acquire) || *read {
            return None;
        }
        *read = true;
        let path = self.var("LIKWID_FILEPATH")?;
        match std::fs::read_to_string(path) {
            Ok(text) => Some(LikwidResults {
                env: self.env.clone(),
                regions: parse_marker_file(&text, self.var("LIKWID_EVENTS").unwrap_or("")),
            }),
            Err(e) => {
                let note = format!("likwid: cannot read LIKWID's results file {path}: {e}");
                self.notes
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(note);
                None
            }
        }
    }

    /// Records the first failing marker call (cold).
    #[cold]
    #[inline(never)]
    fn failed(&self, function: &str, tag: &str, rc: c_int) {
        if self.errored.swap(true, Ordering::Relaxed) {
            return;
        }
        let why = if rc == -14 {
            " (LIKWID is not counting: the program was not started with `likwid-perfctr -m`, \
             or LIKWID cannot access the MSRs)"
        } else {
            ""
        };
        *self.error.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!(
            "likwid: {function}(\"{tag}\") returned {rc}{why}; later errors are not reported"
        ));
    }

    /// Checks a marker call's return code.
    #[inline]
    fn check(&self, function: &str, tag: &Tag, rc: c_int) {
        if rc < 0 && !self.errored.load(Ordering::Relaxed) {
            self.failed(function, tag.name, rc);
        }
    }

    /// Runs `f` on the calling thread's state for this sink, creating it (and calling
    /// `likwid_markerThreadInit`) on first use. Does nothing once closed, during thread
    /// teardown, or re-entrantly.
    #[inline]
    fn with_thread(&self, f: impl FnOnce(&mut ThreadLikwid)) {
        if self.closed.load(Ordering::Acquire) {
            return;
        }
        let create = || {
            // SAFETY: likwid_markerThreadInit takes no arguments; it runs once per thread and
            // sink, after likwid_markerInit (at build) and before this thread's first region.
            unsafe { (self.api.thread_init)() };
            ThreadLikwid {
                uid: self.uid,
                alive: Arc::downgrade(&self.alive),
                by_callsite: FastMap::default(),
                tags: Vec::new(),
            }
        };
        super::per_thread::with_state(&THREADS, self.uid, create, f);
    }
}

impl super::per_thread::ThreadState for ThreadLikwid {
    fn uid(&self) -> u64 {
        self.uid
    }
    fn orphaned(&self) -> bool {
        self.alive.strong_count() == 0
    }
}

impl super::Sink for LikwidSink {
    #[inline]
    fn enter(&self, _id: u64, meta: &'static Metadata<'static>) {
        self.with_thread(|t| {
            let i = t.tag_index(self, meta);
            let tag = &mut t.tags[i];
            tag.depth += 1;
            if tag.depth == 1 {
                // SAFETY: `tag.c` is a NUL-terminated string that lives as long as this
                // thread's state; LIKWID only reads it during the call.
                let rc = unsafe { (self.api.start)(tag.c.as_ptr()) };
                self.check("likwid_markerStartRegion", tag, rc);
            }
        });
    }

    #[inline]
    fn exit(&self, _id: u64, meta: &'static Metadata<'static>, _emit: &mut dyn FnMut(u64)) {
        self.with_thread(|t| {
            let key = meta as *const Metadata<'static> as usize;
            let Some(&i) = t.by_callsite.get(&key) else {
                return;
            };
            let tag = &mut t.tags[i];
            if tag.depth == 0 {
                return;
            }
            tag.depth -= 1;
            if tag.depth == 0 {
                // SAFETY: as in `enter`.
                let rc = unsafe { (self.api.stop)(tag.c.as_ptr()) };
                self.check("likwid_markerStopRegion", tag, rc);
            }
        });
    }

    fn finalize(&self, phase: &mut PhaseData) -> Result<(), Error> {
        if let Some(results) = self.take_results() {
            phase.likwid = Some(results);
        }
        Ok(())
    }

    fn shutdown(&self) {
        self.close_markers();
    }

    fn has_final_data(&self) -> bool {
        self.closed.load(Ordering::Acquire)
            && !*self.close_lock.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn warnings(&self) -> Vec<String> {
        let mut out = self.notes.lock().unwrap_or_else(|e| e.into_inner()).clone();
        out.extend(self.error.lock().unwrap_or_else(|e| e.into_inner()).clone());
        out
    }
}

impl Drop for LikwidSink {
    fn drop(&mut self) {
        self.close_markers();
    }
}

thread_local! {
    /// This thread's state for every live LIKWID sink, the one used last first.
    static THREADS: RefCell<Vec<ThreadLikwid>> = const { RefCell::new(Vec::new()) };
}

/// One region name on one thread.
struct Tag {
    name: &'static str,
    c: CString,
    /// Polls of the region open on this thread (LIKWID runs it while > 0).
    depth: u32,
}

/// One thread's marker state for one sink.
struct ThreadLikwid {
    uid: u64,
    alive: Weak<()>,
    /// Callsite address -> index into `tags`.
    by_callsite: FastMap<usize, usize>,
    /// One entry per region name seen on this thread.
    tags: Vec<Tag>,
}

impl ThreadLikwid {
    /// The tag of callsite `meta`, registered with LIKWID on first sight.
    #[inline]
    fn tag_index(&mut self, sink: &LikwidSink, meta: &'static Metadata<'static>) -> usize {
        let key = meta as *const Metadata<'static> as usize;
        match self.by_callsite.get(&key) {
            Some(&i) => i,
            None => self.register(sink, key, meta.name()),
        }
    }

    /// Maps a new callsite to its name's tag, creating and registering the tag (cold).
    #[cold]
    #[inline(never)]
    fn register(&mut self, sink: &LikwidSink, key: usize, name: &'static str) -> usize {
        let i = match self.tags.iter().position(|t| t.name == name) {
            Some(i) => i,
            None => {
                let c = CString::new(name.replace('\0', "?")).unwrap_or_default();
                // SAFETY: `c` is NUL-terminated and outlives the call.
                let rc = unsafe { (sink.api.register)(c.as_ptr()) };
                let tag = Tag { name, c, depth: 0 };
                sink.check("likwid_markerRegisterRegion", &tag, rc);
                self.tags.push(tag);
                self.tags.len() - 1
            }
        };
        self.by_callsite.insert(key, i);
        i
    }
}

/// Parses LIKWID's marker file (the format `likwid_markerClose` writes):
///
/// ```text
/// <nthreads> <nregions> <ngroups>
/// <region_id>:<tag>-<group_id>                                  (one line per region)
/// <region_id> <group_id> <cpu> <count> <time> <nevents> <values...>   (per region and thread)
/// ```
///
/// Mirrors the Python package's `parse_marker_file`: regions by id, one column per thread
/// line, `source = "marker_file"`, no metrics. `events` is `$LIKWID_EVENTS`, used for the group
/// name and, for custom event lists, the event and counter names. A malformed file yields no
/// regions.
fn parse_marker_file(text: &str, events: &str) -> Vec<LikwidRegion> {
    parse_lines(text, events).unwrap_or_default()
}

/// [`parse_marker_file`], with `None` for a malformed file.
fn parse_lines(text: &str, events: &str) -> Option<Vec<LikwidRegion>> {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let num_regions: usize = lines.first()?.split_whitespace().nth(1)?.parse().ok()?;
    let mut regions: Vec<(i64, LikwidRegion)> = Vec::new();
    for line in lines.iter().skip(1).take(num_regions) {
        let (id, rest) = line.split_once(':')?;
        let (tag, gid) = rest.rsplit_once('-')?;
        let (id, gid) = (id.trim().parse().ok()?, gid.trim().parse().ok()?);
        regions.push((id, marker_region(tag.to_owned(), gid)));
    }
    let sets: Vec<&str> = events.split('|').map(str::trim).collect();
    for line in lines.iter().skip(1 + num_regions) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 6 {
            continue;
        }
        let id: i64 = f[0].parse().ok()?;
        let n: usize = f[5].parse().ok()?;
        let values: Vec<f64> = f[6..]
            .iter()
            .take(n)
            .map(|v| v.parse().ok())
            .collect::<Option<_>>()?;
        let r = match regions.iter_mut().find(|(i, _)| *i == id) {
            Some((_, r)) => r,
            None => {
                regions.push((id, marker_region(id.to_string(), -1)));
                &mut regions.last_mut()?.1
            }
        };
        r.cpus.push(f[2].parse().ok()?);
        r.call_counts.push(f[3].parse::<f64>().ok()? as i64);
        r.times.push(f[4].parse().ok()?);
        if r.events.len() < values.len() {
            r.events.resize(values.len(), Vec::new());
        }
        let t = r.times.len() - 1;
        for (e, row) in r.events.iter_mut().enumerate() {
            row.resize(t, 0.0);
            row.push(values.get(e).copied().unwrap_or(0.0));
        }
    }
    regions.retain(|(_, r)| !r.times.is_empty());
    regions.sort_by_key(|(id, _)| *id);
    Some(
        regions
            .into_iter()
            .map(|(_, mut r)| {
                name_events(&mut r, &sets);
                r
            })
            .collect(),
    )
}

/// An empty region read from a marker file.
fn marker_region(tag: String, group_id: i64) -> LikwidRegion {
    let source = "marker_file".to_owned();
    LikwidRegion {
        tag,
        group_id,
        source,
        ..LikwidRegion::default()
    }
}

/// Fills the group, event and counter names of `r` from the event sets of `$LIKWID_EVENTS`.
fn name_events(r: &mut LikwidRegion, sets: &[&str]) {
    let n = r.events.len();
    r.event_names = (0..n).map(|i| format!("event_{i}")).collect();
    let Some(set) = usize::try_from(r.group_id).ok().and_then(|g| sets.get(g)) else {
        return;
    };
    if !set.contains(':') {
        r.group_name = (*set).to_owned();
        return;
    }
    // A custom list `NAME:COUNTER[:OPTION...],...`, in counter order.
    r.group_name = "Custom".to_owned();
    let pairs: Vec<(&str, &str)> = set
        .split(',')
        .filter_map(|e| {
            let mut parts = e.trim().split(':');
            Some((parts.next()?, parts.next()?))
        })
        .collect();
    if pairs.len() == n {
        r.event_names = pairs.iter().map(|(e, _)| e.to_string()).collect();
        r.counter_names = pairs.iter().map(|(_, c)| c.to_string()).collect();
    }
}

#[cfg(test)]
mod tests;

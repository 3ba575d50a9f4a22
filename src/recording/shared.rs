//! What the layer, the lanes, the flusher and the guard share: the layer's identity and
//! configuration (immutable after `build()`), the clock, new lanes, the buffer pool, the
//! registered callsites.

use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

pub(crate) use crate::config::Config;
use crate::recording::clock::Clock;
use crate::recording::lane::pool::{Policy, Pool};
use crate::recording::lane::Lane;
use crate::recording::region::Callsites;
use crate::sink::Sinks;

/// State shared by one layer, its lanes, its flusher and its guard.
pub(crate) struct Shared {
    /// Unique per built layer in this process (never 0), so thread-local writers of several
    /// layers never mix.
    pub uid: u64,
    pub config: Config,
    pub clock: &'static Clock,
    /// Clock ns at `build()`.
    pub start_ns: i64,
    /// ISO-8601 wall time at `build()`.
    pub timestamp: String,
    /// Lanes registered since the flusher last looked (it owns them from then on, and drops
    /// them once their thread has exited and they are drained).
    pub new_lanes: Mutex<Vec<Arc<Lane>>>,
    next_lane: AtomicU32,
    /// Threads registered per name, so that threads sharing a name (Tokio's workers) are
    /// told apart: the second `tokio-rt-worker` is `tokio-rt-worker #2`. One entry per
    /// distinct name (unnamed threads are `thread-<index>` and not counted).
    thread_names: Mutex<std::collections::HashMap<String, u32>>,
    /// The one chunk pool all lanes draw from (the buffer budget).
    pub pool: Arc<Pool>,
    /// Span callsites the layer was told about (what the flusher accepts in records).
    pub callsites: Arc<Callsites>,
    /// `ScopeSubscriber`'s callsites by the index its span ids carry: with it, the subscriber
    /// writes no creation record and the flusher creates a span's instance at its first
    /// record (`None`: `ScopeLayer`, whose ids say nothing of their callsite).
    pub span_sites: Option<Arc<crate::recording::subscriber::SpanSites>>,
    /// Records lost because the thread could not reach its lane (thread teardown).
    pub lost: AtomicU64,
    /// Why the flusher failed, once it has.
    pub failure: Mutex<Option<String>>,
    /// The configured sinks, if any.
    pub sinks: Option<Sinks>,
    /// CPU time (ns) the flusher thread has used, updated after each of its drains.
    pub flusher_cpu_ns: AtomicI64,
    /// Complete drains the flusher has done.
    pub flusher_drains: AtomicU64,
    /// The runtime pause switch.
    pub pause: crate::recording::pause::PauseState,
    /// Event callsites seen by the layer (line timing).
    pub lines: crate::recording::events::EventSites,
    /// Tokio's own callsites and spawn sites (`--cfg tokio_unstable`).
    pub tokio: crate::recording::tokio::TokioSites,
    /// `follows_from` links, for the flusher (a side channel: they are rare).
    pub follows: crate::recording::follows::Follows,
    /// The profiler's own cost, measured at `build()` (None when disabled).
    pub overhead: Option<crate::data::report::SelfCost>,
    /// Where the flusher publishes the live metrics, when they are on.
    #[cfg(feature = "prometheus")]
    pub metrics: Option<Arc<crate::metrics::Hub>>,
    /// Where it was built, and its link to the fork handler (see [`crate::fork`]).
    pub fork: crate::fork::Watch,
    /// The flight recorder's dumps written since the last finalize (its report lists them).
    pub dumps: Mutex<Vec<std::path::PathBuf>>,
}

impl Drop for Shared {
    /// Takes this profiler off the fork handler's list before any field is dropped: a fork
    /// on another thread during the teardown must not reach a half-dropped `Shared`.
    fn drop(&mut self) {
        self.fork.disarm();
    }
}

impl Shared {
    pub(crate) fn new(config: Config, sinks: Option<Sinks>) -> Shared {
        static NEXT_UID: AtomicU64 = AtomicU64::new(1);
        let clock = Clock::global();
        let b = config.buffering;
        let pool = Pool::new(
            b.budget,
            Policy {
                lossy: b.lossy,
                max_wait: b.max_wait,
            },
        );
        if config.mode != crate::Mode::Disabled {
            // The first free buffers, made here rather than on a recording thread.
            pool.prefill();
        }
        Shared {
            uid: NEXT_UID.fetch_add(1, Ordering::Relaxed),
            config,
            clock,
            start_ns: clock.now_ns(),
            timestamp: crate::recording::clock::iso8601_now(),
            new_lanes: Mutex::new(Vec::new()),
            next_lane: AtomicU32::new(0),
            thread_names: Default::default(),
            pool: Arc::new(pool),
            callsites: Arc::new(Callsites::default()),
            span_sites: None,
            lost: AtomicU64::new(0),
            failure: Mutex::new(None),
            sinks,
            flusher_cpu_ns: AtomicI64::new(0),
            flusher_drains: AtomicU64::new(0),
            pause: Default::default(),
            lines: Default::default(),
            tokio: Default::default(),
            follows: Default::default(),
            overhead: None,
            #[cfg(feature = "prometheus")]
            metrics: None,
            fork: crate::fork::Watch::new(),
            dumps: Mutex::new(Vec::new()),
        }
    }

    /// Registers the calling thread as a new lane (cold: once per thread and layer).
    pub(crate) fn register_lane(&self) -> Arc<Lane> {
        let index = self.next_lane.fetch_add(1, Ordering::Relaxed);
        let name = match std::thread::current().name() {
            Some(name) => self.numbered(name),
            None => format!("thread-{index}"),
        };
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() } as i64;
        let lane = Arc::new(Lane::new(index, name, tid, self.clock.now_ns()));
        self.new_lanes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(lane.clone());
        lane
    }

    /// `name` for the next thread that has it: as it is the first time, then `name #2`,
    /// `name #3`, ...
    pub(crate) fn numbered(&self, name: &str) -> String {
        let mut names = self.thread_names.lock().unwrap_or_else(|e| e.into_inner());
        let n = names.entry(name.to_owned()).or_insert(0);
        *n += 1;
        match *n {
            1 => name.to_owned(),
            n => format!("{name} #{n}"),
        }
    }
}

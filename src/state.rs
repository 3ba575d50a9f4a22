//! What the layer, the lanes, the flusher and the guard share: the layer's identity and
//! configuration (immutable after `build()`), the clock and the list of lanes.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::clock::Clock;
use crate::lane::Lane;
use crate::sink::Sinks;
use crate::Mode;

/// Options fixed at `build()`.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    pub mode: Mode,
    pub output: Option<PathBuf>,
    pub summary: bool,
    pub label: Option<String>,
    pub flush_interval: Duration,
    pub track_threads: bool,
    pub track_async: bool,
    pub gzip: Option<u8>,
    pub perf_events: Vec<String>,
    #[cfg_attr(not(feature = "perf"), allow(dead_code))]
    pub perf_skip_unsupported: bool,
    pub likwid: bool,
    pub nvtx: bool,
    pub cuda_timing: bool,
    pub cuda_sync_on_exit: bool,
    /// Raw `CUstream` handle, 0 = the default stream.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub cuda_stream: usize,
    /// Automatic finalize period (numbered phase files).
    pub rotate_every: Option<Duration>,
    /// Numbered files kept (oldest deleted).
    pub max_files: Option<usize>,
    /// fsync the spool and published files.
    pub durable: bool,
    /// `Builder::mpi`: one file for all ranks.
    pub mpi: bool,
}

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
    /// Every lane ever registered, in index order.
    pub lanes: Mutex<Vec<Arc<Lane>>>,
    /// Records lost because the thread could not reach its lane (thread teardown).
    pub lost: AtomicU64,
    /// The configured sinks, if any.
    pub sinks: Option<Sinks>,
    /// This rank's MPI, with `Builder::mpi`.
    #[cfg(feature = "mpi")]
    pub mpi: Option<crate::mpi::relay::Mpi>,
}

impl Shared {
    pub(crate) fn new(config: Config, sinks: Option<Sinks>) -> Shared {
        static NEXT_UID: AtomicU64 = AtomicU64::new(1);
        let clock = Clock::global();
        Shared {
            uid: NEXT_UID.fetch_add(1, Ordering::Relaxed),
            config,
            clock,
            start_ns: clock.now_ns(),
            timestamp: crate::clock::iso8601_now(),
            lanes: Mutex::new(Vec::new()),
            lost: AtomicU64::new(0),
            sinks,
            #[cfg(feature = "mpi")]
            mpi: None,
        }
    }

    /// Registers the calling thread as a new lane (cold: once per thread and layer).
    pub(crate) fn register_lane(&self) -> Arc<Lane> {
        let mut lanes = self.lanes.lock().unwrap_or_else(|e| e.into_inner());
        let index = lanes.len() as u32;
        let name = std::thread::current()
            .name()
            .map(str::to_owned)
            .unwrap_or_else(|| format!("thread-{index}"));
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() } as i64;
        let lane = Arc::new(Lane::new(index, name, tid, self.clock.now_ns()));
        lanes.push(lane.clone());
        lane
    }
}

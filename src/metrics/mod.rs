//! Live region metrics (feature `prometheus`): what fleets scrape while the program runs.
//!
//! The flusher already folds every call into exact per-region statistics; with
//! [`Builder::metrics`](crate::Builder::metrics) or
//! [`Builder::prometheus`](crate::Builder::prometheus) it also feeds each call to an
//! [`Accumulator`](accumulate::Accumulator) it owns (counts, times, a duration histogram:
//! cumulative since `build()`, unaffected by finalize and rotation), and at most every
//! [`PUBLISH_EVERY`] (and at every finalize) it publishes a snapshot to the [`Hub`]: an `Arc`
//! swapped under a short lock. Readers never reach the flusher: the HTTP endpoint
//! ([`http`]) and [`FlushGuard::metrics_text`](crate::FlushGuard::metrics_text) take the
//! latest snapshot and its text, rendered once per snapshot ([`render`]) and shared by every
//! reader until the next. The recording hot path does not change.
//!
//! - [`options`]: the builder's options and their checks;
//! - [`histogram`]: the bucket bounds and the bucket of a duration;
//! - [`accumulate`]: the flusher's per-region series and their snapshots;
//! - [`render`]: the Prometheus text format;
//! - [`http`], [`request`]: the endpoint's threads and one scrape;
//! - [`rank`]: ports and the `rank` label in multi-rank runs;
//! - [`fork`]: forked children do not serve.

use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::config::Config;
use crate::Error;

pub(crate) mod accumulate;
mod fork;
pub(crate) mod histogram;
pub(crate) mod http;
pub(crate) use crate::data::metrics_options as options;
mod rank;
mod render;
mod request;

pub(crate) use accumulate::RegionSeries;

/// The most often the flusher publishes a snapshot (and at every finalize): how stale a
/// scrape can be, beyond the flusher's own pace.
pub(crate) const PUBLISH_EVERY: Duration = Duration::from_millis(100);

/// Process-level figures of a snapshot (all since `build()`, except the gauges).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Process {
    /// Calls dropped whole.
    pub dropped_calls: u64,
    /// Time recording threads waited for buffers, ns.
    pub wait_ns: u64,
    /// The flusher thread's CPU time, ns.
    pub flusher_cpu_ns: u64,
    /// Bytes of record buffers allocated (gauge).
    pub buffer_bytes: u64,
    /// Regions beyond the export limit (gauge).
    pub folded_regions: u64,
}

/// Perf totals of a snapshot: `values[region * events.len() + event]`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Perf {
    pub events: Vec<String>,
    pub values: Vec<u64>,
}

/// One published snapshot.
#[derive(Clone, Debug, Default)]
pub(crate) struct Published {
    /// Increases with every publish (0: nothing published yet).
    pub version: u64,
    /// Every exported region: its label value and series.
    pub regions: Vec<(Arc<str>, Arc<RegionSeries>)>,
    pub perf: Option<Perf>,
    pub process: Process,
}

/// What is the same in every snapshot of one profiler.
#[derive(Clone, Debug)]
pub(crate) struct Shape {
    /// The constant labels (`rank` first, then the user's), rendered: `rank="0",env="prod"`.
    pub consts: String,
    /// Whether the await series exist.
    pub track_async: bool,
}

/// Where the flusher publishes and readers read (see the module docs).
#[derive(Debug)]
pub(crate) struct Hub {
    latest: Mutex<Arc<Published>>,
    /// The text of the snapshot of that version.
    text: Mutex<(u64, Arc<str>)>,
    shape: Shape,
    region_limit: usize,
    /// `POST /dump` (`Builder::metrics_dump`): starts a flight-recorder dump and names its
    /// file at once, or says why not; set once the guard exists.
    dump: std::sync::OnceLock<DumpStarter>,
}

/// Starts a dump in the background; returns the file it is being written to, or why not.
pub(crate) struct DumpStarter(pub(crate) Box<dyn Fn() -> Result<String, String> + Send + Sync>);

impl std::fmt::Debug for DumpStarter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DumpStarter")
    }
}

impl Hub {
    pub(crate) fn new(shape: Shape, region_limit: usize) -> Hub {
        Hub {
            latest: Mutex::new(Arc::default()),
            text: Mutex::new((u64::MAX, Arc::from(""))),
            shape,
            region_limit,
            dump: std::sync::OnceLock::new(),
        }
    }

    /// Serves `POST /dump` with `start` from now on.
    pub(crate) fn serve_dumps(&self, start: DumpStarter) {
        let _ = self.dump.set(start);
    }

    /// `POST /dump`: `None` when dumps are not served.
    pub(crate) fn start_dump(&self) -> Option<Result<String, String>> {
        self.dump.get().map(|start| (start.0)())
    }

    /// Makes `p` the snapshot readers get.
    pub(crate) fn publish(&self, p: Published) {
        let old = std::mem::replace(
            &mut *self.latest.lock().unwrap_or_else(|e| e.into_inner()),
            Arc::new(p),
        );
        drop(old); // outside the lock
    }

    /// The text of the latest snapshot, rendered by the first reader that asks for it.
    pub(crate) fn text(&self) -> Arc<str> {
        let latest = self
            .latest
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        // Held while rendering: concurrent readers wait for this one text, not render theirs.
        let mut cached = self.text.lock().unwrap_or_else(|e| e.into_inner());
        if cached.0 != latest.version {
            *cached = (latest.version, render::render(&latest, &self.shape).into());
        }
        cached.1.clone()
    }

    /// The flusher's side of this hub.
    pub(crate) fn live(self: &Arc<Self>) -> Live {
        Live {
            acc: accumulate::Accumulator::new(self.region_limit),
            hub: self.clone(),
            last: None,
            version: 0,
        }
    }
}

/// The flusher's accumulator and when it last published.
pub(crate) struct Live {
    pub(crate) acc: accumulate::Accumulator,
    hub: Arc<Hub>,
    last: Option<Instant>,
    version: u64,
}

impl Live {
    /// Whether [`PUBLISH_EVERY`] has passed since the last publish.
    pub(crate) fn due(&self) -> bool {
        self.last.is_none_or(|t| t.elapsed() >= PUBLISH_EVERY)
    }

    /// Publishes a snapshot of everything accumulated, with the current phase's statistics
    /// by region id, `process` and the perf totals.
    pub(crate) fn publish<'a>(
        &mut self,
        phase: impl Fn(usize) -> Option<&'a crate::data::stats::Sums>,
        mut process: Process,
        perf: Option<crate::sink::CounterTotals>,
    ) {
        process.folded_regions = self.acc.folded();
        if let Some(t) = &perf {
            self.acc.set_perf(t.events.len(), &t.regions);
        }
        self.version += 1;
        let events = perf.map(|t| t.events);
        let snap = self.acc.snapshot(self.version, phase, process, events);
        self.hub.publish(snap);
        self.last = Some(Instant::now());
    }
}

/// What `build()` prepares: the hub and, with `prometheus`, the bound listener (so a failed
/// bind is an error before anything starts).
#[derive(Debug)]
pub(crate) struct Setup {
    pub hub: Arc<Hub>,
    pub listener: Option<TcpListener>,
}

/// At `build()`: the hub and listener the configuration asks for (`None` when metrics are
/// off or the profiler is disabled). `mpi_rank` is the rank with `Builder::mpi`.
///
/// # Errors
/// [`Error::MetricsEndpoint`] when the address did not resolve, its port plus the node-local
/// rank is out of range, or it cannot be bound.
pub(crate) fn setup(config: &Config, mpi_rank: Option<u32>) -> Result<Option<Setup>, Error> {
    let m = &config.metrics;
    if !m.enabled || config.mode == crate::Mode::Disabled {
        return Ok(None);
    }
    let place = rank::placement(mpi_rank, |k| std::env::var(k).ok());
    let rank_value = place.map(|p| p.rank.to_string());
    let consts = render::label_pairs(
        rank_value
            .as_deref()
            .map(|r| ("rank", r))
            .into_iter()
            .chain(m.labels.iter().map(|(k, v)| (k.as_str(), v.as_str()))),
    );
    let listener = match &m.endpoint {
        None => None,
        Some(options::Endpoint::Unresolved(kind, message)) => {
            return Err(Error::MetricsEndpoint {
                addr: "the address given to Builder::prometheus".into(),
                source: std::io::Error::new(*kind, message.clone()),
            })
        }
        Some(options::Endpoint::Resolved(addrs)) => Some(bind(addrs, place)?),
    };
    let shape = Shape {
        consts,
        track_async: config.track_async,
    };
    Ok(Some(Setup {
        hub: Arc::new(Hub::new(shape, m.region_limit)),
        listener,
    }))
}

/// Binds the first of `addrs` (ports shifted by the node-local rank) that binds.
fn bind(
    addrs: &[std::net::SocketAddr],
    place: Option<rank::Placement>,
) -> Result<TcpListener, Error> {
    let described = |a: &[std::net::SocketAddr]| {
        a.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let offset = place.map_or(0, |p| p.local);
    let shifted = rank::shift(addrs, offset).map_err(|message| Error::MetricsEndpoint {
        addr: described(addrs),
        source: std::io::Error::new(std::io::ErrorKind::InvalidInput, message),
    })?;
    TcpListener::bind(&shifted[..]).map_err(|source| Error::MetricsEndpoint {
        addr: match place {
            Some(p) => format!(
                "{} (the configured port plus node-local rank {})",
                described(&shifted),
                p.local
            ),
            None => described(&shifted),
        },
        source,
    })
}

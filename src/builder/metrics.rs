//! The builder's live-metrics options (feature `prometheus`); see `docs/fleet-metrics.md`.

use std::net::ToSocketAddrs;
use std::sync::Arc;

use super::Builder;
use crate::data::metrics_options::Endpoint;

impl Builder {
    /// Serves live region metrics in the Prometheus text format at `http://addr/metrics`, from
    /// a small thread of its own (implies [`metrics(true)`](Self::metrics)). Feature
    /// `prometheus`.
    ///
    /// Prefer a loopback or private address (`127.0.0.1:9464`, a private interface): the
    /// endpoint has no authentication, and binding is your choice. Port 0 lets the system
    /// choose ([`FlushGuard::metrics_addr`](crate::FlushGuard::metrics_addr) tells which). The
    /// series, their labels and the cardinality limit are described in
    /// [`metrics`](Self::metrics). OpenTelemetry collectors scrape the same endpoint with
    /// their Prometheus receiver.
    ///
    /// **Multi-rank runs**: every rank serves its own metrics, labelled `rank="<world rank>"`,
    /// on `addr`'s port plus its node-local rank (`OMPI_COMM_WORLD_LOCAL_RANK`,
    /// `MPI_LOCALRANKID`, `SLURM_LOCALID`, ...; the world rank when the launcher gives none),
    /// with [`mpi(true)`](Self::mpi) and also under a launcher without it.
    ///
    /// A forked child does not serve: the listener is closed in the child. With
    /// [`Mode::Disabled`](crate::Mode::Disabled) (also through `SCOPE_PROFILER=off`) nothing is
    /// bound.
    ///
    /// `addr` is resolved now; a failure to resolve or to bind is an error at `build()`.
    ///
    /// ```
    /// use std::io::{Read, Write};
    /// use scope_profiler::ScopeLayer;
    ///
    /// let (layer, guard) = ScopeLayer::builder()
    ///     .no_output()
    ///     .summary(false)
    ///     .prometheus("127.0.0.1:0")
    ///     .build()?;
    /// let mut scrape = std::net::TcpStream::connect(guard.metrics_addr().unwrap()).unwrap();
    /// scrape.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    /// let mut answer = String::new();
    /// scrape.read_to_string(&mut answer).unwrap();
    /// assert!(answer.starts_with("HTTP/1.1 200 OK"));
    /// assert!(answer.contains("# TYPE scope_region_calls_total counter"));
    /// # Ok::<(), scope_profiler::Error>(())
    /// ```
    pub fn prometheus(mut self, addr: impl ToSocketAddrs) -> Self {
        self.config.metrics.enabled = true;
        self.config.metrics.endpoint = Some(Endpoint::resolve(addr));
        self
    }

    /// Keeps live region metrics for [`FlushGuard::metrics_text`](crate::FlushGuard::metrics_text),
    /// for programs that serve them from their own HTTP server (axum, hyper, warp); no
    /// endpoint is opened. Feature `prometheus`.
    ///
    /// The flusher folds every call into per-region series, kept since `build()` (finalize and
    /// rotation do not reset them), off the recording threads:
    ///
    /// | series | type |
    /// |---|---|
    /// | `scope_region_calls_total` | counter |
    /// | `scope_region_seconds_total` | counter |
    /// | `scope_region_duration_seconds` | histogram, 4 buckets per decade from 1 us to 100 s |
    /// | `scope_region_await_seconds_total` (with [`track_async`](Self::track_async)) | counter |
    /// | `scope_region_perf_<event>_total` (with [`perf_events`](Self::perf_events); `-` written `_`) | counter |
    /// | `scope_dropped_calls_total`, `scope_backpressure_wait_seconds_total`, `scope_flusher_cpu_seconds_total` | counter |
    /// | `scope_buffer_bytes`, `scope_regions_folded` | gauge |
    ///
    /// Region series are labelled `region`; all series carry `rank` in multi-rank runs and the
    /// labels of [`metric_labels`](Self::metric_labels). Regions beyond
    /// [`metric_region_limit`](Self::metric_region_limit) are counted under `region="other"`.
    /// A snapshot is published at most every 100 ms and at every finalize.
    ///
    /// ```
    /// # use scope_profiler::ScopeLayer;
    /// # use tracing_subscriber::prelude::*;
    /// let (layer, guard) = ScopeLayer::builder().no_output().summary(false).metrics(true).build()?;
    /// let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    /// tracing::dispatcher::with_default(&dispatch, || {
    ///     tracing::info_span!("work").in_scope(|| ());
    /// });
    /// guard.finalize()?; // publishes the metrics of everything it reports
    /// let text = guard.metrics_text().unwrap();
    /// assert!(text.contains("scope_region_calls_total{region=\"work\"} 1\n"));
    /// # Ok::<(), scope_profiler::Error>(())
    /// ```
    pub fn metrics(mut self, on: bool) -> Self {
        self.config.metrics.enabled = on;
        self
    }

    /// Constant labels added to every metric series (e.g. `service`, `env`), in this order
    /// after `rank`. Names must be valid Prometheus label names and must not be `region`,
    /// `rank`, `le` or start with `__`; values may be anything (they are escaped). A bad name
    /// is an [`Error::InvalidOption`](crate::Error::InvalidOption) at `build()`. Feature
    /// `prometheus`.
    ///
    /// ```
    /// # use scope_profiler::ScopeLayer;
    /// let (layer, guard) = ScopeLayer::builder()
    ///     .no_output()
    ///     .metrics(true)
    ///     .metric_labels([("service", "checkout"), ("env", "prod")])
    ///     .build()?;
    /// assert!(guard.metrics_text().unwrap().contains("scope_dropped_calls_total{service=\"checkout\",env=\"prod\"} 0"));
    /// let bad = ScopeLayer::builder().no_output().metrics(true).metric_labels([("le", "x")]).build();
    /// assert!(bad.unwrap_err().to_string().contains("reserved"));
    /// # Ok::<(), scope_profiler::Error>(())
    /// ```
    pub fn metric_labels<I, K, V>(mut self, labels: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        self.config.metrics.labels = labels
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        self
    }

    /// With [`flight_recorder`](Self::flight_recorder) and [`prometheus`](Self::prometheus):
    /// the endpoint also answers `POST /dump` by writing a dump of the window beside the
    /// output (`<stem>.dump-http-<unix seconds>.h5`) and answers at once, `202 Accepted`,
    /// with the file's path; the file appears there, whole, when it is written. While one
    /// such dump is being written, another `POST /dump` gets `503`. Off unless asked for,
    /// and only on the address given to `prometheus`. Feature `prometheus`.
    ///
    /// `build()` fails with [`crate::Error::InvalidOption`] without both of those options.
    ///
    /// ```no_run
    /// let (layer, guard) = scope_profiler::ScopeLayer::builder()
    ///     .output("service.h5")
    ///     .flight_recorder(std::time::Duration::from_secs(120))
    ///     .prometheus("127.0.0.1:9464")
    ///     .metrics_dump(true) // curl -X POST http://127.0.0.1:9464/dump
    ///     .build()?;
    /// # Ok::<(), scope_profiler::Error>(())
    /// ```
    pub fn metrics_dump(mut self, on: bool) -> Self {
        self.config.metrics.dump = on;
        self
    }

    /// The most regions exported under their own name (default 1 000): the regions seen
    /// first keep theirs, later ones are counted together under `region="other"`, and the
    /// gauge `scope_regions_folded` says how many were folded. Bounds the series a scraper
    /// stores whatever the program does. Feature `prometheus`.
    pub fn metric_region_limit(mut self, regions: usize) -> Self {
        self.config.metrics.region_limit = regions;
        self
    }
}

/// `POST /dump` (`Builder::metrics_dump`): one dump at a time, written on a thread of its
/// own beside `output`; the answer names the file before it is written.
pub(super) fn http_dumps(
    handle: crate::DumpHandle,
    output: std::path::PathBuf,
) -> crate::metrics::DumpStarter {
    let busy = Arc::new(std::sync::atomic::AtomicBool::new(false));
    crate::metrics::DumpStarter(Box::new(move || {
        use std::sync::atomic::Ordering;
        if busy.swap(true, Ordering::AcqRel) {
            return Err("a dump is being written; ask again when it is done".into());
        }
        let path = crate::finalize::dump_signal::dump_name(&output, "http");
        let (handle, busy2, target) = (handle.clone(), busy.clone(), path.clone());
        let started = std::thread::Builder::new()
            .name("scope-profiler-dump-http".into())
            .spawn(move || {
                if let Err(e) = handle.dump(&target) {
                    eprintln!("scope-profiler: POST /dump: the dump failed: {e}");
                }
                busy2.store(false, Ordering::Release);
            });
        match started {
            Ok(_) => Ok(path.display().to_string()),
            Err(e) => {
                busy.store(false, Ordering::Release);
                Err(format!("cannot start the dump's thread: {e}"))
            }
        }
    }))
}

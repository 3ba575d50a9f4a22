//! Sinks: things driven at every poll besides timing (perf counters, LIKWID markers, NVTX
//! ranges, CUDA events), each behind one small trait and one cargo feature.
//!
//! The layer calls [`Sink::enter`] for each sink in order just before it reads the clock at
//! enter, and [`Sink::exit`] in reverse order just after it reads the clock at exit, so sinks
//! nest inside one another and the timing brackets them all. Sinks are only consulted when at
//! least one is configured; without sinks the hot path does not even look up the span's
//! callsite.
//!
//! Payloads of all sinks of a call reach every sink's `resolve`, so a sink tags its own (the
//! CUDA sink puts `0xC0DA` in bits 32..47) and ignores the others.
//!
//! Data flows out three ways: a sink may attach 56-bit payloads to the current call through the
//! `emit` callback of [`Sink::exit`] (they travel in the lane to the flusher, which hands a
//! completed call's payloads to [`Sink::resolve`], e.g. for CUDA event times); at finalize,
//! [`Sink::finalize`] adds its phase data (perf totals, LIKWID results) to the file's
//! [`PhaseData`]; and [`Sink::warnings`] go into the printed summary.

use tracing_core::Metadata;

use crate::config::Config;
use crate::data::rows::PhaseData;
use crate::Error;

#[cfg(feature = "cuda")]
pub(crate) mod cuda;
#[cfg(feature = "likwid")]
pub(crate) mod likwid;
#[cfg(feature = "nvtx")]
pub(crate) mod nvtx;
#[cfg(any(all(feature = "perf", target_os = "linux"), feature = "likwid"))]
mod per_thread;
#[cfg(all(feature = "perf", target_os = "linux"))]
pub(crate) mod perf;

/// Something driven at enter/exit besides timing.
pub(crate) trait Sink: Send + Sync {
    /// Start of a poll of span `id` (callsite `meta`) on the calling thread.
    fn enter(&self, id: u64, meta: &'static Metadata<'static>);

    /// End of the poll of span `id`, called *before* the layer reads the clock at exit, so
    /// whatever a sink waits for here (e.g. a device synchronization) is part of the call's
    /// CPU time.
    fn before_exit(&self, _id: u64) {}

    /// End of the poll of span `id` on the calling thread. `emit` attaches a payload (at most
    /// 56 bits) to the span's current call; it reaches [`Sink::resolve`] on the flusher.
    fn exit(&self, id: u64, meta: &'static Metadata<'static>, emit: &mut dyn FnMut(u64));

    /// The span closed (its call is over), possibly on another thread than its polls. `emit`
    /// works as in [`Sink::exit`].
    fn close(&self, _id: u64, _emit: &mut dyn FnMut(u64)) {}

    /// On the flusher: turns one completed call's payloads into its device time in ns.
    /// `None` when this sink does not measure device time.
    fn resolve(&self, _payloads: &[u64]) -> Option<i64> {
        None
    }

    /// At finalize: adds this phase's data to the file and resets the phase.
    fn finalize(&self, _phase: &mut PhaseData) -> Result<(), Error> {
        Ok(())
    }

    /// The guard is being dropped; the last finalize follows. A sink that must close something
    /// to produce its results (LIKWID's `likwid_markerClose` writes the results file) does it
    /// here.
    fn shutdown(&self) {}

    /// Whether the next finalize has data of this sink to write even without new calls.
    fn has_final_data(&self) -> bool {
        false
    }

    /// Problems to show in the summary (e.g. LIKWID reporting no MSR access).
    fn warnings(&self) -> Vec<String> {
        Vec::new()
    }

    /// For the live metrics: this sink's counter totals per region name since `build()`
    /// (`None` when it counts nothing per region). Called by the flusher a few times a
    /// second, never on the hot path.
    fn counter_totals(&self) -> Option<CounterTotals> {
        None
    }
}

/// Counter totals per region name since `build()` (see [`Sink::counter_totals`]).
#[cfg_attr(not(feature = "prometheus"), allow(dead_code))]
#[derive(Clone, Debug, Default)]
pub(crate) struct CounterTotals {
    /// The counters' names (`perf stat -e` spelling).
    pub events: Vec<String>,
    /// Each region name's totals, one value per event.
    pub regions: Vec<(&'static str, Vec<u64>)>,
}

/// The configured sinks, outermost first.
pub(crate) struct Sinks {
    list: Vec<Box<dyn Sink>>,
}

impl Sinks {
    /// Builds the sinks the configuration asks for; `None` when it asks for none.
    pub(crate) fn build(config: &Config) -> Result<Option<Sinks>, Error> {
        #[allow(unused_mut)]
        let mut list: Vec<Box<dyn Sink>> = Vec::new();
        if config.nvtx {
            #[cfg(feature = "nvtx")]
            list.push(Box::new(nvtx::NvtxSink::new(config)?));
            #[cfg(not(feature = "nvtx"))]
            return Err(Error::FeatureDisabled {
                option: "nvtx",
                feature: "nvtx",
            });
        }
        if config.likwid {
            #[cfg(feature = "likwid")]
            list.push(Box::new(likwid::LikwidSink::new(config)?));
            #[cfg(not(feature = "likwid"))]
            return Err(Error::FeatureDisabled {
                option: "likwid",
                feature: "likwid",
            });
        }
        if config.cuda_timing {
            #[cfg(feature = "cuda")]
            list.push(Box::new(cuda::CudaSink::new(config)?));
            #[cfg(not(feature = "cuda"))]
            return Err(Error::FeatureDisabled {
                option: "cuda_timing",
                feature: "cuda",
            });
        }
        if !config.perf_events.is_empty() {
            #[cfg(all(feature = "perf", target_os = "linux"))]
            list.push(Box::new(perf::PerfSink::new(config)?));
            #[cfg(not(all(feature = "perf", target_os = "linux")))]
            return Err(Error::FeatureDisabled {
                option: "perf_events",
                feature: "perf",
            });
        }
        Ok((!list.is_empty()).then_some(Sinks { list }))
    }

    /// Calls every sink's `close`, innermost first.
    #[inline]
    pub(crate) fn close(&self, id: u64, emit: &mut dyn FnMut(u64)) {
        for s in self.list.iter().rev() {
            s.close(id, emit);
        }
    }

    /// Calls every sink's `enter`, outermost first.
    #[inline]
    pub(crate) fn enter(&self, id: u64, meta: &'static Metadata<'static>) {
        for s in &self.list {
            s.enter(id, meta);
        }
    }

    /// Calls every sink's `before_exit`, innermost first.
    #[inline]
    pub(crate) fn before_exit(&self, id: u64) {
        for s in self.list.iter().rev() {
            s.before_exit(id);
        }
    }

    /// Calls every sink's `exit`, innermost first.
    #[inline]
    pub(crate) fn exit(
        &self,
        id: u64,
        meta: &'static Metadata<'static>,
        emit: &mut dyn FnMut(u64),
    ) {
        for s in self.list.iter().rev() {
            s.exit(id, meta, emit);
        }
    }

    /// The device time of a call, from the first sink that measures one.
    pub(crate) fn resolve(&self, payloads: &[u64]) -> Option<i64> {
        self.list.iter().find_map(|s| s.resolve(payloads))
    }

    /// Lets every sink add its phase data; the first error is returned after all have run.
    pub(crate) fn finalize(&self, phase: &mut PhaseData) -> Result<(), Error> {
        let mut first = Ok(());
        for s in &self.list {
            let r = s.finalize(phase);
            if first.is_ok() {
                first = r;
            }
        }
        first
    }

    /// Calls every sink's `shutdown`.
    pub(crate) fn shutdown(&self) {
        for s in &self.list {
            s.shutdown();
        }
    }

    /// Whether any sink has data for the last finalize.
    pub(crate) fn has_final_data(&self) -> bool {
        self.list.iter().any(|s| s.has_final_data())
    }

    /// The first sink's counter totals (see [`Sink::counter_totals`]).
    #[cfg_attr(not(feature = "prometheus"), allow(dead_code))]
    pub(crate) fn counter_totals(&self) -> Option<CounterTotals> {
        self.list.iter().find_map(|s| s.counter_totals())
    }

    /// Every sink's warnings.
    pub(crate) fn warnings(&self) -> Vec<String> {
        self.list.iter().flat_map(|s| s.warnings()).collect()
    }
}

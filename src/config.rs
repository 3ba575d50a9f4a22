//! The profiler's options: [`Mode`], the immutable [`Config`] a [`Builder`](crate::Builder)
//! produces, its validation and the environment overrides.
//!
//! Environment overrides, read at `build()` so instrumentation can stay in production code:
//!
//! | variable | effect |
//! |---|---|
//! | `SCOPE_PROFILER=off` (also `0`, `false`, `no`, `disabled`) | forces [`Mode::Disabled`] |
//! | `SCOPE_PROFILER=on` (also `1`, `true`, `yes`, `enabled`, or empty) | keeps the builder's mode |
//! | `SCOPE_PROFILER_OUTPUT=path` | replaces the output path (unless `no_output()` was set) |
//!
//! Any other value of `SCOPE_PROFILER` is an [`Error::InvalidEnv`] at `build()`: a typo in the
//! production off switch must not leave profiling on unnoticed. (The Python package has no such
//! switch; its one boolean variable, `SCOPE_PROFILER_MPI`, silently ignores unknown values, the
//! trap this avoids.)

use std::path::PathBuf;
use std::time::Duration;

use crate::Error;

/// What the profiler records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Records nothing, and changes nothing for the other layers of the subscriber (they see
    /// every span and event as without this layer). Alone in a registry, its level hint `OFF`
    /// lets `tracing` skip spans before calling the subscriber, so they cost what they cost
    /// without a subscriber. For a switch at run time see [`FlushGuard::pause`](crate::FlushGuard::pause).
    Disabled,
    /// Exact per-region statistics (count, total, min, max, mean, std) in O(regions) memory;
    /// no per-call data. Files use the aggregate layout.
    Aggregate,
    /// Every call's start and end, per thread lane, plus the statistics (the default).
    #[default]
    TimeOnly,
}

/// Options fixed at `build()`: what [`Builder`](crate::Builder) collects, then checked and
/// overridden from the environment by [`Config::finish`].
#[derive(Clone, Debug)]
pub(crate) struct Config {
    pub mode: Mode,
    pub output: Option<PathBuf>,
    pub summary: bool,
    /// `Builder::summary_to`: where the summary goes (`None`: stderr).
    pub summary_to: Option<SummaryWriter>,
    pub label: Option<String>,
    pub flush_interval: Duration,
    pub track_threads: bool,
    pub track_async: bool,
    /// A Tokio task's `runtime.spawn` span is also a call (`--cfg tokio_unstable`).
    pub task_regions: bool,
    /// Tokio's `runtime.resource*` spans are regions (`--cfg tokio_unstable`).
    pub tokio_resources: bool,
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
    /// Permission bits of published profiles (`Builder::file_mode`).
    pub file_mode: u32,
    /// Events inside spans are line-timing checkpoints.
    pub line_timing: bool,
    /// Whether finalize reads each region's source text.
    pub capture_source: bool,
    /// Extra directories to resolve callsite paths against.
    pub source_roots: Vec<PathBuf>,
    /// Subtract the children's measured overhead from exclusive times.
    pub compensate_overhead: bool,
    /// `Builder::mpi`: one file for all ranks.
    pub mpi: bool,
    /// `Builder::mpi_relay`: the token relay even with the `mpio` feature.
    pub mpi_relay: bool,
    /// Test hook: the relay also publishes each parallel-written phase here.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))] // read by the MPI relay only
    pub mpi_also_relay: Option<PathBuf>,
    /// `Builder::max_level`: the most verbose level `ScopeSubscriber` records (`None`: all).
    pub max_level: Option<tracing_core::LevelFilter>,
    /// Buffer budget and drop policy.
    pub buffering: Buffering,
    /// `Builder::flight_recorder`: per-call detail only for a recent window, in a rolling
    /// ring of spool segments (see `crate::flusher::flight`).
    pub flight: Option<FlightOptions>,
    /// `Builder::dump_on_signal`: a flight-recorder dump on this signal.
    pub dump_signal: Option<i32>,
    /// `Builder::dump_when`: flight-recorder dumps on these conditions.
    pub triggers: Vec<crate::data::trigger::Trigger>,
    /// Live metrics and their endpoint.
    #[cfg(feature = "prometheus")]
    pub metrics: crate::data::metrics_options::MetricsConfig,
}

impl Config {
    /// Applies the environment overrides, then checks every option: an invalid value is an
    /// [`Error::InvalidOption`] naming it, before anything starts.
    pub(crate) fn finish(mut self) -> Result<Config, Error> {
        apply_env(&mut self, |k| std::env::var(k).ok())?;
        // Task lanes need thread lanes; decided here, so the builder's call order does not.
        self.track_threads |= self.track_async;
        let config = &self;
        if config.flush_interval.is_zero() {
            return Err(Error::InvalidOption {
                option: "spool_sync_interval",
                reason: "must be greater than zero".into(),
            });
        }
        if let Some(level) = config.gzip.filter(|&l| l > 9) {
            return Err(Error::InvalidOption {
                option: "gzip",
                reason: format!("level {level} is not in 0..=9"),
            });
        }
        if config.buffering.budget < MIN_BUFFER_BUDGET {
            return Err(Error::InvalidOption {
                option: "buffer_budget",
                reason: format!(
                    "{} bytes is below the minimum of {MIN_BUFFER_BUDGET} (1 MiB)",
                    config.buffering.budget
                ),
            });
        }
        if config.file_mode & !0o777 != 0 {
            return Err(Error::InvalidOption {
                option: "file_mode",
                reason: format!(
                    "{:#o} has bits beyond the permission bits 0o777",
                    config.file_mode
                ),
            });
        }
        if config.cuda_sync_on_exit && !config.cuda_timing {
            return Err(Error::InvalidOption {
                option: "cuda_sync_on_exit",
                reason: "needs cuda_timing(true)".into(),
            });
        }
        check_service_options(config)?;
        #[cfg(feature = "prometheus")]
        config.metrics.check()?;
        check_flight(&mut self)?;
        Ok(self)
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            mode: Mode::TimeOnly,
            output: Some(PathBuf::from("profiling_data.h5")),
            summary: true,
            summary_to: None,
            label: None,
            flush_interval: Duration::from_secs(1),
            track_threads: false,
            track_async: false,
            task_regions: false,
            tokio_resources: false,
            gzip: None,
            perf_events: Vec::new(),
            perf_skip_unsupported: false,
            likwid: false,
            nvtx: false,
            cuda_timing: false,
            cuda_sync_on_exit: false,
            cuda_stream: 0,
            rotate_every: None,
            max_files: None,
            durable: false,
            file_mode: 0o600,
            line_timing: false,
            capture_source: true,
            source_roots: Vec::new(),
            compensate_overhead: false,
            mpi: false,
            mpi_relay: false,
            mpi_also_relay: None,
            max_level: None,
            buffering: Buffering::default(),
            flight: None,
            dump_signal: None,
            triggers: Vec::new(),
            #[cfg(feature = "prometheus")]
            metrics: Default::default(),
        }
    }
}

/// The flight recorder's options (`Builder::flight_recorder`, `Builder::flight_disk_budget`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FlightOptions {
    /// The recent time whose per-call detail is kept.
    pub window: Duration,
    /// Bytes the ring's segment files may hold together.
    pub disk_budget: u64,
    /// Calls shorter than this leave no detail (`Builder::flight_min_duration`).
    pub min_duration: Duration,
}

/// The flight recorder's default disk budget: 256 MiB.
pub const DEFAULT_FLIGHT_DISK_BUDGET: u64 = 256 << 20;

/// The smallest disk budget the flight recorder accepts (1 MiB).
const MIN_FLIGHT_DISK_BUDGET: u64 = 1 << 20;

/// Checks the flight recorder's options; with it on, the whole-run file holds statistics
/// (the aggregate layout) and the per-call detail goes to the ring.
fn check_flight(config: &mut Config) -> Result<(), Error> {
    #[cfg(feature = "prometheus")]
    if config.metrics.dump && config.mode != Mode::Disabled {
        let why = if config.flight.is_none() {
            Some("needs Builder::flight_recorder")
        } else if config.metrics.endpoint.is_none() {
            Some("needs Builder::prometheus (the address it is served on)")
        } else {
            None
        };
        if let Some(why) = why {
            return Err(Error::InvalidOption {
                option: "metrics_dump",
                reason: why.into(),
            });
        }
    }
    let Some(f) = config.flight else {
        if config.mode != Mode::Disabled {
            let option = if config.dump_signal.is_some() {
                Some("dump_on_signal")
            } else if !config.triggers.is_empty() {
                Some("dump_when")
            } else {
                None
            };
            if let Some(option) = option {
                return Err(Error::InvalidOption {
                    option,
                    reason: "needs Builder::flight_recorder".into(),
                });
            }
        }
        return Ok(());
    };
    if let Some(reason) = config.triggers.iter().find_map(|t| t.invalid()) {
        return Err(Error::InvalidOption {
            option: "dump_when",
            reason,
        });
    }
    if config.mode == Mode::Disabled {
        config.flight = None;
        config.dump_signal = None;
        config.triggers.clear();
        return Ok(());
    }
    if f.window.is_zero() {
        return Err(Error::InvalidOption {
            option: "flight_recorder",
            reason: "needs a window greater than zero (flight_disk_budget or flight_min_duration \
                     alone do not start it)"
                .into(),
        });
    }
    if f.disk_budget < MIN_FLIGHT_DISK_BUDGET {
        return Err(Error::InvalidOption {
            option: "flight_disk_budget",
            reason: format!(
                "{} bytes is below the minimum of {MIN_FLIGHT_DISK_BUDGET} (1 MiB)",
                f.disk_budget
            ),
        });
    }
    if config.output.is_none() {
        return Err(Error::InvalidOption {
            option: "flight_recorder",
            reason: "needs an output file: the ring's segments live beside it".into(),
        });
    }
    if let Some(signal) = config.dump_signal {
        // What signal-hook-registry refuses (it would panic), and what is no signal at all.
        let forbidden = [
            libc::SIGKILL,
            libc::SIGSTOP,
            libc::SIGILL,
            libc::SIGFPE,
            libc::SIGSEGV,
        ];
        if forbidden.contains(&signal) || !(1..=libc::SIGRTMAX()).contains(&signal) {
            return Err(Error::InvalidOption {
                option: "dump_on_signal",
                reason: format!(
                    "signal {signal} cannot be handled (not SIGKILL, SIGSTOP, SIGILL, SIGFPE, \
                     SIGSEGV, nor outside 1..=SIGRTMAX)"
                ),
            });
        }
    }
    if config.mpi {
        return Err(Error::InvalidOption {
            option: "flight_recorder",
            reason: "is not supported with Builder::mpi yet (each rank would dump alone)".into(),
        });
    }
    config.mode = Mode::Aggregate;
    Ok(())
}

/// How the recording threads buffer records (see [`Builder::buffer_budget`](crate::Builder::buffer_budget),
/// [`Builder::lossy`](crate::Builder::lossy)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Buffering {
    /// Bytes of record buffers all threads together may hold.
    pub budget: usize,
    /// Drop instead of waiting for the flusher.
    pub lossy: bool,
    /// The longest a thread waits for the flusher before it drops.
    pub max_wait: Duration,
    /// Test-only fault injection: the flusher panics in this complete drain.
    pub fail_flusher_at: Option<u64>,
    /// Test-only: no rounds before the first finalize (see `Builder::__hold_flusher`).
    pub hold_flusher: bool,
}

impl Default for Buffering {
    fn default() -> Self {
        Buffering {
            budget: DEFAULT_BUFFER_BUDGET,
            lossy: false,
            max_wait: Duration::from_millis(100),
            fail_flusher_at: None,
            hold_flusher: false,
        }
    }
}

/// The default [`Builder::buffer_budget`](crate::Builder::buffer_budget): 32 MiB.
pub const DEFAULT_BUFFER_BUDGET: usize = 32 << 20;

/// The smallest [`Builder::buffer_budget`](crate::Builder::buffer_budget) accepted: 1 MiB.
pub const MIN_BUFFER_BUDGET: usize = 1 << 20;

/// Rotation and retention need each other and an output file.
fn check_service_options(config: &Config) -> Result<(), Error> {
    if let Some(p) = config.rotate_every {
        if p.is_zero() {
            return Err(Error::InvalidOption {
                option: "rotate_every",
                reason: "must be greater than zero".into(),
            });
        }
        if config.output.is_none() && config.mode != crate::Mode::Disabled {
            return Err(Error::InvalidOption {
                option: "rotate_every",
                reason: "needs an output file (it writes numbered files beside it)".into(),
            });
        }
    }
    match config.max_files {
        Some(0) => Err(Error::InvalidOption {
            option: "max_files",
            reason: "must keep at least one file".into(),
        }),
        Some(_) if config.rotate_every.is_none() => Err(Error::InvalidOption {
            option: "max_files",
            reason: "needs rotate_every (it counts the numbered phase files)".into(),
        }),
        _ => Ok(()),
    }
}

fn apply_env(config: &mut Config, var: impl Fn(&str) -> Option<String>) -> Result<(), Error> {
    if let Some(v) = var("SCOPE_PROFILER") {
        match v.trim().to_ascii_lowercase().as_str() {
            "off" | "0" | "false" | "disabled" | "no" => config.mode = crate::Mode::Disabled,
            "" | "on" | "1" | "true" | "enabled" | "yes" => {}
            _ => {
                return Err(Error::InvalidEnv {
                    var: "SCOPE_PROFILER",
                    value: v,
                    expected: "off, 0, false, no, disabled (profiling off) or on, 1, true, yes, \
                               enabled, empty (the builder's mode)",
                })
            }
        }
    }
    if let Some(p) = var("SCOPE_PROFILER_OUTPUT").filter(|p| !p.is_empty()) {
        if config.output.is_some() {
            config.output = Some(PathBuf::from(p));
        }
    }
    Ok(())
}

/// The warning [`Builder::build_subscriber`](crate::Builder::build_subscriber) prints once
/// per process when Tokio's task instrumentation is compiled in (`--cfg tokio_unstable`) but
/// `max_level` filters it out (its spans and events are at `TRACE`); `None` otherwise.
pub(crate) fn tokio_filtered_warning(
    tokio_unstable: bool,
    max_level: Option<tracing_core::LevelFilter>,
) -> Option<String> {
    let level = max_level.filter(|&l| l < tracing_core::LevelFilter::TRACE)?;
    let level = level.to_string().to_uppercase();
    tokio_unstable.then(|| {
        format!(
            "scope-profiler: this build has --cfg tokio_unstable, but max_level({level}) \
             filters out Tokio's task instrumentation (TRACE): use max_level(TRACE) to record \
             it (see docs/latency.md)"
        )
    })
}

/// Prints `warning` on stderr the first time this process calls it with `Some`.
pub(crate) fn warn_once(warning: Option<String>) {
    static WARNED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if let Some(w) = warning {
        if !WARNED.swap(true, std::sync::atomic::Ordering::Relaxed) {
            eprintln!("{w}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> Config {
        Config {
            output: Some(PathBuf::from("a.h5")),
            ..Config::default()
        }
    }

    #[test]
    fn env_off_disables() {
        for v in ["off", "OFF", "0", "false", "disabled"] {
            let mut c = cfg();
            apply_env(&mut c, |k| (k == "SCOPE_PROFILER").then(|| v.to_owned())).unwrap();
            assert_eq!(c.mode, Mode::Disabled, "{v}");
        }
        for v in ["on", "1", "TRUE", "yes", "enabled", ""] {
            let mut c = cfg();
            apply_env(&mut c, |k| (k == "SCOPE_PROFILER").then(|| v.to_owned())).unwrap();
            assert_eq!(c.mode, Mode::TimeOnly, "{v}");
        }
    }

    #[test]
    fn env_unknown_value_is_an_error() {
        for v in ["bogus", "of", "disable", "2"] {
            let mut c = cfg();
            let e = apply_env(&mut c, |k| (k == "SCOPE_PROFILER").then(|| v.to_owned()));
            match e {
                Err(Error::InvalidEnv { var, value, .. }) => {
                    assert_eq!((var, value.as_str()), ("SCOPE_PROFILER", v));
                }
                other => panic!("{v}: {other:?}"),
            }
        }
        let e = apply_env(&mut cfg(), |k| {
            (k == "SCOPE_PROFILER").then(|| "bogus".into())
        });
        let msg = e.unwrap_err().to_string();
        assert!(
            msg.contains("SCOPE_PROFILER=bogus") && msg.contains("off"),
            "{msg}"
        );
    }

    #[test]
    fn tokio_filtered_warning_needs_the_cfg_and_a_level_below_trace() {
        use tracing_core::LevelFilter as L;
        assert_eq!(tokio_filtered_warning(false, Some(L::DEBUG)), None);
        assert_eq!(tokio_filtered_warning(true, None), None);
        assert_eq!(tokio_filtered_warning(true, Some(L::TRACE)), None);
        let w = tokio_filtered_warning(true, Some(L::DEBUG)).expect("a warning");
        assert!(w.contains("max_level(DEBUG)") && w.contains("TRACE"), "{w}");
    }

    #[test]
    fn env_output_overrides_path_but_not_no_output() {
        let mut c = cfg();
        apply_env(&mut c, |k| {
            (k == "SCOPE_PROFILER_OUTPUT").then(|| "b.h5".into())
        })
        .unwrap();
        assert_eq!(c.output, Some(PathBuf::from("b.h5")));
        let mut c = cfg();
        c.output = None;
        apply_env(&mut c, |k| {
            (k == "SCOPE_PROFILER_OUTPUT").then(|| "b.h5".into())
        })
        .unwrap();
        assert_eq!(c.output, None);
    }
}

/// A writer the summary is printed to instead of stderr ([`Builder::summary_to`](crate::Builder::summary_to)),
/// shared by the guard's finalizes and the rotation thread.
#[derive(Clone)]
pub(crate) struct SummaryWriter(
    pub std::sync::Arc<std::sync::Mutex<Box<dyn std::io::Write + Send>>>,
);

impl std::fmt::Debug for SummaryWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SummaryWriter")
    }
}

//! The crate's one error type.
//!
//! Every user-facing failure (a bad option, an unwritable path, an I/O fault while writing the
//! profile) is an [`Error`] with enough context to act on: the path, the option, the region. The
//! profiler never panics on these paths, and the instrumented program keeps running.

use std::path::PathBuf;

/// Everything that can go wrong when building the layer or writing a profile.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The output location cannot be written (missing directory, no permission, read-only
    /// file system, ...).
    OutputPath {
        /// The path the profile was to be written to.
        path: PathBuf,
        /// Why it cannot be written.
        source: std::io::Error,
    },
    /// A builder option has a value the profiler cannot use.
    InvalidOption {
        /// The option's name, as in the builder method (`flush_interval`, ...).
        option: &'static str,
        /// What is wrong with the value.
        reason: String,
    },
    /// An I/O error while writing or publishing a file.
    Io {
        /// What was being done (`"creating temporary profile"`, ...).
        context: String,
        /// The file concerned.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The HDF5 library reported an error while writing the profile.
    Hdf5 {
        /// The file concerned.
        path: PathBuf,
        /// What was being written (`"events/durations"`, ...).
        context: String,
        /// The library's message.
        message: String,
    },
    /// The background flusher is gone (it panicked or was shut down), so no report can be
    /// produced.
    FlusherGone,
    /// A `SCOPE_PROFILER*` environment variable has a value the profiler does not know
    /// (read at `build()`; see the guide's "Environment variables").
    InvalidEnv {
        /// The variable's name.
        var: &'static str,
        /// Its value, as set.
        value: String,
        /// The values it accepts.
        expected: &'static str,
    },
    /// A perf event name that the profiler does not know.
    UnknownPerfEvent {
        /// The name as given.
        event: String,
        /// The names that are supported.
        supported: Vec<&'static str>,
    },
    /// perf events that this machine cannot count (no PMU in a VM, perf_event_paranoid, ...).
    PerfUnavailable {
        /// Each event that failed, with the reason.
        events: Vec<(String, String)>,
    },
    /// A library a sink needs (liblikwid, libcuda, ...) could not be loaded.
    LibraryMissing {
        /// The library's name.
        library: String,
        /// Why it could not be loaded and what to do.
        reason: String,
    },
    /// A sink failed while it was being set up or read.
    Sink {
        /// The sink (`perf`, `likwid`, `nvtx`, `cuda`).
        sink: &'static str,
        /// What went wrong.
        message: String,
    },
    /// A finalize could not publish its file; the calls are kept on disk.
    Unpublished {
        /// What failed.
        source: Box<Error>,
        /// The spool file holding the phase's calls; [`crate::recover()`] turns it into a
        /// profile.
        spool: PathBuf,
    },
    /// The background flusher failed (a panic inside it, or it could not be started). Recording
    /// stopped at that point; the program kept running. Calls flushed before the failure are
    /// in the spool beside the output ([`crate::recover()`]).
    FlusherFailed {
        /// What failed (the panic message).
        cause: String,
    },
    /// A thread of the profiler (the flusher, the rotation timer) could not be started.
    ThreadSpawn {
        /// The thread's name (`scope-profiler-flush`, `scope-profiler-rotate`).
        thread: &'static str,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The flusher did not answer a finalize within the time limit (it is stalled, e.g. by a
    /// sink blocked in a library call).
    FlusherStalled {
        /// How long finalize waited.
        waited: std::time::Duration,
    },
    /// An option needs a cargo feature this build does not have.
    FeatureDisabled {
        /// The builder option.
        option: &'static str,
        /// The cargo feature to enable.
        feature: &'static str,
    },
    /// The metrics endpoint could not be opened (`Builder::prometheus`, feature `prometheus`):
    /// the address did not resolve, its port plus this rank's node-local rank is beyond
    /// 65535, or binding failed (the port is in use, no permission, no such interface).
    MetricsEndpoint {
        /// The address (or addresses) tried.
        addr: String,
        /// Why it could not be used.
        source: std::io::Error,
    },
    /// A collective step of a multi-rank run failed (`Builder::mpi`), on this rank or another.
    Mpi {
        /// The step (`"publishing the multi-rank profile"`, ...).
        context: String,
        /// What went wrong, and on which rank.
        message: String,
    },
    /// A finalize measured its phase but could not write all of it (a full disk, a read-only
    /// or removed output directory): `report` holds the phase's exact statistics all the
    /// same, [`Report::detail_lost`](crate::Report::detail_lost) the calls whose per-call
    /// detail is gone, and `source` what failed (an [`Error::Unpublished`] when the calls
    /// that were written are kept in a spool file).
    Partial {
        /// What failed.
        source: Box<Error>,
        /// The phase's report (its [`file`](crate::Report::file) is `None`).
        report: Box<crate::Report>,
    },
    /// This process was forked (without `exec`) from the one whose profiler this is, or
    /// from one whose profiler was running: profiling is off here, the parent's spool and
    /// output are left alone, and no new profiler starts (see `docs/faults.md`).
    ForkedChild {
        /// This process.
        pid: u32,
        /// The process the profiler belongs to.
        parent: u32,
    },
}

impl Error {
    /// The phase's report carried by an [`Error::Partial`] (exact statistics of a phase that
    /// could not be written whole); `None` for every other error.
    pub fn report(&self) -> Option<&crate::Report> {
        match self {
            Error::Partial { report, .. } => Some(report),
            _ => None,
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::OutputPath { path, source } => {
                write!(
                    f,
                    "cannot write profile output to {}: {source}",
                    path.display()
                )
            }
            Error::InvalidOption { option, reason } => {
                write!(f, "invalid value for option `{option}`: {reason}")
            }
            Error::Io {
                context,
                path,
                source,
            } => write!(f, "{context} ({}): {source}", path.display()),
            Error::Hdf5 {
                path,
                context,
                message,
            } => write!(
                f,
                "HDF5 error while writing {context} in {}: {message}",
                path.display()
            ),
            Error::InvalidEnv {
                var,
                value,
                expected,
            } => write!(
                f,
                "environment variable {var}={value} is not understood; expected {expected}"
            ),
            Error::FlusherGone => write!(f, "the profiler's background flusher is not running"),
            Error::UnknownPerfEvent { event, supported } => write!(
                f,
                "unknown perf event `{event}`; supported events: {}",
                supported.join(", ")
            ),
            Error::PerfUnavailable { events } => {
                write!(f, "perf events this machine cannot count:")?;
                for (name, reason) in events {
                    write!(f, " `{name}` ({reason});")?;
                }
                write!(
                    f,
                    " use Builder::perf_skip_unsupported(true) to continue with the others"
                )
            }
            Error::LibraryMissing { library, reason } => {
                write!(f, "cannot load {library}: {reason}")
            }
            Error::Sink { sink, message } => write!(f, "{sink} sink: {message}"),
            Error::Unpublished { source, spool } => write!(
                f,
                "{source}; this phase's calls are kept in {} (recover them with \
                 `scopeprof recover --spool {} OUT.h5` or scope_profiler::recover_spool)",
                spool.display(),
                spool.display()
            ),
            Error::FlusherFailed { cause } => write!(
                f,
                "the profiler's background flusher failed ({cause}); recording stopped there"
            ),
            Error::ThreadSpawn { thread, source } => {
                write!(f, "cannot start the profiler's thread `{thread}`: {source}")
            }
            Error::FlusherStalled { waited } => write!(
                f,
                "the profiler's background flusher did not answer within {waited:?}"
            ),
            Error::FeatureDisabled { option, feature } => write!(
                f,
                "option `{option}` needs the `{feature}` cargo feature of scope-profiler"
            ),
            Error::Mpi { context, message } => write!(f, "MPI: {context}: {message}"),
            Error::MetricsEndpoint { addr, source } => {
                write!(f, "cannot serve metrics on {addr}: {source}")
            }
            Error::Partial { source, report } => {
                write!(f, "{source}")?;
                if let Some(lost) = report.detail_lost() {
                    write!(f, "; {} calls' detail lost: {}", lost.calls, lost.cause)?;
                }
                let calls: u64 = report.regions().iter().map(|r| r.calls).sum();
                write!(
                    f,
                    "; the statistics of all {calls} calls of the phase are in the error's report"
                )
            }
            Error::ForkedChild { pid, parent } => write!(
                f,
                "process {pid} was forked from {parent} while profiling: the profiler and its \
                 files belong to {parent}, so nothing is recorded or written here, and a new \
                 profiler cannot start safely (locks held at the fork stay held); build it \
                 after exec, or before any profiler runs"
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::OutputPath { source, .. }
            | Error::Io { source, .. }
            | Error::ThreadSpawn { source, .. }
            | Error::MetricsEndpoint { source, .. } => Some(source),
            Error::Unpublished { source, .. } | Error::Partial { source, .. } => {
                Some(source.as_ref())
            }
            _ => None,
        }
    }
}

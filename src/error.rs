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
            Error::FlusherGone => write!(f, "the profiler's background flusher is not running"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::OutputPath { source, .. } | Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

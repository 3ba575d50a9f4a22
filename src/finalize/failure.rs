//! A spool failure as a finalize reports it: the error (naming the output's directory when
//! it is gone), the calls whose detail was lost, and where the calls that were written are
//! when the phase's file could not be moved aside.

use std::path::PathBuf;

use crate::data::report::DetailLost;
use crate::Error;

/// A spool failure as a finalize reports it.
pub(super) struct Failure {
    source: crate::spool::SpoolFailure,
    /// The calls whose detail was lost (`None`: none; only moving the file aside failed).
    pub(super) lost: Option<DetailLost>,
    /// Where the calls that were written are, when the file could not be moved aside.
    pub(super) kept_at: Option<PathBuf>,
}

impl Failure {
    /// `f`, with the lost calls' times made relative to `build()` (`build_ns`).
    pub(super) fn of(mut f: crate::spool::SpoolFailure, build_ns: i64) -> Failure {
        let since = |t: i64| (t - build_ns).max(0) as u64;
        let lost = (f.lost.calls > 0).then(|| DetailLost {
            calls: f.lost.calls,
            first_ns: since(f.lost.first_ns),
            last_ns: since(f.lost.last_ns),
            cause: crate::spool::loss::cause(&f.error),
        });
        Failure {
            kept_at: f.kept_at.take(),
            source: f,
            lost,
        }
    }

    /// The error: what failed on which file, naming the output's directory when it is gone.
    pub(super) fn error(&self) -> Error {
        let f = &self.source;
        let dir = crate::data::files::dir_of(&f.path);
        let context = if std::fs::symlink_metadata(&dir).is_err() {
            format!(
                "{} (the output's directory {} is gone)",
                f.context,
                dir.display()
            )
        } else {
            f.context.to_owned()
        };
        Error::Io {
            context,
            path: f.path.clone(),
            source: std::io::Error::new(f.error.kind(), f.error.to_string()),
        }
    }
}

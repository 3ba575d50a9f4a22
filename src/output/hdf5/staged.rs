//! A profile file begun before the phase's calls are read back.
//!
//! The lane tables (`thread_table`, `task_table`) and the polls need no call: a finalize
//! creates the temporary file and writes them while another thread reads the calls back and
//! nests them ([`crate::finalize::pipeline`]). In a task-per-request phase the lanes are as
//! many as the calls and most of the file's HDF5 time (a variable-length string per task for
//! `task_table/name`), so this overlap is a good part of its finalize time.
//! [`super::write_scanned`] then completes and publishes the file; a staged file that is never
//! published is removed when dropped.

use std::path::{Path, PathBuf};

use ::hdf5::File;

use super::ctx::Ctx;
use super::lanes::{write_lanes, Lanes};
use crate::data::rows::PhaseData;
use crate::error::Error;

/// The temporary file of a profile whose lane tables are already written.
#[derive(Debug)]
pub(crate) struct Staged {
    /// `None` once handed to [`super::write_scanned`].
    parts: Option<Parts>,
}

/// What [`super::write_scanned`] takes over.
#[derive(Debug)]
pub(super) struct Parts {
    pub tmp: PathBuf,
    pub file: File,
    /// The temporary file's identity when HDF5 created it.
    pub created: Option<(u64, u64, bool)>,
}

impl Staged {
    /// Creates the temporary file beside `target` and writes the lane tables of `data` with
    /// `lanes` (the task rows and polls, which the caller holds apart from `data` while
    /// another thread reads `data`).
    ///
    /// # Errors
    /// The file cannot be created or HDF5 fails (the temporary file is then removed). Callers
    /// fall back to writing the whole file at publish, which reports the same error.
    pub(crate) fn begin(
        target: &Path,
        data: &PhaseData,
        lanes: Lanes<'_>,
    ) -> Result<Staged, Error> {
        let (tmp, file) = super::create_temp(target)?;
        let created = crate::data::files::identity(&tmp).ok();
        let staged = Staged {
            parts: Some(Parts { tmp, file, created }),
        };
        let ctx = Ctx { path: target };
        if let Some(p) = &staged.parts {
            write_lanes(&ctx, &p.file, data, lanes)?;
        }
        Ok(staged)
    }

    /// The parts, for a file published at `path`: only when it can be renamed there (the
    /// same directory); else `None`, and the staged file goes.
    pub(super) fn take_for(mut self, path: &Path) -> Option<Parts> {
        let same_dir = self
            .parts
            .as_ref()
            .is_some_and(|p| p.tmp.parent() == path.parent());
        if same_dir {
            self.parts.take()
        } else {
            None
        }
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if let Some(p) = self.parts.take() {
            let Parts { tmp, file, created } = p;
            drop(file);
            // Only ever our own file.
            if crate::data::files::identity(&tmp).ok() == created {
                let _ = std::fs::remove_file(&tmp);
            }
        }
    }
}

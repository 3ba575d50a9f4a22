//! Step 6 of a finalize: where the phase's file goes and its publication (completing the
//! file begun with the lane tables, if any), at a name that never replaces another phase's file.

use std::path::{Path, PathBuf};

use super::names;
use super::pipeline::GuardState;
use crate::data::rows::PhaseData;
use crate::data::scan::Scan;
use crate::output::hdf5::staged::Staged;
use crate::output::hdf5::WriteOptions;
use crate::recording::shared::Shared;
use crate::Error;

/// Where this phase goes (see [`names`]) and whether it is a numbered file; `None` without
/// an output.
pub(super) fn target(
    shared: &Shared,
    state: &mut GuardState,
    to: Option<&Path>,
) -> Option<(PathBuf, bool)> {
    let config = &shared.config;
    if config.rotate_every.is_some() && to.is_none() {
        let output = config.output.as_deref()?;
        let n = state.next_number;
        state.next_number += 1;
        return Some((names::numbered(output, n), true));
    }
    to.or(config.output.as_deref())
        .map(|p| (p.to_path_buf(), false))
}

/// Step 6: the second pass writes the file (completing the staged one, if any); returns where
/// it went and, multi-rank, how it was written.
pub(super) fn publish(
    (shared, publisher): (&Shared, crate::mpi::Publisher<'_>),
    state: &mut GuardState,
    path: &Path,
    numbered: bool,
    (data, scan, staged): (&PhaseData, &Scan, Option<Staged>),
    ok: bool,
) -> Result<(PathBuf, Option<crate::mpi::MpiWrite>), Error> {
    let config = &shared.config;
    let mut write = publisher.writer(shared, path, (data, scan), ok, staged);
    let mut opts = WriteOptions {
        gzip: config.gzip,
        durable: config.durable,
        no_replace: false,
        mode: config.file_mode,
    };
    let taken = state.published.iter().any(|(p, _)| p == path);
    let written = if taken {
        // Never replace a file this guard published: the first free late name.
        opts.no_replace = true;
        let mut last = None;
        let mut written = None;
        for candidate in names::candidates(path, "late", 1).take(1000) {
            if std::fs::symlink_metadata(&candidate).is_ok() && !write.collective() {
                continue;
            }
            match write.write(&candidate, &opts) {
                Ok(w) => {
                    written = Some(w);
                    break;
                }
                Err(e) if is_exists(&e) => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        match (written, last) {
            (Some(w), _) => w,
            (None, Some(e)) => return Err(e),
            (None, None) => {
                return Err(Error::OutputPath {
                    path: path.to_path_buf(),
                    source: std::io::Error::new(
                        std::io::ErrorKind::AlreadyExists,
                        "no free late name beside it",
                    ),
                })
            }
        }
    } else {
        write.write(path, &opts)?
    };
    let how = write.how();
    drop(write);
    let (written, id) = written;
    state.last_was_late = taken;
    // The inode HDF5 created (rename keeps it), for a later reopen.
    state.published.push((written.clone(), id));
    if numbered && !taken {
        state.numbered.push_back(written.clone());
        if let Some(keep) = config.max_files {
            while state.numbered.len() > keep {
                if let Some(old) = state.numbered.pop_front() {
                    let _ = std::fs::remove_file(&old);
                }
            }
        }
    }
    Ok((written, how))
}

fn is_exists(e: &Error) -> bool {
    use std::error::Error as _;
    e.source()
        .and_then(|s| s.downcast_ref::<std::io::Error>())
        .is_some_and(|io| io.kind() == std::io::ErrorKind::AlreadyExists)
}

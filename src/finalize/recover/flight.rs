//! The flight recorder's segments a run left when it did not finish (killed, crashed): at
//! `build()` with the flight recorder, they are recovered into `<stem>.recovered-N.h5`, as a
//! stale spool is, and removed, so the window before the crash is kept and a new ring never
//! meets the old one's files. Segments another live process holds (locked) are left alone;
//! one that cannot be read is kept as `<segment>.corrupt-N`.

use std::path::{Path, PathBuf};

use super::{mine, recover_runs};
use crate::Error;

/// Recovers the stale segments of the ring beside `output`.
///
/// # Errors
/// The output's directory cannot be listed, or an unreadable segment cannot be moved aside.
pub(crate) fn recover_stale_ring(output: &Path) -> Result<(), Error> {
    let what = "an earlier run's flight recorder (the window before it stopped)";
    recover_runs(output, stale_segments(output)?, what)
}

/// `.<name>.flight-<n>` beside `output`: regular files of this user that no live process
/// holds, oldest (lowest `n`) first.
fn stale_segments(output: &Path) -> Result<Vec<PathBuf>, Error> {
    let name = output
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let prefix = format!(".{name}.flight-");
    let dir = crate::data::files::dir_of(output);
    let entries = std::fs::read_dir(&dir).map_err(|source| Error::Io {
        context: "listing the output's directory".into(),
        path: dir.clone(),
        source,
    })?;
    let mut found: Vec<(u64, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            let no: u64 = n.strip_prefix(&prefix)?.parse().ok()?;
            Some((no, e.path()))
        })
        .filter(|(_, p)| mine(p) && !held(p))
        .collect();
    found.sort();
    Ok(found.into_iter().map(|(_, p)| p).collect())
}

/// Whether a live process holds segment `p` (its lock cannot be taken).
fn held(p: &Path) -> bool {
    match crate::data::files::open_nofollow(p) {
        Ok(f) => !matches!(crate::data::files::try_lock(&f), Ok(true)),
        Err(_) => true,
    }
}

//! Where each phase is published, so that no phase ever replaces another one's file.
//!
//! - With rotation, every phase (automatic, explicit or at drop) goes to the next numbered
//!   file: `profile.h5` -> `profile.0001.h5`, `profile.0002.h5`, ... (from 1, no gaps; a
//!   number of an earlier run is replaced, as `profile.h5` itself is).
//! - Otherwise the first phase goes to the output (or the `finalize_to` path). A later phase
//!   that would publish to a path this guard already published goes to the first free
//!   `<stem>.late.h5`, `<stem>.late-2.h5`, ... beside it instead, and never replaces anything.
//! - A crashed run's spool is recovered into the first free `<stem>.recovered-N.h5`.

use std::path::{Path, PathBuf};

/// `dir/stem` and extension (with its dot, or "") of `path`.
fn split(path: &Path) -> (PathBuf, String) {
    let ext = path
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "profile".into());
    (path.with_file_name(stem), ext)
}

/// `profile.h5` -> `profile.<suffix>.h5`.
pub(crate) fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let (base, ext) = split(path);
    PathBuf::from(format!("{}.{suffix}{ext}", base.display()))
}

/// The `n`-th numbered phase file of `output` (`profile.0007.h5`).
pub(crate) fn numbered(output: &Path, n: u32) -> PathBuf {
    with_suffix(output, &format!("{n:04}"))
}

/// Candidates `<stem>.<word>.h5`, `<stem>.<word>-2.h5`, ... (first `first`).
pub(crate) fn candidates(output: &Path, word: &str, first: u32) -> impl Iterator<Item = PathBuf> {
    let output = output.to_path_buf();
    let word = word.to_owned();
    (first..).map(move |i| {
        if i == 1 && word == "late" {
            with_suffix(&output, &word)
        } else {
            with_suffix(&output, &format!("{word}-{i}"))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        let p = Path::new("/d/profile.h5");
        assert_eq!(numbered(p, 1), Path::new("/d/profile.0001.h5"));
        assert_eq!(numbered(p, 12345), Path::new("/d/profile.12345.h5"));
        let late: Vec<PathBuf> = candidates(p, "late", 1).take(2).collect();
        assert_eq!(
            late,
            [
                Path::new("/d/profile.late.h5"),
                Path::new("/d/profile.late-2.h5")
            ]
        );
        let rec: Vec<PathBuf> = candidates(p, "recovered", 1).take(1).collect();
        assert_eq!(rec, [Path::new("/d/profile.recovered-1.h5")]);
        assert_eq!(numbered(Path::new("out"), 2), Path::new("out.0002"));
    }
}

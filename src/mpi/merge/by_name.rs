//! [`merge_ranks`]: single-rank files, each rank known from its file name.

use std::path::Path;

use super::{Input, Merged, Merger};
use crate::Error;

/// The rank in a file name such as `run.rank3.h5` or `run.rank3.recovered-1.h5` (the last
/// `.rank<digits>` component of the stem; `None` without one).
pub(crate) fn rank_in_name(path: &Path) -> Option<u32> {
    let stem = path.file_stem()?.to_str()?;
    stem.split('.')
        .rev()
        .find_map(|part| part.strip_prefix("rank")?.parse().ok())
}

/// Merges single-rank profiles (one per MPI rank, e.g. the `<stem>.rank<N>.h5` files written
/// under an MPI launcher without the `mpi` feature) into one multi-rank schema-3 file at
/// `output`, published atomically. The rank of each input is the `N` of `.rank<N>` in its
/// name, else its position in `inputs`. `metadata/mpi_size` is one more than the largest
/// rank; the first input's metadata (sorted by rank) is kept, as the Python writer keeps rank
/// 0's. Inputs may be recovered files (see [`recover`](crate::recover())): a rank that died
/// is simply absent.
///
/// ```no_run
/// let merged = scope_profiler::merge_ranks(&["run.rank0.h5", "run.rank1.h5"], "run.h5")?;
/// assert_eq!(merged.ranks, vec![0, 1]);
/// # Ok::<(), scope_profiler::Error>(())
/// ```
///
/// # Errors
/// An input cannot be read, is not a columnar schema-3 file, already holds several ranks, or
/// two inputs claim the same rank; the output cannot be written. The output is left untouched
/// on any error.
pub fn merge_ranks<P: AsRef<Path>>(
    inputs: &[P],
    output: impl AsRef<Path>,
) -> Result<Merged, Error> {
    let output = output.as_ref();
    let mut ranked: Vec<(u32, &Path)> = inputs
        .iter()
        .enumerate()
        .map(|(i, p)| (rank_in_name(p.as_ref()).unwrap_or(i as u32), p.as_ref()))
        .collect();
    ranked.sort_by_key(|(r, _)| *r);
    if let Some(w) = ranked.windows(2).find(|w| w[0].0 == w[1].0) {
        return Err(Error::InvalidOption {
            option: "merge_ranks",
            reason: format!(
                "{} and {} both hold rank {}",
                w[0].1.display(),
                w[1].1.display(),
                w[0].0
            ),
        });
    }
    let Some(&(last, _)) = ranked.last() else {
        return Err(Error::InvalidOption {
            option: "merge_ranks",
            reason: "no input files".into(),
        });
    };
    let mut m = Merger::create(output, None)?;
    for (rank, path) in &ranked {
        let input = Input {
            path,
            rank: *rank,
            clock_offset_ns: 0,
        };
        if let Err(e) = m.append(&input) {
            m.abandon();
            return Err(e);
        }
    }
    m.finish(last + 1, &[], false)
}

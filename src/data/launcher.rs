//! Without [`Builder::mpi`](crate::Builder::mpi): a program started by an MPI launcher (or by
//! Slurm) would have every rank write the same output path. The launcher's variables are
//! detected at `build()`, and each rank then writes `<stem>.rank<N>.h5` instead; one line on
//! stderr says so. [`merge_ranks`](crate::merge_ranks) joins the files afterwards.

use std::path::{Path, PathBuf};

/// The launcher variables, in the order they are tried: `(rank, size)` pairs.
const VARS: [(&str, &str); 4] = [
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
    ("PMIX_RANK", "PMIX_SIZE"),
    ("PMI_RANK", "PMI_SIZE"),
    ("SLURM_PROCID", "SLURM_NTASKS"),
];

/// A launcher's rank and size, and the variable it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Detected {
    pub rank: u32,
    /// `None` when the launcher does not say (then every rank still gets its own file).
    pub size: Option<u32>,
    pub var: &'static str,
}

/// The launcher's rank, if a launcher variable is set; `env` reads a variable.
pub(crate) fn detect(env: impl Fn(&str) -> Option<String>) -> Option<Detected> {
    for (rank_var, size_var) in VARS {
        let Some(rank) = env(rank_var).and_then(|v| v.trim().parse::<u32>().ok()) else {
            continue;
        };
        let size = env(size_var).and_then(|v| v.trim().parse::<u32>().ok());
        // A one-process Slurm step is not a multi-rank run.
        if rank_var == "SLURM_PROCID" && size.is_some_and(|s| s <= 1) {
            return None;
        }
        return Some(Detected {
            rank,
            size,
            var: rank_var,
        });
    }
    None
}

/// Applies launcher detection to `output`: the rank's own path and the line to print.
pub(crate) fn per_rank_output(
    output: &std::path::Path,
    env: impl Fn(&str) -> Option<String>,
) -> Option<(std::path::PathBuf, String)> {
    let d = detect(env)?;
    let path = rank_path(output, d.rank);
    let size = d.size.map_or_else(String::new, |s| format!(" of {s}"));
    let line = format!(
        "scope-profiler: MPI launcher detected ({}={}{size}) without the `mpi` feature; this \
         rank writes {} (join the ranks' files with scope_profiler::merge_ranks)",
        d.var,
        d.rank,
        path.display()
    );
    Some((path, line))
}

/// `<stem>.rank<N>.<ext>` beside `output`: a rank's own file (launcher mode) and the base
/// name of its spool (both modes), so `recover` names the rank.
pub(crate) fn rank_path(output: &Path, rank: u32) -> PathBuf {
    let stem = output.file_stem().unwrap_or_default().to_string_lossy();
    let name = match output.extension() {
        Some(ext) => format!("{stem}.rank{rank}.{}", ext.to_string_lossy()),
        None => format!("{stem}.rank{rank}"),
    };
    output.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    use crate::testing::env_of as env;

    #[test]
    fn each_launcher_is_detected() {
        for (rank, size) in VARS {
            let vars = [(rank, "3"), (size, "4")];
            let d = detect(env(&vars)).unwrap();
            assert_eq!((d.rank, d.size, d.var), (3, Some(4), rank));
        }
        assert_eq!(detect(env(&[])), None);
        assert_eq!(detect(env(&[("PMI_RANK", "x")])), None);
        // A single Slurm task is no multi-rank run.
        assert_eq!(
            detect(env(&[("SLURM_PROCID", "0"), ("SLURM_NTASKS", "1")])),
            None
        );
    }

    #[test]
    fn the_rank_gets_its_own_file() {
        let vars = [("OMPI_COMM_WORLD_RANK", "2"), ("OMPI_COMM_WORLD_SIZE", "4")];
        let (path, line) = per_rank_output(Path::new("out/run.h5"), env(&vars)).unwrap();
        assert_eq!(path, Path::new("out/run.rank2.h5"));
        assert!(line.contains("OMPI_COMM_WORLD_RANK=2 of 4"), "{line}");
    }
}

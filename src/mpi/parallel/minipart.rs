//! A rank's serial data in a file written in parallel: its auxiliary groups (perf totals,
//! LIKWID results, line profiles: `rank<N>/...`) and the region names its polls refer to
//! (`scope_profiler_rs/rank<N>/region_names`). They are small (per region, not per call) and
//! variable-length, so rank 0 writes them all in its serial pass.
//!
//! A rank that has any writes them with the single-rank writer into a small private HDF5 file
//! (its "mini part": `rank0/...` and `region_names`), sends its bytes to rank 0 and removes
//! it; rank 0 keeps the bytes as a temporary file beside its output, copies the groups under
//! that rank's names and removes it. Rank 0 writes its own directly. Rank 0 holds one mini
//! part at a time; a rank without any sends nothing but an empty message.

use std::path::Path;

use ::hdf5::File;

use crate::output::hdf5::aux::write_aux;
use crate::output::hdf5::lanes::OWN_GROUP;
use crate::output::hdf5::lines::write_lines;
use crate::output::hdf5::{create_temp, Ctx};
use crate::output::model::PhaseData;
use crate::Error;

/// Whether `data` has anything for a mini part.
fn has_any(data: &PhaseData) -> bool {
    data.perf.as_ref().is_some_and(|p| !p.regions.is_empty())
        || data.likwid.is_some()
        || !data.extra.line_profiles.is_empty()
        || !data.polls.is_empty()
}

/// Writes the auxiliary groups under `rank0` and, with polls, the region names as the dataset
/// `names_at/region_names` (`names_at` exists).
fn write_serial(ctx: &Ctx<'_>, f: &File, data: &PhaseData, names_at: &str) -> Result<(), Error> {
    write_aux(f, ctx.path, data)?;
    write_lines(ctx, f, &data.extra)?;
    if !data.polls.is_empty() {
        let g = ctx.h5(names_at, f.group(names_at))?;
        ctx.strings(
            &g,
            "region_names",
            data.region_names.iter().map(String::as_str),
        )?;
    }
    Ok(())
}

/// Rank 0's own serial data, into the file it creates (whose `scope_profiler_rs/rank0` exists
/// when it has polls).
pub(super) fn write_own(ctx: &Ctx<'_>, f: &File, data: &PhaseData) -> Result<(), Error> {
    write_serial(ctx, f, data, &format!("{OWN_GROUP}/rank0"))
}

/// This rank's mini part as bytes (empty when it has nothing), written beside `target`.
///
/// # Errors
/// The private file cannot be written or read back.
pub(super) fn build(target: &Path, data: &PhaseData) -> Result<Vec<u8>, Error> {
    if !has_any(data) {
        return Ok(Vec::new());
    }
    let (tmp, file) = create_temp(target)?;
    let ctx = Ctx { path: target };
    let written = write_serial(&ctx, &file, data, "/")
        .and_then(|()| ctx.h5("the rank's auxiliary part (closing)", file.close()))
        .and_then(|()| {
            std::fs::read(&tmp).map_err(|source| Error::Io {
                context: "reading the rank's auxiliary part back".into(),
                path: tmp.clone(),
                source,
            })
        });
    let _ = std::fs::remove_file(&tmp);
    written
}

/// Rank 0: copies rank `rank`'s mini part (`bytes`, from [`build`]) into `f`.
///
/// # Errors
/// The bytes cannot be kept in a temporary file or are not such a part; HDF5 fails.
pub(super) fn add(ctx: &Ctx<'_>, f: &File, rank: u32, bytes: &[u8]) -> Result<(), Error> {
    if bytes.is_empty() {
        return Ok(());
    }
    let copy = crate::mpi::part_name(ctx.path, rank, "aux");
    let _ = std::fs::remove_file(&copy);
    let kept = crate::output::files::create_new(&copy, 0o600)
        .and_then(|mut file| std::io::Write::write_all(&mut file, bytes));
    let result = kept
        .map_err(|source| Error::Io {
            context: format!("keeping rank {rank}'s auxiliary part"),
            path: copy.clone(),
            source,
        })
        .and_then(|()| copy_groups(ctx, f, rank, &copy));
    let _ = std::fs::remove_file(&copy);
    result
}

fn copy_groups(ctx: &Ctx<'_>, f: &File, rank: u32, copy: &Path) -> Result<(), Error> {
    let src = ctx.h5(
        &format!("rank {rank}'s auxiliary part (opening it)"),
        File::with_options()
            .with_fapl(|p| p.file_locking(false))
            .open(copy),
    )?;
    if let Ok(g) = src.group("rank0") {
        let name = format!("rank{rank}");
        ctx.h5(&name, g.copy_to(f, &name))?;
    }
    if let Ok(ds) = src.dataset("region_names") {
        let at = format!("{OWN_GROUP}/rank{rank}");
        let g = ctx.h5(&at, f.group(&at))?;
        ctx.h5(
            &format!("{at}/region_names"),
            ds.copy_to(&g, "region_names"),
        )?;
    }
    Ok(())
}

//! A rank's auxiliary groups in a file written in parallel (perf totals, LIKWID results, line
//! profiles: `rank<N>/...`). They are small (per region, not per call), made of
//! variable-length strings and attributes, and only there when a sink or line timing is on,
//! so rank 0 writes them all in its serial pass.
//!
//! A rank that has any writes them with the single-rank writer into a small private HDF5 file
//! (its "mini part", `rank0/...`), sends its bytes to rank 0 and removes it; rank 0 keeps the
//! bytes as a temporary file beside its output, copies the group under that rank's name and
//! removes it. Rank 0 writes its own directly. Rank 0 holds one mini part at a time; a rank
//! without any sends nothing but an empty message.

use std::path::Path;

use ::hdf5::File;

use crate::data::rows::PhaseData;
use crate::output::hdf5::aux::write_aux;
use crate::output::hdf5::lines::write_lines;
use crate::output::hdf5::{create_temp, Ctx};
use crate::Error;

/// Whether `data` has anything for a mini part.
fn has_any(data: &PhaseData) -> bool {
    data.perf.as_ref().is_some_and(|p| !p.regions.is_empty())
        || data.likwid.is_some()
        || !data.extra.line_profiles.is_empty()
}

/// Writes the auxiliary groups under `rank0` of `f`: rank 0's own into the file it creates,
/// another rank's into its mini part.
pub(super) fn write_own(ctx: &Ctx<'_>, f: &File, data: &PhaseData) -> Result<(), Error> {
    write_aux(f, ctx.path, data)?;
    write_lines(ctx, f, &data.extra)
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
    let written = write_own(&ctx, &file, data)
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
    let kept = crate::data::files::create_new(&copy, 0o600)
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
    let name = format!("rank{rank}");
    let g = ctx.h5(&format!("{name} (in its part)"), src.group("rank0"))?;
    ctx.h5(&name, g.copy_to(f, &name))
}

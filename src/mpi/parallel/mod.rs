//! The parallel write of a multi-rank phase (feature `mpio`): every rank writes its own rows
//! of the one file through MPI-IO (parallel HDF5); no rank holds or relays another's calls.
//!
//! One phase, collectively, on every rank:
//! 1. **Sound?** An all-reduce: a rank whose phase failed makes every rank return an error
//!    naming it (nothing is created).
//! 2. **Layout** ([`crate::mpi::layout`]): an exclusive scan and a sum of each rank's row
//!    counts give its [`Place`]; a max-reduce the optional event columns and string widths of
//!    the file ([`shape::Union`]). Rank 0 gathers every rank's region names, host name and poll
//!    counts ([`shape::Info`]), unifies the names and broadcasts the table; each rank maps its
//!    rows to the unified ids. Each rank gets its clock offset (scatter) and rank 0's origin.
//! 3. **Skeleton** ([`skeleton`]): rank 0 alone, with serial HDF5, creates the temporary file
//!    exclusively beside the target, writes everything that is not a rank's rows (metadata,
//!    names, every rank's auxiliary groups from its [`minipart`]) and every dataset at its final
//!    size, allocated and never filled, and closes it. Every rank checks that it sees the file
//!    (the output must be on a file system the ranks share).
//! 4. **Rows** ([`slices`]): every rank opens the file with the MPI-IO driver (collective),
//!    writes its rows with independent transfers and closes it (collective). Nothing but raw
//!    data is written in this step, so a rank whose writes fail (a full disk) leaves no other
//!    waiting: an all-reduce then makes every rank return an error naming it, and rank 0
//!    removes the file.
//! 5. **Publish** ([`publish`]): rank 0 renames the file to the target (a late name is tried
//!    without writing again) and broadcasts the outcome.
//!
//! Independent transfers rather than collective ones: each rank's data is one contiguous
//! range per column, which it writes itself in as many pieces as its streaming pass needs
//! (the number of writes differs from rank to rank); collective buffering would have
//! aggregator ranks write other ranks' data (on one node, possibly one rank for all) and
//! every rank make the same number of write calls.

mod fixed;
mod minipart;
mod shape;
mod skeleton;
mod slices;

use std::path::{Path, PathBuf};

use ::hdf5::File;
use ::mpi::topology::SimpleCommunicator;
use ::mpi::traits::AsRaw;

use self::shape::{Info, Shape, Union};
use self::skeleton::{Plan, Skeleton};
use super::layout::{decode_strs, encode_strs, Counts, Names, Place};
use super::relay::{mpi_err, Mpi, Outcome};
use crate::data::rows::PhaseData;
use crate::output::events::Scan;
use crate::output::hdf5::{Ctx, WriteOptions};
use crate::Error;

/// The most failing ranks named in an error.
const NAMED_FAILURES: usize = 8;

/// Writes this phase's file with every rank (collective); returns the temporary file, not yet
/// published (see [`publish`]). `phase`: this rank's phase, or why it has none; `target`: where
/// it will be published (the temporary file goes beside it).
///
/// # Errors
/// Any rank's failure, the same error on every rank.
pub(crate) fn write(
    m: &Mpi,
    phase: Result<(&PhaseData, &Scan), String>,
    target: &Path,
    opts: &WriteOptions,
    offsets: &[(i64, i64)],
) -> Result<PathBuf, Error> {
    let sound = u64::from(phase.is_ok());
    let (data, scan) = match (m.all_min(sound), phase) {
        (1, Ok(p)) => p,
        (_, phase) => return Err(failure(m, phase.err().as_deref(), None)),
    };
    let mut local: Result<(), String> = Ok(());
    let shape = Shape::of(data, scan);
    let (first, total) = m.exscan(&shape.counts.to_array());
    let (first, total) = (counts(&first), counts(&total));
    let union = Union::of_maxes(&m.all_max(&shape.maxes()));
    let place = Place::new(first, shape.counts, total).unwrap_or_else(|e| {
        local = Err(e);
        Place {
            first,
            mine: Counts::default(),
            total,
        }
    });
    let gathered = gather_infos(m, data);
    let names = Names::of_table(decode_strs(&m.bcast_bytes(gathered.table)).unwrap_or_default());
    let ids: Vec<u32> = data
        .regions
        .iter()
        .map(|r| names.id(&r.name).unwrap_or(u32::MAX))
        .collect();
    if ids.contains(&u32::MAX) {
        local = local.and(Err("a region name is missing from the unified table".into()));
    }
    let clock_offset = m.scatter_i64(&offsets.iter().map(|o| o.0).collect::<Vec<_>>());
    let origin = m.bcast_i64(data.start_time_ns);
    let plan = Plan {
        data,
        total,
        union,
        names: &names.names,
        polls: &gathered.polls,
        nodes: gathered.nodes,
        offsets,
    };
    let tmp = create(m, target, &plan, gathered.error, &mut local);
    if let Some(tmp) = &tmp {
        let seen = std::fs::metadata(tmp).map(|md| md.len());
        let size = m.bcast_i64(seen.as_ref().map_or(-1, |&n| n as i64));
        if seen.ok().map(|n| n as i64) != Some(size) {
            local = local.and(Err(format!(
                "it does not see {} as rank 0 wrote it: the output must be on a file system \
                 every rank shares (or use Builder::mpi_relay)",
                tmp.display()
            )));
        }
    }
    checkpoint(m, &local, tmp.as_deref())?;
    let Some(tmp) = tmp else {
        // Only when rank 0 failed, which the checkpoint reported.
        return Err(mpi_err("publishing the multi-rank profile", "no file"));
    };
    let mine = slices::Mine {
        data,
        scan,
        rank: m.rank,
        place,
        ids,
        union,
        clock_offset,
        origin,
    };
    let written = write_rows(&tmp, target, &mine).and_then(|()| sync(&tmp, opts.durable));
    checkpoint(m, &written, Some(&tmp))?;
    Ok(tmp)
}

/// Publishes the file [`write`] left at `tmp` as `candidate` (rank 0 renames it); every rank
/// gets the same outcome (`AlreadyExists` as [`Error::OutputPath`], so callers can try the
/// next name, and the file stays for that).
///
/// # Errors
/// The rename fails on rank 0 (the same error on every rank).
pub(crate) fn publish(
    m: &Mpi,
    tmp: &Path,
    candidate: &Path,
    opts: &WriteOptions,
) -> Result<PathBuf, Error> {
    let outcome = if m.rank == 0 {
        let moded = match opts.mode {
            crate::output::hdf5::DEFAULT_MODE => Ok(()),
            mode => crate::data::files::set_mode(tmp, mode),
        };
        let renamed = moded.and_then(|()| {
            if opts.no_replace {
                crate::data::files::rename_noreplace(tmp, candidate)
            } else {
                std::fs::rename(tmp, candidate)
            }
        });
        let synced = renamed.and_then(|()| match opts.durable {
            true => crate::data::files::sync_dir(candidate),
            false => Ok(()),
        });
        match synced {
            Ok(()) => Outcome::Published(candidate.to_path_buf()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Outcome::Exists,
            Err(e) => Outcome::Failed(format!("publishing {}: {e}", candidate.display())),
        }
    } else {
        Outcome::Pending
    };
    m.broadcast(outcome, candidate)
}

fn counts(v: &[u64]) -> Counts {
    let at = |i: usize| v.get(i).copied().unwrap_or(0);
    Counts::from_array([at(0), at(1), at(2), at(3)])
}

/// What rank 0 learned from every rank's [`Info`] (empty elsewhere).
#[derive(Default)]
struct Gathered {
    /// The unified names, encoded (rank 0).
    table: Vec<u8>,
    polls: Vec<shape::Polls>,
    nodes: usize,
    /// A rank's info could not be read.
    error: Option<String>,
}

/// Gathers every rank's [`Info`] on rank 0 (collective).
fn gather_infos(m: &Mpi, data: &PhaseData) -> Gathered {
    let mine = Info::of(data, crate::output::hdf5::hostname()).encode();
    let mut g = Gathered::default();
    let mut names = Names::default();
    let mut hosts = std::collections::HashSet::new();
    m.gather_each(&mine, &mut |k, bytes| match Info::decode(&bytes) {
        Some(info) => {
            names.add(info.names.iter().map(String::as_str));
            hosts.insert(info.hostname);
            g.polls.push(info.polls);
        }
        None => {
            g.error
                .get_or_insert(format!("rank {k}'s layout message is cut short"));
            g.polls.push(shape::Polls::default());
        }
    });
    g.table = encode_strs(names.names.iter().map(String::as_str));
    g.nodes = hosts.len();
    g
}

/// Rank 0 creates the skeleton and adds every rank's mini part; every rank gets the
/// temporary file's path (`None` when rank 0 failed: its `local` says why).
fn create(
    m: &Mpi,
    target: &Path,
    plan: &Plan<'_>,
    gather_error: Option<String>,
    local: &mut Result<(), String>,
) -> Option<PathBuf> {
    // Rank 0 writes its own directly (see `skeleton`).
    let part = match m.rank {
        0 => Ok(Vec::new()),
        _ => minipart::build(target, plan.data),
    };
    let part = part.unwrap_or_else(|e| {
        *local = local.clone().and(Err(e.to_string()));
        Vec::new()
    });
    let mut sk = if m.rank != 0 {
        None
    } else if let Some(e) = gather_error {
        *local = local.clone().and(Err(e));
        None
    } else {
        Skeleton::create(target, plan)
            .map_err(|e| *local = local.clone().and(Err(e.to_string())))
            .ok()
    };
    m.gather_each(&part, &mut |k, bytes| {
        if let Some(s) = &sk {
            if let Err(e) = s.add_rank(k, &bytes) {
                *local = local.clone().and(Err(e.to_string()));
                sk = None;
            }
        }
    });
    let closed = sk.map(Skeleton::close).transpose().unwrap_or_else(|e| {
        *local = local.clone().and(Err(e.to_string()));
        None
    });
    let path = closed.map(|p| p.to_string_lossy().into_owned());
    let shared = m.bcast_bytes(path.unwrap_or_default().into_bytes());
    (!shared.is_empty()).then(|| PathBuf::from(String::from_utf8_lossy(&shared).into_owned()))
}

/// Every rank opens `tmp` through MPI-IO, writes its rows and closes it (collective).
fn write_rows(tmp: &Path, target: &Path, mine: &slices::Mine<'_>) -> Result<(), String> {
    let ctx = Ctx { path: target };
    let world = SimpleCommunicator::world();
    let file = ctx.h5(
        "the file (opening it with MPI-IO)",
        File::with_options()
            .with_fapl(|p| p.mpio(world.as_raw(), None).file_locking(false))
            .open_rw(tmp),
    );
    let file = file.map_err(|e| e.to_string())?;
    let written = slices::write(&ctx, &file, mine);
    let closed = ctx.h5("the file (closing it)", file.close());
    written.and(closed).map_err(|e| e.to_string())
}

/// With `durable`, flushes what this node wrote of `tmp` to its disk.
fn sync(tmp: &Path, durable: bool) -> Result<(), String> {
    if !durable {
        return Ok(());
    }
    crate::data::files::open_nofollow(tmp)
        .and_then(|f| f.sync_all())
        .map_err(|e| format!("syncing {}: {e}", tmp.display()))
}

/// Collective: `Ok` when every rank's `local` is; else every rank returns the same error
/// naming the failing ranks, and rank 0 removes `tmp`.
fn checkpoint(m: &Mpi, local: &Result<(), String>, tmp: Option<&Path>) -> Result<(), Error> {
    if m.all_min(u64::from(local.is_ok())) == 1 {
        return Ok(());
    }
    Err(failure(m, local.as_ref().err().map(String::as_str), tmp))
}

/// Collective: every rank's reason (if any) goes to rank 0, which names the failing ranks
/// and removes `tmp`; every rank gets that error.
fn failure(m: &Mpi, why: Option<&str>, tmp: Option<&Path>) -> Error {
    let mut text = String::new();
    let mut failed = 0;
    m.gather_each(why.unwrap_or("").as_bytes(), &mut |k, bytes| {
        if bytes.is_empty() {
            return;
        }
        failed += 1;
        if failed <= NAMED_FAILURES {
            if !text.is_empty() {
                text.push_str("; ");
            }
            text.push_str(&format!("rank {k}: {}", String::from_utf8_lossy(&bytes)));
        }
    });
    if failed > NAMED_FAILURES {
        text.push_str(&format!("; and {} more rank(s)", failed - NAMED_FAILURES));
    }
    if m.rank == 0 {
        if let Some(tmp) = tmp {
            let _ = std::fs::remove_file(tmp);
        }
    }
    let text = m.bcast_bytes(text.into_bytes());
    mpi_err(
        "publishing the multi-rank profile",
        String::from_utf8_lossy(&text).into_owned(),
    )
}

//! Multi-rank runs: every MPI rank's calls in one schema-3 file.
//!
//! - [`merge`]: one multi-rank file from single-rank files (the core of everything below, and
//!   [`merge_ranks`](crate::merge_ranks) for files written separately).
//! - `launcher` (always): under an MPI launcher without the `mpi` feature, each rank writes
//!   `<stem>.rank<N>.h5`.
//! - `relay` (feature `mpi`): with [`Builder::mpi`](crate::Builder::mpi), each finalize is
//!   collective; every rank writes its phase to a private part file, rank 0 pulls the parts
//!   one rank at a time in bounded messages (a token relay) and appends them to the one
//!   output, shifting each rank's times onto rank 0's clock.
//! - `parallel` (feature `mpio`): instead, every rank writes its own rows of the one file
//!   through MPI-IO (parallel HDF5), at places from a scan of the ranks' row counts
//!   ([`layout`]); `comm` holds the collectives both use beyond the relay's messages.
//!
//! Which way a phase goes ([`MpiWrite`]) is agreed by all ranks at its first write: the
//! parallel write with `mpio`, unless [`Builder::mpi_relay`](crate::Builder::mpi_relay) or
//! gzip (HDF5 1.10 writes compressed datasets only collectively) asks for the relay.

#[cfg(feature = "mpi")]
mod comm;
#[cfg(any(feature = "mpio", test))]
pub(crate) mod layout;
pub(crate) mod merge;
#[cfg(feature = "mpio")]
mod parallel;
#[cfg(feature = "mpi")]
pub(crate) mod relay;

use std::path::{Path, PathBuf};

pub(crate) use crate::data::launcher::{self, rank_path};
#[cfg(feature = "mpi")]
use crate::data::spread;
pub(crate) use crate::data::spread::render_spread;
#[cfg(feature = "mpi")]
pub(crate) use crate::data::spread::MPI_WRITE_KEY;
pub use crate::data::spread::{MpiWrite, RankSpread};

use crate::data::rows::PhaseData;
use crate::data::scan::Scan;
use crate::recording::shared::Shared;

/// A private file of `rank` beside `target`: `.<name>.rank<N>.<pid>.<kind>`.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(crate) fn part_name(target: &Path, rank: u32, kind: &str) -> PathBuf {
    let name = target.file_name().unwrap_or_default().to_string_lossy();
    target.with_file_name(format!(".{name}.rank{rank}.{}.{kind}", std::process::id()))
}

/// How a phase is finalized across processes, chosen once per phase from the session's MPI
/// handle: this process alone (its own file), or one rank of a [`Builder::mpi`](crate::Builder::mpi)
/// run, where every step that decides is collective and the ranks publish one file (in
/// parallel through MPI-IO, or through the relay; see [`PhaseWriter`]). Every MPI question a
/// finalize asks goes through it.
#[derive(Clone, Copy)]
pub(crate) struct Publisher<'a> {
    /// This rank's MPI (`None`: a single process).
    #[cfg(feature = "mpi")]
    ranks: Option<&'a relay::Mpi>,
    _handle: std::marker::PhantomData<&'a Handle>,
}

impl<'a> Publisher<'a> {
    /// The publisher of a session whose MPI is `handle`.
    pub(crate) fn of(handle: &'a Handle) -> Publisher<'a> {
        #[cfg(not(feature = "mpi"))]
        let () = handle;
        Publisher {
            #[cfg(feature = "mpi")]
            ranks: handle.as_ref(),
            _handle: std::marker::PhantomData,
        }
    }

    /// `(rank, size)` when [`Builder::mpi`](crate::Builder::mpi) is on.
    pub(crate) fn rank(&self) -> Option<(u32, u32)> {
        #[cfg(feature = "mpi")]
        if let Some(m) = self.ranks {
            return Some((m.rank, m.size));
        }
        None
    }

    /// Whether the steps are collective (every rank must make the same calls).
    pub(crate) fn collective(&self) -> bool {
        self.rank().is_some()
    }

    /// Where this rank's spool lives: beside its own `<stem>.rank<N>.h5` in a multi-rank run
    /// (ranks share the output path), else beside the output.
    pub(crate) fn spool_base(&self, output: &Path) -> PathBuf {
        match self.rank() {
            Some((rank, _)) => rank_path(output, rank),
            None => output.to_path_buf(),
        }
    }

    /// The sum of `calls` over ranks (collective with `mpi`; `calls` itself without), so that
    /// every rank takes the same early return in a finalize.
    pub(crate) fn sum_calls(&self, calls: u64) -> u64 {
        #[cfg(feature = "mpi")]
        if let Some(m) = self.ranks {
            return m.sum(calls);
        }
        calls
    }

    /// Whether this process prints the summary (rank 0 of a multi-rank run, or any other run).
    pub(crate) fn prints_summary(&self) -> bool {
        self.rank().is_none_or(|(rank, _)| rank == 0)
    }

    /// Collective: rank 0's report gets every region's spread over ranks (nothing elsewhere).
    pub(crate) fn gather_spread(&self, _report: &mut crate::Report) {
        #[cfg(feature = "mpi")]
        if let Some(m) = self.ranks {
            let mine = spread::encode(_report.regions());
            let all = m.gather_bytes(&mine);
            if m.rank == 0 {
                _report.ranks = spread::combine(&all);
            }
        }
    }

    /// The writer for one phase whose configured target is `target`; `ok`: this rank's phase
    /// is sound (else, multi-rank, it tells rank 0 it has no part); `staged`: the file begun
    /// with the lane tables (single-rank).
    pub(crate) fn writer(
        self,
        shared: &'a Shared,
        target: &'a Path,
        (data, scan): (&'a PhaseData, &'a Scan),
        ok: bool,
        staged: Option<crate::output::hdf5::staged::Staged>,
    ) -> PhaseWriter<'a> {
        PhaseWriter {
            publisher: self,
            shared,
            target,
            data,
            scan,
            ok,
            staged,
            part: None,
            offsets: None,
            how: None,
            #[cfg(feature = "mpio")]
            unpublished: None,
        }
    }
}

/// Ends MPI at the guard's drop if `build()` started it.
pub(crate) fn finish(_handle: &Handle) {
    #[cfg(feature = "mpi")]
    if let Some(m) = _handle {
        m.finish();
    }
}

/// The rank of a handle (`None` without `Builder::mpi`).
#[cfg_attr(not(feature = "prometheus"), allow(dead_code))]
pub(crate) fn handle_rank(_handle: &Handle) -> Option<u32> {
    #[cfg(feature = "mpi")]
    return _handle.as_ref().map(|m| m.rank);
    #[cfg(not(feature = "mpi"))]
    None
}

/// This rank's MPI after `build()` (nothing without the feature).
#[cfg(feature = "mpi")]
pub(crate) type Handle = Option<relay::Mpi>;
/// This rank's MPI after `build()` (nothing without the feature).
#[cfg(not(feature = "mpi"))]
pub(crate) type Handle = ();

/// At `build()`: starts or joins MPI for [`Builder::mpi`](crate::Builder::mpi); without it,
/// gives a rank started by an MPI launcher its own output file.
///
/// # Errors
/// `mpi(true)` without the feature, with rotation or the aggregate mode; MPI fails to start.
pub(crate) fn setup(config: &mut crate::config::Config) -> Result<Handle, crate::Error> {
    use crate::{Error, Mode};
    if config.mpi {
        #[cfg(not(feature = "mpi"))]
        return Err(Error::FeatureDisabled {
            option: "mpi",
            feature: "mpi",
        });
        #[cfg(feature = "mpi")]
        {
            let conflict = if config.rotate_every.is_some() {
                Some("rotate_every (ranks would rotate at different moments)")
            } else if config.mode == Mode::Aggregate {
                Some("Mode::Aggregate (its files hold no per-call rows to merge)")
            } else {
                None
            };
            if let Some(c) = conflict {
                return Err(Error::InvalidOption {
                    option: "mpi",
                    reason: format!("cannot be combined with {c}"),
                });
            }
            return relay::Mpi::init().map(Some);
        }
    }
    if config.mode != Mode::Disabled {
        if let Some(output) = &config.output {
            if let Some((path, line)) = launcher::per_rank_output(output, |k| std::env::var(k).ok())
            {
                eprintln!("{line}");
                config.output = Some(path);
            }
        }
    }
    #[cfg(feature = "mpi")]
    return Ok(None);
    #[cfg(not(feature = "mpi"))]
    Ok(())
}

/// Writes one phase's file: directly, or (multi-rank) through this rank's part file and the
/// collective relay. Removes the part file when dropped.
pub(crate) struct PhaseWriter<'a> {
    publisher: Publisher<'a>,
    /// The configuration and the clock (multi-rank writes).
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    shared: &'a Shared,
    target: &'a Path,
    data: &'a PhaseData,
    scan: &'a Scan,
    ok: bool,
    /// The file begun before the calls were read back (single-rank only), for the first write.
    staged: Option<crate::output::hdf5::staged::Staged>,
    /// This rank's part file, once written (or why there is none).
    part: Option<Result<PathBuf, String>>,
    /// Rank 0: every rank's clock offset, once measured.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    offsets: Option<Vec<(i64, i64)>>,
    /// How the ranks agreed to write this phase, once they did.
    how: Option<MpiWrite>,
    /// The parallel file written and not yet published (every rank holds its path).
    #[cfg(feature = "mpio")]
    unpublished: Option<PathBuf>,
}

impl PhaseWriter<'_> {
    /// Whether writes are collective (every rank must make the same calls).
    pub(crate) fn collective(&self) -> bool {
        self.publisher.collective()
    }

    /// How this phase's file was written, once it was (multi-rank only).
    pub(crate) fn how(&self) -> Option<MpiWrite> {
        self.how
    }

    /// Writes the phase at `candidate`; returns where it was published and its
    /// `(device, inode)` (`(0, 0)` where this process did not publish it).
    ///
    /// # Errors
    /// As `write_scanned`; multi-rank, any rank's failure (the same error on every rank).
    pub(crate) fn write(
        &mut self,
        candidate: &Path,
        opts: &crate::output::hdf5::WriteOptions,
    ) -> Result<(PathBuf, (u64, u64)), crate::Error> {
        #[cfg(feature = "mpi")]
        if let Some(m) = self.publisher.ranks {
            let how = *self.how.get_or_insert_with(|| agree(m, self.shared));
            let clock = self.shared.clock;
            self.offsets
                .get_or_insert_with(|| m.clock_offsets(&|| clock.now_ns()));
            let published = match how {
                #[cfg(feature = "mpio")]
                MpiWrite::Parallel => self.write_parallel(m, candidate, opts)?,
                _ => self.write_relay(m, candidate, opts)?,
            };
            let id = match m.rank {
                0 => crate::data::files::identity(&published).map_or((0, 0), |(d, i, _)| (d, i)),
                _ => (0, 0),
            };
            return Ok((published, id));
        }
        let _ = (self.ok, self.target);
        crate::output::hdf5::write_scanned(
            candidate,
            self.data,
            self.scan,
            opts,
            self.staged.take(),
        )
        .map(|id| (candidate.to_path_buf(), id))
    }

    /// The relay: this rank's part file (written once), then the collective merge.
    #[cfg(feature = "mpi")]
    fn write_relay(
        &mut self,
        m: &relay::Mpi,
        candidate: &Path,
        opts: &crate::output::hdf5::WriteOptions,
    ) -> Result<PathBuf, crate::Error> {
        if self.part.is_none() {
            self.part = Some(if self.ok {
                let p = part_name(self.target, m.rank, "part");
                let part_opts = crate::output::hdf5::WriteOptions {
                    no_replace: false,
                    ..*opts
                };
                crate::output::hdf5::write_scanned(&p, self.data, self.scan, &part_opts, None)
                    .map(|_| p)
                    .map_err(|e| e.to_string())
            } else {
                Err("its phase failed (see that rank's own error)".into())
            });
        }
        let part = self.part.as_ref().map_or(Err(String::new()), Clone::clone);
        let offsets = self.offsets.as_deref().unwrap_or_default();
        m.publish(&part, candidate, opts, offsets)
    }

    /// The parallel write (once), then its publication at `candidate`; with the test hook
    /// [`Builder::__mpi_also_relay`](crate::Builder::__mpi_also_relay), the relay then
    /// publishes the same phase there too.
    #[cfg(feature = "mpio")]
    fn write_parallel(
        &mut self,
        m: &relay::Mpi,
        candidate: &Path,
        opts: &crate::output::hdf5::WriteOptions,
    ) -> Result<PathBuf, crate::Error> {
        if self.unpublished.is_none() {
            let phase = match self.ok {
                true => Ok((self.data, self.scan)),
                false => Err("its phase failed (see that rank's own error)".to_string()),
            };
            let offsets = self.offsets.as_deref().unwrap_or_default();
            self.unpublished = Some(parallel::write(m, phase, candidate, opts, offsets)?);
        }
        let tmp = self.unpublished.clone().unwrap_or_default();
        let published = parallel::publish(m, &tmp, candidate, opts)?;
        self.unpublished = None;
        if let Some(also) = self.shared.config.mpi_also_relay.clone() {
            let relay_opts = crate::output::hdf5::WriteOptions {
                no_replace: false,
                ..*opts
            };
            self.write_relay(m, &also, &relay_opts)?;
        }
        Ok(published)
    }
}

/// The way every rank will write (collective): parallel only when every rank can and wants.
#[cfg(feature = "mpi")]
fn agree(m: &relay::Mpi, shared: &Shared) -> MpiWrite {
    let wants = cfg!(feature = "mpio") && !shared.config.mpi_relay && shared.config.gzip.is_none();
    match m.all_min(u64::from(wants)) {
        1 => MpiWrite::Parallel,
        _ => MpiWrite::Relay,
    }
}

impl Drop for PhaseWriter<'_> {
    fn drop(&mut self) {
        if let Some(Ok(p)) = &self.part {
            let _ = std::fs::remove_file(p);
        }
        #[cfg(feature = "mpio")]
        if let (Some(tmp), Some((0, _))) = (&self.unpublished, self.publisher.rank()) {
            let _ = std::fs::remove_file(tmp);
        }
    }
}

/// A rank whose finalize failed before the collective steps: it takes part in them as a rank
/// with no part (so the others get an error instead of waiting forever) and returns `e`.
/// `publishes`: the phase has a target file (the others then run the relay).
pub(crate) fn abandon(
    _publisher: Publisher<'_>,
    _shared: &Shared,
    e: crate::Error,
    _publishes: bool,
) -> crate::Error {
    #[cfg(feature = "mpi")]
    if let Some(m) = _publisher.ranks {
        // At least one call, so that no rank takes the "nothing new" early return.
        m.sum(1);
        if _shared.config.mode != crate::Mode::Disabled && _publishes {
            let how = agree(m, _shared);
            let clock = _shared.clock;
            let offsets = m.clock_offsets(&|| clock.now_ns());
            let why = format!("its finalize failed: {e}");
            let opts = crate::output::hdf5::WriteOptions::default();
            let target = _shared.config.output.clone().unwrap_or_default();
            match how {
                #[cfg(feature = "mpio")]
                MpiWrite::Parallel => {
                    let _ = parallel::write(m, Err(why), &target, &opts, &offsets);
                }
                _ => {
                    let _ = m.publish(&Err(why), &target, &opts, &offsets);
                }
            }
        }
        let _ = m.gather_bytes(&[]);
    }
    e
}

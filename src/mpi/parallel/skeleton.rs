//! Rank 0's serial pass, before the ranks write in parallel: the file with every object at
//! its final size and everything that is not a rank's rows.
//!
//! Rank 0 creates the temporary file exclusively beside the target (the single-rank writer's
//! [`create_temp`]) with plain (serial) HDF5 and writes: the root attributes; `metadata` (its
//! own, as the relay keeps rank 0's, with `mpi_size`, `num_nodes`, the clock offsets and
//! `mpi_write = "parallel"`); `region_table/names` (variable-length: only rank 0 writes them);
//! every rank's auxiliary groups ([`super::minipart`]); and every dataset the ranks fill, at
//! its full length, allocated now and never filled (the string ones fixed-length, see
//! [`super::fixed`]). It then closes the file. Since the
//! datasets are allocated and nothing else changes, the ranks' parallel writes touch only
//! raw data: no HDF5 metadata is written during the collective phase, so a rank whose writes
//! fail cannot leave another waiting in a metadata flush.

use std::path::{Path, PathBuf};

use ::hdf5::dataset::{AllocTime, FillTime};
use ::hdf5::{File, Group, H5Type};

use super::fixed;
use super::shape::{Polls, Union, STRING_COLS};
use crate::data::rows::PhaseData;
use crate::mpi::layout::Counts;
use crate::mpi::merge::lanes::{TASK_I64, THREAD_I64};
use crate::output::events::{column_names, SummaryRow};
use crate::output::hdf5::lanes::OWN_GROUP;
use crate::output::hdf5::{create_temp, write_metadata, Ctx};
use crate::Error;

/// What rank 0 knows of the whole file before it creates it.
pub(super) struct Plan<'a> {
    /// Rank 0's phase (metadata, auxiliary groups).
    pub data: &'a PhaseData,
    /// The tables' lengths.
    pub total: Counts,
    pub union: Union,
    /// `region_table/names`.
    pub names: &'a [String],
    /// Every rank's polls (one entry per rank).
    pub polls: &'a [Polls],
    /// Distinct host names.
    pub nodes: usize,
    /// Every rank's clock offset and its uncertainty.
    pub offsets: &'a [(i64, i64)],
}

/// The temporary file while rank 0 writes it; removed when dropped before [`close`](Self::close).
pub(super) struct Skeleton {
    target: PathBuf,
    tmp: PathBuf,
    file: Option<File>,
}

impl Skeleton {
    /// Creates the temporary file beside `target` and writes all but the ranks' rows and
    /// auxiliary groups.
    ///
    /// # Errors
    /// The file cannot be created, or HDF5 fails (the file is then removed).
    pub(super) fn create(target: &Path, plan: &Plan<'_>) -> Result<Skeleton, Error> {
        let (tmp, file) = create_temp(target)?;
        let sk = Skeleton {
            target: target.to_path_buf(),
            tmp,
            file: Some(file),
        };
        sk.write(plan)?;
        Ok(sk)
    }

    /// Error context: the target.
    pub(super) fn ctx(&self) -> Ctx<'_> {
        Ctx { path: &self.target }
    }

    fn write(&self, plan: &Plan<'_>) -> Result<(), Error> {
        let ctx = self.ctx();
        let Some(f) = &self.file else {
            return Ok(());
        };
        ctx.attr(f, "scope_profiler_schema", &3i64)?;
        ctx.attr_str(f, "storage_layout", "columnar")?;
        let meta = ctx.group(f, "metadata")?;
        write_metadata(&ctx, &meta, plan.data)?;
        for (name, v) in [
            ("mpi_size", plan.polls.len() as i64),
            ("num_nodes", plan.nodes.max(1) as i64),
        ] {
            ctx.h5(name, meta.delete_attr(name))?;
            ctx.attr(&meta, name, &v)?;
        }
        for (name, v) in crate::mpi::relay::offset_metadata(plan.offsets) {
            ctx.attr_text(&meta, name, &v)?;
        }
        ctx.attr_text(&meta, crate::mpi::MPI_WRITE_KEY, "parallel")?;
        let table = ctx.group(f, "region_table")?;
        ctx.strings(&table, "names", plan.names.iter().map(String::as_str))?;
        self.tables(f, plan)?;
        super::minipart::write_own(&ctx, f, plan.data)
    }

    /// Every dataset the ranks fill.
    fn tables(&self, f: &File, plan: &Plan<'_>) -> Result<(), Error> {
        let ctx = self.ctx();
        let (t, w) = (plan.total, plan.union.widths);
        let idx = ctx.group(f, "rank_region_index")?;
        num::<u32>(&ctx, &idx, "region_ids", t.rows)?;
        num::<u32>(&ctx, &idx, "ranks", t.rows)?;
        num::<u64>(&ctx, &idx, "event_offsets", t.rows)?;
        num::<u64>(&ctx, &idx, "event_counts", t.rows)?;
        num::<i64>(&ctx, &idx, "source_lines", t.rows)?;
        num::<i64>(&ctx, &idx, "exclusive_totals", t.rows)?;
        num::<SummaryRow>(&ctx, &idx, "summary_statistics", t.rows)?;
        let events = ctx.group(f, "events")?;
        for name in column_names(plan.union.want) {
            num::<i64>(&ctx, &events, name, t.events)?;
        }
        if t.threads > 0 {
            let g = ctx.group(f, "thread_table")?;
            num::<u32>(&ctx, &g, "ranks", t.threads)?;
            for (name, _) in THREAD_I64 {
                num::<i64>(&ctx, &g, name, t.threads)?;
            }
            num::<i8>(&ctx, &g, "daemon", t.threads)?;
        }
        if t.tasks > 0 {
            let g = ctx.group(f, "task_table")?;
            num::<u32>(&ctx, &g, "ranks", t.tasks)?;
            for (name, _) in TASK_I64 {
                num::<i64>(&ctx, &g, name, t.tasks)?;
            }
        }
        for (path, width) in STRING_COLS.iter().zip(w) {
            let (group, name) = path.split_once('/').unwrap_or(("", path));
            let rows = match group {
                "rank_region_index" => t.rows,
                "thread_table" => t.threads,
                _ => t.tasks,
            };
            if group == "rank_region_index" || rows > 0 {
                let g = ctx.h5(group, f.group(group))?;
                ctx.h5(path, fixed::create(&g, name, rows as usize, width))?;
            }
        }
        if plan.polls.iter().any(|p| p.rows > 0) {
            let own = ctx.group(f, OWN_GROUP)?;
            for (k, p) in plan.polls.iter().enumerate().filter(|(_, p)| p.rows > 0) {
                let at = format!("{OWN_GROUP}/rank{k}");
                let rank = ctx.h5(&at, own.create_group(&format!("rank{k}")))?;
                let names = fixed::create(&rank, "region_names", p.names as usize, w[7]);
                ctx.h5(&format!("{at}/region_names"), names)?;
                let polls = ctx.h5("polls", rank.create_group("polls"))?;
                num::<u32>(&ctx, &polls, "region_ids", p.rows)?;
                for (name, _) in crate::output::hdf5::lanes::POLL_COLS {
                    num::<i64>(&ctx, &polls, name, p.rows)?;
                }
            }
        }
        Ok(())
    }

    /// Adds rank `rank`'s auxiliary groups ([`super::minipart`]).
    ///
    /// # Errors
    /// The bytes are not the part that rank wrote, or HDF5 fails.
    pub(super) fn add_rank(&self, rank: u32, part: &[u8]) -> Result<(), Error> {
        match &self.file {
            Some(f) => super::minipart::add(&self.ctx(), f, rank, part),
            None => Ok(()),
        }
    }

    /// Closes the file and keeps it; returns its path.
    ///
    /// # Errors
    /// HDF5 fails to close it (it is then removed).
    pub(super) fn close(mut self) -> Result<PathBuf, Error> {
        let ctx = Ctx { path: &self.target };
        let closed = match self.file.take() {
            Some(f) => ctx.h5("the file (closing)", f.close()),
            None => Ok(()),
        };
        match closed {
            Ok(()) => Ok(std::mem::take(&mut self.tmp)),
            Err(e) => Err(e),
        }
    }
}

impl Drop for Skeleton {
    fn drop(&mut self) {
        drop(self.file.take());
        if !self.tmp.as_os_str().is_empty() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// A 1-D dataset of `n` elements, allocated now and never filled.
fn num<T: H5Type>(ctx: &Ctx<'_>, g: &Group, name: &str, n: u64) -> Result<(), Error> {
    let ds = g
        .new_dataset::<T>()
        .alloc_time(Some(AllocTime::Early))
        .fill_time(FillTime::Never)
        .shape(n as usize)
        .create(name);
    let context = format!("{}/{name}", g.name().trim_start_matches('/'));
    ctx.h5(&context, ds).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::rows::{Layout, RegionRow};
    use crate::mpi::merge::tests::{assert_offsets_kept, ten_thousand_offsets};

    /// Rank 0's serial pass for 10 000 ranks: the clock offsets stay whole in `metadata` (read
    /// back by this crate and the Python reader), and every dataset has its full length.
    #[test]
    fn ten_thousand_ranks_of_clock_offsets_fit_the_parallel_metadata() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("run.h5");
        let data = PhaseData::new(Layout::Columnar, vec![RegionRow::new("solve")]);
        let offsets = ten_thousand_offsets();
        let n = offsets.len();
        let names = ["solve".to_string()];
        let polls = vec![Polls::default(); n];
        let plan = Plan {
            data: &data,
            total: Counts::from_array([n as u64, 3 * n as u64, 0, 0]),
            union: Union {
                widths: [11, 0, 2, 0, 0, 0, 0, 0],
                ..Union::default()
            },
            names: &names,
            polls: &polls,
            nodes: 1,
            offsets: &offsets,
        };
        let tmp = Skeleton::create(&target, &plan).unwrap().close().unwrap();
        std::fs::rename(&tmp, &target).unwrap();
        let f = File::open(&target).unwrap();
        for (path, len) in [
            ("rank_region_index/ranks", n),
            ("rank_region_index/source_files", n),
            ("events/durations", 3 * n),
        ] {
            assert_eq!(f.dataset(path).unwrap().size(), len, "{path}");
        }
        let w = f.dataset("rank_region_index/source_files").unwrap();
        assert_eq!(w.dtype().unwrap().size(), 11);
        drop((w, f));
        assert_offsets_kept(&target, &offsets);
    }
}

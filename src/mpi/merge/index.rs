//! The merge's region index: one input's `rank_region_index` rows appended, region ids
//! unified by name, event offsets shifted past the earlier inputs' events, summaries moved
//! onto rank 0's clock.

use ::hdf5::types::VarLenUnicode;
use ::hdf5::{File, Group};

use super::{read_strings, read_vec, Cx, Input, Merger};
use crate::output::events::SummaryRow;
use crate::Error;

impl Merger {
    /// Index rows of one input; returns its event count.
    pub(super) fn append_index(
        &mut self,
        src: &File,
        input: &Input<'_>,
        base: usize,
        icx: &Cx<'_>,
    ) -> Result<usize, Error> {
        let idx = icx.h5("rank_region_index", src.group("rank_region_index"))?;
        let names = icx.h5("region_table", src.group("region_table"))?;
        let names = read_strings(&names, "names", icx)?;
        let region_ids = read_vec::<u32>(&idx, "region_ids", icx)?;
        let ranks = read_vec::<u32>(&idx, "ranks", icx)?;
        if ranks.iter().any(|&r| r != ranks[0]) {
            return Err(Error::Hdf5 {
                path: input.path.to_path_buf(),
                context: "rank_region_index/ranks".into(),
                message: "the file already holds several ranks; merge single-rank files".into(),
            });
        }
        let offsets = read_vec::<u64>(&idx, "event_offsets", icx)?;
        let counts = read_vec::<u64>(&idx, "event_counts", icx)?;
        let new_ids = self.unify_region_ids(&names, &region_ids, input)?;
        let shifted: Vec<u64> = offsets.iter().map(|o| o + base as u64).collect();
        self.append_index_rows(&idx, input.rank, &new_ids, &shifted, &counts, icx)?;
        self.append_summaries(&idx, input, &counts, icx)?;
        let ev = icx.h5("events", src.group("events"))?;
        let n_in = icx.h5("events/durations", ev.dataset("durations"))?.size();
        self.row_firsts = row_firsts(&offsets, &counts);
        Ok(n_in)
    }

    /// The output's region id of each of an input's `region_ids` (indexes into its `names`),
    /// a name new to the output getting the next id.
    fn unify_region_ids(
        &mut self,
        names: &[VarLenUnicode],
        region_ids: &[u32],
        input: &Input<'_>,
    ) -> Result<Vec<u32>, Error> {
        let mut new_ids = Vec::with_capacity(region_ids.len());
        for &id in region_ids {
            let name = names.get(id as usize).ok_or_else(|| Error::Hdf5 {
                path: input.path.to_path_buf(),
                context: "rank_region_index/region_ids".into(),
                message: format!("region id {id} is out of range"),
            })?;
            let next = self.names.len() as u32;
            let new = *self.ids.entry(name.as_str().to_owned()).or_insert(next);
            if new == next {
                self.names.push(name.as_str().to_owned());
            }
            new_ids.push(new);
        }
        Ok(new_ids)
    }

    /// Appends an input's index columns (`idx`) to the output's: its rows' unified region
    /// ids, `rank`, shifted event offsets and counts, and the columns copied as they are
    /// (`exclusive_totals` -1 where the input lacks it).
    fn append_index_rows(
        &mut self,
        idx: &Group,
        rank: u32,
        new_ids: &[u32],
        shifted: &[u64],
        counts: &[u64],
        icx: &Cx<'_>,
    ) -> Result<(), Error> {
        let r = new_ids.len();
        let cx = Cx { path: &self.target };
        let ix = &mut self.index;
        if let Some(c) = ix.get_mut("region_ids") {
            c.append(new_ids, &cx)?;
        }
        if let Some(c) = ix.get_mut("ranks") {
            c.append(&vec![rank; r], &cx)?;
        }
        if let Some(c) = ix.get_mut("event_offsets") {
            c.append(shifted, &cx)?;
        }
        if let Some(c) = ix.get_mut("event_counts") {
            c.append(counts, &cx)?;
        }
        if let Some(c) = ix.get_mut("source_lines") {
            c.append(&read_vec::<i64>(idx, "source_lines", icx)?, &cx)?;
        }
        let excl = if idx.link_exists("exclusive_totals") {
            read_vec::<i64>(idx, "exclusive_totals", icx)?
        } else {
            vec![-1; r]
        };
        if let Some(c) = ix.get_mut("exclusive_totals") {
            c.append(&excl, &cx)?;
        }
        for n in ["source_files", "source_texts", "tags"] {
            let v = read_strings(idx, n, icx)?;
            if let Some(c) = ix.get_mut(n) {
                c.append(&v, &cx)?;
            }
        }
        Ok(())
    }

    /// Appends an input's `summary_statistics` with its times moved onto rank 0's clock, or
    /// drops the output's column when the input has none.
    fn append_summaries(
        &mut self,
        idx: &Group,
        input: &Input<'_>,
        counts: &[u64],
        icx: &Cx<'_>,
    ) -> Result<(), Error> {
        if idx.link_exists("summary_statistics") {
            let mut s = read_vec::<SummaryRow>(idx, "summary_statistics", icx)?;
            for (row, &n) in s.iter_mut().zip(counts) {
                if n > 0 {
                    row.start_minimum -= input.clock_offset_ns;
                    row.end_maximum -= input.clock_offset_ns;
                }
            }
            if let Some(c) = self.summary.as_mut() {
                let cx = Cx { path: &self.target };
                c.append(&s, &cx)?;
            }
        } else {
            // An input without summaries: the column cannot be complete, so it goes.
            self.summary = None;
        }
        Ok(())
    }
}

/// The first event of each non-empty row (`offsets`, `counts`), sorted: the per-row starts to
/// shift in the chunked copy.
fn row_firsts(offsets: &[u64], counts: &[u64]) -> Vec<usize> {
    let mut firsts: Vec<usize> = offsets
        .iter()
        .zip(counts)
        .filter(|(_, &c)| c > 0)
        .map(|(&o, _)| o as usize)
        .collect();
    firsts.sort_unstable();
    firsts
}

//! The merge's lane tables (`thread_table`, `task_table`: rows concatenated, `ranks` set,
//! relative times re-based) and auxiliary groups (`rank0/...` renamed `rank<N>/...`).

use std::collections::HashMap;

use ::hdf5::types::VarLenUnicode;
use ::hdf5::{File, Group, H5Type};

use super::{Col, Cx, Merger, CHUNK};
use crate::Error;

/// Integer columns of `thread_table` (besides `ranks`, `daemon`, `name`); `true` = a time
/// relative to `start_time_ns` (re-based; -1 stays).
pub(crate) const THREAD_I64: [(&str, bool); 6] = [
    ("index", false),
    ("ident", false),
    ("native_id", false),
    ("start_ns", true),
    ("end_ns", true),
    ("cpu_ns", false),
];
/// Integer columns of `task_table` (besides `ranks`, `kind`, `name`, `coro_name`).
pub(crate) const TASK_I64: [(&str, bool); 7] = [
    ("index", false),
    ("thread_index", false),
    ("created_ns", true),
    ("done_ns", true),
    ("steps", false),
    ("running_ns", false),
    ("suspended_ns", false),
];

/// A lane table and its columns besides `ranks`.
struct LaneTable {
    name: &'static str,
    /// Integer columns; `true` = a time relative to `start_time_ns`.
    ints: &'static [(&'static str, bool)],
    /// String columns.
    strs: &'static [&'static str],
    /// `i8` columns.
    i8s: &'static [&'static str],
}

/// The lane tables, in the order they are merged.
const LANE_TABLES: [LaneTable; 2] = [
    LaneTable {
        name: "thread_table",
        ints: &THREAD_I64,
        strs: &["name"],
        i8s: &["daemon"],
    },
    LaneTable {
        name: "task_table",
        ints: &TASK_I64,
        strs: &["kind", "name", "coro_name"],
        i8s: &[],
    },
];

/// Rows `at..end` of column `name` of `g`.
fn read_rows<T: H5Type + Clone>(
    g: &Group,
    name: &str,
    at: usize,
    end: usize,
    cx: &Cx<'_>,
) -> Result<Vec<T>, Error> {
    let ds = cx.h5(name, g.dataset(name))?;
    Ok(cx.h5(name, ds.read_slice_1d::<T, _>(at..end))?.to_vec())
}

/// Creates `table`'s group in the output `file`, with its empty columns.
fn create_lane_cols(
    file: &File,
    table: &LaneTable,
    cx: &Cx<'_>,
) -> Result<HashMap<&'static str, Col>, Error> {
    let out = cx.h5(table.name, file.create_group(table.name))?;
    let mut cols = HashMap::new();
    cols.insert("ranks", Col::create::<u32>(&out, "ranks", cx)?);
    for (n, _) in table.ints {
        cols.insert(*n, Col::create::<i64>(&out, n, cx)?);
    }
    for n in table.strs {
        cols.insert(*n, Col::create::<VarLenUnicode>(&out, n, cx)?);
    }
    for n in table.i8s {
        cols.insert(*n, Col::create::<i8>(&out, n, cx)?);
    }
    Ok(cols)
}

/// Appends the rows of an input's `table` (group `g`) to the output's `cols`, in chunks of
/// [`CHUNK`] rows (a long-running service may have millions of tasks): `ranks` set to `rank`,
/// relative times shifted by `rel_shift` (-1 stays).
fn append_lane_rows(
    g: &Group,
    table: &LaneTable,
    cols: &mut HashMap<&'static str, Col>,
    rank: u32,
    rel_shift: i64,
    icx: &Cx<'_>,
    cx: &Cx<'_>,
) -> Result<(), Error> {
    let rows = icx.h5(table.name, g.dataset("index"))?.size();
    let mut at = 0;
    while at < rows {
        let end = (at + CHUNK).min(rows);
        for (n, relative) in table.ints {
            let mut v = read_rows::<i64>(g, n, at, end, icx)?;
            if *relative {
                v.iter_mut()
                    .filter(|t| **t != -1)
                    .for_each(|t| *t += rel_shift);
            }
            if let Some(c) = cols.get_mut(n) {
                c.append(&v, cx)?;
            }
        }
        for n in table.strs {
            let v = read_rows::<VarLenUnicode>(g, n, at, end, icx)?;
            if let Some(c) = cols.get_mut(n) {
                c.append(&v, cx)?;
            }
        }
        for n in table.i8s {
            let v = read_rows::<i8>(g, n, at, end, icx)?;
            if let Some(c) = cols.get_mut(n) {
                c.append(&v, cx)?;
            }
        }
        if let Some(c) = cols.get_mut("ranks") {
            c.append(&vec![rank; end - at], cx)?;
        }
        at = end;
    }
    Ok(())
}

impl Merger {
    /// `thread_table` and `task_table` rows of one input.
    pub(super) fn append_lanes(
        &mut self,
        src: &File,
        rank: u32,
        rel_shift: i64,
        icx: &Cx<'_>,
    ) -> Result<(), Error> {
        let cx = Cx { path: &self.target };
        for table in &LANE_TABLES {
            let Ok(g) = src.group(table.name) else {
                continue;
            };
            let slot = if table.name == "thread_table" {
                &mut self.threads
            } else {
                &mut self.tasks
            };
            if slot.is_none() {
                *slot = Some(create_lane_cols(&self.file, table, &cx)?);
            }
            let Some(cols) = slot.as_mut() else {
                continue;
            };
            append_lane_rows(&g, table, cols, rank, rel_shift, icx, &cx)?;
        }
        Ok(())
    }

    /// `rank0/...` becomes `rank<N>/...`; this crate's poll group goes under
    /// `scope_profiler_rs/rank<N>`.
    pub(super) fn copy_aux(&mut self, src: &File, rank: u32, icx: &Cx<'_>) -> Result<(), Error> {
        let cx = Cx { path: &self.target };
        if let Ok(g) = src.group("rank0") {
            icx.h5("rank0", g.copy_to(&self.file, &format!("rank{rank}")))?;
        }
        let own = crate::output::hdf5::lanes::OWN_GROUP;
        if let Ok(g) = src.group(own) {
            let out = match self.file.group(own) {
                Ok(o) => o,
                Err(_) => cx.h5(own, self.file.create_group(own))?,
            };
            icx.h5(own, g.copy_to(&out, &format!("rank{rank}")))?;
        }
        Ok(())
    }
}

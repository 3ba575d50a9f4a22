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
        for (table, ints, strs, i8s) in [
            (
                "thread_table",
                &THREAD_I64[..],
                &["name"][..],
                &["daemon"][..],
            ),
            (
                "task_table",
                &TASK_I64[..],
                &["kind", "name", "coro_name"][..],
                &[][..],
            ),
        ] {
            let Ok(g) = src.group(table) else {
                continue;
            };
            let slot = if table == "thread_table" {
                &mut self.threads
            } else {
                &mut self.tasks
            };
            if slot.is_none() {
                let out = cx.h5(table, self.file.create_group(table))?;
                let mut cols = HashMap::new();
                cols.insert("ranks", Col::create::<u32>(&out, "ranks", &cx)?);
                for (n, _) in ints {
                    cols.insert(*n, Col::create::<i64>(&out, n, &cx)?);
                }
                for n in strs {
                    cols.insert(*n, Col::create::<VarLenUnicode>(&out, n, &cx)?);
                }
                for n in i8s {
                    cols.insert(*n, Col::create::<i8>(&out, n, &cx)?);
                }
                *slot = Some(cols);
            }
            let Some(cols) = slot.as_mut() else {
                continue;
            };
            let rows = icx.h5(table, g.dataset("index"))?.size();
            // In chunks: a long-running service may have millions of tasks.
            let mut at = 0;
            while at < rows {
                let end = (at + CHUNK).min(rows);
                for (n, relative) in ints {
                    let mut v = read_rows::<i64>(&g, n, at, end, icx)?;
                    if *relative {
                        v.iter_mut()
                            .filter(|t| **t != -1)
                            .for_each(|t| *t += rel_shift);
                    }
                    if let Some(c) = cols.get_mut(n) {
                        c.append(&v, &cx)?;
                    }
                }
                for n in strs {
                    let v = read_rows::<VarLenUnicode>(&g, n, at, end, icx)?;
                    if let Some(c) = cols.get_mut(n) {
                        c.append(&v, &cx)?;
                    }
                }
                for n in i8s {
                    let v = read_rows::<i8>(&g, n, at, end, icx)?;
                    if let Some(c) = cols.get_mut(n) {
                        c.append(&v, &cx)?;
                    }
                }
                if let Some(c) = cols.get_mut("ranks") {
                    c.append(&vec![rank; end - at], &cx)?;
                }
                at = end;
            }
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

//! Merging single-rank profiles into one multi-rank schema-3 file (spec §1.5, §1.8, §1.9).
//!
//! A [`Merger`] creates the output beside its target and appends one input file at a time:
//! region names are unified (ids in order of first appearance), every index row gets its
//! rank in `ranks`, the event columns are copied in bounded chunks ([`CHUNK`] elements), the
//! lane tables are concatenated with their `ranks` column set, and the input's `rank0/...`
//! group (perf, LIKWID) becomes `rank<N>/...`. Optional event columns are the union over the
//! inputs; an input without one gets the column's sentinel (-1, 0 for `await_ns`).
//!
//! Times: `clock_offset_ns` of an input (its clock minus rank 0's) is subtracted from its
//! absolute times (the first `start_deltas` element of each row, `start_minimum` and
//! `end_maximum` of its summaries); its lane-table times, relative to its own
//! `metadata/start_time_ns`, are re-based onto the output's (rank 0's) origin. Its poll
//! records (this crate's own group) are kept as they are under `scope_profiler_rs/rank<N>`,
//! in that rank's clock.
//!
//! Memory: one chunk of one column at a time, plus the (small) index of one input.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use ::hdf5::types::VarLenUnicode;
use ::hdf5::{Dataset, File, Group, H5Type};

use crate::output::events::SummaryRow;
use crate::Error;

mod by_name;
mod index;
pub(crate) mod lanes;

pub use by_name::merge_ranks;
#[cfg(test)]
use by_name::rank_in_name;

/// Elements per copied chunk of an event column (8 MiB of `i64`).
pub(crate) const CHUNK: usize = 1 << 20;
/// Storage chunk of the output's resizable datasets.
const STORE_CHUNK: usize = 1 << 16;

/// The optional event columns and their "no value" sentinels.
const OPTIONAL_EVENTS: [(&str, i64); 6] = [
    ("call_ids", -1),
    ("parent_ids", -1),
    ("gpu_durations", -1),
    ("thread_ids", -1),
    ("task_ids", -1),
    ("await_ns", 0),
];

/// What [`crate::merge_ranks`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Merged {
    /// The published file.
    pub file: PathBuf,
    /// The rank of each input, in input order.
    pub ranks: Vec<u32>,
    /// Calls written, over all ranks.
    pub calls: u64,
}

/// One input of a merge.
pub(crate) struct Input<'a> {
    /// The single-rank profile.
    pub path: &'a Path,
    /// The rank its rows get.
    pub rank: u32,
    /// Its clock minus rank 0's, in ns.
    pub clock_offset_ns: i64,
}

/// An appendable 1-D dataset.
struct Col {
    ds: Dataset,
    len: usize,
}

impl Col {
    fn create<T: H5Type>(g: &Group, name: &str, ctx: &Cx<'_>) -> Result<Col, Error> {
        Col::create_packed::<T>(g, name, None, ctx)
    }

    /// With `gzip`, shuffled and deflated (the event columns, as the writer does).
    fn create_packed<T: H5Type>(
        g: &Group,
        name: &str,
        gzip: Option<u8>,
        ctx: &Cx<'_>,
    ) -> Result<Col, Error> {
        let mut b = g.new_dataset::<T>().chunk(STORE_CHUNK);
        if let Some(level) = gzip {
            b = b.shuffle().deflate(level.min(9));
        }
        let ds = b.shape(0..).create(name);
        Ok(Col {
            ds: ctx.h5(name, ds)?,
            len: 0,
        })
    }

    fn append<T: H5Type>(&mut self, values: &[T], ctx: &Cx<'_>) -> Result<(), Error> {
        if values.is_empty() {
            return Ok(());
        }
        let end = self.len + values.len();
        let name = self.ds.name();
        ctx.h5(&name, self.ds.resize(end))?;
        ctx.h5(&name, self.ds.write_slice(values, self.len..end))?;
        self.len = end;
        Ok(())
    }

    fn fill<T: H5Type + Clone>(&mut self, value: T, n: usize, ctx: &Cx<'_>) -> Result<(), Error> {
        let mut left = n;
        let buf = vec![value; n.min(CHUNK)];
        while left > 0 {
            let k = left.min(CHUNK);
            self.append(&buf[..k], ctx)?;
            left -= k;
        }
        Ok(())
    }
}

/// Error context: the file being written.
struct Cx<'a> {
    path: &'a Path,
}

impl Cx<'_> {
    fn h5<T>(&self, context: &str, r: ::hdf5::Result<T>) -> Result<T, Error> {
        r.map_err(|e| Error::Hdf5 {
            path: self.path.to_path_buf(),
            context: context.trim_start_matches('/').to_string(),
            message: e.to_string(),
        })
    }
}

/// The output under construction.
pub(crate) struct Merger {
    target: PathBuf,
    tmp: PathBuf,
    file: File,
    names: Vec<String>,
    ids: HashMap<String, u32>,
    index: HashMap<&'static str, Col>,
    /// `summary_statistics` while every input so far had it.
    summary: Option<Col>,
    events: HashMap<&'static str, Col>,
    n_events: usize,
    threads: Option<HashMap<&'static str, Col>>,
    tasks: Option<HashMap<&'static str, Col>>,
    /// Rank 0's `start_time_ns` (the output's origin), once known.
    origin: Option<i64>,
    hosts: Vec<String>,
    ranks: Vec<u32>,
    /// First event of each non-empty row of the input being appended (sorted).
    row_firsts: Vec<usize>,
    /// Deflate level of the event columns.
    gzip: Option<u8>,
}

fn read_vec<T: H5Type>(g: &Group, name: &str, cx: &Cx<'_>) -> Result<Vec<T>, Error> {
    let ds = cx.h5(name, g.dataset(name))?;
    cx.h5(name, ds.read_raw::<T>())
}

fn read_strings(g: &Group, name: &str, cx: &Cx<'_>) -> Result<Vec<VarLenUnicode>, Error> {
    read_vec::<VarLenUnicode>(g, name, cx)
}

fn attr_i64(g: &Group, name: &str) -> Option<i64> {
    g.attr(name).ok()?.read_scalar::<i64>().ok()
}

fn attr_str(g: &Group, name: &str) -> Option<String> {
    let v = g.attr(name).ok()?.read_scalar::<VarLenUnicode>().ok()?;
    Some(v.as_str().to_owned())
}

impl Merger {
    /// Creates the temporary output beside `target`.
    pub(crate) fn create(target: &Path, gzip: Option<u8>) -> Result<Merger, Error> {
        // A private `0600` temporary beside the target, named with this process and host
        // (see `create_temp`).
        let (tmp, file) = crate::output::hdf5::create_temp(target)?;
        let mut m = Merger {
            target: target.to_path_buf(),
            tmp,
            file,
            names: Vec::new(),
            ids: HashMap::new(),
            index: HashMap::new(),
            summary: None,
            events: HashMap::new(),
            n_events: 0,
            threads: None,
            tasks: None,
            origin: None,
            hosts: Vec::new(),
            ranks: Vec::new(),
            row_firsts: Vec::new(),
            gzip,
        };
        m.init()?;
        Ok(m)
    }

    fn cx(&self) -> Cx<'_> {
        Cx { path: &self.target }
    }

    fn init(&mut self) -> Result<(), Error> {
        let cx = Cx { path: &self.target };
        let f = &self.file;
        let schema = f
            .new_attr::<i64>()
            .shape(())
            .create("scope_profiler_schema");
        cx.h5(
            "scope_profiler_schema",
            schema.and_then(|a| a.write_scalar(&3i64)),
        )?;
        let layout: VarLenUnicode = "columnar".parse().unwrap_or_default();
        let a = f
            .new_attr::<VarLenUnicode>()
            .shape(())
            .create("storage_layout");
        cx.h5("storage_layout", a.and_then(|a| a.write_scalar(&layout)))?;
        let index = cx.h5("rank_region_index", f.create_group("rank_region_index"))?;
        let events = cx.h5("events", f.create_group("events"))?;
        for n in ["region_ids", "ranks"] {
            self.index.insert(n, Col::create::<u32>(&index, n, &cx)?);
        }
        for n in ["event_offsets", "event_counts"] {
            self.index.insert(n, Col::create::<u64>(&index, n, &cx)?);
        }
        for n in ["source_lines", "exclusive_totals"] {
            self.index.insert(n, Col::create::<i64>(&index, n, &cx)?);
        }
        for n in ["source_files", "source_texts", "tags"] {
            self.index
                .insert(n, Col::create::<VarLenUnicode>(&index, n, &cx)?);
        }
        self.summary = Some(Col::create::<SummaryRow>(
            &index,
            "summary_statistics",
            &cx,
        )?);
        for n in ["start_deltas", "durations"] {
            let col = Col::create_packed::<i64>(&events, n, self.gzip, &cx)?;
            self.events.insert(n, col);
        }
        Ok(())
    }

    /// Appends one single-rank input.
    pub(crate) fn append(&mut self, input: &Input<'_>) -> Result<(), Error> {
        let icx = Cx { path: input.path };
        let src = icx.h5(
            "the input (opening it)",
            File::with_options()
                .with_fapl(|p| p.file_locking(false))
                .open(input.path),
        )?;
        let layout = attr_str(&src, "storage_layout").unwrap_or_else(|| "columnar".into());
        if layout != "columnar" {
            return Err(Error::Hdf5 {
                path: input.path.to_path_buf(),
                context: "storage_layout".into(),
                message: format!("only columnar profiles can be merged, not `{layout}`"),
            });
        }
        let meta = icx.h5("metadata", src.group("metadata"))?;
        let start = attr_i64(&meta, "start_time_ns").unwrap_or(0);
        if let Some(h) = attr_str(&meta, "hostname") {
            if !self.hosts.contains(&h) {
                self.hosts.push(h);
            }
        }
        if self.origin.is_none() {
            // The first input's metadata becomes the output's (spec §1.3: rank 0's only).
            icx.h5("metadata", meta.copy_to(&self.file, "metadata"))?;
            self.origin = Some(start - input.clock_offset_ns);
        }
        let rel_shift = (start - input.clock_offset_ns) - self.origin.unwrap_or(0);
        let base = self.n_events;
        let n_in = self.append_index(&src, input, base, &icx)?;
        self.append_events(&src, input, n_in, &icx)?;
        self.append_lanes(&src, input.rank, rel_shift, &icx)?;
        self.copy_aux(&src, input.rank, &icx)?;
        self.ranks.push(input.rank);
        Ok(())
    }

    /// Event columns of one input, copied in chunks of [`CHUNK`] elements.
    fn append_events(
        &mut self,
        src: &File,
        input: &Input<'_>,
        n_in: usize,
        icx: &Cx<'_>,
    ) -> Result<(), Error> {
        let cx = Cx { path: &self.target };
        let ev = icx.h5("events", src.group("events"))?;
        let out = cx.h5("events", self.file.group("events"))?;
        // Optional columns this input brings for the first time: back-filled for earlier ranks.
        for (name, sentinel) in OPTIONAL_EVENTS {
            if ev.link_exists(name) && !self.events.contains_key(name) {
                let mut c = Col::create_packed::<i64>(&out, name, self.gzip, &cx)?;
                c.fill(sentinel, self.n_events, &cx)?;
                self.events.insert(name, c);
            }
        }
        let names: Vec<&'static str> = self.events.keys().copied().collect();
        for name in names {
            let Some(col) = self.events.get_mut(name) else {
                continue;
            };
            if !ev.link_exists(name) {
                let sentinel = OPTIONAL_EVENTS
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map_or(-1, |(_, s)| *s);
                col.fill(sentinel, n_in, &cx)?;
                continue;
            }
            let ds = icx.h5(name, ev.dataset(name))?;
            if ds.size() != n_in {
                return Err(Error::Hdf5 {
                    path: input.path.to_path_buf(),
                    context: format!("events/{name}"),
                    message: format!("{} elements, durations has {n_in}", ds.size()),
                });
            }
            let mut at = 0;
            let mut next_first = 0;
            while at < n_in {
                let end = (at + CHUNK).min(n_in);
                let mut v = icx.h5(name, ds.read_slice_1d::<i64, _>(at..end))?.to_vec();
                if name == "start_deltas" && input.clock_offset_ns != 0 {
                    let firsts = &self.row_firsts;
                    while next_first < firsts.len() && firsts[next_first] < end {
                        if firsts[next_first] >= at {
                            v[firsts[next_first] - at] -= input.clock_offset_ns;
                        }
                        next_first += 1;
                    }
                }
                col.append(&v, &cx)?;
                at = end;
            }
        }
        self.n_events += n_in;
        Ok(())
    }

    /// Writes the names and the run-wide metadata, closes and publishes the file; `extra`
    /// are string attributes added to `metadata` (clock offsets, ...).
    pub(crate) fn finish(
        self,
        mpi_size: u32,
        extra: &[(&str, String)],
        no_replace: bool,
    ) -> Result<Merged, Error> {
        let written = self.write_tables(mpi_size, extra);
        let Merger {
            target,
            tmp,
            file,
            index,
            summary,
            events,
            threads,
            tasks,
            ranks,
            n_events,
            ..
        } = self;
        drop((index, summary, events, threads, tasks));
        let cx = Cx { path: &target };
        let result = written
            .and_then(|()| cx.h5("the merged file (closing)", file.close()))
            .and_then(|()| {
                let renamed = if no_replace {
                    crate::data::files::rename_noreplace(&tmp, &target)
                } else {
                    std::fs::rename(&tmp, &target)
                };
                renamed.map_err(|source| Error::Io {
                    context: "publishing the merged profile (rename)".into(),
                    path: target.clone(),
                    source,
                })
            });
        if let Err(e) = result {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        Ok(Merged {
            file: target,
            ranks,
            calls: n_events as u64,
        })
    }

    /// Removes the temporary output (after a failed append).
    pub(crate) fn abandon(self) {
        let tmp = self.tmp.clone();
        drop(self);
        let _ = std::fs::remove_file(tmp);
    }

    fn write_tables(&self, mpi_size: u32, extra: &[(&str, String)]) -> Result<(), Error> {
        let cx = self.cx();
        let f = &self.file;
        let names: Vec<VarLenUnicode> = self
            .names
            .iter()
            .map(|n| n.replace('\0', "\u{FFFD}").parse().unwrap_or_default())
            .collect();
        let table = cx.h5("region_table", f.create_group("region_table"))?;
        cx.h5(
            "region_table/names",
            table
                .new_dataset_builder()
                .with_data(&names)
                .create("names"),
        )?;
        if self.summary.is_none() {
            let idx = cx.h5("rank_region_index", f.group("rank_region_index"))?;
            if idx.link_exists("summary_statistics") {
                cx.h5("summary_statistics", idx.unlink("summary_statistics"))?;
            }
        }
        let meta = match f.group("metadata") {
            Ok(m) => m,
            Err(_) => cx.h5("metadata", f.create_group("metadata"))?,
        };
        let set_i64 = |name: &str, v: i64| -> Result<(), Error> {
            if meta.attr(name).is_ok() {
                cx.h5(name, meta.delete_attr(name))?;
            }
            let a = meta.new_attr::<i64>().shape(()).create(name);
            cx.h5(name, a.and_then(|a| a.write_scalar(&v)))
        };
        set_i64("mpi_size", i64::from(mpi_size))?;
        set_i64("num_nodes", self.hosts.len().max(1) as i64)?;
        for (name, value) in extra {
            if meta.attr(name).is_ok() {
                cx.h5(name, meta.delete_attr(name))?;
            }
            let v: VarLenUnicode = value.parse().unwrap_or_default();
            let a = meta.new_attr::<VarLenUnicode>().shape(()).create(*name);
            cx.h5(name, a.and_then(|a| a.write_scalar(&v)))?;
        }
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests;

//! Crash recovery: turning the spool of a run that never finalized (killed, crashed, out of
//! memory) into a valid schema-3 file.
//!
//! While a profiler with an output file runs, its flusher appends every completed call to a
//! spool beside the output (see the `spool` module) and makes it durable at every
//! `flush_interval`; each finalize moves the phase's spool aside, publishes it and deletes
//! it. So after a crash the spool files still beside the output hold every call completed up
//! to the last flush interval, and nothing that was already published.
//!
//! ```no_run
//! // After a run writing `profile.h5` was killed:
//! let r = scope_profiler::recover("profile.h5")?;
//! println!("recovered {} calls from {:?}", r.calls, r.spools);
//! # Ok::<(), scope_profiler::Error>(())
//! ```
//!
//! The same from a shell: `scope-profiler-recover profile.h5`.

use std::path::{Path, PathBuf};

use crate::output::model::{Layout, PhaseData, RegionRow};
use crate::spool::{self, SpoolContents};
use crate::stats::Stats;
use crate::{Error, SESSION_REGION};

/// What a recovery read and wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Recovered {
    /// The spool files that were read (and, for [`recover`], removed).
    pub spools: Vec<PathBuf>,
    /// Spool files of other (older) runs that were left alone.
    pub other_runs: Vec<PathBuf>,
    /// Regions written.
    pub regions: usize,
    /// Calls written.
    pub calls: u64,
    /// Bytes at the end of a spool that a crash cut off mid-frame (ignored).
    pub torn_bytes: u64,
}

/// Recovers the unpublished calls of the most recent run that wrote `output` from the spool
/// files beside it, writes them to `output` (atomically) and removes those spool files.
pub fn recover(output: impl AsRef<Path>) -> Result<Recovered, Error> {
    let output = output.as_ref();
    let mut found = spool_files(output)?;
    if found.is_empty() {
        return Err(Error::Io {
            context: "looking for spool files to recover".into(),
            path: spool::spool_path(output),
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no spool beside this output: nothing to recover",
            ),
        });
    }
    let mut runs: Vec<(PathBuf, SpoolContents)> = Vec::new();
    for p in found.drain(..) {
        let c = read(&p)?;
        runs.push((p, c));
    }
    // The newest run is the one with the latest start.
    let newest = runs
        .iter()
        .map(|(_, c)| (c.header.start_time_ns, c.header.timestamp.clone()))
        .max()
        .expect("non-empty");
    let (mine, others): (Vec<_>, Vec<_>) = runs
        .into_iter()
        .partition(|(_, c)| (c.header.start_time_ns, c.header.timestamp.clone()) == newest);
    let mut r = write(output, mine.iter().map(|(_, c)| c))?;
    r.spools = mine.into_iter().map(|(p, _)| p).collect();
    r.other_runs = others.into_iter().map(|(p, _)| p).collect();
    for p in &r.spools {
        let _ = std::fs::remove_file(p);
    }
    Ok(r)
}

/// Writes the calls of one spool file to `output`, leaving the spool in place.
pub fn recover_spool(
    spool: impl AsRef<Path>,
    output: impl AsRef<Path>,
) -> Result<Recovered, Error> {
    let spool = spool.as_ref();
    let contents = read(spool)?;
    let mut r = write(output.as_ref(), std::iter::once(&contents))?;
    r.spools = vec![spool.to_path_buf()];
    Ok(r)
}

fn read(path: &Path) -> Result<SpoolContents, Error> {
    spool::read(path).map_err(|source| Error::Io {
        context: "reading a spool".into(),
        path: path.to_path_buf(),
        source,
    })
}

/// Every spool file of `output`: `.<name>.spool`, its rotated phases and stale copies.
fn spool_files(output: &Path) -> Result<Vec<PathBuf>, Error> {
    let main = spool::spool_path(output);
    let prefix = main
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let dir = match main.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let entries = std::fs::read_dir(&dir).map_err(|source| Error::Io {
        context: "listing the output's directory".into(),
        path: dir.clone(),
        source,
    })?;
    let mut found: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .map(|n| n.to_string_lossy().starts_with(&prefix))
                .unwrap_or(false)
        })
        .collect();
    found.sort();
    Ok(found)
}

/// Merges spools of one run into one phase and writes it.
fn write<'a>(
    output: &Path,
    spools: impl Iterator<Item = &'a SpoolContents>,
) -> Result<Recovered, Error> {
    let mut rows: Vec<RegionRow> = Vec::new();
    let mut threads = Vec::new();
    let mut header = spool::Header::default();
    let mut torn = 0;
    for c in spools {
        header = c.header.clone();
        torn += c.torn_bytes;
        if !c.threads.is_empty() {
            threads = c.threads.clone();
        }
        for (id, (name, file, line)) in c.regions.iter().enumerate() {
            let k = match rows.iter().position(|r| &r.name == name) {
                Some(k) => k,
                None => {
                    rows.push(RegionRow {
                        name: name.clone(),
                        file: file.clone(),
                        line: *line,
                        stats: Stats::default(),
                        calls: Vec::new(),
                        gpu_count: 0,
                        gpu_total: 0,
                        exclusive_ns: -1,
                    });
                    rows.len() - 1
                }
            };
            let row = &mut rows[k];
            for call in c.calls.get(id).into_iter().flatten() {
                row.stats.add(call.dur_ns.max(0) as u64);
                if call.gpu_ns >= 0 {
                    row.gpu_count += 1;
                    row.gpu_total += call.gpu_ns;
                }
                row.calls.push(*call);
            }
            if header.aggregate {
                if let Some((_, s)) = c.aggregate.iter().find(|(r, _)| *r as usize == id) {
                    row.stats = merge(&row.stats, s);
                }
            }
        }
    }
    rows.retain(|r| r.stats.count > 0);
    let calls: u64 = rows.iter().map(|r| r.stats.count).sum();
    let regions = rows.len();
    let layout = if header.aggregate {
        Layout::Aggregate
    } else {
        Layout::Columnar
    };
    let end = rows
        .iter()
        .flat_map(|r| r.calls.iter())
        .map(|c| c.start_ns + c.dur_ns)
        .max()
        .unwrap_or(header.start_time_ns)
        .max(header.start_time_ns);
    let start = rows
        .iter()
        .flat_map(|r| r.calls.iter())
        .map(|c| c.start_ns)
        .min()
        .unwrap_or(header.start_time_ns)
        .min(header.start_time_ns);
    if !rows.iter().any(|r| r.name == SESSION_REGION) {
        let session_thread = threads
            .iter()
            .find(|t| t.name == "main")
            .map_or(0, |t| t.index);
        rows.insert(
            0,
            RegionRow::session(start, end - start, session_thread, layout),
        );
    }
    let mut data = PhaseData {
        layout,
        regions: rows,
        start_time_ns: header.start_time_ns,
        finalize_time_ns: end,
        timestamp: header.timestamp.clone(),
        label: header.label.clone(),
        dropped: 0,
        losses: Default::default(),
        perf: None,
        likwid: None,
        threads,
        tasks: Vec::new(),
        polls: Vec::new(),
        region_names: Vec::new(),
        track_threads: header.track_threads,
        track_async: false,
        extra: Default::default(),
    };
    let _ = crate::nesting::nest(&mut data, 0);
    crate::output::hdf5::write_phase(output, &data, &Default::default())?;
    Ok(Recovered {
        spools: Vec::new(),
        other_runs: Vec::new(),
        regions,
        calls,
        torn_bytes: torn,
    })
}

/// Combines two sets of statistics (Chan et al.'s parallel update).
fn merge(a: &Stats, b: &Stats) -> Stats {
    if a.count == 0 {
        return *b;
    }
    if b.count == 0 {
        return *a;
    }
    let n = (a.count + b.count) as f64;
    let delta = b.mean - a.mean;
    Stats {
        count: a.count + b.count,
        total: a.total + b.total,
        min: a.min.min(b.min),
        max: a.max.max(b.max),
        mean: a.mean + delta * b.count as f64 / n,
        m2: a.m2 + b.m2 + delta * delta * a.count as f64 * b.count as f64 / n,
    }
}

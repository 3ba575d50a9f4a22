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
//!
//! `build()` does this by itself: a spool left beside the output by an earlier run that did
//! not finish is recovered into `<stem>.recovered-N.h5` (the first free `N`) before recording
//! starts, and one line on stderr names it. A spool that cannot be read is kept as
//! `<spool>.corrupt-N` (never deleted, never overwritten) and the line names it and the error;
//! [`recover_spool`] and `scope-profiler-recover --spool` accept such files. A spool that
//! another live process holds (it is locked) is not touched: `build()` refuses the output.
//! Recovery streams the calls (two passes over the spool), so memory stays bounded.

use std::path::{Path, PathBuf};

use crate::data::open_calls::OpenCalls;
use crate::data::rows::{Layout, PhaseData, RegionRow, SpooledCalls, ThreadRow};
use crate::data::stats::Stats;
use crate::finalize::scan::scan as first_pass;
use crate::output::hdf5::WriteOptions;
use crate::spool::{self, SpoolContents};
use crate::{Error, SESSION_REGION};

/// One line on the calls open at a crash: how many, and the oldest three with their ages.
fn open_line(open: &OpenCalls) -> String {
    let oldest: Vec<String> = (open.calls.iter().take(3))
        .map(|c| format!("{} ({:.3} s)", c.region, open.age_ns(c) as f64 / 1e9))
        .collect();
    format!(
        "{} call(s) were open at the last flush before the crash; oldest: {}",
        open.open,
        oldest.join(", ")
    )
}

/// What a recovery read and wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Recovered {
    /// The profile written.
    pub output: PathBuf,
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
    /// The calls open at the spool's last flush before the crash (spool version 2), also
    /// stored in the file under `/scope_profiler_rs/open_calls`.
    pub open_calls: Option<OpenCalls>,
}

/// What the `recover` commands print: the calls and regions written, the bytes a crash cut
/// off, and the spools of older runs left alone, one line each.
impl std::fmt::Display for Recovered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "recovered {} calls in {} regions from {} spool file(s) into {}",
            self.calls,
            self.regions,
            self.spools.len(),
            self.output.display()
        )?;
        if self.torn_bytes > 0 {
            write!(
                f,
                "\nignored {} bytes of a frame cut short by the crash",
                self.torn_bytes
            )?;
        }
        if let Some(open) = self.open_calls.as_ref().filter(|o| o.open > 0) {
            write!(f, "\n{}", open_line(open))?;
        }
        for p in &self.other_runs {
            write!(f, "\nleft alone (an older run): {}", p.display())?;
        }
        Ok(())
    }
}

/// Recovers the unpublished calls of the most recent run that wrote `output` from the spool
/// files beside it, writes them to `output` (atomically) and removes those spool files (and
/// the temporary profiles of processes that no longer run, killed while they wrote one).
/// Spools kept as `.corrupt-N` are left out (recover them one by one with [`recover_spool`]).
///
/// # Errors
/// No spool is found, one cannot be read, or the file cannot be written.
pub fn recover(output: impl AsRef<Path>) -> Result<Recovered, Error> {
    let output = output.as_ref();
    crate::output::hdf5::remove_stale_temps(output);
    let mut runs: Vec<Pass0> = Vec::new();
    for p in spool_files(output)? {
        runs.push(pass0(&p).map_err(|source| read_error(&p, source))?);
    }
    // The newest run is the one with the latest start.
    let Some(newest) = runs.iter().map(|r| r.run()).max() else {
        return Err(Error::Io {
            context: "looking for spool files to recover".into(),
            path: spool::spool_path(output),
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no spool beside this output: nothing to recover",
            ),
        });
    };
    let (mine, others): (Vec<_>, Vec<_>) = runs.into_iter().partition(|r| r.run() == newest);
    let mut r = write(output, &mine, false)?;
    r.other_runs = others.into_iter().map(|p| p.path).collect();
    for p in &r.spools {
        let _ = std::fs::remove_file(p);
    }
    Ok(r)
}

/// Writes the calls of one spool file (any spool, a rotated phase or a `.corrupt-N` one) to
/// `output`, leaving the spool in place.
///
/// # Errors
/// The spool cannot be read or the file cannot be written.
pub fn recover_spool(
    spool: impl AsRef<Path>,
    output: impl AsRef<Path>,
) -> Result<Recovered, Error> {
    let spool = spool.as_ref();
    let p = pass0(spool).map_err(|source| read_error(spool, source))?;
    write(output.as_ref(), &[p], false)
}

pub(crate) fn read_error(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        context: "reading a spool".into(),
        path: path.to_path_buf(),
        source,
    }
}

/// At `build()`: recovers every spool of earlier runs beside `output` into
/// `<stem>.recovered-N.h5`, or keeps an unreadable one as `<spool>.corrupt-N`.
///
/// # Errors
/// Another live process holds the spool, or an unreadable spool cannot be moved aside.
pub(crate) fn recover_stale(output: &Path) -> Result<(), Error> {
    let main = spool::spool_path(output);
    if let Ok(m) = std::fs::symlink_metadata(&main) {
        if m.file_type().is_file() {
            let f = crate::data::files::open_nofollow(&main).map_err(|e| read_error(&main, e))?;
            // A lock that cannot be taken for any reason counts as held: on a file system
            // without locks, recovering (and deleting) a live run's spool would lose its calls.
            let held = match crate::data::files::try_lock(&f) {
                Ok(true) => None,
                Ok(false) => Some(format!(
                    "another process is writing this output (its spool {} is locked)",
                    main.display()
                )),
                Err(e) => Some(format!(
                    "cannot tell whether another process is writing this output: locking its \
                     spool {} failed ({e}); if no run is writing it, `scopeprof recover` it or \
                     remove it",
                    main.display()
                )),
            };
            if let Some(why) = held {
                return Err(Error::OutputPath {
                    path: output.to_path_buf(),
                    source: std::io::Error::new(std::io::ErrorKind::AlreadyExists, why),
                });
            }
        }
    }
    // No live process writes this output: a temporary profile a killed one left goes.
    crate::output::hdf5::remove_stale_temps(output);
    recover_runs(
        output,
        spool_files(output)?,
        "an earlier run that did not finish",
    )
}

/// Recovers `found` (spool files beside `output`), one `<stem>.recovered-N.h5` per run they
/// belong to, and removes them; one that cannot be read is kept as `.corrupt-N`. `what`
/// names them in the line on stderr.
fn recover_runs(output: &Path, found: Vec<PathBuf>, what: &str) -> Result<(), Error> {
    let mut runs: Vec<Vec<Pass0>> = Vec::new();
    for p in found {
        match pass0(&p) {
            Ok(r) => match runs.iter_mut().find(|g| g[0].run() == r.run()) {
                Some(g) => g.push(r),
                None => runs.push(vec![r]),
            },
            Err(e) => keep_corrupt(&p, &e.to_string())?,
        }
    }
    for run in runs {
        let written = recovered_name(output, |target| write(target, &run, true));
        match written {
            Ok((target, r)) => {
                for p in &r.spools {
                    let _ = std::fs::remove_file(p);
                }
                eprintln!(
                    "scope-profiler: recovered {} call(s) of {what} into {}",
                    r.calls,
                    target.display()
                );
            }
            Err(e) => {
                for p in &run {
                    keep_corrupt(&p.path, &e.to_string())?;
                }
            }
        }
    }
    Ok(())
}

/// Writes with `write` to the first free `<stem>.recovered-N.h5`.
fn recovered_name(
    output: &Path,
    mut write: impl FnMut(&Path) -> Result<Recovered, Error>,
) -> Result<(PathBuf, Recovered), Error> {
    let mut last = None;
    for target in crate::finalize::names::candidates(output, "recovered", 1).take(10_000) {
        if std::fs::symlink_metadata(&target).is_ok() {
            continue;
        }
        match write(&target) {
            Ok(r) => return Ok((target, r)),
            Err(e) => {
                let exists = matches!(&e, Error::Io { source, .. }
                    if source.kind() == std::io::ErrorKind::AlreadyExists);
                if !exists {
                    return Err(e);
                }
                last = Some(e);
            }
        }
    }
    Err(last.unwrap_or_else(|| Error::OutputPath {
        path: output.to_path_buf(),
        source: std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            "no free recovered name beside it",
        ),
    }))
}

/// Moves an unreadable spool to the first free `<spool>.corrupt-N` and says so.
fn keep_corrupt(path: &Path, why: &str) -> Result<(), Error> {
    for n in 1..10_000 {
        let aside = PathBuf::from(format!("{}.corrupt-{n}", path.display()));
        match crate::data::files::rename_noreplace(path, &aside) {
            Ok(()) => {
                eprintln!(
                    "scope-profiler: an earlier run left {} and it cannot be recovered ({why}); \
                     kept as {}",
                    path.display(),
                    aside.display()
                );
                return Ok(());
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(source) => {
                return Err(Error::Io {
                    context: "keeping an unreadable spool of an earlier run".into(),
                    path: path.to_path_buf(),
                    source,
                })
            }
        }
    }
    Ok(())
}

/// Every spool file of `output`: `.<name>.spool`, its rotated phases and stale copies, but not
/// those kept as corrupt, and only regular files owned by this process's user. Anything else
/// at such a name (a link, a FIFO, a device, another user's file in a shared directory) is
/// left alone, said once, and never read: see [`mine`].
fn spool_files(output: &Path) -> Result<Vec<PathBuf>, Error> {
    let main = spool::spool_path(output);
    let prefix = main
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let dir = crate::data::files::dir_of(&main);
    let entries = std::fs::read_dir(&dir).map_err(|source| Error::Io {
        context: "listing the output's directory".into(),
        path: dir.clone(),
        source,
    })?;
    let mut found: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name().is_some_and(|n| {
                let n = n.to_string_lossy();
                n.starts_with(&prefix) && !n.contains(".corrupt-")
            })
        })
        .filter(|p| mine(p))
        .collect();
    found.sort();
    Ok(found)
}

/// Whether `path` is a regular file (not followed if a link) owned by this process's effective
/// user; says why when it is not, since a file left alone may be what the user looks for.
fn mine(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(m) = std::fs::symlink_metadata(path) else {
        return false; // gone since the listing
    };
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    let why = if !m.file_type().is_file() {
        "it is not a regular file"
    } else if m.uid() != me {
        "another user owns it"
    } else {
        return true;
    };
    eprintln!(
        "scope-profiler: {} is left alone, not read as a spool: {why}",
        path.display()
    );
    false
}

/// What the first pass learns from one spool file.
pub(crate) struct Pass0 {
    path: PathBuf,
    contents: SpoolContents,
    /// Calls per region id.
    counts: Vec<u64>,
    /// The calls' durations per region id.
    sums: Vec<crate::data::stats::Sums>,
    /// Earliest start, latest end.
    span: Option<(i64, i64)>,
}

impl Pass0 {
    fn run(&self) -> (i64, String) {
        let h = &self.contents.header;
        (h.start_time_ns, h.timestamp.clone())
    }
}

pub(crate) fn pass0(path: &Path) -> std::io::Result<Pass0> {
    let mut counts: Vec<u64> = Vec::new();
    let mut sums: Vec<crate::data::stats::Sums> = Vec::new();
    let mut span: Option<(i64, i64)> = None;
    let contents = spool::scan(
        path,
        false,
        Some(&mut |region, calls| {
            let r = region as usize;
            if counts.len() <= r {
                counts.resize(r + 1, 0);
                sums.resize(r + 1, Default::default());
            }
            counts[r] += calls.len() as u64;
            for c in calls {
                sums[r].add(c.dur_ns.max(0) as u64);
                let end = c.start_ns + c.dur_ns.max(0);
                span =
                    Some(span.map_or((c.start_ns, end), |(s, e)| (s.min(c.start_ns), e.max(end))));
            }
        }),
    )?;
    Ok(Pass0 {
        path: path.to_path_buf(),
        contents,
        counts,
        sums,
        span,
    })
}

impl Pass0 {
    /// The regions' names, by id.
    pub(crate) fn region_names(&self) -> Vec<String> {
        self.contents
            .regions
            .iter()
            .map(|r| r.name.clone())
            .collect()
    }

    /// Each region's name and the statistics of its calls in this file.
    pub(crate) fn region_stats(&self) -> impl Iterator<Item = (&str, crate::data::stats::Stats)> {
        (self.sums.iter().enumerate()).filter_map(|(id, s)| {
            let name = self.contents.regions.get(id)?;
            (s.count > 0).then(|| (name.name.as_str(), s.stats()))
        })
    }
}

/// What the spools of one run hold together: the last header and thread table, every
/// region, and per-region counts (columnar) or statistics (aggregate).
#[derive(Default)]
struct Combined {
    header: spool::Header,
    threads: Vec<ThreadRow>,
    torn_bytes: u64,
    /// The latest open-calls frame of all the spools.
    open_calls: Option<OpenCalls>,
    names: Vec<spool::SpoolRegion>,
    counts: Vec<u64>,
    aggregate: Vec<Stats>,
    /// Earliest start and latest end of the calls.
    span: Option<(i64, i64)>,
}

impl Combined {
    fn of(spools: &[Pass0]) -> Combined {
        let mut all = Combined::default();
        for p in spools {
            let c = &p.contents;
            all.header = c.header.clone();
            all.torn_bytes += c.torn_bytes;
            if !c.threads.is_empty() {
                all.threads = c.threads.clone();
            }
            if let Some(o) = &c.open_calls {
                if all.open_calls.as_ref().is_none_or(|a| a.at_ns <= o.at_ns) {
                    all.open_calls = Some(o.named(&c.regions));
                }
            }
            let n = c.regions.len().max(p.counts.len());
            if all.names.len() < n {
                all.names.resize(n, Default::default());
                all.counts.resize(n, 0);
                all.aggregate.resize(n, Stats::default());
            }
            for (id, r) in c.regions.iter().enumerate() {
                all.names[id] = r.clone();
            }
            for (id, k) in p.counts.iter().enumerate() {
                all.counts[id] += k;
            }
            for (id, s) in &c.aggregate {
                if let Some(a) = all.aggregate.get_mut(*id as usize) {
                    *a = a.merge(s);
                }
            }
            if let Some((s, e)) = p.span {
                all.span = Some(all.span.map_or((s, e), |(a, b)| (a.min(s), b.max(e))));
            }
        }
        all
    }

    fn layout(&self) -> Layout {
        if self.header.aggregate {
            Layout::Aggregate
        } else {
            Layout::Columnar
        }
    }

    /// The phase's first and last clock values: the calls' span, widened to `build()`.
    fn bounds(&self) -> (i64, i64) {
        let t0 = self.header.start_time_ns;
        let (start, end) = self.span.unwrap_or((t0, t0));
        (start.min(t0), end.max(t0))
    }

    /// The region rows (a synthetic session first when the spools have none), each spool
    /// region's row (`u32::MAX`: no calls) and the calls they hold.
    fn rows(&self) -> (Vec<RegionRow>, Vec<u32>, u64) {
        let mut rows: Vec<RegionRow> = Vec::new();
        let mut row_of = vec![u32::MAX; self.names.len()];
        if !self.names.iter().any(|r| r.name == SESSION_REGION) {
            let session_thread = self
                .threads
                .iter()
                .find(|t| t.name == "main")
                .map_or(0, |t| t.index);
            let (start, end) = self.bounds();
            rows.push(RegionRow::session(
                start,
                end - start,
                session_thread,
                self.layout(),
            ));
        }
        let mut calls = 0;
        for (id, region) in self.names.iter().enumerate() {
            let stats = if self.header.aggregate {
                self.aggregate[id]
            } else {
                Stats {
                    count: self.counts[id],
                    ..Stats::default()
                }
            };
            if stats.count == 0 {
                continue;
            }
            calls += stats.count;
            row_of[id] = rows.len() as u32;
            rows.push(RegionRow {
                file: region.file.clone(),
                line: region.line,
                stats,
                ..RegionRow::new(region.name.clone())
            });
        }
        (rows, row_of, calls)
    }
}

/// Writes the spools of one run as one phase (streaming their calls).
fn write(output: &Path, spools: &[Pass0], no_replace: bool) -> Result<Recovered, Error> {
    write_phase(output, spools, no_replace, None)
}

/// [`write`], with the time a flight-recorder dump covers (stored in the file).
pub(crate) fn write_phase(
    output: &Path,
    spools: &[Pass0],
    no_replace: bool,
    flight: Option<crate::data::flight::FlightWindow>,
) -> Result<Recovered, Error> {
    let all = Combined::of(spools);
    let (rows, row_of, calls) = all.rows();
    // The synthetic session row (added when the spools have none) is not a recovered region.
    let synthetic = !all.names.iter().any(|r| r.name == SESSION_REGION);
    let regions = rows.len() - usize::from(synthetic);
    let layout = all.layout();
    let data = PhaseData {
        start_time_ns: all.header.start_time_ns,
        finalize_time_ns: all.bounds().1,
        timestamp: all.header.timestamp.clone(),
        label: all.header.label.clone(),
        threads: all.threads,
        track_threads: all.header.track_threads,
        extra: crate::data::rows::PhaseExtra {
            open_calls: all.open_calls.clone(),
            flight,
            ..Default::default()
        },
        spooled: Some(SpooledCalls {
            files: spools.iter().map(|p| p.path.clone()).collect(),
            row_of,
            lanes: Default::default(),
            // Beside the output: the spool's disk may be the full one this recovers from.
            scratch: Some(crate::data::files::dir_of(output)),
        }),
        ..PhaseData::new(layout, rows)
    };
    let scan = match layout {
        Layout::Columnar => first_pass(&data, Some((0, false)))?,
        Layout::Aggregate => Default::default(),
    };
    let opts = WriteOptions {
        no_replace,
        ..WriteOptions::default()
    };
    crate::output::hdf5::write_scanned(output, &data, &scan, &opts, None)?;
    Ok(Recovered {
        output: output.to_path_buf(),
        spools: spools.iter().map(|p| p.path.clone()).collect(),
        other_runs: Vec::new(),
        regions,
        calls,
        torn_bytes: all.torn_bytes,
        open_calls: all.open_calls,
    })
}

mod flight;
pub(crate) use flight::recover_stale_ring;

#[cfg(test)]
mod tests;

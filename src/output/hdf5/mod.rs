//! The schema-3 HDF5 writer: turns one finalize's [`PhaseData`] into a file that the Python
//! package scope-profiler 0.7.5 reads (`scope_profiler.read_h5`, `scope-profiler inspect`).
//!
//! A file holds a dictionary of region names (`region_table/names`, region id = index), one index
//! row per region (`rank_region_index/*`: where its calls lie, source location, tags and fixed-size
//! summary statistics) and the calls of all rows back to back in shared columns (`events/*`).
//! Start times are delta-encoded per row (schema 3): a row's first element is the absolute start
//! of its first call, every further element the gap to the previous call's start. Run facts go
//! into attributes of `metadata`. In the aggregate layout only per-region totals are stored
//! (`rank_region_index/aggregate_*`) and the per-call columns stay empty.
//!
//! Every string is a variable-length UTF-8 string (`VarLenUnicode`), as the Python writer stores
//! them; the reader ignores `storage_layout = "aggregate"` unless it is one. A string column of
//! more than 1024 equal values is a chunked dataset whose fill value is that string and whose
//! chunks are never written ([`ctx::Ctx::strings`]): same type, same values for every reader. Files are published
//! atomically: HDF5 creates a temporary file beside the target (`O_EXCL`, so never through a
//! planted link; created in a private directory, so nobody else can open it while it is written,
//! and mode `0600` unless [`WriteOptions::mode`] says otherwise), the calls are streamed into it ([`super::events`]), and
//! once closed and checked to still be the file HDF5 created, it is renamed over the target, so
//! a reader never sees a half-written profile.

pub(crate) mod aux;
pub(crate) mod ctx;
mod edges;
pub(crate) mod lanes;
pub(crate) mod lines;
pub(crate) mod staged;

use std::ffi::{CStr, OsStr};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use ::hdf5::{File, Group};

#[cfg(test)]
use super::events::summarize;
use super::events::{self, Scan, SummaryRow};
use crate::data::rows::{Layout, PhaseData, RegionRow};
use crate::error::Error;
pub(crate) use crate::output::hdf5::ctx::Ctx;
#[cfg(test)]
use crate::output::hdf5::ctx::{truncate, MAX_ATTR_CHARS, TRUNCATION_MARKER};

/// Options for writing one profile file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WriteOptions {
    /// Deflate level (0-9, larger values are clamped) for the per-call event columns, applied
    /// with the shuffle filter; `None` stores them uncompressed.
    pub gzip: Option<u8>,
    /// fsync the file before the rename and its directory before and after it.
    pub durable: bool,
    /// Fail with `AlreadyExists` instead of replacing a file at the target.
    pub no_replace: bool,
    /// The published file's permission bits (`Builder::file_mode`; `0o600` by default).
    pub mode: u32,
}

impl Default for WriteOptions {
    fn default() -> WriteOptions {
        WriteOptions {
            gzip: None,
            durable: false,
            no_replace: false,
            mode: DEFAULT_MODE,
        }
    }
}

/// Permission bits of a published profile unless configured: only its owner reads it (the
/// file holds source text and the program's names; `perf record` makes `perf.data` so too).
pub(crate) const DEFAULT_MODE: u32 = 0o600;

/// Value of the root attribute `scope_profiler_schema`.
const SCHEMA_VERSION: i64 = 3;

/// Distinguishes the temporary files of concurrent writes within one process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Writes `data` as a complete schema-3 profile and publishes it atomically at `path` (call
/// ids, when written, are those the in-memory calls carry).
///
/// # Errors
/// See [`write_scanned`].
#[cfg(test)]
pub(crate) fn write_phase(path: &Path, data: &PhaseData, opts: &WriteOptions) -> Result<(), Error> {
    let scan = match data.layout {
        Layout::Columnar => events::scan(data, None)?,
        Layout::Aggregate => Scan::default(),
    };
    write_scanned(path, data, &scan, opts, None).map(drop)
}

/// Writes `data` (whose calls `scan` describes) as a complete schema-3 profile and publishes it
/// atomically at `path`; returns the published file's `(device, inode)`.
///
/// The file is written as `.<name>.<tag>.<n>.tmp` in the target's directory (`tag`: see
/// [`crate::data::host`]) (or completed from
/// `staged`, whose lane tables are already written, when it lies there), closed, checked to be
/// the file HDF5 created and renamed over `path`. On any failure the temporary file is
/// removed, `path` is left as it was, and the error names `path` and the step or HDF5 object
/// that failed.
///
/// # Errors
/// The temporary file cannot be created, HDF5 fails, or the rename fails (with
/// `no_replace`, also when something exists at `path`).
pub(crate) fn write_scanned(
    path: &Path,
    data: &PhaseData,
    scan: &Scan,
    opts: &WriteOptions,
    staged: Option<staged::Staged>,
) -> Result<(u64, u64), Error> {
    let ctx = Ctx { path };
    let (tmp, file, created, lanes_written) = match staged.and_then(|s| s.take_for(path)) {
        Some(p) => (p.tmp, p.file, p.created, true),
        None => {
            let (tmp, file) = create_temp(path)?;
            let created = crate::data::files::identity(&tmp).ok();
            (tmp, file, created, false)
        }
    };
    let result = write_contents(&ctx, &file, data, scan, opts, lanes_written)
        .and_then(|()| ctx.h5("the file (closing)", file.close()))
        .and_then(|()| publish(&tmp, created, path, opts));
    if result.is_err() {
        // Only ever our own file: `publish` checked, or the write never got that far.
        if crate::data::files::identity(&tmp).ok() == created {
            let _ = std::fs::remove_file(&tmp);
        }
    }
    result.map(|()| created.map_or((0, 0), |(dev, ino, _)| (dev, ino)))
}

/// Creates the temporary HDF5 file `.<name>.<tag>.<counter>.tmp` beside `path` (`tag`: this
/// process and host, see [`crate::data::host`]), mode `0600`, exclusively (HDF5 opens it with
/// `O_CREAT | O_EXCL`: a link planted at the name is never followed) and without HDF5 file
/// locking (the file is private until the rename, and HDF5's lock lives on a descriptor
/// without `O_CLOEXEC`, so a child process would keep the published file locked).
///
/// HDF5 creates files `0666 & !umask`, and a descriptor opened in that moment would keep
/// reading what is written later; so it creates the file inside a fresh `0700` directory
/// beside the target, where nobody else can reach it, and the file is made `0600` and moved
/// to its name beside the target before anything is written.
pub(crate) fn create_temp(path: &Path) -> Result<(PathBuf, File), Error> {
    let output_err = |source| Error::OutputPath {
        path: path.to_path_buf(),
        source,
    };
    let name = path.file_name().ok_or_else(|| {
        output_err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the path has no file name",
        ))
    })?;
    let tag = crate::data::host::ProcTag::here().render();
    let mut attempts = 0;
    loop {
        let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        let tmp_name = format!(".{}.{tag}.{n}.tmp", name.to_string_lossy());
        let tmp = path.with_file_name(OsStr::new(&tmp_name));
        let private = path.with_file_name(OsStr::new(&format!("{tmp_name}.d")));
        let taken = |p: &Path| std::fs::symlink_metadata(p).ok();
        if let Some(m) = taken(&tmp).or_else(|| taken(&private)) {
            // A link planted at the name is refused; a stale file of an earlier process with
            // the same tag: next name.
            let e = io::Error::new(
                io::ErrorKind::AlreadyExists,
                "a temporary file is in the way",
            );
            if m.file_type().is_symlink() || attempts >= 16 {
                return Err(output_err(crate::data::files::explain(&tmp, e)));
            }
            attempts += 1;
            continue;
        }
        return create_privately(path, &tmp, &private).map(|f| (tmp, f));
    }
}

/// Creates the HDF5 file `tmp` through the private directory `private` (see [`create_temp`]).
fn create_privately(path: &Path, tmp: &Path, private: &Path) -> Result<File, Error> {
    use std::os::unix::fs::DirBuilderExt;
    let output_err = |source| Error::OutputPath {
        path: path.to_path_buf(),
        source,
    };
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(private)
        .map_err(|e| output_err(crate::data::files::explain(private, e)))?;
    let inner = private.join("f");
    // A 4 MiB chunk cache per dataset keeps a compressed chunk that the streamed writes
    // fill piece by piece in memory until it is complete (at most ~32 MiB in all).
    let created = File::with_options()
        .with_fapl(|p| p.file_locking(false).chunk_cache(101, 4 << 20, 1.0))
        .create_excl(&inner);
    let moved = match &created {
        Ok(_) => crate::data::files::set_mode(&inner, DEFAULT_MODE)
            .and_then(|()| crate::data::files::rename_noreplace(&inner, tmp))
            .map_err(|e| crate::data::files::explain(tmp, e)),
        Err(_) => Ok(()),
    };
    // Whatever happened, nothing stays in the private directory.
    let _ = std::fs::remove_file(&inner);
    let _ = std::fs::remove_dir(private);
    match (created, moved) {
        (Ok(f), Ok(())) => Ok(f),
        (Ok(_), Err(e)) => Err(output_err(e)),
        (Err(e), _) => {
            // HDF5's message is opaque: find the real cause with a plain exclusive create.
            match crate::data::files::create_new(tmp, 0o600) {
                Ok(_) => {
                    let _ = std::fs::remove_file(tmp);
                    Err(Error::Hdf5 {
                        path: path.to_path_buf(),
                        context: "the file (creating it)".into(),
                        message: e.to_string(),
                    })
                }
                Err(e) => Err(output_err(e)),
            }
        }
    }
}

/// Removes the temporary files [`create_temp`] made for `path` in processes that no longer
/// run (killed while they wrote it); a live process's are left alone, and so is every file
/// whose process cannot be judged from here: one of another host or pid namespace, and one
/// named in the old format (a bare pid, from before names carried the host): see
/// [`crate::data::host`]. Returns how many.
pub(crate) fn remove_stale_temps(path: &Path) -> usize {
    let Some(name) = path.file_name() else {
        return 0;
    };
    let prefix = format!(".{}.", name.to_string_lossy());
    let Ok(entries) = std::fs::read_dir(crate::data::files::dir_of(path)) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let file = entry.file_name().to_string_lossy().into_owned();
        let Some(tag_n) = file
            .strip_prefix(&prefix)
            .and_then(|r| r.strip_suffix(".tmp"))
        else {
            continue;
        };
        let Some((tag, n)) = tag_n.rsplit_once('.') else {
            continue;
        };
        let (Some(tag), Ok(_)) = (crate::data::host::ProcTag::parse(tag), n.parse::<u64>()) else {
            continue;
        };
        let regular = entry.file_type().is_ok_and(|t| t.is_file());
        if regular
            && !crate::data::host::tag_alive(&tag)
            && std::fs::remove_file(entry.path()).is_ok()
        {
            removed += 1;
        }
    }
    removed
}

/// Checks that `tmp` is still the file HDF5 created, syncs it when durable and renames it
/// to the target, with the permission bits `opts.mode` (it was made `0600`).
fn publish(
    tmp: &Path,
    created: Option<(u64, u64, bool)>,
    path: &Path,
    opts: &WriteOptions,
) -> Result<(), Error> {
    let io_err = |context: &str| {
        let context = context.to_string();
        move |source| Error::Io {
            context,
            path: path.to_path_buf(),
            source,
        }
    };
    let now =
        crate::data::files::identity(tmp).map_err(io_err("checking the temporary profile"))?;
    if created != Some(now) || !now.2 {
        return Err(io_err("checking the temporary profile")(io::Error::other(
            format!(
                "{} was replaced while it was being written; not publishing it",
                tmp.display()
            ),
        )));
    }
    if opts.mode != DEFAULT_MODE {
        crate::data::files::set_mode(tmp, opts.mode)
            .map_err(io_err("setting the profile's permissions"))?;
    }
    if opts.durable {
        let f = crate::data::files::open_nofollow(tmp).map_err(io_err("syncing the profile"))?;
        f.sync_all().map_err(io_err("syncing the profile"))?;
        crate::data::files::sync_dir(path).map_err(io_err("syncing the profile's directory"))?;
    }
    crate::checkpoint::reach("rename");
    let renamed = if opts.no_replace {
        crate::data::files::rename_noreplace(tmp, path)
    } else {
        std::fs::rename(tmp, path)
    };
    renamed.map_err(io_err("publishing the profile (rename)"))?;
    if opts.durable {
        crate::data::files::sync_dir(path).map_err(io_err("syncing the profile's directory"))?;
    }
    Ok(())
}

/// Root attributes, `metadata`, `region_table`, `rank_region_index`, `events` and (unless
/// `lanes_written`: a staged file) the lane tables.
fn write_contents(
    ctx: &Ctx<'_>,
    file: &File,
    data: &PhaseData,
    scan: &Scan,
    opts: &WriteOptions,
    lanes_written: bool,
) -> Result<(), Error> {
    let layout = match data.layout {
        Layout::Columnar => "columnar",
        Layout::Aggregate => "aggregate",
    };
    ctx.attr(file, "scope_profiler_schema", &SCHEMA_VERSION)?;
    ctx.attr_str(file, "storage_layout", layout)?;

    write_metadata(ctx, &ctx.group(file, "metadata")?, data)?;
    crate::checkpoint::reach("write");

    let names = ctx.group(file, "region_table")?;
    ctx.strings(
        &names,
        "names",
        data.regions.iter().map(|r| r.name.as_str()),
    )?;

    let index = ctx.group(file, "rank_region_index")?;
    let events = ctx.group(file, "events")?;
    match data.layout {
        Layout::Columnar => {
            write_columnar(ctx, &index, &events, data, scan, opts)?;
            if !lanes_written {
                lanes::write_lanes(ctx, file, data, lanes::Lanes::of(data))?;
            }
            edges::write_edges(ctx, file, data, scan.below.as_ref())?;
        }
        Layout::Aggregate => write_aggregate(ctx, &index, &events, &data.regions)?,
    }
    crate::output::hdf5::aux::write_aux(file, ctx.path, data)?;
    crate::output::hdf5::lines::write_lines(ctx, file, &data.extra)
}

/// The `metadata` group's attributes: the Python package's keys plus this crate's own.
pub(crate) fn write_metadata(ctx: &Ctx<'_>, meta: &Group, data: &PhaseData) -> Result<(), Error> {
    let system = system_info();
    ctx.attr(meta, "start_time_ns", &data.start_time_ns)?;
    ctx.attr(meta, "finalize_time_ns", &data.finalize_time_ns)?;
    ctx.attr_str(meta, "timestamp", &data.timestamp)?;
    if let Some(label) = &data.label {
        ctx.attr_str(meta, "label", label)?;
    }
    ctx.attr(meta, "mpi_size", &1i64)?;
    ctx.attr(meta, "num_nodes", &1i64)?;
    ctx.attr_str(meta, "hostname", &system.hostname)?;
    ctx.attr_str(meta, "platform", &system.platform)?;
    ctx.attr_str(
        meta,
        "writer",
        concat!("scope-profiler-rs ", env!("CARGO_PKG_VERSION")),
    )?;
    let command: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    ctx.attr_str(meta, "command", &command.join(" "))?;
    // `rustc -V` at build time (build.rs), e.g. `1.95.0 (59807616e 2026-04-14)`.
    ctx.attr_str(meta, "rust_version", env!("SCOPE_PROFILER_RUSTC_VERSION"))?;
    let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    ctx.attr(meta, "dropped_records", &count(data.dropped))?;
    ctx.attr(meta, "dropped_calls", &count(data.losses.dropped_calls))?;
    ctx.attr(meta, "backpressure_waits", &count(data.losses.waits))?;
    ctx.attr(meta, "backpressure_wait_ns", &count(data.losses.wait_ns))?;
    if data.losses.follows_lost > 0 {
        ctx.attr(meta, "follows_from_lost", &count(data.losses.follows_lost))?;
    }
    let tokio = &data.extra.tokio;
    if tokio.counts.tasks > 0 || tokio.hidden_calls > 0 {
        // Tokio's own instrumentation (see `crate::flusher::sched`), since `build()`.
        let c = &tokio.counts;
        for (key, n) in [
            ("tokio_tasks", c.tasks),
            ("tokio_wakes", c.wakes),
            ("tokio_wakes_of_ended_tasks", c.ended_wakes),
            ("tokio_extra_wakes", c.extra_wakes),
            ("tokio_unwoken_suspensions", c.unwoken),
            ("tokio_hidden_calls", tokio.hidden_calls),
        ] {
            ctx.attr(meta, key, &count(n))?;
        }
    }
    crate::output::hdf5::lines::write_overhead(ctx, meta, &data.extra)
}

/// This host's name, as `metadata/hostname` holds it.
#[cfg_attr(not(feature = "mpio"), allow(dead_code))]
pub(crate) fn hostname() -> String {
    system_info().hostname
}

/// Host facts for `metadata`.
struct SystemInfo {
    /// Host name (uname nodename).
    hostname: String,
    /// `<sysname>-<release>-<machine>`, e.g. `Linux-6.1.0-18-amd64-x86_64`.
    platform: String,
}

/// Reads the host name and platform via `uname(2)`, falling back to `/proc` and `"unknown"`.
fn system_info() -> SystemInfo {
    // SAFETY: `utsname` is a plain C struct of byte arrays, for which all-zero is a valid value.
    let mut uts: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `uts` is a valid, writable `utsname`; uname only writes into it.
    if unsafe { libc::uname(&mut uts) } == 0 {
        let field = |chars: &[libc::c_char]| {
            // SAFETY: uname NUL-terminates every field, and the zeroed buffer guarantees a NUL
            // within the array even if it did not.
            unsafe { CStr::from_ptr(chars.as_ptr()) }
                .to_string_lossy()
                .into_owned()
        };
        return SystemInfo {
            hostname: field(&uts.nodename),
            platform: format!(
                "{}-{}-{}",
                field(&uts.sysname),
                field(&uts.release),
                field(&uts.machine)
            ),
        };
    }
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "unknown".to_string());
    SystemInfo {
        hostname,
        platform: format!("{}-{}", std::env::consts::OS, std::env::consts::ARCH),
    }
}

/// Index and event columns of the columnar layout.
///
/// Optional event columns, to keep files small (16 bytes per call in the common case):
/// `thread_ids` when threads are tracked or the calls ran on more than one thread (without
/// them the reader would see one lane and could not nest concurrent threads), `call_ids` and
/// `parent_ids` when threads are tracked and nesting succeeded (the reader rebuilds the same
/// tree from timestamps and lanes otherwise), `task_ids`/`await_ns` when tasks are tracked,
/// `gpu_durations` when any call has a device time.
fn write_columnar(
    ctx: &Ctx<'_>,
    index: &Group,
    events: &Group,
    data: &PhaseData,
    scan: &Scan,
    opts: &WriteOptions,
) -> Result<(), Error> {
    let regions = &data.regions[..];
    let r = regions.len();
    let region_ids: Vec<u32> = (0..r as u32).collect();
    let lines: Vec<i64> = regions.iter().map(|row| row.line).collect();
    let mut offsets = Vec::with_capacity(r);
    let mut at = 0u64;
    for &c in &scan.counts {
        offsets.push(at);
        at += c;
    }
    ctx.dataset(index, "region_ids", &region_ids, None)?;
    ctx.dataset(index, "ranks", &vec![0u32; r], None)?;
    ctx.dataset(index, "event_offsets", &offsets, None)?;
    ctx.dataset(index, "event_counts", &scan.counts, None)?;
    ctx.dataset(index, "source_lines", &lines, None)?;
    ctx.strings(
        index,
        "source_files",
        regions.iter().map(|row| row.file.as_str()),
    )?;
    let texts = &data.extra.source_texts;
    ctx.strings(
        index,
        "source_texts",
        (0..r).map(|i| texts.get(i).map_or("", String::as_str)),
    )?;
    ctx.strings(index, "tags", regions.iter().map(|_| "[]"))?;
    ctx.dataset(
        index,
        "exclusive_totals",
        &exclusive_totals(data, scan),
        None,
    )?;
    ctx.dataset(index, "summary_statistics", &scan.summary, None)?;
    events::write_events(ctx, events, data, scan, opts.gzip)
}

/// `rank_region_index/exclusive_totals`: from nesting when it was done, else the flusher's.
pub(crate) fn exclusive_totals(data: &PhaseData, scan: &Scan) -> Vec<i64> {
    match &scan.nested {
        Some(n) => n.exclusive.clone(),
        None => data.regions.iter().map(|row| row.exclusive_ns).collect(),
    }
}

/// Index columns of the aggregate layout (§1.10): ids, ranks and the five `aggregate_*`
/// columns hold one row per region; the per-call index columns and `events/*` are empty.
fn write_aggregate(
    ctx: &Ctx<'_>,
    index: &Group,
    events: &Group,
    regions: &[RegionRow],
) -> Result<(), Error> {
    let r = regions.len();
    let region_ids: Vec<u32> = (0..r as u32).collect();
    let stat = |f: fn(&RegionRow) -> u64| -> Vec<i64> {
        regions
            .iter()
            .map(|row| i64::try_from(f(row)).unwrap_or(i64::MAX))
            .collect()
    };
    let counts: Vec<u64> = regions.iter().map(|row| row.stats.count).collect();
    let totals = stat(|row| row.stats.total);
    ctx.dataset(index, "region_ids", &region_ids, None)?;
    ctx.dataset(index, "ranks", &vec![0u32; r], None)?;
    ctx.dataset(index, "aggregate_counts", &counts, None)?;
    ctx.dataset(index, "aggregate_totals", &totals, None)?;
    ctx.dataset(
        index,
        "aggregate_minimums",
        &stat(|row| row.stats.min),
        None,
    )?;
    ctx.dataset(
        index,
        "aggregate_maximums",
        &stat(|row| row.stats.max),
        None,
    )?;
    // Exclusive time is not tracked in aggregate mode; the inclusive total is the same fallback
    // the Python summary reader uses when no exclusive figure is stored.
    ctx.dataset(index, "aggregate_exclusives", &totals, None)?;

    ctx.dataset::<u64>(index, "event_offsets", &[], None)?;
    ctx.dataset::<u64>(index, "event_counts", &[], None)?;
    ctx.dataset::<i64>(index, "source_lines", &[], None)?;
    ctx.dataset::<i64>(index, "exclusive_totals", &[], None)?;
    ctx.dataset::<SummaryRow>(index, "summary_statistics", &[], None)?;
    for name in ["source_files", "source_texts", "tags", "event_metadata"] {
        ctx.strings(index, name, [])?;
    }
    ctx.dataset::<i64>(events, "start_deltas", &[], None)?;
    ctx.dataset::<i64>(events, "durations", &[], None)
}

#[cfg(test)]
mod tests;

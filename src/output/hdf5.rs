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
//! them; the reader ignores `storage_layout = "aggregate"` unless it is one. Files are published
//! atomically: written to a temporary file beside the target, closed, given mode 0644 and
//! renamed over the target, so a reader never sees a half-written profile.

use std::ffi::{CStr, OsStr};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use ::hdf5::types::VarLenUnicode;
use ::hdf5::{File, Group, H5Type, Location};

use crate::error::Error;
use crate::output::model::{CallRecord, Layout, PhaseData, RegionRow};

/// Options for writing one profile file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct WriteOptions {
    /// Deflate level (0-9, larger values are clamped) for the per-call event columns, applied
    /// with the shuffle filter; `None` stores them uncompressed.
    pub gzip: Option<u8>,
}

/// Value of the root attribute `scope_profiler_schema`.
const SCHEMA_VERSION: i64 = 3;
/// Longest string attribute, in characters, before it is truncated (as the Python package does).
const MAX_ATTR_CHARS: usize = 60_000;
/// Suffix of a truncated string attribute.
const TRUNCATION_MARKER: &str = "...[truncated]";
/// Largest chunk, in elements, of a compressed event column.
const MAX_CHUNK: usize = 65_536;

/// Distinguishes the temporary files of concurrent writes within one process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// One `rank_region_index/summary_statistics` element: the 11-field packed compound of the
/// Python writer (88 bytes, member names and order exactly so).
#[derive(H5Type, Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
struct SummaryRow {
    /// Sum of durations (ns).
    total: i64,
    /// Smallest duration.
    minimum: i64,
    /// Largest duration.
    maximum: i64,
    /// Duration of the first stored call.
    first: i64,
    /// Duration of the last stored call.
    last: i64,
    /// Earliest absolute start.
    start_minimum: i64,
    /// Latest absolute end.
    end_maximum: i64,
    /// Calls with a GPU duration.
    gpu_count: u64,
    /// Sum of GPU durations.
    gpu_total: i64,
    /// Mean duration (ns).
    mean: f64,
    /// Sum of squared deviations from the mean.
    m2: f64,
}

/// Writes `data` as a complete schema-3 profile and publishes it atomically at `path`.
///
/// The file is first written to `.<name>.<pid>.<n>.tmp` in the target's directory, closed, set
/// to mode 0644 and renamed over `path`. On any failure the temporary file is removed, `path` is
/// left as it was, and the error names `path` and the step or HDF5 object that failed.
pub(crate) fn write_phase(path: &Path, data: &PhaseData, opts: &WriteOptions) -> Result<(), Error> {
    let tmp = create_temp(path)?;
    let result = write_file(&tmp, path, data, opts).and_then(|()| publish(&tmp, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Creates an empty temporary file `.<name>.<pid>.<counter>.tmp` beside `path`.
///
/// Creating it ourselves (rather than letting HDF5 do it) turns a missing directory or a
/// permission problem into an I/O error with its real cause instead of an opaque HDF5 message.
fn create_temp(path: &Path) -> Result<PathBuf, Error> {
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
    let mut attempts = 0;
    loop {
        let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        let tmp_name = format!(".{}.{}.{n}.tmp", name.to_string_lossy(), std::process::id());
        let tmp = path.with_file_name(OsStr::new(&tmp_name));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
        {
            Ok(_) => return Ok(tmp),
            // A stale file of an earlier process with the same pid: take the next name.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempts < 16 => attempts += 1,
            Err(e) => return Err(output_err(e)),
        }
    }
}

/// Sets mode 0644 on the finished temporary file, syncs it and renames it over the target.
fn publish(tmp: &Path, path: &Path) -> Result<(), Error> {
    use std::os::unix::fs::PermissionsExt;
    let io_err = |context: &str| {
        let context = context.to_string();
        move |source| Error::Io {
            context,
            path: path.to_path_buf(),
            source,
        }
    };
    std::fs::set_permissions(tmp, std::fs::Permissions::from_mode(0o644))
        .map_err(io_err("setting the profile's permissions"))?;
    // No fsync: the rename makes publication atomic for readers and against a crash of this
    // process (the kernel keeps the data); syncing a large profile would cost seconds of
    // finalize time for protection against power loss only.
    std::fs::rename(tmp, path).map_err(io_err("publishing the profile (rename)"))
}

/// Maps HDF5 errors to [`Error::Hdf5`] for one target file.
pub(super) struct Ctx<'a> {
    /// The published path (what the user asked for), named in every error.
    pub(super) path: &'a Path,
}

impl Ctx<'_> {
    /// Converts an HDF5 result, naming `context` (the object being written) on failure.
    pub(super) fn h5<T>(&self, context: &str, result: ::hdf5::Result<T>) -> Result<T, Error> {
        result.map_err(|e| Error::Hdf5 {
            path: self.path.to_path_buf(),
            context: context.to_string(),
            message: e.to_string(),
        })
    }

    /// Creates the group `name` under the root.
    pub(super) fn group(&self, file: &File, name: &str) -> Result<Group, Error> {
        self.h5(name, file.create_group(name))
    }

    /// Writes a 1-D dataset `group/name` holding `values`; compressed (shuffle + deflate) when
    /// `gzip` is set and there is at least one element.
    pub(super) fn dataset<T: H5Type>(
        &self,
        group: &Group,
        name: &str,
        values: &[T],
        gzip: Option<u8>,
    ) -> Result<(), Error> {
        let context = format!("{}/{name}", group.name().trim_start_matches('/'));
        let created = if values.is_empty() {
            group.new_dataset::<T>().shape(0).create(name)
        } else {
            let mut builder = group.new_dataset_builder();
            if let Some(level) = gzip {
                builder = builder
                    .chunk(values.len().min(MAX_CHUNK))
                    .shuffle()
                    .deflate(level.min(9));
            }
            builder.with_data(values).create(name)
        };
        self.h5(&context, created).map(drop)
    }

    /// Writes a 1-D variable-length UTF-8 string dataset.
    pub(super) fn strings<'s>(
        &self,
        group: &Group,
        name: &str,
        values: impl IntoIterator<Item = &'s str>,
    ) -> Result<(), Error> {
        let values: Vec<VarLenUnicode> = values.into_iter().map(vlen).collect();
        self.dataset(group, name, &values, None)
    }

    /// Writes a scalar attribute of any fixed type.
    pub(super) fn attr<T: H5Type>(
        &self,
        loc: &Location,
        name: &str,
        value: &T,
    ) -> Result<(), Error> {
        let context = format!("{}@{name}", loc.name().trim_start_matches('/'));
        let written = loc
            .new_attr::<T>()
            .shape(())
            .create(name)
            .and_then(|attr| attr.write_scalar(value));
        self.h5(&context, written)
    }

    /// Writes a scalar variable-length UTF-8 string attribute, truncated to 60,000 characters.
    pub(super) fn attr_str(&self, loc: &Location, name: &str, value: &str) -> Result<(), Error> {
        self.attr(loc, name, &vlen(&truncate(value)))
    }
}

/// Converts to `VarLenUnicode`, which cannot hold NUL: those become U+FFFD.
fn vlen(s: &str) -> VarLenUnicode {
    let cleaned;
    let s = if s.contains('\0') {
        cleaned = s.replace('\0', "\u{FFFD}");
        &cleaned
    } else {
        s
    };
    // Cannot fail: NULs were replaced above. Fall back to an empty string rather than panic.
    s.parse().unwrap_or_default()
}

/// Clips a string longer than [`MAX_ATTR_CHARS`] characters, ending it with the marker.
fn truncate(s: &str) -> std::borrow::Cow<'_, str> {
    match s.char_indices().nth(MAX_ATTR_CHARS) {
        None => s.into(),
        Some(_) => {
            let keep = MAX_ATTR_CHARS - TRUNCATION_MARKER.chars().count();
            let end = s.char_indices().nth(keep).map_or(s.len(), |(i, _)| i);
            format!("{}{TRUNCATION_MARKER}", &s[..end]).into()
        }
    }
}

/// Writes the whole file at `tmp` (errors name `target`) and closes it.
fn write_file(
    tmp: &Path,
    target: &Path,
    data: &PhaseData,
    opts: &WriteOptions,
) -> Result<(), Error> {
    let ctx = Ctx { path: target };
    // No HDF5 file locking: the file is our private temporary until the rename, and HDF5's
    // flock lives on a descriptor without O_CLOEXEC, so a child process the program spawns
    // while we write would otherwise keep the published file locked for its whole life.
    let file = ctx.h5(
        "the file",
        File::with_options()
            .with_fapl(|p| p.file_locking(false))
            .create(tmp),
    )?;
    write_contents(&ctx, &file, data, opts)?;
    ctx.h5("the file (closing)", file.close())
}

/// Root attributes, `metadata`, `region_table`, `rank_region_index` and `events`.
fn write_contents(
    ctx: &Ctx<'_>,
    file: &File,
    data: &PhaseData,
    opts: &WriteOptions,
) -> Result<(), Error> {
    let layout = match data.layout {
        Layout::Columnar => "columnar",
        Layout::Aggregate => "aggregate",
    };
    ctx.attr(file, "scope_profiler_schema", &SCHEMA_VERSION)?;
    ctx.attr_str(file, "storage_layout", layout)?;

    write_metadata(ctx, &ctx.group(file, "metadata")?, data)?;

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
            write_columnar(ctx, &index, &events, data, opts)?;
            crate::output::hdf5_lanes::write_lanes(ctx, file, data)?;
        }
        Layout::Aggregate => write_aggregate(ctx, &index, &events, &data.regions)?,
    }
    crate::output::hdf5_aux::write_aux(file, ctx.path, data)?;
    crate::output::hdf5_lines::write_lines(ctx, file, &data.extra)
}

/// The `metadata` group's attributes: the Python package's keys plus this crate's own.
fn write_metadata(ctx: &Ctx<'_>, meta: &Group, data: &PhaseData) -> Result<(), Error> {
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
    // The compiler version is not available without a build script; say so plainly.
    ctx.attr_str(meta, "rust_version", "unknown")?;
    let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    ctx.attr(meta, "dropped_records", &count(data.dropped))?;
    ctx.attr(meta, "dropped_calls", &count(data.losses.dropped_calls))?;
    ctx.attr(meta, "backpressure_waits", &count(data.losses.waits))?;
    ctx.attr(meta, "backpressure_wait_ns", &count(data.losses.wait_ns))?;
    crate::output::hdf5_lines::write_overhead(ctx, meta, &data.extra)
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

/// The per-call columns and per-row index columns of the columnar layout.
#[derive(Default)]
struct Columns {
    /// `rank_region_index/event_offsets`.
    offsets: Vec<u64>,
    /// `rank_region_index/event_counts`.
    counts: Vec<u64>,
    /// `rank_region_index/summary_statistics`.
    summary: Vec<SummaryRow>,
    /// `events/start_deltas`.
    start_deltas: Vec<i64>,
    /// `events/durations`.
    durations: Vec<i64>,
    /// `events/thread_ids`.
    thread_ids: Vec<i64>,
    /// `events/task_ids`.
    task_ids: Vec<i64>,
    /// `events/await_ns`.
    await_ns: Vec<i64>,
    /// `events/gpu_durations`.
    gpu_durations: Vec<i64>,
    /// `events/call_ids`.
    call_ids: Vec<i64>,
    /// `events/parent_ids`.
    parent_ids: Vec<i64>,
}

/// Which optional event columns a file gets (see [`write_columnar`]).
#[derive(Clone, Copy, Debug, Default)]
struct Optional {
    threads: bool,
    tasks: bool,
    gpu: bool,
    ids: bool,
}

impl Optional {
    fn of(data: &PhaseData) -> Optional {
        let calls = || data.regions.iter().flat_map(|r| r.calls.iter());
        let first_thread = calls().next().map_or(0, |c| c.thread);
        Optional {
            threads: data.track_threads || calls().any(|c| c.thread != first_thread),
            tasks: calls().any(|c| c.task >= 0),
            gpu: calls().any(|c| c.gpu_ns >= 0),
            ids: data.track_threads && calls().any(|c| c.call_id >= 0),
        }
    }
}

impl Columns {
    /// Lays out every row's calls back to back, in stored order (only the columns wanted).
    fn build(regions: &[RegionRow], want: Optional) -> Self {
        let n: usize = regions.iter().map(|r| r.calls.len()).sum();
        let cap = |on: bool| if on { n } else { 0 };
        let mut c = Columns {
            start_deltas: Vec::with_capacity(n),
            durations: Vec::with_capacity(n),
            thread_ids: Vec::with_capacity(cap(want.threads)),
            task_ids: Vec::with_capacity(cap(want.tasks)),
            await_ns: Vec::with_capacity(cap(want.tasks)),
            gpu_durations: Vec::with_capacity(cap(want.gpu)),
            call_ids: Vec::with_capacity(cap(want.ids)),
            parent_ids: Vec::with_capacity(cap(want.ids)),
            ..Columns::default()
        };
        for row in regions {
            c.offsets.push(c.durations.len() as u64);
            c.counts.push(row.calls.len() as u64);
            c.summary.push(summarize(row));
            let mut previous = 0i64;
            for call in &row.calls {
                c.start_deltas.push(call.start_ns.wrapping_sub(previous));
                previous = call.start_ns;
                c.durations.push(call.dur_ns.max(0));
            }
            if want.threads {
                c.thread_ids
                    .extend(row.calls.iter().map(|x| i64::from(x.thread)));
            }
            if want.tasks {
                c.task_ids.extend(row.calls.iter().map(|x| x.task));
                c.await_ns.extend(row.calls.iter().map(|x| x.await_ns));
            }
            if want.gpu {
                c.gpu_durations
                    .extend(row.calls.iter().map(|x| x.gpu_ns.max(-1)));
            }
            if want.ids {
                c.call_ids.extend(row.calls.iter().map(|x| x.call_id));
                c.parent_ids.extend(row.calls.iter().map(|x| x.parent_id));
            }
        }
        c
    }
}

/// The summary compound of one row, from its calls in stored order. `mean`/`m2` come from the
/// row's running statistics when they describe exactly these calls, else they are recomputed.
fn summarize(row: &RegionRow) -> SummaryRow {
    let calls: &[CallRecord] = &row.calls;
    let (Some(first), Some(last)) = (calls.first(), calls.last()) else {
        return SummaryRow::default();
    };
    let mut s = SummaryRow {
        minimum: i64::MAX,
        maximum: i64::MIN,
        first: first.dur_ns.max(0),
        last: last.dur_ns.max(0),
        start_minimum: i64::MAX,
        end_maximum: i64::MIN,
        ..SummaryRow::default()
    };
    for call in calls {
        let d = call.dur_ns.max(0);
        s.total = s.total.wrapping_add(d);
        s.minimum = s.minimum.min(d);
        s.maximum = s.maximum.max(d);
        s.start_minimum = s.start_minimum.min(call.start_ns);
        s.end_maximum = s.end_maximum.max(call.start_ns.saturating_add(d));
        if call.gpu_ns >= 0 {
            s.gpu_count += 1;
            s.gpu_total += call.gpu_ns;
        }
    }
    let stats = &row.stats;
    if stats.count == calls.len() as u64 && stats.total == s.total as u64 {
        s.mean = stats.mean;
        s.m2 = stats.m2;
    } else {
        let mut recomputed = crate::stats::Stats::default();
        for call in calls {
            recomputed.add(call.dur_ns.max(0) as u64);
        }
        s.mean = recomputed.mean;
        s.m2 = recomputed.m2;
    }
    s
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
    opts: &WriteOptions,
) -> Result<(), Error> {
    let regions = &data.regions[..];
    let r = regions.len();
    let want = Optional::of(data);
    let c = Columns::build(regions, want);
    let region_ids: Vec<u32> = (0..r as u32).collect();
    let lines: Vec<i64> = regions.iter().map(|row| row.line).collect();
    ctx.dataset(index, "region_ids", &region_ids, None)?;
    ctx.dataset(index, "ranks", &vec![0u32; r], None)?;
    ctx.dataset(index, "event_offsets", &c.offsets, None)?;
    ctx.dataset(index, "event_counts", &c.counts, None)?;
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
    let exclusive: Vec<i64> = regions.iter().map(|row| row.exclusive_ns).collect();
    ctx.dataset(index, "exclusive_totals", &exclusive, None)?;
    ctx.dataset(index, "summary_statistics", &c.summary, None)?;

    let gzip = opts.gzip;
    ctx.dataset(events, "start_deltas", &c.start_deltas, gzip)?;
    ctx.dataset(events, "durations", &c.durations, gzip)?;
    if want.threads {
        ctx.dataset(events, "thread_ids", &c.thread_ids, gzip)?;
    }
    if want.tasks {
        ctx.dataset(events, "task_ids", &c.task_ids, gzip)?;
        ctx.dataset(events, "await_ns", &c.await_ns, gzip)?;
    }
    // Ids only when nesting succeeded (never an all-sentinel column, spec §1.7).
    if want.ids {
        ctx.dataset(events, "call_ids", &c.call_ids, gzip)?;
        ctx.dataset(events, "parent_ids", &c.parent_ids, gzip)?;
    }
    if want.gpu {
        ctx.dataset(events, "gpu_durations", &c.gpu_durations, gzip)?;
    }
    Ok(())
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

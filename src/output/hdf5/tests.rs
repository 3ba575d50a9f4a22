//! Tests of the schema-3 writer: files are written into temporary directories and read back with
//! the `hdf5` crate; `SCOPE_PROFILER_KEEP_H5=<dir>` keeps copies for checking with the Python
//! reader (`scripts/check_h5.py`, `scope-profiler inspect`).

use super::*;
use crate::data::rows::CallRecord;
use crate::data::stats::Stats;
use ::hdf5::filters::Filter;
use ::hdf5::types::TypeDescriptor;
use ::hdf5::types::VarLenUnicode;
use ::hdf5::{Dataset, H5Type, Location};

/// A region whose calls are `(start, end, thread, task)`.
fn row(name: &str, calls: &[(i64, i64, u32, i64)]) -> RegionRow {
    let mut stats = Stats::default();
    let calls: Vec<CallRecord> = calls
        .iter()
        .map(|&(start, end, thread, task)| {
            stats.add((end - start) as u64);
            CallRecord {
                task,
                await_ns: if task >= 0 { 7 } else { 0 },
                ..CallRecord::new(start, end - start, thread)
            }
        })
        .collect();
    RegionRow {
        file: "src/main.rs".to_string(),
        line: 42,
        stats,
        calls,
        ..RegionRow::new(name)
    }
}

fn phase(layout: Layout, regions: Vec<RegionRow>) -> PhaseData {
    PhaseData {
        start_time_ns: 500,
        finalize_time_ns: 10_000_000,
        timestamp: "2026-01-01T00:00:00+00:00".to_string(),
        label: Some("demo".to_string()),
        dropped: 3,
        track_threads: true,
        ..PhaseData::new(layout, regions)
    }
}

/// The §1.13 example: `outer` [1, 9] ms containing two `inner` calls [2, 3] and [4, 7] ms.
fn nested() -> PhaseData {
    let ms = 1_000_000;
    phase(
        Layout::Columnar,
        vec![
            row("outer", &[(ms, 9 * ms, 0, -1)]),
            row("inner", &[(2 * ms, 3 * ms, 0, -1), (4 * ms, 7 * ms, 0, -1)]),
        ],
    )
}

/// Writes `data` into a fresh directory; with `SCOPE_PROFILER_KEEP_H5=<dir>` also keeps a
/// copy there as `<name>.h5` for checking with the Python reader.
fn write(name: &str, data: &PhaseData, opts: WriteOptions) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(format!("{name}.h5"));
    write_phase(&path, data, &opts).unwrap();
    if let Some(keep) = std::env::var_os("SCOPE_PROFILER_KEEP_H5") {
        std::fs::create_dir_all(&keep).unwrap();
        std::fs::copy(&path, Path::new(&keep).join(format!("{name}.h5"))).unwrap();
    }
    (dir, path)
}

fn ds(file: &File, name: &str) -> Dataset {
    file.dataset(name).unwrap()
}

fn ints<T: H5Type>(file: &File, name: &str) -> Vec<T> {
    ds(file, name).read_raw().unwrap()
}

fn strs(file: &File, name: &str) -> Vec<String> {
    let d = ds(file, name);
    assert_eq!(
        d.dtype().unwrap().to_descriptor().unwrap(),
        TypeDescriptor::VarLenUnicode
    );
    let values: Vec<VarLenUnicode> = d.read_raw().unwrap();
    values.iter().map(|v| v.as_str().to_string()).collect()
}

fn attr_str(loc: &Location, name: &str) -> String {
    let attr = loc.attr(name).unwrap();
    assert_eq!(attr.shape(), Vec::<usize>::new(), "{name} must be scalar");
    let desc = attr.dtype().unwrap().to_descriptor().unwrap();
    assert_eq!(desc, TypeDescriptor::VarLenUnicode, "{name}");
    attr.read_scalar::<VarLenUnicode>()
        .unwrap()
        .as_str()
        .to_string()
}

fn attr_i64(loc: &Location, name: &str) -> i64 {
    let attr = loc.attr(name).unwrap();
    let desc = attr.dtype().unwrap().to_descriptor().unwrap();
    assert_eq!(
        desc,
        TypeDescriptor::Integer(::hdf5::types::IntSize::U8),
        "{name}"
    );
    attr.read_scalar().unwrap()
}

/// Decodes `events/start_deltas` of one index row back to absolute starts.
fn starts(deltas: &[i64], offset: u64, count: u64) -> Vec<i64> {
    let slice = &deltas[offset as usize..(offset + count) as usize];
    slice
        .iter()
        .scan(0i64, |acc, d| {
            *acc += d;
            Some(*acc)
        })
        .collect()
}

fn dir_entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn columnar_nested_example() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, path) = write("nested", &nested(), WriteOptions::default());
    assert_eq!(
        dir_entries(dir.path()),
        ["nested.h5"],
        "temp file left behind"
    );
    // Private by default (issue 34: profiles embed source text).
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);

    let f = File::open(&path).unwrap();
    assert_eq!(attr_i64(&f, "scope_profiler_schema"), 3);
    assert_eq!(attr_str(&f, "storage_layout"), "columnar");
    assert_eq!(strs(&f, "region_table/names"), ["outer", "inner"]);
    assert_eq!(ints::<u32>(&f, "rank_region_index/region_ids"), [0, 1]);
    assert_eq!(ints::<u32>(&f, "rank_region_index/ranks"), [0, 0]);
    assert_eq!(ints::<u64>(&f, "rank_region_index/event_offsets"), [0, 1]);
    assert_eq!(ints::<u64>(&f, "rank_region_index/event_counts"), [1, 2]);
    assert_eq!(ints::<i64>(&f, "rank_region_index/source_lines"), [42, 42]);
    assert_eq!(
        ints::<i64>(&f, "rank_region_index/exclusive_totals"),
        [-1, -1]
    );
    assert_eq!(
        strs(&f, "rank_region_index/source_files"),
        ["src/main.rs"; 2]
    );
    assert_eq!(strs(&f, "rank_region_index/source_texts"), ["", ""]);
    assert_eq!(strs(&f, "rank_region_index/tags"), ["[]", "[]"]);
    let deltas = ints::<i64>(&f, "events/start_deltas");
    assert_eq!(deltas, [1_000_000, 2_000_000, 2_000_000]);
    assert_eq!(
        ints::<i64>(&f, "events/durations"),
        [8_000_000, 1_000_000, 3_000_000]
    );
    assert_eq!(ints::<i64>(&f, "events/thread_ids"), [0, 0, 0]);
    assert!(
        f.dataset("events/task_ids").is_err(),
        "no task ran, so no task_ids"
    );
    assert!(f.dataset("events/await_ns").is_err());
    assert!(!ds(&f, "events/durations").is_chunked());

    let summary: Vec<SummaryRow> = ints(&f, "rank_region_index/summary_statistics");
    assert_eq!(
        ds(&f, "rank_region_index/summary_statistics")
            .dtype()
            .unwrap()
            .size(),
        88
    );
    let inner = SummaryRow {
        total: 4_000_000,
        minimum: 1_000_000,
        maximum: 3_000_000,
        first: 1_000_000,
        last: 3_000_000,
        start_minimum: 2_000_000,
        end_maximum: 7_000_000,
        gpu_count: 0,
        gpu_total: 0,
        mean: 2_000_000.0,
        m2: 2.0e12,
    };
    assert_eq!(summary[1], inner);
    assert_eq!(
        (summary[0].total, summary[0].end_maximum),
        (8_000_000, 9_000_000)
    );

    let meta = f.group("metadata").unwrap();
    assert_eq!(attr_i64(&meta, "start_time_ns"), 500);
    assert_eq!(attr_i64(&meta, "finalize_time_ns"), 10_000_000);
    assert_eq!(attr_i64(&meta, "mpi_size"), 1);
    assert_eq!(attr_i64(&meta, "num_nodes"), 1);
    assert_eq!(attr_i64(&meta, "dropped_records"), 3);
    assert_eq!(attr_str(&meta, "label"), "demo");
    assert_eq!(attr_str(&meta, "timestamp"), "2026-01-01T00:00:00+00:00");
    assert!(attr_str(&meta, "writer").starts_with("scope-profiler-rs "));
    assert!(!attr_str(&meta, "hostname").is_empty());
    assert!(attr_str(&meta, "platform").contains('-'));
    assert!(!attr_str(&meta, "command").is_empty());
    let rust = attr_str(&meta, "rust_version");
    let major_minor: Vec<&str> = rust.split('.').take(2).collect();
    assert!(
        major_minor.len() == 2 && major_minor.iter().all(|p| p.parse::<u32>().is_ok()),
        "rust_version is the compiler's, not {rust:?}"
    );
}

#[test]
fn odd_names_threads_and_tasks_round_trip() {
    // Stored order is not chronological (grouped by thread): deltas go negative.
    let names = ["a b/c:d ünï 名前", "x\u{0}y", "scope_profiler.session"];
    let mut data = phase(
        Layout::Columnar,
        vec![
            row(
                names[0],
                &[(100, 150, 0, -1), (300, 310, 0, -1), (120, 400, 1, -1)],
            ),
            row(names[1], &[(200, 260, 1, 0), (210, 220, 0, 2)]),
            row(names[2], &[(50, 500, 0, -1)]),
        ],
    );
    data.label = None;
    let (_dir, path) = write("odd", &data, WriteOptions::default());
    let f = File::open(&path).unwrap();
    let expected = ["a b/c:d ünï 名前", "x\u{FFFD}y", "scope_profiler.session"];
    assert_eq!(strs(&f, "region_table/names"), expected);
    assert!(f.group("metadata").unwrap().attr("label").is_err());
    let deltas = ints::<i64>(&f, "events/start_deltas");
    let offsets = ints::<u64>(&f, "rank_region_index/event_offsets");
    let counts = ints::<u64>(&f, "rank_region_index/event_counts");
    assert_eq!(counts, [3, 2, 1]);
    for (row, (&off, &n)) in data.regions.iter().zip(offsets.iter().zip(&counts)) {
        let expect: Vec<i64> = row.calls.iter().map(|c| c.start_ns).collect();
        assert_eq!(starts(&deltas, off, n), expect, "{}", row.name);
    }
    assert!(deltas.contains(&-180));
    assert_eq!(ints::<i64>(&f, "events/thread_ids"), [0, 0, 1, 1, 0, 0]);
    assert_eq!(ints::<i64>(&f, "events/task_ids"), [-1, -1, -1, 0, 2, -1]);
    assert_eq!(ints::<i64>(&f, "events/await_ns"), [0, 0, 0, 7, 7, 0]);
    let summary: Vec<SummaryRow> = ints(&f, "rank_region_index/summary_statistics");
    assert_eq!((summary[0].first, summary[0].last), (50, 280));
    assert_eq!(
        (summary[0].start_minimum, summary[0].end_maximum),
        (100, 400)
    );
    assert_eq!(summary[0].total as u64, data.regions[0].stats.total);
    assert_eq!(summary[0].m2, data.regions[0].stats.m2);
}

#[test]
fn aggregate_layout_follows_the_python_writer() {
    let mut data = nested();
    data.layout = Layout::Aggregate;
    for r in &mut data.regions {
        r.calls.clear();
    }
    let (_dir, path) = write("aggregate", &data, WriteOptions::default());
    let f = File::open(&path).unwrap();
    assert_eq!(attr_str(&f, "storage_layout"), "aggregate");
    assert_eq!(strs(&f, "region_table/names"), ["outer", "inner"]);
    let idx = |n: &str| format!("rank_region_index/{n}");
    assert_eq!(ints::<u32>(&f, &idx("region_ids")), [0, 1]);
    assert_eq!(ints::<u32>(&f, &idx("ranks")), [0, 0]);
    assert_eq!(ints::<u64>(&f, &idx("aggregate_counts")), [1, 2]);
    assert_eq!(
        ints::<i64>(&f, &idx("aggregate_totals")),
        [8_000_000, 4_000_000]
    );
    assert_eq!(
        ints::<i64>(&f, &idx("aggregate_minimums")),
        [8_000_000, 1_000_000]
    );
    assert_eq!(
        ints::<i64>(&f, &idx("aggregate_maximums")),
        [8_000_000, 3_000_000]
    );
    assert_eq!(
        ints::<i64>(&f, &idx("aggregate_exclusives")),
        [8_000_000, 4_000_000]
    );
    for name in [
        "event_offsets",
        "event_counts",
        "source_lines",
        "exclusive_totals",
        "summary_statistics",
        "source_files",
        "source_texts",
        "tags",
        "event_metadata",
    ] {
        assert_eq!(ds(&f, &idx(name)).shape(), [0], "{name}");
    }
    for name in ["events/start_deltas", "events/durations"] {
        assert_eq!(ds(&f, name).shape(), [0], "{name}");
    }
    assert!(f.dataset("events/thread_ids").is_err());
}

#[test]
fn empty_phase_is_a_valid_file() {
    for layout in [Layout::Columnar, Layout::Aggregate] {
        let data = phase(layout, Vec::new());
        let opts = WriteOptions {
            gzip: Some(4),
            ..WriteOptions::default()
        };
        let (_dir, path) = write(&format!("empty-{layout:?}"), &data, opts);
        let f = File::open(&path).unwrap();
        assert_eq!(attr_i64(&f, "scope_profiler_schema"), 3);
        for name in [
            "region_table/names",
            "rank_region_index/region_ids",
            "rank_region_index/ranks",
            "rank_region_index/event_offsets",
            "rank_region_index/event_counts",
            "rank_region_index/source_lines",
            "rank_region_index/source_files",
            "rank_region_index/source_texts",
            "rank_region_index/tags",
            "events/start_deltas",
            "events/durations",
        ] {
            assert_eq!(ds(&f, name).shape(), [0], "{layout:?} {name}");
        }
    }
}

#[test]
fn gzip_compresses_event_columns_only() {
    let calls: Vec<(i64, i64, u32, i64)> = (0..100_000)
        .map(|i| (i * 1000, i * 1000 + 400 + i % 7, 0, -1))
        .collect();
    let data = phase(Layout::Columnar, vec![row("hot", &calls), row("idle", &[])]);
    let (_dir, path) = write(
        "gzip",
        &data,
        WriteOptions {
            gzip: Some(6),
            ..WriteOptions::default()
        },
    );
    let f = File::open(&path).unwrap();
    for name in [
        "events/start_deltas",
        "events/durations",
        "events/thread_ids",
    ] {
        let d = ds(&f, name);
        assert!(d.is_chunked(), "{name}");
        assert_eq!(d.filters(), [Filter::Shuffle, Filter::Deflate(6)], "{name}");
    }
    assert!(ds(&f, "rank_region_index/event_counts")
        .filters()
        .is_empty());
    let deltas = ints::<i64>(&f, "events/start_deltas");
    assert_eq!(starts(&deltas, 0, 100_000)[99_999], 99_999_000);
    assert_eq!(ints::<i64>(&f, "events/durations")[8], 401);
    assert_eq!(
        ints::<u64>(&f, "rank_region_index/event_counts"),
        [100_000, 0]
    );
    let summary: Vec<SummaryRow> = ints(&f, "rank_region_index/summary_statistics");
    assert_eq!(
        summary[1],
        SummaryRow::default(),
        "a zero-call row is all zeros"
    );
    assert!(std::fs::metadata(&path).unwrap().len() < 800_000);
}

#[test]
fn replaces_an_existing_file() {
    let (dir, path) = write("replace", &nested(), WriteOptions::default());
    let data = phase(Layout::Columnar, vec![row("only", &[(1, 2, 0, -1)])]);
    write_phase(&path, &data, &WriteOptions::default()).unwrap();
    let f = File::open(&path).unwrap();
    assert_eq!(strs(&f, "region_table/names"), ["only"]);
    assert_eq!(dir_entries(dir.path()), ["replace.h5"]);
}

#[test]
fn unwritable_path_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("missing").join("out.h5");
    let err = write_phase(&path, &nested(), &WriteOptions::default()).unwrap_err();
    assert!(matches!(err, Error::OutputPath { .. }), "{err:?}");
    assert!(err.to_string().contains(&*path.to_string_lossy()), "{err}");
    // A directory in the way of the rename: the temp file must be cleaned up.
    let blocked = dir.path().join("blocked.h5");
    std::fs::create_dir(&blocked).unwrap();
    std::fs::write(blocked.join("keep"), b"x").unwrap();
    let err = write_phase(&blocked, &nested(), &WriteOptions::default()).unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err:?}");
    assert!(err.to_string().contains("blocked.h5"), "{err}");
    assert_eq!(
        dir_entries(dir.path()),
        ["blocked.h5"],
        "temp file left behind"
    );
    let err = write_phase(Path::new("/"), &nested(), &WriteOptions::default()).unwrap_err();
    assert!(matches!(err, Error::OutputPath { .. }), "{err:?}");
}

#[test]
fn long_strings_are_truncated_with_a_marker() {
    let long = "é".repeat(MAX_ATTR_CHARS + 10);
    let t = truncate(&long);
    assert_eq!(t.chars().count(), MAX_ATTR_CHARS);
    assert!(t.ends_with(TRUNCATION_MARKER));
    assert_eq!(truncate("short"), "short");
    let exact = "x".repeat(MAX_ATTR_CHARS);
    assert_eq!(truncate(&exact).len(), MAX_ATTR_CHARS);
}

#[test]
fn summary_recomputes_when_stats_disagree() {
    let mut r = row("r", &[(0, 10, 0, -1), (20, 50, 0, -1)]);
    let good = summarize(&r);
    r.stats = Stats::default();
    assert_eq!(summarize(&r), good);
    assert_eq!((good.mean, good.m2), (20.0, 200.0));
}

#[test]
fn hdf5_failures_name_the_object_and_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h5err.h5");
    let file = File::create(&path).unwrap();
    let ctx = Ctx { path: &path };
    ctx.group(&file, "events").unwrap();
    let err = ctx.group(&file, "events").unwrap_err();
    match &err {
        Error::Hdf5 {
            path: p,
            context,
            message,
        } => {
            assert_eq!((p.as_path(), context.as_str()), (path.as_path(), "events"));
            assert!(!message.is_empty());
        }
        other => panic!("expected Error::Hdf5, got {other:?}"),
    }
    assert!(err.to_string().contains("h5err.h5"), "{err}");
}

#[test]
fn stale_temp_file_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stale.h5");
    // Occupy the next temp names (tests running in parallel may take some of the numbers; the
    // write must succeed either way).
    let next = TEMP_COUNTER.load(Ordering::Relaxed);
    let tag = crate::data::host::ProcTag::here().render();
    for n in next..next + 4 {
        let stale = format!(".stale.h5.{tag}.{n}.tmp");
        std::fs::write(dir.path().join(stale), b"old").unwrap();
    }
    write_phase(&path, &nested(), &WriteOptions::default()).unwrap();
    assert!(File::open(&path).is_ok());
}

/// A published profile is `0600` unless the options say otherwise, and the temporary file
/// is never readable by others, even for a moment (it is made in a private directory).
#[test]
fn profiles_are_private_unless_a_mode_is_given() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    let private = dir.path().join("private.h5");
    write_phase(&private, &nested(), &WriteOptions::default()).unwrap();
    assert_eq!(mode(&private), 0o600);
    let shared = dir.path().join("shared.h5");
    let opts = WriteOptions {
        mode: 0o644,
        ..WriteOptions::default()
    };
    write_phase(&shared, &nested(), &opts).unwrap();
    assert_eq!(mode(&shared), 0o644);
    let (tmp, file) = create_temp(&dir.path().join("t.h5")).unwrap();
    assert_eq!(mode(&tmp), 0o600, "{}", tmp.display());
    drop(file);
    // Nothing but the temporary file is left (no private directory).
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 3, "{names:?}");
}

/// Stale temporary files go only when their process is known dead: one of this host and
/// namespace whose pid is gone goes; one of a live process, of another host, of another pid
/// namespace or in the old pid-only format stays.
#[test]
fn only_temporaries_of_dead_processes_here_go() {
    use crate::data::host::ProcTag;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p.h5");
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let here = ProcTag::here();
    let gone = ProcTag { pid: dead, ..here };
    let name = |t: &ProcTag| dir.path().join(format!(".p.h5.{}.0.tmp", t.render()));
    let stale = name(&gone);
    let kept = [
        name(&here),
        name(&ProcTag {
            boot: here.boot ^ 1,
            ..gone
        }),
        name(&ProcTag {
            ns: here.ns ^ 1,
            ..gone
        }),
        dir.path().join(format!(".p.h5.{dead}.0.tmp")),
        dir.path().join(".p.h5.spool"),
    ];
    for f in kept.iter().chain([&stale]) {
        std::fs::write(f, b"x").unwrap();
    }
    assert_eq!(remove_stale_temps(&out), 1);
    assert!(!stale.exists());
    for f in &kept {
        assert!(f.exists(), "{} was removed", f.display());
    }
}

#[test]
fn a_staged_file_is_completed_at_its_target_or_removed() {
    use crate::data::rows::{PollRecord, TaskRow};
    use crate::output::hdf5::lanes::Lanes;
    use crate::output::hdf5::staged::Staged;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("staged.h5");
    let mut data = nested();
    data.track_async = true;
    data.region_names = vec!["outer".into(), "inner".into()];
    let tasks = [TaskRow {
        index: 0,
        tokio_id: 7,
        thread_index: 0,
        created_ns: 1_000,
        done_ns: 2_000,
        steps: 2,
        running_ns: 500,
        suspended_ns: 500,
        root_region: 0,
        sched: Default::default(),
    }];
    let polls = [PollRecord {
        region: 0,
        start_ns: 1_000,
        dur_ns: 100,
        thread: 0,
        task: 0,
        sched_ns: -1,
    }];
    let lanes = Lanes {
        tasks: &tasks,
        polls: &polls,
    };
    let scan = events::scan(&data, None).unwrap();
    let opts = WriteOptions::default();
    // Dropped unpublished (the phase failed): its temporary file goes.
    let staged = Staged::begin(&path, &data, lanes).unwrap();
    assert_eq!(dir_entries(dir.path()).len(), 1, "the temporary file");
    drop(staged);
    assert!(dir_entries(dir.path()).is_empty());
    // Completed: the published file holds the lanes written first and the calls.
    let staged = Staged::begin(&path, &data, lanes).unwrap();
    write_scanned(&path, &data, &scan, &opts, Some(staged)).unwrap();
    assert_eq!(dir_entries(dir.path()), ["staged.h5"]);
    let f = File::open(&path).unwrap();
    assert_eq!(ints::<u64>(&f, "task_table/tokio_id"), [7]);
    assert_eq!(strs(&f, "task_table/coro_name"), ["outer"]);
    assert_eq!(ints::<i64>(&f, "scope_profiler_rs/polls/durations"), [100]);
    assert_eq!(ints::<u64>(&f, "rank_region_index/event_counts"), [1, 2]);
    drop(f);
    // Published elsewhere (another directory): written whole there from the phase's own
    // lanes; the staged file goes.
    let other = tempfile::tempdir().unwrap();
    let moved = other.path().join("moved.h5");
    (data.tasks, data.polls) = (tasks.to_vec(), polls.to_vec());
    let staged = Staged::begin(&path, &data, lanes).unwrap();
    write_scanned(&moved, &data, &scan, &opts, Some(staged)).unwrap();
    assert_eq!(dir_entries(dir.path()), ["staged.h5"]);
    assert_eq!(dir_entries(other.path()), ["moved.h5"]);
    let f = File::open(&moved).unwrap();
    assert_eq!(ints::<u64>(&f, "task_table/tokio_id"), [7]);
}

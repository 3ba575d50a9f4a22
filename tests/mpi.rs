//! Multi-rank runs under `mpirun -n 4` (feature `mpi`, OpenMPI).
//!
//! This test binary is its own MPI program (`harness = false`): run plainly, it launches
//! itself under `mpirun` once per scenario, with `SCOPE_MPI_TEST_ROLE` naming the scenario,
//! and checks the files the ranks wrote with the Python reference reader. Under `mpirun`
//! each rank runs the scenario and exits non-zero when its own checks fail, which fails the
//! `mpirun` and the test.

use std::path::{Path, PathBuf};
use std::process::Command;

use scope_profiler::ScopeLayer;
use tracing_subscriber::prelude::*;

#[path = "common/mod.rs"]
mod common;

const RANKS: u32 = 4;
/// Calls of `work` on rank r: all different.
fn work_calls(rank: u32) -> u64 {
    100 * (u64::from(rank) + 1) + u64::from(rank)
}
/// Calls of `thread_work` (on a second thread) on rank r.
fn thread_calls(rank: u32) -> u64 {
    10 + u64::from(rank)
}
/// Tasks (each one `task_work` call) on rank r.
fn task_calls(rank: u32) -> u64 {
    3 + u64::from(rank)
}
/// The skew injected into rank 2's clock in the clock scenario.
const SKEW_NS: i64 = 7_000_000_000;
/// Extra `work` calls of ranks 0 and 1 in the full-disk scenario: rank 2's rows then lie
/// past its file size limit ([`FULL_LIMIT`]).
const BIG: u64 = 100_000;
/// Rank 2's file size limit (RLIMIT_FSIZE) in the full-disk scenario: above its own spool and
/// auxiliary part, below its rows in the shared file.
const FULL_LIMIT: u64 = 1 << 20;

fn main() {
    match std::env::var("SCOPE_MPI_TEST_ROLE") {
        Ok(role) => rank_main(&role),
        Err(_) => launcher_main(),
    }
}

// ---------------------------------------------------------------- the rank program

fn world_rank() -> u32 {
    std::env::var("OMPI_COMM_WORLD_RANK")
        .ok()
        .and_then(|v| v.parse().ok())
        .expect("run by mpirun")
}

fn rank_main(role: &str) {
    let out = PathBuf::from(std::env::var("SCOPE_MPI_TEST_OUT").expect("output"));
    let rank = world_rank();
    if role == "clock" && rank == 2 {
        // Before the profiler's clock exists (it reads this once).
        std::env::set_var("SCOPE_PROFILER_TEST_CLOCK_SKEW_NS", SKEW_NS.to_string());
    }
    let mut builder = ScopeLayer::builder();
    if role == "equal" {
        // The same phases, published by the relay too.
        builder = builder.__mpi_also_relay(out.with_file_name("relay.h5"));
    }
    if role == "flusher" && rank == 2 {
        // This rank's flusher fails (a test hook): its finalize cannot produce a phase.
        builder = builder.__fail_flusher_at(1);
    }
    let (layer, guard) = builder
        .output(&out)
        .mpi(true)
        .track_threads(true)
        .track_async(true)
        .perf_events(["task-clock"])
        .label("mpi test")
        .build()
        .expect("build");
    let d = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    tracing::dispatcher::with_default(&d, || match role {
        "counts" | "die" | "flusher" | "equal" => record_counts(&d, rank),
        "full" => {
            record_counts(&d, rank);
            for _ in 0..if rank < 2 { BIG } else { 0 } {
                tracing::info_span!("work").in_scope(|| std::hint::black_box(rank));
            }
        }
        "clock" => {
            use mpi::traits::*;
            mpi::topology::SimpleCommunicator::world().barrier();
            let _s = tracing::info_span!("aligned").entered();
        }
        other => panic!("unknown role {other}"),
    });
    if role == "die" && rank == 3 {
        // Dies before the collective finalize; the others must not publish a file.
        std::process::abort();
    }
    if role == "full" && rank == 2 {
        limit_file_size(FULL_LIMIT);
    }
    let report = guard.finalize();
    if role == "full" {
        // Rank 2's writes fail; every rank gets the error, nothing is published.
        match &report {
            Err(e) => {
                let text = e.to_string();
                assert!(
                    text.contains("MPI: publishing the multi-rank profile: rank 2: "),
                    "rank {rank}: {text}"
                );
                eprintln!("rank {rank} failed as planned: {text}");
            }
            Ok(r) => panic!("rank {rank}: published {:?}", r.file()),
        }
        assert!(!out.exists(), "rank {rank}: a file was published");
        drop(guard);
        return;
    }
    if role == "flusher" {
        // Every rank gets an error, none waits forever, nothing is published.
        match (&report, rank) {
            (Err(e), r) if r != 2 => {
                // Error::Unpublished (the spool keeps the phase) over Error::Mpi.
                let text = e.to_string();
                assert!(
                    text.contains("MPI: publishing the multi-rank profile: rank 2"),
                    "rank {rank}: {text}"
                );
            }
            (Err(e), 2) => eprintln!("rank 2 failed as planned: {e}"),
            (other, _) => panic!("rank {rank}: {other:?}"),
        }
        assert!(!out.exists(), "rank {rank}: a file was published");
        drop(guard); // its finalize fails the same way, collectively
        return;
    }
    let report = match report {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rank {rank}: finalize failed: {e}");
            std::process::exit(3);
        }
    };
    if role == "counts" {
        check_own_report(&report, rank);
        let how = if cfg!(feature = "mpio") {
            scope_profiler::MpiWrite::Parallel
        } else {
            scope_profiler::MpiWrite::Relay
        };
        assert_eq!(report.mpi_write(), Some(how), "rank {rank}");
    }
    if role == "counts" && rank == 0 {
        check_spread(&report);
    }
    assert_eq!(report.file(), Some(out.as_path()), "rank {rank}");
    if role == "counts" && rank == 1 {
        // A call after the finalize: the guard's drop (collective) writes a late phase.
        tracing::dispatcher::with_default(&d, || {
            let _s = tracing::info_span!("late").entered();
        });
    }
    drop(guard); // collective too; finalizes MPI (build() initialized it)
}

/// This process may write files up to `bytes` long (a full disk for its writes past that);
/// SIGXFSZ is ignored so that such a write fails with EFBIG instead of killing it.
fn limit_file_size(bytes: u64) {
    let lim = libc::rlimit {
        rlim_cur: bytes,
        rlim_max: bytes,
    };
    // SAFETY: plain libc calls on this process with valid arguments.
    let ok = unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN) != libc::SIG_ERR
            && libc::setrlimit(libc::RLIMIT_FSIZE, &lim) == 0
    };
    assert!(ok, "cannot limit the file size");
}

fn record_counts(d: &tracing::Dispatch, rank: u32) {
    for _ in 0..work_calls(rank) {
        let _s = tracing::info_span!("work").entered();
        std::hint::black_box(rank);
    }
    let d2 = d.clone();
    std::thread::Builder::new()
        .name("helper".into())
        .spawn(move || {
            tracing::dispatcher::with_default(&d2, || {
                for _ in 0..thread_calls(rank) {
                    tracing::info_span!("thread_work").in_scope(|| std::hint::black_box(1));
                }
            })
        })
        .expect("spawn")
        .join()
        .expect("join");
    let rt = common::runtime(d, 2);
    rt.block_on(async {
        let mut handles = Vec::new();
        for i in 0..task_calls(rank) {
            handles.push(tokio::spawn(
                async move {
                    tokio::task::yield_now().await;
                    std::hint::black_box(i);
                }
                .instrument_span(),
            ));
        }
        for h in handles {
            h.await.expect("task");
        }
    });
}

/// `#[instrument]`-like: the future runs inside a `task_work` span.
trait InstrumentSpan: std::future::Future + Sized {
    fn instrument_span(self) -> tracing::instrument::Instrumented<Self> {
        tracing::Instrument::instrument(self, tracing::info_span!("task_work"))
    }
}
impl<F: std::future::Future> InstrumentSpan for F {}

fn check_own_report(report: &scope_profiler::Report, rank: u32) {
    let calls = |n: &str| report.region(n).map_or(0, |r| r.calls);
    assert_eq!(calls("work"), work_calls(rank), "rank {rank}");
    assert_eq!(calls("thread_work"), thread_calls(rank), "rank {rank}");
    assert_eq!(calls("task_work"), task_calls(rank), "rank {rank}");
    if rank != 0 {
        assert!(report.ranks().is_empty(), "only rank 0 gets the spread");
    }
}

fn check_spread(report: &scope_profiler::Report) {
    let work = report
        .ranks()
        .iter()
        .find(|s| s.name == "work")
        .expect("work spread");
    let want: Vec<u64> = (0..RANKS).map(work_calls).collect();
    assert_eq!(work.calls, want);
    assert!(work.min_ns() <= work.max_ns());
    assert!(work.imbalance_pct() >= 0.0);
}

// ---------------------------------------------------------------- the launcher

fn mpirun() -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("mpirun"))
            .find(|p| p.is_file())
    })
}

/// Runs this binary under `mpirun -n 4` as `role`; returns (success, output).
fn launch(role: &str, out: &Path) -> (bool, String) {
    let exe = std::env::current_exe().expect("exe");
    let o = Command::new(mpirun().expect("mpirun"))
        .args(["--allow-run-as-root", "--oversubscribe", "-n"])
        .arg(RANKS.to_string())
        .args(["-x", "SCOPE_MPI_TEST_ROLE", "-x", "SCOPE_MPI_TEST_OUT"])
        .arg(exe)
        .env("SCOPE_MPI_TEST_ROLE", role)
        .env("SCOPE_MPI_TEST_OUT", out)
        // Low CPU use while ranks wait (4 ranks share 2 cores here).
        .env("OMPI_MCA_mpi_yield_when_idle", "1")
        .output()
        .expect("run mpirun");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.success(), text)
}

/// One scenario, given a fresh directory.
type Scenario = fn(&Path);

fn launcher_main() {
    // scripts/install-deps.sh brings OpenMPI: without `mpirun` this test fails, never passes.
    assert!(
        mpirun().is_some(),
        "tests/mpi.rs: `mpirun` is not on PATH; install OpenMPI (libopenmpi-dev openmpi-bin, \
         see scripts/install-deps.sh)"
    );
    let mut tests: Vec<(&str, Scenario)> = vec![
        ("four_ranks_one_file_with_known_counts", four_ranks),
        ("clock_offsets_line_up_a_skewed_rank", skewed_clock),
        (
            "a_dying_rank_publishes_nothing_and_spools_recover",
            dying_rank,
        ),
        ("a_failed_rank_gives_every_rank_an_error", failed_rank),
    ];
    if cfg!(feature = "mpio") {
        tests.push(("parallel_and_relay_files_are_equal", equal_files));
        tests.push(("a_full_disk_on_one_rank_errors_everywhere", full_disk));
    }
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let mut failed = 0;
    for (name, f) in tests {
        if !filter.is_empty() && !filter.iter().any(|p| name.contains(p.as_str())) {
            continue;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let r = std::panic::catch_unwind(|| f(dir.path()));
        println!(
            "test {name} ... {}",
            if r.is_ok() { "ok" } else { "FAILED" }
        );
        failed += usize::from(r.is_err());
    }
    if failed > 0 {
        eprintln!("{failed} MPI test(s) failed");
        std::process::exit(1);
    }
}

fn py_eval(code: &str, file: &Path) -> String {
    common::py("python", &["-c", code, file.to_str().expect("utf-8")])
}

fn four_ranks(dir: &Path) {
    let out = dir.join("run.h5");
    let (ok, text) = launch("counts", &out);
    assert!(ok, "mpirun failed:\n{text}");
    // The summary is printed by rank 0 only, with the spread over ranks: once for the
    // finalize, once for the late phase the drop writes.
    assert_eq!(text.matches("Summary: mpi test").count(), 2, "{text}");
    assert_eq!(text.matches("Across 4 ranks").count(), 2, "{text}");
    assert_eq!(
        text.matches("completed after the last finalize").count(),
        1,
        "{text}"
    );
    assert!(
        text.contains("1 call(s) completed after the last finalize"),
        "{text}"
    );
    let counts = py_eval(
        "import sys, scope_profiler as sp\n\
         r = sp.read_h5(sys.argv[1])\n\
         for name in ('work', 'thread_work', 'task_work'):\n\
         \x20   reg = r.get_region(name)\n\
         \x20   print(name, ' '.join(str(reg.regions[k].num_calls) for k in range(4)))\n",
        &out,
    );
    for (name, f) in [
        ("work", work_calls as fn(u32) -> u64),
        ("thread_work", thread_calls),
        ("task_work", task_calls),
    ] {
        let want: Vec<String> = (0..RANKS).map(|k| f(k).to_string()).collect();
        let line = format!("{name} {}", want.join(" "));
        assert!(counts.lines().any(|l| l == line), "want {line}:\n{counts}");
    }
    let inspect = common::py("scope-profiler", &["inspect", out.to_str().unwrap()]);
    assert!(inspect.contains("4 rank(s)"), "{inspect}");
    let how = if cfg!(feature = "mpio") {
        "parallel"
    } else {
        "relay"
    };
    assert!(
        inspect.contains(&format!("mpi_write                : {how}")),
        "{inspect}"
    );
    assert!(
        text.contains(if cfg!(feature = "mpio") {
            "in parallel (MPI-IO)"
        } else {
            "(token relay)"
        }),
        "{text}"
    );
    // `check` compares two runs; against itself the imbalance cannot have regressed.
    let f = out.to_str().unwrap();
    let check = common::py("scope-profiler", &["check", "--metric", "imbalance", f, f]);
    assert!(check.contains("imbalance"), "{check}");
    // Thread and task tables carry every rank.
    let lanes = py_eval(
        "import sys, h5py\n\
         f = h5py.File(sys.argv[1])\n\
         print(sorted(set(f['thread_table/ranks'][:].tolist())), \
               sorted(set(f['task_table/ranks'][:].tolist())), \
               int(f['metadata'].attrs['mpi_size']))\n",
        &out,
    );
    assert_eq!(lanes.trim(), "[0, 1, 2, 3] [0, 1, 2, 3] 4", "{lanes}");
    // perf totals of every rank, in its own `rank<N>` group.
    let groups = py_eval(
        "import sys, h5py\n\
         f = h5py.File(sys.argv[1])\n\
         print(sorted(k for k in f.keys() if k.startswith('rank') and k != 'rank_region_index'))\n\
         print(sorted(f['rank2/perf_events'].keys()))\n",
        &out,
    );
    assert!(
        groups.starts_with("['rank0', 'rank1', 'rank2', 'rank3']"),
        "{groups}"
    );
    assert!(groups.contains("'work'"), "{groups}");
    // The call made after the finalize went to the late file, by the (collective) drop.
    let late = dir.join("run.late.h5");
    let late_calls = py_eval(
        "import sys, scope_profiler as sp\n\
         reg = sp.read_h5(sys.argv[1]).get_region('late')\n\
         print(sorted((k, r.num_calls) for k, r in reg.regions.items()))\n",
        &late,
    );
    assert_eq!(late_calls.trim(), "[(1, 1)]", "{late_calls}");
    // No part file or spool is left behind.
    let left: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "run.h5" && n != "run.late.h5")
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

fn skewed_clock(dir: &Path) {
    let out = dir.join("clock.h5");
    let (ok, text) = launch("clock", &out);
    assert!(ok, "mpirun failed:\n{text}");
    let starts = py_eval(
        "import sys, json, h5py, scope_profiler as sp\n\
         f = h5py.File(sys.argv[1])\n\
         m = f['metadata'].attrs\n\
         off = json.loads(m['mpi_clock_offsets_ns']); unc = json.loads(m['mpi_clock_uncertainty_ns'])\n\
         reg = sp.read_h5(sys.argv[1]).get_region('aligned')\n\
         print(json.dumps([off, unc, [int(reg.regions[k].start_times_ns[0]) for k in range(4)]]))\n",
        &out,
    );
    let v: Vec<Vec<i64>> = parse_json_lists(starts.trim());
    let (off, unc, start) = (&v[0], &v[1], &v[2]);
    println!("clock offsets {off:?} ns, uncertainty {unc:?} ns, starts {start:?}");
    // The offset of rank 2 is the injected skew, within its uncertainty (plus scheduling
    // noise: four ranks share two cores here).
    let slack = 200_000_000;
    assert!(
        (off[2] - SKEW_NS).abs() <= unc[2] + slack,
        "offsets {off:?} +- {unc:?}"
    );
    assert!(off[1].abs() <= unc[1] + slack, "offsets {off:?} +- {unc:?}");
    // Shifted onto rank 0's clock, the calls that followed one barrier line up.
    let max = start.iter().max().unwrap();
    let min = start.iter().min().unwrap();
    let worst_unc = unc.iter().max().unwrap();
    assert!(
        max - min <= 2 * worst_unc + 2 * slack,
        "starts {start:?}, offsets {off:?} +- {unc:?}"
    );
}

/// `[[1, 2], [3], ...]` of integers.
fn parse_json_lists(s: &str) -> Vec<Vec<i64>> {
    let inner = s.trim().trim_start_matches('[').trim_end_matches(']');
    inner
        .split("], [")
        .map(|l| {
            l.trim_matches(|c| c == '[' || c == ']')
                .split(',')
                .filter(|x| !x.trim().is_empty())
                .map(|x| x.trim().parse().expect("integer"))
                .collect()
        })
        .collect()
}

fn dying_rank(dir: &Path) {
    let out = dir.join("die.h5");
    let (ok, text) = launch("die", &out);
    assert!(!ok, "mpirun should fail when a rank dies:\n{text}");
    assert!(!out.exists(), "no file may be published when a rank dies");
    // Each surviving rank's spool is recoverable into its own file, and those merge.
    let mut recovered = Vec::new();
    for k in 0..3u32 {
        let own = dir.join(format!("die.rank{k}.h5"));
        let r = scope_profiler::recover(&own)
            .unwrap_or_else(|e| panic!("rank {k}: {e}\nmpirun said:\n{text}"));
        assert!(r.calls >= work_calls(k), "rank {k}: {} calls", r.calls);
        recovered.push(own);
    }
    let merged = scope_profiler::merge_ranks(&recovered, dir.join("survivors.h5")).unwrap();
    assert_eq!(merged.ranks, vec![0, 1, 2]);
    let counts = py_eval(
        "import sys, scope_profiler as sp\n\
         reg = sp.read_h5(sys.argv[1]).get_region('work')\n\
         print(' '.join(str(reg.regions[k].num_calls) for k in range(3)))\n",
        &merged.file,
    );
    let want: Vec<String> = (0..3).map(|k| work_calls(k).to_string()).collect();
    assert_eq!(counts.trim(), want.join(" "));
}

fn failed_rank(dir: &Path) {
    let out = dir.join("fail.h5");
    let (ok, text) = launch("flusher", &out);
    assert!(
        ok,
        "every rank returns (with an error) and exits normally:\n{text}"
    );
    assert!(text.contains("rank 2 failed as planned"), "{text}");
    assert!(!out.exists());
    // The healthy ranks' calls stay in their spools.
    let r = scope_profiler::recover(dir.join("fail.rank1.h5")).expect("recover rank 1");
    assert!(r.calls >= work_calls(1), "{} calls", r.calls);
}

/// The parallel write and the relay, given the same phases, write files equal by value: the
/// same groups and datasets, the same numbers (types included), the same strings (fixed-length
/// in the parallel file, variable-length in the relay's), the same attributes but
/// `metadata/mpi_write`.
fn equal_files(dir: &Path) {
    let out = dir.join("run.h5");
    let (ok, text) = launch("equal", &out);
    assert!(ok, "mpirun failed:\n{text}");
    let relay = dir.join("relay.h5");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/h5_equal.py");
    let path = |p: &Path| p.to_str().expect("utf-8").to_owned();
    let args = [path(&script), path(&out), path(&relay), "mpi_write".into()];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let verdict = common::py("python", &args);
    let n: usize = verdict
        .trim()
        .strip_prefix("equal ")
        .and_then(|v| v.split(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("{verdict}"));
    assert!(n > 40, "{verdict}");
    for (f, want) in [(&out, "parallel"), (&relay, "relay")] {
        let how = py_eval(
            "import sys, h5py\nprint(h5py.File(sys.argv[1])['metadata'].attrs['mpi_write'])\n",
            f,
        );
        assert_eq!(how.trim(), want);
    }
    println!("parallel and relay files: {}", verdict.trim());
    // This crate's CLI reads both alike (run on `run.h5` in two directories, so that the
    // summaries' titles match).
    let relay_dir = dir.join("relay");
    std::fs::create_dir(&relay_dir).expect("mkdir");
    std::fs::rename(&relay, relay_dir.join("run.h5")).expect("move");
    let scopeprof = |args: &[&str], d: &Path| {
        let o = Command::new(env!("CARGO_BIN_EXE_scopeprof"))
            .args(args)
            .arg("run.h5")
            .current_dir(d)
            .output()
            .expect("run scopeprof");
        assert!(o.status.success(), "scopeprof {args:?} in {}", d.display());
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    for args in [&["inspect"][..], &["flamegraph", "--folded", "-o", "-"][..]] {
        let (p, r) = (scopeprof(args, dir), scopeprof(args, &relay_dir));
        assert!(p.len() > 100, "scopeprof {args:?}: {p}");
        assert_eq!(p, r, "scopeprof {args:?}");
    }
}

/// Rank 2 cannot write past 1 MiB (its "disk" is full) when its rows come: every rank's
/// finalize returns the error naming it, nothing is published or left behind, and every
/// rank's spool recovers into its own file.
fn full_disk(dir: &Path) {
    let out = dir.join("full.h5");
    let (ok, text) = launch("full", &out);
    assert!(
        ok,
        "every rank returns (with an error) and exits normally:\n{text}"
    );
    assert_eq!(text.matches("failed as planned").count(), 4, "{text}");
    assert!(!out.exists());
    let left: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp") || n.ends_with(".aux") || n.ends_with(".recv"))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    for k in 0..RANKS {
        let r = scope_profiler::recover(dir.join(format!("full.rank{k}.h5")))
            .unwrap_or_else(|e| panic!("rank {k}: {e}\nmpirun said:\n{text}"));
        let big = if k < 2 { BIG } else { 0 };
        assert!(
            r.calls >= work_calls(k) + big,
            "rank {k}: {} calls",
            r.calls
        );
    }
}

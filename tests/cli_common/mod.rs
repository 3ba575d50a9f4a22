//! Helpers of the `scopeprof` CLI tests: a Tokio program with known calls profiled into a file,
//! running the CLI binary, the Perfetto-protos venv, and reference-style files written by the
//! reference's `make_minimal_h5.py`.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use scope_profiler::ScopeLayer;
use tracing::Instrument;

/// Tasks the Tokio program spawns.
pub(crate) const TASKS: u64 = 12;
/// `step` calls per task.
pub(crate) const STEPS: u64 = 3;

/// Runs the CLI with `args`.
pub(crate) fn scopeprof(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_scopeprof"))
        .args(args)
        .output()
        .expect("run scopeprof")
}

/// Runs the CLI and returns stdout, panicking with stderr unless it succeeds.
pub(crate) fn scopeprof_ok(args: &[&str]) -> String {
    let out = scopeprof(args);
    assert!(
        out.status.success(),
        "scopeprof {args:?} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// One task's work: a root `handler` call with `STEPS` sync `step` calls between awaits, and
/// one `query` child future awaited across a sleep (so it has several polls too).
#[tracing::instrument]
async fn handler(i: u64) -> u64 {
    let mut acc = i;
    for s in 0..STEPS {
        tracing::info_span!("step").in_scope(|| {
            for k in 0..200 {
                acc = std::hint::black_box(acc.wrapping_mul(31).wrapping_add(k + s));
            }
        });
        tokio::time::sleep(std::time::Duration::from_micros(300)).await;
    }
    acc + query(i).instrument(tracing::info_span!("query")).await
}

async fn query(i: u64) -> u64 {
    tokio::task::yield_now().await;
    tokio::time::sleep(std::time::Duration::from_micros(200)).await;
    i * 2
}

/// Profiles the Tokio program (2 workers, `TASKS` tasks, inside a sync `main_work` span on
/// the main thread) into `dir/tokio.h5` with `track_async(true)`.
pub(crate) fn tokio_profile(dir: &Path) -> PathBuf {
    let path = dir.join("tokio.h5");
    let (layer, guard) = ScopeLayer::builder()
        .output(&path)
        .track_async(true)
        .summary(false)
        .build()
        .expect("build");
    use tracing_subscriber::prelude::*;
    let d = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    let d2 = d.clone();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .on_thread_start(move || std::mem::forget(tracing::dispatcher::set_default(&d2)))
        .build()
        .expect("runtime");
    tracing::dispatcher::with_default(&d, || {
        let _main = tracing::info_span!("main_work").entered();
        rt.block_on(async {
            let handles: Vec<_> = (0..TASKS).map(|i| tokio::spawn(handler(i))).collect();
            for h in handles {
                h.await.expect("task");
            }
        });
    });
    drop(rt);
    guard.finalize().expect("finalize");
    path
}

/// A 1-D integer column of a file, as i64.
pub(crate) fn column(path: &Path, name: &str) -> Vec<i64> {
    let f = hdf5::File::open(path).expect("open");
    f.dataset(name)
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .read_raw::<i64>()
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// A 1-D string column of a file.
pub(crate) fn strings(path: &Path, name: &str) -> Vec<String> {
    let f = hdf5::File::open(path).expect("open");
    f.dataset(name)
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .read_raw::<hdf5::types::VarLenUnicode>()
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .into_iter()
        .map(|s| s.to_string())
        .collect()
}

/// The venv with Perfetto's protos (made by scripts/perfetto-env.sh).
pub(crate) fn perfetto_python() -> &'static Path {
    static VENV: OnceLock<PathBuf> = OnceLock::new();
    VENV.get_or_init(|| {
        let out = Command::new("bash")
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/scripts/perfetto-env.sh"
            ))
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .expect("run scripts/perfetto-env.sh");
        assert!(
            out.status.success(),
            "cannot create the Perfetto venv (needs python3-venv and PyPI): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8(out.stdout).unwrap();
        PathBuf::from(stdout.lines().last().expect("venv path").trim())
            .join("bin")
            .join("python")
    })
}

/// Runs `python -c script args...` with `python`, returning stdout (panics on failure).
pub(crate) fn python(python: &Path, script: &str, args: &[&str]) -> String {
    let out = Command::new(python)
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", python.display()));
    assert!(
        out.status.success(),
        "python failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Writes a reference-style file with the reference's `make_minimal_h5.py` (h5py only).
pub(crate) fn reference_file(ref_python: &Path, dir: &Path, recommended: bool) -> PathBuf {
    // A verbatim copy of the reference's script (it writes a conforming file with plain h5py).
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/cli_data/make_minimal_h5.py"
    );
    let path = dir.join(if recommended {
        "ref_full.h5"
    } else {
        "ref_min.h5"
    });
    let mut cmd = Command::new(ref_python);
    cmd.arg(script).arg(&path);
    if recommended {
        cmd.arg("--recommended");
    }
    let out = cmd.output().expect("run make_minimal_h5.py");
    assert!(
        out.status.success(),
        "{script} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    path
}

/// The Python reference venv's interpreter (it has h5py).
pub(crate) fn ref_python() -> PathBuf {
    if let Some(v) = std::env::var_os("SCOPE_PY_VENV") {
        return PathBuf::from(v).join("bin/python");
    }
    let out = std::process::Command::new("bash")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/scripts/py-reader-env.sh"
        ))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("py-reader-env.sh");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let venv = String::from_utf8(out.stdout).unwrap();
    Path::new(venv.lines().last().unwrap().trim()).join("bin/python")
}

#[path = "workload.rs"]
pub(crate) mod workload;

/// A real profile written by the Python package (scope-profiler 0.7.5) of a small Python
/// program: `solve` (120 calls, each holding one `inner`) and `setup` (one call), with
/// `work` loop iterations per `solve`; columnar, or the aggregate layout.
pub(crate) fn python_package_profile(
    dir: &Path,
    name: &str,
    aggregate: bool,
    work: u32,
) -> PathBuf {
    let path = dir.join(name);
    let script = r#"
import sys
import scope_profiler as sp
path, aggregate, work = sys.argv[1], sys.argv[2] == "1", int(sys.argv[3])
with sp.session(file_path=path, aggregation_mode=aggregate, verbose=False, label="python"):
    with sp.region("setup"):
        sum(range(1000))
    for i in range(120):
        with sp.region("solve"):
            s = 0
            for k in range(work):
                s += k * k
            with sp.region("inner"):
                s += 1
"#;
    python(
        &ref_python(),
        script,
        &[
            path.to_str().unwrap(),
            if aggregate { "1" } else { "0" },
            &work.to_string(),
        ],
    );
    assert!(
        path.is_file(),
        "the Python package wrote no {}",
        path.display()
    );
    path
}

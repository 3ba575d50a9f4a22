//! Without `Builder::mpi`: ranks started by an MPI launcher each write `<stem>.rank<N>.h5`
//! (detected from the launcher's variables), and `merge_ranks` joins them into one
//! multi-rank file that the Python reference reader reads rank by rank.
//!
//! One test function in its own binary: it sets the launcher variables of this process,
//! one rank after the other, which no other test may see.

mod common;

use std::path::Path;

use scope_profiler::ScopeLayer;
use tracing_subscriber::prelude::*;

fn record_rank(out: &Path, rank: u32, calls: u64) -> std::path::PathBuf {
    std::env::set_var("OMPI_COMM_WORLD_RANK", rank.to_string());
    std::env::set_var("OMPI_COMM_WORLD_SIZE", "3");
    let (layer, guard) = ScopeLayer::builder()
        .output(out)
        .track_threads(true)
        .summary(false)
        .build()
        .expect("build");
    let d = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    tracing::dispatcher::with_default(&d, || {
        for _ in 0..calls {
            let _s = tracing::info_span!("work").entered();
        }
    });
    let report = guard.finalize().expect("finalize");
    std::env::remove_var("OMPI_COMM_WORLD_RANK");
    std::env::remove_var("OMPI_COMM_WORLD_SIZE");
    drop(guard);
    report.file().expect("a file").to_path_buf()
}

#[test]
fn launcher_ranks_write_their_own_files_and_merge_into_one() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.h5");
    let mut files = Vec::new();
    for rank in 0..3u32 {
        let file = record_rank(&out, rank, 10 + u64::from(rank));
        assert_eq!(file, dir.path().join(format!("run.rank{rank}.h5")));
        files.push(file);
    }
    assert!(!out.exists(), "no rank writes the shared path");
    // Input order does not matter: the rank comes from the name.
    files.reverse();
    let merged = scope_profiler::merge_ranks(&files, &out).expect("merge");
    assert_eq!(merged.ranks, vec![0, 1, 2]);
    assert_eq!(merged.calls, 10 + 11 + 12 + 3); // + one session row per rank
    let f = out.to_str().unwrap();
    let counts = common::py(
        "python",
        &[
            "-c",
            "import sys, h5py, scope_profiler as sp\n\
             reg = sp.read_h5(sys.argv[1]).get_region('work')\n\
             print(' '.join(str(reg.regions[k].num_calls) for k in range(3)))\n\
             f = h5py.File(sys.argv[1])\n\
             print(int(f['metadata'].attrs['mpi_size']), sorted(set(f['thread_table/ranks'][:].tolist())))\n",
            f,
        ],
    );
    let mut lines = counts.lines();
    assert_eq!(lines.next(), Some("10 11 12"), "{counts}");
    assert_eq!(lines.next(), Some("3 [0, 1, 2]"), "{counts}");
    let inspect = common::py("scope-profiler", &["inspect", f]);
    assert!(inspect.contains("3 rank(s)"), "{inspect}");
    // The same through the CLI.
    let cli_out = dir.path().join("cli.h5");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_scopeprof"))
        .arg("merge")
        .arg(&cli_out)
        .args(&files)
        .output()
        .expect("run scopeprof");
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        said.contains("merged 3 ranks [0, 1, 2] (36 calls)"),
        "{said}"
    );
    let inspect = common::py("scope-profiler", &["inspect", cli_out.to_str().unwrap()]);
    assert!(inspect.contains("3 rank(s)"), "{inspect}");
}

//! The `scopeprof` reading child's limits: a small file that declares a huge dataset stops at
//! the data limit (`RLIMIT_DATA`, `--data-limit-mib`, `SCOPEPROF_DATA_LIMIT_MIB`) with one
//! line; `merge` and `recover` read in the supervised child too, so a crash there (a signal,
//! an abort on a planted spool) is one line and status 2, never the command's own death.

mod cli_common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use cli_common::*;

/// Exit status 2 and exactly one stderr line, `scopeprof: ...`, that names `name`.
fn assert_one_line(out: &Output, name: &str) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{} {err}", out.status);
    assert_eq!(err.lines().count(), 1, "one line expected: {err}");
    assert!(
        err.starts_with("scopeprof: ") && err.contains(name),
        "{err}"
    );
    err
}

/// A copy of a real profile whose region names table declares 2^27 strings (1 GiB of
/// pointers, 3 GiB of strings once read) and stores none: a few KiB on disk.
fn huge_names(dir: &Path) -> PathBuf {
    let src = tokio_profile(dir);
    let p = dir.join("huge.h5");
    std::fs::copy(&src, &p).unwrap();
    let f = hdf5::File::open_rw(&p).unwrap();
    f.unlink("region_table/names").unwrap();
    f.new_dataset::<hdf5::types::VarLenUnicode>()
        .chunk(1 << 16)
        .shape(1usize << 27)
        .create("region_table/names")
        .unwrap();
    f.close().unwrap();
    assert!(std::fs::metadata(&p).unwrap().len() < 1 << 20);
    p
}

#[test]
fn a_huge_declared_dataset_stops_at_the_data_limit() {
    let dir = tempfile::tempdir().unwrap();
    let file = huge_names(dir.path());
    let f = file.to_str().unwrap();
    let t = Instant::now();
    let out = scopeprof(&["inspect", "--data-limit-mib", "256", f]);
    let err = assert_one_line(&out, f);
    eprintln!("--data-limit-mib 256: {:?}: {err}", t.elapsed());
    assert!(err.contains("data limit of 256 MiB"), "{err}");
    // The environment variable sets it too; the option wins over it.
    let via_env = Command::new(env!("CARGO_BIN_EXE_scopeprof"))
        .args(["inspect", f])
        .env("SCOPEPROF_DATA_LIMIT_MIB", "128")
        .output()
        .unwrap();
    let err = assert_one_line(&via_env, f);
    assert!(err.contains("data limit of 128 MiB"), "{err}");
    let bad = Command::new(env!("CARGO_BIN_EXE_scopeprof"))
        .args(["inspect", f])
        .env("SCOPEPROF_DATA_LIMIT_MIB", "lots")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(bad.status.code(), Some(2), "{err}");
    assert!(err.contains("SCOPEPROF_DATA_LIMIT_MIB"), "{err}");
}

/// The processes whose parent is `pid`.
fn children_of(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        let after = &stat[stat.rfind(')').unwrap() + 1..];
        if after.split_whitespace().nth(1) == Some(pid.to_string().as_str()) {
            found.push(child);
        }
    }
    found
}

#[test]
fn a_crash_while_merging_is_contained_in_the_child() {
    let dir = tempfile::tempdir().unwrap();
    // A FIFO as an input: the reading child blocks opening it, and is then killed with
    // SIGABRT, as a failed assertion inside libhdf5 would kill it. (Not SIGSEGV: sent from
    // outside, the Rust runtime's handler takes it for a non-fault and the open only fails
    // with EINTR.)
    let fifo = dir.path().join("run.rank0.h5");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo reads a NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let out = dir.path().join("merged.h5");
    let cli = Command::new(env!("CARGO_BIN_EXE_scopeprof"))
        .args(["merge", out.to_str().unwrap(), fifo.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let child = loop {
        if let Some(&c) = children_of(cli.id()).first() {
            break c;
        }
        assert!(Instant::now() < deadline, "no reading child appeared");
        std::thread::sleep(Duration::from_millis(20));
    };
    // Let it reach the open of the FIFO.
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: signals a process this test started (the CLI's child).
    assert_eq!(unsafe { libc::kill(child as i32, libc::SIGABRT) }, 0);
    let result = cli.wait_with_output().unwrap();
    let err = assert_one_line(&result, fifo.to_str().unwrap());
    assert!(err.contains("SIGABRT") && err.contains("crashed"), "{err}");
    assert!(!out.exists(), "nothing published");
}

/// A 100-byte planted spool whose region id asks for a ~240 GB table (issue 34) is one line
/// from `recover`, however the reading ends (a typed error, or the data limit in the child).
#[test]
fn a_planted_spool_is_one_line_from_recover() {
    let dir = tempfile::tempdir().unwrap();
    let frame = |tag: u8, payload: &[u8]| {
        let mut f = vec![tag];
        f.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        f.extend_from_slice(payload);
        f
    };
    let s = |v: &str| {
        let mut b = (v.len() as u32).to_le_bytes().to_vec();
        b.extend_from_slice(v.as_bytes());
        b
    };
    let mut header = b"SPRSPOL1".to_vec();
    header.extend_from_slice(&1i64.to_le_bytes());
    header.extend(s("2026-01-01T00:00:00Z"));
    header.extend(s(""));
    header.extend_from_slice(&[1, 0, 0]);
    let mut region = (u32::MAX - 16).to_le_bytes().to_vec();
    region.extend_from_slice(&1i64.to_le_bytes());
    region.extend(s("r"));
    region.extend(s("f.rs"));
    let spool = dir.path().join("planted.spool");
    let mut bytes = frame(0, &header);
    bytes.extend(frame(1, &region));
    std::fs::write(&spool, &bytes).unwrap();
    let out = dir.path().join("out.h5");
    let result = scopeprof(&[
        "recover",
        out.to_str().unwrap(),
        "--spool",
        spool.to_str().unwrap(),
    ]);
    let err = assert_one_line(&result, spool.to_str().unwrap());
    eprintln!("planted spool: {err}");
    assert!(!out.exists(), "nothing published");
}

use super::*;
use crate::data::rows::CallRecord;
use crate::spool::{Header, SpoolWriter};

/// A spool on a read-only file system (a full disk is alike: no room for a temporary
/// file there) recovers into another directory, also when the phase is too large to nest
/// in memory: the external sort's temporary file goes beside the output, not the spool.
#[test]
fn a_large_phase_recovers_from_a_read_only_spool_elsewhere() {
    let fs = crate::testing::Tmpfs::mount("4m");
    let spool = spool::spool_path(&fs.path().join("out.h5"));
    let header = Header {
        timestamp: "t".into(),
        ..Header::default()
    };
    let mut w = SpoolWriter::create(spool.clone(), header, false).unwrap();
    w.region(0, "r", "", -1);
    for k in 0..5_000 {
        w.call(0, CallRecord::new(k * 10, 5, 0));
    }
    w.flush(&[], &[]);
    drop(w);
    fs.cover_read_only();
    let out = tempfile::tempdir().unwrap();
    let budget = &crate::finalize::nesting::TEST_BUDGET;
    budget.with(|b| b.set(Some(1_000)));
    let r = recover_spool(&spool, out.path().join("rec.h5"));
    budget.with(|b| b.set(None));
    fs.uncover();
    assert_eq!(r.expect("recovered").calls, 5_000);
}

/// A temporary profile that a killed process left beside the output goes; one of a live
/// process (this one) stays.
#[test]
fn stale_temporary_profiles_of_dead_processes_go() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p.h5");
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let here = crate::data::host::ProcTag::here();
    let gone = crate::data::host::ProcTag { pid: dead, ..here };
    let stale = dir.path().join(format!(".p.h5.{}.0.tmp", gone.render()));
    let live = dir.path().join(format!(".p.h5.{}.0.tmp", here.render()));
    let other = dir.path().join(".p.h5.spool");
    for f in [&stale, &live, &other] {
        std::fs::write(f, b"x").unwrap();
    }
    assert_eq!(crate::output::hdf5::remove_stale_temps(&out), 1);
    assert!(!stale.exists() && live.exists() && other.exists());
}

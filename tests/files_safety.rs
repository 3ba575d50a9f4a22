//! Files are created safely in a directory others may write to: a symbolic link planted at the
//! spool's name (dangling, or to an existing file) is never followed, the spool is private
//! (0600), the published profile replaces a link at its name instead of writing through it,
//! and it is 0600 whatever the umask unless `Builder::file_mode` asks for other bits.

mod common;

use std::os::unix::fs::{symlink, PermissionsExt};
use std::process::Command;
use std::time::Duration;

use common::dispatch;
use scope_profiler::{Error, ScopeLayer};
use tracing::info_span;

fn mode(p: &std::path::Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn a_dangling_link_at_the_spool_is_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let target = elsewhere.path().join("victim");
    let out = dir.path().join("out.h5");
    let spool = dir.path().join(".out.h5.spool");
    symlink(&target, &spool).unwrap();
    let err = ScopeLayer::builder().output(&out).build().unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::Io { .. }), "{err:?}");
    assert!(
        msg.contains(spool.to_str().unwrap()),
        "names the path: {msg}"
    );
    assert!(msg.contains("symbolic link"), "{msg}");
    assert!(!target.exists(), "nothing created where the link points");
    assert!(std::fs::symlink_metadata(&spool)
        .unwrap()
        .file_type()
        .is_symlink());
}

#[test]
fn a_link_to_an_existing_file_at_the_spool_is_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let target = elsewhere.path().join("precious");
    std::fs::write(&target, b"keep me").unwrap();
    let out = dir.path().join("out.h5");
    symlink(&target, dir.path().join(".out.h5.spool")).unwrap();
    let err = ScopeLayer::builder().output(&out).build().unwrap_err();
    assert!(err.to_string().contains("symbolic link"), "{err}");
    assert_eq!(std::fs::read(&target).unwrap(), b"keep me");
}

#[test]
fn a_link_at_the_output_is_replaced_not_written_through() {
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    for dangling in [false, true] {
        let target = elsewhere.path().join(format!("target-{dangling}"));
        if !dangling {
            std::fs::write(&target, b"keep me").unwrap();
        }
        let out = dir.path().join(format!("linked-{dangling}.h5"));
        symlink(&target, &out).unwrap();
        let (d, guard) = dispatch(ScopeLayer::builder().output(&out));
        tracing::dispatcher::with_default(&d, || info_span!("x").in_scope(|| ()));
        guard.finalize().unwrap();
        drop(guard);
        assert!(std::fs::symlink_metadata(&out)
            .unwrap()
            .file_type()
            .is_file());
        assert_eq!(
            target.exists(),
            !dangling,
            "nothing created through the link"
        );
        if !dangling {
            assert_eq!(std::fs::read(&target).unwrap(), b"keep me");
        }
        hdf5::File::open(&out).unwrap();
    }
}

#[test]
fn the_spool_is_private() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("private.h5");
    let (d, guard) = dispatch(
        ScopeLayer::builder()
            .output(&out)
            .spool_sync_interval(Duration::from_millis(10)),
    );
    tracing::dispatcher::with_default(&d, || info_span!("x").in_scope(|| ()));
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(mode(&dir.path().join(".private.h5.spool")), 0o600);
    drop(guard);
}

/// Child of `profiles_are_private_whatever_the_umask`: writes one profile (with
/// `file_mode(SP_MODE)` when set) and exits.
#[test]
#[ignore = "child process of profiles_are_private_whatever_the_umask"]
fn umask_child() {
    let out = std::env::var_os("SP_UMASK_OUT").expect("run by its parent test");
    let mut b = ScopeLayer::builder().output(&out);
    if let Ok(m) = std::env::var("SP_MODE") {
        b = b.file_mode(u32::from_str_radix(&m, 8).unwrap());
    }
    let (d, guard) = dispatch(b);
    tracing::dispatcher::with_default(&d, || info_span!("x").in_scope(|| ()));
    guard.finalize().unwrap();
}

/// Profiles embed source text: they are 0600 whatever the umask, like `perf.data`; with
/// `file_mode` they get exactly the bits asked for.
#[test]
fn profiles_are_private_whatever_the_umask() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("000", None, 0o600),
        ("022", None, 0o600),
        ("077", Some("644"), 0o644),
        ("000", Some("640"), 0o640),
    ];
    for (umask, file_mode, want) in cases {
        let out = dir.path().join(format!(
            "umask-{umask}-{}.h5",
            file_mode.unwrap_or("default")
        ));
        let exe = std::env::current_exe().unwrap();
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(format!(
                "umask {umask} && exec \"$0\" --exact umask_child --ignored --quiet"
            ))
            .arg(&exe)
            .env("SP_UMASK_OUT", &out)
            .stdout(std::process::Stdio::null());
        if let Some(m) = file_mode {
            cmd.env("SP_MODE", m);
        }
        assert!(cmd.status().unwrap().success());
        assert_eq!(mode(&out), want, "umask {umask}, file_mode {file_mode:?}");
    }
    // Only the profiles are left (no temporary file, no private directory).
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), cases.len());
}

#[test]
fn a_file_mode_beyond_the_permission_bits_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let err = ScopeLayer::builder()
        .output(dir.path().join("x.h5"))
        .file_mode(0o4755)
        .build()
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidOption {
                option: "file_mode",
                ..
            }
        ),
        "{err:?}"
    );
}

//! Test support shared by the unit tests (`crate::testing`) and the integration tests
//! (`tests/common` includes this file by path), so neither keeps a copy: running a child
//! process safely next to HDF5, and finding the Python reference reader.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// Runs `cmd` to completion with none of this process's inheritable descriptors.
///
/// HDF5 opens files without `O_CLOEXEC` and locks them (`flock`): a child started while
/// another test writes a profile would otherwise hold that file's lock for its whole life,
/// and the other test's next open of the file would fail ("unable to lock file").
pub(crate) fn output_isolated(cmd: &mut Command) -> Output {
    use std::os::unix::process::CommandExt;
    // SAFETY: the hook runs in the child between fork and exec and only makes
    // async-signal-safe calls (fcntl, close) on descriptor numbers; descriptors marked
    // close-on-exec (std's own error pipe among them) are left alone.
    unsafe {
        cmd.pre_exec(|| {
            for fd in 3..4096 {
                let flags = libc::fcntl(fd, libc::F_GETFD);
                if flags >= 0 && flags & libc::FD_CLOEXEC == 0 {
                    libc::close(fd);
                }
            }
            Ok(())
        });
    }
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

/// The venv holding the Python reader: `$SCOPE_PY_VENV`, else made (once per process) by
/// `scripts/py-reader-env.sh`.
pub(crate) fn venv() -> &'static Path {
    static VENV: OnceLock<PathBuf> = OnceLock::new();
    VENV.get_or_init(|| {
        if let Some(v) = std::env::var_os("SCOPE_PY_VENV") {
            return PathBuf::from(v);
        }
        let out = output_isolated(
            Command::new("bash")
                .arg(concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/scripts/py-reader-env.sh"
                ))
                .current_dir(env!("CARGO_MANIFEST_DIR")),
        );
        assert!(
            out.status.success(),
            "cannot create the Python reader venv (needs python3-venv and PyPI): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8(out.stdout).expect("utf-8 venv path");
        PathBuf::from(stdout.lines().last().expect("venv path").trim())
    })
}

/// An environment holding only `vars`, for code that reads variables through a closure.
#[allow(dead_code)] // not every test binary that includes this file reads variables
pub(crate) fn env_of<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
    move |k| {
        vars.iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.to_string())
    }
}

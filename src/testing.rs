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

/// A small tmpfs that one test mounts (root only: the project's machines and CI run as root)
/// and that is unmounted when dropped, also when the test fails: a full disk, a read-only
/// directory (root ignores permission bits, not a read-only mount).
pub(crate) struct Tmpfs {
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size` (`"256k"`, `"2m"`) on a new temporary directory.
    pub(crate) fn mount(size: &str) -> Tmpfs {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("mnt");
        std::fs::create_dir(&path).expect("a mount point");
        run_mount(
            &["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"],
            &path,
        );
        Tmpfs { path, _dir: dir }
    }

    /// Where it is mounted.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Makes the directory read-only for every path lookup from now on: a read-only bind
    /// mount of it over itself. Files opened before stay writable (a read-only remount of a
    /// file system with files open for writing is refused), as they would after an emergency
    /// remount; creating, renaming and removing fail with `EROFS`.
    pub(crate) fn cover_read_only(&self) {
        let p = self.path.to_str().expect("a UTF-8 path");
        run_mount(&["--bind", p], &self.path);
        run_mount(&["-o", "remount,bind,ro"], &self.path);
    }

    /// Removes the read-only cover: writable again.
    pub(crate) fn uncover(&self) {
        let out = Command::new("umount")
            .arg(&self.path)
            .output()
            .expect("run umount");
        assert!(out.status.success(), "umount: {out:?}");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // Lazy: a child process that still holds a file there cannot keep it mounted; again
        // for a cover left on it.
        for _ in 0..3 {
            let gone = Command::new("umount").arg("-l").arg(&self.path).output();
            if !gone.is_ok_and(|o| o.status.success()) {
                break;
            }
        }
    }
}

fn run_mount(args: &[&str], at: &Path) {
    let out = Command::new("mount")
        .args(args)
        .arg(at)
        .output()
        .expect("run mount");
    assert!(
        out.status.success(),
        "mount {args:?} {} failed: {} (these tests need root to mount a small tmpfs; the \
         project's machines and CI run as root)",
        at.display(),
        String::from_utf8_lossy(&out.stderr).trim()
    );
}

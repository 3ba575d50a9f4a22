//! Creating and publishing files safely in a directory others may write to.
//!
//! Every file this crate creates (the spool, temporary profiles, probes) is created with
//! `O_CREAT | O_EXCL | O_NOFOLLOW`: a symbolic link planted at the name, dangling or not, is
//! never followed, and the error names the path. Profiles are published by `rename(2)`, which
//! replaces a link at the target instead of writing through it; names that must not replace
//! anything (numbered, late and recovered files) are published with `RENAME_NOREPLACE`.
//! Profiles and the spool are `0600` (profiles: unless `Builder::file_mode` says otherwise; see
//! the HDF5 writer's `create_temp`).

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::Error;

/// Creates `path` for writing; fails if anything (a file, a link) is already there.
pub(crate) fn create_new(path: &Path, mode: u32) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .read(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| explain(path, e))
}

/// Turns "file exists" at a symbolic link into an error that says so.
pub(crate) fn explain(path: &Path, e: io::Error) -> io::Error {
    let is_link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    if is_link {
        io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!(
                "{} is a symbolic link; refusing to follow it (remove it, or choose another \
                 output)",
                path.display()
            ),
        )
    } else {
        e
    }
}

/// Takes an exclusive advisory lock on `file` without waiting; `Ok(false)` when another
/// process holds it.
pub(crate) fn try_lock(file: &File) -> io::Result<bool> {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a descriptor we own; no memory is involved.
    let r = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if r == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(e)
    }
}

/// The directory holding `path` (`.` for a bare file name).
pub(crate) fn dir_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// fsyncs the directory holding `path`, so a rename or creation in it survives power loss.
pub(crate) fn sync_dir(path: &Path) -> io::Result<()> {
    File::open(dir_of(path))?.sync_all()
}

/// `(device, inode)` of what is at `path`, not following a link.
pub(crate) fn identity(path: &Path) -> io::Result<(u64, u64, bool)> {
    let m = std::fs::symlink_metadata(path)?;
    Ok((m.dev(), m.ino(), m.file_type().is_file()))
}

fn cstr(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))
}

/// Renames `from` to `to` only if nothing exists at `to` (`AlreadyExists` otherwise).
pub(crate) fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    let (f, t) = (cstr(from)?, cstr(to)?);
    // SAFETY: both are valid NUL-terminated paths that outlive the call.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            f.as_ptr(),
            libc::AT_FDCWD,
            t.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if r == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        // File systems without RENAME_NOREPLACE: link (fails if `to` exists) then unlink.
        Some(libc::EINVAL) | Some(libc::ENOSYS) => {
            std::fs::hard_link(from, to)?;
            std::fs::remove_file(from)
        }
        _ => Err(e),
    }
}

/// Opens `path` for reading without following a link at it.
pub(crate) fn open_nofollow(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// Sets the permission bits of the regular file at `path` to `mode` (exactly: the umask does
/// not apply), without following a link there.
pub(crate) fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)?;
    if !f.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a regular file", path.display()),
        ));
    }
    // SAFETY: fchmod on a descriptor we own; no memory is involved.
    if unsafe { libc::fchmod(f.as_raw_fd(), mode as libc::mode_t) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Checks that a file can be created at `path` (by creating and removing a probe beside it).
pub(crate) fn check_writable(path: &Path) -> Result<(), Error> {
    let err = |source| Error::OutputPath {
        path: path.to_path_buf(),
        source,
    };
    if path.as_os_str().is_empty() {
        return Err(err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "the path is empty",
        )));
    }
    if path.is_dir() {
        return Err(err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "the path is a directory",
        )));
    }
    // The profile is published by renaming a file over the target: a device or a pipe there
    // (`/dev/null`, say) would be replaced by a regular file.
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
        return Err(err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "the path exists and is not a regular file (publishing would replace it)",
        )));
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let probe = dir.join(format!(
        ".scope-profiler-probe.{}.{:x}",
        std::process::id(),
        crate::data::time::monotonic_ns()
    ));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .map_err(err)?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

//! What `scopeprof top TARGET` names: an output path whose phase is being recorded (its live
//! spool), a process id (the spool it holds open), a finished `.h5` file, or a spool file
//! (a crashed run's, or a live one named directly).

use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use scope_profiler::read::live::spool_path;

/// The first bytes of every HDF5 file.
const HDF5_MAGIC: &[u8; 8] = b"\x89HDF\r\n\x1a\n";

/// Where the calls come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// A spool, and the output path it belongs to (where the finished file appears).
    Spool { spool: PathBuf, output: PathBuf },
    /// A finished profile file.
    File(PathBuf),
}

/// Resolves the command line's TARGET.
pub(crate) fn resolve(arg: &Path) -> Result<Target, String> {
    let text = arg.to_string_lossy();
    if !arg.exists() && !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        let pid: u32 = text
            .parse()
            .map_err(|_| format!("{text}: not a process id"))?;
        return of_pid(pid);
    }
    let spool = spool_path(arg);
    if std::fs::symlink_metadata(&spool).is_ok() {
        // The output path of a program recording now (or of a crashed one).
        return Ok(Target::Spool {
            spool,
            output: arg.to_path_buf(),
        });
    }
    let mut head = [0u8; 13];
    let got = match std::fs::File::open(arg) {
        Ok(mut f) => f.read(&mut head).unwrap_or(0),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!(
                "{}: no such file, and no spool {} beside it: is a program recording with \
                 `.output({:?})`?",
                arg.display(),
                spool.display(),
                arg.display().to_string()
            ))
        }
        Err(e) => return Err(format!("{}: cannot open: {e}", arg.display())),
    };
    if got >= 8 && &head[..8] == HDF5_MAGIC {
        return Ok(Target::File(arg.to_path_buf()));
    }
    if got >= 13 && head[0] == 0 && matches!(&head[5..13], b"SPRSPOL1" | b"SPRSPOL2") {
        return Ok(Target::Spool {
            spool: arg.to_path_buf(),
            output: output_of_spool(arg),
        });
    }
    Err(format!(
        "{}: neither a profile (HDF5) nor a scope-profiler spool",
        arg.display()
    ))
}

/// The output path a spool belongs to: `<dir>/.<name>.spool[.<phase>]` -> `<dir>/<name>`.
fn output_of_spool(spool: &Path) -> PathBuf {
    let name = spool
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = name.strip_prefix('.').unwrap_or(&name);
    let stem = match stem.rfind(".spool") {
        Some(i) => &stem[..i],
        None => stem,
    };
    spool.with_file_name(stem)
}

/// The spool process `pid` holds open (same user only).
pub(crate) fn of_pid(pid: u32) -> Result<Target, String> {
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    let meta = std::fs::metadata(&proc_dir).map_err(|_| format!("no process with id {pid}"))?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me {
        return Err(format!(
            "process {pid} belongs to user id {}, not to you ({me}): `top` only reads the \
             spools of your own processes",
            meta.uid()
        ));
    }
    let fds = std::fs::read_dir(proc_dir.join("fd"))
        .map_err(|e| format!("process {pid}: cannot list its open files: {e}"))?;
    let mut found = Vec::new();
    for fd in fds.flatten() {
        let Ok(link) = std::fs::read_link(fd.path()) else {
            continue;
        };
        let name = link
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if name.starts_with('.') && name.ends_with(".spool") {
            found.push(link);
        }
    }
    found.sort();
    found.dedup();
    match found.as_slice() {
        [] => Err(format!(
            "process {pid} holds no scope-profiler spool open (is it profiling with an \
             output file, and not yet finished?)"
        )),
        [spool] => Ok(Target::Spool {
            output: output_of_spool(spool),
            spool: spool.clone(),
        }),
        many => Err(format!(
            "process {pid} holds {} spools open ({}); name the output file instead",
            many.len(),
            many.iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spools_output() {
        assert_eq!(
            output_of_spool(Path::new("/d/.run.h5.spool")),
            Path::new("/d/run.h5")
        );
        assert_eq!(
            output_of_spool(Path::new("/d/.run.h5.spool.3")),
            Path::new("/d/run.h5")
        );
    }

    #[test]
    fn missing_things_are_named() {
        let e = of_pid(u32::MAX - 7).unwrap_err();
        assert!(e.contains("no process with id"), "{e}");
        let e = resolve(Path::new("/nonexistent/x.h5")).unwrap_err();
        assert!(
            e.contains("no such file") && e.contains(".x.h5.spool"),
            "{e}"
        );
    }
}

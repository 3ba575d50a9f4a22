//! The subcommands that read a profile (run in the child process): `inspect`, `export` and
//! `flamegraph`. Each streams the file: calls and polls are read in bounded chunks, sorted in
//! bounded memory (spilling to a temporary file beside the output) and walked track by track.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use scope_profiler::read::{Profile, StorageLayout};

use crate::chrome::Chrome;
use crate::flame::{Folded, Grouping};
use crate::items::{Item, Kind, Tracks};
use crate::perfetto::Perfetto;
use crate::pipe::Pipe;
use crate::sort::{spill_path, Sorter};
use crate::supervise::Heartbeat;
use crate::walk::{Sink, Walker};
use crate::{Cmd, Format};

/// Calls read per HDF5 hyperslab.
pub(crate) const CHUNK: usize = 1 << 16;

/// Runs a reading subcommand; the error is one line, `FILE: problem`.
pub(crate) fn run(cmd: Cmd) -> Result<(), String> {
    match cmd {
        Cmd::Inspect { file, json } => inspect(&file, json),
        Cmd::Export {
            format,
            file,
            output,
            sort_run_items,
        } => timeline(&file, format, &output, sort_run_items),
        Cmd::Flamegraph {
            file,
            output,
            folded,
            wall,
            per_thread,
            per_task,
            rank,
            sort_run_items,
        } => {
            let group = Grouping {
                per_thread,
                per_task,
                per_rank: false,
            };
            let weigh = Weigh {
                polls: !wall,
                folded,
            };
            flamegraph(&file, &output, weigh, group, rank, sort_run_items)
        }
        _ => Err("this subcommand is not run here".into()),
    }
}

pub(crate) fn open(file: &Path) -> Result<Profile, String> {
    Profile::open(file).map_err(|e| e.to_string())
}

fn inspect(file: &Path, json: bool) -> Result<(), String> {
    let p = open(file)?;
    let mut hb = Heartbeat::new();
    let calls = p.load_calls(&mut || hb.tick()).map_err(|e| e.to_string())?;
    // Every read before the summary's computation (whose helper thread ends with a heartbeat
    // line): a bad file's one error line comes alone.
    let delays = if json {
        String::new()
    } else {
        crate::delays::worst(&p, &mut || hb.tick()).map_err(|e| e.to_string())?
    };
    let summary = crate::supervise::busy(|| calls.summary());
    let text = if json {
        summary.to_json()
    } else {
        summary.render() + &delays
    };
    let mut out = std::io::stdout().lock();
    // A closed pipe (`| head`) is not an error of the file.
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
    Ok(())
}

/// Reads every item of `p` that `keep(rank, item)` accepts into a sorter (`keep` sees every
/// item, so it may also look at the ones it leaves out).
pub(crate) fn collect(
    p: &Profile,
    tracks: &mut Tracks,
    sorter: &mut Sorter,
    polls: bool,
    keep: &mut dyn FnMut(u32, &Item) -> bool,
) -> Result<(), String> {
    let mut hb = Heartbeat::new();
    let mut spill_err: Option<std::io::Error> = None;
    let mut push = |it: Item, rank: u32| {
        if spill_err.is_none() && keep(rank, &it) {
            if let Err(e) = sorter.push(it) {
                spill_err = Some(e);
            }
        }
    };
    let mut tick = || hb.tick();
    tracks
        .calls(p, CHUNK, &mut tick, &mut push)
        .map_err(|e| e.to_string())?;
    if polls {
        tracks
            .polls(p, CHUNK, &mut tick, &mut push)
            .map_err(|e| e.to_string())?;
    }
    match spill_err {
        Some(e) => Err(format!(
            "{}: cannot write the temporary sort file: {e}",
            p.path().display()
        )),
        None => Ok(()),
    }
}

/// Walks the sorted items into `sink`.
fn walk<S: Sink<Error = std::io::Error>>(sorter: Sorter, sink: &mut S) -> std::io::Result<u64> {
    let mut walker = Walker::new();
    let mut hb = Heartbeat::new();
    let mut n = 0u64;
    sorter.finish(|it| {
        n += 1;
        if n.is_multiple_of(65_536) {
            hb.tick();
        }
        walker.push(it, sink)
    })?;
    walker.finish(sink)?;
    Ok(walker.overlapping)
}

/// A temporary output beside `out`, renamed over it on success and removed otherwise.
pub(crate) struct TempOut {
    tmp: PathBuf,
    out: PathBuf,
    done: bool,
}

impl TempOut {
    pub(crate) fn create(out: &Path) -> Result<(TempOut, Pipe), String> {
        let name = out
            .file_name()
            .ok_or_else(|| format!("{}: the output path has no file name", out.display()))?
            .to_string_lossy()
            .into_owned();
        let (tmp, f) = create_beside(out, &name)?;
        Ok((
            TempOut {
                tmp,
                out: out.to_path_buf(),
                done: false,
            },
            Pipe::new(f),
        ))
    }

    pub(crate) fn publish(mut self, mut w: Pipe) -> Result<(), String> {
        let err = |e: std::io::Error| format!("{}: cannot write output: {e}", self.out.display());
        let f = w.finish().map_err(err)?;
        drop(f);
        std::fs::rename(&self.tmp, &self.out).map_err(err)?;
        self.done = true;
        Ok(())
    }
}

/// Creates a new temporary file `.<name>.<pid>.<n>.tmp` beside `out`: exclusively, never
/// through a link (`O_EXCL | O_NOFOLLOW`, so a link planted at the name is neither followed
/// nor truncated), mode `0666 & !umask` like any output a command writes. A name already
/// taken (a stale file of an earlier run with this pid) moves on to the next `n`; a link there
/// is an error naming it.
fn create_beside(out: &Path, name: &str) -> Result<(PathBuf, File), String> {
    use std::os::unix::fs::OpenOptionsExt;
    let err = |e: std::io::Error| format!("{}: cannot create output: {e}", out.display());
    for n in 0..16 {
        let tmp = out.with_file_name(format!(".{name}.{}.{n}.tmp", std::process::id()));
        let created = File::options()
            .write(true)
            .create_new(true)
            .mode(0o666)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp);
        match created {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let link = std::fs::symlink_metadata(&tmp).is_ok_and(|m| m.is_symlink());
                if link {
                    return Err(err(std::io::Error::other(format!(
                        "{} is a symbolic link; refusing to follow it",
                        tmp.display()
                    ))));
                }
            }
            Err(e) => return Err(err(e)),
        }
    }
    Err(err(std::io::Error::other(
        "16 temporary names beside it are taken (stale .tmp files of earlier runs?)",
    )))
}

impl Drop for TempOut {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

fn timeline(file: &Path, format: Format, output: &Path, run_items: usize) -> Result<(), String> {
    let p = open(file)?;
    if p.layout() == StorageLayout::Aggregate {
        return Err(format!(
            "{}: aggregate layout: the file holds only per-region totals, no calls to draw",
            file.display()
        ));
    }
    let mut tracks = Tracks::new(&p);
    let mut sorter = Sorter::new(run_items, spill_path(output));
    collect(&p, &mut tracks, &mut sorter, true, &mut |_, _| true)?;
    let (tmp, w) = TempOut::create(output)?;
    let werr = |e: std::io::Error| format!("{}: cannot write output: {e}", output.display());
    let (w, overlapping) = match format {
        Format::Perfetto => {
            let mut sink = Perfetto::new(w, &tracks).map_err(werr)?;
            let o = walk(sorter, &mut sink).map_err(werr)?;
            (sink.into_inner().map_err(werr)?, o)
        }
        Format::Chrome => {
            let mut sink = Chrome::new(w, &tracks, &p).map_err(werr)?;
            let o = walk(sorter, &mut sink).map_err(werr)?;
            (sink.into_inner().map_err(werr)?, o)
        }
    };
    tmp.publish(w)?;
    let what = match format {
        Format::Perfetto => "Perfetto trace",
        Format::Chrome => "Chrome trace JSON",
    };
    wrote(output, what);
    if overlapping > 0 {
        eprintln!(
            "scopeprof: note: {overlapping} slice(s) overlapped another on their track without \
             nesting; they are drawn on extra `(overlapping N)` tracks"
        );
    }
    Ok(())
}

/// What a flamegraph weighs and writes.
#[derive(Clone, Copy)]
struct Weigh {
    /// Busy time from the polls, when the file has them (else wall-clock time from the calls).
    polls: bool,
    /// Folded text instead of SVG.
    folded: bool,
}

fn flamegraph(
    file: &Path,
    output: &Path,
    weigh: Weigh,
    mut group: Grouping,
    rank: Option<u32>,
    run_items: usize,
) -> Result<(), String> {
    let p = open(file)?;
    if p.layout() == StorageLayout::Aggregate {
        return Err(format!(
            "{}: aggregate layout: the file holds no call tree to draw",
            file.display()
        ));
    }
    let mut ranks: Vec<u32> = p.rows().iter().map(|r| r.rank).collect();
    ranks.sort_unstable();
    ranks.dedup();
    group.per_rank = rank.is_none() && ranks.len() > 1;
    let mut tracks = Tracks::new(&p);
    let spill = if output.as_os_str() == "-" {
        std::env::temp_dir().join("scopeprof-flame")
    } else {
        output.to_path_buf()
    };
    let mut sorter = Sorter::new(run_items, spill_path(&spill));
    let polls = weigh.polls && p.poll_count() > 0;
    let kind = if polls { Kind::Poll } else { Kind::Call };
    let mut keep = move |r: u32, it: &Item| it.kind == kind && rank.is_none_or(|want| r == want);
    collect(&p, &mut tracks, &mut sorter, polls, &mut keep)?;
    let mut sink = Folded::new(&tracks, group);
    let mut walker = Walker::new();
    let mut hb = Heartbeat::new();
    let infallible = |e: std::convert::Infallible| -> std::io::Error { match e {} };
    sorter
        .finish(|it| {
            hb.tick();
            walker.push(it, &mut sink).map_err(infallible)
        })
        .map_err(|e| {
            format!(
                "{}: cannot read back the temporary sort file: {e}",
                file.display()
            )
        })?;
    walker
        .finish(&mut sink)
        .map_err(infallible)
        .map_err(|e| e.to_string())?;
    if walker.overlapping > 0 {
        eprintln!(
            "scopeprof: note: {} call(s) overlapped another call of their lane without nesting; \
             their stacks start at the root",
            walker.overlapping
        );
    }
    let lines = crate::supervise::busy(|| sink.lines());
    let title = if polls {
        format!("{} (busy time)", file.display())
    } else {
        format!("{} (wall-clock time)", file.display())
    };
    write_flame(output, &title, &lines, weigh.folded)
}

/// Writes folded stacks or their SVG to `output` (`-`: stdout), then says what it wrote.
fn write_flame(output: &Path, title: &str, lines: &[String], folded: bool) -> Result<(), String> {
    crate::supervise::busy(|| {
        write_out(output, |w| {
            if folded {
                for l in lines {
                    writeln!(w, "{l}")?;
                }
                Ok(())
            } else {
                svg(title, lines, w)
            }
        })
    })?;
    if output.as_os_str() != "-" {
        let what = if folded {
            "folded stacks"
        } else {
            "flamegraph SVG"
        };
        wrote(output, what);
    }
    Ok(())
}

/// Tells the user what a command wrote (on stdout, which holds nothing else then): the
/// path, what it is, and its size.
fn wrote(output: &Path, what: &str) {
    let bytes = std::fs::metadata(output).map_or(0, |m| m.len());
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "wrote {} ({what}, {})", output.display(), size(bytes));
}

/// A size for people: `812 B`, `19.4 KiB`, `2.0 GiB`.
pub(crate) fn size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut v = bytes as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

#[cfg(feature = "flamegraph")]
fn svg(title: &str, lines: &[String], w: &mut dyn Write) -> std::io::Result<()> {
    let mut opt = inferno::flamegraph::Options::default();
    opt.title = title.to_owned();
    opt.count_name = "ns".into();
    if lines.is_empty() {
        return Err(std::io::Error::other("the file has no calls to draw"));
    }
    inferno::flamegraph::from_lines(&mut opt, lines.iter().map(String::as_str), w)
}

#[cfg(not(feature = "flamegraph"))]
fn svg(_: &str, _: &[String], _: &mut dyn Write) -> std::io::Result<()> {
    Err(std::io::Error::other(
        "this scopeprof was built without the `flamegraph` feature; use --folded",
    ))
}

/// Writes to `output` (atomically) or stdout for `-`.
fn write_out(
    output: &Path,
    f: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), String> {
    if output.as_os_str() == "-" {
        let mut out = std::io::stdout().lock();
        let _ = f(&mut out).and_then(|()| out.flush());
        return Ok(());
    }
    let (tmp, mut w) = TempOut::create(output)?;
    f(&mut w).map_err(|e| format!("{}: {e}", output.display()))?;
    tmp.publish(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A link planted at the temporary name is neither followed nor truncated; a stale file
    /// there is skipped; the output is published as a regular file.
    #[test]
    fn the_temporary_output_never_follows_a_planted_link() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"keep me").unwrap();
        let out = dir.path().join("out.json");
        let first = dir
            .path()
            .join(format!(".out.json.{}.0.tmp", std::process::id()));
        std::os::unix::fs::symlink(&victim, &first).unwrap();
        let e = TempOut::create(&out).err().expect("refused");
        assert!(e.contains("symbolic link"), "{e}");
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep me");
        // A stale regular file at the first name: the next name is used.
        std::fs::remove_file(&first).unwrap();
        std::fs::write(&first, b"stale").unwrap();
        let (tmp, mut w) = TempOut::create(&out).unwrap();
        w.write_all(b"{}").unwrap();
        tmp.publish(w).unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), b"{}");
        assert_eq!(std::fs::read(&first).unwrap(), b"stale");
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep me");
    }
}

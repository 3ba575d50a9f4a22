//! Source capture: the text a region covers, for `rank_region_index/source_texts` and the line
//! profiles' `source` attribute.
//!
//! Read once per finalize from the file the callsite names, resolved against the working
//! directory, `CARGO_MANIFEST_DIR` (when set) and every `Builder::source_root`, in that order.
//! - An `#[instrument]` fn (the callsite's line, or the attribute lines above it, hold
//!   `fn <name>`): the whole fn item, its attributes included.
//! - Any other span (`info_span!`, ...): from the callsite's line to the end of the block that
//!   encloses it.
//!
//! Either is capped at 200 lines and 16 KiB. A file that cannot be found or read gives no text
//! (an empty string in the file), never an error; so does anything but a regular file of at
//! most 1 MiB (a FIFO, a device, a larger file) and a path that is itself a symbolic link (see
//! [`read_source`]; point `Builder::source_root` at the real tree when sources are links).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::data::report::SelfCost;
use crate::data::rows::{PhaseData, PhaseExtra};
use crate::flusher::lines::{LineProfile, RegionLines};

/// Most lines captured for one region.
const MAX_LINES: usize = 200;
/// Most bytes captured for one region.
const MAX_BYTES: usize = 16 * 1024;

/// Largest source file read (larger ones give no text).
const MAX_FILE: u64 = 1 << 20;

/// The text of the source file `path`, if it is a regular file of at most [`MAX_FILE`] bytes
/// of UTF-8 and not itself a symbolic link. It is opened `O_NONBLOCK | O_NOFOLLOW` and checked
/// with `fstat` before anything is read, so a FIFO, a device (`/dev/zero`), a socket or a link
/// planted at a callsite's path can neither hang the finalize, nor fill its memory, nor copy
/// a file the link points to into the profile.
fn read_source(path: &Path) -> Option<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.len() > MAX_FILE {
        return None;
    }
    let mut text = String::new();
    // Bounded even if the file grows meanwhile.
    file.take(MAX_FILE + 1).read_to_string(&mut text).ok()?;
    (text.len() as u64 <= MAX_FILE).then_some(text)
}

/// Reads source files at most once per finalize.
#[derive(Debug, Default)]
pub(crate) struct SourceReader {
    roots: Vec<PathBuf>,
    files: HashMap<String, Option<Vec<String>>>,
}

impl SourceReader {
    /// A reader resolving paths against the working directory, `CARGO_MANIFEST_DIR` and
    /// `extra_roots`.
    pub(crate) fn new(extra_roots: &[PathBuf]) -> SourceReader {
        let mut roots = vec![PathBuf::new()];
        if let Some(dir) = std::env::var_os("CARGO_MANIFEST_DIR") {
            roots.push(PathBuf::from(dir));
        }
        roots.extend(extra_roots.iter().cloned());
        SourceReader {
            roots,
            files: HashMap::new(),
        }
    }

    fn lines(&mut self, file: &str) -> Option<&[String]> {
        if !self.files.contains_key(file) {
            let text = self.roots.iter().find_map(|root| {
                let p = if Path::new(file).is_absolute() {
                    PathBuf::from(file)
                } else {
                    root.join(file)
                };
                read_source(&p)
            });
            let lines = text.map(|t| t.lines().map(str::to_owned).collect());
            self.files.insert(file.to_owned(), lines);
        }
        self.files.get(file).and_then(|l| l.as_deref())
    }

    /// The source of region `name` whose callsite is `file:line` (1-based), and the line
    /// number its text starts at; `None` when the file is not found.
    pub(crate) fn region_source(
        &mut self,
        file: &str,
        line: i64,
        name: &str,
    ) -> Option<(String, i64)> {
        if file.is_empty() || line < 1 {
            return None;
        }
        let lines = self.lines(file)?;
        let at = (line - 1) as usize;
        if at >= lines.len() {
            return None;
        }
        let (first, last) = match fn_item_start(lines, at, name) {
            Some(start) => (start, block_end(lines, at, true)),
            None => (at, block_end(lines, at, false)),
        };
        Some((cap(&lines[first..=last]), first as i64 + 1))
    }
}

/// What of the configuration [`phase_extra`] needs.
#[derive(Clone, Copy)]
pub(crate) struct Sources<'a> {
    /// Capture each region's source text (`Builder::capture_source`).
    pub capture_source: bool,
    /// Where else to look for source files (`Builder::source_root`).
    pub source_roots: &'a [std::path::PathBuf],
    /// Subtract the measured cost per child call from exclusive times.
    pub compensate_overhead: bool,
}

/// The extras of one phase: source texts per region row (when capturing), line profiles (one
/// per region with line data), the measured overhead and the compensation per child call.
pub(crate) fn phase_extra(
    config: Sources<'_>,
    overhead: Option<SelfCost>,
    data: &PhaseData,
    lines: Vec<(u32, RegionLines)>,
) -> PhaseExtra {
    let mut reader = SourceReader::new(config.source_roots);
    let mut source = |file: &str, line: i64, name: &str| {
        if config.capture_source {
            reader.region_source(file, line, name)
        } else {
            None
        }
    };
    let source_texts = data
        .regions
        .iter()
        .map(|r| source(&r.file, r.line, &r.name).map_or_else(String::new, |(t, _)| t))
        .collect();
    let line_profiles = lines
        .into_iter()
        // A region whose calls never fired an event has only its own line: no profile.
        .filter(|(_, table)| table.by_line.len() > 1)
        .filter_map(|(id, table)| {
            let name = data.region_names.get(id as usize)?;
            let row = data.regions.iter().find(|r| &r.name == name)?;
            let mut p = LineProfile::new(name.clone(), row.file.clone(), row.line, &table);
            p.source = source(&row.file, row.line, name);
            Some(p)
        })
        .collect();
    let child_overhead_ns = match &overhead {
        Some(o) if config.compensate_overhead => o.ns_per_call.round() as i64,
        _ => 0,
    };
    PhaseExtra {
        source_texts,
        line_profiles,
        overhead,
        child_overhead_ns,
        tokio: data.extra.tokio.clone(),
        open_calls: data.extra.open_calls.clone(),
        flight: data.extra.flight.clone(),
    }
}

/// Where the fn item `name` starts (its first attribute line), when the callsite at `at` is an
/// `#[instrument]` fn: `fn name` on that line or the few below (the attribute may come first).
fn fn_item_start(lines: &[String], at: usize, name: &str) -> Option<usize> {
    let needle = format!("fn {name}");
    let fn_line = (at..lines.len().min(at + 8)).find(|&i| {
        lines[i].find(&needle).is_some_and(|k| {
            let rest = &lines[i][k + needle.len()..];
            rest.starts_with(['(', '<', ' '])
        })
    })?;
    // Back over attributes, doc comments and the callsite line itself.
    let mut start = fn_line;
    while start > 0 {
        let prev = lines[start - 1].trim_start();
        if prev.starts_with("#[") || prev.starts_with("///") || start > at {
            start -= 1;
        } else {
            break;
        }
    }
    Some(start.min(at))
}

/// The last line of the block: for a fn item (`own_block`), the line closing the first brace
/// opened from `at`; otherwise the line closing the block that encloses `at`.
fn block_end(lines: &[String], at: usize, own_block: bool) -> usize {
    let mut depth: i64 = 0;
    let mut opened = false;
    let mut scan = Scanner::default();
    for (i, line) in lines.iter().enumerate().skip(at) {
        for delta in scan.braces(line) {
            depth += delta;
            if delta > 0 {
                opened = true;
            }
            if (own_block && opened && depth == 0) || depth < 0 {
                return i;
            }
        }
        if i - at + 1 >= MAX_LINES {
            return i;
        }
    }
    lines.len() - 1
}

/// Brace counting that skips strings, char literals and comments (good enough for Rust).
#[derive(Default)]
struct Scanner {
    in_block_comment: bool,
    in_string: bool,
}

impl Scanner {
    /// +1 / -1 per `{` / `}` of code on this line.
    fn braces(&mut self, line: &str) -> Vec<i64> {
        let mut out = Vec::new();
        let b = line.as_bytes();
        let mut i = 0;
        while i < b.len() {
            let c = b[i];
            let next = b.get(i + 1).copied();
            if self.in_block_comment {
                if c == b'*' && next == Some(b'/') {
                    self.in_block_comment = false;
                    i += 1;
                }
            } else if self.in_string {
                if c == b'\\' {
                    i += 1;
                } else if c == b'"' {
                    self.in_string = false;
                }
            } else {
                match c {
                    b'/' if next == Some(b'/') => break,
                    b'/' if next == Some(b'*') => {
                        self.in_block_comment = true;
                        i += 1;
                    }
                    b'"' => self.in_string = true,
                    // A char literal such as '{' (not a lifetime: those have no closing quote
                    // two or three bytes on).
                    b'\'' if b.get(i + 2) == Some(&b'\'') => i += 2,
                    b'\'' if next == Some(b'\\') && b.get(i + 3) == Some(&b'\'') => i += 3,
                    b'{' => out.push(1),
                    b'}' => out.push(-1),
                    _ => {}
                }
            }
            i += 1;
        }
        out
    }
}

/// Joins lines (each ending in a newline), cut at [`MAX_BYTES`] on a line boundary.
fn cap(lines: &[String]) -> String {
    let mut s = String::new();
    for l in lines.iter().take(MAX_LINES) {
        if s.len() + l.len() + 1 > MAX_BYTES {
            break;
        }
        s.push_str(l);
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(s: &str) -> Vec<String> {
        s.lines().map(str::to_owned).collect()
    }

    #[test]
    fn instrumented_fn_is_the_whole_item() {
        let src = lines(
            "use x;\n/// Docs.\n#[tracing::instrument]\nfn solve(n: u32) -> u32 {\n    let s = \"}\";\n    if n > 0 { 1 } else { 0 }\n}\nfn other() {}\n",
        );
        let start = fn_item_start(&src, 2, "solve").unwrap();
        assert_eq!(start, 1);
        assert_eq!(block_end(&src, 2, true), 6);
    }

    #[test]
    fn span_block_runs_to_the_enclosing_close() {
        let src = lines("fn main() {\n    let a = 1;\n    let _s = info_span!(\"step\").entered();\n    // }\n    work('{');\n}\nfn after() {}\n");
        assert_eq!(fn_item_start(&src, 2, "step"), None);
        assert_eq!(block_end(&src, 2, false), 5);
    }

    #[test]
    fn long_blocks_are_capped() {
        let mut s = String::from("fn f() {\n");
        for _ in 0..500 {
            s += "    x();\n";
        }
        s += "}\n";
        let src = lines(&s);
        let end = block_end(&src, 1, false);
        assert_eq!(end, MAX_LINES);
        assert!(cap(&src[1..=end]).lines().count() <= MAX_LINES);
        let wide: Vec<String> = (0..100).map(|_| "y".repeat(1000)).collect();
        assert!(cap(&wide).len() <= MAX_BYTES);
    }
}

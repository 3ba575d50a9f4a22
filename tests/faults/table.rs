//! The fault matrix's table and what its rows share: the children's settings, counting
//! the calls a profile holds, recovering what a fault left, filling a disk.

use std::path::{Path, PathBuf};

/// The most an exit may take beyond the same program's exit without a fault.
const EXIT_SLACK_S: f64 = 2.0;

/// One row of the table.
pub(crate) struct Row {
    pub fault: String,
    pub completed: u64,
    pub readable: u64,
    pub lost: Option<u64>,
    pub exit: String,
    pub survives: String,
    pub remedy: &'static str,
}

/// The matrix as it ran.
#[derive(Default)]
pub(crate) struct Table {
    pub rows: Vec<Row>,
    pub problems: Vec<String>,
    pub baseline_exit_s: f64,
    scratch: Option<tempfile::TempDir>,
}

impl Table {
    /// Records a problem of `row` unless `ok`.
    pub(crate) fn check(&mut self, row: &str, ok: bool, what: impl Into<String>) {
        if !ok {
            self.problems.push(format!("{row}: {}", what.into()));
        }
    }

    /// A directory for what the rows recover and their progress files.
    pub(crate) fn scratch(&mut self) -> PathBuf {
        self.scratch
            .get_or_insert_with(|| tempfile::tempdir().expect("a scratch directory"))
            .path()
            .to_path_buf()
    }

    /// Checks an exit time against the baseline's.
    pub(crate) fn check_exit(&mut self, row: &str, exit_s: f64) {
        let limit = self.baseline_exit_s + EXIT_SLACK_S;
        self.check(
            row,
            exit_s <= limit,
            format!("exit took {exit_s:.3} s, more than {limit:.3} s"),
        );
    }

    /// The table in Markdown.
    pub(crate) fn render(&self) -> String {
        let mut s = String::from(
            "| fault | completed | readable | counted lost | exit | what survives | what to run |\n\
             |---|---:|---:|---:|---:|---|---|\n",
        );
        for r in &self.rows {
            s += &format!(
                "| {} | {} | {} | {} | {} | {} | {} |\n",
                r.fault,
                r.completed,
                r.readable,
                r.lost.map_or("-".to_owned(), |l| l.to_string()),
                r.exit,
                r.survives,
                r.remedy
            );
        }
        s
    }
}

pub(crate) fn env(out: &Path, calls: u64) -> Vec<(&'static str, String)> {
    vec![
        ("SCOPE_FAULT_OUT", out.display().to_string()),
        ("SCOPE_FAULT_CALLS", calls.to_string()),
        ("SCOPE_FAULT_FLUSH_MS", super::rows::FLUSH_MS.to_string()),
    ]
}

pub(crate) fn with(
    mut env: Vec<(&'static str, String)>,
    key: &'static str,
    v: &str,
) -> Vec<(&'static str, String)> {
    env.retain(|(k, _)| *k != key);
    env.push((key, v.to_owned()));
    env
}

/// Calls of region `name` in the profile at `path` (0 when there is none).
pub(crate) fn calls_in(path: &Path, name: &str) -> u64 {
    if !path.exists() {
        return 0;
    }
    let p = scope_profiler::read::Profile::open(path).expect("a readable profile");
    p.rows()
        .iter()
        .filter(|r| p.region_name(r.region) == name)
        .map(|r| r.count)
        .sum()
}

/// Recovers the spools beside `out` into it, as `scopeprof recover OUT` does; the `work`
/// calls recovered.
pub(crate) fn recover(out: &Path) -> u64 {
    match scope_profiler::recover(out) {
        Ok(_) => calls_in(out, "work"),
        Err(_) => 0,
    }
}

/// Recovers one kept spool file into `scratch`, as `scopeprof recover --spool` does.
pub(crate) fn recover_kept(table: &mut Table, spool: Option<&str>) -> u64 {
    let Some(spool) = spool else { return 0 };
    let to = table
        .scratch()
        .join(format!("kept-{}.h5", table.rows.len()));
    scope_profiler::recover_spool(spool, &to).expect("the kept spool recovers");
    calls_in(&to, "work")
}

/// The names in `dir`.
pub(crate) fn entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .expect("the directory")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

/// Fills the file system holding `dir` to the last byte.
pub(crate) fn fill(dir: &Path) -> PathBuf {
    use std::io::Write;
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path).expect("a filler");
    let block = vec![1u8; 64 << 10];
    while f.write_all(&block).is_ok() {}
    let small = [1u8; 512];
    while f.write_all(&small).is_ok() {}
    path
}

pub(crate) fn secs(s: f64) -> String {
    format!("{s:.2} s")
}

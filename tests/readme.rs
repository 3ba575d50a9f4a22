//! The README, tried the way a new user tries it: a new cargo project outside the repository
//! (a temporary directory) that depends on this crate by path as the README's `Cargo.toml`
//! says, with the README's Tokio `main.rs` pasted in, built and run. Its printed summary's
//! `busy [s]` must be the program's own CPU time within 10 %, and every command of the README's
//! `scopeprof` table must work on the profile it wrote.
//!
//! The project builds offline with this repository's `Cargo.lock` (the versions the cache
//! already holds) into `target/tmp/readme-project`, which persists, so later runs rebuild only
//! this crate. One test: it measures CPU time of child processes, which other tests of the
//! same binary would add to.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

const REPO: &str = env!("CARGO_MANIFEST_DIR");

/// The fenced block that follows the first line of `readme` equal to `label`.
fn block_after(readme: &str, label: &str) -> String {
    let mut lines = readme.lines().skip_while(|l| l.trim() != label).skip(1);
    let fence = lines
        .find(|l| l.starts_with("```"))
        .unwrap_or_else(|| panic!("no code block after {label:?} in README.md"));
    assert!(fence.len() > 3, "a block with a language: {fence}");
    let body: Vec<&str> = lines.take_while(|l| !l.starts_with("```")).collect();
    body.join("\n") + "\n"
}

/// The subcommands of the README's `scopeprof` table, in its order.
fn readme_commands(readme: &str) -> Vec<String> {
    readme
        .lines()
        .skip_while(|l| !l.starts_with("| `scopeprof`"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .flat_map(|l| {
            // `| `diff A B`, `check BASE.. -- NEW..` | ... |`: every backticked command of the
            // first cell.
            let cell = l.split(" | ").next().unwrap_or_default();
            cell.split('`')
                .skip(1)
                .step_by(2)
                .map(|c| c.split_whitespace().next().unwrap_or_default().to_owned())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Makes the project in `dir` from the README's blocks; returns the built program.
fn make_project(readme: &str, dir: &Path) -> PathBuf {
    let toml = block_after(readme, "`Cargo.toml`:");
    let main = block_after(readme, "`src/main.rs`:");
    let dep = toml
        .lines()
        .find(|l| l.starts_with("scope-profiler = { path = "))
        .unwrap_or_else(|| panic!("the README depends on the crate by path:\n{toml}"));
    let toml = toml.replace(dep, &format!("scope-profiler = {{ path = {REPO:?} }}"));
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(dir.join("Cargo.toml"), &toml).unwrap();
    std::fs::write(dir.join("src/main.rs"), main).unwrap();
    std::fs::copy(Path::new(REPO).join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("readme-project");
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["build", "--offline", "--quiet"])
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", &target)
        // As a user builds it: not with scripts/test.sh's parallel HDF5 or flags.
        .env_remove("HDF5_DIR")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .output()
        .expect("run cargo");
    assert!(
        out.status.success(),
        "the README's example does not build:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let name = toml
        .lines()
        .find_map(|l| l.strip_prefix("name = "))
        .expect("a package name")
        .trim_matches('"');
    target.join("debug").join(name)
}

/// User plus system CPU time of the waited-for children so far.
fn children_cpu() -> Duration {
    // SAFETY: getrusage writes into the zeroed struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a rusage.
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) }, 0);
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// Runs the program in `dir`, at real-time priority when this machine allows it (so other
/// load does not preempt its workers inside polls, which busy time would count); returns
/// its output and CPU time.
fn run_program(program: &Path, dir: &Path, realtime: bool) -> (Output, Duration) {
    let mut cmd = if realtime {
        let mut c = Command::new("chrt");
        c.args(["-f", "1"]).arg(program);
        c
    } else {
        Command::new(program)
    };
    let before = children_cpu();
    let out = cmd.current_dir(dir).output().expect("run the example");
    let cpu = children_cpu() - before;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (out, cpu)
}

/// The `busy [s]` cell of `region`'s row in a printed summary.
fn busy_of(summary: &str, region: &str) -> f64 {
    assert!(summary.contains("total [s]   busy [s]"), "{summary}");
    let row = summary
        .lines()
        .find(|l| l.contains(&format!("│ {region} ")))
        .unwrap_or_else(|| panic!("no {region} row:\n{summary}"));
    let cells: Vec<&str> = row.trim().trim_matches('│').split_whitespace().collect();
    // region, calls, % session, total, busy, ...
    cells[4].parse().unwrap_or_else(|_| panic!("{row}"))
}

fn scopeprof(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_scopeprof"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run scopeprof")
}

fn scopeprof_ok(dir: &Path, args: &[&str]) -> String {
    let out = scopeprof(dir, args);
    assert!(
        out.status.success(),
        "scopeprof {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// What a summary's info box says of the regions (`3 region(s), not counting ...`).
fn regions_line(summary: &str) -> &str {
    let line = summary
        .lines()
        .find(|l| l.contains(" region(s)"))
        .unwrap_or_else(|| panic!("no region count in {summary}"));
    let at = line.find("; ").expect("after the wall clock") + 2;
    line[at..].trim_end_matches(['│', ' '])
}

/// The first CPU this process may run on.
fn first_cpu() -> usize {
    // SAFETY: a zeroed cpu_set_t is an empty set; sched_getaffinity fills it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a cpu_set_t of the size given.
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
    assert_eq!(r, 0, "sched_getaffinity");
    // SAFETY: CPU_ISSET reads the set filled above.
    (0..libc::CPU_SETSIZE as usize)
        .find(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .expect("some CPU")
}

/// A run of the program killed (SIGKILL) when it prints its checksum: every request has
/// completed, and the profiler has not finalized, so the calls are in its spool only. The
/// spool is written once a second (`spool_sync_interval`): on one CPU the program's 1.6 s of
/// work outlast the first write, so the spool holds calls when it is killed.
fn crashed_run(program: &Path, dir: &Path) -> &'static str {
    use std::io::BufRead;
    let mut child = Command::new("taskset")
        .args(["-c", &first_cpu().to_string()])
        .arg(program)
        .current_dir(dir)
        .env("SCOPE_PROFILER_OUTPUT", "crashed.h5")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("taskset (util-linux) runs the program on one CPU");
    let out = std::io::BufReader::new(child.stdout.take().unwrap());
    for line in out.lines() {
        if line.unwrap().starts_with("checksum") {
            break;
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        !dir.join("crashed.h5").exists(),
        "killed before it published"
    );
    "crashed.h5"
}

/// Runs every command of the README's table on `file` (and a second profile, `base`).
fn every_command(readme: &str, dir: &Path, program: &Path, summary: &str) {
    let mut ran = Vec::new();
    let mut run = |cmd: &str, args: &[&str]| {
        ran.push(cmd.to_owned());
        let mut all = vec![cmd];
        all.extend_from_slice(args);
        scopeprof_ok(dir, &all)
    };
    let text = run("inspect", &["profiling_data.h5"]);
    assert!(
        text.contains("handle_request") && text.contains("busy [s]"),
        "{text}"
    );
    // The file says nothing of the build that wrote it, nor does `scopeprof`'s own build.
    assert!(!text.contains("debug build"), "{text}");
    // One region count in the program's summary and in `inspect`.
    assert_eq!(
        regions_line(&text),
        regions_line(summary),
        "{summary}\n{text}"
    );
    let json = run("inspect", &["profiling_data.h5", "--json"]);
    assert!(
        json.starts_with("{\"file\":\"profiling_data.h5\""),
        "{json}"
    );
    let top = run("top", &["profiling_data.h5", "--once", "--window", "all"]);
    assert!(top.contains("handle_request"), "{top}");
    for (format, out) in [("perfetto", "run.pftrace"), ("chrome", "run.json")] {
        let said = run(
            "export",
            &["--format", format, "profiling_data.h5", "-o", out],
        );
        assert!(said.starts_with(&format!("wrote {out} (")), "{said}");
    }
    let folded = run("flamegraph", &["profiling_data.h5", "--folded"]);
    assert!(folded.contains("handle_request;parse "), "{folded}");
    let svg = scopeprof(dir, &["flamegraph", "profiling_data.h5", "-o", "flame.svg"]);
    if cfg!(feature = "flamegraph") {
        assert!(svg.status.success() && dir.join("flame.svg").exists());
    } else {
        assert_eq!(svg.status.code(), Some(2), "SVG needs the feature");
    }
    let diff = run("diff", &["base.h5", "profiling_data.h5"]);
    assert!(diff.contains("parse"), "{diff}");
    run(
        "check",
        &[
            "--max-regression",
            "1000",
            "base.h5",
            "--",
            "profiling_data.h5",
        ],
    );
    run("report", &["profiling_data.h5", "-o", "report.html"]);
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("handle_request"), "{html:.300}");
    let crashed = crashed_run(program, dir);
    let said = run("recover", &[crashed]);
    let text = run("inspect", &[crashed]);
    assert!(text.contains("parse"), "{said}\n{text}");
    std::fs::copy(dir.join("base.h5"), dir.join("run.rank0.h5")).unwrap();
    std::fs::copy(dir.join("profiling_data.h5"), dir.join("run.rank1.h5")).unwrap();
    run("merge", &["merged.h5", "run.rank0.h5", "run.rank1.h5"]);
    assert!(run("inspect", &["merged.h5"]).contains("handle_request"));
    for cmd in readme_commands(readme) {
        assert!(
            ran.contains(&cmd),
            "the README's `{cmd}` is not run here: {ran:?}"
        );
    }
}

#[test]
fn the_readme_tokio_example_as_a_new_project() {
    let readme = std::fs::read_to_string(Path::new(REPO).join("README.md")).unwrap();
    let commands = readme_commands(&readme);
    assert!(
        commands.len() >= 8,
        "the README's scopeprof table: {commands:?}"
    );
    let dir = tempfile::tempdir().unwrap();
    let program = make_project(&readme, dir.path());
    let realtime = Command::new("chrt")
        .args(["-f", "1", "true"])
        .output()
        .is_ok_and(|o| o.status.success());
    // Busy time is time inside polls: a worker preempted by another process inside a poll
    // counts as busy. At real-time priority that does not happen; without it (no permission),
    // a loaded machine can inflate busy, so up to three runs, and every ratio is reported.
    let mut ratios = Vec::new();
    for attempt in 0..3 {
        let (out, cpu) = run_program(&program, dir.path(), realtime);
        let summary = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            summary.contains("WARNING: debug build (unoptimized"),
            "{summary}"
        );
        let busy = busy_of(&summary, "handle_request");
        let ratio = busy / cpu.as_secs_f64();
        eprintln!(
            "busy {busy:.3} s, CPU {:.3} s: {ratio:.3} (real-time priority: {realtime})",
            cpu.as_secs_f64()
        );
        ratios.push(ratio);
        if attempt == 0 {
            std::fs::copy(
                dir.path().join("profiling_data.h5"),
                dir.path().join("base.h5"),
            )
            .unwrap();
        }
        if (ratio - 1.0).abs() <= 0.10 {
            every_command(&readme, dir.path(), &program, &summary);
            return;
        }
        eprintln!("{summary}");
    }
    panic!("busy / CPU time {ratios:.3?} is never within 10 % (real-time priority: {realtime})");
}

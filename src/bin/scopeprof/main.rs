//! `scopeprof`: look at scope-profiler files without Python.
//!
//! ```text
//! scopeprof inspect FILE [--json]                         the summary table (or its rows as JSON),
//!                                                         and the worst scheduled delays of tasks
//! scopeprof top TARGET [--once --format json|text]        a running program's regions, live
//! scopeprof export --format perfetto|chrome FILE -o OUT   a timeline for ui.perfetto.dev
//! scopeprof flamegraph FILE -o OUT.svg [--folded]         exclusive-time flamegraph
//! scopeprof recover OUTPUT.h5 [--spool SPOOL]             a profile from a crashed run's spool
//! scopeprof merge OUTPUT.h5 RUN.rank0.h5 RUN.rank1.h5 ...  one multi-rank file from per-rank files
//! scopeprof diff BASE CAND [--format text|markdown|json]  per-region statistics side by side
//! scopeprof check BASE... -- CAND... --max-regression PCT   a noise-aware regression gate for CI
//! scopeprof report [BASE] FILE -o report.html             one self-contained HTML report
//! scopeprof critical-path FILE [--region R] [--slowest N | --call ID] [--json]
//!                                                         where a request's time went across tasks
//! ```
//!
//! Files are read in a child process with a data limit (see `supervise`): a corrupt file gives
//! exit status 2 and one line on stderr naming the file and the problem, never a crash of
//! this command or the exhaustion of the machine's memory.

mod chrome;
mod compare;
mod critical;
mod delays;
mod export;
mod flame;
mod items;
mod perfetto;
mod pipe;
mod proto;
mod report;
mod sort;
mod supervise;
mod top;
mod walk;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};

/// Look at scope-profiler (schema 3) HDF5 files: summaries, Perfetto and Chrome timelines of
/// threads, Tokio tasks and polls, flamegraphs.
#[derive(Parser, Debug)]
#[command(name = "scopeprof", version)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
    /// Stop reading a file after this many seconds without progress (a looping HDF5 library
    /// on a corrupt file).
    #[arg(long, global = true, default_value_t = 30, hide = true)]
    stall_secs: u64,
    /// Memory (MiB) the process that reads the files may allocate (RLIMIT_DATA), so a small
    /// corrupt file that declares huge datasets fails with one line instead of exhausting
    /// memory; 0: no limit. Default: $SCOPEPROF_DATA_LIMIT_MIB, else 2048.
    #[arg(long, global = true, value_name = "MIB")]
    data_limit_mib: Option<u64>,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Print the summary table of a profile (the one a run prints at finalize).
    Inspect {
        /// The profile.
        file: PathBuf,
        /// Print the table's rows as JSON instead.
        #[arg(long)]
        json: bool,
    },
    /// Watch a running program's regions live from its spool (or browse a finished file):
    /// TARGET is the output path it was given, its process id, a `.h5` file or a spool.
    Top(top::TopArgs),
    /// Write a timeline: a Perfetto protobuf trace or Chrome Trace Event JSON.
    Export {
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Perfetto)]
        format: Format,
        /// The profile.
        file: PathBuf,
        /// Output file (`.pftrace` for Perfetto, `.json` for Chrome).
        #[arg(short, long)]
        output: PathBuf,
        /// Items sorted in memory before spilling to a temporary file (memory ~32 bytes each).
        #[arg(long, default_value_t = sort::DEFAULT_RUN_ITEMS, hide = true)]
        sort_run_items: usize,
    },
    /// Write a flamegraph (SVG) of exclusive busy time per call path (the polls: where the CPU
    /// went), or of wall-clock time with --wall, or its folded stacks.
    Flamegraph {
        /// The profile.
        file: PathBuf,
        /// Output file (SVG, or folded text with --folded); `-` for stdout.
        #[arg(short, long, default_value = "-")]
        output: PathBuf,
        /// Write folded stacks (`a;b;c <ns>`) instead of SVG.
        #[arg(long)]
        folded: bool,
        /// Weigh wall-clock time (calls, `.await` included) instead of busy time (polls).
        #[arg(long)]
        wall: bool,
        /// One stack root per thread.
        #[arg(long, conflicts_with = "per_task")]
        per_thread: bool,
        /// One stack root per Tokio task (and per thread for calls outside tasks).
        #[arg(long)]
        per_task: bool,
        /// Only this MPI rank.
        #[arg(long)]
        rank: Option<u32>,
        #[arg(long, default_value_t = sort::DEFAULT_RUN_ITEMS, hide = true)]
        sort_run_items: usize,
    },
    /// Turn the spool of a run that never finalized into a profile (was `scope-profiler-recover`).
    Recover {
        /// The profile to write (its spool files lie beside it).
        output: PathBuf,
        /// Read this one spool file (left in place) instead of those beside OUTPUT.
        #[arg(long)]
        spool: Option<PathBuf>,
    },
    /// Compare two profiles region by region: calls, total, mean, p50, p99 and their change.
    Diff(compare::diff::DiffArgs),
    /// Fail when a region of the candidate run(s) got slower than the base run(s) by more
    /// than a budget, with a statistical test that tells noise from a regression.
    #[command(after_help = compare::check::RULE)]
    Check(compare::check::CheckArgs),
    /// Write one self-contained HTML report (summary, flamegraph, timeline, slowest calls;
    /// with two files, the colored diff too) that opens offline.
    Report(report::ReportArgs),
    /// The critical path of a region's calls across Tokio tasks: per call, what it ran, what it
    /// waited for (another task, a worker, a timer or I/O, a thread) and for how long; then
    /// which kinds, regions and tasks lie on the path most over all its calls.
    CriticalPath(critical::CriticalArgs),
    /// Join single-rank profiles (`<stem>.rank<N>.h5`, written per rank under an MPI launcher
    /// without the `mpi` feature, or recovered) into one multi-rank profile.
    Merge {
        /// The multi-rank profile to write.
        output: PathBuf,
        /// The single-rank profiles; each one's rank is the `N` of `.rank<N>` in its name.
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
    },
}

/// The files a reading command reads (what the parent names when the reading child dies).
fn files_read(cmd: &Cmd) -> String {
    let join = |f: &[&PathBuf]| {
        f.iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match cmd {
        Cmd::Inspect { file, .. } | Cmd::Export { file, .. } | Cmd::Flamegraph { file, .. } => {
            file.display().to_string()
        }
        Cmd::Top(a) => a.target.display().to_string(),
        Cmd::Diff(a) => join(&[&a.base, &a.cand]),
        Cmd::Check(a) => join(&a.files.iter().chain(&a.cand).collect::<Vec<_>>()),
        Cmd::Report(a) => join(&a.files.iter().collect::<Vec<_>>()),
        Cmd::CriticalPath(a) => a.file.display().to_string(),
        Cmd::Recover { output, spool } => spool.as_ref().unwrap_or(output).display().to_string(),
        Cmd::Merge { inputs, .. } => join(&inputs.iter().collect::<Vec<_>>()),
    }
}

/// Timeline formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Format {
    /// Perfetto protobuf (`.pftrace`), for ui.perfetto.dev.
    Perfetto,
    /// Chrome Trace Event JSON.
    Chrome,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let limit = match supervise::data_limit(cli.data_limit_mib) {
        Ok(l) => l,
        Err(msg) => {
            eprintln!("scopeprof: {msg}");
            return ExitCode::from(supervise::BAD_INPUT);
        }
    };
    if let Cmd::Top(a) = &cli.command {
        if !a.once && !supervise::is_child() {
            // The terminal UI runs in this process: it owns the terminal, and a supervising
            // parent would take its quiet moments for a stall.
            return match top::run(a) {
                Ok(()) => ExitCode::SUCCESS,
                Err(msg) => {
                    eprintln!("scopeprof: {msg}");
                    ExitCode::from(supervise::BAD_INPUT)
                }
            };
        }
    }
    if !supervise::is_child() {
        if let Err(msg) = refuse_svg_to_terminal(&cli.command) {
            eprintln!("scopeprof: {msg}");
            return ExitCode::from(supervise::BAD_INPUT);
        }
        let files = files_read(&cli.command);
        // `check` exits 1 (regressed) or 3 (inconclusive, --strict) as a result.
        let verdicts: &[u8] = if matches!(cli.command, Cmd::Check(_)) {
            &[1, 3]
        } else {
            &[]
        };
        let stall = Duration::from_secs(cli.stall_secs.max(1));
        return supervise::run_child(&files, stall, verdicts, limit);
    }
    supervise::limit_data(limit);
    let result = match &cli.command {
        // Library calls that read and write whole files: a heartbeat while they run.
        Cmd::Recover { output, spool } => {
            return supervise::busy(|| recover(output, spool.as_ref()))
        }
        Cmd::Merge { output, inputs } => return supervise::busy(|| merge(output, inputs)),
        Cmd::Diff(a) => compare::run_diff(a).map(|()| 0),
        Cmd::Check(a) => compare::run_check(a),
        Cmd::Report(a) => report::run(a).map(|()| 0),
        Cmd::CriticalPath(a) => critical::run(a).map(|()| 0),
        Cmd::Top(a) => top::run(a).map(|()| 0),
        _ => export::run(cli.command).map(|()| 0),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(msg) => {
            eprintln!("scopeprof: {msg}");
            ExitCode::from(supervise::BAD_INPUT)
        }
    }
}

/// `flamegraph` without `-o` writes to stdout: an SVG there is only useful in a pipe, so a
/// terminal gets an error instead of kilobytes of XML (folded stacks are text, and go there).
fn refuse_svg_to_terminal(cmd: &Cmd) -> Result<(), String> {
    use std::io::IsTerminal;
    match cmd {
        Cmd::Flamegraph {
            output,
            folded: false,
            ..
        } if output.as_os_str() == "-" && std::io::stdout().is_terminal() => Err(
            "flamegraph: not writing SVG to a terminal; give `-o flame.svg`, pipe it, or use \
             --folded for text"
                .into(),
        ),
        _ => Ok(()),
    }
}

/// The `merge` subcommand (in the reading child, as every command that reads files).
fn merge(output: &PathBuf, inputs: &[PathBuf]) -> ExitCode {
    match scope_profiler::merge_ranks(inputs, output) {
        Ok(m) => {
            println!(
                "merged {} ranks {:?} ({} calls) into {}",
                m.ranks.len(),
                m.ranks,
                m.calls,
                m.file.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("scopeprof: {}: {e}", output.display());
            ExitCode::from(supervise::BAD_INPUT)
        }
    }
}

/// The `recover` subcommand (in the reading child: a planted or corrupt spool, or libhdf5,
/// cannot take the command down with more than one line).
fn recover(output: &PathBuf, spool: Option<&PathBuf>) -> ExitCode {
    let result = match spool {
        None => scope_profiler::recover(output),
        Some(s) => scope_profiler::recover_spool(s, output),
    };
    match result {
        Ok(r) => {
            println!("{r}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("scopeprof: {}: {e}", output.display());
            ExitCode::from(supervise::BAD_INPUT)
        }
    }
}

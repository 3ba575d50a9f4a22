//! `scopeprof top TARGET`: watch a running program's regions live from its spool, or browse a
//! finished file. `--once` prints one snapshot of the regions view (text or JSON) and exits.
//!
//! `target` resolves TARGET, `source` is the one module that reads spools and files, `model`
//! computes what the views show for a window (no terminal), `once` prints a snapshot, and
//! `tui` draws the views with ratatui.

mod model;
mod once;
mod source;
mod target;
mod tui;

use std::path::PathBuf;

use clap::ValueEnum;

pub(crate) use model::WindowSpec;

/// `scopeprof top`'s arguments.
#[derive(clap::Args, Debug)]
pub(crate) struct TopArgs {
    /// The output path a running program was given, a process id, a finished `.h5` file, or
    /// a spool left by a crash.
    pub(crate) target: PathBuf,
    /// Print one snapshot of the regions view and exit.
    #[arg(long)]
    pub(crate) once: bool,
    /// Format of the `--once` snapshot.
    #[arg(long, value_enum, default_value_t = OnceFormat::Text)]
    pub(crate) format: OnceFormat,
    /// The time window: `10s`, `500ms`, `2m`, or `all` (the whole recording).
    #[arg(long, default_value = "10s")]
    pub(crate) window: String,
    /// How often the screen reads the spool again (ms).
    #[arg(long, default_value_t = 250)]
    pub(crate) refresh_ms: u64,
    /// With `--once`: the window ends this far into the recording (`42s`, `1500ms`), instead
    /// of at its latest call: a jump back, as the screen's keys make one.
    #[arg(long)]
    pub(crate) at: Option<String>,
    /// With `--once`: say on stderr how long reading the target and the snapshot took.
    #[arg(long)]
    pub(crate) timings: bool,
}

/// `--once` output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum OnceFormat {
    /// A table.
    Text,
    /// One JSON object.
    Json,
}

/// Runs `scopeprof top`.
pub(crate) fn run(args: &TopArgs) -> Result<(), String> {
    let window = WindowSpec::parse(&args.window)?;
    let at = match &args.at {
        None => None,
        Some(a) => match WindowSpec::parse(a)? {
            WindowSpec::Last(ns) => Some(ns),
            WindowSpec::All => return Err("--at: a time into the recording, like 42s".into()),
        },
    };
    if (at.is_some() || args.timings) && !args.once {
        return Err("--at and --timings go with --once".into());
    }
    let target = target::resolve(&args.target)?;
    let opened = std::time::Instant::now();
    let mut source = source::Source::open(&target)?;
    if args.once {
        let read_in = opened.elapsed();
        let snapped = std::time::Instant::now();
        let text = once::snapshot(&mut source, window, at, args.format, &args.target)?;
        if args.timings {
            eprintln!(
                "top: read {} in {:.1} ms; the snapshot took {:.1} ms",
                args.target.display(),
                read_in.as_secs_f64() * 1e3,
                snapped.elapsed().as_secs_f64() * 1e3
            );
        }
        print!("{text}");
        return Ok(());
    }
    tui::run(source, window, args.refresh_ms.max(20))
}

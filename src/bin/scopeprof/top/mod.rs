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
    let target = target::resolve(&args.target)?;
    let mut source = source::Source::open(&target)?;
    if args.once {
        let text = once::snapshot(&mut source, window, args.format, &args.target)?;
        print!("{text}");
        return Ok(());
    }
    tui::run(source, window, args.refresh_ms.max(20))
}

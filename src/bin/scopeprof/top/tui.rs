//! The terminal UI of `scopeprof top` (ratatui and crossterm).

use super::model::WindowSpec;
use super::source::Source;

/// Runs the terminal UI until the user quits.
pub(crate) fn run(_source: Source, _window: WindowSpec, _refresh_ms: u64) -> Result<(), String> {
    Err("top: the terminal UI is not built yet; use --once".into())
}

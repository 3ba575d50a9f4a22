//! The terminal UI of `scopeprof top` (ratatui and crossterm): reads the source every refresh
//! interval, makes the snapshot of the window the state asks for, and draws it. The terminal
//! is restored on every way out: quitting, Ctrl-C (a key in raw mode), an error, a panic.

mod draw;
mod state;

use std::io::Stdout;
use std::time::{Duration, Instant};

use crossterm::event::{self, Event, KeyEventKind};
use crossterm::terminal::{self, EnterAlternateScreen, LeaveAlternateScreen};
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;

use super::model::{Snapshot, Window, WindowSpec};
use super::source::Source;
use draw::Screen;
use state::App;

/// Cells of the time bar's density.
const BAR_CELLS: usize = 512;

/// Puts the terminal back as it was when dropped.
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        restore();
    }
}

fn restore() {
    let _ = terminal::disable_raw_mode();
    let _ = crossterm::execute!(
        std::io::stdout(),
        LeaveAlternateScreen,
        crossterm::cursor::Show
    );
}

/// Runs the terminal UI until the user quits.
pub(crate) fn run(mut source: Source, window: WindowSpec, refresh_ms: u64) -> Result<(), String> {
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() {
        return Err("top: standard output is not a terminal; use --once for a snapshot".into());
    }
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore();
        hook(info);
    }));
    terminal::enable_raw_mode().map_err(|e| format!("top: cannot use the terminal: {e}"))?;
    let _restore = Restore;
    crossterm::execute!(std::io::stdout(), EnterAlternateScreen)
        .map_err(|e| format!("top: cannot use the terminal: {e}"))?;
    let mut term = Terminal::new(CrosstermBackend::new(std::io::stdout()))
        .map_err(|e| format!("top: cannot use the terminal: {e}"))?;
    event_loop(&mut term, &mut source, App::new(window), refresh_ms)
}

/// The loop: refresh, snapshot (again only when the window or the data moved), draw, keys.
fn event_loop(
    term: &mut Terminal<CrosstermBackend<Stdout>>,
    source: &mut Source,
    mut app: App,
    refresh_ms: u64,
) -> Result<(), String> {
    let interval = Duration::from_millis(refresh_ms);
    let mut last: Option<(Window, Option<(i64, i64)>)> = None;
    let mut snap: Option<Snapshot> = None;
    let mut density = Vec::new();
    let mut next_read = Instant::now();
    while !app.quit {
        if Instant::now() >= next_read {
            source.refresh()?;
            density = source.density(BAR_CELLS);
            next_read = Instant::now() + interval;
        }
        let span = source.span();
        let window = app.window(span);
        if let Some(w) = window {
            if last != Some((w, span)) {
                snap = Some(source.snapshot(w)?);
                last = Some((w, span));
            }
        }
        let mut notes: Vec<String> = source.notice.iter().cloned().collect();
        notes.extend(source.open_calls().reason.map(String::from));
        notes.extend(source.no_calls_reason().map(String::from));
        // The source may move from a spool to the finished file and back (phases).
        let title = format!(
            "scopeprof top ({})",
            if source.is_spool() { "spool" } else { "file" }
        );
        let screen = Screen {
            title: &title,
            snap: snap.as_ref(),
            span,
            density: &density,
            notes: &notes,
            has_tasks: source.has_tasks(),
            live: source.is_spool(),
        };
        term.draw(|f| draw::draw(f, &app, &screen))
            .map_err(|e| format!("top: drawing failed: {e}"))?;
        let wait = next_read.saturating_duration_since(Instant::now());
        if event::poll(wait).map_err(|e| format!("top: reading keys: {e}"))? {
            if let Event::Key(k) = event::read().map_err(|e| format!("top: reading keys: {e}"))? {
                if k.kind == KeyEventKind::Press {
                    let rows = snap.as_ref().map(|s| app.rows(s)).unwrap_or_default();
                    let rows: Vec<_> = rows.into_iter().cloned().collect();
                    let refs: Vec<_> = rows.iter().collect();
                    app.key(k, span, &refs);
                }
            }
        }
    }
    Ok(())
}

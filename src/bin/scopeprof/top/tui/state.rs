//! What the terminal UI remembers between frames: the view, the sort and the filter, the
//! selected row, and the time controls. Keys change it; nothing here draws or reads files.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::super::model::{RegionRow, Snapshot, Window, WindowSpec};

/// The views, switched with Tab (or 1-4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum View {
    Regions,
    Detail,
    Tasks,
    Threads,
}

/// Columns of the regions view (what `s` cycles through).
pub(crate) const COLUMNS: [&str; 9] = [
    "region", "calls", "calls/s", "wall%", "p50", "p99", "max", "await%", "open",
];

/// Narrowest and widest window.
const MIN_WIDTH: i64 = 1_000_000;
const MAX_WIDTH: i64 = 24 * 3600 * 1_000_000_000;

/// The UI's state.
#[derive(Debug)]
pub(crate) struct App {
    pub(crate) view: View,
    pub(crate) sort: usize,
    pub(crate) descending: bool,
    pub(crate) filter: String,
    pub(crate) typing: bool,
    pub(crate) selected: usize,
    /// Region id shown by the detail view.
    pub(crate) detail: Option<u32>,
    /// Follow the present (else the window stays where it was put).
    pub(crate) follow: bool,
    /// The window's end when not following.
    pub(crate) end_ns: Option<i64>,
    /// The window's width (`None`: the whole recording).
    pub(crate) width_ns: Option<i64>,
    pub(crate) quit: bool,
}

impl App {
    /// The starting state for a window of `spec`.
    pub(crate) fn new(spec: WindowSpec) -> App {
        App {
            view: View::Regions,
            sort: 2,
            descending: true,
            filter: String::new(),
            typing: false,
            selected: 0,
            detail: None,
            follow: true,
            end_ns: None,
            width_ns: match spec {
                WindowSpec::All => None,
                WindowSpec::Last(ns) => Some(ns),
            },
            quit: false,
        }
    }

    /// The window over a recording spanning `span`.
    pub(crate) fn window(&self, span: Option<(i64, i64)>) -> Option<Window> {
        let spec = self.width_ns.map_or(WindowSpec::All, WindowSpec::Last);
        let end = if self.follow { None } else { self.end_ns };
        spec.select(span, end).map(|mut w| {
            // Moved back before the first call: keep the width, start at the beginning.
            if let (Some((first, _)), Some(width)) = (span, self.width_ns) {
                if w.start_ns < first && !self.follow {
                    w.start_ns = first;
                    w.end_ns = first
                        .saturating_add(width)
                        .min(span.map_or(w.end_ns, |s| s.1));
                }
            }
            w
        })
    }

    /// Applies one key; `span` is the recording's, `rows` the regions shown now.
    pub(crate) fn key(&mut self, k: KeyEvent, span: Option<(i64, i64)>, rows: &[&RegionRow]) {
        if k.modifiers.contains(KeyModifiers::CONTROL) && k.code == KeyCode::Char('c') {
            self.quit = true;
            return;
        }
        if self.typing {
            match k.code {
                KeyCode::Char(c) => self.filter.push(c),
                KeyCode::Backspace => {
                    self.filter.pop();
                }
                KeyCode::Enter | KeyCode::Esc => self.typing = false,
                _ => {}
            }
            self.selected = 0;
            return;
        }
        let current = self.window(span);
        match k.code {
            KeyCode::Char('q') => self.quit = true,
            KeyCode::Tab => self.view = next_view(self.view),
            KeyCode::Char('1') => self.view = View::Regions,
            KeyCode::Char('2') => self.open_detail(rows),
            KeyCode::Char('3') => self.view = View::Tasks,
            KeyCode::Char('4') => self.view = View::Threads,
            KeyCode::Char('/') => {
                self.view = View::Regions;
                self.typing = true;
            }
            KeyCode::Char('s') => self.sort = (self.sort + 1) % COLUMNS.len(),
            KeyCode::Char('S') => self.sort = (self.sort + COLUMNS.len() - 1) % COLUMNS.len(),
            KeyCode::Char('r') => self.descending = !self.descending,
            KeyCode::Up => self.selected = self.selected.saturating_sub(1),
            KeyCode::Down => self.selected = (self.selected + 1).min(rows.len().saturating_sub(1)),
            KeyCode::Enter => self.open_detail(rows),
            KeyCode::Esc => self.view = View::Regions,
            KeyCode::Char(' ') | KeyCode::Char('p') => {
                self.follow = !self.follow;
                self.end_ns = current.map(|w| w.end_ns);
            }
            KeyCode::Left | KeyCode::Right | KeyCode::Char('b') | KeyCode::Char('n') => {
                let back = matches!(k.code, KeyCode::Left | KeyCode::Char('b'));
                self.shift(current, span, back);
            }
            KeyCode::Char('+') => {
                self.width_ns = self.width_ns.map(|w| (w.saturating_mul(2)).min(MAX_WIDTH))
            }
            KeyCode::Char('-') => self.width_ns = self.width_ns.map(|w| (w / 2).max(MIN_WIDTH)),
            KeyCode::Char('a') => {
                self.width_ns = match self.width_ns {
                    Some(_) => None,
                    None => Some(10_000_000_000),
                }
            }
            KeyCode::Home => {
                self.follow = false;
                self.end_ns = span.map(|(first, _)| first + self.width_ns.unwrap_or(0));
            }
            KeyCode::End | KeyCode::Char('f') => {
                self.follow = true;
                self.end_ns = None;
            }
            _ => {}
        }
    }

    /// Moves the window by half its width (back or forth), pausing it.
    fn shift(&mut self, current: Option<Window>, span: Option<(i64, i64)>, back: bool) {
        let (Some(w), Some((first, last))) = (current, span) else {
            return;
        };
        let step = (w.len_ns() / 2).max(1);
        let end = if back {
            w.end_ns - step
        } else {
            w.end_ns + step
        };
        self.follow = false;
        self.end_ns = Some(end.clamp(first, last));
        if !back && end >= last {
            self.follow = true;
        }
    }

    fn open_detail(&mut self, rows: &[&RegionRow]) {
        if let Some(r) = rows.get(self.selected) {
            self.detail = Some(r.id);
            self.view = View::Detail;
        }
    }

    /// The regions of `snap` that pass the filter, sorted.
    pub(crate) fn rows<'a>(&self, snap: &'a Snapshot) -> Vec<&'a RegionRow> {
        let needle = self.filter.to_lowercase();
        let mut rows: Vec<&RegionRow> = snap
            .regions
            .iter()
            .filter(|r| r.name.to_lowercase().contains(&needle))
            .collect();
        let key = |r: &RegionRow| -> f64 {
            match self.sort {
                1 => r.calls as f64,
                2 => r.calls_per_s,
                3 => r.wall_share,
                4 => r.p50_ns.unwrap_or(-1) as f64,
                5 => r.p99_ns.unwrap_or(-1) as f64,
                6 => r.max_ns.unwrap_or(-1) as f64,
                7 => r.await_share.unwrap_or(-1.0),
                8 => r.open.map_or(-1.0, |o| o as f64),
                _ => 0.0,
            }
        };
        rows.sort_by(|a, b| {
            let o = if self.sort == 0 {
                a.name.cmp(&b.name)
            } else {
                key(a).total_cmp(&key(b))
            };
            if self.descending {
                o.reverse()
            } else {
                o
            }
        });
        rows
    }
}

fn next_view(v: View) -> View {
    match v {
        View::Regions => View::Detail,
        View::Detail => View::Tasks,
        View::Tasks => View::Threads,
        View::Threads => View::Regions,
    }
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;

//! Drawing the views with ratatui: a status line, the time bar, the view's table, and the
//! help line at the bottom. No colour: reverse video marks the selection and the window, so
//! the screen reads the same with `NO_COLOR` and over any terminal.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Row, Table};
use ratatui::Frame;

use super::super::model::{RegionRow, Snapshot, Window};
use super::super::once::dur;
use super::state::{App, View, COLUMNS};

/// What one frame shows besides the app's state.
pub(crate) struct Screen<'a> {
    pub(crate) title: &'a str,
    pub(crate) snap: Option<&'a Snapshot>,
    pub(crate) span: Option<(i64, i64)>,
    /// Calls per cell over the recording, for the time bar.
    pub(crate) density: &'a [u64],
    pub(crate) notes: &'a [String],
    pub(crate) has_tasks: bool,
    /// The calls come from a spool being written (else a finished file).
    pub(crate) live: bool,
}

/// Fits 80 columns; docs/cli.md lists every key.
const HELP: &str = "q quit Tab view s/r sort / filter Enter detail spc pause <-/-> move +/- width";

/// Draws one frame.
pub(crate) fn draw(f: &mut Frame<'_>, app: &App, s: &Screen<'_>) {
    let [status, bar, body, notes, help] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(f.area());
    f.render_widget(Paragraph::new(status_line(app, s)), status);
    f.render_widget(Paragraph::new(time_bar(s, bar.width as usize)), bar);
    match (s.snap, app.view) {
        (None, _) => f.render_widget(Paragraph::new("no calls recorded yet"), body),
        (Some(snap), View::Regions) => regions(f, body, app, snap),
        (Some(snap), View::Detail) => detail(f, body, app, snap),
        (Some(snap), View::Tasks) => tasks(f, body, snap, s.has_tasks),
        (Some(snap), View::Threads) => threads(f, body, snap),
    }
    let note = s.notes.first().cloned().unwrap_or_default();
    f.render_widget(Paragraph::new(note), notes);
    let help_text = if app.typing {
        format!("filter: {}_   (Enter/Esc: done)", app.filter)
    } else {
        HELP.to_string()
    };
    f.render_widget(
        Paragraph::new(help_text).style(Style::default().add_modifier(Modifier::REVERSED)),
        help,
    );
}

fn status_line(app: &App, s: &Screen<'_>) -> String {
    let w = s.snap.map(|x| x.window);
    let mode = match (app.follow, s.live) {
        (true, true) => "LIVE",
        (true, false) => "END",
        (false, _) => "PAUSED",
    };
    let width = app
        .width_ns
        .map_or("all".to_string(), |w| format!("{:.1}s", w as f64 / 1e9));
    let at = match (w, s.span) {
        (Some(w), Some((first, _))) => format!(
            "{:.3}s..{:.3}s",
            (w.start_ns - first) as f64 / 1e9,
            (w.end_ns - first) as f64 / 1e9
        ),
        _ => "-".into(),
    };
    let filter = if app.filter.is_empty() {
        String::new()
    } else {
        format!("  filter \"{}\"", app.filter)
    };
    format!(
        "{}  [{mode}] window {width} at {at}  sort {}{}{filter}",
        s.title,
        COLUMNS[app.sort],
        if app.descending {
            "\u{2193}"
        } else {
            "\u{2191}"
        }
    )
}

/// The phase as a bar of calls per cell, the window's cells in reverse video (`[`...`]`).
fn time_bar(s: &Screen<'_>, width: usize) -> Line<'static> {
    const LEVELS: [char; 5] = [' ', '.', ':', '|', '#'];
    let (Some((first, last)), Some(snap)) = (s.span, s.snap) else {
        return Line::from("");
    };
    let cells = width.saturating_sub(2).max(1);
    let peak = s.density.iter().copied().max().unwrap_or(0).max(1);
    let cell_of = |t: i64| {
        let frac = (t - first) as f64 / (last - first).max(1) as f64;
        ((frac * cells as f64) as usize).min(cells - 1)
    };
    let Window { start_ns, end_ns } = snap.window;
    let (a, b) = (cell_of(start_ns), cell_of(end_ns));
    let mut text = String::with_capacity(width);
    text.push('|');
    for k in 0..cells {
        let d = s
            .density
            .get(k * s.density.len() / cells)
            .copied()
            .unwrap_or(0);
        let level = if d == 0 {
            0
        } else {
            1 + (3 * d / peak).min(3) as usize
        };
        text.push(if (a..=b).contains(&k) && level == 0 {
            '='
        } else {
            LEVELS[level]
        });
    }
    text.push('|');
    let mut spans = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let part = |x: &[char]| x.iter().collect::<String>();
    spans.push(ratatui::text::Span::raw(part(&chars[..a + 1])));
    spans.push(ratatui::text::Span::styled(
        part(&chars[a + 1..(b + 2).min(chars.len())]),
        Style::default().add_modifier(Modifier::REVERSED),
    ));
    spans.push(ratatui::text::Span::raw(part(
        &chars[(b + 2).min(chars.len())..],
    )));
    Line::from(spans)
}

fn pct(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{:.1}", 100.0 * v))
}

fn regions(f: &mut Frame<'_>, area: Rect, app: &App, snap: &Snapshot) {
    let rows = app.rows(snap);
    let visible = area.height.saturating_sub(1) as usize;
    let skip = app.selected.saturating_sub(visible.saturating_sub(1));
    let body: Vec<Row> = rows
        .iter()
        .enumerate()
        .skip(skip)
        .map(|(i, r)| {
            let row = region_row(r);
            if i == app.selected {
                row.style(Style::default().add_modifier(Modifier::REVERSED))
            } else {
                row
            }
        })
        .collect();
    let header = Row::new(COLUMNS.iter().enumerate().map(|(i, c)| {
        if i == app.sort {
            format!("{c}*")
        } else {
            c.to_string()
        }
    }))
    .style(Style::default().add_modifier(Modifier::BOLD));
    let widths = [
        Constraint::Min(12),
        Constraint::Length(8),
        Constraint::Length(9),
        Constraint::Length(6),
        Constraint::Length(10),
        Constraint::Length(10),
        Constraint::Length(10),
        Constraint::Length(7),
        Constraint::Length(5),
    ];
    f.render_widget(Table::new(body, widths).header(header), area);
}

fn region_row(r: &RegionRow) -> Row<'static> {
    Row::new(vec![
        r.name.clone(),
        r.calls.to_string(),
        format!("{:.1}", r.calls_per_s),
        pct(Some(r.wall_share)),
        dur(r.p50_ns),
        dur(r.p99_ns),
        dur(r.max_ns),
        pct(r.await_share),
        r.open.map_or("?".into(), |o| o.to_string()),
    ])
}

fn detail(f: &mut Frame<'_>, area: Rect, app: &App, snap: &Snapshot) {
    let Some(r) = app
        .detail
        .and_then(|id| snap.regions.iter().find(|r| r.id == id))
    else {
        f.render_widget(
            Paragraph::new("select a region (Enter in the regions view)"),
            area,
        );
        return;
    };
    let [head, body] = Layout::vertical([Constraint::Length(1), Constraint::Min(1)]).areas(area);
    let [hist, slow] =
        Layout::horizontal([Constraint::Percentage(45), Constraint::Percentage(55)]).areas(body);
    let peak = r.histogram.iter().copied().max().unwrap_or(0).max(1);
    let summary = format!(
        "{}: {} calls, p50 {}, p99 {}, max {}, await {}",
        r.name,
        r.calls,
        dur(r.p50_ns),
        dur(r.p99_ns),
        dur(r.max_ns),
        pct(r.await_share) + "%"
    );
    f.render_widget(Paragraph::new(summary), head);
    let mut lines = vec![Line::from("duration      calls")];
    let bar_width = hist.width.saturating_sub(22) as u64;
    for (k, &n) in r.histogram.iter().enumerate().filter(|(_, &n)| n > 0) {
        lines.push(Line::from(format!(
            ">= {:>9} {:>7} {}",
            dur(Some(1i64 << k)),
            n,
            "#".repeat((n * bar_width / peak).max(1) as usize)
        )));
    }
    f.render_widget(Paragraph::new(lines), hist);
    let first = snap.window.start_ns;
    let body: Vec<Row> = r
        .slowest
        .iter()
        .map(|c| {
            Row::new(vec![
                dur(Some(c.dur_ns)),
                format!("{:+.3}s", (c.start_ns - first) as f64 / 1e9),
                if c.task >= 0 {
                    format!("task {}", c.task)
                } else {
                    format!("thread {}", c.thread)
                },
                dur(Some(c.await_ns)),
                "-".into(),
            ])
        })
        .collect();
    let header = Row::new(["slowest", "start", "lane", "await", "polls"])
        .style(Style::default().add_modifier(Modifier::BOLD));
    let widths = [Constraint::Length(10); 5];
    f.render_widget(Table::new(body, widths).header(header), slow);
}

fn tasks(f: &mut Frame<'_>, area: Rect, snap: &Snapshot, has_tasks: bool) {
    if !has_tasks {
        f.render_widget(
            Paragraph::new("no task lanes: the tasks view needs `.track_async(true)`"),
            area,
        );
        return;
    }
    let mut sorted: Vec<_> = snap.tasks.iter().collect();
    sorted.sort_by_key(|t| std::cmp::Reverse(t.longest_ns));
    let body: Vec<Row> = sorted
        .iter()
        .map(|t| {
            Row::new(vec![
                t.index.to_string(),
                t.root.clone(),
                t.calls.to_string(),
                dur(Some(t.longest_ns)),
                dur(Some(t.busy_ns)),
                dur(Some(t.await_ns)),
            ])
        })
        .collect();
    let header = Row::new(["task", "root", "calls", "longest", "busy", "await"])
        .style(Style::default().add_modifier(Modifier::BOLD));
    let widths = [
        Constraint::Length(7),
        Constraint::Min(12),
        Constraint::Length(7),
        Constraint::Length(10),
        Constraint::Length(10),
        Constraint::Length(10),
    ];
    f.render_widget(Table::new(body, widths).header(header), area);
}

fn threads(f: &mut Frame<'_>, area: Rect, snap: &Snapshot) {
    let body: Vec<Row> = snap
        .threads
        .iter()
        .map(|t| {
            Row::new(vec![
                t.index.to_string(),
                t.name.clone(),
                t.calls.to_string(),
                format!("{:.1}", 100.0 * t.utilisation),
            ])
        })
        .collect();
    let header = Row::new(["thread", "name", "calls", "busy% (calls outside tasks)"])
        .style(Style::default().add_modifier(Modifier::BOLD));
    let widths = [
        Constraint::Length(7),
        Constraint::Min(16),
        Constraint::Length(8),
        Constraint::Length(28),
    ];
    f.render_widget(Table::new(body, widths).header(header), area);
}

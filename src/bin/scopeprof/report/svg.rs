//! The report's pictures, as inline SVG: the flamegraph of the call tree (an icicle: callers
//! above their callees, width = inclusive time; the page's script zooms on click) and the
//! timeline of the busiest window (one lane per thread, task or GPU, slices nested by depth).

use std::collections::HashMap;
use std::fmt::Write;

use super::scan::Drawn;
use super::tree::{Row, Tree};
use crate::compare::table::fmt_ns;
use crate::items::{Kind, Tracks};
use crate::report::html::esc;

/// Drawing width of both pictures (user units; the SVGs scale to the page).
const WIDTH: f64 = 1200.0;
/// Height of a flamegraph frame and of a timeline row.
const ROW: f64 = 16.0;
/// Width of the timeline's lane labels.
const LABELS: f64 = 190.0;
/// Deepest timeline row drawn per lane.
pub(crate) const MAX_DEPTH: u32 = 12;
/// Lanes drawn in the timeline (the busiest).
pub(crate) const MAX_LANES: usize = 64;

/// A stable color per region name: a hue from the name's hash.
pub(crate) fn color(name: &str, light: bool) -> String {
    let h = name.bytes().fold(2_166_136_261u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(16_777_619)
    });
    let hue = h % 360;
    let (s, l) = if light { (55, 78) } else { (62, 58) };
    format!("hsl({hue},{s}%,{l}%)")
}

/// `text` cut to about `px` pixels of 7 px characters, with an ellipsis.
fn fit(text: &str, px: f64) -> String {
    let max = (px / 7.0) as usize;
    if max < 3 {
        return String::new();
    }
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut s: String = text.chars().take(max.saturating_sub(1)).collect();
    s.push('…');
    s
}

/// The flamegraph of `rows` (depth-first, heaviest first, from [`Tree::rows`]).
pub(crate) fn flamegraph(tree: &Tree, rows: &[Row], names: &[String]) -> String {
    let total = tree.total().max(1) as f64;
    let depth = rows.iter().map(|r| r.depth).max().unwrap_or(0) + 1;
    let height = depth as f64 * ROW;
    let mut next_x: Vec<f64> = vec![0.0; depth + 1];
    let mut out = String::new();
    let _ = write!(
        out,
        "<svg id=\"flame-svg\" class=\"flame\" viewBox=\"0 0 {WIDTH} {height}\" \
         width=\"100%\" data-width=\"{WIDTH}\" role=\"img\" aria-label=\"flamegraph\">"
    );
    for r in rows {
        let x = next_x[r.depth];
        let w = r.inclusive as f64 / total;
        next_x[r.depth] = x + w;
        next_x[r.depth + 1] = x;
        let name = names.get(r.frame as usize).map_or("?", String::as_str);
        let px = w * WIDTH;
        if px < 0.4 {
            continue;
        }
        let y = r.depth as f64 * ROW;
        let _ = write!(
            out,
            "<g class=\"f\" data-x=\"{x:.6}\" data-w=\"{w:.6}\" data-n=\"{n}\">\
             <rect x=\"{:.2}\" y=\"{y}\" width=\"{:.2}\" height=\"{}\" fill=\"{}\"/>\
             <text x=\"{:.2}\" y=\"{}\">{}</text><title>{n}: {} inclusive ({:.1}%), {} self, {} \
             call(s)</title></g>",
            x * WIDTH,
            px,
            ROW - 1.0,
            color(name, false),
            x * WIDTH + 3.0,
            y + ROW - 4.0,
            esc(&fit(name, px - 6.0)),
            fmt_ns(r.inclusive as f64),
            w * 100.0,
            fmt_ns(r.exclusive as f64),
            r.calls,
            n = esc(name),
        );
    }
    out.push_str("</svg>");
    out
}

/// A lane of the timeline: a track, the kind of slice (calls and polls of a thread get
/// separate lanes) and the level of overlap.
type Lane = (u32, u8, u32);

/// Where the lanes go.
struct Layout {
    /// Top y of each lane drawn.
    top: HashMap<Lane, f64>,
    /// The lanes drawn, in track order.
    order: Vec<(Lane, f64)>,
    /// Lanes left out.
    dropped: usize,
    height: f64,
}

/// Tick marks every 1, 2 or 5 x 10^k ns, about six across `span` ns.
fn ticks(span: f64) -> f64 {
    let raw = (span / 6.0).max(1.0);
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|&t| t >= raw)
        .unwrap_or(10.0 * mag)
}

fn lane_of(d: &Drawn) -> Lane {
    (d.item.track, d.item.kind as u8, d.level)
}

/// The lanes drawn: at most [`MAX_LANES`], the busiest.
fn layout(slices: &[Drawn]) -> Layout {
    let mut index: HashMap<Lane, usize> = HashMap::new();
    let mut lanes: Vec<(Lane, f64, u32)> = Vec::new();
    for d in slices {
        let lane = lane_of(d);
        let k = *index.entry(lane).or_insert_with(|| {
            lanes.push((lane, 0.0, 0));
            lanes.len() - 1
        });
        if d.depth == 0 {
            lanes[k].1 += (d.item.end - d.item.start) as f64;
        }
        lanes[k].2 = lanes[k].2.max(d.depth.min(MAX_DEPTH));
    }
    let dropped = lanes.len().saturating_sub(MAX_LANES);
    lanes.sort_by(|a, b| b.1.total_cmp(&a.1));
    lanes.truncate(MAX_LANES);
    lanes.sort_by_key(|l| l.0);
    let mut y = 22.0;
    let mut tops = Vec::with_capacity(lanes.len());
    for l in &lanes {
        tops.push((l.0, y));
        y += f64::from(l.2 + 1) * ROW + 6.0;
    }
    Layout {
        top: tops.iter().copied().collect(),
        order: tops,
        dropped,
        height: y + 4.0,
    }
}

/// A lane's label: the track's name, its rank when the file has several, and what kind of
/// lane it is.
fn lane_label(lane: Lane, tracks: &Tracks) -> String {
    let track = &tracks.tracks[lane.0 as usize];
    let mut label = track.label();
    if tracks.tracks.iter().any(|t| t.rank > 0) {
        label = format!("rank {}: {label}", track.rank);
    }
    if lane.1 == Kind::Poll as u8 {
        label.push_str(" polls");
    }
    if lane.2 > 0 {
        label.push_str(&format!(" (overlapping {})", lane.2));
    }
    label
}

/// The timeline of `slices` over `window`, times shown from `origin` (the run's start).
/// Returns the SVG and the number of lanes left out.
pub(crate) fn timeline(
    slices: &[Drawn],
    tracks: &Tracks,
    window: (i64, i64),
    origin: i64,
) -> (String, usize) {
    let Layout {
        top,
        order,
        dropped,
        height,
    } = layout(slices);
    let (w0, w1) = window;
    let span = (w1 - w0).max(1) as f64;
    let xof = |t: i64| LABELS + (t - w0) as f64 / span * (WIDTH - LABELS);
    let mut out = String::new();
    let _ = write!(
        out,
        "<svg class=\"timeline\" viewBox=\"0 0 {WIDTH} {height}\" width=\"100%\" role=\"img\" \
         aria-label=\"timeline\">"
    );
    let step = ticks(span);
    let mut t = ((w0 - origin) as f64 / step).ceil() * step;
    while t <= (w1 - origin) as f64 {
        let x = xof(origin + t as i64);
        let _ = write!(
            out,
            "<line class=\"tick\" x1=\"{x:.1}\" y1=\"16\" x2=\"{x:.1}\" y2=\"{height}\"/>\
             <text class=\"tick\" x=\"{x:.1}\" y=\"12\">{}</text>",
            fmt_ns(t)
        );
        t += step;
    }
    for &(lane, y) in &order {
        let _ = write!(
            out,
            "<text class=\"lane\" x=\"4\" y=\"{:.1}\">{}</text>",
            y + ROW - 4.0,
            esc(&fit(&lane_label(lane, tracks), LABELS - 8.0))
        );
    }
    for d in slices.iter().filter(|d| d.depth <= MAX_DEPTH) {
        if let Some(&y) = top.get(&lane_of(d)) {
            let x = xof(d.item.start);
            slice(
                &mut out,
                d,
                tracks,
                (x, (xof(d.item.end) - x).max(0.5)),
                y,
                origin,
            );
        }
    }
    out.push_str("</svg>");
    (out, dropped)
}

/// One slice: its bar at `x` (x, width) in a lane whose top is `y`, label and tooltip.
fn slice(out: &mut String, d: &Drawn, tracks: &Tracks, x: (f64, f64), y: f64, origin: i64) {
    let name = tracks
        .names
        .get(d.item.name as usize)
        .map_or("?", String::as_str);
    let (x, w) = x;
    let yy = y + f64::from(d.depth) * ROW;
    let class = d.item.kind.category();
    let _ = write!(
        out,
        "<g class=\"{class}\"><rect x=\"{x:.2}\" y=\"{yy:.1}\" width=\"{w:.2}\" height=\"{}\" \
         fill=\"{}\"/>",
        ROW - 2.0,
        color(name, d.item.kind != Kind::Call)
    );
    let label = fit(name, w - 4.0);
    if !label.is_empty() {
        let _ = write!(
            out,
            "<text x=\"{:.2}\" y=\"{:.1}\">{}</text>",
            x + 2.0,
            yy + ROW - 5.0,
            esc(&label)
        );
    }
    let _ = write!(
        out,
        "<title>{} ({class}): {} at +{}</title></g>",
        esc(name),
        fmt_ns((d.item.end - d.item.start) as f64),
        fmt_ns((d.item.start - origin) as f64)
    );
}

/// A call's bar with its polls drawn on it (`width` px wide).
pub(crate) fn poll_bar(call: (i64, i64), polls: &[(i64, i64)], width: f64) -> String {
    let span = (call.1 - call.0).max(1) as f64;
    let mut out = format!(
        "<svg class=\"polls\" viewBox=\"0 0 {width} 12\" width=\"{width}\" height=\"12\">\
         <rect class=\"await\" x=\"0\" y=\"2\" width=\"{width}\" height=\"8\"/>"
    );
    for &(s, e) in polls {
        let x = (s - call.0) as f64 / span * width;
        let w = ((e - s) as f64 / span * width).max(0.8);
        let _ = write!(
            out,
            "<rect class=\"busy\" x=\"{x:.2}\" y=\"1\" width=\"{w:.2}\" height=\"10\"/>"
        );
    }
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round() {
        assert_eq!(ticks(6_000.0), 1_000.0);
        assert_eq!(ticks(9_000_000.0), 2_000_000.0);
        assert_eq!(ticks(25.0), 5.0);
        assert_eq!(fit("abcdefghij", 49.0), "abcdef…");
        assert_eq!(fit("abc", 100.0), "abc");
        assert_eq!(fit("abc", 10.0), "");
        assert_eq!(color("kernel", false), color("kernel", false));
        assert_ne!(color("kernel", false), color("steady", false));
    }
}

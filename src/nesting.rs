//! Call nesting, reconstructed the way the Python reader does it (schema spec §3.3), so every
//! view of a file agrees: call ids, parent ids, exclusive times and the summary's call tree.
//!
//! A lane is one sequential flow of control: a Tokio task when the call ran in one, else its
//! thread. All calls are sorted by (start ascending, end descending), which numbers them so a
//! parent's id is smaller than its children's; then, lane by lane, a call's parent is the
//! innermost earlier call of the same lane that is still open at its start. A call that only
//! partly overlaps an open call of its lane has no place in a tree: then nothing is nested (the
//! file gets no ids and exclusive totals of -1, the summary is flat), exactly as the reader
//! would conclude.
//!
//! Nesting is by time, not by `tracing`'s contextual parent: a span entered on another thread
//! than its parent's (e.g. `spawn_blocking` work) is a root of that thread's lane, and
//! `follows_from` links are ignored, because the Python reader sees only timestamps and lanes.
//!
//! **Memory.** Nesting works on a compact copy of each call ([`Span`], 32 bytes, plus 8-12
//! bytes of results), not on the calls themselves: a finalize streams the calls from the spool
//! and keeps only these. Exclusive totals and the call tree are folded in the same sorted pass
//! (the tree in O(distinct call paths): each path's wall-clock coverage is a running union,
//! which the start order makes exact). Phases above [`NEST_BUDGET`] calls are not nested (see
//! there).

use std::collections::HashMap;

use crate::output::model::CallRecord;
#[cfg(test)]
use crate::output::model::PhaseData;
use crate::stats::Stats;

/// Most calls a phase may have to be nested (about 44 bytes each, so at most ~66 MiB). Above
/// it the file gets no `call_ids`/`parent_ids` and exclusive totals of -1 (the Python reader
/// rebuilds both from the timestamps and lanes it always has), and the summary is flat.
pub(crate) const NEST_BUDGET: usize = 1_500_000;

/// One call as nesting sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Span {
    /// Absolute start (ns).
    pub start: i64,
    /// Absolute end (ns).
    pub end: i64,
    /// Lane: the task index when >= 0, else `-2 - thread`.
    pub lane: i64,
    /// Row (region) of the call.
    pub row: u32,
    /// Position of the call in storage order (rows one after the other).
    pub g: u32,
}

impl Span {
    /// The span of `c`, stored at position `g` in row `row`.
    pub(crate) fn of(c: &CallRecord, row: u32, g: u32) -> Span {
        Span {
            start: c.start_ns,
            end: c.start_ns + c.dur_ns.max(0),
            lane: if c.task >= 0 {
                c.task
            } else {
                -2 - i64::from(c.thread)
            },
            row,
            g,
        }
    }
}

/// The result of nesting one phase.
#[derive(Debug, Default)]
pub(crate) struct Nested {
    /// The first id handed out.
    pub first_id: i64,
    /// By storage position: the call's rank in (start asc, end desc) order.
    id_of: Vec<u32>,
    /// By storage position: the parent's rank, `u32::MAX` for a lane root.
    parent_of: Vec<u32>,
    /// Exclusive time per row (ns).
    pub exclusive: Vec<i64>,
    /// The summary's call tree, when asked for.
    pub tree: Option<Vec<TreeRow>>,
}

impl Nested {
    /// The call id of the call stored at position `g`.
    pub(crate) fn call_id(&self, g: usize) -> i64 {
        self.first_id + i64::from(self.id_of[g])
    }

    /// The parent's call id of the call stored at position `g` (-1 for a lane root).
    pub(crate) fn parent_id(&self, g: usize) -> i64 {
        match self.parent_of[g] {
            u32::MAX => -1,
            p => self.first_id + i64::from(p),
        }
    }

    /// The first id free for the next phase.
    pub(crate) fn next_id(&self) -> i64 {
        self.first_id + self.id_of.len() as i64
    }
}

/// Two calls of one lane overlap without one containing the other (rows of both).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Overlap {
    pub(crate) row: u32,
    pub(crate) other: u32,
}

/// Two calls of one lane overlap without one containing the other.
#[cfg(test)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NestingError {
    pub(crate) region: String,
    pub(crate) other: String,
}

/// One call path of the tree being built.
struct Path {
    parent: Option<u32>,
    row: u32,
    children: Vec<u32>,
    first_start: i64,
    calls: u64,
    stats: Stats,
    /// Running union of the outermost calls' intervals: the current run and what is closed.
    run: (i64, i64),
    covered: i64,
    exclusive: i64,
    recursive: bool,
}

/// Nests `spans` (any order; `g` must be 0..n) of a phase with `names.len()` rows; ids start at
/// `first_id`. Builds the call tree too when `want_tree`.
pub(crate) fn nest_spans(
    mut spans: Vec<Span>,
    names: &[&str],
    first_id: i64,
    want_tree: bool,
) -> Result<Nested, Overlap> {
    let n = spans.len();
    spans.sort_unstable_by(|a, b| a.start.cmp(&b.start).then(b.end.cmp(&a.end)));
    let mut id_of = vec![0u32; n];
    let mut parent_of = vec![u32::MAX; n];
    let mut exclusive = vec![0i64; names.len()];
    let mut paths: Vec<Path> = Vec::new();
    let mut key: HashMap<(u32, u32), u32> = HashMap::new();
    let mut path_of: Vec<u32> = if want_tree { vec![0; n] } else { Vec::new() };

    // Per lane, a stack of (rank, doubled end) of the calls still open.
    let mut lane_index: crate::fasthash::FastMap<i64, usize> = Default::default();
    let mut stacks: Vec<Vec<(u32, i64)>> = Vec::new();
    let mut last_lane = (i64::MIN, 0usize);
    for (i, a) in spans.iter().enumerate() {
        // Doubled times; a zero-length call ends half a tick after it starts, so it is still
        // open at its own start (as the reader does it).
        let start2 = 2 * a.start;
        let end2 = 2 * a.end + i64::from(a.end == a.start);
        if a.lane != last_lane.0 {
            let next = stacks.len();
            let k = *lane_index.entry(a.lane).or_insert(next);
            if k == next {
                stacks.push(Vec::new());
            }
            last_lane = (a.lane, k);
        }
        let stack = &mut stacks[last_lane.1];
        while stack.last().is_some_and(|&(_, e)| e <= start2) {
            stack.pop();
        }
        let parent = match stack.last() {
            Some(&(p, pend2)) if end2 > pend2 => {
                return Err(Overlap {
                    row: a.row,
                    other: spans[p as usize].row,
                })
            }
            Some(&(p, _)) => Some(p),
            None => None,
        };
        stack.push((i as u32, end2));
        let dur = a.end - a.start;
        id_of[a.g as usize] = i as u32;
        exclusive[a.row as usize] += dur;
        if let Some(p) = parent {
            parent_of[a.g as usize] = p;
            exclusive[spans[p as usize].row as usize] -= dur;
        }
        if want_tree {
            let parent_path = parent.map(|p| path_of[p as usize]);
            path_of[i] = add_to_tree(&mut paths, &mut key, parent_path, a);
            if let Some(pp) = parent_path {
                paths[pp as usize].exclusive -= dur;
            }
        }
    }
    let tree = want_tree.then(|| emit_tree(paths, names));
    Ok(Nested {
        first_id,
        id_of,
        parent_of,
        exclusive,
        tree,
    })
}

/// Adds one call (whose parent's path is `parent_path`) to the tree; returns its path.
fn add_to_tree(
    paths: &mut Vec<Path>,
    key: &mut HashMap<(u32, u32), u32>,
    parent_path: Option<u32>,
    a: &Span,
) -> u32 {
    let dur = a.end - a.start;
    // Recursion collapses into the parent's row.
    let (path, outermost) = match parent_path {
        Some(pp) if paths[pp as usize].row == a.row => {
            paths[pp as usize].recursive = true;
            (pp, false)
        }
        _ => {
            let next = paths.len() as u32;
            let path = *key
                .entry((parent_path.unwrap_or(u32::MAX), a.row))
                .or_insert(next);
            if path == next {
                paths.push(Path {
                    parent: parent_path,
                    row: a.row,
                    children: Vec::new(),
                    first_start: a.start,
                    calls: 0,
                    stats: Stats::default(),
                    run: (a.start, a.start),
                    covered: 0,
                    exclusive: 0,
                    recursive: false,
                });
                if let Some(pp) = parent_path {
                    paths[pp as usize].children.push(next);
                }
            }
            (path, true)
        }
    };
    let p = &mut paths[path as usize];
    p.calls += 1;
    p.exclusive += dur;
    if outermost {
        p.stats.add(dur as u64);
        // Calls arrive by start, so the union is one running interval.
        if a.start <= p.run.1 {
            p.run.1 = p.run.1.max(a.end);
        } else {
            p.covered += p.run.1 - p.run.0;
            p.run = (a.start, a.end);
        }
    }
    path
}

/// The rows of the tree, depth first, siblings by first start.
fn emit_tree(mut paths: Vec<Path>, names: &[&str]) -> Vec<TreeRow> {
    fn emit(i: usize, depth: usize, paths: &mut [Path], names: &[&str], rows: &mut Vec<TreeRow>) {
        let p = &paths[i];
        let coverage = p.covered + (p.run.1 - p.run.0);
        rows.push(TreeRow {
            depth,
            name: names[p.row as usize].to_owned(),
            recursive: p.recursive,
            calls: p.calls,
            stats: p.stats,
            coverage_ns: coverage,
            total_ns: p.stats.total as i64,
            own: false,
        });
        let mut children = std::mem::take(&mut paths[i].children);
        let p = &paths[i];
        if !children.is_empty() {
            // The own row's share of the path's coverage: concurrent calls (tasks) make the
            // summed exclusive time exceed wall-clock time, so scale the coverage instead.
            let share = p.exclusive as f64 / (p.stats.total.max(1)) as f64;
            rows.push(TreeRow {
                depth: depth + 1,
                name: "(own)".into(),
                recursive: false,
                calls: p.calls,
                stats: Stats::default(),
                coverage_ns: (coverage as f64 * share.min(1.0)) as i64,
                total_ns: p.exclusive,
                own: true,
            });
        }
        children.sort_by_key(|&c| paths[c as usize].first_start);
        for c in children {
            emit(c as usize, depth + 1, paths, names, rows);
        }
    }
    let mut roots: Vec<usize> = (0..paths.len())
        .filter(|&i| paths[i].parent.is_none())
        .collect();
    roots.sort_by_key(|&i| paths[i].first_start);
    let mut rows = Vec::new();
    for r in roots {
        emit(r, 0, &mut paths, names, &mut rows);
    }
    rows
}

/// The spans of an in-memory phase, rows one after the other.
#[cfg(test)]
fn spans_of(data: &PhaseData) -> Vec<Span> {
    let mut spans = Vec::new();
    for (r, row) in data.regions.iter().enumerate() {
        for c in &row.calls {
            spans.push(Span::of(c, r as u32, spans.len() as u32));
        }
    }
    spans
}

/// Fills `call_id`, `parent_id` and the regions' `exclusive_ns` of an in-memory phase; ids
/// start at `first_id`. Returns the next free id, or the overlap that prevented nesting (then
/// every id is -1 and every exclusive total -1).
#[cfg(test)]
pub(crate) fn nest(data: &mut PhaseData, first_id: i64) -> Result<i64, NestingError> {
    let names: Vec<String> = data.regions.iter().map(|r| r.name.clone()).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    match nest_spans(spans_of(data), &refs, first_id, false) {
        Ok(n) => {
            let mut g = 0;
            for (r, row) in data.regions.iter_mut().enumerate() {
                row.exclusive_ns = n.exclusive[r];
                for c in &mut row.calls {
                    c.call_id = n.call_id(g);
                    c.parent_id = n.parent_id(g);
                    g += 1;
                }
            }
            Ok(n.next_id())
        }
        Err(o) => {
            for row in &mut data.regions {
                row.exclusive_ns = -1;
                for c in &mut row.calls {
                    c.call_id = -1;
                    c.parent_id = -1;
                }
            }
            Err(NestingError {
                region: names[o.row as usize].clone(),
                other: names[o.other as usize].clone(),
            })
        }
    }
}

/// The call tree of an in-memory phase (empty when its calls do not nest).
#[cfg(test)]
pub(crate) fn call_tree(data: &PhaseData) -> Vec<TreeRow> {
    let refs: Vec<&str> = data.regions.iter().map(|r| r.name.as_str()).collect();
    nest_spans(spans_of(data), &refs, 0, true)
        .ok()
        .and_then(|n| n.tree)
        .unwrap_or_default()
}

/// One row of the summary's call tree: a call path (`A > B > C`, recursion collapsed).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct TreeRow {
    /// Depth in the tree (0 = root).
    pub depth: usize,
    /// Region name (or `(own)` for an exclusive-time row).
    pub name: String,
    /// Whether the path recurses into itself.
    pub recursive: bool,
    /// Calls on the path.
    pub calls: u64,
    /// Statistics of the path's outermost calls (recursive inner calls are folded in).
    pub stats: Stats,
    /// Wall-clock coverage: the union of the path's call intervals, per lane-free time line.
    pub coverage_ns: i64,
    /// For `(own)` rows: the exclusive time; else the inclusive total.
    pub total_ns: i64,
    /// Whether this is an `(own)` row.
    pub own: bool,
}

#[cfg(test)]
mod tests;

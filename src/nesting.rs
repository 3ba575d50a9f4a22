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

use std::collections::HashMap;

use crate::output::model::PhaseData;
use crate::stats::Stats;

/// Where in `PhaseData::regions[r].calls[k]` a call lives.
#[derive(Clone, Copy)]
struct At {
    region: u32,
    k: u32,
    start: i64,
    end: i64,
    lane: i64,
}

/// Two calls of one lane overlap without one containing the other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NestingError {
    pub(crate) region: String,
    pub(crate) other: String,
}

/// Fills `call_id`, `parent_id` and the regions' `exclusive_ns`; ids start at `first_id`.
/// Returns the next free id, or the overlap that prevented nesting (then every id is -1 and
/// every exclusive total -1).
pub(crate) fn nest(data: &mut PhaseData, first_id: i64) -> Result<i64, NestingError> {
    let mut all: Vec<At> = Vec::new();
    for (r, row) in data.regions.iter().enumerate() {
        for (k, c) in row.calls.iter().enumerate() {
            let lane = if c.task >= 0 {
                c.task
            } else {
                -2 - i64::from(c.thread)
            };
            all.push(At {
                region: r as u32,
                k: k as u32,
                start: c.start_ns,
                end: c.start_ns + c.dur_ns.max(0),
                lane,
            });
        }
    }
    all.sort_unstable_by(|a, b| a.start.cmp(&b.start).then(b.end.cmp(&a.end)));

    // Per lane, a stack of (position in `all`, doubled end) of the calls still open.
    let mut lane_index: crate::fasthash::FastMap<i64, usize> = Default::default();
    let mut stacks: Vec<Vec<(usize, i64)>> = Vec::new();
    let mut parent: Vec<Option<usize>> = vec![None; all.len()];
    let mut last_lane = (i64::MIN, 0usize);
    for (i, a) in all.iter().enumerate() {
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
        if let Some(&(p, pend2)) = stack.last() {
            if end2 > pend2 {
                let name = |x: &At| data.regions[x.region as usize].name.clone();
                let err = NestingError {
                    region: name(a),
                    other: name(&all[p]),
                };
                clear(data);
                return Err(err);
            }
            parent[i] = Some(p);
        }
        stack.push((i, end2));
    }

    // With overhead compensation, each child also takes its measured profiler cost out of
    // its parent's exclusive time (never below 0).
    let comp = data.extra.child_overhead_ns;
    let mut child_sum = vec![0i64; all.len()];
    for (i, p) in parent.iter().enumerate() {
        if let Some(p) = *p {
            child_sum[p] += all[i].end - all[i].start + comp;
        }
    }
    for row in &mut data.regions {
        row.exclusive_ns = 0;
    }
    for (i, a) in all.iter().enumerate() {
        let row = &mut data.regions[a.region as usize];
        let call = &mut row.calls[a.k as usize];
        call.call_id = first_id + i as i64;
        call.parent_id = parent[i].map_or(-1, |p| first_id + p as i64);
        row.exclusive_ns += ((a.end - a.start) - child_sum[i]).max(0);
    }
    Ok(first_id + all.len() as i64)
}

fn clear(data: &mut PhaseData) {
    for row in &mut data.regions {
        row.exclusive_ns = -1;
        for c in &mut row.calls {
            c.call_id = -1;
            c.parent_id = -1;
        }
    }
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

/// The call tree of a nested phase (call ids and parents filled by [`nest`]).
pub(crate) fn call_tree(data: &PhaseData) -> Vec<TreeRow> {
    struct Path {
        parent: Option<usize>,
        region: u32,
        children: Vec<usize>,
        first_start: i64,
        calls: u64,
        stats: Stats,
        intervals: Vec<(i64, i64)>,
        exclusive: i64,
        recursive: bool,
    }
    // [`nest`] numbered the calls first_id, first_id + 1, ...: index = id - first_id.
    let first_id = data
        .regions
        .iter()
        .flat_map(|r| r.calls.iter())
        .map(|c| c.call_id)
        .min()
        .unwrap_or(0);
    let n: usize = data.regions.iter().map(|r| r.calls.len()).sum();
    // index -> (region, start, end, parent index or usize::MAX)
    let mut by_id: Vec<(u32, i64, i64, usize)> = vec![(0, 0, 0, usize::MAX); n];
    for (r, row) in data.regions.iter().enumerate() {
        for c in &row.calls {
            let parent = if c.parent_id >= 0 {
                (c.parent_id - first_id) as usize
            } else {
                usize::MAX
            };
            by_id[(c.call_id - first_id) as usize] =
                (r as u32, c.start_ns, c.start_ns + c.dur_ns, parent);
        }
    }
    let mut paths: Vec<Path> = Vec::new();
    let mut key: HashMap<(Option<usize>, u32), usize> = HashMap::new();
    let mut path_of: Vec<usize> = vec![0; n];
    let mut child_total: Vec<i64> = vec![0; n];
    for &(_, s, e, p) in &by_id {
        if p != usize::MAX {
            child_total[p] += e - s + data.extra.child_overhead_ns;
        }
    }
    for id in 0..n {
        let (region, start, end, parent) = by_id[id];
        let parent_path = (parent != usize::MAX).then(|| path_of[parent]);
        // Recursion collapses into the parent's row.
        let (path, outermost) = match parent_path {
            Some(pp) if paths[pp].region == region => {
                paths[pp].recursive = true;
                (pp, false)
            }
            _ => {
                let next = paths.len();
                let path = *key.entry((parent_path, region)).or_insert(next);
                if path == next {
                    paths.push(Path {
                        parent: parent_path,
                        region,
                        children: Vec::new(),
                        first_start: start,
                        calls: 0,
                        stats: Stats::default(),
                        intervals: Vec::new(),
                        exclusive: 0,
                        recursive: false,
                    });
                    if let Some(pp) = parent_path {
                        paths[pp].children.push(next);
                    }
                }
                (path, true)
            }
        };
        path_of[id] = path;
        let p = &mut paths[path];
        p.calls += 1;
        p.exclusive += ((end - start) - child_total[id]).max(0);
        if outermost {
            p.stats.add((end - start) as u64);
            p.intervals.push((start, end));
        }
    }
    let mut rows = Vec::new();
    let mut roots: Vec<usize> = (0..paths.len())
        .filter(|&i| paths[i].parent.is_none())
        .collect();
    roots.sort_by_key(|&i| paths[i].first_start);
    fn emit(
        i: usize,
        depth: usize,
        paths: &mut Vec<Path>,
        data: &PhaseData,
        rows: &mut Vec<TreeRow>,
    ) {
        let mut intervals = std::mem::take(&mut paths[i].intervals);
        let coverage = union_len(&mut intervals);
        let p = &paths[i];
        rows.push(TreeRow {
            depth,
            name: data.regions[p.region as usize].name.clone(),
            recursive: p.recursive,
            calls: p.calls,
            stats: p.stats,
            coverage_ns: coverage,
            total_ns: p.stats.total as i64,
            own: false,
        });
        let mut children = p.children.clone();
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
        children.sort_by_key(|&c| paths[c].first_start);
        for c in children {
            emit(c, depth + 1, paths, data, rows);
        }
    }
    for r in roots {
        emit(r, 0, &mut paths, data, &mut rows);
    }
    rows
}

/// Length of the union of intervals.
fn union_len(v: &mut [(i64, i64)]) -> i64 {
    v.sort_unstable();
    let mut total = 0;
    let mut cur: Option<(i64, i64)> = None;
    for &(s, e) in v.iter() {
        match cur {
            Some((cs, ce)) if s <= ce => cur = Some((cs, ce.max(e))),
            Some((cs, ce)) => {
                total += ce - cs;
                cur = Some((s, e));
            }
            None => cur = Some((s, e)),
        }
    }
    total + cur.map_or(0, |(s, e)| e - s)
}

#[cfg(test)]
mod tests;

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
//! **Memory.** Nesting works on a compact copy of each call ([`Span`], 32 bytes), not on the
//! calls themselves: a finalize streams the calls from the spool and keeps only these.
//! Exclusive totals and the call tree are folded in the same sorted pass ([`Nester`]; the tree
//! in O(distinct call paths): each path's wall-clock coverage is a running union, which the
//! start order makes exact). Up to [`NEST_BUDGET`] calls are sorted in memory and get call ids
//! (8 more bytes each); larger phases are sorted on disk ([`external`]) and get exact exclusive
//! totals and tree, but no per-call ids.

use crate::data::rows::{CallRecord, PhaseData};
use crate::data::scan::Ranks;
pub(crate) use crate::data::scan::{Nested, Overlap, TreeRow};
use crate::data::stats::Stats;

/// Most calls a phase may have to be nested in memory (40 bytes each plus 16 while sorting, so
/// at most ~84 MiB). Above it the calls are sorted on disk ([`external`]): exclusive totals and
/// the tree stay exact, but the file gets no `call_ids`/`parent_ids` (the Python reader
/// rebuilds them from the timestamps and lanes it always has).
pub(crate) const NEST_BUDGET: usize = 1_500_000;

/// The budget in force: [`NEST_BUDGET`], or a smaller one a unit test set for its thread.
pub(crate) fn nest_budget() -> usize {
    #[cfg(test)]
    if let Some(b) = TEST_BUDGET.with(|b| b.get()) {
        return b;
    }
    NEST_BUDGET
}

#[cfg(test)]
thread_local! {
    /// A smaller budget for the current test thread.
    pub(crate) static TEST_BUDGET: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

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
    /// Busy time: the sum of its polls, its duration less its await time (ns).
    pub busy: i64,
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
            busy: (c.dur_ns - c.await_ns).clamp(0, c.dur_ns.max(0)),
        }
    }

    /// [`Span::row`] of a call the flight recorder's threshold left out (spool frame 14): it
    /// is only counted under the innermost call of its lane open at its start, never numbered
    /// or nested into (being shorter than the threshold, it has no kept child).
    pub(crate) const BELOW: u32 = u32::MAX;

    /// A left-out call (see [`Span::BELOW`]): only its start counts, so it is given no
    /// length (a kept call starting with it, being longer, sorts first and encloses it).
    pub(crate) fn below(c: crate::spool::below::BelowCall) -> Span {
        Span {
            start: c.start_ns,
            end: c.start_ns,
            lane: c.lane,
            row: Span::BELOW,
            g: u32::MAX,
            busy: 0,
        }
    }
}

/// Two calls of one lane overlap without one containing the other.
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
    /// Busy time of the outermost calls.
    busy: i64,
    /// Busy time of every call less its children's: the `(own)` row's busy time.
    busy_own: i64,
    recursive: bool,
}

/// Lanes a nester knows before it first forgets those with nothing open.
const SWEEP_MIN: usize = 1024;

/// A call still open on its lane while later-starting calls are nested.
#[derive(Clone, Copy)]
struct Open {
    rank: u32,
    /// Doubled end (see [`Nester::push`]).
    end2: i64,
    row: u32,
    path: u32,
    /// Its storage position ([`Span::g`]).
    g: u32,
}

/// The lane the previous call was on, and the index of its stack.
#[derive(Clone, Copy)]
struct LastLane {
    lane: i64,
    stack: usize,
}

/// Nests calls handed to it in (start asc, end desc) order. Memory: the open calls of each
/// lane, the call paths, and 8 bytes per call only when it records ids.
pub(crate) struct Nester<'a> {
    names: &'a [&'a str],
    first_id: i64,
    want_tree: bool,
    rank: u64,
    ids: Option<Ranks>,
    exclusive: Vec<i64>,
    paths: Vec<Path>,
    key: Tree,
    lane_index: crate::fasthash::FastMap<i64, usize>,
    stacks: Vec<Vec<Open>>,
    /// The lane of the previous call and its stack's index (calls come in runs of a lane).
    last_lane: LastLane,
    /// Slots of `stacks` given back by lanes with nothing open (see [`Nester::sweep`]).
    free: Vec<usize>,
    /// Lanes known when the next sweep runs.
    sweep_at: usize,
    /// Profiler cost taken out of a parent's exclusive time per child call (overhead
    /// compensation; 0 = off).
    child_overhead: i64,
    /// Left-out calls ([`Span::BELOW`]) counted per enclosing call's storage position.
    below: crate::fasthash::FastMap<u32, u64>,
    /// Left-out calls no call of their lane enclosed.
    below_top: u64,
}

impl<'a> Nester<'a> {
    /// A nester for a phase with `names.len()` rows; ids start at `first_id`. With
    /// `ids_for = Some(n)` it records the ids of the `n` calls (by storage position).
    pub(crate) fn new(
        names: &'a [&'a str],
        first_id: i64,
        want_tree: bool,
        ids_for: Option<usize>,
    ) -> Nester<'a> {
        Nester {
            names,
            first_id,
            want_tree,
            rank: 0,
            ids: ids_for.map(Ranks::new),
            exclusive: vec![0; names.len()],
            paths: Vec::new(),
            key: Tree::default(),
            lane_index: Default::default(),
            stacks: Vec::new(),
            last_lane: LastLane {
                lane: i64::MIN,
                stack: 0,
            },
            free: Vec::new(),
            sweep_at: SWEEP_MIN,
            child_overhead: 0,
            below: Default::default(),
            below_top: 0,
        }
    }

    /// With overhead compensation: each child call also takes `ns` (its measured profiler
    /// cost) out of its parent's exclusive time. Raw durations are never changed.
    pub(crate) fn with_child_overhead(mut self, ns: i64) -> Self {
        self.child_overhead = ns;
        self
    }

    /// Nests the next call (in start asc, end desc order).
    pub(crate) fn push(&mut self, a: &Span) -> Result<(), Overlap> {
        // Doubled times; a zero-length call ends half a tick after it starts, so it is still
        // open at its own start (as the reader does it).
        let start2 = 2 * a.start;
        let end2 = 2 * a.end + i64::from(a.end == a.start);
        if a.lane != self.last_lane.lane {
            if self.lane_index.len() >= self.sweep_at {
                self.sweep(start2);
            }
            let k = match self.lane_index.entry(a.lane) {
                std::collections::hash_map::Entry::Occupied(o) => *o.get(),
                std::collections::hash_map::Entry::Vacant(v) => {
                    let k = self.free.pop().unwrap_or_else(|| {
                        self.stacks.push(Vec::new());
                        self.stacks.len() - 1
                    });
                    *v.insert(k)
                }
            };
            self.last_lane = LastLane {
                lane: a.lane,
                stack: k,
            };
        }
        let stack = &mut self.stacks[self.last_lane.stack];
        while stack.last().is_some_and(|o| o.end2 <= start2) {
            stack.pop();
        }
        if a.row == Span::BELOW {
            // Counted under the innermost call open at its start; nothing nests in it.
            match stack.last() {
                Some(p) => *self.below.entry(p.g).or_default() += 1,
                None => self.below_top += 1,
            }
            return Ok(());
        }
        let parent = match stack.last() {
            Some(p) if end2 > p.end2 => {
                return Err(Overlap {
                    row: a.row,
                    other: p.row,
                })
            }
            p => p.copied(),
        };
        let rank = self.rank as u32;
        self.rank += 1;
        let dur = a.end - a.start;
        self.exclusive[a.row as usize] += dur;
        if let Some(p) = parent {
            self.exclusive[p.row as usize] -= dur + self.child_overhead;
        }
        if let Some(ranks) = &mut self.ids {
            ranks.of[a.g as usize] = rank;
            if let Some(p) = parent {
                ranks.parent[a.g as usize] = p.rank;
            }
        }
        let mut path = 0;
        if self.want_tree {
            let parent_path = parent.map(|p| p.path);
            path = add_to_tree(&mut self.paths, &mut self.key, parent_path, a);
            if let Some(pp) = parent_path {
                let parent = &mut self.paths[pp as usize];
                parent.exclusive -= dur + self.child_overhead;
                parent.busy_own -= a.busy;
            }
        }
        self.stacks[self.last_lane.stack].push(Open {
            rank,
            end2,
            row: a.row,
            path,
            g: a.g,
        });
        Ok(())
    }

    /// Forgets the lanes whose calls have all ended before `start2` (calls come in start
    /// order, so nothing will nest in them any more): a phase of a million short tasks keeps
    /// the open calls of the live ones only. Amortized O(1) per call.
    fn sweep(&mut self, start2: i64) {
        let (stacks, free) = (&mut self.stacks, &mut self.free);
        self.lane_index.retain(|_, &mut k| {
            // The bottom of a lane's stack ends last.
            let live = stacks[k].first().is_some_and(|o| o.end2 > start2);
            if !live {
                stacks[k].clear();
                free.push(k);
            }
            live
        });
        self.last_lane = LastLane {
            lane: i64::MIN,
            stack: 0,
        };
        self.sweep_at = SWEEP_MIN.max(2 * self.lane_index.len());
        if self.lane_index.capacity() > 4 * self.sweep_at {
            self.lane_index.shrink_to(self.sweep_at);
        }
    }

    /// The result.
    pub(crate) fn finish(mut self) -> Nested {
        if self.child_overhead > 0 {
            // Compensation can take more than a parent's own time; never below zero.
            for e in &mut self.exclusive {
                *e = (*e).max(0);
            }
            for p in &mut self.paths {
                p.exclusive = p.exclusive.max(0);
            }
        }
        for p in &mut self.paths {
            // A child polled off its parent's polls (another thread) can exceed them.
            p.busy_own = p.busy_own.max(0);
        }
        let tree = self.want_tree.then(|| emit_tree(self.paths, self.names));
        let mut below: Vec<(u32, u64)> = self.below.into_iter().collect();
        below.sort_unstable();
        Nested {
            first_id: self.first_id,
            calls: self.rank,
            ids: self.ids,
            exclusive: self.exclusive,
            tree,
            below,
            below_top: self.below_top,
        }
    }
}

/// Sorts calls the way nesting needs them: start ascending, end descending, then storage
/// order (`g`, unique): the order a stable sort of the storage order gives, by the faster
/// unstable sort (a third less time for the million calls of a task-per-request phase).
pub(crate) fn sort(spans: &mut [Span]) {
    spans.sort_unstable_by(|a, b| {
        a.start
            .cmp(&b.start)
            .then(b.end.cmp(&a.end))
            .then(a.g.cmp(&b.g))
    });
}

/// Nests `spans` (any order; `g` must be 0..n) of a phase with `names.len()` rows in memory,
/// with ids; ids start at `first_id`. Builds the call tree too when `want_tree`.
pub(crate) fn nest_spans(
    mut spans: Vec<Span>,
    names: &[&str],
    first_id: i64,
    want_tree: bool,
    child_overhead: i64,
) -> Result<Nested, Overlap> {
    sort(&mut spans);
    // Ids for the calls, not for the left-out ones only counted (`Span::BELOW`).
    let calls = spans.iter().filter(|s| s.row != Span::BELOW).count();
    let mut n =
        Nester::new(names, first_id, want_tree, Some(calls)).with_child_overhead(child_overhead);
    for a in &spans {
        n.push(a)?;
    }
    Ok(n.finish())
}

/// The call paths by (parent path, row), with the last lookup cached (loops repeat it).
#[derive(Default)]
struct Tree {
    map: crate::fasthash::FastMap<PathKey, u32>,
    last: Option<(PathKey, u32)>,
}

/// What identifies a call path: its parent's path ([`PathKey::TOP`] at a lane's top) and
/// its region row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct PathKey {
    parent: u32,
    row: u32,
}

impl PathKey {
    /// The parent of a top-level path.
    const TOP: u32 = u32::MAX;
}

/// Adds one call (whose parent's path is `parent_path`) to the tree; returns its path.
fn add_to_tree(paths: &mut Vec<Path>, key: &mut Tree, parent_path: Option<u32>, a: &Span) -> u32 {
    let dur = a.end - a.start;
    // Recursion collapses into the parent's row.
    let (path, outermost) = match parent_path {
        Some(pp) if paths[pp as usize].row == a.row => {
            paths[pp as usize].recursive = true;
            (pp, false)
        }
        _ => {
            let next = paths.len() as u32;
            let k = PathKey {
                parent: parent_path.unwrap_or(PathKey::TOP),
                row: a.row,
            };
            let path = match key.last {
                Some((lk, p)) if lk == k => p,
                _ => {
                    let p = *key.map.entry(k).or_insert(next);
                    key.last = Some((k, p));
                    p
                }
            };
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
                    busy: 0,
                    busy_own: 0,
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
    p.busy_own += a.busy;
    if outermost {
        p.stats.add(dur as u64);
        p.busy += a.busy;
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
            busy_ns: p.busy,
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
                busy_ns: p.busy_own,
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
pub(crate) fn nest(data: &mut PhaseData, first_id: i64) -> Result<i64, NestingError> {
    let names: Vec<String> = data.regions.iter().map(|r| r.name.clone()).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let comp = data.extra.child_overhead_ns;
    match nest_spans(spans_of(data), &refs, first_id, false, comp) {
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
pub(crate) fn call_tree(data: &PhaseData) -> Vec<TreeRow> {
    let refs: Vec<&str> = data.regions.iter().map(|r| r.name.as_str()).collect();
    nest_spans(spans_of(data), &refs, 0, true, data.extra.child_overhead_ns)
        .ok()
        .and_then(|n| n.tree)
        .unwrap_or_default()
}

pub(crate) mod external;

#[cfg(test)]
mod tests;

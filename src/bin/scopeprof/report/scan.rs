//! The two passes of a report over a file's calls, both in bounded memory.
//!
//! Pass one sorts every call (spilling to a temporary file beside the output, as `export`
//! does) and walks them lane by lane: the call tree ([`Tree`]), how busy the lanes were in
//! each of [`BUCKETS`] slices of the run (time inside root calls, summed over lanes), and the
//! [`SLOWEST`] longest calls. The busiest window is chosen from the buckets, wide enough to
//! hold about `max_slices` calls. Pass two reads calls and polls again and keeps the
//! `max_slices` longest slices that meet the window (nested by the same walker), and every
//! poll of the slowest calls.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::convert::Infallible;
use std::path::Path;

use scope_profiler::read::Profile;

use super::tree::{Tree, ROOT};
use crate::export::{collect, CHUNK};
use crate::items::{Item, Kind, TrackKind, Tracks, NONE};
use crate::sort::{spill_path, Sorter};
use crate::supervise::Heartbeat;
use crate::walk::{Open, Sink, Walker};

/// Slices of the run in which busy time is counted.
pub(crate) const BUCKETS: usize = 1000;
/// Calls listed with their polls.
pub(crate) const SLOWEST: usize = 15;
/// Polls drawn per slow call (all are counted).
pub(crate) const POLLS_DRAWN: usize = 200;

/// What pass one learns.
pub(crate) struct Overview {
    pub(crate) tree: Tree,
    pub(crate) calls: u64,
    /// First start and last end of any call (ns).
    pub(crate) first: i64,
    pub(crate) last: i64,
    /// Busy lane time per bucket (ns).
    pub(crate) busy: Vec<f64>,
    /// The slowest calls, longest first.
    pub(crate) slowest: Vec<Item>,
    /// Calls that overlapped another of their lane without nesting.
    pub(crate) overlapping: u64,
}

/// A slice item as an orderable key: the longest, then the earliest, is the largest (kept
/// by a min-heap of `Reverse`).
type Key = (i64, i64, i64, u32, u32, u32, u8);

fn key(it: &Item, dur: i64) -> Key {
    (
        dur,
        -it.start,
        it.end,
        it.track,
        it.name,
        it.other,
        it.kind as u8,
    )
}

fn item(k: &Key) -> Item {
    Item {
        start: -k.1,
        end: k.2,
        track: k.3,
        name: k.4,
        other: k.5,
        kind: Kind::from_u8(k.6),
    }
}

/// Keeps the `cap` largest keys.
fn keep_top(heap: &mut BinaryHeap<Reverse<Key>>, cap: usize, k: Key) {
    if heap.len() < cap {
        heap.push(Reverse(k));
    } else if heap.peek().is_some_and(|top| top.0 < k) {
        heap.pop();
        heap.push(Reverse(k));
    }
}

/// Busy time per bucket: each root call adds its overlap with every bucket, in O(1).
struct Busy {
    first: i64,
    width: f64,
    part: Vec<f64>,
    /// Difference array of whole buckets covered.
    whole: Vec<f64>,
}

impl Busy {
    fn new(first: i64, last: i64) -> Busy {
        Busy {
            first,
            width: ((last - first).max(1) as f64) / BUCKETS as f64,
            part: vec![0.0; BUCKETS],
            whole: vec![0.0; BUCKETS + 1],
        }
    }

    fn add(&mut self, start: i64, end: i64) {
        let (s, e) = ((start - self.first) as f64, (end - self.first) as f64);
        let bucket = |x: f64| ((x / self.width) as usize).min(BUCKETS - 1);
        let (i, j) = (bucket(s), bucket(e));
        if i == j {
            self.part[i] += e - s;
            return;
        }
        self.part[i] += (i + 1) as f64 * self.width - s;
        self.part[j] += e - j as f64 * self.width;
        self.whole[i + 1] += self.width;
        self.whole[j] -= self.width;
    }

    fn finish(self) -> Vec<f64> {
        let mut run = 0.0;
        (0..BUCKETS)
            .map(|k| {
                run += self.whole[k];
                self.part[k] + run
            })
            .collect()
    }
}

/// Pass one's walker sink.
struct TreeSink {
    tree: Tree,
    busy: Busy,
}

impl Sink for TreeSink {
    type Error = Infallible;

    fn begin(
        &mut self,
        it: &Item,
        level: u32,
        stack: &[Open],
        _: Option<u32>,
    ) -> Result<u32, Infallible> {
        if level == 0 && stack.is_empty() {
            self.busy.add(it.start, it.end);
        }
        let parent = stack.last().map_or(ROOT, |o| o.node);
        Ok(self.tree.enter(parent, it.name))
    }

    fn end(&mut self, open: &Open, _: u32, _: &[Open]) -> Result<(), Infallible> {
        let dur = (open.item.end - open.item.start).max(0) as u64;
        self.tree.leave(open.node, dur, open.child_ns.max(0) as u64);
        Ok(())
    }
}

/// Pass one over `p`'s calls (their tracks end up in `tracks`).
pub(crate) fn overview(
    p: &Profile,
    tracks: &mut Tracks,
    out: &Path,
    run_items: usize,
) -> Result<Overview, String> {
    let mut sorter = Sorter::new(run_items, spill_path(out));
    let (mut first, mut last, mut calls) = (i64::MAX, i64::MIN, 0u64);
    let mut slow = BinaryHeap::new();
    let mut keep = |_: u32, it: &Item| {
        if it.kind != Kind::Call {
            return false;
        }
        calls += 1;
        first = first.min(it.start);
        last = last.max(it.end);
        keep_top(&mut slow, SLOWEST, key(it, it.end - it.start));
        true
    };
    collect(p, tracks, &mut sorter, false, &mut keep)?;
    if calls == 0 {
        (first, last) = (0, 0);
    }
    let mut sink = TreeSink {
        tree: Tree::new(),
        busy: Busy::new(first, last),
    };
    let mut walker = Walker::new();
    let mut hb = Heartbeat::new();
    let infallible = |e: Infallible| -> std::io::Error { match e {} };
    sorter
        .finish(|it| {
            hb.tick();
            walker.push(it, &mut sink).map_err(infallible)
        })
        .map_err(|e| {
            format!(
                "{}: cannot read back the temporary sort file: {e}",
                out.display()
            )
        })?;
    let Ok(()) = walker.finish(&mut sink);
    let mut slowest: Vec<Item> = slow.into_iter().map(|r| item(&r.0)).collect();
    slowest.sort_by_key(|it| Reverse(it.end - it.start));
    Ok(Overview {
        tree: sink.tree,
        calls,
        first,
        last,
        busy: sink.busy.finish(),
        slowest,
        overlapping: walker.overlapping,
    })
}

/// The tree of `p`'s polls (a poll's path is the polls open on its thread): its exclusive
/// times are busy time, where the CPU went, with no `.await` in them. `None` for a file
/// without polls.
pub(crate) fn poll_tree(
    p: &Profile,
    tracks: &mut Tracks,
    out: &Path,
    run_items: usize,
) -> Result<Option<Tree>, String> {
    if p.poll_count() == 0 {
        return Ok(None);
    }
    let mut sorter = Sorter::new(run_items, spill_path(out));
    collect(p, tracks, &mut sorter, true, &mut |_, it| {
        it.kind == Kind::Poll
    })?;
    let mut sink = TreeSink {
        tree: Tree::new(),
        busy: Busy::new(0, 0),
    };
    let mut walker = Walker::new();
    let mut hb = Heartbeat::new();
    let infallible = |e: Infallible| -> std::io::Error { match e {} };
    sorter
        .finish(|it| {
            hb.tick();
            walker.push(it, &mut sink).map_err(infallible)
        })
        .map_err(|e| {
            format!(
                "{}: cannot read back the temporary sort file: {e}",
                out.display()
            )
        })?;
    let Ok(()) = walker.finish(&mut sink);
    Ok(Some(sink.tree))
}

/// The busiest window holding about `max_slices` calls: (start, end) in ns. Its width is
/// the run's span x `max_slices` / calls; it lies in the run of buckets of that width with
/// the most busy time (centered in it when narrower than one bucket).
pub(crate) fn window(o: &Overview, max_slices: usize) -> (i64, i64) {
    if o.calls as usize <= max_slices || o.last <= o.first {
        return (o.first, o.last);
    }
    let span = (o.last - o.first) as f64;
    let want = span * max_slices as f64 / o.calls as f64;
    let width = span / BUCKETS as f64;
    let len = ((want / width).ceil() as usize).clamp(1, BUCKETS);
    let mut sum: f64 = o.busy[..len].iter().sum();
    let (mut best, mut at) = (sum, 0);
    for k in len..BUCKETS {
        sum += o.busy[k] - o.busy[k - len];
        if sum > best {
            (best, at) = (sum, k + 1 - len);
        }
    }
    let start = o.first as f64 + at as f64 * width + (len as f64 * width - want).max(0.0) / 2.0;
    let start = start as i64;
    (start, (start + want.ceil() as i64).min(o.last))
}

/// One slice of the timeline: its lane (track, level), depth and clipped times.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Drawn {
    pub(crate) item: Item,
    pub(crate) level: u32,
    pub(crate) depth: u32,
}

/// A slow call and its polls.
#[derive(Clone, Debug)]
pub(crate) struct SlowCall {
    pub(crate) call: Item,
    /// Whether the call ran on a task lane (its polls are then the task's, on any thread).
    pub(crate) on_task: bool,
    pub(crate) polls: u64,
    pub(crate) busy_ns: i64,
    /// The first [`POLLS_DRAWN`] polls (start, end).
    pub(crate) drawn: Vec<(i64, i64)>,
}

impl SlowCall {
    pub(crate) fn new(call: Item, tracks: &Tracks) -> SlowCall {
        SlowCall {
            call,
            on_task: matches!(
                tracks.tracks[call.track as usize].kind,
                TrackKind::Task { .. }
            ),
            polls: 0,
            busy_ns: 0,
            drawn: Vec::new(),
        }
    }

    /// Counts poll `q` when it is one of this call's: same region, same lane, inside it.
    fn offer(&mut self, q: &Item) {
        let c = &self.call;
        let lane = if self.on_task {
            q.other == c.track
        } else {
            q.track == c.track
        };
        if lane && q.name == c.name && q.start >= c.start && q.end <= c.end {
            self.polls += 1;
            self.busy_ns += q.end - q.start;
            if self.drawn.len() < POLLS_DRAWN {
                self.drawn.push((q.start, q.end));
            }
        }
    }
}

/// What pass two keeps.
pub(crate) struct Detail {
    /// The window's slices, nested, in start order.
    pub(crate) slices: Vec<Drawn>,
    /// Slices that met the window (calls, polls and device times).
    pub(crate) in_window: u64,
    pub(crate) slow: Vec<SlowCall>,
    pub(crate) tracks: Tracks,
}

/// Records each slice's level and depth.
struct Nest(Vec<Drawn>);

impl Sink for Nest {
    type Error = Infallible;
    fn begin(
        &mut self,
        it: &Item,
        level: u32,
        stack: &[Open],
        _: Option<u32>,
    ) -> Result<u32, Infallible> {
        self.0.push(Drawn {
            item: *it,
            level,
            depth: stack.len() as u32,
        });
        Ok(0)
    }
    fn end(&mut self, _: &Open, _: u32, _: &[Open]) -> Result<(), Infallible> {
        Ok(())
    }
}

/// Pass two: the window's slices (at most `max_slices`, the longest) and the polls of the
/// slow calls.
pub(crate) fn detail(
    p: &Profile,
    window: (i64, i64),
    mut slow: Vec<SlowCall>,
    max_slices: usize,
) -> Result<Detail, String> {
    let mut tracks = Tracks::new(p);
    let mut heap = BinaryHeap::new();
    let mut in_window = 0u64;
    let (w0, w1) = window;
    let mut hb = Heartbeat::new();
    let mut take = |it: Item, _: u32| {
        if it.kind == Kind::Poll {
            for s in slow.iter_mut() {
                s.offer(&it);
            }
        }
        // A poll outside a task is its sync call again: the timeline draws the call only.
        let drawn = !(it.kind == Kind::Poll && it.other == NONE);
        if drawn && it.end >= w0 && it.start <= w1 {
            in_window += 1;
            let clipped = Item {
                start: it.start.max(w0),
                end: it.end.min(w1),
                ..it
            };
            keep_top(
                &mut heap,
                max_slices,
                key(&clipped, clipped.end - clipped.start),
            );
        }
    };
    let mut tick = || hb.tick();
    tracks
        .calls(p, CHUNK, &mut tick, &mut take)
        .map_err(|e| e.to_string())?;
    tracks
        .polls(p, CHUNK, &mut tick, &mut take)
        .map_err(|e| e.to_string())?;
    let mut items: Vec<Item> = heap.into_iter().map(|r| item(&r.0)).collect();
    items.sort_by(Item::order);
    let mut walker = Walker::new();
    let mut nest = Nest(Vec::with_capacity(items.len()));
    for it in &items {
        let Ok(()) = walker.push(it, &mut nest);
    }
    let Ok(()) = walker.finish(&mut nest);
    Ok(Detail {
        slices: nest.0,
        in_window,
        slow,
        tracks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_time_lands_in_its_buckets() {
        let mut b = Busy::new(0, 1000);
        b.add(10, 13);
        b.add(500, 500);
        b.add(990, 1000);
        b.add(0, 1000);
        let v = b.finish();
        assert!(
            (v.iter().sum::<f64>() - 1013.0).abs() < 1e-9,
            "{}",
            v.iter().sum::<f64>()
        );
        assert_eq!(&v[9..14], &[1.0, 2.0, 2.0, 2.0, 1.0]);
        assert_eq!(v[999], 2.0);
    }

    fn overview(calls: u64, busy: Vec<f64>) -> Overview {
        Overview {
            tree: Tree::new(),
            calls,
            first: 0,
            last: 1_000_000,
            busy,
            slowest: Vec::new(),
            overlapping: 0,
        }
    }

    #[test]
    fn the_window_is_where_the_lanes_are_busiest() {
        let mut busy = vec![1.0; BUCKETS];
        busy[700..720].iter_mut().for_each(|b| *b = 5.0);
        // 100 000 calls, 1 000 to draw: a window of 1 % of the run (10 buckets).
        let (a, b) = window(&overview(100_000, busy.clone()), 1000);
        assert_eq!(b - a, 10_000);
        assert!(a >= 700_000 && b <= 720_000, "{a}..{b}");
        // Narrower than a bucket: centered in the busiest bucket.
        busy[400] = 50.0;
        let (a, b) = window(&overview(100_000_000, busy), 1000);
        assert_eq!(b - a, 10);
        assert!(a > 400_000 && b < 401_000, "{a}..{b}");
        // Few calls: the whole run.
        assert_eq!(
            window(&overview(10, vec![0.0; BUCKETS]), 1000),
            (0, 1_000_000)
        );
    }

    #[test]
    fn ties_keep_the_earliest_slices() {
        let mut heap = BinaryHeap::new();
        for start in [30, 10, 20] {
            let it = Item {
                start,
                end: start + 5,
                name: 0,
                track: 0,
                other: NONE,
                kind: Kind::Call,
            };
            keep_top(&mut heap, 2, key(&it, 5));
        }
        let mut starts: Vec<i64> = heap.into_iter().map(|r| item(&r.0).start).collect();
        starts.sort_unstable();
        assert_eq!(starts, [10, 20]);
    }
}

//! Folded stacks of the call tree, for flamegraphs: one line `frame;frame;... weight` per call
//! path, the weight being the path's exclusive (self) time in ns, so a frame's width is its
//! inclusive time. Paths are kept in a trie, so memory grows with distinct paths, not calls.
//!
//! The stacks are those of the file's polls when it has them (busy time: where the CPU went,
//! an async call's `.await` left out), else, or with `--wall`, those of its calls (wall-clock
//! time, `.await` included). A poll's stack is the polls open on its thread.
//!
//! Stacks start at the lane roots; `--per-thread` puts the thread (of the lane's outermost
//! call) as the first frame, `--per-task` the task (or thread, for calls outside tasks), and a
//! file with several ranks gets a `rank N` frame in front.

use std::collections::HashMap;

use crate::items::{Item, Kind, TrackKind, Tracks, NONE};
use crate::walk::{Open, Sink};

/// How stacks are grouped.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Grouping {
    pub per_thread: bool,
    pub per_task: bool,
    pub per_rank: bool,
}

/// The trie of call paths and their exclusive time.
pub(crate) struct Folded {
    frames: Vec<String>,
    /// Per node: (parent node, frame).
    nodes: Vec<(u32, u32)>,
    weights: Vec<u64>,
    children: HashMap<(u32, u32), u32>,
    /// Lane prefix node per (prefix key).
    prefixes: HashMap<(u32, u32), u32>,
    /// Track facts: (rank, label, is task).
    tracks: Vec<(u32, String, bool)>,
    group: Grouping,
}

const ROOT: u32 = 0;

impl Folded {
    pub(crate) fn new(t: &Tracks, group: Grouping) -> Folded {
        Folded {
            frames: t.names.iter().map(|n| n.replace(';', ":")).collect(),
            nodes: vec![(ROOT, u32::MAX)],
            weights: vec![0],
            children: HashMap::new(),
            prefixes: HashMap::new(),
            tracks: t
                .tracks
                .iter()
                .map(|tr| {
                    let label = match &tr.kind {
                        TrackKind::Thread { .. } => format!("thread {}", tr.label()),
                        _ => tr.label(),
                    };
                    (
                        tr.rank,
                        label.replace(';', ":"),
                        matches!(tr.kind, TrackKind::Task { .. }),
                    )
                })
                .collect(),
            group,
        }
    }

    fn child(&mut self, parent: u32, frame: u32) -> u32 {
        let next = self.nodes.len() as u32;
        let id = *self.children.entry((parent, frame)).or_insert(next);
        if id == next {
            self.nodes.push((parent, frame));
            self.weights.push(0);
        }
        id
    }

    fn frame(&mut self, name: String) -> u32 {
        self.frames.push(name);
        self.frames.len() as u32 - 1
    }

    /// The node stacks of a lane root start under.
    fn prefix(&mut self, item: &Item) -> u32 {
        let mut node = ROOT;
        let rank = self.tracks[item.track as usize].0;
        if self.group.per_rank {
            node = self.synthetic(node, (u32::MAX, rank), format!("rank {rank}"));
        }
        // A call is on its task's track (`other`: its thread); a poll on its thread's
        // (`other`: its task, if any).
        let (task, thread) = match item.kind {
            Kind::Poll if item.other != NONE => (item.other, Some(item.track)),
            Kind::Poll => (item.track, Some(item.track)),
            _ => (item.track, (item.other != NONE).then_some(item.other)),
        };
        let lane = if self.group.per_task {
            Some(task)
        } else if self.group.per_thread {
            thread
        } else {
            None
        };
        if let Some(lane) = lane {
            let label = self.tracks[lane as usize].1.clone();
            node = self.synthetic(node, (node, lane), label);
        }
        node
    }

    fn synthetic(&mut self, parent: u32, key: (u32, u32), label: String) -> u32 {
        if let Some(&n) = self.prefixes.get(&key) {
            return n;
        }
        let f = self.frame(label);
        let n = self.child(parent, f);
        self.prefixes.insert(key, n);
        n
    }

    /// The folded lines, sorted.
    pub(crate) fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut path = Vec::new();
        for (i, &w) in self.weights.iter().enumerate() {
            if w == 0 || i == ROOT as usize {
                continue;
            }
            path.clear();
            let mut n = i as u32;
            while n != ROOT {
                let (parent, frame) = self.nodes[n as usize];
                path.push(self.frames[frame as usize].as_str());
                n = parent;
            }
            path.reverse();
            out.push(format!("{} {w}", path.join(";")));
        }
        out.sort();
        out
    }
}

impl Sink for Folded {
    type Error = std::convert::Infallible;

    fn begin(
        &mut self,
        item: &Item,
        _: u32,
        stack: &[Open],
        _: Option<u32>,
    ) -> Result<u32, Self::Error> {
        let parent = match stack.last() {
            Some(p) => p.node,
            None => self.prefix(item),
        };
        Ok(self.child(parent, item.name))
    }

    fn end(&mut self, open: &Open, _: u32, _: &[Open]) -> Result<(), Self::Error> {
        let own = (open.item.end - open.item.start - open.child_ns).max(0) as u64;
        let w = &mut self.weights[open.node as usize];
        *w = w.saturating_add(own);
        Ok(())
    }
}

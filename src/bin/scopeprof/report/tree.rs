//! The call tree of a report: one node per distinct call path (region names from a lane's
//! root down), with calls, inclusive and exclusive time. Memory grows with distinct paths,
//! not calls; the summary table and the flamegraph are both drawn from it.

use std::collections::HashMap;

/// Node 0 is the root (no region); a node's frame is an index into the region names.
#[derive(Debug, Default)]
pub(crate) struct Tree {
    /// (parent, frame) per node.
    nodes: Vec<(u32, u32)>,
    pub(crate) calls: Vec<u64>,
    pub(crate) inclusive: Vec<u64>,
    pub(crate) exclusive: Vec<u64>,
    children: HashMap<(u32, u32), u32>,
}

/// The root node.
pub(crate) const ROOT: u32 = 0;

/// One node as the summary table and the flamegraph use it.
#[derive(Clone, Debug)]
pub(crate) struct Row {
    pub(crate) depth: usize,
    pub(crate) frame: u32,
    pub(crate) calls: u64,
    pub(crate) inclusive: u64,
    pub(crate) exclusive: u64,
}

impl Tree {
    pub(crate) fn new() -> Tree {
        Tree {
            nodes: vec![(ROOT, u32::MAX)],
            calls: vec![0],
            inclusive: vec![0],
            exclusive: vec![0],
            children: HashMap::new(),
        }
    }

    /// The child of `parent` for `frame` (created on first use); counts one call.
    pub(crate) fn enter(&mut self, parent: u32, frame: u32) -> u32 {
        let next = self.nodes.len() as u32;
        let id = *self.children.entry((parent, frame)).or_insert(next);
        if id == next {
            self.nodes.push((parent, frame));
            self.calls.push(0);
            self.inclusive.push(0);
            self.exclusive.push(0);
        }
        self.calls[id as usize] += 1;
        id
    }

    /// A call of `node` ended: `dur` ns, of which `children` ns in direct children.
    pub(crate) fn leave(&mut self, node: u32, dur: u64, children: u64) {
        let n = node as usize;
        self.inclusive[n] = self.inclusive[n].saturating_add(dur);
        self.exclusive[n] = self.exclusive[n].saturating_add(dur.saturating_sub(children));
        if self.nodes[n].0 == ROOT {
            self.inclusive[0] = self.inclusive[0].saturating_add(dur);
        }
    }

    /// Total inclusive time of the lane roots (the flamegraph's full width).
    pub(crate) fn total(&self) -> u64 {
        self.inclusive[0]
    }

    /// Distinct call paths.
    pub(crate) fn paths(&self) -> usize {
        self.nodes.len() - 1
    }

    /// The nodes depth first, heaviest child first, keeping only nodes whose inclusive time
    /// is at least `min_ns` (and their subtrees), at most `max_rows` of them.
    pub(crate) fn rows(&self, min_ns: u64, max_rows: usize) -> Vec<Row> {
        let mut kids: Vec<Vec<u32>> = vec![Vec::new(); self.nodes.len()];
        for (i, &(parent, _)) in self.nodes.iter().enumerate().skip(1) {
            kids[parent as usize].push(i as u32);
        }
        for k in &mut kids {
            k.sort_by_key(|&c| std::cmp::Reverse(self.inclusive[c as usize]));
        }
        let mut out = Vec::new();
        let mut stack: Vec<(u32, usize)> = kids[0].iter().rev().map(|&c| (c, 0)).collect();
        while let Some((n, depth)) = stack.pop() {
            let i = n as usize;
            if self.inclusive[i] < min_ns {
                continue;
            }
            if out.len() == max_rows {
                break;
            }
            out.push(Row {
                depth,
                frame: self.nodes[i].1,
                calls: self.calls[i],
                inclusive: self.inclusive[i],
                exclusive: self.exclusive[i],
            });
            stack.extend(kids[i].iter().rev().map(|&c| (c, depth + 1)));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_count_calls_and_times() {
        let mut t = Tree::new();
        // a [0, 100) holding b [10, 40) and b [50, 60); then a second a [100, 120).
        let a = t.enter(ROOT, 0);
        let b = t.enter(a, 1);
        t.leave(b, 30, 0);
        let b2 = t.enter(a, 1);
        assert_eq!(b, b2);
        t.leave(b2, 10, 0);
        t.leave(a, 100, 40);
        let a2 = t.enter(ROOT, 0);
        t.leave(a2, 20, 0);
        assert_eq!(t.total(), 120);
        assert_eq!(t.paths(), 2);
        let rows = t.rows(0, 10);
        assert_eq!(rows.len(), 2);
        assert_eq!(
            (rows[0].calls, rows[0].inclusive, rows[0].exclusive),
            (2, 120, 80)
        );
        assert_eq!(
            (rows[1].depth, rows[1].calls, rows[1].inclusive),
            (1, 2, 40)
        );
        assert_eq!(t.rows(50, 10).len(), 1);
        assert_eq!(t.rows(0, 1).len(), 1);
    }
}

//! Turns the sorted items into properly nested slices, track by track.
//!
//! Items arrive by start (enclosing slice first). Each track keeps a stack of open slices per
//! *level*: level 0 is the track itself; a slice that only partly overlaps an open slice of
//! its level (which a tree cannot hold: e.g. a span exited on another thread) goes to the
//! first level where it nests, and the exporters draw each extra level as its own track. The
//! nesting rule is the summary's: times doubled, a zero-length slice open for half a tick.
//! Per track and level the begins and ends come out in time order, so the ends that are
//! anonymous in Perfetto always close the right slice.

use crate::items::{Item, Kind, NONE};

/// One open slice.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Open {
    /// The slice.
    pub item: Item,
    /// Doubled end (see the module docs).
    end2: i64,
    /// Sum of direct children's durations (ns).
    pub child_ns: i64,
    /// Sink-defined value (the flamegraph's path node).
    pub node: u32,
}

/// Receives the nested slices.
pub(crate) trait Sink {
    /// Error of the sink.
    type Error;

    /// A slice begins on `track`'s `level` inside the open slices `stack` (outermost first).
    /// `flow` is the task track of a poll that is its task's outermost poll here (the flows
    /// link these), else `None`. Returns the value stored in [`Open::node`].
    fn begin(
        &mut self,
        item: &Item,
        level: u32,
        stack: &[Open],
        flow: Option<u32>,
    ) -> Result<u32, Self::Error>;

    /// `open` ends on `level` of its track; `stack` holds the slices still open around it.
    fn end(&mut self, open: &Open, level: u32, stack: &[Open]) -> Result<(), Self::Error>;
}

/// The open slices of every track.
pub(crate) struct Walker {
    /// Per track, per level: the stack.
    tracks: Vec<Vec<Vec<Open>>>,
    /// Slices that needed a level > 0.
    pub overlapping: u64,
}

impl Walker {
    pub(crate) fn new() -> Walker {
        Walker {
            tracks: Vec::new(),
            overlapping: 0,
        }
    }

    /// Places the next item (items must come in [`Item::order`]).
    pub(crate) fn push<S: Sink>(&mut self, item: &Item, sink: &mut S) -> Result<(), S::Error> {
        let t = item.track as usize;
        if self.tracks.len() <= t {
            self.tracks.resize_with(t + 1, Vec::new);
        }
        let levels = &mut self.tracks[t];
        let start2 = item.start.saturating_mul(2);
        let end2 = item
            .end
            .saturating_mul(2)
            .saturating_add(i64::from(item.end == item.start));
        let mut level = 0;
        loop {
            if levels.len() == level {
                levels.push(Vec::new());
            }
            let stack = &mut levels[level];
            while let Some(top) = stack.last().copied() {
                if top.end2 > start2 {
                    break;
                }
                stack.pop();
                sink.end(&top, level as u32, stack)?;
            }
            if stack.last().is_none_or(|top| end2 <= top.end2) {
                break;
            }
            level += 1;
        }
        if level > 0 {
            self.overlapping += 1;
        }
        let stack = &mut levels[level];
        let flow = match (item.kind, item.other) {
            (Kind::Poll, task) if task != NONE => {
                let nested_in_own_task = stack
                    .last()
                    .is_some_and(|top| top.item.kind == Kind::Poll && top.item.other == task);
                (!nested_in_own_task).then_some(task)
            }
            _ => None,
        };
        if let Some(parent) = stack.last_mut() {
            parent.child_ns += item.end - item.start;
        }
        let node = sink.begin(item, level as u32, stack, flow)?;
        stack.push(Open {
            item: *item,
            end2,
            child_ns: 0,
            node,
        });
        Ok(())
    }

    /// Ends every slice still open.
    pub(crate) fn finish<S: Sink>(&mut self, sink: &mut S) -> Result<(), S::Error> {
        for levels in &mut self.tracks {
            for (level, stack) in levels.iter_mut().enumerate() {
                while let Some(top) = stack.pop() {
                    sink.end(&top, level as u32, stack)?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Records begin/end per (track, level) and checks balance and containment.
    #[derive(Default)]
    struct Check {
        events: Vec<(u32, u32, i64, bool)>,
        exclusive: i64,
    }

    impl Sink for Check {
        type Error = ();
        fn begin(&mut self, it: &Item, level: u32, _: &[Open], _: Option<u32>) -> Result<u32, ()> {
            self.events.push((it.track, level, it.start, true));
            Ok(0)
        }
        fn end(&mut self, o: &Open, level: u32, _: &[Open]) -> Result<(), ()> {
            self.events.push((o.item.track, level, o.item.end, false));
            self.exclusive += (o.item.end - o.item.start) - o.child_ns;
            Ok(())
        }
    }

    proptest! {
        #[test]
        fn slices_balance_and_exclusive_adds_up(v in proptest::collection::vec((0i64..100, 0i64..30, 0u32..3), 0..200)) {
            let mut items: Vec<Item> = v.iter().map(|&(a, d, t)| Item {
                start: a, end: a + d, name: 0, track: t, other: NONE, kind: Kind::Call,
            }).collect();
            items.sort_by(Item::order);
            let mut w = Walker::new();
            let mut c = Check::default();
            for it in &items {
                w.push(it, &mut c).unwrap();
            }
            w.finish(&mut c).unwrap();
            // Per (track, level): times never go back and depth never goes negative.
            let mut keys: Vec<(u32, u32)> = c.events.iter().map(|e| (e.0, e.1)).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let mut depth = 0i64;
                let mut last = i64::MIN;
                for e in c.events.iter().filter(|e| (e.0, e.1) == k) {
                    prop_assert!(e.2 >= last);
                    last = e.2;
                    depth += if e.3 { 1 } else { -1 };
                    prop_assert!(depth >= 0);
                }
                prop_assert_eq!(depth, 0);
            }
            // Exclusive times sum to the union of each level's coverage = sum of root durations.
            prop_assert_eq!(c.events.iter().filter(|e| e.3).count(), items.len());
            prop_assert!(c.exclusive >= 0);
        }
    }
}

//! The starts of one task's open calls: a multiset of ticks whose minimum tells whether a
//! completed call of the task has an open container.
//!
//! A task usually has one or two open calls (a handler, and a child of it): kept inline, no
//! allocation. One with many (a connection whose commands complete first-in first-out behind
//! a busy flusher, or one task awaiting calls in a loop) keeps a sorted deque, where starts
//! come in at the back and leave at the front: O(1). The first change in the middle of a
//! large set switches it to a map, so every change stays O(log n) whatever order they
//! complete in.

use std::collections::{BTreeMap, VecDeque};

/// Above this many open calls, a change in the middle of the deque switches to the map.
const DEQUE_MAX_MIDDLE: usize = 64;

/// Open calls of one task.
#[derive(Debug, Default)]
pub(crate) enum Starts {
    /// None open.
    #[default]
    Empty,
    One(u64),
    /// Two, sorted.
    Two(u64, u64),
    /// Sorted, duplicates kept. Boxed so the common variants stay 24 bytes in all.
    #[allow(clippy::box_collection)]
    Deque(Box<VecDeque<u64>>),
    /// start -> number of open calls.
    #[allow(clippy::box_collection)]
    Many(Box<BTreeMap<u64, u32>>),
}

/// The map form of sorted starts.
fn to_map(starts: impl Iterator<Item = u64>) -> BTreeMap<u64, u32> {
    let mut m = BTreeMap::new();
    for s in starts {
        *m.entry(s).or_insert(0) += 1;
    }
    m
}

impl Starts {
    /// A call entered first at `start` is open.
    pub(crate) fn insert(&mut self, start: u64) {
        *self = match std::mem::take(self) {
            Starts::Empty => Starts::One(start),
            Starts::One(a) => Starts::Two(a.min(start), a.max(start)),
            Starts::Two(a, b) => {
                let mut d = VecDeque::with_capacity(4);
                d.extend([a, b]);
                let at = d.partition_point(|&s| s <= start);
                d.insert(at, start);
                Starts::Deque(Box::new(d))
            }
            Starts::Deque(mut d) => {
                if d.back().is_none_or(|&b| b <= start) {
                    d.push_back(start);
                    Starts::Deque(d)
                } else if d.len() > DEQUE_MAX_MIDDLE {
                    let mut m = to_map(d.iter().copied());
                    *m.entry(start).or_insert(0) += 1;
                    Starts::Many(Box::new(m))
                } else {
                    let at = d.partition_point(|&s| s <= start);
                    d.insert(at, start);
                    Starts::Deque(d)
                }
            }
            Starts::Many(mut m) => {
                *m.entry(start).or_insert(0) += 1;
                Starts::Many(m)
            }
        };
    }

    /// The open call entered first at `start` completed (or moved its start).
    pub(crate) fn remove(&mut self, start: u64) {
        *self = match std::mem::take(self) {
            Starts::One(a) if a == start => Starts::Empty,
            Starts::Two(a, b) if a == start => Starts::One(b),
            Starts::Two(a, b) if b == start => Starts::One(a),
            Starts::Deque(mut d) => {
                if d.front() == Some(&start) {
                    d.pop_front();
                } else if d.back() == Some(&start) {
                    d.pop_back();
                } else if d.len() > DEQUE_MAX_MIDDLE {
                    let mut m = Starts::Many(Box::new(to_map(d.iter().copied())));
                    m.remove(start);
                    *self = m;
                    return;
                } else {
                    let at = d.partition_point(|&s| s < start);
                    if d.get(at) == Some(&start) {
                        d.remove(at);
                    }
                }
                match d.len() {
                    0 => Starts::Empty,
                    1 => Starts::One(d[0]),
                    _ => Starts::Deque(d),
                }
            }
            Starts::Many(mut m) => {
                if let Some(n) = m.get_mut(&start) {
                    *n -= 1;
                    if *n == 0 {
                        m.remove(&start);
                    }
                }
                match m.len() {
                    0 => Starts::Empty,
                    1 if m.values().all(|&n| n == 1) => Starts::One(*m.keys().next().unwrap_or(&0)),
                    _ => Starts::Many(m),
                }
            }
            other => other,
        };
    }

    /// The earliest start of an open call.
    pub(crate) fn earliest(&self) -> Option<u64> {
        match self {
            Starts::Empty => None,
            Starts::One(a) | Starts::Two(a, _) => Some(*a),
            Starts::Deque(d) => d.front().copied(),
            Starts::Many(m) => m.first_key_value().map(|(&s, _)| s),
        }
    }

    /// Whether no call is open.
    pub(crate) fn is_empty(&self) -> bool {
        matches!(self, Starts::Empty)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_stay_inline_and_many_complete_in_any_order() {
        let mut o = Starts::default();
        o.insert(10);
        o.insert(5);
        assert!(matches!(o, Starts::Two(5, 10)));
        for k in 0..1000 {
            o.insert(100 + k);
        }
        assert_eq!(o.earliest(), Some(5));
        o.remove(5);
        o.remove(10);
        for k in 0..999 {
            o.remove(100 + k); // first-in first-out
            assert_eq!(o.earliest(), Some(101 + k));
        }
        o.remove(1099);
        assert_eq!(o.earliest(), None);
        assert!(o.is_empty());
    }

    #[test]
    fn a_middle_change_in_a_large_set_switches_to_the_map() {
        let mut o = Starts::default();
        for k in 0..100 {
            o.insert(10 * k);
        }
        assert!(matches!(o, Starts::Deque(_)), "in order: the deque");
        o.remove(500);
        assert!(matches!(o, Starts::Many(_)));
        o.insert(5);
        assert_eq!(o.earliest(), Some(0));
        o.remove(0);
        assert_eq!(o.earliest(), Some(5));
    }

    #[test]
    fn duplicates_count() {
        let mut o = Starts::default();
        o.insert(3);
        o.insert(3);
        o.insert(3);
        o.remove(3);
        assert_eq!(o.earliest(), Some(3));
        o.remove(3);
        o.remove(3);
        assert!(o.is_empty());
        o.remove(3); // nothing open: nothing happens
        assert!(o.is_empty());
    }
}

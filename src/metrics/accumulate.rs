//! The per-region metrics the flusher keeps: cumulative since `build()`, so they survive
//! every finalize and rotation (a finalize hands over the phase, never these).
//!
//! Each exported region has a *slot*: calls, total time, await time and the duration
//! histogram, updated by [`Accumulator::add`] for every call the flusher folds (a few
//! additions and a bucket found by comparisons). Regions get slots in the order the flusher
//! first sees them, up to the region limit; later ones (and a region named `other`) share the
//! `other` slot, and [`Accumulator::folded`] counts them. Slots are never removed: memory is
//! O(regions), bounded by the limit.
//!
//! A snapshot ([`Accumulator::snapshot`]) shares each unchanged slot's last published series
//! (one `Arc`), so publishing costs a copy of the slots that changed since the last one.

use std::collections::HashMap;
use std::sync::Arc;

use super::histogram::{bucket, BUCKETS};
use super::{Perf, Process, Published};

/// The cumulative series of one exported region.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RegionSeries {
    /// Calls completed.
    pub calls: u64,
    /// Their summed durations (first enter to last exit), ns.
    pub total_ns: u64,
    /// Their summed await time (duration minus busy time), ns.
    pub await_ns: u64,
    // Hook for the scheduling split (issue 21): when the flusher knows how much of a call's
    // await time the task was ready but not running, add `scheduled_ns` here, feed it in
    // `add`, and render `scope_region_scheduled_seconds_total` beside the await series.
    /// Calls per duration bucket (not cumulative; see [`super::histogram`]).
    pub buckets: [u64; BUCKETS],
}

impl Default for RegionSeries {
    fn default() -> Self {
        RegionSeries {
            calls: 0,
            total_ns: 0,
            await_ns: 0,
            buckets: [0; BUCKETS],
        }
    }
}

/// One exported series set.
struct Slot {
    /// The value of its `region` label.
    name: Arc<str>,
    series: RegionSeries,
    /// What the last snapshot holds.
    published: Arc<RegionSeries>,
    /// Perf totals by event, as of the last [`Accumulator::set_perf`].
    perf: Vec<u64>,
    dirty: bool,
}

impl Slot {
    fn new(name: &str) -> Slot {
        Slot {
            name: name.into(),
            series: RegionSeries::default(),
            published: Arc::default(),
            perf: Vec::new(),
            dirty: false,
        }
    }
}

/// The label value of the slot that holds the regions beyond the limit.
pub(crate) const OTHER: &str = "other";

/// The flusher's live metrics (see the module docs).
pub(crate) struct Accumulator {
    limit: usize,
    /// Slot of each region id.
    slot_of: Vec<u32>,
    slots: Vec<Slot>,
    /// Slot of each region name (perf totals come by name).
    by_name: HashMap<&'static str, u32>,
    /// The `other` slot, once a region went there.
    other: Option<u32>,
    /// Regions beyond the limit.
    folded: u64,
}

impl Accumulator {
    /// An empty accumulator exporting at most `limit` regions by name.
    pub(crate) fn new(limit: usize) -> Accumulator {
        Accumulator {
            limit,
            slot_of: Vec::new(),
            slots: Vec::new(),
            by_name: HashMap::new(),
            other: None,
            folded: 0,
        }
    }

    /// Regions known so far (the next [`region`](Self::region) gets this id).
    pub(crate) fn regions(&self) -> usize {
        self.slot_of.len()
    }

    /// Registers the next region id, named `name` (cold: once per region).
    pub(crate) fn region(&mut self, name: &'static str) {
        let named = self.slots.len() - usize::from(self.other.is_some());
        let slot = match self.by_name.get(name) {
            Some(&s) => s,
            None if name != OTHER && named < self.limit => {
                self.slots.push(Slot::new(name));
                (self.slots.len() - 1) as u32
            }
            None => {
                if name != OTHER {
                    self.folded += 1;
                }
                self.other_slot()
            }
        };
        self.slot_of.push(slot);
        self.by_name.insert(name, slot);
    }

    fn other_slot(&mut self) -> u32 {
        *self.other.get_or_insert_with(|| {
            self.slots.push(Slot::new(OTHER));
            (self.slots.len() - 1) as u32
        })
    }

    /// Adds one completed call of region id `region` (registered before).
    #[inline]
    pub(crate) fn add(&mut self, region: u32, dur_ns: u64, await_ns: u64) {
        let Some(&slot) = self.slot_of.get(region as usize) else {
            return;
        };
        let s = &mut self.slots[slot as usize];
        s.series.calls += 1;
        s.series.total_ns += dur_ns;
        s.series.await_ns += await_ns;
        s.series.buckets[bucket(dur_ns)] += 1;
        s.dirty = true;
    }

    /// Regions counted under `other` because of the limit.
    pub(crate) fn folded(&self) -> u64 {
        self.folded
    }

    /// Replaces the perf totals with `totals` (cumulative per region name, `events` values
    /// each); names not seen as regions yet are left for a later call.
    pub(crate) fn set_perf(&mut self, events: usize, totals: &[(&'static str, Vec<u64>)]) {
        for s in &mut self.slots {
            s.perf.clear();
            s.perf.resize(events, 0);
        }
        for (name, values) in totals {
            if let Some(&slot) = self.by_name.get(name) {
                let perf = &mut self.slots[slot as usize].perf;
                for (total, v) in perf.iter_mut().zip(values) {
                    *total = total.wrapping_add(*v);
                }
            }
        }
    }

    /// A snapshot of every slot, in slot order (see the module docs); `perf_events` names the
    /// events of the last [`set_perf`](Self::set_perf).
    pub(crate) fn snapshot(
        &mut self,
        version: u64,
        process: Process,
        perf_events: Option<Vec<String>>,
    ) -> Published {
        let mut regions = Vec::with_capacity(self.slots.len());
        for s in &mut self.slots {
            if std::mem::take(&mut s.dirty) {
                s.published = Arc::new(s.series.clone());
            }
            regions.push((s.name.clone(), s.published.clone()));
        }
        let perf = perf_events.map(|events| Perf {
            values: self
                .slots
                .iter()
                .flat_map(|s| (0..events.len()).map(|k| s.perf.get(k).copied().unwrap_or(0)))
                .collect(),
            events,
        });
        Published {
            version,
            regions,
            perf,
            process,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(p: &Published) -> Vec<&str> {
        p.regions.iter().map(|(n, _)| &**n).collect()
    }

    #[test]
    fn calls_land_in_their_region_and_bucket() {
        let mut a = Accumulator::new(10);
        a.region("a");
        a.region("b");
        a.add(0, 2_000_000, 0);
        a.add(0, 2_500_000, 400);
        a.add(1, 500, 0);
        a.add(7, 1, 1); // unknown region id: ignored
        let p = a.snapshot(1, Process::default(), None);
        assert_eq!(names(&p), ["a", "b"]);
        let s = &p.regions[0].1;
        assert_eq!((s.calls, s.total_ns, s.await_ns), (2, 4_500_000, 400));
        assert_eq!(s.buckets[bucket(2_000_000)], 2);
        assert_eq!(s.buckets.iter().sum::<u64>(), 2);
        assert_eq!(p.regions[1].1.buckets[0], 1);
    }

    #[test]
    fn regions_beyond_the_limit_fold_into_other_and_are_counted() {
        let mut a = Accumulator::new(2);
        for name in ["a", "b", "c", "other", "d"] {
            a.region(name);
        }
        for r in 0..5 {
            a.add(r, 1000, 0);
        }
        let p = a.snapshot(1, Process::default(), None);
        assert_eq!(names(&p), ["a", "b", "other"]);
        // c, d and the region really named `other`.
        assert_eq!(p.regions[2].1.calls, 3);
        assert_eq!(a.folded(), 2);
    }

    #[test]
    fn an_unchanged_slot_shares_its_last_snapshot() {
        let mut a = Accumulator::new(10);
        a.region("a");
        a.region("b");
        a.add(0, 1, 0);
        a.add(1, 1, 0);
        let first = a.snapshot(1, Process::default(), None);
        a.add(1, 1, 0);
        let second = a.snapshot(2, Process::default(), None);
        assert!(Arc::ptr_eq(&first.regions[0].1, &second.regions[0].1));
        assert!(!Arc::ptr_eq(&first.regions[1].1, &second.regions[1].1));
        assert_eq!(
            (first.regions[1].1.calls, second.regions[1].1.calls),
            (1, 2)
        );
    }

    #[test]
    fn perf_totals_go_by_name_and_fold_like_calls() {
        let mut a = Accumulator::new(1);
        a.region("a");
        a.region("b");
        a.set_perf(2, &[("a", vec![1, 2]), ("b", vec![10, 20]), ("z", vec![5, 5])]);
        a.set_perf(2, &[("a", vec![3, 4]), ("b", vec![10, 20])]);
        let p = a.snapshot(1, Process::default(), Some(vec!["x".into(), "y".into()]));
        let perf = p.perf.unwrap();
        assert_eq!(perf.values, [3, 4, 10, 20]);
    }
}

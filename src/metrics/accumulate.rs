//! The per-region metrics the flusher keeps: cumulative since `build()`, so they survive
//! every finalize and rotation.
//!
//! **Per call** ([`Accumulator::add`]) only what the flusher does not already keep: the
//! call's duration bucket and its await time, in a histogram per region id (one bounds
//! check, a branch-free bucket, two additions). Calls and total time come from the phase's
//! own statistics ([`crate::data::stats::Sums`], which the flusher updates for every call
//! anyway): a snapshot adds the current phase's count and total to what earlier phases
//! carried ([`Accumulator::carry`], at every finalize, before the phase is handed over).
//!
//! **Per snapshot** ([`Accumulator::snapshot`], a few times a second) the regions become
//! exported *slots*: the first `limit` regions the flusher saw by name, the rest (and a region
//! named `other`) summed into the `other` slot, which [`Accumulator::folded`] counts. A slot
//! whose call count did not change shares its last published series (one `Arc`), so a
//! snapshot copies only what changed. Memory is O(regions): slots never go away.

use std::collections::HashMap;
use std::sync::Arc;

use super::histogram::{bucket, BUCKETS, FINITE};
use super::{Perf, Process, Published};
use crate::data::stats::Sums;

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
    // await time the task was ready but not running, add `scheduled_ns` here and in `Hist`,
    // feed it in `add`, and render `scope_region_scheduled_seconds_total` beside the await
    // series.
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

/// What a call adds, per region id.
#[derive(Clone)]
struct Hist {
    buckets: [u64; BUCKETS],
    await_ns: u64,
}

/// What a region id carries from the phases before the current one, and where it goes.
#[derive(Clone, Copy, Default)]
struct Carried {
    calls: u64,
    ns: u64,
    /// Its exported slot.
    slot: u32,
}

/// One exported series set.
struct Slot {
    /// The value of its `region` label.
    name: Arc<str>,
    /// What the last snapshot holds.
    published: Arc<RegionSeries>,
    /// Perf totals by event, as of the last [`Accumulator::set_perf`].
    perf: Vec<u64>,
}

/// The label value of the slot that holds the regions beyond the limit.
pub(crate) const OTHER: &str = "other";

/// The flusher's live metrics (see the module docs).
pub(crate) struct Accumulator {
    limit: usize,
    /// By region id: the per-call part (hot) and the carried part (cold).
    hists: Vec<Hist>,
    carried: Vec<Carried>,
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
            hists: Vec::new(),
            carried: Vec::new(),
            slots: Vec::new(),
            by_name: HashMap::new(),
            other: None,
            folded: 0,
        }
    }

    /// Regions known so far (the next [`region`](Self::region) gets this id).
    pub(crate) fn regions(&self) -> usize {
        self.hists.len()
    }

    /// Registers the next region id, named `name` (cold: once per region).
    pub(crate) fn region(&mut self, name: &'static str) {
        let named = self.slots.len() - usize::from(self.other.is_some());
        let slot = match self.by_name.get(name) {
            Some(&s) => s,
            None if name != OTHER && named < self.limit => self.new_slot(name),
            None => {
                if name != OTHER {
                    self.folded += 1;
                }
                match self.other {
                    Some(s) => s,
                    None => {
                        let s = self.new_slot(OTHER);
                        self.other = Some(s);
                        s
                    }
                }
            }
        };
        self.hists.push(Hist {
            buckets: [0; BUCKETS],
            await_ns: 0,
        });
        self.carried.push(Carried {
            slot,
            ..Carried::default()
        });
        self.by_name.insert(name, slot);
    }

    fn new_slot(&mut self, name: &str) -> u32 {
        self.slots.push(Slot {
            name: name.into(),
            published: Arc::default(),
            perf: Vec::new(),
        });
        (self.slots.len() - 1) as u32
    }

    /// Adds one completed call of region id `region` (registered before); its count and
    /// duration are also in the phase's statistics, which [`snapshot`](Self::snapshot) reads.
    #[inline]
    pub(crate) fn add(&mut self, region: u32, dur_ns: u64, await_ns: u64) {
        if let Some(h) = self.hists.get_mut(region as usize) {
            h.buckets[bucket(dur_ns).min(FINITE)] += 1;
            h.await_ns += await_ns;
        }
    }

    /// At a finalize, before the phase's statistics are handed over: keeps region id
    /// `region`'s calls and time of the phase.
    pub(crate) fn carry(&mut self, region: usize, phase: &Sums) {
        if let Some(c) = self.carried.get_mut(region) {
            c.calls += phase.count;
            c.ns += phase.total;
        }
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

    /// A snapshot of every slot, in slot order (see the module docs). `phase(id)` is region
    /// id `id`'s statistics in the current phase; `perf_events` names the events of the
    /// last [`set_perf`](Self::set_perf).
    pub(crate) fn snapshot<'a>(
        &mut self,
        version: u64,
        phase: impl Fn(usize) -> Option<&'a Sums>,
        process: Process,
        perf_events: Option<Vec<String>>,
    ) -> Published {
        let mut sums = vec![(0u64, 0u64); self.slots.len()];
        for (id, c) in self.carried.iter().enumerate() {
            let now = phase(id);
            let sum = &mut sums[c.slot as usize];
            sum.0 += c.calls + now.map_or(0, |s| s.count);
            sum.1 += c.ns + now.map_or(0, |s| s.total);
        }
        // A new series for each slot whose calls changed, summed over its regions.
        let mut fresh: Vec<Option<RegionSeries>> = sums
            .iter()
            .zip(&self.slots)
            .map(|(&(calls, total_ns), s)| {
                (calls != s.published.calls).then(|| RegionSeries {
                    calls,
                    total_ns,
                    ..RegionSeries::default()
                })
            })
            .collect();
        for (h, c) in self.hists.iter().zip(&self.carried) {
            if let Some(series) = &mut fresh[c.slot as usize] {
                for (b, n) in series.buckets.iter_mut().zip(&h.buckets) {
                    *b += n;
                }
                series.await_ns += h.await_ns;
            }
        }
        let mut regions = Vec::with_capacity(self.slots.len());
        for (s, series) in self.slots.iter_mut().zip(fresh) {
            if let Some(series) = series {
                s.published = Arc::new(series);
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

    /// Feeds calls to both the accumulator and a phase, as the flusher does.
    struct Fed {
        acc: Accumulator,
        phase: Vec<Sums>,
    }

    impl Fed {
        fn new(limit: usize, names: &[&'static str]) -> Fed {
            let mut acc = Accumulator::new(limit);
            for n in names {
                acc.region(n);
            }
            Fed {
                acc,
                phase: vec![Sums::default(); names.len()],
            }
        }
        fn call(&mut self, region: u32, dur_ns: u64, await_ns: u64) {
            self.phase[region as usize].add(dur_ns);
            self.acc.add(region, dur_ns, await_ns);
        }
        fn finalize(&mut self) {
            for (id, s) in self.phase.iter_mut().enumerate() {
                self.acc.carry(id, s);
                *s = Sums::default();
            }
        }
        fn snapshot(&mut self, version: u64) -> Published {
            let phase = &self.phase;
            self.acc
                .snapshot(version, |id| phase.get(id), Process::default(), None)
        }
    }

    #[test]
    fn calls_land_in_their_region_and_bucket() {
        let mut f = Fed::new(10, &["a", "b"]);
        f.call(0, 2_000_000, 0);
        f.call(0, 2_500_000, 400);
        f.call(1, 500, 0);
        f.acc.add(7, 1, 1); // unknown region id: ignored
        let p = f.snapshot(1);
        assert_eq!(names(&p), ["a", "b"]);
        let s = &p.regions[0].1;
        assert_eq!((s.calls, s.total_ns, s.await_ns), (2, 4_500_000, 400));
        assert_eq!(s.buckets[bucket(2_000_000)], 2);
        assert_eq!(s.buckets.iter().sum::<u64>(), 2);
        assert_eq!(p.regions[1].1.buckets[0], 1);
    }

    #[test]
    fn totals_survive_finalize() {
        let mut f = Fed::new(10, &["a"]);
        f.call(0, 10, 1);
        f.call(0, 20, 2);
        f.finalize();
        f.call(0, 30, 3);
        let s = f.snapshot(1).regions[0].1.clone();
        assert_eq!((s.calls, s.total_ns, s.await_ns), (3, 60, 6));
        assert_eq!(s.buckets[0], 3);
        f.finalize();
        assert_eq!(f.snapshot(2).regions[0].1.calls, 3);
    }

    #[test]
    fn regions_beyond_the_limit_fold_into_other_and_are_counted() {
        let mut f = Fed::new(2, &["a", "b", "c", "other", "d"]);
        for r in 0..5 {
            f.call(r, 1000 * u64::from(r + 1), 0);
        }
        let p = f.snapshot(1);
        assert_eq!(names(&p), ["a", "b", "other"]);
        // c, d and the region really named `other`.
        let other = &p.regions[2].1;
        assert_eq!((other.calls, other.total_ns), (3, 3000 + 4000 + 5000));
        assert_eq!(other.buckets.iter().sum::<u64>(), 3);
        assert_eq!(f.acc.folded(), 2);
    }

    #[test]
    fn an_unchanged_slot_shares_its_last_snapshot() {
        let mut f = Fed::new(10, &["a", "b"]);
        f.call(0, 1, 0);
        f.call(1, 1, 0);
        let first = f.snapshot(1);
        f.call(1, 1, 0);
        let second = f.snapshot(2);
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
        a.set_perf(
            2,
            &[("a", vec![1, 2]), ("b", vec![10, 20]), ("z", vec![5, 5])],
        );
        a.set_perf(2, &[("a", vec![3, 4]), ("b", vec![10, 20])]);
        let events = Some(vec!["x".into(), "y".into()]);
        let p = a.snapshot(1, |_| None, Process::default(), events);
        assert_eq!(p.perf.unwrap().values, [3, 4, 10, 20]);
    }
}

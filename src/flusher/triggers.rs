//! The flight recorder's triggers (`Builder::dump_when`), watched by the flusher: each folded
//! call of a watched region goes into its trigger's window, a ring of [`SLOTS`] time slots by
//! the call's end; at every flush the flusher checks each trigger over the slots of its last
//! `over` and, when one holds and its cool-down has passed, tells the guard's trigger thread,
//! which writes the dump (the flusher never waits for it).
//!
//! Cost: nothing per call without triggers; with them, one compare per trigger per call, and
//! for a watched call one slot lookup and one bin increment. Memory per p99 trigger:
//! [`SLOTS`] x [`BINS`] counters (31 KiB), whatever the rate.

use std::sync::mpsc::Sender;

use crate::data::trigger::{Trigger, TriggerKind};

/// Time slots a trigger's window is cut into.
const SLOTS: usize = 8;
/// Sub-bins per power of two: durations are binned to within 1/16 of their value.
const SUB_BITS: u32 = 4;
const SUB: u64 = 1 << SUB_BITS;
/// Bins of a log-linear histogram of u64 durations.
const BINS: usize = (SUB as usize) + (64 - SUB_BITS as usize) * SUB as usize;
/// Calls a p99 trigger needs in its window before it may fire.
const MIN_CALLS_FOR_P99: u64 = 100;

/// The bin of duration `v` (ns).
fn bin(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let e = 63 - v.leading_zeros(); // >= SUB_BITS
    let m = (v >> (e - SUB_BITS)) & (SUB - 1);
    (SUB + u64::from(e - SUB_BITS) * SUB + m) as usize
}

/// The smallest duration of bin `b` (ns).
fn bin_floor(b: usize) -> u64 {
    let b = b as u64;
    if b < SUB {
        return b;
    }
    let e = (b - SUB) / SUB + u64::from(SUB_BITS);
    let m = (b - SUB) % SUB;
    (SUB + m) << (e - u64::from(SUB_BITS))
}

#[derive(Clone)]
struct Slot {
    /// `end_ns / slot_ns` of its calls (`i64::MIN`: empty).
    index: i64,
    count: u64,
    /// Durations binned (p99 triggers only).
    bins: Vec<u32>,
}

struct Watch {
    trigger: Trigger,
    /// The region's id once it has one (regions are by name).
    region: Option<u32>,
    slot_ns: i64,
    slots: Vec<Slot>,
    last_fired_ns: Option<i64>,
}

/// Every trigger of the profiler, and where to say that one fired.
pub(crate) struct Triggers {
    watches: Vec<Watch>,
    fire: Sender<usize>,
}

impl Triggers {
    /// Watches `triggers`; a firing is sent to `fire` as the trigger's position.
    pub(crate) fn new(triggers: &[Trigger], fire: Sender<usize>) -> Triggers {
        let watches = (triggers.iter())
            .map(|t| {
                let over = i64::try_from(t.over.as_nanos()).unwrap_or(i64::MAX);
                let bins = match t.kind {
                    TriggerKind::P99Over(_) => BINS,
                    TriggerKind::RateOver(_) => 0,
                };
                Watch {
                    trigger: t.clone(),
                    region: None,
                    slot_ns: (over / SLOTS as i64).max(1),
                    slots: vec![
                        Slot {
                            index: i64::MIN,
                            count: 0,
                            bins: vec![0; bins],
                        };
                        SLOTS
                    ],
                    last_fired_ns: None,
                }
            })
            .collect();
        Triggers { watches, fire }
    }

    /// Region `id` is named `name`: the triggers on that name watch it.
    pub(crate) fn region(&mut self, id: u32, name: &str) {
        for w in &mut self.watches {
            if w.region.is_none() && w.trigger.region == name {
                w.region = Some(id);
            }
        }
    }

    /// A folded call of `region` that ended at `end_ns` and lasted `dur_ns`.
    #[inline]
    pub(crate) fn add(&mut self, region: u32, end_ns: i64, dur_ns: i64) {
        for w in &mut self.watches {
            if w.region == Some(region) {
                w.add(end_ns, dur_ns.max(0) as u64);
            }
        }
    }

    /// Checks every trigger at `now_ns` (the time everything before is folded); tells the
    /// guard about those that fire.
    pub(crate) fn check(&mut self, now_ns: i64) {
        for (k, w) in self.watches.iter_mut().enumerate() {
            let cooling = w
                .last_fired_ns
                .is_some_and(|at| now_ns.saturating_sub(at) < w.trigger.cooldown.as_nanos() as i64);
            if !cooling && w.holds(now_ns) {
                w.last_fired_ns = Some(now_ns);
                let _ = self.fire.send(k);
            }
        }
    }
}

impl Watch {
    fn add(&mut self, end_ns: i64, dur: u64) {
        let index = end_ns.div_euclid(self.slot_ns);
        let s = &mut self.slots[index.rem_euclid(SLOTS as i64) as usize];
        if s.index != index {
            if s.index > index {
                return; // older than the window this slot now holds
            }
            s.index = index;
            s.count = 0;
            s.bins.iter_mut().for_each(|b| *b = 0);
        }
        s.count += 1;
        if let Some(b) = s.bins.get_mut(bin(dur)) {
            *b = b.saturating_add(1);
        }
    }

    /// Whether the trigger's condition holds over the slots of its last `over` at `now_ns`.
    fn holds(&self, now_ns: i64) -> bool {
        let newest = now_ns.div_euclid(self.slot_ns);
        let live = || {
            (self.slots.iter())
                .filter(move |s| s.index <= newest && s.index > newest - SLOTS as i64)
        };
        let count: u64 = live().map(|s| s.count).sum();
        match self.trigger.kind {
            TriggerKind::RateOver(per_second) => {
                let secs = self.trigger.over.as_secs_f64();
                secs > 0.0 && count as f64 / secs > per_second
            }
            TriggerKind::P99Over(budget) => {
                if count < MIN_CALLS_FOR_P99 {
                    return false;
                }
                // The bin holding the call of rank ceil(0.99 count).
                let rank = (count * 99).div_ceil(100);
                let mut seen = 0u64;
                for b in 0..BINS {
                    seen += live().map(|s| u64::from(s.bins[b])).sum::<u64>();
                    if seen >= rank {
                        return bin_floor(b) > budget;
                    }
                }
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn bins_are_within_a_sixteenth_and_ordered() {
        let mut last = 0;
        for v in (0..64u64).chain((6..40).map(|e| (1u64 << e) + 12345 % (1 << e))) {
            let b = bin(v);
            assert!(b >= last, "bins grow with the value");
            last = b;
            let floor = bin_floor(b);
            assert!(floor <= v, "{v}: floor {floor}");
            assert!(v - floor <= v / 16, "{v}: floor {floor} too far");
            assert_eq!(bin(floor), b);
        }
        assert!(bin(u64::MAX) < BINS);
    }

    const MS: i64 = 1_000_000;

    #[test]
    fn p99_fires_once_per_cooldown_and_only_over_its_window() {
        let (tx, rx) = std::sync::mpsc::channel();
        let t = Trigger::p99_over("r", Duration::from_millis(10), Duration::from_secs(1))
            .cooldown(Duration::from_secs(5));
        let mut ts = Triggers::new(&[t], tx);
        ts.region(3, "r");
        // 1 s of fast calls: 1 ms each.
        for i in 0..1000 {
            ts.add(3, i * MS, MS);
        }
        ts.check(1000 * MS);
        assert!(rx.try_recv().is_err(), "fast calls do not fire");
        // Then 2 % slow ones (20 ms): the p99 is slow.
        for i in 0..1000 {
            let dur = if i % 50 == 0 { 20 * MS } else { MS };
            ts.add(3, (1000 + i) * MS, dur);
        }
        ts.check(2000 * MS);
        assert_eq!(rx.try_recv().ok(), Some(0), "the slow p99 fires");
        // Still slow 1 s later: cooling down.
        for i in 0..1000 {
            ts.add(3, (2000 + i) * MS, 20 * MS);
        }
        ts.check(3000 * MS);
        assert!(rx.try_recv().is_err(), "the cool-down holds");
        // Other regions are not watched; and past the cool-down, it fires again.
        ts.add(4, 7000 * MS, 1000 * MS);
        for i in 0..1000 {
            ts.add(3, (7000 + i) * MS, 20 * MS);
        }
        ts.check(8000 * MS);
        assert_eq!(rx.try_recv().ok(), Some(0));
    }

    #[test]
    fn rate_fires_above_its_rate_and_old_calls_leave_the_window() {
        let (tx, rx) = std::sync::mpsc::channel();
        let t = Trigger::calls_rate_over("r", 500.0, Duration::from_secs(2));
        let mut ts = Triggers::new(&[t], tx);
        ts.region(0, "r");
        for i in 0..800 {
            ts.add(0, i * MS, 1); // 800 calls in 0.8 s: 400/s over 2 s
        }
        ts.check(2000 * MS);
        assert!(rx.try_recv().is_err());
        for i in 0..1500 {
            ts.add(0, 2000 * MS + i * MS / 2, 1); // 1500 calls in 0.75 s
        }
        ts.check(2750 * MS);
        assert_eq!(rx.try_recv().ok(), Some(0), "{} calls/s", 1500 / 2);
        // 10 s later, with nothing new, the window is empty (and the cool-down passed too).
        ts.check(80_000 * MS);
        assert!(rx.try_recv().is_err());
    }
}

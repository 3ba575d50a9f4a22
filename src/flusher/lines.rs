//! Line timing (`Builder::line_timing(true)`): every `tracing` event fired inside a span is a
//! checkpoint that splits the call's running time among the lines of its region.
//!
//! - The time since the previous checkpoint of the same call goes to the event's line. The
//!   previous checkpoint is the call's previous event, or the start of the current poll when the
//!   event is the first of its poll, so time suspended at an `.await` between polls is never
//!   attributed to a line (it is the call's `await_ns`).
//! - The rest of the call's busy time (before the first event of each poll is counted above;
//!   after the last event of each poll up to its exit is not) goes to a row for the region's own
//!   line, with one hit per call.
//! - Hits count events. Events in another file than the region's source file are not
//!   checkpoints (the reference's line-profile layout has one file per function).
//!
//! The hot path (`crate::recording::events`) appends one `EVENT` record (span id, TSC, event
//! callsite address) to the lane. The flusher never dereferences that address: the layer
//! collects every event callsite in [`EventSites`] when `tracing` registers it (cold, once per
//! callsite), and the flusher looks the address up there; an unknown address is ignored.

pub(crate) use crate::data::lines::LineProfile;
use std::collections::BTreeMap;

use crate::fasthash::FastMap;
use crate::recording::events::{EventSite, EventSites};

/// One call's checkpoints so far (assembler side, per span instance).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct LineAcc {
    /// TSC of the latest checkpoint.
    last: u64,
    /// (event callsite address, ticks, hits).
    pub(crate) sites: Vec<(usize, u64, u32)>,
}

impl LineAcc {
    /// Adds the event `site` at `tsc`, inside a poll that started at `poll_start`.
    pub(crate) fn event(acc: &mut Option<Box<LineAcc>>, poll_start: u64, tsc: u64, site: usize) {
        let acc = acc.get_or_insert_with(Default::default);
        let since = acc.last.max(poll_start);
        let ticks = tsc.saturating_sub(since);
        acc.last = acc.last.max(tsc);
        match acc.sites.iter_mut().find(|s| s.0 == site) {
            Some(s) => {
                s.1 += ticks;
                s.2 += 1;
            }
            None => acc.sites.push((site, ticks, 1)),
        }
    }
}

/// One region's line table of a phase.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct RegionLines {
    /// line -> (hits, ns).
    pub by_line: BTreeMap<u32, (u64, f64)>,
}

/// The flusher's line tables (per region id) and its copy of the event callsites.
#[derive(Default)]
pub(crate) struct LineTables {
    regions: FastMap<u32, RegionLines>,
    cache: FastMap<usize, Option<EventSite>>,
}

impl LineTables {
    /// Folds one completed call of `region` (source `file`, own `line`) with `busy_ns` of
    /// running time and its checkpoints.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn add_call(
        &mut self,
        region: u32,
        file: Option<&str>,
        line: Option<u32>,
        busy_ns: i64,
        acc: Option<&LineAcc>,
        ticks_to_ns: impl Fn(u64) -> f64,
        sites: &EventSites,
    ) {
        let table = self.regions.entry(region).or_default();
        let mut attributed = 0.0;
        for &(site, ticks, hits) in acc.map_or(&[][..], |a| &a.sites[..]) {
            let known = *self.cache.entry(site).or_insert_with(|| sites.get(site));
            let Some(EventSite {
                file: Some(ef),
                line: Some(el),
            }) = known
            else {
                continue;
            };
            if file != Some(ef) {
                continue;
            }
            let ns = ticks_to_ns(ticks).min(busy_ns as f64 - attributed).max(0.0);
            attributed += ns;
            let e = table.by_line.entry(el).or_insert((0, 0.0));
            e.0 += u64::from(hits);
            e.1 += ns;
        }
        let own = line.unwrap_or(0);
        let e = table.by_line.entry(own).or_insert((0, 0.0));
        e.0 += 1;
        e.1 += (busy_ns as f64 - attributed).max(0.0);
    }

    /// Hands over this phase's tables (region id, lines) and starts empty ones.
    pub(crate) fn take(&mut self) -> Vec<(u32, RegionLines)> {
        let mut v: Vec<_> = std::mem::take(&mut self.regions).into_iter().collect();
        v.sort_by_key(|(r, _)| *r);
        v
    }
}

impl LineProfile {
    /// A region's table as a profile row.
    pub(crate) fn new(region: String, filename: String, line: i64, t: &RegionLines) -> Self {
        LineProfile {
            region,
            filename,
            first_lineno: line,
            line_numbers: t.by_line.keys().map(|&l| i64::from(l)).collect(),
            hits: t.by_line.values().map(|v| v.0 as i64).collect(),
            times: t.by_line.values().map(|v| v.1).collect(),
            source: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoints_split_busy_time_and_skip_awaits() {
        let sites = EventSites::default();
        let key = 0x1000usize;
        sites.insert(
            key,
            EventSite {
                file: Some("a.rs"),
                line: Some(12),
            },
        );
        let mut acc = None;
        // Poll 1 starts at 100; event at 130. Poll 2 starts at 1000 (await in between);
        // event at 1020.
        LineAcc::event(&mut acc, 100, 130, key);
        LineAcc::event(&mut acc, 1000, 1020, key);
        // An unknown site is not a checkpoint's line (ignored).
        LineAcc::event(&mut acc, 1000, 1030, 0x2000);
        let mut t = LineTables::default();
        t.add_call(
            3,
            Some("a.rs"),
            Some(10),
            80,
            acc.as_deref(),
            |x| x as f64,
            &sites,
        );
        let v = t.take();
        assert_eq!(v.len(), 1);
        let lines = &v[0].1.by_line;
        assert_eq!(lines[&12], (2, 50.0));
        assert_eq!(lines[&10], (1, 30.0));
    }
}

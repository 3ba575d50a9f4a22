//! Steps 2 and 5 of a finalize: the phase's rows from the flusher's snapshot, the facts the
//! report needs from it, and the report.

use crate::data::report::{DetailLost, Flat, RegionStats, Report};
use crate::data::rows::{Layout, PhaseData, RegionRow, SpooledCalls};
use crate::data::scan::Scan;
use crate::flusher::flush::Snapshot;
use crate::recording::shared::Shared;
use crate::{Mode, SESSION_REGION};

/// The load figures of a snapshot.
fn losses_of(snap: &Snapshot) -> crate::data::report::Losses {
    crate::data::report::Losses {
        dropped_calls: snap.dropped_calls,
        waits: snap.waits,
        wait_ns: snap.wait_ns,
        corrupt: snap.corrupt,
        follows_lost: snap.follows_lost,
    }
}

/// What the report needs from the snapshot besides the rows.
pub(super) struct Facts {
    /// Statistics by region, in snapshot order (region id order).
    pub(super) regions: Vec<RegionStats>,
    pub(super) dropped: u64,
    pub(super) losses: crate::data::report::Losses,
    pub(super) spool_lost: u64,
    pub(super) in_flight: u64,
    pub(super) truncated: bool,
    /// The calls whose detail the spool lost this phase.
    pub(super) detail_lost: Option<DetailLost>,
    /// The spool failed this phase (its calls are not read back).
    pub(super) not_written: bool,
}

impl Facts {
    pub(super) fn of(snap: &Snapshot) -> Facts {
        Facts {
            regions: snap
                .regions
                .iter()
                .map(RegionStats::from_snapshot)
                .collect(),
            dropped: snap.dropped,
            losses: losses_of(snap),
            spool_lost: snap.spool_lost,
            in_flight: snap.in_flight,
            truncated: snap.calls_truncated,
            detail_lost: None,
            not_written: false,
        }
    }
}

/// Step 2: the phase as the writers see it; spooled calls stay on disk, joined by region id.
pub(super) fn load(
    shared: &Shared,
    snap: Snapshot,
    phase_start_ns: i64,
    finalize_ns: i64,
) -> PhaseData {
    let config = &shared.config;
    let layout = match config.mode {
        Mode::Aggregate => Layout::Aggregate,
        _ => Layout::Columnar,
    };
    // The session row spans the phase; widened to cover calls that started before it (in
    // flight at the previous finalize) or ended during this finalize, so that it contains
    // every call of its lane and nesting stays valid.
    let (first_start, last_end) = snap.span_ns.unwrap_or((phase_start_ns, finalize_ns));
    let session_start = phase_start_ns.min(first_start);
    let session_dur = (finalize_ns.max(last_end) - session_start).max(0);
    let session_thread = snap
        .threads
        .iter()
        .find(|t| t.name == "main")
        .map_or(0, |t| t.index);
    let user_session = snap.regions.iter().any(|r| r.row.name == SESSION_REGION);
    let mut regions = Vec::new();
    if !user_session {
        regions.push(RegionRow::session(
            session_start,
            session_dur,
            session_thread,
            layout,
        ));
    }
    let ids = snap
        .regions
        .iter()
        .map(|r| r.id as usize)
        .max()
        .map_or(0, |m| m + 1);
    let losses = losses_of(&snap);
    let mut row_of = vec![u32::MAX; ids];
    for r in snap.regions.into_iter().filter(|r| r.row.stats.count > 0) {
        row_of[r.id as usize] = regions.len() as u32;
        regions.push(r.row);
    }
    PhaseData {
        layout,
        regions,
        start_time_ns: phase_start_ns,
        finalize_time_ns: finalize_ns,
        timestamp: shared.timestamp.clone(),
        label: config.label.clone(),
        dropped: snap.dropped + snap.spool_lost,
        losses,
        perf: None,
        likwid: None,
        threads: snap.threads,
        tasks: snap.tasks,
        polls: snap.polls,
        region_names: snap.region_names,
        track_threads: config.track_threads,
        track_async: config.track_async,
        spooled: snap.spool_phase.map(|f| SpooledCalls {
            files: vec![f],
            row_of,
            lanes: snap.spooled_lanes,
            scratch: None,
        }),
        extra: crate::data::rows::PhaseExtra {
            tokio: snap.tokio,
            ..Default::default()
        },
    }
}

/// Step 5: the report.
pub(super) fn report(
    data: &PhaseData,
    facts: &Facts,
    scan: &Scan,
    warnings: Vec<String>,
    phase_start_ns: i64,
    finalize_ns: i64,
) -> Report {
    let mut regions = facts.regions.clone();
    if let Some(perf) = &data.perf {
        for r in &mut regions {
            r.set_perf(perf);
        }
    }
    regions.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
    let tree = if facts.truncated || facts.not_written {
        None
    } else {
        scan.nested.as_ref().and_then(|n| n.tree.clone())
    };
    let flat = if data.layout == Layout::Aggregate {
        Some(Flat::Aggregate)
    } else if facts.truncated {
        Some(Flat::Truncated)
    } else if facts.not_written {
        Some(Flat::NotWritten)
    } else {
        scan.not_nested.map(|_| Flat::Overlap)
    };
    Report {
        regions,
        dropped: facts.dropped,
        losses: facts.losses,
        spool_lost: facts.spool_lost,
        in_flight: facts.in_flight,
        wall_ns: (finalize_ns - phase_start_ns).max(0) as u64,
        warnings,
        tree,
        flat,
        file: None,
        overhead: None,
        ranks: Vec::new(),
        detail_lost: facts.detail_lost.clone(),
        mpi_write: None,
        tasks: crate::output::tasks::of_phase(data),
        flight: None,
        dumps: Vec::new(),
    }
}

//! This crate's own datasets of spool version 2 under `/scope_profiler_rs/` (the Python
//! reader ignores the group; see `docs/latency.md`):
//!
//! * `open_calls/`: the calls open when the spool was last flushed, in a file `recover` wrote
//!   from a crashed run's spool: attributes `at_ns` (i64, when they were taken) and `open`
//!   (i64, calls open then, all of them), and one row per call, oldest first, at most 4096:
//!   `regions` (str), `start_ns` (i64, absolute), `thread_ids` (i64), `tokio_ids` (i64, -1
//!   outside a task), `task_ids` (i64, `task_table` index, -1 none yet), `parents` (i64, the
//!   row of the enclosing open call, -1 none) and `states` (str: `running`, `scheduled`,
//!   `idle`, `suspended` or `unknown`);
//! * `flight/`, in a flight-recorder dump: attributes `covered_from_ns` (i64, absolute: every
//!   call that ended after it is in the file, whole), `at_ns` (i64, when the dump was asked
//!   for), `window_ns` (i64, the window asked for) and `shrunk_to_ns` (i64, the narrowest
//!   window the disk budget left, -1: never shrunk), and with `flight_min_duration` the calls
//!   left out per region: `below_threshold_regions` (str) and `below_threshold_calls` (i64),
//!   and the same calls per parent: each counted under the innermost kept call of its lane
//!   open at its start (the parent the file's nesting gives it), one row per kept call that
//!   enclosed any, `below_threshold_parent_regions` (str), `below_threshold_parent_indices`
//!   (i64, the call's index in its region's datasets) and `below_threshold_parent_calls`
//!   (i64), and an attribute `below_threshold_at_top` (i64, those no kept call enclosed);
//! * `wakes/` (Tokio's instrumentation): `tick_ns` (i64, absolute), `thread_ids` (i64, the
//!   waking thread), `waker_task_ids` (i64, -1: the runtime's driver or a thread outside
//!   tasks) and `woken_task_ids` (i64), in the order the flusher settled them;
//! * `spawns/` (Tokio's instrumentation): `tick_ns`, `thread_ids`, `parent_task_ids` (-1: the
//!   thread, outside tasks) and `child_task_ids`;
//! * `follows_from/`: `tick_ns`, `span_regions` (str), `span_start_ns` (-1: not entered
//!   when the flusher resolved the link, a few ms after it), `follows_regions` (str) and
//!   `follows_start_ns`.
//!
//! Task ids are `task_table` indices. The edges are read from the phase's spool files as the
//! file is written, in two passes that skip every other frame (the first counts, the second
//! writes each frame's rows in place): memory is one frame, and the `follows_from` links,
//! which are rare, are held.

use ::hdf5::{Dataset, File, Group};

use super::ctx::Ctx;
use super::lanes::OWN_GROUP;
use crate::data::edges::{or_none, Edges, FollowsRow};
use crate::data::open_calls::OpenCalls;
use crate::data::rows::PhaseData;
use crate::data::scan::BelowByParent;
use crate::spool::SpoolRegion;
use crate::Error;

/// `/scope_profiler_rs`, made when the file does not have it yet.
fn own_group(ctx: &Ctx<'_>, file: &File) -> Result<Group, Error> {
    if file.link_exists(OWN_GROUP) {
        ctx.h5(OWN_GROUP, file.group(OWN_GROUP))
    } else {
        ctx.group(file, OWN_GROUP)
    }
}

/// Writes the open calls and the edges `data` has, if any; `below`: a dump's left-out calls
/// counted under their parents.
pub(super) fn write_edges(
    ctx: &Ctx<'_>,
    file: &File,
    data: &PhaseData,
    below: Option<&BelowByParent>,
) -> Result<(), Error> {
    if let Some(open) = &data.extra.open_calls {
        write_open_calls(ctx, &own_group(ctx, file)?, open)?;
    }
    if let Some(w) = &data.extra.flight {
        let g = write_flight(ctx, &own_group(ctx, file)?, w)?;
        if let Some(b) = below {
            write_below_parents(ctx, &g, data, b)?;
        }
    }
    let Some(sp) = &data.spooled else {
        return Ok(());
    };
    let scan = |f: &mut dyn FnMut(&Edges, &[SpoolRegion])| {
        crate::spool::edges::scan_edges(&sp.files, f).map_err(|source| Error::Io {
            context: "reading this phase's task edges back from the spool".into(),
            path: sp.files.first().cloned().unwrap_or_default(),
            source,
        })
    };
    // First pass: how many of each (the datasets' lengths), and the rare follows_from links
    // with their regions' names.
    let (mut wakes, mut spawns) = (0usize, 0usize);
    let mut follows: Vec<(FollowsRow, String, String)> = Vec::new();
    scan(&mut |e, regions| {
        wakes += e.wakes.len();
        spawns += e.spawns.len();
        let name = |r: u32| {
            regions
                .get(r as usize)
                .map_or_else(String::new, |g| g.name.clone())
        };
        follows
            .extend((e.follows.iter()).map(|f| (*f, name(f.span_region), name(f.follows_region))));
    })?;
    if wakes + spawns + follows.len() == 0 {
        return Ok(());
    }
    let own = own_group(ctx, file)?;
    let wake_cols = columns(ctx, &own, "wakes", WAKE_COLS, wakes)?;
    let spawn_cols = columns(ctx, &own, "spawns", SPAWN_COLS, spawns)?;
    // Second pass: each frame's rows written where they go, one frame in memory.
    if wakes + spawns > 0 {
        let (mut at_w, mut at_s) = (0usize, 0usize);
        let mut failed = None;
        scan(&mut |e, _| {
            if failed.is_some() {
                return;
            }
            let w = (e.wakes.iter()).map(|x| {
                let t = i64::from(x.thread);
                [x.tick_ns, t, or_none(x.waker_task), x.woken_task]
            });
            let s = (e.spawns.iter()).map(|x| {
                let t = i64::from(x.thread);
                [x.tick_ns, t, or_none(x.parent_task), x.child_task]
            });
            failed = put(ctx, &wake_cols, &mut at_w, w)
                .and_then(|()| put(ctx, &spawn_cols, &mut at_s, s))
                .err();
        })?;
        if let Some(e) = failed {
            return Err(e);
        }
    }
    if !follows.is_empty() {
        let g = ctx.h5(
            "scope_profiler_rs/follows_from",
            own.create_group("follows_from"),
        )?;
        let f = &follows[..];
        ctx.column(&g, "tick_ns", f, |x| x.0.tick_ns)?;
        ctx.strings(&g, "span_regions", f.iter().map(|x| x.1.as_str()))?;
        ctx.column(&g, "span_start_ns", f, |x| x.0.span_start_ns)?;
        ctx.strings(&g, "follows_regions", f.iter().map(|x| x.2.as_str()))?;
        ctx.column(&g, "follows_start_ns", f, |x| x.0.follows_start_ns)?;
    }
    Ok(())
}

/// The columns of `/scope_profiler_rs/wakes`.
const WAKE_COLS: [&str; 4] = ["tick_ns", "thread_ids", "waker_task_ids", "woken_task_ids"];
/// The columns of `/scope_profiler_rs/spawns`.
const SPAWN_COLS: [&str; 4] = ["tick_ns", "thread_ids", "parent_task_ids", "child_task_ids"];

/// The i64 columns `names` of group `own/group`, `n` rows each, created empty (none when `n`
/// is 0), with their names for errors.
fn columns(
    ctx: &Ctx<'_>,
    own: &Group,
    group: &str,
    names: [&'static str; 4],
    n: usize,
) -> Result<Vec<(Dataset, String)>, Error> {
    if n == 0 {
        return Ok(Vec::new());
    }
    let path = format!("scope_profiler_rs/{group}");
    let g = ctx.h5(&path, own.create_group(group))?;
    names
        .iter()
        .map(|name| {
            let context = format!("{path}/{name}");
            let ds = ctx.h5(&context, g.new_dataset::<i64>().shape(n).create(*name))?;
            Ok((ds, context))
        })
        .collect()
}

/// Writes `rows` into `cols` from row `*at` on, column by column; moves `*at` past them.
fn put(
    ctx: &Ctx<'_>,
    cols: &[(Dataset, String)],
    at: &mut usize,
    rows: impl ExactSizeIterator<Item = [i64; 4]> + Clone,
) -> Result<(), Error> {
    let n = rows.len();
    if n == 0 {
        return Ok(());
    }
    let mut buf = Vec::with_capacity(n);
    for (k, (ds, context)) in cols.iter().enumerate() {
        buf.clear();
        buf.extend(rows.clone().map(|r| r[k]));
        ctx.h5(context, ds.write_slice(&buf[..], *at..*at + n))?;
    }
    *at += n;
    Ok(())
}

/// `/scope_profiler_rs/flight`: the time a flight-recorder dump covers (attributes
/// `covered_from_ns`, `at_ns`, `window_ns`, and `shrunk_to_ns`, -1 when the disk budget never
/// shrank the window).
fn write_flight(
    ctx: &Ctx<'_>,
    own: &Group,
    w: &crate::data::flight::FlightWindow,
) -> Result<Group, Error> {
    let g = ctx.h5("scope_profiler_rs/flight", own.create_group("flight"))?;
    ctx.attr(&g, "covered_from_ns", &w.covered_from_ns)?;
    ctx.attr(&g, "at_ns", &w.at_ns)?;
    ctx.attr(&g, "window_ns", &w.window_ns)?;
    ctx.attr(&g, "shrunk_to_ns", &w.shrunk_to_ns.unwrap_or(-1))?;
    if w.below.is_empty() {
        return Ok(g);
    }
    ctx.strings(
        &g,
        "below_threshold_regions",
        w.below.iter().map(|(r, _)| r.as_str()),
    )?;
    ctx.column(&g, "below_threshold_calls", &w.below, |(_, n)| {
        i64::try_from(*n).unwrap_or(i64::MAX)
    })?;
    Ok(g)
}

/// The left-out calls per parent (see the module docs): attribute `below_threshold_at_top`
/// and, one row per kept call that enclosed any, `below_threshold_parent_regions` (str),
/// `below_threshold_parent_indices` (i64, the call's index in its region's datasets) and
/// `below_threshold_parent_calls` (i64).
fn write_below_parents(
    ctx: &Ctx<'_>,
    g: &Group,
    data: &PhaseData,
    b: &BelowByParent,
) -> Result<(), Error> {
    let n = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    ctx.attr(g, "below_threshold_at_top", &n(b.top))?;
    let name = |row: u32| {
        data.regions
            .get(row as usize)
            .map_or("", |r| r.name.as_str())
    };
    ctx.strings(
        g,
        "below_threshold_parent_regions",
        b.parents.iter().map(|&(row, _, _)| name(row)),
    )?;
    ctx.column(g, "below_threshold_parent_indices", &b.parents, |p| n(p.1))?;
    ctx.column(g, "below_threshold_parent_calls", &b.parents, |p| n(p.2))
}

/// `/scope_profiler_rs/open_calls` (see the module docs).
fn write_open_calls(ctx: &Ctx<'_>, own: &Group, open: &OpenCalls) -> Result<(), Error> {
    let g = ctx.h5(
        "scope_profiler_rs/open_calls",
        own.create_group("open_calls"),
    )?;
    ctx.attr(&g, "at_ns", &open.at_ns)?;
    ctx.attr(&g, "open", &i64::try_from(open.open).unwrap_or(i64::MAX))?;
    let c = &open.calls[..];
    ctx.strings(&g, "regions", c.iter().map(|x| x.region.as_str()))?;
    ctx.column(&g, "start_ns", c, |x| x.start_ns)?;
    ctx.column(&g, "thread_ids", c, |x| i64::from(x.thread))?;
    ctx.column(&g, "tokio_ids", c, |x| x.tokio_id.map_or(-1, |t| t as i64))?;
    ctx.column(&g, "task_ids", c, |x| or_none(x.task))?;
    ctx.column(&g, "parents", c, |x| x.parent.map_or(-1, i64::from))?;
    ctx.strings(&g, "states", c.iter().map(|x| x.state.name()))
}

#[cfg(test)]
mod tests {
    use crate::data::edges::{Spawn, Wake};
    use crate::data::rows::{Layout, PhaseData, SpooledCalls};
    use crate::output::hdf5::{write_phase, WriteOptions};
    use crate::spool::{Header, SpoolWriter};

    /// Wakes over several spool frames land in the file in order, each frame's rows where
    /// the first pass counted them.
    #[test]
    fn edges_of_several_frames_are_written_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let spool = dir.path().join("s");
        let header = Header {
            timestamp: "t".into(),
            ..Header::default()
        };
        let mut w = SpoolWriter::create(spool.clone(), header, false).unwrap();
        let n = 10_000i64;
        for k in 0..n {
            w.wake(Wake {
                tick_ns: 100 + k,
                thread: (k % 2) as u32,
                waker_task: (k % 3 == 0).then_some(k / 3),
                woken_task: k,
            });
            if k % 1000 == 0 {
                w.spawn(Spawn {
                    tick_ns: k,
                    thread: 0,
                    parent_task: None,
                    child_task: k,
                });
            }
        }
        w.flush(&[], &[]);
        drop(w);
        let data = PhaseData {
            spooled: Some(SpooledCalls {
                files: vec![spool],
                ..Default::default()
            }),
            ..PhaseData::new(Layout::Columnar, Vec::new())
        };
        let out = dir.path().join("e.h5");
        write_phase(&out, &data, &WriteOptions::default()).unwrap();
        let p = crate::read::Profile::open(&out).unwrap();
        let wakes = p.wakes().unwrap();
        assert_eq!(wakes.len(), n as usize);
        for (k, x) in wakes.iter().enumerate() {
            let k = k as i64;
            assert_eq!((x.tick_ns, x.woken_task), (100 + k, k));
            assert_eq!(x.waker_task, (k % 3 == 0).then_some(k / 3));
        }
        let spawns = p.spawns().unwrap();
        assert_eq!(spawns.len(), 10);
        assert_eq!(spawns[9].child_task, 9_000);
        assert!(p.follows_from().unwrap().is_empty());
        assert_eq!(p.open_calls().unwrap(), None);
    }
}

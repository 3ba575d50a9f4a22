//! The `rank0/...` auxiliary groups of a schema-3 file: perf_event totals (§4.1) and LIKWID
//! results (§4.4), written the way the Python package writes them.
//!
//! * `rank0/perf_events/<region>`: attributes `calls` (int64) and `event_names` (1-D vlen
//!   string array), dataset `values` (uint64, one per event, same order). We also store the
//!   region's real name in an attribute `region`, which the Python reader ignores.
//! * `rank0/likwid`: attributes `num_regions` (int64) and every `LIKWID_*` environment
//!   variable (vlen string); `regions/<tag>` per marker region with attributes `tag`,
//!   `group_id`, `group_name`, `source`, `event_names`, `counter_names`, `metric_names` and
//!   datasets `cpus` i64 `(T,)`, `times` f64 `(T,)`, `call_counts` i64 `(T,)`, `events` f64
//!   `(E, T)`, `metrics` f64 `(M, T)`.
//!
//! **Group names.** `/` separates HDF5 path components, so a region name containing `/` would
//! silently create nested groups (the Python perf writer has that bug). Both groups therefore
//! escape names as the Python LIKWID writer does: every `/` becomes `|`. Two names HDF5 cannot
//! hold as a link name are escaped too: `""` becomes `|` and `"."` becomes `|.`. Should two
//! escaped names collide (`a/b` and `a|b`), the later gets ` #2`, ` #3`, ... appended. The
//! Python reader keys perf tables by group name, so `inspect` shows the escaped name; the real
//! name is always in the `region` (perf) or `tag` (LIKWID) attribute.

use std::collections::HashSet;
use std::path::Path;

use ::hdf5::{File, Group};

use crate::data::rows::{LikwidResults, PerfTotals, PhaseData};
use crate::output::hdf5::ctx::Ctx;
use crate::Error;

/// Writes `rank0/perf_events` and `rank0/likwid` when `data` has them (errors name `target`).
pub(crate) fn write_aux(file: &File, target: &Path, data: &PhaseData) -> Result<(), Error> {
    let perf = data.perf.as_ref().filter(|p| !p.regions.is_empty());
    if perf.is_none() && data.likwid.is_none() {
        return Ok(());
    }
    let ctx = Ctx { path: target };
    let rank = rank_group(&ctx, file)?;
    if let Some(p) = perf {
        write_perf(&ctx, &rank, p)?;
    }
    if let Some(l) = &data.likwid {
        write_likwid(&ctx, &rank, l)?;
    }
    Ok(())
}

/// `rank0`, created when the file does not have it yet.
/// Adds the auxiliary groups of `data` to an already published profile (used at shutdown, when
/// a sink's results, such as LIKWID's, only exist after the last file was written).
///
/// `published` is the file's `(device, inode)` as it was published: the path is reopened only
/// while it still names that file (checked before and after HDF5 opens it), so a file swapped
/// in since is never written.
pub(crate) fn append_aux(
    path: &Path,
    published: (u64, u64),
    data: &PhaseData,
) -> Result<(), Error> {
    let ctx = Ctx { path };
    let same = || {
        crate::data::files::identity(path)
            .map(|(dev, ino, file)| file && (dev, ino) == published)
            .unwrap_or(false)
    };
    let swapped = || Error::Io {
        context: "adding results to the published profile".into(),
        path: path.to_path_buf(),
        source: std::io::Error::other("the file was replaced since it was published"),
    };
    if !same() {
        return Err(swapped());
    }
    let file = ctx.h5(
        "the published file (reopening it)",
        File::with_options()
            .with_fapl(|p| p.file_locking(false))
            .open_rw(path),
    )?;
    if !same() {
        return Err(swapped());
    }
    write_aux(&file, path, data)?;
    ctx.h5("the file (closing)", file.close())
}

fn rank_group(ctx: &Ctx<'_>, file: &File) -> Result<Group, Error> {
    if file.link_exists("rank0") {
        ctx.h5("rank0", file.group("rank0"))
    } else {
        ctx.h5("rank0", file.create_group("rank0"))
    }
}

/// Writes `rank/perf_events` (schema spec §4.1).
fn write_perf(ctx: &Ctx<'_>, rank: &Group, perf: &PerfTotals) -> Result<(), Error> {
    let group = ctx.h5("rank0/perf_events", rank.create_group("perf_events"))?;
    let mut used = HashSet::new();
    for region in &perf.regions {
        let name = escape(&region.name, &mut used);
        let g = ctx.h5(
            &format!("rank0/perf_events/{name}"),
            group.create_group(&name),
        )?;
        ctx.attr(&g, "calls", &(region.calls as i64))?;
        ctx.attr_strs(&g, "event_names", &perf.event_names)?;
        ctx.attr_str(&g, "region", &region.name)?;
        ctx.dataset(&g, "values", &region.values, None)?;
    }
    Ok(())
}

/// Writes `rank/likwid` (schema spec §4.4).
fn write_likwid(ctx: &Ctx<'_>, rank: &Group, likwid: &LikwidResults) -> Result<(), Error> {
    let group = ctx.h5("rank0/likwid", rank.create_group("likwid"))?;
    for (key, value) in &likwid.env {
        ctx.attr_str(&group, key, value)?;
    }
    ctx.attr(&group, "num_regions", &(likwid.regions.len() as i64))?;
    let regions = ctx.h5("rank0/likwid/regions", group.create_group("regions"))?;
    let mut used = HashSet::new();
    for r in &likwid.regions {
        let name = escape(&r.tag, &mut used);
        let g = ctx.h5(
            &format!("rank0/likwid/regions/{name}"),
            regions.create_group(&name),
        )?;
        ctx.attr_str(&g, "tag", &r.tag)?;
        ctx.attr(&g, "group_id", &r.group_id)?;
        ctx.attr_str(&g, "group_name", &r.group_name)?;
        ctx.attr_str(&g, "source", &r.source)?;
        ctx.attr_strs(&g, "event_names", &r.event_names)?;
        ctx.attr_strs(&g, "counter_names", &r.counter_names)?;
        ctx.attr_strs(&g, "metric_names", &r.metric_names)?;
        let threads = r.times.len();
        ctx.dataset(&g, "cpus", &r.cpus, None)?;
        ctx.dataset(&g, "times", &r.times, None)?;
        ctx.dataset(&g, "call_counts", &r.call_counts, None)?;
        ctx.matrix(&g, "events", &r.events, threads)?;
        ctx.matrix(&g, "metrics", &r.metrics, threads)?;
    }
    Ok(())
}

/// A unique HDF5 link name for `name` (see the module docs for the escapes).
fn escape(name: &str, used: &mut HashSet<String>) -> String {
    let base = match name {
        "" => "|".to_owned(),
        "." => "|.".to_owned(),
        _ => name.replace('/', "|"),
    };
    let mut candidate = base.clone();
    let mut n = 1;
    while !used.insert(candidate.clone()) {
        n += 1;
        candidate = format!("{base} #{n}");
    }
    candidate
}

#[cfg(test)]
pub(crate) mod tests {
    use std::process::Command;

    use ::hdf5::types::VarLenUnicode;

    use tracing_subscriber::prelude::*;

    use super::*;
    use crate::data::rows::LikwidRegion;

    #[test]
    fn escapes_separators_dots_and_collisions() {
        let mut used = HashSet::new();
        assert_eq!(escape("a/b", &mut used), "a|b");
        assert_eq!(escape("a|b", &mut used), "a|b #2");
        assert_eq!(escape("", &mut used), "|");
        assert_eq!(escape(".", &mut used), "|.");
        assert_eq!(escape("..", &mut used), "..");
        assert_eq!(escape("plain", &mut used), "plain");
    }

    use crate::testing::{output_isolated, venv};

    fn likwid_region(tag: &str, threads: usize, metrics: usize) -> LikwidRegion {
        let per_thread = |base: f64| (0..threads).map(|t| base + t as f64).collect::<Vec<_>>();
        LikwidRegion {
            tag: tag.to_owned(),
            group_id: 0,
            group_name: "CLOCK".to_owned(),
            source: "marker_file".to_owned(),
            event_names: vec!["INSTR_RETIRED_ANY".into(), "CPU_CLK_UNHALTED_CORE".into()],
            counter_names: vec!["FIXC0".into(), "FIXC1".into()],
            metric_names: (0..metrics).map(|m| format!("METRIC_{m}")).collect(),
            cpus: (0..threads as i64).collect(),
            times: per_thread(0.5),
            call_counts: vec![3; threads],
            events: vec![per_thread(1234.0), per_thread(98765.0)],
            metrics: (0..metrics)
                .map(|m| per_thread(0.25 * (m + 1) as f64))
                .collect(),
        }
    }

    /// A LIKWID group added to a real profile is read back by the Python reader, whose
    /// `inspect` prints its tables.
    #[test]
    fn likwid_results_are_read_by_the_python_reader() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("likwid.h5");
        let (layer, guard) = crate::ScopeLayer::builder()
            .output(&path)
            .summary(false)
            .build()
            .unwrap();
        let d = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
        tracing::dispatcher::with_default(&d, || tracing::info_span!("outer").in_scope(|| ()));
        guard.finalize().unwrap();

        let results = LikwidResults {
            env: vec![
                ("LIKWID_EVENTS".into(), "CLOCK".into()),
                ("LIKWID_MODE".into(), "1".into()),
            ],
            regions: vec![likwid_region("outer", 2, 1), likwid_region("io/read", 1, 0)],
        };
        {
            let file = File::open_rw(&path).unwrap();
            let ctx = Ctx { path: &path };
            let rank = rank_group(&ctx, &file).unwrap();
            write_likwid(&ctx, &rank, &results).unwrap();
            let g = file.group("rank0/likwid/regions/io|read").unwrap();
            let tag: VarLenUnicode = g.attr("tag").unwrap().read_scalar().unwrap();
            assert_eq!(tag.as_str(), "io/read");
            assert_eq!(g.dataset("events").unwrap().shape(), vec![2, 1]);
            assert_eq!(g.dataset("metrics").unwrap().shape(), vec![0, 1]);
            let n: i64 = file
                .group("rank0/likwid")
                .unwrap()
                .attr("num_regions")
                .unwrap()
                .read_scalar()
                .unwrap();
            assert_eq!(n, 2);
        }

        let out = output_isolated(
            Command::new(venv().join("bin").join("scope-profiler"))
                .args(["inspect", path.to_str().unwrap()])
                .env("NO_COLOR", "1")
                .env("COLUMNS", "200"),
        );
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "inspect failed:\n{text}");
        let tables = text
            .split("LIKWID counters (rank 0, group CLOCK)")
            .nth(1)
            .unwrap_or_else(|| panic!("no LIKWID table:\n{text}"));
        for want in [
            "outer@cpu0",
            "outer@cpu1",
            "io/read",
            "INSTR_RETIRED_ANY",
            "CPU_CLK_UNHALTED_CORE",
            "1234",
            "1235",
            "98765",
            "METRIC_0",
            "0.25",
        ] {
            assert!(tables.contains(want), "{want} missing:\n{tables}");
        }
    }
}

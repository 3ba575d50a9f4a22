//! The writer's share of line timing and self-measurement: `rank0/line_profile/<i>` (schema
//! spec §4.5, as the reference's line profiler writes it) and the overhead keys of `metadata`.
//!
//! A line profile group has the attributes `region`, `filename`, `function` (the region name:
//! a span has no function name of its own), `first_lineno` (the region's line), `unit` = 1e-9
//! (times are ns) and, when the source was captured, `source` + `source_first_lineno`; and the
//! datasets `line_numbers` (int64), `hits` (int64) and `times` (float64), one element per line.

use ::hdf5::{File, Group};

use super::ctx::Ctx;
use crate::data::rows::PhaseExtra;
use crate::Error;

/// Writes `rank0/line_profile` when the phase has line profiles.
pub(crate) fn write_lines(ctx: &Ctx<'_>, file: &File, extra: &PhaseExtra) -> Result<(), Error> {
    if extra.line_profiles.is_empty() {
        return Ok(());
    }
    let rank = if file.link_exists("rank0") {
        ctx.h5("rank0", file.group("rank0"))?
    } else {
        ctx.h5("rank0", file.create_group("rank0"))?
    };
    let group = ctx.h5("rank0/line_profile", rank.create_group("line_profile"))?;
    for (i, p) in extra.line_profiles.iter().enumerate() {
        let g: Group = ctx.h5(
            &format!("rank0/line_profile/{i}"),
            group.create_group(&i.to_string()),
        )?;
        ctx.attr_str(&g, "region", &p.region)?;
        ctx.attr_str(&g, "filename", &p.filename)?;
        ctx.attr_str(&g, "function", &p.region)?;
        ctx.attr(&g, "first_lineno", &p.first_lineno)?;
        ctx.attr(&g, "unit", &1e-9f64)?;
        if let Some((text, first)) = &p.source {
            ctx.attr_str(&g, "source", text)?;
            ctx.attr(&g, "source_first_lineno", first)?;
        }
        ctx.dataset(&g, "line_numbers", &p.line_numbers, None)?;
        ctx.dataset(&g, "hits", &p.hits, None)?;
        ctx.dataset(&g, "times", &p.times, None)?;
    }
    Ok(())
}

/// `metadata` keys of the profiler's own cost (measured at `build()`).
pub(super) fn write_overhead(ctx: &Ctx<'_>, meta: &Group, extra: &PhaseExtra) -> Result<(), Error> {
    let Some(o) = &extra.overhead else {
        return Ok(());
    };
    ctx.attr(meta, "overhead_ns_per_call", &o.ns_per_call)?;
    ctx.attr(meta, "overhead_ns_per_poll", &o.ns_per_poll)?;
    ctx.attr(meta, "clock_resolution_ns", &o.clock_resolution_ns)?;
    ctx.attr_str(meta, "clock_source", &o.clock_source)?;
    ctx.attr(
        meta,
        "overhead_compensated",
        &i64::from(extra.child_overhead_ns > 0),
    )
}

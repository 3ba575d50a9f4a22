//! The `rank0/...` auxiliary groups of a schema-3 file: perf_event totals (§4.1) and LIKWID
//! results (§4.4).

use std::path::Path;

use crate::output::model::PhaseData;
use crate::Error;

/// Writes `rank0/perf_events` and `rank0/likwid` when `data` has them (errors name `target`).
pub(crate) fn write_aux(file: &::hdf5::File, target: &Path, data: &PhaseData) -> Result<(), Error> {
    let _ = (file, target);
    if data.perf.is_none() && data.likwid.is_none() {
        return Ok(());
    }
    Err(Error::Sink {
        sink: "hdf5",
        message: "perf/LIKWID groups are not written yet".into(),
    })
}

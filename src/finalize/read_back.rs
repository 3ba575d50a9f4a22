//! Step 3 of a finalize: what the spool holds, read back in two passes on two threads, with
//! the file begun meanwhile (see [`read_back`]).

use std::path::Path;

use super::pipeline::Trigger;
use crate::data::rows::{Layout, PhaseData, PollRecord, TaskRow};
use crate::data::scan::Scan;
use crate::finalize::scan::scan as first_pass;
use crate::output::hdf5::lanes::Lanes;
use crate::output::hdf5::staged::Staged;
use crate::recording::shared::Shared;
use crate::spool::LaneFollower;
use crate::Error;

/// A phase's task rows (in index order) and polls.
type LaneRows = (Vec<TaskRow>, Vec<PollRecord>);

/// What [`read_back`] gives.
pub(super) struct ReadBack {
    /// The calls' first pass.
    pub(super) scan: Result<Scan, Error>,
    /// Every task row and poll of the phase (those held in memory and those in the spool),
    /// when the spool has lanes (`None`: the phase's own are all there is).
    pub(super) lanes: Option<Result<LaneRows, Error>>,
    /// The file, begun with the lane tables.
    pub(super) staged: Option<Staged>,
}

/// Step 3: what the spool holds, read back in two passes on two threads: the calls (counts,
/// summaries, nesting; [`nest`]) on a helper thread; on this one the lanes (task rows and
/// polls, with `track_async`), which it then writes into the file begun at `stage_at`
/// ([`Staged`]). In a task-per-request phase the lanes are as many as the calls and most of
/// the file's HDF5 time; on a second core they then cost little more than the calls do.
/// `follower` has read the lanes written before the snapshot; call ids start at `first_id`.
pub(super) fn read_back(
    shared: &Shared,
    (first_id, trigger): (i64, Trigger),
    data: &PhaseData,
    follower: Option<LaneFollower>,
    stage_at: Option<&Path>,
) -> ReadBack {
    if !(data.track_async && data.spooled.is_some()) {
        return ReadBack {
            scan: nest(shared, first_id, trigger, data),
            lanes: None,
            staged: None,
        };
    }
    std::thread::scope(|s| {
        let calls = std::thread::Builder::new()
            .name("scope-profiler-finalize".into())
            .spawn_scoped(s, || nest(shared, first_id, trigger, data));
        let lanes = data.read_lanes(follower);
        // A file that cannot be begun here is written whole at publish, which reports why.
        let staged = match (&lanes, stage_at) {
            (Ok((tasks, polls)), Some(at)) if data.layout == Layout::Columnar => {
                Staged::begin(at, data, Lanes { tasks, polls }).ok()
            }
            _ => None,
        };
        let scan = match calls {
            Ok(h) => h
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            // No second thread: one after the other.
            Err(_) => nest(shared, first_id, trigger, data),
        };
        ReadBack {
            scan,
            lanes: Some(lanes),
            staged,
        }
    })
}

/// The first pass over the calls, nesting them when the file or the summary wants it (call ids
/// from `first_id` on).
fn nest(shared: &Shared, first_id: i64, trigger: Trigger, data: &PhaseData) -> Result<Scan, Error> {
    if data.layout != Layout::Columnar {
        return Ok(Scan::default());
    }
    let config = &shared.config;
    // Nesting feeds the call ids (written with track_threads), the exclusive totals and the
    // summary's tree; skip it when none of them is wanted.
    let want = config.track_threads || config.summary;
    // The tree is for the printed summary, which automatic rotations do not print.
    let tree = config.summary && trigger != Trigger::Rotation;
    first_pass(data, want.then_some((first_id, tree)))
}

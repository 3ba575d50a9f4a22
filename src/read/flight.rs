//! What a flight-recorder dump says about itself (`/scope_profiler_rs/flight`, see
//! docs/production.md): the time it covers, and the calls `Builder::flight_min_duration` left
//! out, per region and per parent call.

use super::columns::H5;
use super::{Profile, ReadError};

/// The flight recorder's record of a dump (`/scope_profiler_rs/flight`): the time it covers
/// and what its threshold left out. Times are the profiler clock's nanoseconds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FlightInfo {
    /// Every call that ended after this is in the dump, whole.
    pub covered_from_ns: i64,
    /// When the dump was asked for.
    pub at_ns: i64,
    /// The window asked for (`Builder::flight_recorder`).
    pub window_ns: i64,
    /// The narrowest window the disk budget left (`None`: it never cut the window).
    pub shrunk_to_ns: Option<i64>,
    /// Calls per region left out for being shorter than the threshold (regions with any).
    pub below_threshold: Vec<(String, u64)>,
    /// The same calls, each counted under the innermost kept call of its lane that was open
    /// at its start (the parent the file's nesting gives it); one entry per kept call that
    /// enclosed any. Empty without a threshold, or when the dump's calls could not be nested.
    pub below_by_parent: Vec<BelowParent>,
    /// Left-out calls no kept call of their lane enclosed (`None`: not counted per parent).
    pub below_at_top: Option<u64>,
}

/// A kept call of a dump and how many calls shorter than the threshold it enclosed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct BelowParent {
    /// Its region.
    pub region: String,
    /// Its index in its region's datasets (`events/<region>/...`, as
    /// [`Profile::for_each_call`] hands them out).
    pub index: u64,
    /// Calls it enclosed that the threshold left out.
    pub calls: u64,
}

impl Profile {
    /// What a flight-recorder dump records about itself (`None` in any other file).
    ///
    /// ```no_run
    /// let dump = scope_profiler::read::Profile::open("dump.h5")?;
    /// if let Some(f) = dump.flight()? {
    ///     for p in &f.below_by_parent {
    ///         println!("{} call #{} enclosed {} short calls", p.region, p.index, p.calls);
    ///     }
    /// }
    /// # Ok::<(), scope_profiler::read::ReadError>(())
    /// ```
    ///
    /// # Errors
    /// The group is there but malformed (a column missing or of another length, a negative
    /// count or index).
    pub fn flight(&self) -> Result<Option<FlightInfo>, ReadError> {
        self.with_h5(|h5| {
            const G: &str = "scope_profiler_rs/flight";
            if !h5.exists(G) {
                return Ok(None);
            }
            let count = |v: i64, what: &str| {
                u64::try_from(v).map_err(|_| (h5.err)(format!("{G}: {what} {v} is negative")))
            };
            let mut info = FlightInfo {
                covered_from_ns: h5.int_attr(G, "covered_from_ns").unwrap_or(0),
                at_ns: h5.int_attr(G, "at_ns").unwrap_or(0),
                window_ns: h5.int_attr(G, "window_ns").unwrap_or(0),
                shrunk_to_ns: h5.int_attr(G, "shrunk_to_ns").filter(|&s| s >= 0),
                ..FlightInfo::default()
            };
            if let Some(n) = table_len(h5, G, "below_threshold_calls")? {
                let names = h5.strings(&format!("{G}/below_threshold_regions"), Some(n))?;
                let calls: Vec<i64> = h5.ints(&format!("{G}/below_threshold_calls"), Some(n))?;
                for (name, c) in names.into_iter().zip(calls) {
                    info.below_threshold.push((name, count(c, "a count")?));
                }
            }
            if let Some(n) = table_len(h5, G, "below_threshold_parent_calls")? {
                let names = h5.strings(&format!("{G}/below_threshold_parent_regions"), Some(n))?;
                let index: Vec<i64> =
                    h5.ints(&format!("{G}/below_threshold_parent_indices"), Some(n))?;
                let calls: Vec<i64> =
                    h5.ints(&format!("{G}/below_threshold_parent_calls"), Some(n))?;
                for ((region, i), c) in names.into_iter().zip(index).zip(calls) {
                    info.below_by_parent.push(BelowParent {
                        region,
                        index: count(i, "an index")?,
                        calls: count(c, "a count")?,
                    });
                }
                let top = h5.int_attr(G, "below_threshold_at_top").unwrap_or(0);
                info.below_at_top = Some(count(top, "a count")?);
            }
            Ok(Some(info))
        })
    }
}

/// The length of dataset `group/name`, when it is there.
fn table_len(h5: &H5<'_>, group: &str, name: &str) -> Result<Option<u64>, ReadError> {
    let path = format!("{group}/{name}");
    if !h5.exists(&path) {
        return Ok(None);
    }
    Ok(Some(h5.dataset(&path)?.1))
}

//! What a flight-recorder dump covers (`Builder::flight_recorder`): stored in the dump under
//! `/scope_profiler_rs/flight` and given by [`Report::window_ns`](crate::Report::window_ns).

/// The time a dump covers, in the profiler clock's nanoseconds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct FlightWindow {
    /// The start of the time covered: every call that ended after it is in the dump (whole,
    /// with its start, even when that is earlier).
    pub covered_from_ns: i64,
    /// When the dump was asked for.
    pub at_ns: i64,
    /// The window asked for (`Builder::flight_recorder`).
    pub window_ns: i64,
    /// The narrowest window the disk budget left since recording began (`None`: the budget
    /// never cut it).
    pub shrunk_to_ns: Option<i64>,
    /// Calls per region left out for being shorter than `Builder::flight_min_duration`
    /// (regions with any, by name).
    pub below: Vec<(String, u64)>,
}

impl FlightWindow {
    /// The time covered, ns.
    pub(crate) fn covered_ns(&self) -> i64 {
        (self.at_ns - self.covered_from_ns).max(0)
    }
}

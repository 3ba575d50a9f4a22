//! A region's line-timing profile: time between checkpoints (`tracing` events inside
//! its spans), as the file's `line_profile` group holds it.

/// One function's line profile, as written to `rank0/line_profile/<i>`.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct LineProfile {
    /// Region name (also the `function` attribute).
    pub region: String,
    /// Source file as recorded.
    pub filename: String,
    /// The region's own line.
    pub first_lineno: i64,
    /// Line numbers, ascending.
    pub line_numbers: Vec<i64>,
    /// Hits per line.
    pub hits: Vec<i64>,
    /// Time per line, ns.
    pub times: Vec<f64>,
    /// The captured source and its first line number, when found.
    pub source: Option<(String, i64)>,
}

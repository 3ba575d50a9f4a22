//! The likwid sink (PLACEHOLDER: being written; helper, replace this whole file).

use tracing_core::Metadata;

use crate::state::Config;
use crate::Error;

/// Placeholder.
pub(crate) struct LikwidSink;

impl LikwidSink {
    /// Placeholder: refuses to build.
    pub(crate) fn new(_config: &Config) -> Result<Self, Error> {
        Err(Error::Sink {
            sink: "likwid",
            message: "not implemented yet".into(),
        })
    }
}

impl super::Sink for LikwidSink {
    fn enter(&self, _id: u64, _meta: &'static Metadata<'static>) {}
    fn exit(&self, _id: u64, _meta: &'static Metadata<'static>, _emit: &mut dyn FnMut(u64)) {}
}

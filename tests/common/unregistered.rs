//! A span callsite `tracing` never registered with anyone: what a span looks like to the
//! profiler when `new_span` comes before `register_callsite` (another thread is still
//! registering the callsite). Included by path by the suites of both front ends.

/// The callsite of [`UNREGISTERED`].
pub(crate) struct Unregistered;

impl tracing_core::Callsite for Unregistered {
    fn set_interest(&self, _: tracing_core::Interest) {}
    fn metadata(&self) -> &tracing_core::Metadata<'_> {
        &UNREGISTERED
    }
}

static UNREGISTERED_CS: Unregistered = Unregistered;

/// A span callsite named `registered_late`, registered with nobody.
pub(crate) static UNREGISTERED: tracing_core::Metadata<'static> = tracing_core::metadata! {
    name: "registered_late",
    target: "unregistered_test",
    level: tracing_core::Level::INFO,
    fields: &[],
    callsite: &UNREGISTERED_CS,
    kind: tracing_core::Kind::SPAN,
};

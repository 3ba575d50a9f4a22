//! The futures of the async cost shapes, shared by `benches/cost.rs` and
//! `examples/shape_instructions.rs` (included by path: `#[path = ...] mod futures;`).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A future that is pending `n` times (waking itself) before it completes: n + 1 polls.
pub(crate) struct YieldN(pub(crate) u32);

impl Future for YieldN {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 == 0 {
            return Poll::Ready(());
        }
        self.0 -= 1;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// The `async3` shape: an `#[instrument]`ed async fn polled three times.
#[tracing::instrument(name = "cost_async3", skip_all)]
pub(crate) async fn async3() {
    YieldN(2).await;
}

/// The `request` shape's handler: a spawned task's `#[instrument]`ed handler of two polls with
/// one child span.
#[tracing::instrument(name = "cost_request", skip_all)]
pub(crate) async fn request(i: u64) -> u64 {
    YieldN(1).await;
    tracing::info_span!("cost_parse").in_scope(|| std::hint::black_box(i.wrapping_mul(31)))
}

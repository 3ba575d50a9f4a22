//! The program of `docs/latency.md`: a small service on two Tokio workers whose requests wait
//! for "I/O" (a timer) and compute a little, beside a task that makes a blocking call on a
//! worker now and then. Writes `latency.h5` (or the path given) and prints the summary.
//!
//! ```text
//! scripts/tokio-unstable-tests.sh run --example latency -- /tmp/latency.h5
//! scopeprof inspect /tmp/latency.h5
//! scopeprof export --format perfetto /tmp/latency.h5 -o /tmp/latency.pftrace
//! ```

use std::time::Duration;

use scope_profiler::ScopeLayer;
use scope_profiler_tokio_unstable_tests::{require_tokio_unstable, spin};
use tracing_subscriber::prelude::*;

/// One request: wait for the "database", then render.
#[tracing::instrument]
async fn handle(id: u32) -> u32 {
    tokio::time::sleep(Duration::from_millis(5)).await; // the database
    tracing::info_span!("render").in_scope(|| spin(Duration::from_micros(200)));
    id
}

/// A blocking call on a worker (a synchronous hash, a file read...): 20 ms every 50 ms.
async fn reindex() {
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(30)).await;
        tracing::info_span!("reindex_blocking").in_scope(|| spin(Duration::from_millis(20)));
    }
}

fn main() {
    require_tokio_unstable();
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "latency.h5".to_owned());
    let (layer, guard) = ScopeLayer::builder()
        .output(&path)
        .track_async(true)
        .label("latency example")
        .build()
        .expect("build");
    tracing_subscriber::registry().with(layer).init();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let indexer = tokio::task::Builder::new()
            .name("indexer")
            .spawn(reindex())
            .unwrap();
        let mut requests = Vec::new();
        for id in 0..80 {
            requests.push(tokio::spawn(handle(id)));
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        for r in requests {
            r.await.unwrap();
        }
        indexer.await.unwrap();
    });
    drop(rt);
    guard.finalize().expect("finalize");
}

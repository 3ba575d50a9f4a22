//! The program of `docs/latency.md`: a small service on one Tokio worker whose requests wait
//! for a "database" (a thread of its own that answers every query 5 ms after it), beside a task
//! that makes a blocking call on the worker now and then (a 20 ms "reindex"). Writes
//! `latency.h5` (or the path given) and prints the summary.
//!
//! ```text
//! scripts/tokio-unstable-tests.sh run --release --example latency -- /tmp/latency.h5
//! scopeprof inspect /tmp/latency.h5
//! scopeprof export --format perfetto /tmp/latency.h5 -o /tmp/latency.pftrace
//! ```

use std::collections::VecDeque;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use scope_profiler::ScopeLayer;
use scope_profiler_tokio_unstable_tests::{require_tokio_unstable, spin};
use tokio::sync::oneshot;
use tracing_subscriber::prelude::*;

/// A query to the database: it answers on the channel after 5 ms.
type Query = oneshot::Sender<u32>;

/// The database: one thread answering each query 5 ms after it came (queries overlap).
fn database() -> mpsc::Sender<Query> {
    const LATENCY: Duration = Duration::from_millis(5);
    let (tx, rx) = mpsc::channel::<Query>();
    std::thread::Builder::new()
        .name("database".into())
        .spawn(move || {
            let mut waiting: VecDeque<(Instant, Query)> = VecDeque::new();
            let mut n = 0;
            loop {
                let next = match waiting.front() {
                    Some(&(due, _)) => {
                        rx.recv_timeout(due.saturating_duration_since(Instant::now()))
                    }
                    None => rx.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected),
                };
                match next {
                    Ok(reply) => waiting.push_back((Instant::now() + LATENCY, reply)),
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        let (_, reply) = waiting.pop_front().expect("a query is due");
                        let _ = reply.send(n);
                        n += 1;
                    }
                    Err(mpsc::RecvTimeoutError::Disconnected) => return,
                }
            }
        })
        .expect("database thread");
    tx
}

/// One request: ask the database, then render the answer.
#[tracing::instrument(skip(db))]
async fn handle(id: u32, db: mpsc::Sender<Query>) -> u32 {
    let (tx, rx) = oneshot::channel();
    db.send(tx).expect("database");
    let row = rx.await.expect("answer");
    tracing::info_span!("render").in_scope(|| spin(Duration::from_micros(200)));
    row
}

/// A blocking call on the worker (a synchronous hash, a file read...): 20 ms every 50 ms.
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
    let db = database();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let indexer = tokio::task::Builder::new()
            .name("indexer")
            .spawn(reindex())
            .expect("spawn");
        let mut requests = Vec::new();
        for id in 0..80 {
            requests.push(tokio::spawn(handle(id, db.clone())));
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        for r in requests {
            r.await.expect("request");
        }
        indexer.await.expect("indexer");
    });
    drop(rt);
    guard.finalize().expect("finalize");
}

//! Runs one cost shape for counting instructions with callgrind: where each nanosecond of a
//! span, a poll or an async call goes, on the recording thread and in the flusher, in figures
//! that do not depend on what else the machine is doing.
//!
//! ```text
//! scripts/shape-instructions.sh            # every shape, both front ends, a table
//! cargo run --release --example shape_instructions -- subscriber poll 200000
//! ```
//!
//! Arguments: the front end (`layer`, `subscriber`, `noop`: the registry with one empty
//! layer, the baseline), the shape (`span`, `poll`, `async3`, `request`, as in `benches/cost.rs`), the
//! number of operations, and optionally `async` (`track_async(true)`). Default settings
//! otherwise: an output file in a temporary directory, the flusher beside the program. The run
//! ends with `FlushGuard::sync`, so the flusher has drained, folded and spooled every record;
//! the file is not written (finalize is not part of the per-operation cost). The script runs
//! each configuration at two sizes under `valgrind --tool=callgrind --separate-threads=yes`
//! and divides the difference by the difference of the sizes, so fixed costs cancel.

use tracing::{info_span, Dispatch, Subscriber};
use tracing_subscriber::prelude::*;

/// A layer that does nothing: with the registry, the baseline.
struct Noop;
impl<S: Subscriber> tracing_subscriber::Layer<S> for Noop {}

#[path = "../benches/common/futures.rs"]
mod futures;
use futures::{async3, request};

fn run(shape: &str, dispatch: &Dispatch, ops: u64) {
    tracing::dispatcher::with_default(dispatch, || match shape {
        "span" => {
            for _ in 0..ops {
                info_span!("cost_span").in_scope(|| std::hint::black_box(()));
            }
        }
        "poll" => {
            let span = info_span!("cost_poll");
            for _ in 0..ops {
                let _e = span.enter();
                std::hint::black_box(());
            }
        }
        "async3" => {
            let rt = tokio::runtime::Builder::new_current_thread()
                .build()
                .expect("runtime");
            rt.block_on(async {
                tokio::spawn(async move {
                    for _ in 0..ops {
                        async3().await;
                    }
                })
                .await
                .expect("the loop task")
            });
        }
        "request" => {
            let d = dispatch.clone();
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .on_thread_start(move || {
                    std::mem::forget(tracing::dispatcher::set_default(&d));
                })
                .build()
                .expect("runtime");
            rt.block_on(async {
                // A bounded window of requests in flight, as `benches/cost.rs` has.
                let mut handles = std::collections::VecDeque::new();
                for i in 0..ops {
                    if handles.len() >= 256 {
                        let h: tokio::task::JoinHandle<u64> = handles.pop_front().expect("one");
                        std::hint::black_box(h.await.expect("request"));
                    }
                    handles.push_back(tokio::spawn(request(i)));
                }
                for h in handles {
                    std::hint::black_box(h.await.expect("request"));
                }
            });
        }
        other => panic!("unknown shape {other}: span, poll, async3 or request"),
    });
}

fn main() -> Result<(), scope_profiler::Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [front, shape, ops, rest @ ..] = args.as_slice() else {
        eprintln!(
            "usage: shape_instructions layer|subscriber|noop span|poll|async3|request OPS [async] \\
             [aggregate|flight10us]"
        );
        std::process::exit(2);
    };
    let ops: u64 = ops.parse().expect("OPS: a number");
    let track_async = rest.iter().any(|a| a == "async");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut builder = scope_profiler::ScopeLayer::builder()
        .output(dir.path().join("shape.h5"))
        .summary(false)
        .track_async(track_async);
    // `aggregate`: Mode::Aggregate; `flight10us`: the flight recorder with a 10 µs threshold,
    // which leaves out every call of these shapes.
    if rest.iter().any(|a| a == "aggregate") {
        builder = builder.mode(scope_profiler::Mode::Aggregate);
    }
    if rest.iter().any(|a| a == "flight10us") {
        builder = builder
            .flight_recorder(std::time::Duration::from_secs(60))
            .flight_min_duration(std::time::Duration::from_micros(10));
    }
    let (dispatch, guard) = match front.as_str() {
        "layer" => {
            let (layer, guard) = builder.build()?;
            let d = Dispatch::new(tracing_subscriber::registry().with(layer));
            (d, Some(guard))
        }
        "subscriber" => {
            let (sub, guard) = builder.build_subscriber()?;
            (Dispatch::new(sub), Some(guard))
        }
        "noop" => (
            Dispatch::new(tracing_subscriber::registry().with(Noop)),
            None,
        ),
        other => panic!("unknown front end {other}: layer, subscriber or noop"),
    };
    run(shape, &dispatch, ops);
    if let Some(g) = &guard {
        g.sync()?;
    }
    // No finalize: the spool stays in the temporary directory, which goes with the process.
    std::process::exit(0);
}

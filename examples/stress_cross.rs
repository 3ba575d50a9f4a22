//! Accounting stress across threads (issue 34 item 1): one thread creates spans and enters
//! them once, three others close them (the span is dropped there), and scoped threads record
//! spans of their own, all lossy with a small buffer budget, so records are lost everywhere.
//! Every span must come back as exactly one of: a call reported, a dropped call, a call still
//! open at the finalize.
//!
//! ```sh
//! cargo run --release --example stress_cross                            # ScopeLayer
//! SCOPE_FRONT_END=subscriber cargo run --release --example stress_cross # ScopeSubscriber
//! cargo run --release --example stress_cross -- 200000                  # spans per creator
//! ```
//! Prints the four counts; exits non-zero when reported + dropped + open != created.

use std::sync::mpsc;

use scope_profiler::{Builder, ScopeLayer};
use tracing_subscriber::prelude::*;

/// Scoped threads started beside the cross-thread pipeline, and spans each records.
const SCOPED: usize = 4;

fn dispatch(
    b: Builder,
) -> Result<(tracing::Dispatch, scope_profiler::FlushGuard), Box<dyn std::error::Error>> {
    if std::env::var("SCOPE_FRONT_END").as_deref() == Ok("subscriber") {
        let (sub, guard) = b.build_subscriber()?;
        return Ok((tracing::Dispatch::new(sub), guard));
    }
    let (layer, guard) = b.build()?;
    Ok((
        tracing::Dispatch::new(tracing_subscriber::registry().with(layer)),
        guard,
    ))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // 600 000 crossing spans + 4 x 45 000 scoped ones = 780 000 by default.
    let cross: u64 = std::env::args().nth(1).map_or(Ok(600_000), |a| a.parse())?;
    let scoped = cross * 3 / 40;
    let dir = tempfile::tempdir()?;
    let builder = ScopeLayer::builder()
        .output(dir.path().join("cross.h5"))
        .summary(false)
        .lossy(true)
        .buffer_budget(1 << 20);
    let (d, guard) = dispatch(builder)?;
    std::thread::scope(|s| {
        let mut senders = Vec::new();
        for _ in 0..3 {
            let (tx, rx) = mpsc::sync_channel::<tracing::Span>(4096);
            senders.push(tx);
            let d = d.clone();
            s.spawn(move || {
                tracing::dispatcher::with_default(&d, || {
                    // Closed here: the span's last handle drops on this thread.
                    for span in rx {
                        drop(span);
                    }
                })
            });
        }
        let dc = d.clone();
        s.spawn(move || {
            tracing::dispatcher::with_default(&dc, || {
                for i in 0..cross {
                    let span = tracing::info_span!("cross");
                    span.in_scope(|| std::hint::black_box(i));
                    if senders[(i % 3) as usize].send(span).is_err() {
                        break;
                    }
                }
            })
        });
        for _ in 0..SCOPED {
            let d = d.clone();
            s.spawn(move || {
                tracing::dispatcher::with_default(&d, || {
                    for i in 0..scoped {
                        let _g = tracing::info_span!("scoped").entered();
                        std::hint::black_box(i);
                    }
                })
            });
        }
    });
    // The scope has returned; the threads' thread-local destructors may still be running.
    let report = guard.finalize()?;
    let created = cross + SCOPED as u64 * scoped;
    let reported: u64 = ["cross", "scoped"]
        .iter()
        .map(|n| report.region(n).map_or(0, |r| r.calls))
        .sum();
    let (dropped, open) = (report.dropped_calls(), report.in_flight());
    let sum = reported + dropped + open;
    println!(
        "created {created}: reported {reported} + dropped {dropped} + open {open} = {sum} ({}); \
         records lost {}, corrupt {}",
        if sum == created { "exact" } else { "NOT EXACT" },
        report.dropped(),
        report.corrupt_records()
    );
    if sum != created {
        return Err(format!("{sum} != {created} spans").into());
    }
    Ok(())
}

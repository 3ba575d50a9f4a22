//! What the live metrics (feature `prometheus`) cost; `scripts/metrics-cost.sh` runs it in
//! both builds, interleaved, and prints the medians.
//!
//! ```text
//! cargo run --release [--features prometheus] --example metrics_cost -- flusher off|on [CALLS]
//! cargo run --release --features prometheus --example metrics_cost -- scrape [REGIONS]
//! ```
//!
//! `flusher`: CALLS calls (default 2 M) of ten regions, nine short ones inside one outer call
//! per ten, recorded with the flusher held (it reads nothing until the finalize, so its CPU
//! time is its work on these calls, not its polling), then finalized; prints the flusher
//! thread's CPU time per call. `off`: metrics off (the only mode without the feature); `on`:
//! the endpoint on a loopback port. The difference of `on` and `off` is the flusher's extra CPU
//! per call; `off` built with and without the feature shows whether compiling it in costs
//! anything.
//!
//! `scrape`: REGIONS regions (default 1 000, at most 1 000) with calls, then the CPU of one
//! render of the text (`metrics_text` right after a finalize, which publishes), and the server
//! side CPU of one HTTP scrape, with a fresh snapshot (rendered for that scrape) and with the
//! text already rendered: process CPU minus the scraping thread's own.

#[cfg(feature = "prometheus")]
use std::io::{Read, Write};
#[cfg(feature = "prometheus")]
use std::time::Duration;

use scope_profiler::{Builder, ScopeLayer};
use tracing::info_span;
use tracing_subscriber::prelude::*;

fn flusher(mode: &str, calls: u64) {
    #[allow(unused_mut)] // without the feature
    let mut builder: Builder = ScopeLayer::builder()
        .no_output()
        .summary(false)
        .buffer_budget(512 << 20)
        .__hold_flusher();
    match mode {
        "off" => {}
        #[cfg(feature = "prometheus")]
        "on" => builder = builder.prometheus("127.0.0.1:0"),
        other => panic!("unknown mode {other} (`on` needs --features prometheus)"),
    }
    let (layer, guard) = builder.build().expect("build");
    let d = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    tracing::dispatcher::with_default(&d, || {
        for _ in 0..calls / 10 {
            let _outer = info_span!("outer").entered();
            info_span!("r1").in_scope(|| ());
            info_span!("r2").in_scope(|| ());
            info_span!("r3").in_scope(|| ());
            info_span!("r4").in_scope(|| ());
            info_span!("r5").in_scope(|| ());
            info_span!("r6").in_scope(|| ());
            info_span!("r7").in_scope(|| ());
            info_span!("r8").in_scope(|| ());
            info_span!("r9").in_scope(|| ());
        }
    });
    let report = guard.finalize().expect("finalize");
    let n: u64 = report.regions().iter().map(|r| r.calls).sum();
    assert_eq!(n, calls / 10 * 10, "calls reported");
    assert_eq!(report.dropped_calls(), 0);
    let per_call = guard.flusher_cpu_ns() as f64 / n as f64;
    let feature = if cfg!(feature = "prometheus") {
        "feature"
    } else {
        "no-feature"
    };
    println!("flusher {mode} {feature}: flusher_ns_per_call={per_call:.2} calls={n}");
}

#[cfg(feature = "prometheus")]
mod scrape {
    use super::*;

    fn cpu_ns(clock: libc::clockid_t) -> i64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes the timespec we pass.
        unsafe { libc::clock_gettime(clock, &mut ts) };
        ts.tv_sec * 1_000_000_000 + ts.tv_nsec
    }

    macro_rules! ones {
        ($a:literal, $b:literal; $($c:literal)*) => {
            [$(|| info_span!(concat!("region_", $a, $b, $c)).in_scope(|| ())),*]
        };
    }
    macro_rules! tens {
        ($a:literal; $($b:literal)*) => { [$(ones!($a, $b; 0 1 2 3 4 5 6 7 8 9)),*] };
    }

    /// Ten regions' callers.
    type Tens = [[fn(); 10]; 10];

    /// 1 000 distinct regions (`region_000` .. `region_999`): one call each per call of `f`.
    fn regions() -> Vec<fn()> {
        let all: [Tens; 10] = [
            tens!(0; 0 1 2 3 4 5 6 7 8 9),
            tens!(1; 0 1 2 3 4 5 6 7 8 9),
            tens!(2; 0 1 2 3 4 5 6 7 8 9),
            tens!(3; 0 1 2 3 4 5 6 7 8 9),
            tens!(4; 0 1 2 3 4 5 6 7 8 9),
            tens!(5; 0 1 2 3 4 5 6 7 8 9),
            tens!(6; 0 1 2 3 4 5 6 7 8 9),
            tens!(7; 0 1 2 3 4 5 6 7 8 9),
            tens!(8; 0 1 2 3 4 5 6 7 8 9),
            tens!(9; 0 1 2 3 4 5 6 7 8 9),
        ];
        all.iter().flatten().flatten().copied().collect()
    }

    /// Server-side CPU of one `GET /metrics` (process CPU minus this thread's), and the bytes.
    fn one_scrape(addr: std::net::SocketAddr) -> (i64, usize) {
        let (p0, t0) = (
            cpu_ns(libc::CLOCK_PROCESS_CPUTIME_ID),
            cpu_ns(libc::CLOCK_THREAD_CPUTIME_ID),
        );
        let mut s = std::net::TcpStream::connect(addr).expect("connect");
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut answer = Vec::with_capacity(8 << 20);
        s.read_to_end(&mut answer).unwrap();
        let (p1, t1) = (
            cpu_ns(libc::CLOCK_PROCESS_CPUTIME_ID),
            cpu_ns(libc::CLOCK_THREAD_CPUTIME_ID),
        );
        assert!(answer.starts_with(b"HTTP/1.1 200 OK"));
        ((p1 - p0) - (t1 - t0), answer.len())
    }

    fn median(mut v: Vec<i64>) -> f64 {
        v.sort_unstable();
        v[v.len() / 2] as f64
    }

    pub(super) fn run(n_regions: usize) {
        let (layer, guard) = ScopeLayer::builder()
            .no_output()
            .summary(false)
            .track_async(true)
            .prometheus("127.0.0.1:0")
            .build()
            .expect("build");
        let d = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
        let fs = regions();
        tracing::dispatcher::with_default(&d, || {
            for _ in 0..10 {
                for f in &fs[..n_regions.min(fs.len())] {
                    f();
                }
            }
        });
        guard.finalize().expect("finalize");
        let addr = guard.metrics_addr().unwrap();
        let (mut render, mut fresh, mut cached) = (Vec::new(), Vec::new(), Vec::new());
        let mut bytes = 0;
        for _ in 0..15 {
            guard.finalize().unwrap(); // a new snapshot
            let t = cpu_ns(libc::CLOCK_THREAD_CPUTIME_ID);
            bytes = guard.metrics_text().unwrap().len();
            render.push(cpu_ns(libc::CLOCK_THREAD_CPUTIME_ID) - t);
            guard.finalize().unwrap();
            fresh.push(one_scrape(addr).0);
            cached.push(one_scrape(addr).0);
            std::thread::sleep(Duration::from_millis(20));
        }
        println!(
            "scrape regions={n_regions}: text_bytes={bytes} render_us={:.0} \
             scrape_fresh_us={:.0} scrape_cached_us={:.0} (medians of 15, CPU time)",
            median(render) / 1e3,
            median(fresh) / 1e3,
            median(cached) / 1e3
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("flusher") => {
            let mode = args.get(1).map_or("off", String::as_str);
            let calls = args.get(2).map_or(2_000_000, |s| s.parse().expect("CALLS"));
            flusher(mode, calls);
        }
        #[cfg(feature = "prometheus")]
        Some("scrape") => scrape::run(args.get(1).map_or(1000, |s| s.parse().expect("REGIONS"))),
        _ => eprintln!("usage: metrics_cost flusher off|on [CALLS] | scrape [REGIONS]"),
    }
}

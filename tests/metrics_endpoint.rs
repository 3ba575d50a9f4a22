//! The live-metrics endpoint (feature `prometheus`) over real loopback sockets: exact counts
//! that survive finalize (from `ScopeLayer` and from `ScopeSubscriber`), the region limit,
//! labels, perf and await series; 100 concurrent scrapes; garbage, oversized and silent
//! clients; idle and slow clients delay neither a scrape nor the guard's drop, and a connection
//! beyond the limit gets 503 at once; no growth of heap, descriptors or threads under repeated
//! load; a failed bind; a disabled profiler binds nothing; a forked child does not keep the port.
//!
//! Tests take one lock: the memory test counts the whole process's live heap bytes.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use common::{dispatch, thread_cpu_ns};
use scope_profiler::{Error, FlushGuard, Mode, ScopeLayer};
use tracing::info_span;

/// Counts live heap bytes of the whole process.
struct Counting;

static LIVE: AtomicI64 = AtomicI64::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new as i64 - layout.size() as i64, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// One HTTP exchange: sends `request`, reads until the server closes; (status code, body).
fn exchange(addr: SocketAddr, request: &[u8]) -> (u16, String) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(request).expect("send");
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).expect("read the answer");
    let answer = String::from_utf8(answer).expect("utf-8 answer");
    let (head, body) = answer.split_once("\r\n\r\n").expect("a head");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"));
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .and_then(|v| v.parse().ok())
        .expect("Content-Length");
    if !head.starts_with("HTTP/1.1 200") || !request.starts_with(b"HEAD") {
        assert_eq!(body.len(), length, "{head}");
    }
    (status, body.to_owned())
}

fn scrape(addr: SocketAddr) -> String {
    let (status, body) = exchange(addr, b"GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(status, 200);
    body
}

/// The value of the sample `series` (name and labels exactly as written) in `text`.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// The calls of `region` in `text` (no other labels).
fn calls_of(text: &str, region: &str) -> Option<f64> {
    sample(
        text,
        &format!("scope_region_calls_total{{region=\"{region}\"}}"),
    )
}

fn endpoint() -> (tracing::Dispatch, FlushGuard, SocketAddr) {
    let (d, guard) = dispatch(ScopeLayer::builder().no_output().prometheus("127.0.0.1:0"));
    let addr = guard.metrics_addr().expect("an endpoint");
    (d, guard, addr)
}

fn calls(d: &tracing::Dispatch, name: &'static str, n: usize) {
    tracing::dispatcher::with_default(d, || {
        for _ in 0..n {
            match name {
                "a" => info_span!("a").in_scope(|| ()),
                "b" => info_span!("b").in_scope(|| ()),
                "c" => info_span!("c").in_scope(|| ()),
                "d" => info_span!("d").in_scope(|| ()),
                _ => info_span!("other").in_scope(|| ()),
            }
        }
    });
}

#[test]
fn counts_are_exact_and_survive_finalize() {
    let _s = serial();
    let (d, guard, addr) = endpoint();
    calls(&d, "a", 3);
    calls(&d, "b", 1);
    let first = guard.finalize().unwrap();
    let text = scrape(addr);
    assert_eq!(calls_of(&text, "a"), Some(3.0));
    assert_eq!(calls_of(&text, "b"), Some(1.0));
    let seconds = sample(&text, r#"scope_region_seconds_total{region="a"}"#).unwrap();
    let total_ns = first.region("a").unwrap().total_ns as f64;
    assert!(
        (seconds * 1e9 - total_ns).abs() <= 1.0,
        "{seconds} s, {total_ns} ns"
    );
    calls(&d, "a", 2);
    let second = guard.finalize().unwrap();
    assert_eq!(second.region("a").unwrap().calls, 2);
    let text = scrape(addr);
    // Since build, across the phases.
    assert_eq!(calls_of(&text, "a"), Some(5.0));
    assert_eq!(
        sample(&text, r#"scope_region_duration_seconds_count{region="a"}"#),
        Some(5.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"scope_region_duration_seconds_bucket{region="a",le="+Inf"}"#
        ),
        Some(5.0)
    );
    assert_eq!(guard.metrics_text().unwrap(), text);
}

#[test]
fn the_subscriber_front_end_serves_the_same_metrics() {
    let _s = serial();
    let (subscriber, guard) = ScopeLayer::builder()
        .no_output()
        .prometheus("127.0.0.1:0")
        .build_subscriber()
        .expect("build_subscriber");
    let addr = guard.metrics_addr().expect("an endpoint");
    let d = tracing::Dispatch::new(subscriber);
    calls(&d, "a", 4);
    calls(&d, "b", 2);
    let report = guard.finalize().unwrap();
    assert_eq!(report.region("a").unwrap().calls, 4);
    let text = scrape(addr);
    assert_eq!(calls_of(&text, "a"), Some(4.0));
    assert_eq!(calls_of(&text, "b"), Some(2.0));
    assert_eq!(guard.metrics_text().unwrap(), text);
}

#[test]
fn regions_beyond_the_limit_are_counted_as_other() {
    let _s = serial();
    let (d, guard) = dispatch(
        ScopeLayer::builder()
            .no_output()
            .metrics(true)
            .metric_region_limit(2)
            .metric_labels([("service", "t\"1\"")]),
    );
    for (name, n) in [("a", 1), ("b", 2), ("c", 3), ("d", 4), ("other", 5)] {
        calls(&d, name, n);
        guard.finalize().unwrap(); // one region at a time: a known order
    }
    assert_eq!(guard.metrics_addr(), None);
    let text = guard.metrics_text().unwrap();
    let l = r#"service="t\"1\"""#;
    assert_eq!(
        sample(
            &text,
            &format!("scope_region_calls_total{{region=\"a\",{l}}}")
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            &format!("scope_region_calls_total{{region=\"b\",{l}}}")
        ),
        Some(2.0)
    );
    assert_eq!(
        sample(
            &text,
            &format!("scope_region_calls_total{{region=\"other\",{l}}}")
        ),
        Some(12.0)
    );
    assert!(!text.contains("region=\"c\""), "{text}");
    assert_eq!(
        sample(&text, &format!("scope_regions_folded{{{l}}}")),
        Some(2.0)
    );
}

#[test]
fn await_and_perf_series() {
    let _s = serial();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("await.h5");
    let (d, guard) = dispatch(
        ScopeLayer::builder()
            .output(&path)
            .metrics(true)
            .track_async(true)
            .perf_events(["task-clock"]),
    );
    let rt = common::runtime(&d, 2);
    tracing::dispatcher::with_default(&d, || {
        rt.block_on(async {
            use tracing::Instrument;
            tokio::spawn(
                async {
                    // 20 ms of this thread's CPU time, then 30 ms suspended.
                    let end = thread_cpu_ns() + 20_000_000;
                    while thread_cpu_ns() < end {
                        std::hint::black_box(0);
                    }
                    tokio::time::sleep(Duration::from_millis(30)).await;
                }
                .instrument(info_span!("job")),
            )
            .await
            .unwrap();
        })
    });
    drop(rt);
    let report = guard.finalize().unwrap();
    assert_eq!(report.region("job").unwrap().calls, 1);
    let text = guard.metrics_text().unwrap();
    // The await time the file holds for that call (a loaded machine can preempt the worker
    // inside a poll, which counts as busy, so 30 ms is not a bound).
    let f = hdf5::File::open(&path).unwrap();
    let row = common::region_rows(&f, "job").start;
    let in_file = common::read::<i64>(&f, "events/await_ns")[row] as f64;
    let awaited = sample(&text, r#"scope_region_await_seconds_total{region="job"}"#).unwrap();
    assert!(in_file > 0.0, "await {in_file} ns in the file");
    assert!(
        (awaited * 1e9 - in_file).abs() <= 1.0,
        "await {awaited} s in the metrics, {in_file} ns in the file\n{text}"
    );
    let cpu_ns = sample(&text, r#"scope_region_perf_task_clock_total{region="job"}"#).unwrap();
    assert!(cpu_ns >= 15e6, "task-clock {cpu_ns} ns\n{text}");
}

#[test]
fn a_hundred_concurrent_scrapes() {
    let _s = serial();
    let (d, guard, addr) = endpoint();
    calls(&d, "a", 10);
    guard.finalize().unwrap();
    let bodies: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..100).map(|_| s.spawn(|| scrape(addr))).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for body in bodies {
        assert_eq!(calls_of(&body, "a"), Some(10.0));
    }
}

/// Requests that must not get the metrics, with the status they get.
const GARBAGE: [(&[u8], u16); 8] = [
    (b"\r\n\r\n", 400),
    (b"hello\n\n", 400),
    (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 400),
    (b"GET /metrics HTTP/2.0\r\n\r\n", 400),
    (b"GET / HTTP/1.1\r\n\r\n", 404),
    (b"GET /../../etc/passwd HTTP/1.1\r\n\r\n", 404),
    (b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n", 405),
    (b"DELETE /metrics HTTP/1.1\r\n\r\n", 405),
];

/// One round of abuse: every garbage request, an oversized head, a client that disconnects
/// mid-request, a HEAD; then the metrics must still be served.
fn abuse(addr: SocketAddr) {
    for (request, status) in GARBAGE {
        assert_eq!(exchange(addr, request).0, status, "{request:?}");
    }
    let mut big = b"GET /metrics HTTP/1.1\r\nX: ".to_vec();
    big.resize(20_000, b'a');
    // The server answers 431 and closes after 8 KiB; the rest of our send may fail.
    let mut s = TcpStream::connect(addr).unwrap();
    let _ = s.write_all(&big);
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer);
    assert!(
        text.is_empty() || text.starts_with("HTTP/1.1 431"),
        "{text}"
    );
    drop(TcpStream::connect(addr).unwrap().write_all(b"GET /met"));
    let (status, body) = exchange(addr, b"HEAD /metrics HTTP/1.1\r\n\r\n");
    assert_eq!((status, body.as_str()), (200, ""));
}

#[test]
fn garbage_and_silent_clients_get_errors_and_others_are_served() {
    let _s = serial();
    let (d, guard, addr) = endpoint();
    calls(&d, "a", 1);
    guard.finalize().unwrap();
    // A client that sends nothing holds one worker until the read time-out.
    let mut silent = TcpStream::connect(addr).unwrap();
    abuse(addr);
    assert!(scrape(addr).contains("scope_region_calls_total{region=\"a\"} 1\n"));
    silent
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut buf = [0u8; 16];
    // The server closes it without an answer (or resets it): no bytes, no hang.
    assert!(matches!(silent.read(&mut buf), Ok(0) | Err(_)));
}

/// Heap bytes, descriptors and threads of this process, once exiting threads are gone (a
/// joined thread may still be counted for a moment while the kernel finishes its exit).
fn footprint() -> (i64, usize, usize) {
    let threads = || common::status_kib("Threads:") as usize;
    let mut fewest = threads();
    for _ in 0..25 {
        std::thread::sleep(Duration::from_millis(20));
        fewest = fewest.min(threads());
    }
    let fds = std::fs::read_dir("/proc/self/fd").unwrap().count();
    (LIVE.load(Ordering::Relaxed), fds, fewest)
}

#[test]
fn repeated_load_grows_nothing() {
    let _s = serial();
    let (d, guard, addr) = endpoint();
    calls(&d, "a", 1);
    guard.finalize().unwrap();
    let round = || {
        std::thread::scope(|s| {
            for _ in 0..100 {
                s.spawn(|| scrape(addr));
            }
            s.spawn(|| abuse(addr));
        });
    };
    round();
    round();
    let before = footprint();
    for _ in 0..8 {
        round();
    }
    let after = footprint();
    eprintln!("heap bytes, descriptors, threads: before {before:?}, after {after:?}");
    // 8 rounds of 100 scrapes and ~12 bad clients: a leak of even 64 bytes per connection
    // would show (~56 KiB).
    assert!(
        after.0 - before.0 < 48 << 10,
        "heap grew by {} bytes",
        after.0 - before.0
    );
    // At most as many: an earlier test's endpoint may still be winding down at `before`.
    assert!(
        after.1 <= before.1,
        "descriptors grew: {before:?} -> {after:?}"
    );
    assert!(after.2 <= before.2, "threads grew: {before:?} -> {after:?}");
}

#[test]
fn a_port_in_use_is_an_error_at_build() {
    let _s = serial();
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let e = ScopeLayer::builder()
        .no_output()
        .prometheus(addr)
        .build()
        .unwrap_err();
    assert!(matches!(e, Error::MetricsEndpoint { .. }), "{e:?}");
    assert!(e.to_string().contains(&addr.to_string()), "{e}");
    let e = ScopeLayer::builder()
        .no_output()
        .prometheus("no-such-host.invalid:9")
        .build()
        .unwrap_err();
    assert!(matches!(e, Error::MetricsEndpoint { .. }), "{e:?}");
}

#[test]
fn disabled_binds_nothing() {
    let _s = serial();
    let free = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let (_layer, guard) = ScopeLayer::builder()
        .mode(Mode::Disabled)
        .prometheus(free)
        .build()
        .unwrap();
    assert_eq!(guard.metrics_addr(), None);
    assert_eq!(guard.metrics_text(), None);
    TcpListener::bind(free).expect("the port stays free");
}

/// The inode of the socket listening on `addr` (IPv4), from `/proc/net/tcp`.
fn listening_inode(addr: SocketAddr) -> String {
    let port = format!(":{:04X}", addr.port());
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    table
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f[1].ends_with(&port) && f[3] == "0A")
        .map(|f| f[9].to_owned())
        .unwrap_or_else(|| panic!("nothing listens on {addr}"))
}

/// Whether process `pid` has a descriptor of socket `inode`.
fn holds_socket(pid: u32, inode: &str) -> bool {
    let target = format!("socket:[{inode}]");
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .any(|l| l.to_string_lossy() == target)
}

#[test]
fn a_forked_child_does_not_keep_the_listener() {
    let _s = serial();
    let (_d, guard, addr) = endpoint();
    let inode = listening_inode(addr);
    assert!(
        holds_socket(std::process::id(), &inode),
        "the parent listens"
    );
    let mut pipe = [0i32; 2];
    // SAFETY: pipe writes two descriptors into the array.
    assert_eq!(unsafe { libc::pipe(pipe.as_mut_ptr()) }, 0);
    // SAFETY: the child makes async-signal-safe calls only (write, sleep, _exit).
    let child = unsafe { libc::fork() };
    assert!(child >= 0, "fork failed");
    if child == 0 {
        // SAFETY: as above; the fork handlers have run when fork returns here.
        unsafe {
            libc::write(pipe[1], b"x".as_ptr().cast(), 1);
            libc::sleep(30);
            libc::_exit(0);
        }
    }
    let mut byte = 0u8;
    // SAFETY: reads one byte into `byte` from our pipe.
    let got = unsafe { libc::read(pipe[0], (&mut byte as *mut u8).cast(), 1) };
    let child_holds = holds_socket(child as u32, &inode);
    // SAFETY: signals and reaps our own child, closes our pipe.
    unsafe {
        libc::kill(child, libc::SIGKILL);
        libc::waitpid(child, std::ptr::null_mut(), 0);
        libc::close(pipe[0]);
        libc::close(pipe[1]);
    }
    assert_eq!(got, 1, "the child did not start");
    assert!(!child_holds, "the forked child holds the metrics listener");
    // The parent still serves, and stops when its guard drops.
    scrape(addr);
    drop(guard);
    assert!(
        TcpStream::connect(addr).is_err(),
        "served after the guard dropped"
    );
}

/// Connects `n` clients that send nothing.
fn idle_clients(addr: SocketAddr, n: usize) -> Vec<TcpStream> {
    (0..n)
        .map(|_| TcpStream::connect(addr).expect("connect"))
        .collect()
}

/// Whether the server closes `s` (end of file or reset) within `limit`.
fn closed_within(s: &mut TcpStream, limit: Duration) -> bool {
    use std::io::ErrorKind::{TimedOut, WouldBlock};
    s.set_read_timeout(Some(limit)).unwrap();
    match s.read(&mut [0u8; 64]) {
        Ok(n) => n == 0,
        Err(e) => !matches!(e.kind(), WouldBlock | TimedOut),
    }
}

#[test]
fn idle_and_slow_clients_delay_neither_a_scrape_nor_the_drop() {
    let _s = serial();
    let (d, guard, addr) = endpoint();
    calls(&d, "a", 3);
    let mut idle = idle_clients(addr, 30);
    // A slow client: one byte of its request every 200 ms, never done within the 5 s limit.
    let slow = std::thread::spawn(move || {
        let mut s = TcpStream::connect(addr).unwrap();
        let start = std::time::Instant::now();
        for b in b"GET /metrics HTTP/1.1\r\nHost: a-very-slow-client\r\n\r\n" {
            if s.write_all(&[*b]).is_err() {
                return Some(start.elapsed());
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        None
    });
    let t = std::time::Instant::now();
    let body = scrape(addr);
    let scrape_time = t.elapsed();
    let seen = calls_of(&body, "a");
    // A live scrape shows the calls final so far (a sync call is final once the watermark
    // has passed its close): any of the three, never more.
    assert!(seen.is_none_or(|c| c <= 3.0), "{seen:?}: {body}");
    // The idle clients still hold their slots; a scrape after the slow one started is served.
    let t = std::time::Instant::now();
    guard.finalize().unwrap();
    let again = scrape(addr);
    assert_eq!(calls_of(&again, "a"), Some(3.0), "{again}");
    eprintln!(
        "30 idle clients: scrape {scrape_time:?}, scrape after finalize {:?}",
        t.elapsed()
    );
    assert!(scrape_time < Duration::from_secs(5), "{scrape_time:?}");
    // Idle clients are closed at the read limit (5 s).
    assert!(
        closed_within(&mut idle[0], Duration::from_secs(20)),
        "an idle client was never closed"
    );
    let cut = slow.join().unwrap();
    assert!(
        cut.is_some_and(|c| c < Duration::from_secs(20)),
        "the slow client was not cut off: {cut:?}"
    );
}

#[test]
fn the_drop_does_not_wait_for_scrapers() {
    let _s = serial();
    let (d, guard, addr) = endpoint();
    calls(&d, "a", 1);
    let _idle = idle_clients(addr, 30);
    // A client that asked and never reads its answer (the kernel buffers take part of it).
    let mut greedy = TcpStream::connect(addr).unwrap();
    greedy.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let t = std::time::Instant::now();
    drop(guard);
    let dropped = t.elapsed();
    eprintln!("drop with 30 idle clients and one that does not read: {dropped:?}");
    assert!(
        dropped < Duration::from_secs(5),
        "the drop took {dropped:?}"
    );
    assert!(
        TcpStream::connect(addr).is_err(),
        "served after the guard dropped"
    );
    drop(d);
}

#[test]
fn a_connection_beyond_the_limit_gets_503_at_once() {
    let _s = serial();
    let (_d, guard, addr) = endpoint();
    // The endpoint serves 256 connections at once (docs/fleet-metrics.md).
    let _idle = idle_clients(addr, 256);
    let t = std::time::Instant::now();
    let (status, body) = exchange(addr, b"GET /metrics HTTP/1.1\r\n\r\n");
    let took = t.elapsed();
    eprintln!("the 257th connection: {status} in {took:?}");
    assert_eq!((status, body.as_str()), (503, "too many connections\n"));
    assert!(took < Duration::from_secs(5), "{took:?}");
    drop(_idle);
    // Once the idle clients are gone, scrapes are served again.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (status, _) = exchange(addr, b"GET /metrics HTTP/1.1\r\n\r\n");
        if status == 200 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "still {status}");
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(guard);
}

#[test]
fn post_dump_writes_a_flight_recorder_dump_only_when_asked_for() {
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let (d, guard) = dispatch(
        ScopeLayer::builder()
            .output(dir.path().join("svc.h5"))
            .flight_recorder(Duration::from_secs(30))
            .prometheus("127.0.0.1:0")
            .metrics_dump(true),
    );
    let addr = guard.metrics_addr().expect("an endpoint");
    calls(&d, "a", 40);
    let (status, body) = exchange(addr, b"POST /dump HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(status, 202, "{body}");
    let path = std::path::PathBuf::from(body.trim());
    assert!(
        path.starts_with(dir.path()) && path.to_string_lossy().contains("svc.dump-http-"),
        "{body}"
    );
    // The answer came before the file: it appears, whole, once written.
    let read = (0..600).find_map(|_| {
        std::thread::sleep(Duration::from_millis(50));
        scope_profiler::read::Profile::open(&path).ok()
    });
    let p = read.expect("the dump appeared within 30 s");
    let a = p
        .region_names()
        .iter()
        .position(|n| n == "a")
        .expect("region a in the dump");
    let n: u64 = p
        .rows()
        .iter()
        .filter(|r| r.region as usize == a)
        .map(|r| r.count)
        .sum();
    assert_eq!(n, 40);
    // GET is not a dump.
    assert_eq!(exchange(addr, b"GET /dump HTTP/1.1\r\n\r\n").0, 404);
    drop(guard);

    // Without `metrics_dump`, POST /dump is not served.
    let (_d, guard) = dispatch(
        ScopeLayer::builder()
            .output(dir.path().join("quiet.h5"))
            .flight_recorder(Duration::from_secs(30))
            .prometheus("127.0.0.1:0"),
    );
    let addr = guard.metrics_addr().expect("an endpoint");
    assert_eq!(exchange(addr, b"POST /dump HTTP/1.1\r\n\r\n").0, 404);
    drop(guard);
    // Without a flight recorder, or without an endpoint, the option is refused.
    for builder in [
        ScopeLayer::builder()
            .prometheus("127.0.0.1:0")
            .metrics_dump(true),
        ScopeLayer::builder()
            .output(dir.path().join("x.h5"))
            .flight_recorder(Duration::from_secs(1))
            .metrics_dump(true),
    ] {
        match common::try_dispatch(builder) {
            Err(Error::InvalidOption { option, .. }) => assert_eq!(option, "metrics_dump"),
            other => panic!("expected InvalidOption, got {:?}", other.err()),
        }
    }
}

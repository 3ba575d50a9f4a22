//! The five programs of the critical-path tests, where the truth is known by construction.
//! Shared by `tests/critical_path.rs` (stable Tokio: no wakes, no spawns in the file) and
//! `crates/tokio-unstable-tests/tests/critical.rs` (Tokio's instrumentation), which include
//! this file with `#[path]`. Each takes the profiled runtime (its worker count is named beside
//! each program) and the profiler's dispatch, for threads it starts. The call to walk is the
//! one call of region `request`.

use std::future::poll_fn;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use tokio::runtime::Runtime;
use tracing::{info_span, Dispatch, Instrument};

/// Spins (holding the thread) for `d`.
pub fn spin(d: Duration) {
    let end = Instant::now() + d;
    while Instant::now() < end {
        std::hint::spin_loop();
    }
}

/// 1 (one worker): `request` spawns `child`, which computes 5 ms in one poll, and awaits its
/// `JoinHandle`.
pub fn join(rt: &Runtime, _: &Dispatch) {
    rt.block_on(async {
        let request = async {
            let child = async { spin(Duration::from_millis(5)) };
            tokio::spawn(child.instrument(info_span!("child")))
                .await
                .unwrap();
        };
        tokio::spawn(request.instrument(info_span!("request")))
            .await
            .unwrap();
    });
}

/// 2 (one worker): `request` sends 100 messages to `echo` over one `mpsc` channel and awaits
/// each answer on another, then closes the first and awaits `echo`'s end.
pub fn ping_pong(rt: &Runtime, _: &Dispatch) {
    rt.block_on(async {
        let request = async {
            let (to_echo, mut from_request) = tokio::sync::mpsc::channel::<u32>(1);
            let (to_request, mut from_echo) = tokio::sync::mpsc::channel::<u32>(1);
            let echo = async move {
                while let Some(x) = from_request.recv().await {
                    to_request.send(x).await.unwrap();
                }
            };
            let echo = tokio::spawn(echo.instrument(info_span!("echo")));
            for i in 0..100 {
                to_echo.send(i).await.unwrap();
                assert_eq!(from_echo.recv().await, Some(i));
            }
            drop(to_echo);
            echo.await.unwrap();
        };
        tokio::spawn(request.instrument(info_span!("request")))
            .await
            .unwrap();
    });
}

/// 3 (two workers): `holder` takes a `tokio::sync::Mutex`, and keeps it (computing, in one
/// poll) until 3 ms after `request` has asked for it.
pub fn mutex(rt: &Runtime, _: &Dispatch) {
    rt.block_on(async {
        let lock = Arc::new(tokio::sync::Mutex::new(()));
        let asked = Arc::new(AtomicBool::new(false));
        let (held_tx, held_rx) = tokio::sync::oneshot::channel();
        let (l, a) = (lock.clone(), asked.clone());
        let holder = async move {
            let guard = l.lock().await;
            held_tx.send(()).unwrap();
            while !a.load(SeqCst) {
                std::hint::spin_loop();
            }
            spin(Duration::from_millis(3));
            drop(guard);
        };
        let holder = tokio::spawn(holder.instrument(info_span!("holder")));
        held_rx.await.unwrap();
        let request = async move {
            asked.store(true, SeqCst);
            let _guard = lock.lock().await;
        };
        tokio::spawn(request.instrument(info_span!("request")))
            .await
            .unwrap();
        holder.await.unwrap();
    });
}

/// 4 (one worker): `request` parks and spawns `hog`, which computes in one poll on the only
/// worker; 0.5 ms into it a thread of the program (reporting to the profiler, no worker) wakes
/// `request`, and `hog` goes on 3 ms after that wake (4 ms in all on an idle machine), while
/// `request` waits for the worker.
pub fn scheduled(rt: &Runtime, dispatch: &Dispatch) {
    let slot: Arc<Mutex<Option<Waker>>> = Arc::default();
    let started = Arc::new(AtomicBool::new(false));
    let woke = Arc::new(AtomicBool::new(false));
    let (s, st, d, wk) = (
        slot.clone(),
        started.clone(),
        dispatch.clone(),
        woke.clone(),
    );
    let waking = std::thread::spawn(move || {
        tracing::dispatcher::with_default(&d, || {
            while !st.load(SeqCst) {
                std::thread::yield_now();
            }
            spin(Duration::from_micros(500));
            let waker = s.lock().unwrap().take().expect("request parked");
            waker.wake();
            wk.store(true, SeqCst);
        })
    });
    rt.block_on(async move {
        let mut first = true;
        let request = poll_fn(move |cx| {
            if !std::mem::take(&mut first) {
                return Poll::Ready(());
            }
            *slot.lock().unwrap() = Some(cx.waker().clone());
            let (st, wk) = (started.clone(), woke.clone());
            let hog = async move {
                st.store(true, SeqCst);
                while !wk.load(SeqCst) {
                    std::hint::spin_loop();
                }
                spin(Duration::from_millis(3));
            };
            tokio::spawn(hog.instrument(info_span!("hog")));
            Poll::Pending
        });
        tokio::spawn(request.instrument(info_span!("request")))
            .await
            .unwrap();
    });
    waking.join().unwrap();
}

/// 5 (one worker): `request` sleeps 3 ms on a Tokio timer.
pub fn timer(rt: &Runtime, _: &Dispatch) {
    rt.block_on(async {
        // (The deadline is set in the task's first poll, not at the spawn.)
        let request = async { tokio::time::sleep(Duration::from_millis(3)).await };
        tokio::spawn(request.instrument(info_span!("request")))
            .await
            .unwrap();
    });
}

/// The regions of the programs' tasks.
pub const REGIONS: [&str; 5] = ["request", "child", "echo", "holder", "hog"];

/// A program's file read back: the `request` call's critical path, and the calls of the
/// other regions (the truth the path is checked against).
pub struct Walked {
    /// The path of the one `request` call.
    pub path: scope_profiler::read::critical::CriticalPath,
    /// The first call of each region of [`REGIONS`] the program has.
    pub calls: Vec<scope_profiler::read::critical::CallRef>,
    /// Each task's last poll end (ns): where a task completes (its `JoinHandle` wakes then).
    pub task_ends: std::collections::HashMap<i64, i64>,
}

impl Walked {
    /// Reads `file` and walks its `request` call.
    pub fn open(file: &std::path::Path) -> Walked {
        use scope_profiler::read::critical::CriticalPaths;
        let profile = scope_profiler::read::Profile::open(file).expect("open the profile");
        let paths = CriticalPaths::build(&profile).expect("index");
        let requests = paths.calls(&profile, "request").expect("calls");
        assert_eq!(requests.len(), 1, "one request: {requests:?}");
        let calls = REGIONS
            .iter()
            .filter_map(|r| paths.calls(&profile, r).expect("calls").first().cloned())
            .collect();
        let mut task_ends = std::collections::HashMap::new();
        profile
            .for_each_poll(1 << 16, |polls| {
                for p in polls.iter().filter(|p| p.task >= 0) {
                    let e = task_ends.entry(p.task).or_insert(i64::MIN);
                    *e = (*e).max(p.start_ns + p.dur_ns);
                }
                Ok(())
            })
            .expect("polls");
        let walked = Walked {
            path: paths.walk(&requests[0]),
            calls,
            task_ends,
        };
        eprintln!("{}", walked.describe());
        walked.assert_tiles();
        walked
    }

    /// Whether the machine took the request's worker away inside one of its polls: every
    /// poll of the request computes next to nothing (well under 0.2 ms), so one of 1 ms or
    /// more is the OS's preemption of a loaded machine, which moves the constructed truth
    /// (a timer's deadline counts from inside the poll). The tests run such a program again.
    pub fn preempted(&self) -> bool {
        self.coarse()
            .iter()
            .any(|s| s.kind.name() == "running" && s.dur_ns() >= 1_000_000)
    }

    /// The call of `region`.
    pub fn call(&self, region: &str) -> &scope_profiler::read::critical::CallRef {
        let c = self.calls.iter().find(|c| c.region == region);
        c.unwrap_or_else(|| panic!("a call of {region}"))
    }

    /// The name of a segment's lane: the region of the task's call, or `thread`.
    pub fn owner(&self, lane: scope_profiler::read::critical::Lane) -> String {
        use scope_profiler::read::critical::Lane;
        match lane {
            Lane::Task(t) => self
                .calls
                .iter()
                .find(|c| c.task == t)
                .map_or_else(|| format!("task {t}"), |c| c.region.clone()),
            Lane::Thread(_) => "thread".to_owned(),
        }
    }

    /// The path, neighbours joined, one line a segment (ms from the call's start).
    pub fn describe(&self) -> String {
        let t0 = self.path.call.start_ns;
        let mut s = format!("request: {:.3} ms\n", self.path.wall_ns() as f64 / 1e6);
        for g in self.path.joined() {
            s += &format!(
                "  {:>8.3} {:>8.3} {:<12} {:<8} {:?} inferred={} behind={:?}\n",
                (g.start_ns - t0) as f64 / 1e6,
                (g.end_ns - t0) as f64 / 1e6,
                g.kind.name(),
                self.owner(g.lane),
                g.stack,
                g.inferred,
                g.behind
            );
        }
        s
    }

    /// The segments tile the call exactly, in order, each of positive length.
    pub fn assert_tiles(&self) {
        let (p, segs) = (&self.path, &self.path.segments);
        assert_eq!(segs.first().unwrap().start_ns, p.call.start_ns);
        assert_eq!(segs.last().unwrap().end_ns, p.call.end_ns);
        for w in segs.windows(2) {
            assert_eq!(w[0].end_ns, w[1].start_ns);
        }
        assert!(segs.iter().all(|s| s.end_ns > s.start_ns));
        let sum: i64 = segs.iter().map(|s| s.dur_ns()).sum();
        assert_eq!(sum, p.wall_ns());
    }

    /// The [`Walked::coarse`] segments of at least `min_ns`, as (kind, owner, inferred): the
    /// path's shape, without the slivers (a poll's few µs, a wake-up's latency).
    pub fn shape(&self, min_ns: i64) -> Vec<(&'static str, String, bool)> {
        self.long(min_ns)
            .iter()
            .map(|s| (s.kind.name(), self.owner(s.lane), s.inferred))
            .collect()
    }

    /// The segments with neighbours of one kind, lane and `inferred` joined whatever their
    /// stacks (a poll's edges lie in Tokio's `runtime.spawn` alone), each keeping the stack
    /// and `behind` of its longest part.
    pub fn coarse(&self) -> Vec<scope_profiler::read::critical::Segment> {
        let mut out: Vec<(scope_profiler::read::critical::Segment, i64)> = Vec::new();
        for s in &self.path.segments {
            match out.last_mut() {
                Some((l, longest))
                    if l.kind == s.kind && l.lane == s.lane && l.inferred == s.inferred =>
                {
                    if s.dur_ns() > *longest {
                        *longest = s.dur_ns();
                        l.stack = s.stack.clone();
                        l.behind = s.behind.clone();
                    }
                    l.end_ns = s.end_ns;
                }
                _ => out.push((s.clone(), s.dur_ns())),
            }
        }
        out.into_iter().map(|(s, _)| s).collect()
    }

    /// [`Walked::shape`] without the request's own time at its start and end (its first
    /// and last polls, which may pass 0.2 ms on a loaded machine).
    pub fn middle(&self, min_ns: i64) -> Vec<(&'static str, String, bool)> {
        let mut v = self.shape(min_ns);
        let own = |s: &(&str, String, bool)| s.0 == "running" && s.1 == "request";
        if v.last().is_some_and(own) {
            v.pop();
        }
        if v.first().is_some_and(own) {
            v.remove(0);
        }
        v
    }

    /// [`Walked::middle`] without `scheduled` segments: the path's waits on others, whatever
    /// the wake-up latencies (a task woken or spawned, waiting for a worker), which pass 0.2 ms
    /// on a loaded machine.
    pub fn waits(&self, min_ns: i64) -> Vec<(&'static str, String, bool)> {
        let mut v = self.middle(min_ns);
        v.retain(|s| s.0 != "scheduled");
        v
    }

    /// The [`Walked::coarse`] segments of at least `min_ns`.
    pub fn long(&self, min_ns: i64) -> Vec<scope_profiler::read::critical::Segment> {
        let coarse = self.coarse();
        coarse
            .into_iter()
            .filter(|s| s.dur_ns() >= min_ns)
            .collect()
    }

    /// The time (ns) of the segments of `kind` on `owner`'s lane.
    pub fn time(&self, kind: &str, owner: &str) -> i64 {
        let segs = self.path.segments.iter();
        let of = segs.filter(|s| s.kind.name() == kind && self.owner(s.lane) == owner);
        of.map(|s| s.dur_ns()).sum()
    }
}

/// Runs of a program before a test gives up on getting one without preemption
/// ([`Walked::preempted`]).
pub const RUNS: usize = 5;

/// 0.2 ms: how far a segment's edge may lie from the constructed truth.
pub const EDGE_NS: i64 = 200_000;

/// Expected `(kind, owner, inferred)` triples as [`Walked::waits`] gives them.
pub fn owned(v: &[(&'static str, &str, bool)]) -> Vec<(&'static str, String, bool)> {
    v.iter().map(|&(k, o, i)| (k, o.to_owned(), i)).collect()
}

/// `ours` lies within [`EDGE_NS`] of `truth`.
pub fn near(what: &str, ours: i64, truth: i64) {
    assert!(
        (ours - truth).abs() <= EDGE_NS,
        "{what}: {ours} ns, the truth {truth} ns ({:+.3} ms)",
        (ours - truth) as f64 / 1e6
    );
}

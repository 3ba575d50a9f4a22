//! Mutated profiles never take the reading process down with them, and the crate's reader
//! never allocates what a hostile file declares.
//!
//! 2 000 mutants of a real profile (threads, Tokio task lanes, polls) are each read whole by
//! `scope_profiler::read` (open, every call, every poll, the summary) in a forked child with
//! a data limit (`RLIMIT_DATA`, 512 MiB) and a 5 s alarm, as `scopeprof` reads in its supervised
//! child. The child's allocator ends it with status 42 if the crate asks for more than
//! 256 MiB at once: a length or count read from the file sized an allocation. libhdf5 runs
//! in-process, so a mutant may still crash it (a signal in the child); such crashes stay in
//! the child, are counted and printed, and the parent reads the next mutant.
//!
//! `FUZZ_ONE=N` reads mutant N alone; `FUZZ_BACKTRACE=1` prints where an allocation over the
//! cap came from.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, Ordering};

use tracing_subscriber::prelude::*;

#[path = "common/rng.rs"]
mod rng;
use rng::Rng;

/// The system allocator; in a reading child, an allocation over [`CAP`] ends the child.
struct Capped;

static IN_CHILD: AtomicBool = AtomicBool::new(false);
const CAP: usize = 256 << 20;
/// A child's status when the crate asked for more than [`CAP`] bytes at once.
const OVER_CAP: i32 = 42;

impl Capped {
    fn check(size: usize) {
        if size > CAP && IN_CHILD.load(Ordering::Relaxed) {
            if std::env::var_os("FUZZ_BACKTRACE").is_some() {
                eprintln!(
                    "{size} bytes at\n{}",
                    std::backtrace::Backtrace::force_capture()
                );
            }
            // SAFETY: `_exit` ends the (forked, single-threaded) child at once; nothing of
            // the parent is touched.
            unsafe { libc::_exit(OVER_CAP) };
        }
    }
}

// SAFETY: every call is forwarded unchanged to `System`; the only addition is a size check
// that may end a forked child.
unsafe impl GlobalAlloc for Capped {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        Capped::check(layout.size());
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        Capped::check(new_size);
        // SAFETY: as for `dealloc`; `new_size` is the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Capped = Capped;

#[tracing::instrument]
async fn request(i: u64) -> u64 {
    tokio::task::yield_now().await;
    tracing::info_span!("parse").in_scope(|| std::hint::black_box(i * 3))
}

/// A real profile: sync spans on threads, `#[instrument]`ed tasks on two workers.
fn real_profile(dir: &std::path::Path) -> std::path::PathBuf {
    let out = dir.join("real.h5");
    let (layer, guard) = scope_profiler::ScopeLayer::builder()
        .output(&out)
        .summary(false)
        .track_async(true)
        .build()
        .unwrap();
    let d = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    let d2 = d.clone();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .on_thread_start(move || std::mem::forget(tracing::dispatcher::set_default(&d2)))
        .build()
        .unwrap();
    tracing::dispatcher::with_default(&d, || {
        for i in 0..200 {
            tracing::info_span!("solve", i).in_scope(|| std::hint::black_box(i));
        }
        rt.block_on(async {
            let tasks: Vec<_> = (0..100).map(|i| tokio::spawn(request(i))).collect();
            for t in tasks {
                t.await.unwrap();
            }
        });
    });
    drop(rt);
    guard.finalize().unwrap();
    drop(guard);
    out
}

/// One mutant: flipped bytes and hostile sizes, mostly in the first 8 KiB (the superblock,
/// the object headers and the B-trees that declare shapes and lengths), some anywhere.
fn mutate(base: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut m = base.to_vec();
    const HOSTILE: [u64; 6] = [u64::MAX, 1 << 40, 1 << 31, u32::MAX as u64, 1 << 20, 0];
    for _ in 0..=rng.below(4) {
        let span = if rng.below(4) == 0 {
            m.len()
        } else {
            m.len().min(8192)
        };
        let at = rng.below(span.saturating_sub(8));
        match rng.below(3) {
            0 => m[at] ^= 1 << rng.below(8),
            1 => {
                let v = HOSTILE[rng.below(HOSTILE.len())].to_le_bytes();
                m[at..at + 4].copy_from_slice(&v[..4]);
            }
            _ => {
                let v = HOSTILE[rng.below(HOSTILE.len())].to_le_bytes();
                m[at..at + 8].copy_from_slice(&v);
            }
        }
    }
    m
}

/// A child's status when the crate's reader panicked (a bug: bad input is an error).
const PANICKED: i32 = 4;

/// Reads `path` whole with the crate's reader: 0 when read, 3 when refused with an error,
/// [`PANICKED`] when it panicked.
fn read_whole(path: &std::path::Path) -> i32 {
    std::panic::catch_unwind(|| read_or_refuse(path)).unwrap_or(PANICKED)
}

fn read_or_refuse(path: &std::path::Path) -> i32 {
    let read = || -> Result<(), scope_profiler::read::ReadError> {
        let p = scope_profiler::read::Profile::open(path)?;
        let mut n = 0u64;
        p.for_each_call(4096, |_row, c| {
            n += c.len() as u64;
            Ok(())
        })?;
        p.for_each_poll(4096, |c| {
            n += c.len() as u64;
            Ok(())
        })?;
        std::hint::black_box(n);
        std::hint::black_box(p.summary()?.render());
        Ok(())
    };
    match read() {
        Ok(()) => 0,
        Err(_) => 3,
    }
}

/// How a mutant's reading child ended.
#[derive(Debug, Default)]
struct Outcomes {
    read: u32,
    refused: u32,
    crashed: Vec<(u32, i32)>,
    over_cap: Vec<u32>,
    panicked: Vec<u32>,
}

/// Reads `path` in a forked child with the data limit; records how it ended.
fn in_child(i: u32, path: &std::path::Path, o: &mut Outcomes) {
    // SAFETY: the child only reads a file with this process's own code and ends with
    // `_exit`; this test binary runs no other thread that could hold a lock at the fork
    // (the profiler that made the file is gone, its flusher joined).
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
    if pid == 0 {
        IN_CHILD.store(true, Ordering::Relaxed);
        let limit = libc::rlimit {
            rlim_cur: 512 << 20,
            rlim_max: 512 << 20,
        };
        // SAFETY: plain system calls on this process, with a valid rlimit.
        unsafe {
            libc::setrlimit(libc::RLIMIT_DATA, &limit);
            libc::alarm(5);
            libc::_exit(read_whole(path));
        }
    }
    let mut status = 0;
    // SAFETY: waits for the child just forked, writing its status into `status`.
    let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(waited, pid);
    if libc::WIFEXITED(status) {
        match libc::WEXITSTATUS(status) {
            0 => o.read += 1,
            3 => o.refused += 1,
            OVER_CAP => o.over_cap.push(i),
            PANICKED => o.panicked.push(i),
            other => o.crashed.push((i, other)),
        }
    } else {
        o.crashed.push((i, -libc::WTERMSIG(status)));
    }
}

#[test]
fn two_thousand_mutated_profiles_stay_in_their_reading_child() {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::read(real_profile(dir.path())).unwrap();
    let mutant = dir.path().join("mutant.h5");
    // The unmutated file reads whole.
    std::fs::write(&mutant, &base).unwrap();
    let mut o = Outcomes::default();
    in_child(u32::MAX, &mutant, &mut o);
    assert_eq!((o.read, o.refused), (1, 0), "{o:?}");
    let mut rng = Rng(0x00DD_F00D_5EED);
    let mut o = Outcomes::default();
    let only: Option<u32> = std::env::var("FUZZ_ONE").ok().and_then(|v| v.parse().ok());
    for i in 0..2_000 {
        let m = mutate(&base, &mut rng);
        if only.is_some_and(|k| k != i) {
            continue;
        }
        std::fs::write(&mutant, m).unwrap();
        in_child(i, &mutant, &mut o);
    }
    if only.is_some() {
        println!("{o:?}");
        return;
    }
    println!(
        "2000 mutants: {} read, {} refused with an error, {} crashed in the child \
         (mutant, status or -signal: {:?})",
        o.read,
        o.refused,
        o.crashed.len(),
        o.crashed
    );
    assert!(
        o.over_cap.is_empty(),
        "the reader asked for more than {CAP} bytes at once for mutants {:?}",
        o.over_cap
    );
    assert!(
        o.panicked.is_empty(),
        "the reader panicked on mutants {:?} (bad input must be an error)",
        o.panicked
    );
    assert_eq!(
        o.read + o.refused + o.crashed.len() as u32,
        2_000,
        "every mutant accounted for"
    );
    assert!(o.refused > 0, "the mutations reach what the reader checks");
}

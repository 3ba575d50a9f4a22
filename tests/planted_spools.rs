//! Spools someone else planted beside the output never hurt the program that finds them.
//!
//! `build()` recovers the spools an earlier run left beside its output, and `recover` reads
//! them on request: both read files that anyone able to write the directory can put there. A
//! planted file must not abort the host (an id or count read from it sizing an allocation),
//! hang it (a FIFO), make it read through a link, or make it read and delete another user's
//! file. The fuzzing test mutates a real spool 2 000 times and checks that each mutant is either
//! recovered or refused with an error, and that no single allocation exceeds a cap far below
//! what a hostile count would ask for (a counting global allocator records the largest).

use std::alloc::{GlobalAlloc, Layout, System};
use std::os::unix::fs::{symlink, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use scope_profiler::ScopeLayer;

#[path = "common/rng.rs"]
mod rng;
use rng::Rng;
use tracing_subscriber::prelude::*;

/// The system allocator, recording the largest single request.
struct Largest;

static LARGEST: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded unchanged to `System`, which upholds `GlobalAlloc`'s contract;
// the only addition is an atomic maximum of the requested size.
unsafe impl GlobalAlloc for Largest {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded with the caller's layout (non-zero size, as the caller guarantees).
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` with this layout (every alloc goes there).
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LARGEST.fetch_max(new_size, Ordering::Relaxed);
        // SAFETY: as for `dealloc`; `new_size` is the caller's, forwarded unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Largest = Largest;

/// No single allocation while reading a mutant may exceed this (a planted `u32` count or id
/// asked for up to hundreds of GiB before the readers capped them).
const ALLOCATION_CAP: usize = 64 << 20;

/// A frame: tag, little-endian `u32` length, payload.
fn frame(out: &mut Vec<u8>, tag: u8, payload: &[u8]) {
    out.push(tag);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(payload);
}

fn put_str(p: &mut Vec<u8>, s: &str) {
    p.extend_from_slice(&(s.len() as u32).to_le_bytes());
    p.extend_from_slice(s.as_bytes());
}

/// A valid spool header frame (see `src/spool/mod.rs`).
fn header() -> Vec<u8> {
    let mut p = b"SPRSPOL1".to_vec();
    p.extend_from_slice(&1_000i64.to_le_bytes());
    put_str(&mut p, "2026-01-01T00:00:00");
    put_str(&mut p, "");
    p.extend_from_slice(&[1, 0, 0]);
    let mut out = Vec::new();
    frame(&mut out, 0, &p);
    out
}

/// The 100-byte file of the report: a header, then a region frame whose id is near `u32::MAX`.
fn huge_region_id() -> Vec<u8> {
    let mut out = header();
    let mut p = 0xFFFF_FF00u32.to_le_bytes().to_vec();
    p.extend_from_slice(&7i64.to_le_bytes());
    put_str(&mut p, "x");
    put_str(&mut p, "");
    frame(&mut out, 1, &p);
    out
}

/// A header, one region, then a calls frame that declares `u32::MAX` calls in a few bytes.
fn huge_call_count() -> Vec<u8> {
    let mut out = header();
    let mut p = 0u32.to_le_bytes().to_vec();
    p.extend_from_slice(&7i64.to_le_bytes());
    put_str(&mut p, "x");
    put_str(&mut p, "");
    frame(&mut out, 1, &p);
    let mut c = 0u32.to_le_bytes().to_vec();
    c.extend_from_slice(&u32::MAX.to_le_bytes());
    c.extend_from_slice(&[0, 2, 4, 0, 0, 0]);
    frame(&mut out, 8, &c);
    out
}

/// A version-2 header, then an open-calls frame (tag 10) that declares `u32::MAX` calls of
/// `u64::MAX` open in a few bytes.
fn huge_open_calls() -> Vec<u8> {
    let mut out = header();
    out[5..13].copy_from_slice(b"SPRSPOL2");
    let mut p = 5i64.to_le_bytes().to_vec();
    p.extend_from_slice(&u64::MAX.to_le_bytes());
    p.extend_from_slice(&u32::MAX.to_le_bytes());
    p.extend_from_slice(&[0, 2, 0, 0, 1, 1, 2]);
    frame(&mut out, 10, &p);
    out
}

/// A version-2 header, then a wakes frame (tag 11) that declares `u32::MAX` wakes.
fn huge_wake_count() -> Vec<u8> {
    let mut out = header();
    out[5..13].copy_from_slice(b"SPRSPOL2");
    let mut p = u32::MAX.to_le_bytes().to_vec();
    p.extend_from_slice(&[2, 0, 1, 2]);
    frame(&mut out, 11, &p);
    out
}

fn build(out: &Path) -> Result<scope_profiler::FlushGuard, scope_profiler::Error> {
    let (layer, guard) = ScopeLayer::builder().output(out).summary(false).build()?;
    drop(layer);
    Ok(guard)
}

/// Runs `f` on a thread and fails the test if it has not returned within a minute (a FIFO
/// opened for reading would block for ever).
fn within_a_minute<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("did not return: blocked on a planted file")
}

fn corrupt_copies(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().contains(".corrupt-"))
        .collect()
}

#[test]
fn a_huge_region_id_is_refused_not_allocated() {
    for (what, bytes) in [
        ("region id", huge_region_id()),
        ("call count", huge_call_count()),
        ("open-calls count", huge_open_calls()),
        ("wake count", huge_wake_count()),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.h5");
        let spool = dir.path().join(".out.h5.spool");
        std::fs::write(&spool, &bytes).unwrap();
        assert!(bytes.len() <= 100, "{what}: {} bytes", bytes.len());
        // The library's recover: an error naming the spool, and the program goes on.
        let err = scope_profiler::recover(&out).unwrap_err().to_string();
        assert!(err.contains(".out.h5.spool"), "{what}: {err}");
        // build(): the planted file is kept aside as corrupt, and profiling starts.
        let guard = build(&out).unwrap_or_else(|e| panic!("{what}: build failed: {e}"));
        let kept = corrupt_copies(dir.path());
        assert_eq!(kept.len(), 1, "{what}: {kept:?}");
        assert_eq!(
            std::fs::read(&kept[0]).unwrap(),
            bytes,
            "{what}: kept as it was"
        );
        drop(guard);
    }
}

#[test]
fn a_fifo_among_the_spools_never_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.h5");
    let fifo = dir.path().join(".out.h5.spool.3");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let o = out.clone();
    let guard = within_a_minute(move || build(&o)).expect("build beside a FIFO");
    drop(guard);
    let o = out.clone();
    let err = within_a_minute(move || scope_profiler::recover(&o)).unwrap_err();
    assert!(err.to_string().contains("no spool"), "{err}");
    let s = fifo.clone();
    let err = within_a_minute(move || scope_profiler::recover_spool(&s, dir_out(&s))).unwrap_err();
    assert!(err.to_string().contains("not a regular file"), "{err}");
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo_like());
}

fn dir_out(spool: &Path) -> PathBuf {
    spool.with_file_name("recovered.h5")
}

/// `FileTypeExt::is_fifo`, named for what the assertion means.
trait FifoLike {
    fn is_fifo_like(&self) -> bool;
}

impl FifoLike for std::fs::FileType {
    fn is_fifo_like(&self) -> bool {
        std::os::unix::fs::FileTypeExt::is_fifo(self)
    }
}

/// A real spool with calls, written by a profiled run that is then left without a finalize.
fn real_spool() -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("real.h5");
    let (layer, guard) = ScopeLayer::builder()
        .output(&out)
        .summary(false)
        .track_async(true)
        .spool_sync_interval(Duration::from_millis(5))
        .build()
        .unwrap();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    tracing::dispatcher::with_default(&dispatch, || {
        for i in 0..300 {
            tracing::info_span!("outer", i).in_scope(|| {
                tracing::info_span!("inner").in_scope(|| std::hint::black_box(i));
            });
        }
    });
    guard.sync().unwrap();
    let spool = dir.path().join(".real.h5.spool");
    let mut bytes = Vec::new();
    for _ in 0..2_000 {
        bytes = std::fs::read(&spool).unwrap();
        // Header, two regions and calls frames: well past 300 bytes once the calls are there.
        if bytes.len() > 600 {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        bytes.len() > 600,
        "the spool was not written: {} bytes",
        bytes.len()
    );
    drop(guard);
    bytes
}

/// Offsets of the frames' heads in a spool.
fn frame_heads(bytes: &[u8]) -> Vec<usize> {
    let mut at = 0;
    let mut heads = Vec::new();
    while at + 5 <= bytes.len() {
        heads.push(at);
        let len = u32::from_le_bytes(bytes[at + 1..at + 5].try_into().unwrap()) as usize;
        at += 5 + len;
    }
    heads
}

/// One mutant of `base`: hostile values where ids and counts live, flipped bytes, cuts.
fn mutate(base: &[u8], heads: &[usize], rng: &mut Rng) -> Vec<u8> {
    let mut m = base.to_vec();
    const HOSTILE: [u32; 6] = [u32::MAX, 0x7FFF_FFFF, 0xFFFF_FF00, 1 << 30, 1 << 20, 65_536];
    for _ in 0..=rng.below(3) {
        match rng.below(5) {
            // A frame's length, or the first u32 of its payload (a region id or a count).
            0 | 1 => {
                let head = heads[rng.below(heads.len())];
                let at = head + if rng.below(2) == 0 { 1 } else { 5 };
                let v = HOSTILE[rng.below(HOSTILE.len())].to_le_bytes();
                if at + 4 <= m.len() {
                    m[at..at + 4].copy_from_slice(&v);
                }
            }
            // Flipped bytes anywhere (an earlier cut may have left few or none).
            2 => {
                let at = rng.below(m.len());
                if let Some(b) = m.get_mut(at) {
                    *b ^= 1 << rng.below(8);
                }
            }
            // A u32 anywhere.
            3 => {
                let at = rng.below(m.len().saturating_sub(4));
                let v = HOSTILE[rng.below(HOSTILE.len())].to_le_bytes();
                if at + 4 <= m.len() {
                    m[at..at + 4].copy_from_slice(&v);
                }
            }
            // Cut short.
            _ => m.truncate(rng.below(m.len())),
        }
    }
    m
}

#[test]
fn two_thousand_mutated_spools_never_abort_or_overallocate() {
    let base = real_spool();
    let heads = frame_heads(&base);
    assert!(heads.len() >= 4, "{} frames", heads.len());
    let dir = tempfile::tempdir().unwrap();
    let spool = dir.path().join(".fuzz.h5.spool");
    let out = dir.path().join("fuzz.h5");
    let mut rng = Rng(0x5EED_0F5C_0FE1_u64);
    let (mut recovered, mut refused) = (0, 0);
    for i in 0..2_000 {
        let m = mutate(&base, &heads, &mut rng);
        std::fs::write(&spool, &m).unwrap();
        LARGEST.store(0, Ordering::Relaxed);
        match scope_profiler::recover_spool(&spool, &out) {
            Ok(_) => recovered += 1,
            Err(e) => {
                refused += 1;
                assert!(!e.to_string().is_empty(), "mutant {i}");
            }
        }
        let largest = LARGEST.load(Ordering::Relaxed);
        assert!(
            largest <= ALLOCATION_CAP,
            "mutant {i}: an allocation of {largest} bytes"
        );
        let _ = std::fs::remove_file(&out);
    }
    println!("2000 mutants: {recovered} recovered, {refused} refused with an error");
    assert!(recovered > 0 && refused > 0, "{recovered} / {refused}");
}

#[test]
fn links_among_the_spools_are_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let target = elsewhere.path().join("a-real-spool");
    std::fs::write(&target, real_spool()).unwrap();
    let out = dir.path().join("out.h5");
    symlink(&target, dir.path().join(".out.h5.spool.2")).unwrap();
    let guard = build(&out).unwrap();
    drop(guard);
    assert!(
        target.exists(),
        "the link's target is neither read away nor removed"
    );
    assert!(corrupt_copies(dir.path()).is_empty());
    assert!(!dir.path().join("out.recovered-1.h5").exists());
    let err = scope_profiler::recover_spool(dir.path().join(".out.h5.spool.2"), &out)
        .unwrap_err()
        .to_string();
    assert!(err.contains("symbolic link"), "{err}");
}

#[test]
fn another_users_spool_is_left_alone() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!(
            "SKIPPED another_users_spool_is_left_alone: needs root to plant a file owned by \
             another user (CI runs as root)"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.h5");
    let theirs = dir.path().join(".out.h5.spool.1");
    let bytes = real_spool();
    std::fs::write(&theirs, &bytes).unwrap();
    std::os::unix::fs::chown(&theirs, Some(65_534), Some(65_534)).unwrap();
    let guard = build(&out).unwrap();
    drop(guard);
    assert_eq!(std::fs::read(&theirs).unwrap(), bytes, "read nothing away");
    assert_eq!(std::fs::metadata(&theirs).unwrap().uid(), 65_534);
    assert!(!dir.path().join("out.recovered-1.h5").exists());
    assert!(
        scope_profiler::recover(&out).is_err(),
        "not recovered on request either"
    );
}

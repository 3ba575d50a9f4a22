//! Fork without exec: what a child process does with the profiler it inherited.
//!
//! `fork()` copies the whole memory of a process but only the thread that called it. A child
//! of a profiled process (a daemon after `daemonize`, a pre-fork server's worker, an HPC
//! launch wrapper) therefore holds the parent's layer, guard, lanes and spool, but not the
//! flusher thread that drains them, and every lock another thread held at the fork stays
//! locked forever. Left alone, its first finalize (or the guard's drop at the end of `main`)
//! would wait for a flusher that does not exist.
//!
//! So the first `build()` of a process registers a `pthread_atfork` child handler. In the
//! child it switches every live profiler off, for good (the layer's pause flag, which every
//! callback reads anyway: the hot path pays nothing), tells the lane pool that nobody drains
//! it (so no thread ever waits for a buffer), closes the inherited descriptor of the parent's
//! spool (so a long-lived child never holds the spool's lock, which would make a later run
//! take a crashed parent's spool for a live one). The handler only loads and stores atomics
//! and makes async-signal-safe calls (`fstat`, `close`), so it cannot block, and it prints
//! nothing: most forks are followed by `exec` at once (`std::process::Command` with
//! `pre_exec`), and their standard error is someone else's. The child says that profiling is
//! off in it with one line on stderr when it first uses the guard (`finalize()`, the drop) or
//! when it exits (an `atexit` handler, which `exec` never runs). Afterwards:
//!
//! - the child's guard neither finalizes nor waits: `finalize()` returns
//!   [`Error::ForkedChild`](crate::Error::ForkedChild) at once, and the drop leaves everything
//!   as it is (nothing of the parent's is written, moved or deleted);
//! - calls open at the fork belong to the parent, which records their end as usual;
//! - `build()` in such a child returns `Error::ForkedChild`: a new profiler would need locks
//!   that the parent's threads may have held at the fork (HDF5's global lock during a write,
//!   the standard error lock), which cannot be proven free. Build the profiler in the child
//!   after `exec`, or fork before the first `build()`.
//!
//! Other parts ask [`Origin::is_forked_child`] ("is this still the process that made me?"),
//! which also catches a fork that bypassed the handler (a raw `clone` system call) by its pid.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU64, Ordering};
use std::sync::{Arc, Once, OnceLock};

use crate::recording::shared::Shared;

/// Forks this process's line of descent has gone through since the handler was installed
/// (a child inherits its parent's count and adds one).
static FORKS: AtomicU64 = AtomicU64::new(0);
/// This process was forked while a profiler of its parent was live.
static INHERITED: AtomicBool = AtomicBool::new(false);
/// The child has said that profiling is off in it.
static SAID: AtomicBool = AtomicBool::new(false);
/// The live profilers: a list of nodes that are never freed (a free node is reused), so the
/// child handler can walk it without a lock.
static HEAD: AtomicPtr<Node> = AtomicPtr::new(std::ptr::null_mut());

#[derive(Debug)]
struct Node {
    /// The profiler's shared state (null: a free node).
    target: AtomicPtr<Shared>,
    next: AtomicPtr<Node>,
}

/// The process something was made in, to tell later whether the code runs in a forked child.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Origin {
    pid: u32,
    forks: u64,
}

impl Origin {
    /// This process, now (installs the fork handler, once per process).
    pub(crate) fn here() -> Origin {
        install();
        Origin {
            pid: std::process::id(),
            forks: FORKS.load(Ordering::Acquire),
        }
    }

    /// Whether this runs in a process forked (without exec) from the one `self` was taken in.
    pub(crate) fn is_forked_child(&self) -> bool {
        FORKS.load(Ordering::Acquire) != self.forks || std::process::id() != self.pid
    }

    /// The process `self` was taken in.
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }
}

/// Whether this process was forked while a profiler of its parent was live.
pub(crate) fn inherited() -> bool {
    INHERITED.load(Ordering::Acquire)
}

/// In a child that inherited a live profiler: says once, on stderr, that profiling is off.
pub(crate) fn say_off_once() {
    if inherited() && !SAID.swap(true, Ordering::SeqCst) {
        say_off();
    }
}

/// Refuses a new profiler in a process forked from a profiled one (see the module docs).
///
/// # Errors
/// [`crate::Error::ForkedChild`] in such a process.
pub(crate) fn check_build() -> Result<(), crate::Error> {
    if inherited() {
        return Err(crate::Error::ForkedChild {
            pid: std::process::id(),
            // SAFETY: getppid has no preconditions.
            parent: unsafe { libc::getppid() } as u32,
        });
    }
    Ok(())
}

/// One profiler's link to the fork handler: where it was built, and its spool's descriptor.
#[derive(Debug)]
pub(crate) struct Watch {
    origin: Origin,
    node: OnceLock<&'static Node>,
    /// The spool's descriptor (-1: none) and its `(device, inode)`, written in that order
    /// around a -1, so the handler closes a descriptor only while it is still the spool.
    fd: AtomicI32,
    dev: AtomicU64,
    ino: AtomicU64,
}

impl Watch {
    pub(crate) fn new() -> Watch {
        Watch {
            origin: Origin::here(),
            node: OnceLock::new(),
            fd: AtomicI32::new(-1),
            dev: AtomicU64::new(0),
            ino: AtomicU64::new(0),
        }
    }

    /// Puts `shared` (whose watch this is) on the list the child handler switches off.
    pub(crate) fn arm(shared: &Arc<Shared>) {
        let target = Arc::as_ptr(shared).cast_mut();
        let _ = shared.fork.node.set(claim(target));
    }

    /// Whether this runs in a process forked from the one that built the profiler.
    pub(crate) fn is_forked_child(&self) -> bool {
        self.origin.is_forked_child()
    }

    /// Where the profiler was built.
    pub(crate) fn origin(&self) -> Origin {
        self.origin
    }

    /// The spool's descriptor is now `fd` (-1: none).
    pub(crate) fn spool_fd(&self, fd: i32) {
        let now = (fd >= 0).then(|| identity(fd)).flatten();
        let known = (
            self.dev.load(Ordering::SeqCst),
            self.ino.load(Ordering::SeqCst),
        );
        if self.fd.load(Ordering::SeqCst) == fd && now == Some(known) {
            return; // unchanged (the usual case at every flush)
        }
        self.fd.store(-1, Ordering::SeqCst);
        if let Some((dev, ino)) = now {
            self.dev.store(dev, Ordering::SeqCst);
            self.ino.store(ino, Ordering::SeqCst);
            self.fd.store(fd, Ordering::SeqCst);
        }
    }

    /// In the child: closes the inherited spool descriptor if it still is the spool.
    fn close_spool(&self) {
        let fd = self.fd.swap(-1, Ordering::SeqCst);
        if fd < 0 {
            return;
        }
        let want = (
            self.dev.load(Ordering::SeqCst),
            self.ino.load(Ordering::SeqCst),
        );
        if identity(fd) == Some(want) {
            // SAFETY: closes a descriptor of this (child) process that is the parent's spool;
            // the child never writes the spool (no flusher runs here), so nothing uses it.
            unsafe { libc::close(fd) };
        }
    }
}

impl Watch {
    /// Takes the profiler off the child handler's list (idempotent). [`Shared`]'s drop calls
    /// it first, before any of its fields is dropped, and the watch's own drop again.
    pub(crate) fn disarm(&self) {
        if let Some(node) = self.node.get() {
            node.target.store(std::ptr::null_mut(), Ordering::SeqCst);
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.disarm();
    }
}

/// `(device, inode)` of descriptor `fd` (async-signal-safe: one `fstat`).
fn identity(fd: i32) -> Option<(u64, u64)> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: fstat writes at most one `stat` into the buffer it is given.
    if unsafe { libc::fstat(fd, st.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: fstat succeeded, so it filled the struct.
    let st = unsafe { st.assume_init() };
    Some((st.st_dev, st.st_ino))
}

/// A node for `target`: a free one, else a new one pushed on the list (never freed).
fn claim(target: *mut Shared) -> &'static Node {
    let mut at = HEAD.load(Ordering::Acquire);
    // SAFETY: nodes are leaked boxes, never freed, so every pointer on the list stays valid.
    while let Some(node) = unsafe { at.as_ref() } {
        let free = std::ptr::null_mut();
        if node
            .target
            .compare_exchange(free, target, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            return node;
        }
        at = node.next.load(Ordering::Acquire);
    }
    let node: &'static Node = Box::leak(Box::new(Node {
        target: AtomicPtr::new(target),
        next: AtomicPtr::new(std::ptr::null_mut()),
    }));
    let mut head = HEAD.load(Ordering::Acquire);
    loop {
        node.next.store(head, Ordering::Release);
        let new = std::ptr::from_ref(node).cast_mut();
        match HEAD.compare_exchange_weak(head, new, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return node,
            Err(now) => head = now,
        }
    }
}

/// Registers the child handler (once per process).
fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: registers a handler with the C library; `in_child` is a plain `extern "C"`
        // function that lives for the whole program.
        let r = unsafe { libc::pthread_atfork(None, None, Some(in_child)) };
        if r != 0 {
            // Without the handler a fork is still noticed by pid on the slow paths.
            eprintln!("scope-profiler: cannot register the fork handler (error {r})");
        }
        // SAFETY: as above; `at_exit` only loads atomics and writes to stderr.
        unsafe { libc::atexit(at_exit) };
    });
}

/// At the exit of a child that inherited a live profiler (and never used its guard).
extern "C" fn at_exit() {
    say_off_once();
}

/// The child handler: switches every live profiler off (see the module docs).
extern "C" fn in_child() {
    FORKS.fetch_add(1, Ordering::SeqCst);
    let mut live = false;
    let mut at = HEAD.load(Ordering::Acquire);
    // SAFETY: as in `claim`, every node stays valid.
    while let Some(node) = unsafe { at.as_ref() } {
        let shared = node.target.load(Ordering::Acquire);
        // SAFETY: a node's target is cleared (by the `Watch` inside it) before a `Shared` is
        // freed; in the child no other thread runs, so it cannot be freed meanwhile.
        if let Some(shared) = unsafe { shared.as_ref() } {
            shared.pause.disable();
            shared.pool.flusher_stopped();
            shared.fork.close_spool();
            live = true;
        }
        at = node.next.load(Ordering::Acquire);
    }
    if live {
        INHERITED.store(true, Ordering::SeqCst);
    }
}

/// One line on stderr, written without a lock or an allocation.
fn say_off() {
    let mut line = [0u8; 200];
    let mut n = 0;
    let mut put = |b: &[u8]| {
        let k = b.len().min(line.len() - n);
        line[n..n + k].copy_from_slice(&b[..k]);
        n += k;
    };
    put(b"scope-profiler: process ");
    // SAFETY: getpid and getppid have no preconditions.
    put(digits(unsafe { libc::getpid() } as u32).as_slice());
    put(b" was forked from ");
    // SAFETY: as above.
    put(digits(unsafe { libc::getppid() } as u32).as_slice());
    put(b"; profiling is off in it (the parent's profile is unaffected)\n");
    // SAFETY: writes `n` initialized bytes of `line` to stderr; a short write is acceptable.
    let _ = unsafe { libc::write(2, line.as_ptr().cast(), n) };
}

/// The decimal digits of `v`, without allocating.
fn digits(mut v: u32) -> Digits {
    let mut d = Digits([0; 10], 10);
    loop {
        d.1 -= 1;
        d.0[d.1] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            return d;
        }
    }
}

/// Up to ten digits, filled from the end.
struct Digits([u8; 10], usize);

impl Digits {
    fn as_slice(&self) -> &[u8] {
        &self.0[self.1..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_without_allocation() {
        assert_eq!(digits(0).as_slice(), b"0");
        assert_eq!(digits(4_294_967_295).as_slice(), b"4294967295");
        assert_eq!(digits(120).as_slice(), b"120");
    }

    #[test]
    fn a_profiler_is_listed_while_it_lives() {
        let shared = Arc::new(Shared::new(crate::config::Config::default(), None));
        Watch::arm(&shared);
        let node = *shared.fork.node.get().expect("armed");
        // Only the profiler's own watch clears its node (other tests may reuse it after).
        assert_eq!(
            node.target.load(Ordering::SeqCst).cast_const(),
            Arc::as_ptr(&shared)
        );
    }

    #[test]
    fn a_dropped_watch_frees_its_node() {
        // A node of its own, not on the list the fork handler walks.
        let node: &'static Node = Box::leak(Box::new(Node {
            target: AtomicPtr::new(std::ptr::NonNull::dangling().as_ptr()),
            next: AtomicPtr::new(std::ptr::null_mut()),
        }));
        let watch = Watch::new();
        watch.node.set(node).expect("unset");
        drop(watch);
        assert!(node.target.load(Ordering::SeqCst).is_null());
    }

    /// The node of the profiler under test, for the writer's drop to look at.
    static WATCHED: OnceLock<&'static Node> = OnceLock::new();

    /// A summary writer (a field of `Shared`, dropped with it) whose drop forks a real child
    /// in the middle of the `Shared`'s teardown; it keeps the child's exit status: 0 when the
    /// child, after its fork handler ran, found the profiler off the handler's list.
    struct ForkOnDrop(Arc<std::sync::Mutex<Option<i32>>>);

    impl std::io::Write for ForkOnDrop {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Drop for ForkOnDrop {
        fn drop(&mut self) {
            let Some(node) = WATCHED.get() else {
                return;
            };
            // SAFETY: the child makes async-signal-safe calls only (an atomic load, _exit).
            let child = unsafe { libc::fork() };
            if child == 0 {
                let listed = !node.target.load(Ordering::SeqCst).is_null();
                // SAFETY: as above.
                unsafe { libc::_exit(i32::from(listed)) };
            }
            let mut status = 0;
            // SAFETY: reaps our own child into `status`.
            unsafe { libc::waitpid(child, &mut status, 0) };
            *self.0.lock().unwrap() = Some(status);
        }
    }

    #[test]
    fn a_fork_during_the_teardown_does_not_reach_the_dropped_profiler() {
        let seen = Arc::new(std::sync::Mutex::new(None));
        let mut config = crate::config::Config::default();
        config.summary_to = Some(crate::config::SummaryWriter(Arc::new(
            std::sync::Mutex::new(Box::new(ForkOnDrop(seen.clone()))),
        )));
        let shared = Arc::new(Shared::new(config, None));
        Watch::arm(&shared);
        WATCHED
            .set(*shared.fork.node.get().expect("armed"))
            .unwrap();
        drop(shared);
        let status = seen.lock().unwrap().take().expect("the writer forked");
        assert!(libc::WIFEXITED(status), "child status {status:#x}");
        assert_eq!(
            libc::WEXITSTATUS(status),
            0,
            "in the child, the fork handler's list still held the profiler being dropped"
        );
    }

    #[test]
    fn the_origin_is_this_process() {
        let o = Origin::here();
        assert_eq!(o.pid(), std::process::id());
        assert!(!o.is_forked_child());
    }
}

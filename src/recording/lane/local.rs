//! The thread-local glue that finds the calling thread's [`Writer`] for a layer.
//!
//! The fast path is one thread-local `Cell` read (const-initialised, no lazy-init check), a
//! compare of the layer's unique id, then the writer's slot write and release store: no atomic
//! read-modify-write, no lock, no allocation. Everything else (first use on a thread, a second
//! layer in the same process, a full chunk) goes through `#[cold]` slow paths.

use std::cell::{Cell, RefCell};
use std::sync::atomic::Ordering;

use super::writer::Writer;
use crate::recording::shared::Shared;

thread_local! {
    /// (layer uid, writer) of the layer this thread wrote to last.
    static FAST: Cell<(u64, *mut Writer)> = const { Cell::new((0, std::ptr::null_mut())) };
    /// Every writer of this thread, one per layer; owns them.
    static OWNED: RefCell<Owned> = const { RefCell::new(Owned(Vec::new())) };
}

struct Owned(Vec<(u64, Box<Writer>)>);

impl Drop for Owned {
    fn drop(&mut self) {
        // The fast pointer must not outlive the writers it points to.
        let _ = FAST.try_with(|f| f.set((0, std::ptr::null_mut())));
        if crate::fork::inherited() {
            // A forked child: these writers feed the parent's lanes, whose locks a thread
            // that is not here may have held at the fork. Leave them untouched.
            self.0.drain(..).for_each(std::mem::forget);
            return;
        }
        let now = crate::recording::clock::Clock::global().now_ns();
        let cpu = crate::recording::clock::thread_cpu_ns();
        for (_, w) in &mut self.0 {
            let lane = w.lane_ref();
            lane.cpu_ns.store(cpu, Ordering::Relaxed);
            lane.end_ns.store(now, Ordering::Release);
            w.finish();
        }
    }
}

/// Runs `f` on this thread's writer for `shared`'s layer, registering the thread on first use.
/// Returns what `f` returns: whether the record was buffered (false: dropped, and counted).
#[inline(always)]
pub(crate) fn with_local(shared: &Shared, f: impl FnOnce(&mut Writer) -> bool) -> bool {
    let (uid, p) = FAST.get();
    if uid == shared.uid && !p.is_null() {
        // SAFETY: `p` points into a Box owned by this thread's `OWNED`, which is alive (its
        // destructor nulls FAST first) and not borrowed elsewhere: writers are only used here
        // and in the slow path below, never re-entrantly.
        f(unsafe { &mut *p })
    } else {
        with_local_slow(shared, f)
    }
}

#[cold]
#[inline(never)]
fn with_local_slow(shared: &Shared, f: impl FnOnce(&mut Writer) -> bool) -> bool {
    let p = OWNED.try_with(|owned| {
        let mut owned = owned.try_borrow_mut().ok()?;
        let p: *mut Writer = match owned.0.iter_mut().find(|(u, _)| *u == shared.uid) {
            Some((_, w)) => &mut **w,
            None => {
                // Writers of layers that are gone would pin their lanes: drop them first.
                owned.0.retain(|(_, w)| !w.layer_gone());
                let w = Box::new(Writer::new(shared.register_lane(), shared.pool.clone()));
                owned.0.push((shared.uid, w));
                &mut *owned.0.last_mut().expect("just pushed").1
            }
        };
        FAST.set((shared.uid, p));
        Some(p)
    });
    match p {
        // SAFETY: as in `with_local`: the Box lives in OWNED, which outlives this call.
        Ok(Some(p)) => f(unsafe { &mut *p }),
        // Thread teardown (OWNED already destroyed) or re-entrancy: the record is lost, and
        // counted.
        _ => {
            shared.lost.fetch_add(1, Ordering::Relaxed);
            false
        }
    }
}

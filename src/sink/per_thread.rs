//! Per-thread state of a sink instance.
//!
//! Several profilers may live in one process (tests build many), so a sink keeps its per-thread
//! state in a thread-local list of entries, one per sink instance, keyed by the sink's unique
//! id. The entry used last sits at the front: the hot path is one compare; switching sinks,
//! first use on a thread and dropping the entries of sinks that are gone happen in the cold path.

use std::cell::RefCell;
use std::thread::LocalKey;

/// One sink's state on one thread.
pub(crate) trait ThreadState {
    /// The owning sink's unique id.
    fn uid(&self) -> u64;
    /// Whether the owning sink is gone (the entry can be dropped).
    fn orphaned(&self) -> bool;
}

/// Runs `f` on the calling thread's entry for sink `uid`, creating it with `create` on first
/// use. Does nothing during thread teardown or when called re-entrantly.
#[inline]
pub(crate) fn with_state<T: ThreadState>(
    key: &'static LocalKey<RefCell<Vec<T>>>,
    uid: u64,
    create: impl FnOnce() -> T,
    f: impl FnOnce(&mut T),
) {
    let _ = key.try_with(|list| {
        let Ok(mut list) = list.try_borrow_mut() else {
            return;
        };
        if list.first().map(|t| t.uid()) != Some(uid) {
            bring_to_front(&mut list, uid, create);
        }
        f(&mut list[0]);
    });
}

/// Cold path of [`with_state`]: drops the entries of sinks that are gone, and moves (or
/// creates) this sink's entry to the front.
#[cold]
#[inline(never)]
fn bring_to_front<T: ThreadState>(list: &mut Vec<T>, uid: u64, create: impl FnOnce() -> T) {
    list.retain(|t| !t.orphaned());
    let i = match list.iter().position(|t| t.uid() == uid) {
        Some(i) => i,
        None => {
            list.push(create());
            list.len() - 1
        }
    };
    list.swap(0, i);
}

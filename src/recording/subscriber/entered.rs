//! Each thread's stack of entered spans (for `Span::current()`), kept so that an enter and an
//! exit touch it with a few instructions.
//!
//! The innermost [`INLINE`] entries live in thread-local cells with no destructor: reaching
//! them is one offset from the thread pointer, with none of the lazy destructor registration a
//! `Vec` in a thread-local needs on every access, and no borrow flag. Deeper entries (deep
//! recursion) go to a `Vec` beside it; exits out of order take the slow path.

use std::cell::{Cell, RefCell};

/// Entries kept in cells; beyond them the stack goes on in [`DEEP`].
const INLINE: usize = 32;

thread_local! {
    /// Entries on the stack, inline and deep together.
    static LEN: Cell<usize> = const { Cell::new(0) };
    /// The innermost [`INLINE`] levels: (subscriber uid, span id).
    static TOP: [Cell<(u64, u64)>; INLINE] = const { [const { Cell::new((0, 0)) }; INLINE] };
    /// Levels from [`INLINE`] on, innermost last.
    static DEEP: RefCell<Vec<(u64, u64)>> = const { RefCell::new(Vec::new()) };
}

/// This thread entered span `id` of subscriber `uid`.
#[inline(always)]
pub(super) fn push(uid: u64, id: u64) {
    let n = LEN.get();
    if n < INLINE {
        TOP.with(|t| t[n].set((uid, id)));
        LEN.set(n + 1);
    } else {
        push_deep(uid, id, n);
    }
}

#[cold]
#[inline(never)]
fn push_deep(uid: u64, id: u64, n: usize) {
    if DEEP.try_with(|d| d.borrow_mut().push((uid, id))).is_ok() {
        LEN.set(n + 1);
    }
}

/// This thread exited span `id` of subscriber `uid`: its innermost entry goes (exits may come
/// out of order).
#[inline(always)]
pub(super) fn pop(uid: u64, id: u64) {
    let n = LEN.get();
    if n > 0 && n <= INLINE && TOP.with(|t| t[n - 1].get()) == (uid, id) {
        LEN.set(n - 1);
    } else {
        pop_slow(uid, id, n);
    }
}

#[cold]
#[inline(never)]
fn pop_slow(uid: u64, id: u64, n: usize) {
    // Deeper than the cells, in order: O(1), so deep recursion stays linear.
    if n > INLINE {
        let popped = DEEP.try_with(|d| {
            let mut d = d.borrow_mut();
            let top = d.last() == Some(&(uid, id));
            if top {
                d.pop();
            }
            top
        });
        if popped == Ok(true) {
            LEN.set(n - 1);
            return;
        }
    }
    // Out of order: rebuilt, O(depth) (rare).
    let mut all = snapshot(n);
    if let Some(at) = all.iter().rposition(|&e| e == (uid, id)) {
        all.remove(at);
        restore(&all);
    }
}

/// The whole stack, outermost first.
fn snapshot(n: usize) -> Vec<(u64, u64)> {
    let mut all: Vec<(u64, u64)> = TOP.with(|t| t[..n.min(INLINE)].iter().map(Cell::get).collect());
    if n > INLINE {
        let _ = DEEP.try_with(|d| all.extend_from_slice(&d.borrow()));
    }
    all
}

/// Makes `all` (outermost first) the stack.
fn restore(all: &[(u64, u64)]) {
    let inline = all.len().min(INLINE);
    TOP.with(|t| {
        for (cell, &e) in t.iter().zip(&all[..inline]) {
            cell.set(e);
        }
    });
    let _ = DEEP.try_with(|d| {
        let mut d = d.borrow_mut();
        d.clear();
        d.extend_from_slice(&all[inline..]);
    });
    LEN.set(all.len());
}

/// The innermost span of subscriber `uid` entered on this thread.
pub(super) fn current(uid: u64) -> Option<u64> {
    let n = LEN.get();
    if n > INLINE {
        // The innermost first: one look when it is this subscriber's (as it nearly always is).
        let deep = DEEP
            .try_with(|d| d.borrow().iter().rev().find(|e| e.0 == uid).map(|e| e.1))
            .ok()
            .flatten();
        if deep.is_some() {
            return deep;
        }
    }
    let top = n.min(INLINE);
    TOP.with(|t| {
        t[..top]
            .iter()
            .rev()
            .map(Cell::get)
            .find(|e| e.0 == uid)
            .map(|e| e.1)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_current_span_is_the_innermost_entered() {
        push(1, 10);
        push(2, 99);
        push(1, 11);
        assert_eq!(current(1), Some(11));
        pop(1, 10); // out of order
        assert_eq!(current(1), Some(11));
        pop(1, 11);
        assert_eq!(current(1), None);
        assert_eq!(current(2), Some(99));
        pop(2, 99);
        assert_eq!(LEN.get(), 0);
    }

    /// Deeper than the inline cells (recursion), and an exit out of order down there.
    #[test]
    fn a_deep_stack_spills_and_comes_back() {
        let depth = 3 * INLINE as u64;
        for id in 1..=depth {
            push(7, id);
        }
        assert_eq!(current(7), Some(depth));
        pop(7, 5); // out of order, inline part
        pop(7, depth - 3); // out of order, deep part
        assert_eq!(current(7), Some(depth));
        for id in (1..=depth).rev().filter(|&i| i != 5 && i != depth - 3) {
            assert_eq!(current(7), Some(id));
            pop(7, id);
        }
        assert_eq!(current(7), None);
        assert_eq!(LEN.get(), 0);
        pop(7, 1); // an exit of nothing entered leaves the stack as it is
        assert_eq!(LEN.get(), 0);
    }
}

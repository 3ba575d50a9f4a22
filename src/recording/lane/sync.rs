//! The synchronisation primitives of the lane handoff, from `std` or, when the crate is built
//! with `--cfg scope_loom`, from the `loom` model checker (see `loom_tests`).
//!
//! Only what the handoff between a recording thread and the flusher uses goes through here: the
//! published chunk pointer, chunk lengths and sequence numbers, the full-chunk stack and the
//! pool's free list. Under
//! loom every slot access goes through [`SlotCell`], so loom checks that no slot is ever read
//! and written at the same time, which is the SAFETY argument of every `unsafe` block in the
//! lanes.

#[cfg(scope_loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize};
#[cfg(scope_loom)]
pub(crate) use loom::sync::Mutex;

#[cfg(not(scope_loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize};

pub(crate) use std::sync::atomic::Ordering;

/// A bounded multi-producer multi-consumer queue of owned items, lock-free (crossbeam's
/// `ArrayQueue`): the pool's free chunks, taken by recording threads, given back by the
/// flusher, oldest first.
#[cfg(not(scope_loom))]
pub(crate) struct FreeList<T>(crossbeam_queue::ArrayQueue<T>);

#[cfg(not(scope_loom))]
impl<T> FreeList<T> {
    pub(crate) fn new(capacity: usize) -> Self {
        FreeList(crossbeam_queue::ArrayQueue::new(capacity.max(1)))
    }

    pub(crate) fn pop(&self) -> Option<T> {
        self.0.pop()
    }

    /// Adds `v`; gives it back when the queue is full.
    pub(crate) fn push(&self, v: T) -> Result<(), T> {
        self.0.push(v)
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}

/// The free list in the loom model: a mutex-protected queue loom can explore (crossbeam's
/// queue is not instrumented for loom; the model covers the lane handoff, not the queue).
#[cfg(scope_loom)]
pub(crate) struct FreeList<T>(Mutex<std::collections::VecDeque<T>>);

#[cfg(scope_loom)]
impl<T> FreeList<T> {
    pub(crate) fn new(_capacity: usize) -> Self {
        FreeList(Mutex::new(std::collections::VecDeque::new()))
    }

    pub(crate) fn pop(&self) -> Option<T> {
        lock(&self.0).pop_front()
    }

    pub(crate) fn push(&self, v: T) -> Result<(), T> {
        lock(&self.0).push_back(v);
        Ok(())
    }

    #[allow(dead_code)]
    pub(crate) fn len(&self) -> usize {
        lock(&self.0).len()
    }
}

/// Locks `m`, ignoring poisoning: the data behind our mutexes (queues of chunks, counters)
/// stays consistent whatever a panicking holder was doing.
#[cfg(scope_loom)]
pub(crate) fn lock<T>(m: &Mutex<T>) -> impl std::ops::DerefMut<Target = T> + '_ {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One record slot: an `UnsafeCell` whose accesses loom can track.
#[cfg(not(scope_loom))]
#[repr(transparent)]
pub(crate) struct SlotCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(scope_loom))]
impl<T: Copy> SlotCell<T> {
    pub(crate) fn new(v: T) -> Self {
        SlotCell(std::cell::UnsafeCell::new(v))
    }
}

/// One record slot: an `UnsafeCell` whose accesses loom can track.
#[cfg(scope_loom)]
pub(crate) struct SlotCell<T>(loom::cell::UnsafeCell<T>);

#[cfg(scope_loom)]
impl<T: Copy> SlotCell<T> {
    pub(crate) fn new(v: T) -> Self {
        SlotCell(loom::cell::UnsafeCell::new(v))
    }

    /// Writes the slot (owner only); loom checks no read is concurrent.
    pub(crate) fn write(&self, v: T) {
        // SAFETY: loom verifies the exclusive access this asserts.
        self.0.with_mut(|p| unsafe { p.write(v) })
    }

    /// Reads the slot (flusher); loom checks no write is concurrent.
    pub(crate) fn read(&self) -> T {
        // SAFETY: loom verifies the shared access this asserts.
        self.0.with(|p| unsafe { *p })
    }
}

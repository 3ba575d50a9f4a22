//! Model checks of the lane handoff with loom (`scripts/loom.sh`, in CI).
//!
//! Under `--cfg scope_loom` chunks hold two records, every slot access goes through a loom
//! `UnsafeCell` and every atomic and mutex is loom's, so loom explores the interleavings of a
//! recording thread (push, publish, hand off a full chunk onto the lock-free stack, take one
//! from the pool, wait or drop when the pool is empty, exit) against the flusher (take the
//! stack, drain in batches, read the current chunk, recycle). It fails on any concurrent read and write of a slot, which is the SAFETY
//! argument of the lanes' `unsafe` blocks: the flusher never reads a slot being written, and
//! never reads a chunk after it was recycled. The tests also check what the flusher gets:
//! records in program order, none twice, none lost unless counted as dropped.

use std::sync::Arc;

use loom::thread;

use super::chunk::CHUNK_BYTES;
use super::pool::{Policy, Pool};
use super::record::{Record, LOST};
use super::writer::Writer;
use super::{DrainState, Lane};

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.check(f);
}

fn policy(lossy: bool) -> Policy {
    Policy {
        lossy,
        max_wait: std::time::Duration::from_millis(1),
    }
}

/// Drains `lane` once, appending record ids to `got` (lost markers as `LOST_MARK | id`);
/// returns whether it is finished.
fn drain_once(
    lane: &Lane,
    pool: &Pool,
    st: &mut DrainState,
    max: usize,
    got: &mut Vec<u64>,
) -> bool {
    lane.drain(st, pool, max, |recs| {
        got.extend(recs.iter().map(|r| {
            if r.kind() == LOST {
                LOST_MARK | r.id
            } else {
                r.id
            }
        }))
    })
    .finished
}

const LOST_MARK: u64 = 1 << 40;

/// Runs an owner pushing `n` records against a flusher draining `drains` times, then drains
/// to the end and checks order, uniqueness and accounting.
fn owner_against_flusher(chunks: usize, lossy: bool, n: u64, drains: usize, batch: usize) {
    model(move || {
        let pool = Arc::new(Pool::new(chunks * CHUNK_BYTES, policy(lossy)));
        let lane = Arc::new(Lane::new(0, "owner".into(), 0, 0));
        let owner = {
            let (lane, pool) = (lane.clone(), pool.clone());
            thread::spawn(move || {
                let mut w = Writer::new(lane, pool);
                for id in 1..=n {
                    w.push(Record::exit(id, id));
                }
                // Dropping the writer is the thread's exit: last handoff, then `exited`.
            })
        };
        let mut st = DrainState::default();
        let mut got = Vec::new();
        for _ in 0..drains {
            drain_once(&lane, &pool, &mut st, batch, &mut got);
        }
        owner.join().unwrap();
        let mut rounds = 0;
        while !drain_once(&lane, &pool, &mut st, batch, &mut got) {
            rounds += 1;
            assert!(rounds < 16, "an exited, idle lane must finish");
        }
        let (marks, recs): (Vec<u64>, Vec<u64>) = got.iter().partition(|&&id| id & LOST_MARK != 0);
        assert!(
            recs.windows(2).all(|w| w[0] < w[1]),
            "records out of order or twice: {got:?}"
        );
        let dropped = lane.dropped.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(
            recs.len() as u64 + dropped,
            n,
            "got {got:?}, dropped {dropped}"
        );
        // Every record here is its own span: markers name only dropped ones, in order.
        let marked: Vec<u64> = marks.iter().map(|m| m & !LOST_MARK).collect();
        assert!(marked.iter().all(|m| !recs.contains(m)), "got {got:?}");
        assert!(marked.windows(2).all(|w| w[0] < w[1]), "got {got:?}");
        assert!(pool.allocated() <= pool.max_bytes());
    });
}

#[test]
fn handoff_with_recycling_and_backpressure() {
    // Two chunks of two records for five records: the owner must reuse a chunk the flusher
    // recycled, or wait for it, or (wait bound reached) drop.
    owner_against_flusher(2, false, 5, 2, usize::MAX);
}

#[test]
fn handoff_in_batches_of_one_chunk() {
    owner_against_flusher(3, false, 5, 2, 1);
}

#[test]
fn lossy_drops_are_counted_never_torn() {
    owner_against_flusher(1, true, 4, 2, usize::MAX);
}

#[test]
fn a_finished_lane_has_given_everything() {
    model(|| {
        let pool = Arc::new(Pool::new(2 * CHUNK_BYTES, policy(false)));
        let lane = Arc::new(Lane::new(0, "owner".into(), 0, 0));
        let owner = {
            let (lane, pool) = (lane.clone(), pool.clone());
            thread::spawn(move || {
                let mut w = Writer::new(lane, pool);
                for id in 1..=3 {
                    w.push(Record::exit(id, id));
                }
            })
        };
        let mut st = DrainState::default();
        let mut got = Vec::new();
        let finished = drain_once(&lane, &pool, &mut st, usize::MAX, &mut got);
        let dropped = lane.dropped.load(std::sync::atomic::Ordering::Relaxed);
        if finished {
            assert_eq!(got.len() as u64 + dropped, 3, "finished early: {got:?}");
        }
        owner.join().unwrap();
    });
}

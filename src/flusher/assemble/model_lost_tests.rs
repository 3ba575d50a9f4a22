//! Exact accounting under losses (issue 34): the random programs of [`super::model_tests`]
//! (spans crossing lanes, ids reused on a lane), with records lost in outages at random
//! places, so every kind of record (creation, enter, exit, close) is lost at every position of
//! a span's life, on its own lane or another.
//!
//! The losses go through the writer's real marker list ([`LostList`]): while a lane is in an
//! outage its records are noted there; the markers come back into its stream just before its
//! next written record (the place the flusher feeds them at, see `lane::lost`), each at the
//! tick of the first record it stands for. The streams are then fed to the real assembler in
//! random batches and orders, as in the lossless model.
//!
//! Checked: every span entered and never touched by a loss is exactly its call; every other
//! entered span is one dropped call (in the assembler's count, or the lane's for a span lost
//! whole on one lane); so calls + dropped calls + calls in flight == spans entered, and no
//! record is corrupt.

use super::model_tests::{expected, feed_randomly, program, Placed, Rng, Span};
use crate::recording::lane::lost::LostList;

/// Records of `streams` lost in random outages (`rate`: percent chance an outage starts at a
/// record). Returns the lossy streams, the calls the lanes counted as dropped whole, and the
/// (lane, tick) of every lost record.
fn lose(
    rng: &mut Rng,
    streams: &[Vec<Placed>],
    rate: u64,
) -> (Vec<Vec<Placed>>, u64, Vec<(u64, u64)>) {
    let mut out = Vec::new();
    let mut lane_dropped = 0;
    let mut lost = Vec::new();
    for s in streams {
        let list = LostList::default();
        // The first tick each marker on the list stands for.
        let mut ticks: Vec<u64> = Vec::new();
        let mut lossy: Vec<Placed> = Vec::new();
        let (mut outage, mut chunk) = (false, 0u64);
        let flush = |list: &LostList, ticks: &mut Vec<u64>, lossy: &mut Vec<Placed>| {
            let mut marks = std::collections::VecDeque::new();
            list.take_into(&mut marks);
            lossy.extend(ticks.drain(..).zip(marks.iter().map(|m| m.record())));
        };
        for &(t, r) in s {
            if outage {
                outage = rng.below(100) >= 40;
            } else {
                outage = rng.below(100) < rate;
            }
            if outage {
                let before = list.len();
                if list.note(chunk, &r) {
                    lane_dropped += 1;
                }
                let after = list.len();
                if after > before {
                    ticks.push(t);
                } else if after < before {
                    ticks.pop();
                }
                lost.push((r.id, t));
                continue;
            }
            if list.len() > 0 {
                // The writer got a buffer again: a new chunk, its markers before it.
                chunk += 1;
                flush(&list, &mut ticks, &mut lossy);
            }
            lossy.push((t, r));
        }
        flush(&list, &mut ticks, &mut lossy);
        out.push(lossy);
    }
    (out, lane_dropped, lost)
}

/// Whether span `s` had a record lost: one of `lost` (id, tick) is its own.
fn touched(s: &Span, lost: &[(u64, u64)]) -> bool {
    let from = s.polls.first().map_or(s.close.1 - 1, |p| p.1 - 1);
    lost.iter()
        .any(|&(id, t)| id == s.id && (from..=s.close.1).contains(&t))
}

fn check(seed: u64, implicit: bool, kinds: &mut [u64; 8]) {
    let mut rng = Rng(seed | 1);
    let lanes = 1 + rng.below(4) as u32;
    let n = 1 + rng.below(40) as usize;
    let (spans, streams) = program(&mut rng, lanes, n, implicit);
    let rate = 2 + rng.below(20);
    let (streams, lane_dropped, lost) = lose(&mut rng, &streams, rate);
    for s in &streams {
        for (_, r) in s {
            kinds[r.kind() as usize] += 1;
        }
    }
    let (calls, a) = feed_randomly(&mut rng, &streams, implicit);
    let entered: Vec<&Span> = spans.iter().filter(|s| !s.polls.is_empty()).collect();
    let (hit, whole): (Vec<&Span>, Vec<&Span>) = entered.iter().partition(|s| touched(s, &lost));
    let mut want: Vec<_> = whole.iter().filter_map(|s| expected(s)).collect();
    let mut got: Vec<_> = calls
        .iter()
        .map(|c| (c.start, c.end, c.polls, c.busy))
        .collect();
    want.sort_unstable();
    got.sort_unstable();
    let dropped = a.dropped_calls + lane_dropped;
    if got != want {
        let extra: Vec<_> = got.iter().filter(|g| !want.contains(g)).collect();
        let missing: Vec<_> = want.iter().filter(|g| !got.contains(g)).collect();
        let culprits: Vec<_> = spans
            .iter()
            .filter(|s| {
                s.polls
                    .iter()
                    .any(|p| extra.iter().any(|e| p.1 >= e.0 && p.2 <= e.1))
                    || expected(s).is_some_and(|e| missing.contains(&&e))
            })
            .collect();
        let ids: Vec<u64> = culprits.iter().map(|s| s.id).collect();
        let lanes: Vec<Vec<_>> = streams
            .iter()
            .map(|s| {
                s.iter()
                    .filter(|p| ids.contains(&p.1.id))
                    .map(|p| (p.0, p.1.id, p.1.kind(), p.1.payload() & 3))
                    .collect()
            })
            .collect();
        panic!(
            "seed {seed} (implicit {implicit}): extra {extra:?} missing {missing:?} spans \
             {culprits:?} (all of their ids: {:?}); their records by lane {lanes:?}; lost {:?}",
            spans
                .iter()
                .filter(|s| ids.contains(&s.id))
                .collect::<Vec<_>>(),
            lost.iter()
                .filter(|l| ids.contains(&l.0))
                .collect::<Vec<_>>()
        );
    }
    assert_eq!(
        (got.len() as u64, dropped, a.in_flight(), a.corrupt),
        (want.len() as u64, hit.len() as u64, 0, 0),
        "seed {seed} (implicit {implicit}): calls, dropped, in flight, corrupt; \
         lost {lost:?}; streams {streams:?}; spans {spans:?}"
    );
    assert_eq!(got, want, "seed {seed} (implicit {implicit})");
    assert_eq!(
        got.len() as u64 + dropped + a.in_flight(),
        entered.len() as u64
    );
}

fn run(implicit: bool) {
    let mut kinds = [0u64; 8];
    for seed in 0..10_000u64 {
        check(
            seed.wrapping_mul(0x9E37_79B9_7F4A_7C15),
            implicit,
            &mut kinds,
        );
    }
    // Markers came through, and enough records of each kind were kept to be lost around.
    let lost = crate::recording::lane::record::LOST as usize;
    assert!(kinds[lost] > 1_000, "{kinds:?}");
}

#[test]
fn random_programs_with_losses_count_every_span_once() {
    run(false);
}

#[test]
fn random_programs_without_creation_records_with_losses_count_every_span_once() {
    run(true);
}

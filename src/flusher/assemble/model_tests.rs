//! The assembler against a model of the programs it reads: random span lifetimes on several
//! lanes, fed in random drain orders, must give back exactly the calls the model made.
//!
//! A program is a set of spans, each created on a lane, polled one or more times (on its
//! creation lane, or on others: a future moved between workers; sometimes at once on two
//! lanes), then closed on some lane after its last exit; or never entered. Every record goes
//! to its lane's stream in time order, as the lanes hold them. Span ids are unique, except that
//! a span that lived on one lane only may reuse the id of an earlier such span of that lane
//! once it has closed (the registry gives a freed slot back to its thread); a second front end
//! (`ScopeSubscriber`'s implicit instances) leaves out the creation records and flags the
//! creating thread's first enter.
//!
//! The flusher's side: lanes are read in random batches, in random order; after each batch a
//! lane whose stream is read to its end says so ([`Assembler::caught_up`]) up to the tick of
//! its next record, and the watermark (the least tick every lane is read up to) completes what
//! it passed. At the end every span that was entered is exactly one call, with the start of
//! its first enter, the end of its last exit, its number of polls and their summed time; none
//! is lost, orphaned, corrupt or left in flight.

use super::tests::{next_drain, META};
use super::*;
use crate::recording::region::Callsites;

/// A small deterministic generator (xorshift64*): a failing seed reproduces its program.
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub(super) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// One span of a program, as the model made it.
#[derive(Debug, Clone)]
pub(super) struct Span {
    pub(super) id: u64,
    pub(super) created: u32,
    /// (lane, enter tick, exit tick).
    pub(super) polls: Vec<(u32, u64, u64)>,
    /// (lane, tick) of its close.
    pub(super) close: (u32, u64),
}

/// A record on its lane at its tick (the tick orders a lane's stream; `NEW` and `CLOSE`
/// records carry none themselves).
pub(super) type Placed = (u64, Record);

/// Makes a program of `spans` spans on `lanes` lanes; returns the spans and each lane's
/// stream. `implicit`: `ScopeSubscriber`'s ids (unique, no creation record).
pub(super) fn program(
    rng: &mut Rng,
    lanes: u32,
    spans: usize,
    implicit: bool,
) -> (Vec<Span>, Vec<Vec<Placed>>) {
    let mut streams: Vec<Vec<Placed>> = vec![Vec::new(); lanes as usize];
    let mut out = Vec::new();
    // Per lane: the ids of its closed one-lane spans, free for reuse, and the lane's clock.
    let mut free_ids: Vec<Vec<u64>> = vec![Vec::new(); lanes as usize];
    let mut next_id = 1u64;
    let mut clock = 10u64;
    for _ in 0..spans {
        let created = rng.below(u64::from(lanes)) as u32;
        let one_lane = rng.below(3) != 0;
        let reuse = !implicit && one_lane && rng.below(2) == 0;
        let id = match free_ids[created as usize].pop().filter(|_| reuse) {
            Some(id) => id,
            None => {
                next_id += 1;
                // `ScopeSubscriber`'s ids carry their callsite's index (0 here) + 1 above the
                // sequence (see `recording::subscriber::spans`).
                if implicit {
                    (1 << 44) | next_id
                } else {
                    next_id
                }
            }
        };
        // Spans are made one after the other in time, each a little apart: ticks are unique.
        clock += 1 + rng.below(5) * 10;
        let n_polls = rng.below(5); // 0: never entered
        let mut polls = Vec::new();
        for _ in 0..n_polls {
            let lane = if one_lane {
                created
            } else {
                rng.below(u64::from(lanes)) as u32
            };
            clock += 1 + rng.below(40);
            let start = clock;
            clock += 1 + rng.below(40);
            polls.push((lane, start, clock));
        }
        clock += 1 + rng.below(10);
        let close_lane = if one_lane {
            created
        } else {
            rng.below(u64::from(lanes)) as u32
        };
        let span = Span {
            id,
            created,
            polls,
            close: (close_lane, clock),
        };
        place(&span, implicit, &mut streams);
        if one_lane {
            free_ids[created as usize].push(id);
        }
        out.push(span);
    }
    for s in &mut streams {
        s.sort_by_key(|(t, _)| *t);
    }
    (out, streams)
}

/// Puts the records of span `s` on their lanes.
fn place(s: &Span, implicit: bool, streams: &mut [Vec<Placed>]) {
    let first_enter = s.polls.first().map(|p| p.1);
    if !implicit {
        // The creation just before its first enter, or at its own time when never entered.
        let t = first_enter.map_or(s.close.1 - 1, |t| t - 1);
        streams[s.created as usize].push((t, Record::new_span(s.id, &META)));
    }
    // `ScopeSubscriber` flags its creating thread's first enter of the span (the spans of
    // a program here are created one after the other, so it is the one created last).
    let fresh = s
        .polls
        .iter()
        .position(|p| p.0 == s.created)
        .filter(|_| implicit);
    for (k, &(lane, start, end)) in s.polls.iter().enumerate() {
        let enter = if fresh == Some(k) {
            Record::enter_fresh(s.id, start)
        } else {
            Record::enter(s.id, start)
        };
        streams[lane as usize].push((start, enter));
        streams[lane as usize].push((end, Record::exit(s.id, end)));
    }
    streams[s.close.0 as usize].push((s.close.1, Record::close(s.id)));
}

/// Feeds the lanes' streams in random batches and order, moving the watermark as the
/// flusher does; returns the calls completed and the assembler.
pub(super) fn feed_randomly(
    rng: &mut Rng,
    streams: &[Vec<Placed>],
    implicit: bool,
) -> (Vec<RawCall>, Assembler) {
    let callsites = Arc::new(Callsites::default());
    callsites.register(&META);
    let mut a = Assembler::new(callsites);
    if implicit {
        let sites = Arc::new(crate::recording::subscriber::SpanSites::new());
        sites.register(&META);
        a.implicit = Some(Implicit::new(sites));
    }
    let mut out = Vec::new();
    let mut at = vec![0usize; streams.len()];
    let mut read = vec![0u64; streams.len()];
    while at.iter().zip(streams).any(|(&i, s)| i < s.len()) {
        let lane = rng.below(streams.len() as u64) as usize;
        let s = &streams[lane];
        let n = (rng.below(6) as usize).min(s.len() - at[lane]);
        let batch: Vec<Record> = s[at[lane]..at[lane] + n].iter().map(|p| p.1).collect();
        a.feed(lane as u32, &batch, &mut out);
        at[lane] += n;
        // What the flusher knows: everything before the lane's next record is read.
        let next = s.get(at[lane]).map_or(u64::MAX - 1, |p| p.0);
        if let Some(last) = s[..at[lane]].last() {
            read[lane] = read[lane].max(last.0);
        }
        if next > read[lane] + 1 {
            read[lane] = next - 1;
            a.caught_up(lane as u32, read[lane]);
        }
        let wm = *read.iter().min().expect("a lane");
        a.complete(wm, &mut out);
    }
    next_drain(&mut a, &mut out);
    (out, a)
}

/// The call the model expects of a span that was entered.
pub(super) fn expected(s: &Span) -> Option<(u64, u64, u32, u64)> {
    let start = s.polls.iter().map(|p| p.1).min()?;
    let end = s.polls.iter().map(|p| p.2).max()?;
    let busy: u64 = s.polls.iter().map(|p| p.2 - p.1).sum();
    Some((start, end, s.polls.len() as u32, busy.min(end - start)))
}

fn check(seed: u64, implicit: bool) {
    let mut rng = Rng(seed | 1);
    let lanes = 1 + rng.below(4) as u32;
    let n = 1 + rng.below(40) as usize;
    let (spans, streams) = program(&mut rng, lanes, n, implicit);
    let (calls, a) = feed_randomly(&mut rng, &streams, implicit);
    let mut want: Vec<_> = spans.iter().filter_map(expected).collect();
    let mut got: Vec<_> = calls
        .iter()
        .map(|c| (c.start, c.end, c.polls, c.busy))
        .collect();
    want.sort_unstable();
    got.sort_unstable();
    let missing: Vec<_> = want.iter().filter(|w| !got.contains(w)).collect();
    let extra: Vec<_> = got.iter().filter(|g| !want.contains(g)).collect();
    assert!(
        missing.is_empty() && extra.is_empty() && got.len() == want.len(),
        "seed {seed} (implicit {implicit}): missing {missing:?}, unexpected {extra:?}; \
         {lanes} lanes; the missing spans and those sharing their ids: {:?}",
        spans
            .iter()
            .filter(|s| missing.iter().any(|m| expected(s).as_ref() == Some(*m)))
            .flat_map(|m| spans.iter().filter(move |s| s.id == m.id))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        (a.orphans, a.corrupt, a.dropped_calls, a.in_flight()),
        (0, 0, 0, 0),
        "seed {seed} (implicit {implicit})"
    );
}

#[test]
fn random_programs_give_back_every_call_exactly() {
    for seed in 0..3_000u64 {
        check(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15), false);
    }
}

#[test]
fn random_programs_without_creation_records_give_back_every_call_exactly() {
    for seed in 0..3_000u64 {
        check(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15), true);
    }
}

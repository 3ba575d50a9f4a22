//! Where each rank's rows go in a multi-rank file written in parallel: the layout every rank
//! computes for itself from a few collectives, so that no rank needs another's rows.
//!
//! The file's tables (`rank_region_index`, `events`, `thread_table`, `task_table`) hold the
//! ranks' rows back to back in rank order, as the relay's merge appends them. A rank's first
//! row in each table is the sum of the rows of the ranks before it (an exclusive prefix sum,
//! `MPI_Exscan`), the tables' lengths the sums over all ranks ([`Place`]). Region ids are
//! unified over ranks in order of first appearance, rank by rank and row by row, as the merge
//! numbers them ([`Names`]). [`places`] computes every rank's place in one process, as the
//! scan does across processes (tests and the scaling model).

use std::collections::HashMap;

/// Rows one rank brings to each table of the file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    /// `rank_region_index` rows (its regions with calls, the session row included).
    pub rows: u64,
    /// Calls (`events/*` elements).
    pub events: u64,
    /// `thread_table` rows.
    pub threads: u64,
    /// `task_table` rows.
    pub tasks: u64,
}

impl Counts {
    /// As the array the collectives add up.
    pub(crate) fn to_array(self) -> [u64; 4] {
        [self.rows, self.events, self.threads, self.tasks]
    }

    /// From the array the collectives added up.
    pub(crate) fn from_array(a: [u64; 4]) -> Counts {
        Counts {
            rows: a[0],
            events: a[1],
            threads: a[2],
            tasks: a[3],
        }
    }

    /// Element-wise sum; `None` on overflow.
    fn checked_add(self, o: Counts) -> Option<Counts> {
        Some(Counts {
            rows: self.rows.checked_add(o.rows)?,
            events: self.events.checked_add(o.events)?,
            threads: self.threads.checked_add(o.threads)?,
            tasks: self.tasks.checked_add(o.tasks)?,
        })
    }

    /// Whether every count is at most `o`'s.
    fn within(self, o: Counts) -> bool {
        let (a, b) = (self.to_array(), o.to_array());
        a.iter().zip(&b).all(|(x, y)| x <= y)
    }
}

/// One rank's place in the file: its first row in each table and the tables' lengths.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Place {
    /// The rows of the ranks before this one.
    pub first: Counts,
    /// This rank's rows.
    pub mine: Counts,
    /// The rows of all ranks.
    pub total: Counts,
}

impl Place {
    /// From the exclusive scan (`first`), this rank's own counts and the sums over ranks.
    ///
    /// # Errors
    /// The counts do not add up (this rank's rows would end past a table's end).
    pub(crate) fn new(first: Counts, mine: Counts, total: Counts) -> Result<Place, String> {
        match first.checked_add(mine) {
            Some(end) if end.within(total) => Ok(Place { first, mine, total }),
            _ => Err(format!(
                "the ranks' row counts do not add up: first {first:?} + own {mine:?} > total \
                 {total:?}"
            )),
        }
    }

    /// This rank's range of `table` rows (`rows`, `events`, `threads`, `tasks`).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn range(&self, pick: fn(Counts) -> u64) -> std::ops::Range<u64> {
        let at = pick(self.first);
        at..at + pick(self.mine)
    }
}

/// Every rank's place, computed in one process as the exclusive scan computes it across
/// processes.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) fn places(all: &[Counts]) -> Result<Vec<Place>, String> {
    let mut total = Counts::default();
    for c in all {
        total = total
            .checked_add(*c)
            .ok_or_else(|| "the ranks' row counts overflow".to_string())?;
    }
    let mut first = Counts::default();
    let mut out = Vec::with_capacity(all.len());
    for c in all {
        out.push(Place::new(first, *c, total)?);
        first = first
            .checked_add(*c)
            .ok_or_else(|| "the ranks' row counts overflow".to_string())?;
    }
    Ok(out)
}

/// Region names unified over ranks: ids in order of first appearance.
#[derive(Debug, Default)]
pub(crate) struct Names {
    /// `region_table/names`.
    pub names: Vec<String>,
    ids: HashMap<String, u32>,
}

impl Names {
    /// Adds one rank's row names (in row order), returning their ids.
    pub(crate) fn add<'a>(&mut self, rows: impl IntoIterator<Item = &'a str>) -> Vec<u32> {
        rows.into_iter()
            .map(|name| match self.ids.get(name) {
                Some(&id) => id,
                None => {
                    let id = self.names.len() as u32;
                    self.ids.insert(name.to_owned(), id);
                    self.names.push(name.to_owned());
                    id
                }
            })
            .collect()
    }

    /// The unified table (`names` in id order), as every rank gets it from rank 0.
    pub(crate) fn of_table(names: Vec<String>) -> Names {
        let ids = names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.clone(), i as u32))
            .collect();
        Names { names, ids }
    }

    /// The id of `name`.
    pub(crate) fn id(&self, name: &str) -> Option<u32> {
        self.ids.get(name).copied()
    }
}

/// A list of strings as bytes: per string its length (u32 LE) and its UTF-8 bytes.
pub(crate) fn encode_strs<'a>(strs: impl IntoIterator<Item = &'a str>) -> Vec<u8> {
    let mut out = Vec::new();
    for s in strs {
        out.extend_from_slice(&(s.len() as u32).to_le_bytes());
        out.extend_from_slice(s.as_bytes());
    }
    out
}

/// The strings [`encode_strs`] wrote; `None` when the bytes are cut short.
pub(crate) fn decode_strs(mut b: &[u8]) -> Option<Vec<String>> {
    let mut out = Vec::new();
    while !b.is_empty() {
        let len = u32::from_le_bytes(b.get(..4)?.try_into().ok()?) as usize;
        let s = b.get(4..4 + len)?;
        out.push(String::from_utf8_lossy(s).into_owned());
        b = &b[4 + len..];
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rank's counts that differ from rank to rank, some of them empty.
    fn counts(k: u64) -> Counts {
        Counts {
            rows: 1 + k % 7,
            events: (k * 7919) % 100_003 * (k % 3),
            threads: k % 4,
            tasks: (k * 31) % 1000 * u64::from(k.is_multiple_of(5)),
        }
    }

    /// 10 000 simulated ranks: the places tile every table exactly, in rank order, and each
    /// rank's place is what the scan's three numbers give it.
    #[test]
    fn ten_thousand_ranks_tile_every_table_in_rank_order() {
        let n = 10_000u64;
        let all: Vec<Counts> = (0..n).map(counts).collect();
        let ps = places(&all).unwrap();
        assert_eq!(ps.len(), n as usize);
        let total = ps[0].total;
        let sum = |f: fn(Counts) -> u64| all.iter().map(|c| f(*c)).sum::<u64>();
        let pickers: [fn(Counts) -> u64; 4] =
            [|c| c.rows, |c| c.events, |c| c.threads, |c| c.tasks];
        for pick in pickers {
            assert_eq!(pick(total), sum(pick));
            let mut at = 0;
            for (k, p) in ps.iter().enumerate() {
                let r = p.range(pick);
                assert_eq!(
                    r.start,
                    at,
                    "rank {k} starts where rank {} ended",
                    k as i64 - 1
                );
                assert_eq!(r.end - r.start, pick(all[k]));
                at = r.end;
            }
            assert_eq!(at, pick(total), "the last rank ends at the table's end");
        }
        for (k, p) in ps.iter().enumerate() {
            assert_eq!(Place::new(p.first, all[k], total), Ok(*p));
            assert_eq!(p.total, total);
        }
    }

    #[test]
    fn counts_that_do_not_add_up_are_an_error() {
        let c = Counts::from_array([2, 10, 1, 0]);
        let total = Counts::from_array([3, 10, 1, 0]);
        assert!(Place::new(Counts::from_array([1, 0, 0, 0]), c, total).is_ok());
        let err = Place::new(Counts::from_array([2, 0, 0, 0]), c, total).unwrap_err();
        assert!(err.contains("do not add up"), "{err}");
        let huge = Counts::from_array([u64::MAX, 0, 0, 0]);
        assert!(places(&[huge, huge]).is_err());
    }

    /// Ids in order of first appearance over 10 000 ranks, each with its own mix of shared
    /// and private names; every rank that maps its rows through the unified table (what rank
    /// 0 broadcasts) gets the ids the unification gave them.
    #[test]
    fn names_unify_in_order_of_first_appearance_over_ten_thousand_ranks() {
        let rows = |k: u32| -> Vec<String> {
            let mut v = vec!["scope_profiler.session".to_string(), "solve".into()];
            if k % 1000 == 7 {
                v.push(format!("only_rank_{k}"));
            }
            if k >= 5000 {
                v.insert(1, "late".into());
            }
            v
        };
        let mut unified = Names::default();
        let mut given = Vec::new();
        for k in 0..10_000 {
            let r = rows(k);
            given.push(unified.add(r.iter().map(String::as_str)));
        }
        assert_eq!(
            &unified.names[..3],
            ["scope_profiler.session", "solve", "only_rank_7"]
        );
        assert_eq!(unified.id("late"), Some(7)); // after only_rank_{7,1007,...,4007}
        assert_eq!(unified.names.len(), 2 + 10 + 1);
        let table = decode_strs(&encode_strs(unified.names.iter().map(String::as_str))).unwrap();
        let everyone = Names::of_table(table);
        for k in [0u32, 7, 4999, 5000, 9007, 9999] {
            let ids: Vec<u32> = rows(k).iter().map(|n| everyone.id(n).unwrap()).collect();
            assert_eq!(ids, given[k as usize], "rank {k}");
        }
    }

    #[test]
    fn string_lists_round_trip_and_cut_lists_are_refused() {
        let v = ["", "a", "région", "x\u{0}y"];
        let b = encode_strs(v);
        assert_eq!(decode_strs(&b).unwrap(), v);
        assert_eq!(decode_strs(&b[..b.len() - 1]), None);
    }
}

//! What one rank tells the others about its phase before anything is written: its row counts
//! (scanned into [`Place`](crate::mpi::layout::Place)s), which optional event columns it has and
//! the widths of its strings (both reduced to their maximum over ranks: the file's
//! [`Union`]), and, to rank 0 only, its region names, host name and poll counts ([`Info`]).

use crate::data::rows::PhaseData;
use crate::mpi::layout::{decode_strs, encode_strs, Counts};
use crate::output::events::{Optional, Scan};
use crate::output::hdf5::lanes::{coro_name, task_name};

use super::fixed::width_of;

/// The fixed-length string columns, in [`Union::widths`] order; the last width is that of
/// every rank's `scope_profiler_rs/rank<N>/region_names`.
pub(super) const STRING_COLS: [&str; 7] = [
    "rank_region_index/source_files",
    "rank_region_index/source_texts",
    "rank_region_index/tags",
    "thread_table/name",
    "task_table/kind",
    "task_table/name",
    "task_table/coro_name",
];

/// Every index row's tags (the reference writes a JSON list; this crate has none).
pub(super) const TAGS: &str = "[]";
/// Every task row's kind.
pub(super) const TASK_KIND: &str = "task";

/// One rank's phase as the layout sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Shape {
    pub counts: Counts,
    /// Its optional event columns.
    pub want: Optional,
    /// Widest value of each of [`STRING_COLS`] and of the poll region names (bytes).
    pub widths: [u64; WIDTHS],
}

/// Widths in [`Shape::widths`].
pub(super) const WIDTHS: usize = STRING_COLS.len() + 1;

/// What the file holds over all ranks: the union of the optional event columns and the
/// widest value of each string column.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Union {
    pub want: Optional,
    pub widths: [u64; WIDTHS],
}

/// Whether this phase has a `thread_table` (as the single-rank writer decides).
pub(super) fn has_threads(data: &PhaseData) -> bool {
    data.track_threads && !data.threads.is_empty()
}

/// Whether this phase has a `task_table`.
pub(super) fn has_tasks(data: &PhaseData) -> bool {
    data.track_async && !data.tasks.is_empty()
}

/// The source text of row `i` ("" when none was captured).
pub(super) fn source_text(data: &PhaseData, i: usize) -> &str {
    data.extra.source_texts.get(i).map_or("", String::as_str)
}

impl Shape {
    /// The shape of a sound phase.
    pub(super) fn of(data: &PhaseData, scan: &Scan) -> Shape {
        let rows = data.regions.len();
        let max = |it: &mut dyn Iterator<Item = &str>| it.map(width_of).max().unwrap_or(0);
        let mut widths = [0u64; WIDTHS];
        widths[0] = max(&mut data.regions.iter().map(|r| r.file.as_str()));
        widths[1] = max(&mut (0..rows).map(|i| source_text(data, i)));
        widths[2] = if rows > 0 { width_of(TAGS) } else { 0 };
        let threads = if has_threads(data) {
            &data.threads[..]
        } else {
            &[]
        };
        let tasks = if has_tasks(data) {
            &data.tasks[..]
        } else {
            &[]
        };
        widths[3] = max(&mut threads.iter().map(|t| t.name.as_str()));
        if let Some(widest) = tasks.iter().max_by_key(|t| t.tokio_id) {
            widths[4] = width_of(TASK_KIND);
            let mut name = String::new();
            task_name(&mut name, data, widest);
            widths[5] = width_of(&name);
            if tasks.iter().any(|t| t.sched.site != 0) {
                // Named from their spawn sites: the widest of all.
                for t in tasks {
                    name.clear();
                    task_name(&mut name, data, t);
                    widths[5] = widths[5].max(width_of(&name));
                }
            }
        }
        widths[6] = max(&mut tasks.iter().map(|t| coro_name(data, t)));
        if !data.polls.is_empty() {
            widths[7] = max(&mut data.region_names.iter().map(String::as_str));
        }
        Shape {
            counts: Counts {
                rows: rows as u64,
                events: scan.total(),
                threads: threads.len() as u64,
                tasks: tasks.len() as u64,
            },
            want: scan.want,
            widths,
        }
    }

    /// What is reduced to its maximum over ranks: the optional columns, then the widths.
    pub(super) fn maxes(&self) -> Vec<u64> {
        let w = self.want;
        let mut v: Vec<u64> = [w.threads, w.tasks, w.gpu, w.ids]
            .into_iter()
            .map(u64::from)
            .collect();
        v.extend_from_slice(&self.widths);
        v
    }
}

impl Union {
    /// From the maxima of [`Shape::maxes`] over ranks.
    pub(super) fn of_maxes(m: &[u64]) -> Union {
        let at = |i: usize| m.get(i).copied().unwrap_or(0);
        let mut widths = [0u64; WIDTHS];
        for (i, w) in widths.iter_mut().enumerate() {
            *w = at(4 + i);
        }
        Union {
            want: Optional {
                threads: at(0) > 0,
                tasks: at(1) > 0,
                gpu: at(2) > 0,
                ids: at(3) > 0,
                // Not in multi-rank files (see `events::Optional::sched`).
                sched: false,
            },
            widths,
        }
    }
}

/// What rank 0 needs from each rank to create the file: its row names (in row order), host
/// name, poll count and the number of region names its polls refer to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Info {
    pub names: Vec<String>,
    pub hostname: String,
    pub polls: Polls,
}

/// A rank's polls: how many, and how many region names they refer to (both 0 without).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Polls {
    pub rows: u64,
    pub names: u64,
}

impl Info {
    /// This rank's info.
    pub(super) fn of(data: &PhaseData, hostname: String) -> Info {
        let polls = match data.polls.len() {
            0 => Polls::default(),
            n => Polls {
                rows: n as u64,
                names: data.region_names.len() as u64,
            },
        };
        Info {
            names: data.regions.iter().map(|r| r.name.clone()).collect(),
            hostname,
            polls,
        }
    }

    /// As bytes: the poll counts (u64 LE each), then the host name and the names (see
    /// [`encode_strs`]).
    pub(super) fn encode(&self) -> Vec<u8> {
        let mut out = self.polls.rows.to_le_bytes().to_vec();
        out.extend_from_slice(&self.polls.names.to_le_bytes());
        let strs =
            std::iter::once(self.hostname.as_str()).chain(self.names.iter().map(String::as_str));
        out.extend(encode_strs(strs));
        out
    }

    /// What [`encode`](Self::encode) wrote; `None` when cut short.
    pub(super) fn decode(b: &[u8]) -> Option<Info> {
        let rows = u64::from_le_bytes(b.get(..8)?.try_into().ok()?);
        let names = u64::from_le_bytes(b.get(8..16)?.try_into().ok()?);
        let mut strs = decode_strs(&b[16..])?.into_iter();
        let hostname = strs.next()?;
        Some(Info {
            names: strs.collect(),
            hostname,
            polls: Polls { rows, names },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maxes_round_trip_into_the_union() {
        let s = Shape {
            counts: Counts::default(),
            want: Optional {
                threads: true,
                tasks: false,
                gpu: true,
                ids: false,
                sched: false,
            },
            widths: [1, 2, 3, 4, 5, 6, 7, 8],
        };
        let u = Union::of_maxes(&s.maxes());
        assert_eq!(
            (u.want.threads, u.want.tasks, u.want.gpu, u.want.ids),
            (true, false, true, false)
        );
        assert_eq!(u.widths, s.widths);
    }

    #[test]
    fn info_round_trips() {
        let i = Info {
            names: vec!["a".into(), "".into(), "ß".into()],
            hostname: "node-1".into(),
            polls: Polls { rows: 42, names: 3 },
        };
        assert_eq!(Info::decode(&i.encode()), Some(i.clone()));
        assert_eq!(Info::decode(&i.encode()[..12]), None);
    }
}

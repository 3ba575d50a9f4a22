//! Streaming the per-call and per-poll columns in bounded chunks, checking every value that
//! later stages rely on (times in range, lane indices that a table row has, region ids).

use std::ops::Range;

use ::hdf5::Dataset;

use super::columns::{read_range, H5};
use super::{Call, EventColumns, IndexRow, Poll, Profile, ReadError};

/// Largest lane index accepted in files without a lane table (a bit flip must not make the
/// reader allocate per-lane state for a billion lanes).
const MAX_LANES_WITHOUT_TABLE: i64 = 1 << 20;

/// Largest absolute time (ns, ~73 years) accepted for a start or end: nesting doubles times,
/// and a bit flip in a high bit must be an error, not an overflow.
const MAX_TIME: i64 = 1 << 61;

/// Whether `start..start + dur` lies in the accepted time range.
fn time_ok(start: i64, dur: i64) -> bool {
    start
        .checked_add(dur)
        .is_some_and(|end| start.abs() < MAX_TIME && end.abs() < MAX_TIME)
}

impl Profile {
    /// Checks a lane index against its table (or a sane bound without one).
    fn check_lane(&self, what: &str, v: i64, table_len: usize, k: u64) -> Result<i64, ReadError> {
        let bound = if table_len > 0 {
            table_len as i64
        } else {
            MAX_LANES_WITHOUT_TABLE
        };
        if v < -1 || v >= bound {
            return Err(self.err(format!(
                "{what}[{k}] = {v} is not a valid index (expected -1..{})",
                bound - 1
            )));
        }
        Ok(v)
    }

    /// Streams every call, row by row in offset order, in chunks of at most `chunk` calls:
    /// `f(row, calls)`. Peak memory is a few chunk-sized buffers.
    ///
    /// # Errors
    /// A [`ReadError`] when a column cannot be read or holds an impossible value (a start that
    /// overflows, a lane index that no table row has), or the error `f` returns.
    pub fn for_each_call<F>(&self, chunk: usize, mut f: F) -> Result<(), ReadError>
    where
        F: FnMut(&IndexRow, &[Call]) -> Result<(), ReadError>,
    {
        let Some(cols) = &self.columns else {
            return Ok(());
        };
        let chunk = chunk.max(1);
        let err = |p: String| self.err(p);
        let mut rows: Vec<&IndexRow> = self.rows.iter().filter(|r| r.count > 0).collect();
        rows.sort_by_key(|r| r.offset);
        let mut buf: Vec<Call> = Vec::with_capacity(chunk);
        for row in rows {
            let mut previous = 0i64;
            let mut done = 0u64;
            while done < row.count {
                let len = (row.count - done).min(chunk as u64) as usize;
                let a = (row.offset + done) as usize;
                let read = ChunkColumns::read(cols, a..a + len, &err)?;
                buf.clear();
                self.decode_calls(cols.deltas, &read, a, &mut previous, &mut buf)?;
                f(row, &buf)?;
                done += len as u64;
            }
        }
        Ok(())
    }

    /// Decodes one chunk of event columns (`c`, starting at event `a`) into `buf`, checking
    /// every value; `previous` is the row's last start so far (`deltas`: starts are deltas).
    fn decode_calls(
        &self,
        deltas: bool,
        c: &ChunkColumns,
        a: usize,
        previous: &mut i64,
        buf: &mut Vec<Call>,
    ) -> Result<(), ReadError> {
        let threads_per_rank = self.threads.len();
        for i in 0..c.len {
            let k = (a + i) as u64;
            let start = if deltas {
                previous.checked_add(c.starts[i]).ok_or_else(|| {
                    self.err(format!("events/start_deltas[{k}] overflows the start time"))
                })?
            } else {
                c.starts[i]
            };
            *previous = start;
            let dur = if deltas {
                c.ends[i]
            } else {
                c.ends[i].wrapping_sub(start)
            }
            .max(0);
            if !time_ok(start, dur) {
                return Err(self.err(format!(
                    "event {k}: start {start} ns + duration {dur} ns is out of range \
                     (times must stay below 2^61 ns)"
                )));
            }
            let thread = match &c.threads {
                Some(t) => self.check_lane("events/thread_ids", t[i], threads_per_rank, k)?,
                None => -1,
            };
            let task = match &c.tasks {
                Some(t) => self.check_lane("events/task_ids", t[i], self.tasks.len(), k)?,
                None => -1,
            };
            buf.push(Call {
                start_ns: start,
                dur_ns: dur,
                thread,
                task,
                gpu_ns: c.gpu.as_ref().map_or(-1, |g| g[i].max(-1)),
                scheduled_ns: c.sched.as_ref().map_or(-1, |g| g[i].max(-1)),
                await_ns: c.awaits.as_ref().map_or(0, |a| a[i].clamp(0, dur)),
            });
        }
        Ok(())
    }

    /// Streams only the calls' durations (ns, >= 0), row by row in offset order, in chunks of
    /// at most `chunk`: `f(row, durations)`. Reads one column (two for schema-2 files), so it
    /// is the cheap way to get per-call statistics of a large file.
    ///
    /// # Errors
    /// A [`ReadError`] when the column cannot be read or a duration is out of range (2^61 ns
    /// or more), or the error `f` returns.
    pub fn for_each_duration<F>(&self, chunk: usize, mut f: F) -> Result<(), ReadError>
    where
        F: FnMut(&IndexRow, &[i64]) -> Result<(), ReadError>,
    {
        let Some(cols) = &self.columns else {
            return Ok(());
        };
        let chunk = chunk.max(1);
        let err = |p: String| self.err(p);
        let mut rows: Vec<&IndexRow> = self.rows.iter().filter(|r| r.count > 0).collect();
        rows.sort_by_key(|r| r.offset);
        for row in rows {
            let mut done = 0u64;
            while done < row.count {
                let len = (row.count - done).min(chunk as u64) as usize;
                let a = (row.offset + done) as usize;
                let range = a..a + len;
                let name = if cols.deltas {
                    "events/durations"
                } else {
                    "events/end_times"
                };
                let mut durs: Vec<i64> = read_range(&cols.ends, name, range.clone(), &err)?;
                if !cols.deltas {
                    let starts: Vec<i64> =
                        read_range(&cols.starts, "events/start_times", range, &err)?;
                    for (d, s) in durs.iter_mut().zip(&starts) {
                        *d = d.wrapping_sub(*s);
                    }
                }
                for (i, d) in durs.iter_mut().enumerate() {
                    *d = (*d).max(0);
                    if *d >= MAX_TIME {
                        return Err(err(format!(
                            "event {}: duration {d} ns is out of range (below 2^61 ns expected)",
                            a + i
                        )));
                    }
                }
                f(row, &durs)?;
                done += len as u64;
            }
        }
        Ok(())
    }

    /// Streams the polls of `/scope_profiler_rs/polls` in chunks of at most `chunk`.
    ///
    /// # Errors
    /// As [`Profile::for_each_call`].
    pub fn for_each_poll<F>(&self, chunk: usize, mut f: F) -> Result<(), ReadError>
    where
        F: FnMut(&[Poll]) -> Result<(), ReadError>,
    {
        let Some((names, n)) = &self.polls else {
            return Ok(());
        };
        // Reopen the columns (cheap) rather than keep five more datasets in the struct.
        let file = &self._file;
        let err = |p: String| self.err(p);
        let h5 = H5 { file, err: &err };
        let open = |c: &str| {
            h5.int_dataset(&format!("scope_profiler_rs/polls/{c}"))
                .map(|x| x.0)
        };
        let (reg, st, du, th, ta) = (
            open("region_ids")?,
            open("start_ns")?,
            open("durations")?,
            open("thread_ids")?,
            open("task_ids")?,
        );
        let sc = h5
            .exists("scope_profiler_rs/polls/scheduled_ns")
            .then(|| open("scheduled_ns"))
            .transpose()?;
        let chunk = chunk.max(1) as u64;
        let mut buf = Vec::with_capacity(chunk as usize);
        let mut done = 0u64;
        while done < *n {
            let len = (n - done).min(chunk) as usize;
            let a = done as usize;
            let range = a..a + len;
            let regions: Vec<i64> = read_range(&reg, "polls/region_ids", range.clone(), &err)?;
            let starts: Vec<i64> = read_range(&st, "polls/start_ns", range.clone(), &err)?;
            let durs: Vec<i64> = read_range(&du, "polls/durations", range.clone(), &err)?;
            let threads: Vec<i64> = read_range(&th, "polls/thread_ids", range.clone(), &err)?;
            let tasks: Vec<i64> = read_range(&ta, "polls/task_ids", range.clone(), &err)?;
            let sched: Option<Vec<i64>> = sc
                .as_ref()
                .map(|d| read_range(d, "polls/scheduled_ns", range, &err))
                .transpose()?;
            buf.clear();
            for i in 0..len {
                let k = (a + i) as u64;
                if regions[i] < 0 || regions[i] >= names.len() as i64 {
                    return Err(err(format!(
                        "scope_profiler_rs/polls/region_ids[{k}] = {} is out of range",
                        regions[i]
                    )));
                }
                let dur = durs[i].max(0);
                if !time_ok(starts[i], dur) {
                    return Err(err(format!(
                        "poll {k}: start {} ns + duration {dur} ns is out of range \
                         (times must stay below 2^61 ns)",
                        starts[i]
                    )));
                }
                let thread =
                    self.check_lane("polls/thread_ids", threads[i], self.threads.len(), k)?;
                let task = self.check_lane("polls/task_ids", tasks[i], self.tasks.len(), k)?;
                buf.push(Poll {
                    region: regions[i] as u32,
                    start_ns: starts[i],
                    dur_ns: dur,
                    thread,
                    task,
                    scheduled_ns: sched.as_ref().map_or(-1, |s| s[i].max(-1)),
                });
            }
            f(&buf)?;
            done += len as u64;
        }
        Ok(())
    }
}

/// One chunk of the event columns, read for [`Profile::for_each_call`].
struct ChunkColumns {
    /// Events in the chunk.
    len: usize,
    /// Start deltas or start times.
    starts: Vec<i64>,
    /// Durations or end times.
    ends: Vec<i64>,
    threads: Option<Vec<i64>>,
    tasks: Option<Vec<i64>>,
    gpu: Option<Vec<i64>>,
    sched: Option<Vec<i64>>,
    awaits: Option<Vec<i64>>,
}

impl ChunkColumns {
    /// Reads the events `range` of every column of `cols` the file has.
    fn read(
        cols: &EventColumns,
        range: Range<usize>,
        err: &dyn Fn(String) -> ReadError,
    ) -> Result<ChunkColumns, ReadError> {
        let col = |ds: &Option<Dataset>, name: &str| -> Result<Option<Vec<i64>>, ReadError> {
            ds.as_ref()
                .map(|d| read_range(d, name, range.clone(), err))
                .transpose()
        };
        Ok(ChunkColumns {
            len: range.len(),
            starts: read_range(&cols.starts, "events/start_deltas", range.clone(), err)?,
            ends: read_range(&cols.ends, "events/durations", range.clone(), err)?,
            threads: col(&cols.thread_ids, "events/thread_ids")?,
            tasks: col(&cols.task_ids, "events/task_ids")?,
            gpu: col(&cols.gpu, "events/gpu_durations")?,
            sched: col(&cols.scheduled, "scope_profiler_rs/call_scheduled_ns")?,
            awaits: col(&cols.awaits, "events/await_ns")?,
        })
    }
}

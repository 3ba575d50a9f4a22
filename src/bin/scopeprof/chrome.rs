//! Chrome Trace Event JSON with the same content as the Perfetto trace: one process per rank,
//! one thread per OS thread, Tokio task, GPU and overlap level (named by `M` events), an `X`
//! event per slice (category `call`, `poll` or `gpu`), and flow events (`s` on a task's first
//! outermost poll, `t` on each later one) that link a task's polls across threads.
//! Times are microseconds with nanosecond decimals.

use std::collections::HashSet;
use std::io::Write;

use scope_profiler::read::{json_str, Profile};

use crate::items::{Item, TrackKind, Tracks};
use crate::perfetto::flow_id;
use crate::walk::{Open, Sink};

/// Synthetic TIDs of tracks that are not OS threads: `TRACK_TID + index + level * stride`.
const TRACK_TID: i64 = 1 << 40;
const LEVEL_STRIDE: i64 = 1 << 32;

/// Writes the JSON.
pub(crate) struct Chrome<W: Write> {
    out: W,
    first: bool,
    /// Per track: (pid, tid of level 0, label, levels named so far).
    tracks: Vec<(u32, i64, String, u32)>,
    names: Vec<String>,
    flows_started: HashSet<u32>,
    line: String,
}

impl<W: Write> Chrome<W> {
    /// Starts the document and names processes and threads.
    pub(crate) fn new(out: W, t: &Tracks, p: &Profile) -> std::io::Result<Self> {
        let mut c = Chrome {
            out,
            first: true,
            tracks: Vec::new(),
            names: t.names.iter().map(|n| json_str(n)).collect(),
            flows_started: HashSet::new(),
            line: String::with_capacity(256),
        };
        c.out
            .write_all(b"{\"displayTimeUnit\":\"ns\",\"otherData\":{\"source\":")?;
        c.out
            .write_all(json_str(&p.path().display().to_string()).as_bytes())?;
        c.out.write_all(b"},\"traceEvents\":[\n")?;
        let mut ranks = Vec::new();
        for (i, tr) in t.tracks.iter().enumerate() {
            let pid = tr.rank + 1;
            if !ranks.contains(&tr.rank) {
                ranks.push(tr.rank);
                let rank = tr.rank;
                c.meta(format!(
                    "{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{pid},\"args\":{{\"name\":\"rank {rank}\"}}}}"
                ))?;
            }
            let tid = match &tr.kind {
                TrackKind::Thread { tid, .. } => *tid,
                _ => TRACK_TID + i as i64,
            };
            let label = tr.label();
            c.meta(format!(
                "{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{pid},\"tid\":{tid},\"args\":{{\"name\":{}}}}}",
                json_str(&label)
            ))?;
            c.tracks.push((pid, tid, label, 0));
        }
        Ok(c)
    }

    fn meta(&mut self, s: String) -> std::io::Result<()> {
        self.line.clear();
        self.line.push_str(&s);
        self.emit()
    }

    fn emit(&mut self) -> std::io::Result<()> {
        if !self.first {
            self.out.write_all(b",\n")?;
        }
        self.first = false;
        self.out.write_all(self.line.as_bytes())
    }

    /// pid and tid of `track`'s `level`, naming a new level on first use.
    fn lane(&mut self, track: u32, level: u32) -> std::io::Result<(u32, i64)> {
        let (pid, tid0, ref label, named) = self.tracks[track as usize];
        if level == 0 {
            return Ok((pid, tid0));
        }
        let tid = TRACK_TID + i64::from(track) + i64::from(level) * LEVEL_STRIDE;
        if level > named {
            let label = label.clone();
            for l in named + 1..=level {
                let t = TRACK_TID + i64::from(track) + i64::from(l) * LEVEL_STRIDE;
                self.meta(format!(
                    "{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{pid},\"tid\":{t},\"args\":{{\"name\":{}}}}}",
                    json_str(&format!("{label} (overlapping {l})"))
                ))?;
            }
            self.tracks[track as usize].3 = level;
        }
        Ok((pid, tid))
    }

    /// Ends the document and returns the writer.
    pub(crate) fn into_inner(mut self) -> std::io::Result<W> {
        self.out.write_all(b"\n]}\n")?;
        self.out.flush()?;
        Ok(self.out)
    }
}

impl<W: Write> Sink for Chrome<W> {
    type Error = std::io::Error;

    fn begin(
        &mut self,
        item: &Item,
        level: u32,
        _: &[Open],
        flow: Option<u32>,
    ) -> std::io::Result<u32> {
        use std::fmt::Write as _;
        let (pid, tid) = self.lane(item.track, level)?;
        self.line.clear();
        let _ = write!(
            self.line,
            "{{\"ph\":\"X\",\"cat\":\"{}\",\"name\":{},\"pid\":{pid},\"tid\":{tid},\"ts\":{},\"dur\":{}}}",
            item.kind.category(),
            self.names[item.name as usize],
            micros(item.start),
            micros(item.end - item.start),
        );
        self.emit()?;
        if let Some(task) = flow {
            let ph = if self.flows_started.insert(task) {
                "s"
            } else {
                "t"
            };
            self.line.clear();
            let _ = write!(
                self.line,
                "{{\"ph\":\"{ph}\",\"cat\":\"flow\",\"name\":\"task\",\"id\":{},\"pid\":{pid},\"tid\":{tid},\"ts\":{},\"bp\":\"e\"}}",
                flow_id(task),
                micros(item.start),
            );
            self.emit()?;
        }
        Ok(0)
    }

    fn end(&mut self, _: &Open, _: u32, _: &[Open]) -> std::io::Result<()> {
        Ok(())
    }
}

/// Nanoseconds as a JSON number of microseconds, exactly.
fn micros(ns: i64) -> String {
    let sign = if ns < 0 { "-" } else { "" };
    let a = ns.unsigned_abs();
    format!("{sign}{}.{:03}", a / 1000, a % 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn micros_are_exact() {
        assert_eq!(micros(1_234_567), "1234.567");
        assert_eq!(micros(5), "0.005");
        assert_eq!(micros(-1500), "-1.500");
    }

    #[test]
    fn strings_are_escaped() {
        assert_eq!(json_str("a\"b\\c\n"), "\"a\\\"b\\\\c\\n\"");
    }
}

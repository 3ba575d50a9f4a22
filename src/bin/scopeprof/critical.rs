//! `scopeprof critical-path`: where a region's calls spent their wall time across Tokio tasks
//! (`scope_profiler::read::critical`). Per call walked, the segments of its critical path and
//! its time by kind and by region; then the aggregate over every call of the region: which
//! kinds, regions and tasks lie on the path most, as a share of the region's total time.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use scope_profiler::read::critical::{CallRef, CriticalPath, CriticalPaths, Kind, Lane, Segment};
use scope_profiler::read::{json_str, Poll, Profile};

use crate::supervise::Heartbeat;

/// How many calls are walked and printed without `--slowest` or `--call`.
const DEFAULT_SLOWEST: usize = 3;
/// Rows of each aggregate list.
const TOP: usize = 10;

/// `scopeprof critical-path` arguments.
#[derive(clap::Args, Debug)]
pub(crate) struct CriticalArgs {
    /// The profile.
    pub(crate) file: PathBuf,
    /// The region whose calls to walk (a request handler); default: the region with the most
    /// wall time in calls inside Tokio tasks.
    #[arg(long)]
    region: Option<String>,
    /// Print the N slowest calls (default 3).
    #[arg(long, conflicts_with = "call")]
    slowest: Option<usize>,
    /// Print the call with this number (the region's calls in file order, from 0).
    #[arg(long)]
    call: Option<u64>,
    /// Write JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// Names of tasks and threads for the output.
struct Names {
    tasks: HashMap<i64, String>,
    threads: HashMap<i64, String>,
}

impl Names {
    fn of(p: &Profile) -> Names {
        let tasks = p.tasks().iter().filter(|t| t.rank == 0);
        let threads = p.threads().iter().filter(|t| t.rank == 0);
        Names {
            tasks: tasks.map(|t| (t.index, t.name.clone())).collect(),
            threads: threads.map(|t| (t.index, t.name.clone())).collect(),
        }
    }

    /// `task NAME (#i)` or `thread NAME (#i)` (a task's name that says `task` already is
    /// not prefixed again).
    fn lane(&self, lane: Lane) -> String {
        match lane {
            Lane::Task(i) if self.task(i).starts_with("task ") => {
                format!("{} (#{i})", self.task(i))
            }
            Lane::Task(i) => format!("task {} (#{i})", self.task(i)),
            Lane::Thread(i) => {
                let n = self.threads.get(&i).map_or("?", String::as_str);
                format!("thread {n} (#{i})")
            }
        }
    }

    fn task(&self, i: i64) -> &str {
        self.tasks.get(&i).map_or("?", String::as_str)
    }
}

/// The walk's totals over many calls.
#[derive(Default)]
struct Totals {
    calls: u64,
    wall_ns: i64,
    by_kind: HashMap<Kind, i64>,
    /// Innermost region of the segments in a poll (`running`, `blocked-on`).
    by_region: HashMap<String, i64>,
    /// Every segment in a task, whatever its kind.
    by_task: HashMap<i64, i64>,
    /// The tasks polled while the path was `scheduled` (that held the workers), with their
    /// time in polls then.
    behind: HashMap<i64, i64>,
}

impl Totals {
    fn add(&mut self, path: &CriticalPath) {
        self.calls += 1;
        self.wall_ns += path.wall_ns();
        for s in &path.segments {
            *self.by_kind.entry(s.kind).or_default() += s.dur_ns();
            if matches!(s.kind, Kind::Running | Kind::BlockedOn) {
                let r = s.region().unwrap_or("(task)").to_owned();
                *self.by_region.entry(r).or_default() += s.dur_ns();
            }
            if let Lane::Task(t) = s.lane {
                *self.by_task.entry(t).or_default() += s.dur_ns();
            }
            for &(t, ns) in &s.behind {
                *self.behind.entry(t).or_default() += ns;
            }
        }
    }
}

/// The `TOP` largest of `m`, most first (ties by key).
fn top<K: Ord + Clone>(m: &HashMap<K, i64>) -> Vec<(K, i64)> {
    let mut v: Vec<(K, i64)> = m.iter().map(|(k, &ns)| (k.clone(), ns)).collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v.truncate(TOP);
    v
}

/// Runs the command (in the reading child).
pub(crate) fn run(a: &CriticalArgs) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| format!("{}: {e}", a.file.display());
    let p = Profile::open(&a.file).map_err(|e| err(&e))?;
    let mut beat = Heartbeat::new();
    let region = match &a.region {
        Some(r) => r.clone(),
        None => busiest_task_region(&p, &mut beat)
            .map_err(|e| err(&e))?
            .ok_or_else(|| err(&"no calls inside Tokio tasks; name one with --region"))?,
    };
    let paths = index(&p, &mut beat).map_err(|e| err(&e))?;
    let calls = paths.calls(&p, &region).map_err(|e| err(&e))?;
    if calls.is_empty() {
        return Err(err(&format!("no calls of region `{region}`")));
    }
    let shown: Vec<&CallRef> = match a.call {
        Some(n) => vec![calls
            .get(n as usize)
            .ok_or_else(|| err(&format!("`{region}` has {} calls, no #{n}", calls.len())))?],
        None => {
            let mut by_wall: Vec<&CallRef> = calls.iter().collect();
            by_wall.sort_by_key(|c| (std::cmp::Reverse(c.end_ns - c.start_ns), c.ordinal));
            by_wall.truncate(a.slowest.unwrap_or(DEFAULT_SLOWEST));
            by_wall
        }
    };
    let mut totals = Totals::default();
    for c in &calls {
        beat.tick();
        totals.add(&paths.walk(c));
    }
    let walked: Vec<CriticalPath> = shown.iter().map(|c| paths.walk(c)).collect();
    let names = Names::of(&p);
    let origin = p.start_time_ns().unwrap_or(0);
    let out = if a.json {
        json(&region, &walked, &totals, &names)
    } else {
        text(&region, &walked, &totals, &names, origin, &a.file)
    };
    print!("{out}");
    Ok(())
}

/// The index of the file's task polls, wakes and spawns, with a heartbeat while reading.
fn index(
    p: &Profile,
    beat: &mut Heartbeat,
) -> Result<CriticalPaths, scope_profiler::read::ReadError> {
    let mut polls: Vec<Poll> = Vec::new();
    p.for_each_poll(1 << 16, |chunk| {
        beat.tick();
        polls.extend(chunk.iter().filter(|q| q.task >= 0));
        Ok(())
    })?;
    Ok(CriticalPaths::from_parts(
        &polls,
        p.poll_region_names(),
        &p.wakes()?,
        &p.spawns()?,
    ))
}

/// The region with the most wall time in calls inside tasks, outermost on ties (the one
/// whose calls start first).
fn busiest_task_region(
    p: &Profile,
    beat: &mut Heartbeat,
) -> Result<Option<String>, scope_profiler::read::ReadError> {
    let mut wall: HashMap<u32, (i64, i64)> = HashMap::new();
    p.for_each_call(1 << 16, |row, calls| {
        beat.tick();
        for c in calls.iter().filter(|c| c.task >= 0) {
            let e = wall.entry(row.region).or_insert((0, i64::MAX));
            e.0 += c.dur_ns;
            e.1 = e.1.min(c.start_ns);
        }
        Ok(())
    })?;
    let best = wall.into_iter().max_by(|a, b| {
        (a.1 .0, std::cmp::Reverse(a.1 .1)).cmp(&(b.1 .0, std::cmp::Reverse(b.1 .1)))
    });
    Ok(best.map(|(r, _)| p.region_name(r).to_owned()))
}

fn ms(ns: i64) -> f64 {
    ns as f64 / 1e6
}

fn pct(ns: i64, of: i64) -> f64 {
    if of > 0 {
        100.0 * ns as f64 / of as f64
    } else {
        0.0
    }
}

/// One segment's `where` and `what` columns.
fn describe(s: &Segment, names: &Names) -> String {
    let mut what = s.stack.join(" > ");
    if s.kind == Kind::Scheduled && !s.behind.is_empty() {
        let behind: Vec<String> = s
            .behind
            .iter()
            .map(|&(t, ns)| format!("{} (#{t}) {:.3} ms", names.task(t), ms(ns)))
            .collect();
        what = format!("behind {}", behind.join(", "));
    }
    if s.inferred {
        what += " [inferred]";
    }
    format!("{:<36} {what}", names.lane(s.lane))
}

fn text(
    region: &str,
    walked: &[CriticalPath],
    totals: &Totals,
    names: &Names,
    origin: i64,
    file: &Path,
) -> String {
    let mut o = format!(
        "Critical path of `{region}` in {} ({} calls; {} shown)\n",
        file.display(),
        totals.calls,
        walked.len()
    );
    for path in walked {
        o += &call_text(path, names, origin);
    }
    o + &aggregate_text(region, totals, names)
}

/// One call's path: its segments, then its time by kind and by region.
fn call_text(path: &CriticalPath, names: &Names, origin: i64) -> String {
    let c = &path.call;
    let mut o = format!(
        "\ncall #{} at {:.6} s: {:.3} ms\n  {:>10} {:>10}  {:<13}{:<36} stack\n",
        c.ordinal,
        (c.start_ns - origin) as f64 / 1e9,
        ms(path.wall_ns()),
        "from [ms]",
        "dur [ms]",
        "kind",
        "where"
    );
    for s in rows(path) {
        o += &format!(
            "  {:>10.3} {:>10.3}  {:<13}{}\n",
            ms(s.start_ns - c.start_ns),
            ms(s.dur_ns()),
            s.kind.name(),
            describe(&s, names)
        );
    }
    let kinds: Vec<String> = path
        .by_kind()
        .iter()
        .map(|&(k, ns)| {
            format!(
                "{} {:.3} ms ({:.1} %)",
                k.name(),
                ms(ns),
                pct(ns, path.wall_ns())
            )
        })
        .collect();
    o += &format!("  by kind: {}\n", kinds.join(", "));
    let regions: Vec<String> = path
        .by_region()
        .iter()
        .take(5)
        .map(|((lane, r), ns)| format!("{r} in {} {:.3} ms", names.lane(*lane), ms(*ns)))
        .collect();
    o += &format!("  by region (in polls): {}\n", regions.join(", "));
    o
}

/// The aggregate over all the region's calls, as shares of their total wall time.
fn aggregate_text(region: &str, totals: &Totals, names: &Names) -> String {
    let mut o = format!(
        "\nOver all {} calls of `{region}` ({:.3} ms in all): on the critical path\n",
        totals.calls,
        ms(totals.wall_ns)
    );
    let line = |o: &mut String, name: &str, ns: i64| {
        *o += &format!(
            "    {:>7.1} %  {:>12.3} ms  {name}\n",
            pct(ns, totals.wall_ns),
            ms(ns)
        );
    };
    o += "  by kind:\n";
    for k in Kind::ALL {
        if let Some(&ns) = totals.by_kind.get(&k).filter(|&&ns| ns > 0) {
            line(&mut o, k.name(), ns);
        }
    }
    o += "  regions (in polls on the path):\n";
    for (r, ns) in top(&totals.by_region) {
        line(&mut o, &r, ns);
    }
    o += "  tasks (their polls and waits on the path):\n";
    for (t, ns) in top(&totals.by_task) {
        line(&mut o, &format!("{} (#{t})", names.task(t)), ns);
    }
    if !totals.behind.is_empty() {
        o += "  tasks that held the workers while the path was scheduled:\n";
        for (t, ns) in top(&totals.behind) {
            line(&mut o, &format!("{} (#{t})", names.task(t)), ns);
        }
    }
    o
}

/// The segments the text lists: neighbours joined ([`CriticalPath::joined`]), and the slivers
/// of a poll outside every region (Tokio's `runtime.spawn` at a poll's edges) joined to the
/// poll's neighbouring row in the same task.
fn rows(path: &CriticalPath) -> Vec<Segment> {
    let in_poll = |s: &Segment| matches!(s.kind, Kind::Running | Kind::BlockedOn);
    let same = |a: &Segment, b: &Segment| {
        a.kind == b.kind && a.lane == b.lane && a.inferred == b.inferred && a.end_ns == b.start_ns
    };
    let mut out: Vec<Segment> = Vec::new();
    for s in path.joined() {
        match out.last_mut() {
            Some(l) if same(l, &s) && in_poll(&s) && s.stack.is_empty() => l.end_ns = s.end_ns,
            Some(l) if same(l, &s) && in_poll(l) && l.stack.is_empty() => {
                l.end_ns = s.end_ns;
                l.stack = s.stack.clone();
            }
            _ => out.push(s),
        }
    }
    out
}

/// A segment as a JSON object.
fn segment_json(s: &Segment, names: &Names) -> String {
    let lane = match s.lane {
        Lane::Task(t) => format!("\"task\":{t},\"task_name\":{}", json_str(names.task(t))),
        Lane::Thread(t) => format!("\"thread\":{t}"),
    };
    let stack: Vec<String> = s.stack.iter().map(|r| json_str(r)).collect();
    let behind: Vec<String> = s
        .behind
        .iter()
        .map(|&(t, ns)| format!("{{\"task\":{t},\"ns\":{ns}}}"))
        .collect();
    format!(
        "{{\"kind\":\"{}\",\"start_ns\":{},\"end_ns\":{},{lane},\"stack\":[{}],\"inferred\":{},\"behind\":[{}]}}",
        s.kind.name(),
        s.start_ns,
        s.end_ns,
        stack.join(","),
        s.inferred,
        behind.join(",")
    )
}

/// `[{"key":..,"ns":..,"share":..}]` of `rows`, shares of `of`.
fn shares(rows: impl Iterator<Item = (String, i64)>, key: &str, of: i64) -> String {
    let v: Vec<String> = rows
        .map(|(k, ns)| {
            format!(
                "{{\"{key}\":{k},\"ns\":{ns},\"share\":{:.6}}}",
                pct(ns, of) / 100.0
            )
        })
        .collect();
    format!("[{}]", v.join(","))
}

fn json(region: &str, walked: &[CriticalPath], totals: &Totals, names: &Names) -> String {
    let calls: Vec<String> = walked
        .iter()
        .map(|p| {
            let c = &p.call;
            let segs: Vec<String> = p.segments.iter().map(|s| segment_json(s, names)).collect();
            format!(
                "{{\"call\":{},\"start_ns\":{},\"end_ns\":{},\"wall_ns\":{},\"task\":{},\"thread\":{},\"segments\":[{}]}}",
                c.ordinal,
                c.start_ns,
                c.end_ns,
                p.wall_ns(),
                c.task,
                c.thread,
                segs.join(",")
            )
        })
        .collect();
    let of = totals.wall_ns;
    let kinds = Kind::ALL.iter().filter_map(|k| {
        totals
            .by_kind
            .get(k)
            .map(|&ns| (format!("\"{}\"", k.name()), ns))
    });
    let regions = top(&totals.by_region)
        .into_iter()
        .map(|(r, ns)| (json_str(&r), ns));
    let tasks = top(&totals.by_task)
        .into_iter()
        .map(|(t, ns)| (t.to_string(), ns));
    let behind = top(&totals.behind)
        .into_iter()
        .map(|(t, ns)| (t.to_string(), ns));
    format!(
        "{{\"region\":{},\"calls\":[{}],\"aggregate\":{{\"calls\":{},\"wall_ns\":{of},\"by_kind\":{},\"by_region\":{},\"by_task\":{},\"behind\":{}}}}}\n",
        json_str(region),
        calls.join(","),
        totals.calls,
        shares(kinds, "kind", of),
        shares(regions, "region", of),
        shares(tasks, "task", of),
        shares(behind, "task", of),
    )
}

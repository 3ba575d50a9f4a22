//! Where `scopeprof top` reads calls: the one module that reads spools and files. A live or
//! crashed phase's spool is followed with [`SpoolFollower`] (only new bytes at each refresh;
//! the frames of the window read again when a snapshot is made); a finished file is streamed
//! with [`Profile`]. When the spool is rotated away (the phase ended), the source follows the
//! new phase's spool, or shows the finished file, and says so in [`Source::notice`].
//!
//! Open calls are not in the spool yet: [`Source::open_calls`] is where the open-calls frame
//! plugs in.

use std::path::PathBuf;

use scope_profiler::read::live::{RetiredTask, SpoolFollower};
use scope_profiler::read::{Call, Profile, StorageLayout};

use super::model::{Collector, Snapshot, Window};
use super::target::Target;

/// Retired tasks kept for the tasks view (the newest).
const KEEP_TASKS: usize = 100_000;

/// What is known about the calls still open, per region id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct OpenCalls {
    /// Open calls per region id, `None` when the source cannot tell.
    pub(crate) per_region: Option<Vec<u64>>,
    /// Why they are not known, when they are not.
    pub(crate) reason: Option<&'static str>,
}

enum Kind {
    Spool {
        follower: SpoolFollower,
        output: PathBuf,
        tasks: std::collections::VecDeque<RetiredTask>,
    },
    File {
        profile: Profile,
        span: Option<(i64, i64)>,
        /// The spool of the program that published it: watched for a new phase.
        spool: Option<PathBuf>,
    },
}

/// The calls `top` shows, from a spool or a file. See the [module docs](self).
pub(crate) struct Source {
    kind: Kind,
    /// Something the user should know (the phase ended, a write was undone).
    pub(crate) notice: Option<String>,
}

fn file_source(path: &std::path::Path, spool: Option<PathBuf>) -> Result<Kind, String> {
    let profile = Profile::open(path).map_err(|e| e.to_string())?;
    let mut span: Option<(i64, i64)> = None;
    profile
        .for_each_call(65_536, |_, calls| {
            for c in calls {
                let end = c.start_ns + c.dur_ns;
                span =
                    Some(span.map_or((c.start_ns, end), |(a, b)| (a.min(c.start_ns), b.max(end))));
            }
            Ok(())
        })
        .map_err(|e| e.to_string())?;
    Ok(Kind::File {
        profile,
        span,
        spool,
    })
}

/// The spool at `path` when it holds calls (a new phase has begun writing there).
fn new_phase(path: &std::path::Path) -> Option<SpoolFollower> {
    let mut f = SpoolFollower::open(path).ok()?;
    f.refresh(|_, _| {}, |_| {}).ok()?;
    f.time_span().is_some().then_some(f)
}

impl Source {
    /// Opens `target` (read only) and reads what is there.
    pub(crate) fn open(target: &Target) -> Result<Source, String> {
        let kind = match target {
            Target::File(path) => file_source(path, None)?,
            Target::Spool { spool, output } => Kind::Spool {
                follower: SpoolFollower::open(spool)
                    .map_err(|e| format!("{}: {e}", spool.display()))?,
                output: output.clone(),
                tasks: Default::default(),
            },
        };
        let mut s = Source { kind, notice: None };
        s.refresh()?;
        if let (
            Kind::Spool {
                output, follower, ..
            },
            None,
        ) = (&s.kind, s.span())
        {
            // A new phase with nothing in it yet (or one that is shutting down) beside a
            // finished file: the file is what there is to see.
            if output.is_file() {
                if let Ok(kind) = file_source(output, Some(follower.path().to_path_buf())) {
                    s.kind = kind;
                    s.notice =
                        Some("the live phase has no calls yet; showing the finished file".into());
                }
            }
        }
        Ok(s)
    }

    /// Whether it follows a spool (a phase being recorded, or a crashed one).
    pub(crate) fn is_spool(&self) -> bool {
        matches!(self.kind, Kind::Spool { .. })
    }

    /// Reads what was added since the last refresh; follows a rotation: a new phase's spool
    /// once it holds calls, else the finished file.
    pub(crate) fn refresh(&mut self) -> Result<(), String> {
        let Kind::Spool {
            follower,
            output,
            tasks,
        } = &mut self.kind
        else {
            if let Kind::File {
                spool: Some(spool), ..
            } = &self.kind
            {
                if let Some(next) = new_phase(spool) {
                    self.follow(next, "a new phase began; following it");
                    return self.refresh();
                }
            }
            return Ok(());
        };
        let path = follower.path().to_path_buf();
        let err = |e: std::io::Error| format!("{}: {e}", path.display());
        let read = |f: &mut SpoolFollower, tasks: &mut std::collections::VecDeque<_>| {
            f.refresh(
                |_, _| {},
                |rows| {
                    tasks.extend(rows.iter().copied());
                    while tasks.len() > KEEP_TASKS {
                        tasks.pop_front();
                    }
                },
            )
        };
        let r = read(follower, tasks).map_err(err)?;
        if r.rewound > 0 {
            self.notice = Some(format!(
                "the spool was cut back by {} bytes (a write the program undid); dropped them",
                r.rewound
            ));
        }
        if !follower.moved() {
            return Ok(());
        }
        // The phase ended: read the rest of its file, then move on.
        read(follower, tasks).map_err(err)?;
        let output = output.clone();
        if let Some(next) = new_phase(&path) {
            self.follow(next, "phase ended; following the new phase");
            return Ok(());
        }
        if output.is_file() {
            if let Ok(kind) = file_source(&output, Some(path)) {
                self.notice = Some("phase ended, showing the finished file".into());
                self.kind = kind;
            }
        } else {
            self.notice = Some("the spool was moved away (phase ended)".into());
        }
        Ok(())
    }

    /// Follows `spool` from now on, saying `why`.
    fn follow(&mut self, spool: SpoolFollower, why: &str) {
        let output = match &self.kind {
            Kind::Spool { output, .. } => output.clone(),
            Kind::File { profile, .. } => profile.path().to_path_buf(),
        };
        self.kind = Kind::Spool {
            follower: spool,
            output,
            tasks: Default::default(),
        };
        self.notice = Some(why.into());
    }

    /// The region names (index = region id).
    pub(crate) fn region_names(&self) -> Vec<String> {
        match &self.kind {
            Kind::Spool { follower, .. } => follower.region_names(),
            Kind::File { profile, .. } => profile.region_names().to_vec(),
        }
    }

    /// Thread names by index.
    pub(crate) fn thread_names(&self) -> Vec<(i64, String)> {
        match &self.kind {
            Kind::Spool { follower, .. } => follower
                .threads()
                .into_iter()
                .map(|t| (t.index, t.name))
                .collect(),
            Kind::File { profile, .. } => profile
                .threads()
                .iter()
                .filter(|t| t.rank == 0)
                .map(|t| (t.index, t.name.clone()))
                .collect(),
        }
    }

    /// Whether calls carry task indices (`track_async`).
    pub(crate) fn has_tasks(&self) -> bool {
        match &self.kind {
            Kind::Spool { follower, .. } => follower.info().is_some_and(|i| i.track_async),
            Kind::File { profile, .. } => !profile.tasks().is_empty(),
        }
    }

    /// Why the source has no calls to show, when it has none by design.
    pub(crate) fn no_calls_reason(&self) -> Option<&'static str> {
        match &self.kind {
            Kind::Spool { follower, .. } if follower.info().is_some_and(|i| i.aggregate) => {
                Some("aggregate mode: the spool holds per-region totals, no calls")
            }
            Kind::File { profile, .. } if profile.layout() == StorageLayout::Aggregate => {
                Some("aggregate layout: the file holds per-region totals, no calls")
            }
            _ => None,
        }
    }

    /// Earliest start and latest end of the calls read so far: the recorded phase.
    pub(crate) fn span(&self) -> Option<(i64, i64)> {
        match &self.kind {
            Kind::Spool { follower, .. } => follower.time_span(),
            Kind::File { span, .. } => *span,
        }
    }

    /// Calls per bucket over the phase, for the time bar.
    pub(crate) fn density(&self, buckets: usize) -> Vec<u64> {
        let Some((a, b)) = self.span() else {
            return vec![0; buckets];
        };
        let width = ((b - a) / buckets.max(1) as i64).max(1) + 1;
        match &self.kind {
            Kind::Spool { follower, .. } => follower.density(a, width, buckets),
            // A finished file: one bar for all (not indexed by time).
            Kind::File { .. } => vec![1; buckets],
        }
    }

    /// Retired tasks read so far (spools only).
    #[allow(dead_code)] // for the tasks view once live tasks are in the spool
    pub(crate) fn retired_tasks(&self) -> Vec<RetiredTask> {
        match &self.kind {
            Kind::Spool { tasks, .. } => tasks.iter().copied().collect(),
            Kind::File { .. } => Vec::new(),
        }
    }

    /// The calls still open: per region, from the spool's latest open-calls frame (a
    /// spool of version 1 has none); a finished file has none.
    pub(crate) fn open_calls(&self) -> OpenCalls {
        match &self.kind {
            Kind::Spool { follower, .. } => match follower.open_calls() {
                Some(open) => {
                    let names = follower.region_names();
                    let mut per_region = vec![0u64; names.len()];
                    for c in &open.calls {
                        if let Some(k) = names.iter().position(|n| *n == c.region) {
                            per_region[k] += 1;
                        }
                    }
                    OpenCalls {
                        per_region: Some(per_region),
                        reason: (open.left_out() > 0).then_some(
                            "more calls are open than the spool's frame lists (4096, the \
                             oldest): the counts are a lower bound",
                        ),
                    }
                }
                None => OpenCalls {
                    per_region: None,
                    reason: Some(
                        "no open-calls frame in the spool yet (written at each flush; a \
                         version-1 spool has none): calls still open are not shown",
                    ),
                },
            },
            Kind::File { profile, .. } => OpenCalls {
                per_region: Some(vec![0; profile.region_names().len()]),
                reason: None,
            },
        }
    }

    /// The snapshot of `window`: the calls that ended in it, read again from the spool's
    /// frames of that time (or streamed from the file).
    pub(crate) fn snapshot(&mut self, window: Window) -> Result<Snapshot, String> {
        let mut collector = Collector::new(window);
        let mut add = |region: u32, calls: &[Call]| {
            for c in calls {
                collector.add(region, c);
            }
        };
        match &mut self.kind {
            Kind::Spool { follower, .. } => {
                let path = follower.path().to_path_buf();
                follower
                    .calls_between(window.start_ns, window.end_ns, &mut add)
                    .map_err(|e| format!("{}: {e}", path.display()))?;
            }
            Kind::File { profile, .. } => profile
                .for_each_call(65_536, |row, calls| {
                    if row.rank == 0 {
                        add(row.region, calls);
                    }
                    Ok(())
                })
                .map_err(|e| e.to_string())?,
        }
        let open = self.open_calls();
        Ok(collector.finish(
            &self.region_names(),
            &self.thread_names(),
            open.per_region.as_deref(),
        ))
    }
}

#[cfg(test)]
#[path = "source_tests.rs"]
mod tests;

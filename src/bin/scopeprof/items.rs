//! What the exporters draw: every call, poll and device time of a file as an [`Item`] on a
//! [`Track`], and the tracks themselves (one per thread, Tokio task and GPU, per rank).
//!
//! A call runs on its lane: the task's track when it ran in a task, else its thread's track
//! (the same lanes the nesting of the summary uses). A poll runs on the track of the thread
//! that ran it. A device time is drawn on the rank's GPU track from its call's start. With
//! Tokio's own instrumentation, a task's poll that waited for a worker after its wake has that
//! wait drawn before it on the task's track, as a slice named `scheduled`.

use std::collections::HashMap;

use scope_profiler::read::{Profile, ReadError};

/// "No track" in [`Item::other`].
pub(crate) const NONE: u32 = u32::MAX;

/// What an item is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Kind {
    /// A call (first enter to last exit).
    Call = 0,
    /// One poll (enter to exit on one thread).
    Poll = 1,
    /// A call's device time.
    Gpu = 2,
    /// A task's scheduled time before a poll (woken, waiting for a worker).
    Sched = 3,
}

impl Kind {
    pub(crate) fn from_u8(v: u8) -> Kind {
        match v {
            0 => Kind::Call,
            1 => Kind::Poll,
            3 => Kind::Sched,
            _ => Kind::Gpu,
        }
    }

    /// Category name in the traces.
    pub(crate) fn category(self) -> &'static str {
        match self {
            Kind::Call => "call",
            Kind::Poll => "poll",
            Kind::Gpu => "gpu",
            Kind::Sched => "scheduled",
        }
    }
}

/// One slice to draw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Item {
    /// Absolute start (ns).
    pub start: i64,
    /// Absolute end (ns), >= start.
    pub end: i64,
    /// Index into [`Tracks::names`].
    pub name: u32,
    /// Index into [`Tracks::tracks`].
    pub track: u32,
    /// Calls: the thread track the call started on. Polls: the task track of the poll's task
    /// ([`NONE`] outside a task). Device times: [`NONE`].
    pub other: u32,
    /// What it is.
    pub kind: Kind,
}

impl Item {
    /// The order the walker needs: start ascending, end descending (the enclosing slice
    /// first), calls before polls before device times, then by track and name.
    #[inline]
    pub(crate) fn order(&self, o: &Item) -> std::cmp::Ordering {
        // Lazy tie-breaks: almost every comparison is decided by the start.
        self.start
            .cmp(&o.start)
            .then_with(|| o.end.cmp(&self.end))
            .then_with(|| self.kind.cmp(&o.kind))
            .then_with(|| self.track.cmp(&o.track))
            .then_with(|| self.name.cmp(&o.name))
            .then_with(|| self.other.cmp(&o.other))
    }
}

/// What a track is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TrackKind {
    /// An OS thread: its TID (synthetic when unknown) and name.
    Thread { tid: i64, name: String },
    /// A Tokio task.
    Task { name: String },
    /// The rank's device times.
    Gpu,
}

/// One track.
#[derive(Clone, Debug)]
pub(crate) struct Track {
    /// MPI rank.
    pub rank: u32,
    /// What it is.
    pub kind: TrackKind,
}

impl Track {
    /// Display name.
    pub(crate) fn label(&self) -> String {
        match &self.kind {
            TrackKind::Thread { name, .. } => name.clone(),
            TrackKind::Task { name } => name.clone(),
            TrackKind::Gpu => "GPU (device time per call)".into(),
        }
    }
}

/// Lane key: (rank, what, index).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    Thread(u32, i64),
    Task(u32, i64),
    Gpu(u32),
}

/// The tracks and names of one file, and how its rows map onto them.
pub(crate) struct Tracks {
    /// Every track, created as the data names it.
    pub tracks: Vec<Track>,
    /// Slice names: the region names, then poll region names the region table lacks.
    pub names: Vec<String>,
    /// Poll region id -> index into `names`.
    poll_names: Vec<u32>,
    /// Index of the name `scheduled` in `names`, once a poll needed it.
    sched_name: Option<u32>,
    by_key: HashMap<Key, u32>,
    /// Per rank: [thread lanes, task lanes], indexed by lane index + 1.
    dense: Vec<[Vec<u32>; 2]>,
    threads: HashMap<(u32, i64), (i64, String)>,
    tasks: HashMap<(u32, i64), String>,
}

impl Tracks {
    /// The tracks known from the file's tables (more appear as calls name them).
    pub(crate) fn new(p: &Profile) -> Tracks {
        let mut names: Vec<String> = p.region_names().to_vec();
        let mut index: HashMap<String, u32> = HashMap::new();
        for (i, n) in names.iter().enumerate() {
            index.entry(n.clone()).or_insert(i as u32);
        }
        let mut poll_names = Vec::new();
        for n in p.poll_region_names() {
            let next = names.len() as u32;
            let id = *index.entry(n.clone()).or_insert(next);
            if id == next {
                names.push(n.clone());
            }
            poll_names.push(id);
        }
        let threads = p
            .threads()
            .iter()
            .map(|t| ((t.rank, t.index), (t.native_id, t.name.clone())))
            .collect();
        let tasks = p
            .tasks()
            .iter()
            .map(|t| {
                let name = if t.root.is_empty() {
                    t.name.clone()
                } else {
                    format!("{} {}", t.name, t.root)
                };
                ((t.rank, t.index), name)
            })
            .collect();
        let mut t = Tracks {
            tracks: Vec::new(),
            names,
            poll_names,
            sched_name: None,
            by_key: HashMap::new(),
            dense: Vec::new(),
            threads,
            tasks,
        };
        // Table order first, so track order follows the file.
        for th in p.threads() {
            t.track(Key::Thread(th.rank, th.index));
        }
        for ta in p.tasks() {
            t.track(Key::Task(ta.rank, ta.index));
        }
        t
    }

    fn track(&mut self, key: Key) -> u32 {
        // Thread and task lanes are dense per-rank indices (-1..2^20, checked by the reader):
        // a direct table instead of hashing every call's key.
        let dense = match key {
            Key::Thread(rank, i) => Some((rank, 0usize, i)),
            Key::Task(rank, i) => Some((rank, 1usize, i)),
            Key::Gpu(_) => None,
        };
        if let Some((rank, kind, i)) = dense {
            if let Some(&t) = self
                .dense
                .get(rank as usize)
                .and_then(|d| d[kind].get((i + 1) as usize))
                .filter(|&&t| t != NONE)
            {
                return t;
            }
        }
        if let Some(&t) = self.by_key.get(&key) {
            return t;
        }
        let track = match key {
            Key::Thread(rank, i) => {
                let (tid, name) = self.threads.get(&(rank, i)).cloned().unwrap_or_else(|| {
                    let name = if i < 0 {
                        "thread (unknown)".to_owned()
                    } else {
                        format!("thread {i}")
                    };
                    // Synthetic TIDs for threads without a table row.
                    (1_000_000 + i + 1, name)
                });
                Track {
                    rank,
                    kind: TrackKind::Thread { tid, name },
                }
            }
            Key::Task(rank, i) => Track {
                rank,
                kind: TrackKind::Task {
                    name: self
                        .tasks
                        .get(&(rank, i))
                        .cloned()
                        .unwrap_or_else(|| format!("Task #{i}")),
                },
            },
            Key::Gpu(rank) => Track {
                rank,
                kind: TrackKind::Gpu,
            },
        };
        let id = self.tracks.len() as u32;
        self.tracks.push(track);
        self.by_key.insert(key, id);
        if let Some((rank, kind, i)) = dense {
            let slot = (i + 1).max(0) as usize;
            if rank < 1024 && slot < (1 << 21) {
                if self.dense.len() <= rank as usize {
                    self.dense.resize_with(rank as usize + 1, Default::default);
                }
                let table = &mut self.dense[rank as usize][kind];
                if table.len() <= slot {
                    table.resize(slot + 1, NONE);
                }
                table[slot] = id;
            }
        }
        id
    }

    /// Feeds every call of `p` (and its device time) to `push`.
    pub(crate) fn calls(
        &mut self,
        p: &Profile,
        chunk: usize,
        tick: &mut dyn FnMut(),
        push: &mut dyn FnMut(Item, u32),
    ) -> Result<(), ReadError> {
        p.for_each_call(chunk, |row, calls| {
            tick();
            for c in calls {
                let thread = self.track(Key::Thread(row.rank, c.thread));
                let track = if c.task >= 0 {
                    self.track(Key::Task(row.rank, c.task))
                } else {
                    thread
                };
                let end = c.start_ns + c.dur_ns;
                push(
                    Item {
                        start: c.start_ns,
                        end,
                        name: row.region,
                        track,
                        other: thread,
                        kind: Kind::Call,
                    },
                    row.rank,
                );
                if c.gpu_ns >= 0 {
                    let gpu = Item {
                        start: c.start_ns,
                        end: c.start_ns.saturating_add(c.gpu_ns),
                        name: row.region,
                        track: self.track(Key::Gpu(row.rank)),
                        other: NONE,
                        kind: Kind::Gpu,
                    };
                    push(gpu, row.rank);
                }
            }
            Ok(())
        })
    }

    /// Feeds every poll of `p` to `push` (polls are rank 0's).
    pub(crate) fn polls(
        &mut self,
        p: &Profile,
        chunk: usize,
        tick: &mut dyn FnMut(),
        push: &mut dyn FnMut(Item, u32),
    ) -> Result<(), ReadError> {
        p.for_each_poll(chunk, |polls| {
            tick();
            for q in polls {
                let task = if q.task >= 0 {
                    self.track(Key::Task(0, q.task))
                } else {
                    NONE
                };
                let poll = Item {
                    start: q.start_ns,
                    end: q.start_ns + q.dur_ns,
                    name: self.poll_names[q.region as usize],
                    track: self.track(Key::Thread(0, q.thread)),
                    other: task,
                    kind: Kind::Poll,
                };
                push(poll, 0);
                if task != NONE && q.scheduled_ns > 0 {
                    let name = *self.sched_name.get_or_insert_with(|| {
                        self.names.push("scheduled".into());
                        (self.names.len() - 1) as u32
                    });
                    let sched = Item {
                        start: q.start_ns.saturating_sub(q.scheduled_ns),
                        end: q.start_ns,
                        name,
                        track: task,
                        other: NONE,
                        kind: Kind::Sched,
                    };
                    push(sched, 0);
                }
            }
            Ok(())
        })
    }
}

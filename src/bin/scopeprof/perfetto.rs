//! The Perfetto protobuf trace: a `Trace` is a sequence of `TracePacket`s (field 1).
//!
//! Packets written, on one trusted sequence:
//! - one `interned_data` packet that clears the incremental state and interns every slice
//!   name and the four categories (`call`, `poll`, `gpu`, `scheduled`);
//! - one `TrackDescriptor` per rank (a process, pid = rank + 1), per thread (a thread of that
//!   process: TID and name from `thread_table`), per Tokio task and GPU (named tracks under the
//!   process), and per overlap level that a track needed;
//! - a `SLICE_BEGIN` and a `SLICE_END` `TrackEvent` per slice, the begin naming it by interned
//!   id; a task's outermost polls carry the task's flow id, so the UI draws an arrow from each
//!   poll to the next, across worker threads.
//!
//! Field numbers (perfetto/protos/perfetto/trace/...): TracePacket {timestamp 8,
//! trusted_packet_sequence_id 10, track_event 11, interned_data 12, sequence_flags 13,
//! track_descriptor 60}; TrackDescriptor {uuid 1, name 2, process 3, thread 4, parent_uuid 5};
//! ProcessDescriptor {pid 1, process_name 6}; ThreadDescriptor {pid 1, tid 2, thread_name 5};
//! TrackEvent {category_iids 3, type 9, name_iid 10, track_uuid 11, flow_ids 47};
//! InternedData {event_categories 1, event_names 2}; EventName/EventCategory {iid 1, name 2}.

use std::io::Write;

use crate::items::{Item, Kind, TrackKind, Tracks};
use crate::proto::{bytes, fixed64, string, tag, uint, varint, LEN};
use crate::walk::{Open, Sink};

const SEQ: u64 = 1;
const SEQ_INCREMENTAL_STATE_CLEARED: u64 = 1;
const SEQ_NEEDS_INCREMENTAL_STATE: u64 = 2;
const TYPE_SLICE_BEGIN: u64 = 1;
const TYPE_SLICE_END: u64 = 2;
/// Uuids of process tracks: `PROCESS_UUID + rank`; other tracks: `TRACK_UUID + index`, and
/// overlap levels `TRACK_UUID + index + level * LEVEL_STRIDE`. Small uuids for the tracks that
/// every event names keep each event's varint short.
const PROCESS_UUID: u64 = 1 << 62;
const TRACK_UUID: u64 = 1;
const LEVEL_STRIDE: u64 = 1 << 32;

/// Writes the packets.
pub(crate) struct Perfetto<W: Write> {
    out: W,
    packet: Vec<u8>,
    scratch: Vec<u8>,
    inner: Vec<u8>,
    head: Vec<u8>,
    /// Per track: the levels whose descriptor has been written.
    levels: Vec<u32>,
    ranks: Vec<u32>,
    /// Copied track facts, so descriptors can be written while slices stream.
    tracks: Vec<(u32, TrackKind, String)>,
}

impl<W: Write> Perfetto<W> {
    /// Starts the trace: interned names and the descriptors of the known tracks.
    pub(crate) fn new(out: W, t: &Tracks) -> std::io::Result<Self> {
        let mut p = Perfetto {
            out,
            packet: Vec::with_capacity(256),
            scratch: Vec::with_capacity(256),
            inner: Vec::with_capacity(256),
            head: Vec::with_capacity(16),
            levels: Vec::new(),
            ranks: Vec::new(),
            tracks: Vec::new(),
        };
        // Interned names and categories.
        let mut interned = Vec::new();
        for (i, k) in [Kind::Call, Kind::Poll, Kind::Gpu, Kind::Sched]
            .iter()
            .enumerate()
        {
            p.inner.clear();
            uint(&mut p.inner, 1, i as u64 + 1);
            string(&mut p.inner, 2, k.category());
            bytes(&mut interned, 1, &p.inner);
        }
        for (i, name) in t.names.iter().enumerate() {
            p.inner.clear();
            uint(&mut p.inner, 1, i as u64 + 1);
            string(&mut p.inner, 2, name);
            bytes(&mut interned, 2, &p.inner);
        }
        p.packet.clear();
        uint(&mut p.packet, 10, SEQ);
        uint(&mut p.packet, 13, SEQ_INCREMENTAL_STATE_CLEARED);
        bytes(&mut p.packet, 12, &interned);
        p.flush_packet()?;
        p.sync_tracks(t)?;
        Ok(p)
    }

    /// Writes descriptors for tracks created since the last call.
    pub(crate) fn sync_tracks(&mut self, t: &Tracks) -> std::io::Result<()> {
        for i in self.tracks.len()..t.tracks.len() {
            let tr = &t.tracks[i];
            self.tracks.push((tr.rank, tr.kind.clone(), tr.label()));
            self.levels.push(0);
            self.ensure_process(tr.rank)?;
            self.descriptor(i, 0)?;
        }
        Ok(())
    }

    fn ensure_process(&mut self, rank: u32) -> std::io::Result<()> {
        if self.ranks.contains(&rank) {
            return Ok(());
        }
        self.ranks.push(rank);
        self.inner.clear();
        uint(&mut self.inner, 1, u64::from(rank) + 1);
        string(&mut self.inner, 6, &format!("rank {rank}"));
        self.scratch.clear();
        uint(&mut self.scratch, 1, PROCESS_UUID + u64::from(rank));
        bytes(&mut self.scratch, 3, &self.inner);
        self.descriptor_packet()
    }

    /// The descriptor of `track`'s `level` (0 = the track itself).
    fn descriptor(&mut self, track: usize, level: u32) -> std::io::Result<()> {
        let (rank, kind, label) = self.tracks[track].clone();
        let pid = u64::from(rank) + 1;
        self.scratch.clear();
        uint(&mut self.scratch, 1, uuid(track as u32, level));
        match (&kind, level) {
            (TrackKind::Thread { tid, name }, 0) => {
                self.inner.clear();
                uint(&mut self.inner, 1, pid);
                uint(&mut self.inner, 2, *tid as u64);
                string(&mut self.inner, 5, name);
                bytes(&mut self.scratch, 4, &self.inner);
            }
            (_, 0) => {
                string(&mut self.scratch, 2, &label);
                uint(&mut self.scratch, 5, PROCESS_UUID + u64::from(rank));
            }
            (_, _) => {
                string(
                    &mut self.scratch,
                    2,
                    &format!("{label} (overlapping {level})"),
                );
                uint(&mut self.scratch, 5, PROCESS_UUID + u64::from(rank));
            }
        }
        self.descriptor_packet()
    }

    fn descriptor_packet(&mut self) -> std::io::Result<()> {
        self.packet.clear();
        uint(&mut self.packet, 10, SEQ);
        bytes(&mut self.packet, 60, &self.scratch);
        self.flush_packet()
    }

    /// Wraps `packet` as `Trace.packet` (field 1) and writes it.
    fn flush_packet(&mut self) -> std::io::Result<()> {
        self.head.clear();
        tag(&mut self.head, 1, LEN);
        varint(&mut self.head, self.packet.len() as u64);
        self.out.write_all(&self.head)?;
        self.out.write_all(&self.packet)
    }

    fn event(
        &mut self,
        ts: i64,
        track: u32,
        level: u32,
        begin: Option<(&Item, Option<u32>)>,
    ) -> std::io::Result<()> {
        if level > self.levels[track as usize] {
            for l in self.levels[track as usize] + 1..=level {
                self.descriptor(track as usize, l)?;
            }
            self.levels[track as usize] = level;
        }
        self.scratch.clear();
        match begin {
            Some((item, flow)) => {
                uint(&mut self.scratch, 3, item.kind as u64 + 1);
                uint(&mut self.scratch, 9, TYPE_SLICE_BEGIN);
                uint(&mut self.scratch, 10, u64::from(item.name) + 1);
                uint(&mut self.scratch, 11, uuid(track, level));
                if let Some(task) = flow {
                    fixed64(&mut self.scratch, 47, flow_id(task));
                }
            }
            None => {
                uint(&mut self.scratch, 9, TYPE_SLICE_END);
                uint(&mut self.scratch, 11, uuid(track, level));
            }
        }
        self.packet.clear();
        uint(&mut self.packet, 8, ts.max(0) as u64);
        uint(&mut self.packet, 10, SEQ);
        uint(&mut self.packet, 13, SEQ_NEEDS_INCREMENTAL_STATE);
        bytes(&mut self.packet, 11, &self.scratch);
        self.flush_packet()
    }

    /// Flushes and returns the writer.
    pub(crate) fn into_inner(mut self) -> std::io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

/// Track uuid of `track`'s `level`.
fn uuid(track: u32, level: u32) -> u64 {
    TRACK_UUID + u64::from(track) + u64::from(level) * LEVEL_STRIDE
}

/// Flow id of a task track (never 0).
pub(crate) fn flow_id(task_track: u32) -> u64 {
    u64::from(task_track) + 1
}

impl<W: Write> Sink for Perfetto<W> {
    type Error = std::io::Error;

    fn begin(
        &mut self,
        item: &Item,
        level: u32,
        _: &[Open],
        flow: Option<u32>,
    ) -> std::io::Result<u32> {
        self.event(item.start, item.track, level, Some((item, flow)))?;
        Ok(0)
    }

    fn end(&mut self, open: &Open, level: u32, _: &[Open]) -> std::io::Result<()> {
        self.event(open.item.end, open.item.track, level, None)
    }
}

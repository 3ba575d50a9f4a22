//! The collective side of [`Builder::mpi`](crate::Builder::mpi): MPI set-up and teardown, the
//! token relay that publishes one file per phase, and the gather of per-region totals that
//! gives rank 0's report its spread over ranks.
//!
//! **The relay.** Every rank writes its phase with the ordinary writer to a private part file
//! beside the output (`.<name>.rank<N>.<pid>.part`). Rank 0 creates the output's temporary
//! file and appends its own part; then, one rank at a time, it hands the token to rank `k`,
//! which streams its part file in [`MSG_BYTES`] messages into a temporary copy beside rank
//! 0's output (so ranks need no shared file system); rank 0 appends it
//! ([`super::merge::Merger`]), deletes the copy and passes the token on. Rank 0 then publishes
//! atomically and tells every rank the outcome. Rank 0 holds one message and one column
//! chunk at a time, never another rank's phase; its disk holds one rank's part at a time.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use ::mpi::topology::SimpleCommunicator;
use ::mpi::traits::*;

use super::merge::{Input, Merger};
use crate::Error;

/// Bytes per message of a part file.
pub(crate) const MSG_BYTES: usize = 4 << 20;
const TAG_TOKEN: i32 = 0x5c01;
const TAG_PART: i32 = 0x5c02;
const TAG_STATS: i32 = 0x5c03;
const TAG_PING: i32 = 0x5c04;
/// Ping-pong rounds per rank for a clock offset (the one with the smallest round trip wins).
const PINGS: usize = 12;

/// This process's place in the MPI job.
#[derive(Debug)]
pub(crate) struct Mpi {
    /// Rank in the world communicator.
    pub rank: u32,
    /// Size of the world communicator.
    pub size: u32,
    /// `build()` initialized MPI, so the guard finalizes it.
    owns: AtomicBool,
}

pub(super) fn mpi_err(context: &str, message: impl Into<String>) -> Error {
    Error::Mpi {
        context: context.to_string(),
        message: message.into(),
    }
}

impl Mpi {
    /// Uses the program's MPI, or initializes it with the highest thread level available.
    pub(crate) fn init() -> Result<Mpi, Error> {
        let mut owns = false;
        if !::mpi::environment::is_initialized() {
            match ::mpi::initialize_with_threading(::mpi::Threading::Multiple) {
                Some((universe, _level)) => {
                    // Finalized by `finish` (the guard's drop), not by the universe's drop:
                    // the layer, which lives on in the subscriber, must not own MPI.
                    std::mem::forget(universe);
                    owns = true;
                }
                None => return Err(mpi_err("initializing MPI", "MPI_Init_thread failed")),
            }
        }
        let world = SimpleCommunicator::world();
        Ok(Mpi {
            rank: world.rank() as u32,
            size: world.size() as u32,
            owns: AtomicBool::new(owns),
        })
    }

    /// Finalizes MPI if `build()` initialized it (once; at the guard's drop).
    pub(crate) fn finish(&self) {
        if self.owns.swap(false, Ordering::AcqRel) && !::mpi::environment::is_finalized() {
            // SAFETY: MPI was initialized by `init` and nothing else finalizes it (`owns`);
            // every collective of the profiler has completed before the guard's drop ends.
            unsafe {
                ::mpi::ffi::MPI_Finalize();
            }
        }
    }

    /// Sum of `v` over all ranks (so that every rank takes the same branch).
    pub(crate) fn sum(&self, v: u64) -> u64 {
        let mut out = 0u64;
        SimpleCommunicator::world().all_reduce_into(
            &v,
            &mut out,
            ::mpi::collective::SystemOperation::sum(),
        );
        out
    }

    /// Sends `bytes` to `to` (length first).
    fn send_bytes(&self, to: u32, tag: i32, bytes: &[u8]) {
        let world = SimpleCommunicator::world();
        let p = world.process_at_rank(to as i32);
        p.send_with_tag(&(bytes.len() as u64), tag);
        for chunk in bytes.chunks(MSG_BYTES) {
            p.send_with_tag(chunk, tag);
        }
    }

    /// Receives what [`send_bytes`](Self::send_bytes) sent, into `sink`.
    fn recv_bytes(&self, from: u32, tag: i32, sink: &mut dyn FnMut(&[u8])) -> u64 {
        let world = SimpleCommunicator::world();
        let p = world.process_at_rank(from as i32);
        let (len, _) = p.receive_with_tag::<u64>(tag);
        let mut got = 0u64;
        while got < len {
            let (chunk, _) = p.receive_vec_with_tag::<u8>(tag);
            got += chunk.len() as u64;
            sink(&chunk);
        }
        len
    }

    /// Small messages, gathered on rank 0 (rank order; empty on other ranks).
    pub(crate) fn gather_bytes(&self, mine: &[u8]) -> Vec<Vec<u8>> {
        let mut all = Vec::new();
        self.gather_each(mine, &mut |_, v| all.push(v));
        all
    }

    /// Gathers messages on rank 0, handing each to `each` (with its rank, in rank order) as
    /// it arrives, so rank 0 holds one at a time; other ranks send theirs.
    pub(crate) fn gather_each(&self, mine: &[u8], each: &mut dyn FnMut(u32, Vec<u8>)) {
        if self.rank != 0 {
            self.send_bytes(0, TAG_STATS, mine);
            return;
        }
        each(0, mine.to_vec());
        for k in 1..self.size {
            let mut v = Vec::new();
            self.recv_bytes(k, TAG_STATS, &mut |c| v.extend_from_slice(c));
            each(k, v);
        }
    }

    /// Each rank's clock minus rank 0's and its uncertainty (half the smallest round trip),
    /// by ping-pong; on rank 0 for every rank, elsewhere `[]`.
    pub(crate) fn clock_offsets(&self, now: &dyn Fn() -> i64) -> Vec<(i64, i64)> {
        let world = SimpleCommunicator::world();
        if self.rank != 0 {
            let root = world.process_at_rank(0);
            for _ in 0..PINGS {
                let (_t0, _) = root.receive_with_tag::<i64>(TAG_PING);
                root.send_with_tag(&now(), TAG_PING);
            }
            return Vec::new();
        }
        let mut out = vec![(0, 0)];
        for k in 1..self.size {
            let p = world.process_at_rank(k as i32);
            let mut best = (i64::MAX, 0);
            for _ in 0..PINGS {
                let t0 = now();
                p.send_with_tag(&t0, TAG_PING);
                let (tk, _) = p.receive_with_tag::<i64>(TAG_PING);
                let t1 = now();
                let rtt = t1 - t0;
                if rtt < best.0 {
                    best = (rtt, tk - t0 - rtt / 2);
                }
            }
            out.push((best.1, (best.0 + 1) / 2));
        }
        out
    }

    /// The collective publish of one phase at `candidate`: this rank's `part` (or why it has
    /// none) goes to rank 0, which merges every rank's part and publishes. Every rank gets
    /// the same outcome: the published path, or the error (`AlreadyExists` as an
    /// [`Error::OutputPath`], so callers can try the next name).
    pub(crate) fn publish(
        &self,
        part: &Result<PathBuf, String>,
        candidate: &Path,
        opts: &crate::output::hdf5::WriteOptions,
        offsets: &[(i64, i64)],
    ) -> Result<PathBuf, Error> {
        let outcome = if self.rank == 0 {
            self.collect(part, candidate, opts, offsets)
        } else {
            self.contribute(part);
            Outcome::Pending
        };
        self.broadcast(outcome, candidate)
    }

    /// Rank 0: merges every rank's part into `candidate`.
    fn collect(
        &self,
        part: &Result<PathBuf, String>,
        candidate: &Path,
        opts: &crate::output::hdf5::WriteOptions,
        offsets: &[(i64, i64)],
    ) -> Outcome {
        let (gzip, no_replace) = (opts.gzip, opts.no_replace);
        let mut failure: Option<String> = None;
        let mut merger = match Merger::create(candidate, gzip) {
            Ok(m) => Some(m),
            Err(e) => {
                failure = Some(e.to_string());
                None
            }
        };
        match (part, merger.as_mut()) {
            (Ok(p), Some(m)) => {
                let input = Input {
                    path: p,
                    rank: 0,
                    clock_offset_ns: 0,
                };
                if let Err(e) = m.append(&input) {
                    failure = Some(e.to_string());
                }
            }
            (Err(why), _) => failure = failure.or(Some(format!("rank 0: {why}"))),
            _ => {}
        }
        for k in 1..self.size {
            let go = failure.is_none();
            SimpleCommunicator::world()
                .process_at_rank(k as i32)
                .send_with_tag(&u8::from(go), TAG_TOKEN);
            if !go {
                continue;
            }
            let offset = offsets.get(k as usize).map_or(0, |o| o.0);
            if let Err(why) = self.receive_part(k, candidate, offset, merger.as_mut()) {
                failure = Some(why);
            }
        }
        match (failure, merger) {
            (Some(why), m) => {
                if let Some(m) = m {
                    m.abandon();
                }
                Outcome::Failed(why)
            }
            (None, Some(m)) => {
                let mut extra = offset_metadata(offsets);
                extra.push((super::MPI_WRITE_KEY, "relay".into()));
                let extra: Vec<(&str, String)> =
                    extra.iter().map(|(k, v)| (*k, v.clone())).collect();
                match m.finish(self.size, &extra, no_replace) {
                    Ok(merged) => match sync(&merged.file, opts.durable) {
                        Ok(()) => Outcome::Published(merged.file),
                        Err(e) => {
                            Outcome::Failed(format!("syncing {}: {e}", merged.file.display()))
                        }
                    },
                    Err(e) if is_exists(&e) => Outcome::Exists,
                    Err(e) => Outcome::Failed(e.to_string()),
                }
            }
            (None, None) => Outcome::Failed("no merger".into()),
        }
    }

    /// Rank 0: receives rank `k`'s part into a temporary copy and appends it.
    fn receive_part(
        &self,
        k: u32,
        candidate: &Path,
        offset: i64,
        merger: Option<&mut Merger>,
    ) -> Result<(), String> {
        let (status, _) = SimpleCommunicator::world()
            .process_at_rank(k as i32)
            .receive_with_tag::<u8>(TAG_PART);
        if status == 0 {
            let mut why = Vec::new();
            self.recv_bytes(k, TAG_PART, &mut |c| why.extend_from_slice(c));
            return Err(format!("rank {k}: {}", String::from_utf8_lossy(&why)));
        }
        let copy = super::part_name(candidate, k, "recv");
        let _ = std::fs::remove_file(&copy);
        let mut file = crate::data::files::create_new(&copy, 0o600);
        let mut write_err = None;
        self.recv_bytes(k, TAG_PART, &mut |c| {
            if let Ok(f) = file.as_mut() {
                if let Err(e) = f.write_all(c) {
                    write_err.get_or_insert(e);
                }
            }
        });
        let result = match (file, write_err) {
            (Err(e), _) | (Ok(_), Some(e)) => Err(format!(
                "rank 0 cannot keep rank {k}'s part in {}: {e}",
                copy.display()
            )),
            (Ok(_), None) => match merger {
                Some(m) => m
                    .append(&Input {
                        path: &copy,
                        rank: k,
                        clock_offset_ns: offset,
                    })
                    .map_err(|e| e.to_string()),
                None => Err("no merger".into()),
            },
        };
        let _ = std::fs::remove_file(&copy);
        result
    }

    /// Rank k > 0: waits for the token, then streams its part to rank 0.
    fn contribute(&self, part: &Result<PathBuf, String>) {
        let world = SimpleCommunicator::world();
        let root = world.process_at_rank(0);
        let (go, _) = root.receive_with_tag::<u8>(TAG_TOKEN);
        if go == 0 {
            return;
        }
        let opened = part.as_ref().map_err(Clone::clone).and_then(|p| {
            let f = crate::data::files::open_nofollow(p).map_err(|e| e.to_string())?;
            let len = f.metadata().map_err(|e| e.to_string())?.len();
            Ok((f, len))
        });
        match opened {
            Err(why) => {
                root.send_with_tag(&0u8, TAG_PART);
                self.send_bytes(0, TAG_PART, why.as_bytes());
            }
            Ok((mut f, len)) => {
                root.send_with_tag(&1u8, TAG_PART);
                root.send_with_tag(&len, TAG_PART);
                let mut buf = vec![0u8; MSG_BYTES];
                let mut left = len;
                while left > 0 {
                    let want = (left as usize).min(MSG_BYTES);
                    // A short read (the file changed under us) is padded with zeros: rank 0
                    // then fails to read the copy as HDF5 and reports it.
                    let n = read_full(&mut f, &mut buf[..want]);
                    buf[n..want].fill(0);
                    root.send_with_tag(&buf[..want], TAG_PART);
                    left -= want as u64;
                }
            }
        }
    }

    /// Rank 0 tells every rank the outcome.
    pub(super) fn broadcast(&self, outcome: Outcome, candidate: &Path) -> Result<PathBuf, Error> {
        let world = SimpleCommunicator::world();
        let root = world.process_at_rank(0);
        let (mut code, mut text) = match &outcome {
            Outcome::Published(p) => (1u8, p.to_string_lossy().into_owned().into_bytes()),
            Outcome::Exists => (2, Vec::new()),
            Outcome::Failed(why) => (3, why.clone().into_bytes()),
            Outcome::Pending => (0, Vec::new()),
        };
        let mut len = text.len() as u64;
        root.broadcast_into(&mut code);
        root.broadcast_into(&mut len);
        text.resize(len as usize, 0);
        if len > 0 {
            root.broadcast_into(&mut text[..]);
        }
        let text = String::from_utf8_lossy(&text).into_owned();
        match code {
            1 => Ok(PathBuf::from(text)),
            2 => Err(Error::OutputPath {
                path: candidate.to_path_buf(),
                source: std::io::Error::new(std::io::ErrorKind::AlreadyExists, "exists"),
            }),
            _ => Err(mpi_err("publishing the multi-rank profile", text)),
        }
    }
}

/// What rank 0's publication came to.
pub(super) enum Outcome {
    Published(PathBuf),
    Exists,
    Failed(String),
    /// Not rank 0: the broadcast says.
    Pending,
}

/// With `durable`, fsyncs the published file and its directory.
fn sync(path: &Path, durable: bool) -> std::io::Result<()> {
    if durable {
        crate::data::files::open_nofollow(path)?.sync_all()?;
        crate::data::files::sync_dir(path)?;
    }
    Ok(())
}

fn read_full(f: &mut std::fs::File, buf: &mut [u8]) -> usize {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) | Err(_) => break,
            Ok(k) => n += k,
        }
    }
    n
}

fn is_exists(e: &Error) -> bool {
    use std::error::Error as _;
    e.source()
        .and_then(|s| s.downcast_ref::<std::io::Error>())
        .is_some_and(|io| io.kind() == std::io::ErrorKind::AlreadyExists)
}

/// The metadata keys for the clock offsets (JSON lists, rank order).
pub(crate) fn offset_metadata(offsets: &[(i64, i64)]) -> Vec<(&'static str, String)> {
    let list = |f: fn(&(i64, i64)) -> i64| {
        let v: Vec<String> = offsets.iter().map(|o| f(o).to_string()).collect();
        format!("[{}]", v.join(", "))
    };
    vec![
        ("mpi_clock_offsets_ns", list(|o| o.0)),
        ("mpi_clock_uncertainty_ns", list(|o| o.1)),
    ]
}

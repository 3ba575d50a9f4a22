//! The spool's phases: handing a phase's file over at a finalize (moved aside as
//! `<spool>.<phase>`), starting the next one, a file that could not be moved aside (a
//! read-only directory) and the spool's end at shutdown.

use std::io;
use std::path::PathBuf;

use super::loss::{self, CallSpan, Rotated, SpoolFailure};
use super::{create_file, SpoolWriter};
use crate::data::rows::ThreadRow;
use crate::data::stats::Stats;

impl SpoolWriter {
    /// Makes sure the phase has a file: moves an earlier phase's file that is still at the
    /// spool's name aside first, then creates a fresh one.
    pub(super) fn ensure_file(&mut self) -> Result<(), (&'static str, io::Error)> {
        if self.file.is_some() {
            return Ok(());
        }
        if let Some((phase, old)) = self.leftover.take() {
            if loss::still_at(&self.path, &old) {
                let aside = self.phase_path(phase);
                if let Err(e) = crate::data::files::rename_noreplace(&self.path, &aside) {
                    self.leftover = Some((phase, old));
                    return Err(("moving an earlier phase's spool aside", e));
                }
            }
        }
        // Nothing of this phase is on disk yet, so `buf` begins with the header.
        let file = create_file(&self.path).map_err(|e| ("creating the spool", e))?;
        self.file = Some(file);
        Ok(())
    }

    /// Where phase `phase`'s file goes once it is handed over.
    fn phase_path(&self, phase: u64) -> PathBuf {
        PathBuf::from(format!("{}.{phase}", self.path.display()))
    }

    /// Moves the phase's file to `<spool>.<phase>`, or `<spool>.<phase>.<k>` when something is
    /// already there: never over it (a file at that name may be another run's, or planted).
    fn move_aside(&self, phase: u64) -> io::Result<PathBuf> {
        let first = self.phase_path(phase);
        let names = std::iter::once(first.clone())
            .chain((1..1000).map(|k| PathBuf::from(format!("{}.{k}", first.display()))));
        let mut last = None;
        for aside in names {
            match crate::data::files::rename_noreplace(&self.path, &aside) {
                Ok(()) => return Ok(aside),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::from(io::ErrorKind::AlreadyExists)))
    }

    /// Ends the current phase: flushes, moves the phase's file aside to `<spool>.<phase>`
    /// (published and then deleted by the caller, or kept when it failed) and starts a fresh
    /// spool (header and region table) for the next phase.
    pub(crate) fn rotate(
        &mut self,
        phase: u64,
        threads: &[ThreadRow],
        aggregate: &[(u32, Stats)],
    ) -> Rotated {
        self.flush(threads, aggregate);
        let mut kept = std::mem::take(&mut self.kept);
        let mut lost = std::mem::take(&mut self.lost);
        let lanes = std::mem::take(&mut self.lanes);
        let lost_lanes = std::mem::take(&mut self.lost_lanes);
        let mut failure = self.failure.take();
        let (mut moved, mut kept_at) = (None, None);
        if let Some(file) = self.file.take() {
            match self.move_aside(phase) {
                Ok(aside) => moved = Some(aside),
                Err(e) => {
                    if loss::still_at(&self.path, &file) {
                        // A read-only directory: the calls stay readable where they are.
                        kept_at = Some(self.path.clone());
                        self.leftover = Some((phase, file));
                    } else {
                        // The directory is gone, and the file with it.
                        lost.merge(kept);
                        self.lost_calls += kept.calls;
                        kept = CallSpan::default();
                    }
                    if failure.is_none() {
                        failure = Some(("moving this phase's spool aside", e));
                    }
                }
            }
        }
        let failure = failure
            .filter(|_| lost.calls + lost_lanes > 0 || kept_at.is_some())
            .map(|(context, error)| SpoolFailure {
                context,
                path: self.path.clone(),
                error,
                lost,
                kept_at,
            });
        // The next phase: a fresh file, its header and the region table.
        self.torn = false;
        self.on_disk = 0;
        self.segment_start = 0;
        self.need_header = true;
        self.written_regions = 0;
        self.regions_on_disk = 0;
        self.written_sites = 0;
        self.sites_on_disk = 0;
        self.put_preamble();
        self.write_out();
        Rotated {
            file: moved,
            calls: kept.calls,
            lanes,
            failure,
        }
    }

    /// At shutdown: removes the spool when it holds nothing unpublished, else flushes it and
    /// says where the unpublished calls are (`None`: nothing to say).
    pub(crate) fn shutdown(mut self, threads: &[ThreadRow]) -> Option<String> {
        self.flush(threads, &[]);
        let (kept, lost) = (self.kept.calls, self.lost.calls);
        if self.leftover.is_none() && kept == 0 && lost == 0 {
            if self.file.is_some() {
                let _ = std::fs::remove_file(&self.path);
            }
            return None;
        }
        let mut said = Vec::new();
        if kept > 0 {
            said.push(format!(
                "{kept} call(s) completed after the last finalize; they are kept in {} \
                 (`scopeprof recover` turns them into a profile)",
                self.path.display()
            ));
        }
        if lost > 0 {
            let cause = self.failure.as_ref().map(|(_, e)| loss::cause(e));
            said.push(format!(
                "{lost} call(s) completed after the last finalize lost their detail: {}",
                cause.unwrap_or_default()
            ));
        }
        if let Some((phase, _)) = &self.leftover {
            said.push(format!(
                "phase {phase}'s calls are still in {} (it could not be moved aside; \
                 `scopeprof recover --spool` reads it)",
                self.path.display()
            ));
        }
        let said = said.join("; ");
        Some(said)
    }
}

//! A phase's calls, task rows and polls read back from where they are: memory, or the spool
//! files the phase streamed to (the storage stage's half of [`PhaseData`]).

use crate::data::rows::{CallRecord, PhaseData, PollRecord, TaskRow};

impl PhaseData {
    /// Hands every call to `f` with its row: first the calls held in memory, row by row, then
    /// those in the spool files in spool order. Every pass over a phase sees the same order.
    ///
    /// # Errors
    /// A spool file cannot be read (the error names it).
    pub(crate) fn for_each_call(
        &self,
        mut f: impl FnMut(u32, &CallRecord),
    ) -> Result<(), crate::Error> {
        for (r, row) in self.regions.iter().enumerate() {
            for c in &row.calls {
                f(r as u32, c);
            }
        }
        if let Some(sp) = &self.spooled {
            for file in &sp.files {
                let mut on_calls = |region: u32, calls: &[CallRecord]| {
                    if let Some(&row) = sp.row_of.get(region as usize) {
                        if row != u32::MAX {
                            for c in calls {
                                f(row, c);
                            }
                        }
                    }
                };
                super::scan(file, false, Some(&mut on_calls)).map_err(|e| spool_error(file, e))?;
            }
        }
        Ok(())
    }

    /// Every task row and poll of the phase: those the spool files hold (retired and
    /// streamed out during the phase), read in a pass of their own that skips the calls (a
    /// finalize reads them on one thread while another reads the calls, see
    /// [`crate::finalize::pipeline`]), then those still in memory; task rows in index order.
    /// `follower` has read the first part of the (single) spool file already.
    ///
    /// # Errors
    /// A spool file cannot be read (the error names it).
    pub(crate) fn read_lanes(
        &self,
        follower: Option<super::LaneFollower>,
    ) -> Result<(Vec<TaskRow>, Vec<PollRecord>), crate::Error> {
        let (mut tasks, mut polls) = match &self.spooled {
            None => (Vec::new(), Vec::new()),
            Some(sp) => {
                // Room for all of them at once: no copies while millions of rows come in.
                let total = (
                    sp.lanes.tasks as usize + self.tasks.len(),
                    sp.lanes.polls as usize + self.polls.len(),
                );
                match follower.filter(|_| sp.files.len() == 1) {
                    Some(f) => f.finish(total).map_err(|e| spool_error(&sp.files[0], e))?,
                    None => {
                        let mut out = super::SpoolContents::default();
                        out.tasks.reserve(total.0);
                        out.polls.reserve(total.1);
                        for file in &sp.files {
                            out = super::scan_into(file, true, None, out)
                                .map_err(|e| spool_error(file, e))?;
                        }
                        (out.tasks, out.polls)
                    }
                }
            }
        };
        tasks.extend_from_slice(&self.tasks);
        polls.extend_from_slice(&self.polls);
        TaskRow::order(&mut tasks);
        Ok((tasks, polls))
    }
}

/// A spool file could not be read back.
fn spool_error(file: &std::path::Path, source: std::io::Error) -> crate::Error {
    crate::Error::Io {
        context: "reading this phase's calls back from the spool".into(),
        path: file.to_path_buf(),
        source,
    }
}

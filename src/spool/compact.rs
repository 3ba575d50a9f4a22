//! Compacting an aggregate spool (the flight recorder's main spool, which holds statistics
//! only): its frames repeat the phase's statistics and the live threads' rows at every flush,
//! so on a run of days it would grow without bound. [`SpoolWriter::compact`] writes a fresh
//! file beside it with the header, the regions, the sites, the whole thread table and the
//! latest statistics, and renames it over the spool: a crash at any moment leaves one whole
//! spool at the spool's name.

use std::io;

use super::SpoolWriter;
use crate::data::rows::ThreadRow;
use crate::data::stats::Stats;

impl SpoolWriter {
    /// Rewrites the spool as its preamble, `threads` (the whole table) and `aggregate` (the
    /// phase's statistics so far). Only for a spool that holds no calls, polls or lanes: those
    /// would be dropped. On an error the spool is left as it was (and is still written).
    pub(crate) fn compact(
        &mut self,
        threads: &[ThreadRow],
        aggregate: &[(u32, Stats)],
    ) -> io::Result<()> {
        debug_assert!(self.kept.calls == 0 && self.lanes.tasks + self.lanes.polls == 0);
        let tmp = std::path::PathBuf::from(format!("{}.compact", self.path.display()));
        // A rewrite a crash interrupted: ours (the spool is locked by this process).
        let _ = std::fs::remove_file(&tmp);
        let mut fresh = SpoolWriter::create(tmp.clone(), self.header.clone(), self.durable)?;
        for (id, r) in self.regions.iter().enumerate() {
            fresh.region(id as u32, &r.name, &r.file, r.line);
        }
        if !self.sites.is_empty() {
            fresh.sites(self.sites.clone());
        }
        if self.sched_columns {
            fresh.scheduled_columns();
        }
        fresh.flush(threads, aggregate);
        if let Some((_, e)) = fresh.failure.take() {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        if let Err(e) = std::fs::rename(&tmp, &self.path) {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        fresh.path = self.path.clone();
        fresh.lost_calls = self.lost_calls;
        *self = fresh;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::*;

    #[test]
    fn a_compacted_spool_keeps_the_latest_statistics_and_the_threads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let header = Header {
            aggregate: true,
            ..Header::default()
        };
        let mut w = SpoolWriter::create(path.clone(), header, false).unwrap();
        w.region(0, "a", "src/a.rs", 4);
        let thread = ThreadRow {
            index: 0,
            name: "main".into(),
            native_id: 1,
            start_ns: 0,
            end_ns: -1,
            cpu_ns: 0,
        };
        let mut s = crate::data::stats::Sums::default();
        for k in 0..1000u64 {
            s.add(k);
            w.flush(std::slice::from_ref(&thread), &[(0, s.stats())]);
        }
        let before = std::fs::metadata(&path).unwrap().len();
        w.compact(std::slice::from_ref(&thread), &[(0, s.stats())])
            .unwrap();
        let after = std::fs::metadata(&path).unwrap().len();
        assert!(after * 100 < before, "{before} -> {after} bytes");
        // It goes on being written, and reads back with the latest statistics.
        s.add(7);
        w.flush(std::slice::from_ref(&thread), &[(0, s.stats())]);
        let c = read(&path).unwrap();
        assert_eq!(c.regions.len(), 1);
        assert_eq!(c.threads.len(), 1);
        let (_, st) = c.aggregate.iter().find(|(r, _)| *r == 0).unwrap();
        assert_eq!(st.count, 1001);
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temporary left"
        );
    }
}

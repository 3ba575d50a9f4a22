//! Self-contained segments of a spool file (issue 33, the flight recorder's rolling spool):
//! [`SpoolWriter::new_segment`] ends the frames written so far and begins a segment that
//! repeats the header, every region and every spawn site declared so far, and the thread
//! table, before any frame that refers to them. The bytes from a segment's start on read as a
//! spool of their own, so an older segment can be dropped without losing anything a newer one
//! refers to; read whole, the repeated frames replace what they repeat (same ids, same
//! values). Regions and sites are few: repeating all of them costs less than tracking which
//! ones a segment uses.

use super::SpoolWriter;
use crate::data::rows::ThreadRow;

impl SpoolWriter {
    /// Writes everything buffered, then begins a new segment with the header, the regions,
    /// the sites and `threads` (the whole thread table); returns the offset in the file where
    /// the segment begins (`None`: that write failed; the next write begins it again).
    // The flight recorder's rolling spool (issue 33) is its user; not wired in yet.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn new_segment(&mut self, threads: &[ThreadRow]) -> Option<u64> {
        self.flush(&[], &[]);
        let start = self.on_disk;
        self.segment_start = start;
        self.need_header = true;
        self.written_regions = 0;
        self.regions_on_disk = 0;
        self.written_sites = 0;
        self.sites_on_disk = 0;
        self.put_preamble();
        self.put_threads(threads);
        self.write_out();
        (self.on_disk > start).then_some(start)
    }
}

#[cfg(test)]
mod tests {
    use super::super::*;
    use crate::data::rows::{CallRecord, PollRecord};
    use crate::data::sites::SiteInfo;

    #[test]
    fn a_segment_reads_alone_once_the_older_one_is_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let header = Header {
            start_time_ns: 3,
            timestamp: "t".into(),
            track_async: true,
            ..Header::default()
        };
        let mut w = SpoolWriter::create(path.clone(), header.clone(), false).unwrap();
        w.region(0, "a", "src/a.rs", 4);
        w.region(1, "b", "", -1);
        let site = SiteInfo {
            line: 7,
            col: 1,
            name: "worker".into(),
            file: "src/w.rs".into(),
        };
        w.sites(vec![(1, site.clone())]);
        for k in 0..10 {
            w.call(0, CallRecord::new(k * 10, 5, 0));
        }
        let thread = ThreadRow {
            index: 0,
            name: "main".into(),
            native_id: 1,
            start_ns: 0,
            end_ns: -1,
            cpu_ns: 1,
        };
        w.flush(std::slice::from_ref(&thread), &[]);
        let at = w
            .new_segment(std::slice::from_ref(&thread))
            .expect("written") as usize;
        // The newer segment refers to both regions, declared in the older one.
        w.call(1, CallRecord::new(500, 5, 0));
        w.call(0, CallRecord::new(600, 5, 0));
        w.poll(PollRecord {
            region: 1,
            start_ns: 500,
            dur_ns: 5,
            thread: 0,
            task: -1,
            sched_ns: -1,
        });
        w.flush(&[], &[]);
        let bytes = std::fs::read(&path).unwrap();
        assert!(at > 0 && at < bytes.len());
        assert_eq!(bytes[at], TAG_HEADER, "the segment begins with the header");

        let rest = dir.path().join("rest");
        std::fs::write(&rest, &bytes[at..]).unwrap();
        let c = read(&rest).unwrap();
        assert_eq!(c.header, header);
        let names: Vec<&str> = c.regions.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(c.calls[0], vec![CallRecord::new(600, 5, 0)]);
        assert_eq!(c.calls[1], vec![CallRecord::new(500, 5, 0)]);
        assert_eq!(c.sites, vec![site]);
        assert_eq!(c.threads, vec![thread]);
        assert_eq!(c.polls.len(), 1);
        assert_eq!(c.torn_bytes, 0);

        // Read whole, the repeated frames change nothing.
        let all = read(&path).unwrap();
        assert_eq!(all.calls[0].len(), 11);
        assert_eq!(all.regions, c.regions);
        assert_eq!(all.sites, c.sites);
    }
}

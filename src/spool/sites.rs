//! The spool's part of Tokio's own instrumentation (see [`crate::flusher::sched`]): the spawn
//! sites frame (tag 9), which task rows name by site id, and the switch that makes call and
//! poll frames look for scheduled time.

use super::{frame, put_str, SpoolWriter, TAG_SITES};
use crate::data::sites::SiteInfo;

impl SpoolWriter {
    /// Calls and polls may carry scheduled time from now on (Tokio's instrumentation is on).
    pub(crate) fn scheduled_columns(&mut self) {
        self.sched_columns = true;
    }

    /// Declares Tokio spawn sites, which task rows name by id (written before the next frame,
    /// and again at the start of every later phase's file, like regions).
    pub(crate) fn sites(&mut self, sites: Vec<(u32, SiteInfo)>) {
        self.sites.extend(sites);
    }

    pub(super) fn put_sites(&mut self) {
        let new = &self.sites[self.written_sites..];
        if new.is_empty() {
            return;
        }
        let mut p = Vec::new();
        p.extend_from_slice(&(new.len() as u32).to_le_bytes());
        for (id, s) in new {
            for v in [*id, s.line, s.col] {
                p.extend_from_slice(&v.to_le_bytes());
            }
            put_str(&mut p, &s.name);
            put_str(&mut p, &s.file);
        }
        frame(&mut self.buf, TAG_SITES, &p);
        self.written_sites = self.sites.len();
    }
}

//! The guard's side of the flight recorder (`Builder::flight_recorder`): its ring, dumps on
//! demand, on a signal and on triggers.

use std::path::Path;
use std::sync::mpsc::Receiver;

use super::FlushGuard;
use crate::recording::shared::Shared;
use crate::{Error, Report};

/// The flight recorder's ring beside `output`, when it is on.
pub(super) fn flight_ring(
    shared: &Shared,
    output: &Path,
) -> Option<crate::flusher::flight::FlightRing> {
    let config = &shared.config;
    let opts = config.flight?;
    // A ring an earlier run left (killed during its window): kept as a recovered profile.
    if let Err(e) = crate::finalize::recover::recover_stale_ring(output) {
        eprintln!("scope-profiler: {e}");
    }
    let interval = i64::try_from(config.flush_interval.as_nanos()).unwrap_or(i64::MAX);
    let ring = crate::flusher::flight::FlightRing::new(
        output,
        super::spool_header(shared),
        config.durable,
        opts,
        interval,
        shared.start_ns,
    );
    Some(ring)
}

impl FlushGuard {
    /// Writes the flight recorder's recent window ([`Builder::flight_recorder`](crate::Builder::flight_recorder))
    /// to `path` as a normal schema-3 profile, readable by every tool here and by the Python
    /// package, while the program keeps running and recording. Everything recorded before
    /// the call is in it: every call that ended in the window, whole, and the calls still
    /// open, with their enclosing open calls and their start (under
    /// `/scope_profiler_rs/open_calls`). [`Report::window_ns`] gives the time covered.
    /// The file is written on a thread of its own at low priority and published whole.
    ///
    /// From other threads, use a [`DumpHandle`](crate::DumpHandle) ([`dump_handle`](Self::dump_handle)).
    ///
    /// # Errors
    /// The profiler has no flight recorder ([`Error::InvalidOption`]); this is a forked child
    /// ([`Error::ForkedChild`]); the flusher failed, is gone or stalled; a segment cannot be
    /// read or the file cannot be written ([`Error::Io`], e.g. a full disk). The recorder
    /// goes on in every case.
    pub fn dump(&self, path: impl AsRef<std::path::Path>) -> Result<Report, Error> {
        self.dump_handle().dump(path)
    }

    /// Dumps the flight recorder's window on `signal` (see `Builder::dump_on_signal`).
    pub(crate) fn dump_on_signal(&mut self, signal: i32, output: &Path) -> Result<(), Error> {
        let dumps =
            crate::finalize::dump_signal::SignalDumps::start(self.dump_handle(), signal, output)?;
        self.signal_dumps = Some(dumps);
        Ok(())
    }

    /// A cloneable handle that asks for [`dump`](Self::dump)s from any thread.
    pub fn dump_handle(&self) -> crate::DumpHandle {
        crate::DumpHandle::new(
            self.inner.tx.clone(),
            self.inner.flusher_thread.clone(),
            self.inner.shared.clone(),
        )
    }

    /// Writes the dumps the flusher's triggers ask for (see `Builder::dump_when`).
    pub(super) fn dump_on_triggers(&mut self, fired: Receiver<usize>) -> Result<(), Error> {
        let (config, handle) = (&self.inner.shared.config, self.dump_handle());
        if let Some(output) = &config.output {
            let dumps = crate::finalize::dump_triggers::TriggerDumps::start(
                handle,
                config.triggers.clone(),
                fired,
                output,
            )?;
            self.trigger_dumps = Some(dumps);
        }
        Ok(())
    }
}

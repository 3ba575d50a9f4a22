//! Dumps on triggers (`Builder::dump_when`): the flusher checks the triggers at every flush
//! and sends the position of one that fired; this thread writes its dump beside the output as
//! `<stem>.dump-<trigger>-<unix seconds>.h5` and keeps only the newest
//! [`MAX_TRIGGER_DUMPS`] of those it wrote. The flusher enforces each trigger's cool-down;
//! the thread ends when the flusher does (its sender is dropped).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::mpsc::Receiver;
use std::thread::JoinHandle;

use crate::data::trigger::Trigger;
use crate::finalize::dump::DumpHandle;
use crate::Error;

/// Dumps written by triggers kept at most (the oldest is deleted when a new one is written),
/// so a condition that holds for days does not fill the disk.
pub const MAX_TRIGGER_DUMPS: usize = 10;

/// The thread that writes the triggers' dumps.
pub(crate) struct TriggerDumps {
    thread: Option<JoinHandle<()>>,
}

impl TriggerDumps {
    /// Starts the thread: a dump through `handle` beside `output` for each position of
    /// `triggers` received on `fired`.
    ///
    /// # Errors
    /// The thread cannot be started.
    pub(crate) fn start(
        handle: DumpHandle,
        triggers: Vec<Trigger>,
        fired: Receiver<usize>,
        output: &Path,
    ) -> Result<TriggerDumps, Error> {
        let output = output.to_path_buf();
        let thread = std::thread::Builder::new()
            .name("scope-profiler-triggers".into())
            .spawn(move || serve(&handle, &triggers, &fired, &output))
            .map_err(|source| Error::ThreadSpawn {
                thread: "scope-profiler-triggers",
                source,
            })?;
        Ok(TriggerDumps {
            thread: Some(thread),
        })
    }
}

impl Drop for TriggerDumps {
    fn drop(&mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(handle: &DumpHandle, triggers: &[Trigger], fired: &Receiver<usize>, output: &Path) {
    let mut written: VecDeque<PathBuf> = VecDeque::new();
    while let Ok(k) = fired.recv() {
        let Some(t) = triggers.get(k) else { continue };
        let name = t.name();
        // Room first, so there are never more than the most kept, even while one is written.
        while written.len() >= MAX_TRIGGER_DUMPS {
            if let Some(old) = written.pop_front() {
                let _ = std::fs::remove_file(old);
            }
        }
        let path = crate::finalize::dump_signal::dump_name(output, &name);
        match handle.dump(&path) {
            Ok(r) => {
                eprintln!(
                    "scope-profiler: trigger {name} fired: dumped the last {:.1} s to {}",
                    r.window_ns().unwrap_or(0) as f64 / 1e9,
                    path.display()
                );
                written.push_back(path);
            }
            // The flusher stopped meanwhile (the program is ending): nothing more to dump.
            Err(Error::FlusherGone) => return,
            Err(e) => eprintln!("scope-profiler: trigger {name} fired; the dump failed: {e}"),
        }
    }
}

//! `scope-profiler-recover`: turns the spool of a run that never finalized into a profile.
//!
//! ```text
//! scope-profiler-recover OUTPUT.h5                 # the newest run's spool files beside OUTPUT.h5
//! scope-profiler-recover --spool SPOOL OUTPUT.h5   # one spool file (left in place), also
//!                                                  # one kept as `.<name>.spool.corrupt-N`
//! ```
//!
//! A program that builds a profiler on the same output recovers a crashed run's spool by itself
//! (into `<stem>.recovered-N.h5`); this command is for doing it without running the program.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.as_slice() {
        [out] if !out.starts_with('-') => scope_profiler::recover(out),
        [flag, spool, out] if flag == "--spool" => scope_profiler::recover_spool(spool, out),
        _ => {
            eprintln!(
                "usage: scope-profiler-recover OUTPUT.h5\n       \
                 scope-profiler-recover --spool SPOOL OUTPUT.h5"
            );
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(r) => {
            println!("{r}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("scope-profiler-recover: {e}");
            ExitCode::FAILURE
        }
    }
}

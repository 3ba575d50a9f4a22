//! A benchmark to gate on with `scopeprof check`: regions with a known amount of work per
//! call (the workload of the `check` tests, `tests/cli_common/workload.rs`). Each run writes
//! one profile.
//!
//! ```text
//! cargo run --release --example check_bench -- OUT.h5 [--calls N] [--units U] [--kernel-scale 1.2] [--rare-scale 1.2]
//! ```
//!
//! `--kernel-scale 1.2` gives every `kernel` call 20 % more work (a regression to catch);
//! `docs/compare.md` runs it three times per side and gates on `scopeprof check`.

#[path = "../tests/cli_common/workload.rs"]
mod workload;

use workload::Workload;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mut out = None;
    let mut w = Workload::default();
    while let Some(a) = args.next() {
        let mut value = |name: &str| -> Result<String, String> {
            args.next().ok_or_else(|| format!("{name} needs a value"))
        };
        match a.as_str() {
            "--calls" => w.calls = value("--calls")?.parse()?,
            "--units" => w.units = value("--units")?.parse()?,
            "--kernel-scale" => w.kernel_scale = value("--kernel-scale")?.parse()?,
            "--rare-scale" => w.rare_scale = value("--rare-scale")?.parse()?,
            s if s.starts_with("--") => return Err(format!("unknown option {s}").into()),
            _ => out = Some(a),
        }
    }
    let out = out.ok_or(
        "usage: check_bench OUT.h5 [--calls N] [--units U] [--kernel-scale X] [--rare-scale X]",
    )?;
    workload::profile(std::path::Path::new(&out), w)?;
    Ok(())
}

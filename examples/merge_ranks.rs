//! Joins single-rank profiles into one multi-rank file (what `scopeprof merge` does):
//!
//! ```text
//! cargo run --example merge_ranks -- OUT.h5 run.rank0.h5 run.rank1.h5 ...
//! ```
//!
//! Such files come from ranks started by an MPI launcher without the `mpi` feature, or from
//! `recover` after a rank died. The rank of each input is the `N` of `.rank<N>` in its name.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((out, inputs)) = args.split_first().filter(|(_, i)| !i.is_empty()) else {
        eprintln!("usage: merge_ranks OUT.h5 IN.rank0.h5 [IN.rank1.h5 ...]");
        std::process::exit(2);
    };
    match scope_profiler::merge_ranks(inputs, out) {
        Ok(m) => println!(
            "wrote {} ({} ranks: {:?}, {} calls)",
            m.file.display(),
            m.ranks.len(),
            m.ranks,
            m.calls
        ),
        Err(e) => {
            eprintln!("merge_ranks: {e}");
            std::process::exit(1);
        }
    }
}

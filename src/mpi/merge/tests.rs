//! Unit tests of the merge.

use super::*;

#[test]
fn ranks_come_from_file_names() {
    assert_eq!(rank_in_name(Path::new("d/run.rank3.h5")), Some(3));
    assert_eq!(
        rank_in_name(Path::new("run.rank12.recovered-1.h5")),
        Some(12)
    );
    assert_eq!(rank_in_name(Path::new("run.h5")), None);
    assert_eq!(rank_in_name(Path::new("rankings.h5")), None);
}

#[test]
fn merge_errors_are_typed() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.h5");
    let none: [&str; 0] = [];
    assert!(matches!(
        merge_ranks(&none, &out),
        Err(Error::InvalidOption { .. })
    ));
    let missing = dir.path().join("nope.rank0.h5");
    let e = merge_ranks(&[&missing], &out).unwrap_err();
    assert!(e.to_string().contains("nope.rank0.h5"), "{e}");
    // Two inputs claiming one rank.
    let a = dir.path().join("a.rank1.h5");
    let b = dir.path().join("b.rank1.h5");
    let e = merge_ranks(&[&a, &b], &out).unwrap_err();
    assert!(e.to_string().contains("both hold rank 1"), "{e}");
    assert!(!out.exists());
    // Nothing is left beside the output after a failed merge.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// Clock offsets of 10 000 ranks, of realistic size (up to 13 digits): their JSON lists are
/// ~150 KB each, past the 64 KB an HDF5 attribute can hold in its object header.
#[cfg(feature = "mpi")]
pub(crate) fn ten_thousand_offsets() -> Vec<(i64, i64)> {
    (0..10_000i64)
        .map(|k| match k {
            0 => (0, 0),
            _ => (
                (k * 7_919_000_003) % 1_000_000_000_000 - 500_000_000_000,
                10_000 + k % 90_000,
            ),
        })
        .collect()
}

/// Checks that `file`'s `metadata` holds `offsets` whole, for this crate and for the Python
/// reference reader.
#[cfg(feature = "mpi")]
pub(crate) fn assert_offsets_kept(file: &Path, offsets: &[(i64, i64)]) {
    let f = File::open(file).unwrap();
    let meta = f.group("metadata").unwrap();
    for (key, pick) in [
        ("mpi_clock_offsets_ns", 0usize),
        ("mpi_clock_uncertainty_ns", 1),
    ] {
        let v = meta
            .attr(key)
            .unwrap()
            .read_scalar::<VarLenUnicode>()
            .unwrap();
        let text = v.as_str();
        assert!(text.len() > 64 << 10, "{key}: {} bytes", text.len());
        let got: Vec<i64> = text
            .trim_matches(|c| c == '[' || c == ']')
            .split(", ")
            .map(|x| x.parse().unwrap())
            .collect();
        let want: Vec<i64> = offsets.iter().map(|o| [o.0, o.1][pick]).collect();
        assert_eq!(got, want, "{key}");
    }
    let out = crate::testing::output_isolated(
        std::process::Command::new(crate::testing::venv().join("bin").join("python"))
            .arg("-c")
            .arg(
                "import sys, json, scope_profiler as sp\n\
                 m = sp.read_h5(sys.argv[1]).metadata\n\
                 print(len(json.loads(m['mpi_clock_offsets_ns'])), m['mpi_size'])\n",
            )
            .arg(file),
    );
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert_eq!(text.trim(), format!("{} {}", offsets.len(), offsets.len()));
}

/// The relay's metadata at 10 000 ranks: the clock offsets stay whole (no truncation, no
/// HDF5 attribute size limit: a variable-length string attribute keeps its text in the
/// global heap).
#[cfg(feature = "mpi")]
#[test]
fn ten_thousand_ranks_of_clock_offsets_fit_the_relay_metadata() {
    use crate::data::rows::{CallRecord, Layout, PhaseData, RegionRow};
    use crate::output::hdf5::{write_phase, WriteOptions};
    let dir = tempfile::tempdir().unwrap();
    let part = dir.path().join("part.h5");
    let mut row = RegionRow::new("solve");
    row.calls.push(CallRecord::new(100, 5, 0));
    row.stats.add(5);
    let data = PhaseData::new(Layout::Columnar, vec![row]);
    write_phase(&part, &data, &WriteOptions::default()).unwrap();
    let offsets = ten_thousand_offsets();
    let out = dir.path().join("run.h5");
    let mut m = Merger::create(&out, None).unwrap();
    m.append(&Input {
        path: &part,
        rank: 0,
        clock_offset_ns: 0,
    })
    .unwrap();
    let extra = crate::mpi::relay::offset_metadata(&offsets);
    let extra: Vec<(&str, String)> = extra.iter().map(|(k, v)| (*k, v.clone())).collect();
    m.finish(offsets.len() as u32, &extra, false).unwrap();
    assert_offsets_kept(&out, &offsets);
}

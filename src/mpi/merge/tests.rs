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

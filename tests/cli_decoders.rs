//! Property test of the file decoders behind `scopeprof` (`scope_profiler::read`): for random
//! index rows and event columns, written as real HDF5 files, opening and streaming either
//! succeeds with exactly the calls the schema defines (per-row cumulative start deltas) or
//! fails with an error naming the file; it never panics.

use proptest::prelude::*;
use scope_profiler::read::Profile;

/// Writes a schema-3 file with the given index and event columns.
fn write(
    path: &std::path::Path,
    names: usize,
    rows: &[(u32, u64, u64)],
    deltas: &[i64],
    durs: &[i64],
) {
    let f = hdf5::File::create(path).unwrap();
    f.new_attr::<i64>()
        .create("scope_profiler_schema")
        .unwrap()
        .write_scalar(&3i64)
        .unwrap();
    let names: Vec<hdf5::types::VarLenUnicode> = (0..names)
        .map(|i| format!("r{i}").parse().unwrap())
        .collect();
    let g = f.create_group("region_table").unwrap();
    g.new_dataset_builder()
        .with_data(&names)
        .create("names")
        .unwrap();
    let idx = f.create_group("rank_region_index").unwrap();
    let col = |name: &str, v: Vec<u64>| {
        idx.new_dataset_builder()
            .with_data(&v)
            .create(name)
            .unwrap();
    };
    col("region_ids", rows.iter().map(|r| u64::from(r.0)).collect());
    col("ranks", vec![0; rows.len()]);
    col("event_offsets", rows.iter().map(|r| r.1).collect());
    col("event_counts", rows.iter().map(|r| r.2).collect());
    let ev = f.create_group("events").unwrap();
    ev.new_dataset_builder()
        .with_data(deltas)
        .create("start_deltas")
        .unwrap();
    ev.new_dataset_builder()
        .with_data(durs)
        .create("durations")
        .unwrap();
}

/// What the schema says: `None` when the file is inconsistent.
fn expected(
    names: usize,
    rows: &[(u32, u64, u64)],
    deltas: &[i64],
    durs: &[i64],
) -> Option<Vec<(u32, i64, i64)>> {
    let n = deltas.len() as u64;
    if durs.len() as u64 != n {
        return None;
    }
    let mut spans: Vec<(u64, u64)> = Vec::new();
    for &(id, off, cnt) in rows {
        if id as usize >= names || off.checked_add(cnt)? > n {
            return None;
        }
        if cnt > 0 {
            spans.push((off, off + cnt));
        }
    }
    spans.sort();
    if spans.windows(2).any(|w| w[0].1 > w[1].0) {
        return None;
    }
    let mut sorted: Vec<&(u32, u64, u64)> = rows.iter().filter(|r| r.2 > 0).collect();
    sorted.sort_by_key(|r| r.1);
    let mut calls = Vec::new();
    for &&(id, off, cnt) in &sorted {
        let mut start = 0i64;
        for k in off..off + cnt {
            start = start.checked_add(deltas[k as usize])?;
            let dur = durs[k as usize].max(0);
            let end = start.checked_add(dur)?;
            if start.abs() >= 1 << 61 || end.abs() >= 1 << 61 {
                return None;
            }
            calls.push((id, start, dur));
        }
    }
    Some(calls)
}

fn any_time() -> impl Strategy<Value = i64> {
    prop_oneof![4 => -5i64..1_000, 1 => any::<i64>()]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]
    #[test]
    fn decoding_matches_the_schema_or_fails_cleanly(
        names in 1usize..4,
        rows in proptest::collection::vec((0u32..5, 0u64..12, 0u64..6), 0..5),
        deltas in proptest::collection::vec(any_time(), 0..12),
        extra_dur in 0usize..2,
        durs_seed in proptest::collection::vec(any_time(), 12),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.h5");
        let durs: Vec<i64> = durs_seed[..(deltas.len() + extra_dur).min(12)].to_vec();
        write(&path, names, &rows, &deltas, &durs);
        let want = expected(names, &rows, &deltas, &durs);
        let got = Profile::open(&path).and_then(|p| {
            let mut calls = Vec::new();
            p.for_each_call(3, |row, chunk| {
                calls.extend(chunk.iter().map(|c| (row.region, c.start_ns, c.dur_ns)));
                Ok(())
            })?;
            Ok(calls)
        });
        match (&want, &got) {
            (Some(w), Ok(g)) => prop_assert_eq!(w, g),
            (None, Err(e)) => prop_assert_eq!(&e.path, &path),
            _ => prop_assert!(false, "expected {:?}, got {:?}", want, got),
        }
    }
}

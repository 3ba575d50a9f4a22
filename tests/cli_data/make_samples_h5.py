#!/usr/bin/env python3
"""Write a schema-3 profile with known per-call durations, with plain h5py (no
scope_profiler import), for the `scopeprof diff`/`check` tests of the statistics
themselves (the regression tests proper use real profiled programs).

Usage: python make_samples_h5.py OUT.h5 SEED SCALE CALLS [--only-rank1]

Two ranks, each with regions `alpha` and `beta`, CALLS calls per (rank, region), one after
the other on one thread. Durations are log-normal around 20 us (sigma 0.1), drawn from
numpy's RandomState(SEED); `alpha` durations are multiplied by SCALE (on rank 1 only with
--only-rank1). Same SEED and CALLS with another SCALE give exactly scaled durations.
"""

import sys

import h5py
import numpy as np

STR = h5py.string_dtype(encoding="utf-8")


def main():
    out, seed, scale, calls = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
    only_rank1 = "--only-rank1" in sys.argv[5:]
    rng = np.random.RandomState(seed)
    names = ["alpha", "beta"]
    rows = []  # (region, rank, durations)
    for rank in (0, 1):
        for region, name in enumerate(names):
            d = 20_000.0 * np.exp(0.1 * rng.standard_normal(calls))
            if name == "alpha" and (rank == 1 or not only_rank1):
                d = d * scale
            rows.append((region, rank, np.round(d).astype(np.int64)))
    with h5py.File(out, "w") as f:
        f.attrs["scope_profiler_schema"] = np.int64(3)
        f.attrs.create("storage_layout", "columnar", dtype=STR)
        m = f.create_group("metadata")
        m.attrs["start_time_ns"] = np.int64(0)
        m.attrs["label"] = "samples"
        f.create_group("region_table").create_dataset(
            "names", data=np.array(names, dtype=object), dtype=STR
        )
        starts, durs, offsets, counts = [], [], [], []
        for _, _, d in rows:
            offsets.append(sum(len(x) for x in durs))
            counts.append(len(d))
            s = np.concatenate([[0], np.cumsum(d[:-1] + 100)]) + 1_000_000
            delta = np.empty_like(s)
            delta[0] = s[0]
            delta[1:] = np.diff(s)
            starts.append(delta)
            durs.append(d)
        ev = f.create_group("events")
        ev.create_dataset("start_deltas", data=np.concatenate(starts).astype("<i8"))
        ev.create_dataset("durations", data=np.concatenate(durs).astype("<i8"))
        idx = f.create_group("rank_region_index")
        n = len(rows)
        idx.create_dataset("region_ids", data=np.array([r[0] for r in rows], dtype="<u4"))
        idx.create_dataset("ranks", data=np.array([r[1] for r in rows], dtype="<u4"))
        idx.create_dataset("event_offsets", data=np.array(offsets, dtype="<u8"))
        idx.create_dataset("event_counts", data=np.array(counts, dtype="<u8"))
        idx.create_dataset("source_lines", data=np.full(n, -1, dtype="<i8"))
        for col in ("source_files", "source_texts"):
            idx.create_dataset(col, data=np.array([""] * n, dtype=object), dtype=STR)
        idx.create_dataset("tags", data=np.array(["[]"] * n, dtype=object), dtype=STR)


if __name__ == "__main__":
    main()

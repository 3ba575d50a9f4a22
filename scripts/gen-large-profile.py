#!/usr/bin/env python3
"""Write a large schema-3 profile for measuring `scopeprof` on big files.

Usage: python gen-large-profile.py OUT.h5 [CALLS] [THREADS]
(needs numpy and h5py, e.g. the venv of scripts/py-reader-env.sh)

Each thread repeats `request` [t, t+1000) holding `parse` [t+10, t+300) and `handle`
[t+320, t+980), which holds `query` [t+400, t+900); CALLS calls in all, spread over THREADS
thread lanes (`events/thread_ids`, `thread_table`), with the schema's delta-encoded starts
per region row. Everything nests, so the timeline and the flamegraph are exact.
"""

import sys

import h5py
import numpy as np

STR = h5py.string_dtype(encoding="utf-8")
# (name, offset in a request, duration)
SHAPE = [("request", 0, 1000), ("parse", 10, 290), ("handle", 320, 660), ("query", 400, 500)]


def main():
    out = sys.argv[1]
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 50_000_000
    threads = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    per_region = calls // len(SHAPE)
    base = 1_000_000_000
    names = [s[0] for s in SHAPE]
    with h5py.File(out, "w") as f:
        f.attrs["scope_profiler_schema"] = np.int64(3)
        f.attrs.create("storage_layout", "columnar", dtype=STR)
        m = f.create_group("metadata")
        m.attrs["start_time_ns"] = np.int64(base)
        m.attrs["label"] = "large"
        f.create_group("region_table").create_dataset("names", data=np.array(names, dtype=object), dtype=STR)
        n = per_region * len(SHAPE)
        ev = f.create_group("events")
        sd = ev.create_dataset("start_deltas", (n,), dtype="<i8")
        du = ev.create_dataset("durations", (n,), dtype="<i8")
        th = ev.create_dataset("thread_ids", (n,), dtype="<i8")
        k = np.arange(per_region, dtype=np.int64)
        thread = k % threads
        request_start = base + (k // threads) * 1200 + thread * 7
        excl = []
        for r, (name, off, dur) in enumerate(SHAPE):
            starts = request_start + off
            deltas = np.empty_like(starts)
            deltas[0] = starts[0]
            deltas[1:] = np.diff(starts)
            a, b = r * per_region, (r + 1) * per_region
            sd[a:b] = deltas
            du[a:b] = np.full(per_region, dur, dtype=np.int64)
            th[a:b] = thread
            child = {"request": 290 + 660, "handle": 500}.get(name, 0)
            excl.append((dur - child) * per_region)
        idx = f.create_group("rank_region_index")
        R = len(SHAPE)
        idx.create_dataset("region_ids", data=np.arange(R, dtype="<u4"))
        idx.create_dataset("ranks", data=np.zeros(R, dtype="<u4"))
        idx.create_dataset("event_offsets", data=np.arange(R, dtype="<u8") * per_region)
        idx.create_dataset("event_counts", data=np.full(R, per_region, dtype="<u8"))
        idx.create_dataset("source_lines", data=np.full(R, -1, dtype="<i8"))
        idx.create_dataset("exclusive_totals", data=np.array(excl, dtype="<i8"))
        for col in ("source_files", "source_texts"):
            idx.create_dataset(col, data=np.array([""] * R, dtype=object), dtype=STR)
        idx.create_dataset("tags", data=np.array(["[]"] * R, dtype=object), dtype=STR)
        t = f.create_group("thread_table")
        t.create_dataset("ranks", data=np.zeros(threads, dtype="<u4"))
        t.create_dataset("index", data=np.arange(threads, dtype="<i8"))
        t.create_dataset("ident", data=np.arange(threads, dtype="<i8") + 100)
        t.create_dataset("native_id", data=np.arange(threads, dtype="<i8") + 100)
        t.create_dataset("daemon", data=np.zeros(threads, dtype="<i1"))
        t.create_dataset("start_ns", data=np.zeros(threads, dtype="<i8"))
        t.create_dataset("end_ns", data=np.full(threads, -1, dtype="<i8"))
        t.create_dataset("cpu_ns", data=np.zeros(threads, dtype="<i8"))
        t.create_dataset("name", data=np.array([f"worker-{i}" for i in range(threads)], dtype=object), dtype=STR)
    print(f"wrote {out}: {n} calls on {threads} threads")


if __name__ == "__main__":
    main()

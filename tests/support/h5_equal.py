"""Compares two HDF5 files by value; prints `equal N datasets` or fails with the difference.

Usage: python h5_equal.py A.h5 B.h5 [IGNORED_ATTR ...]

Both files must hold the same groups and datasets with the same attributes. Datasets compare
by value: numbers with their types, strings as text (a fixed-length and a variable-length
string column holding the same texts are equal). Attributes named in IGNORED_ATTR are only
checked to exist on both sides.
"""
import sys

import h5py
import numpy as np


def objects(f):
    out = {"/": f}
    f.visititems(lambda name, obj: out.__setitem__(name, obj))
    return out


def value(v):
    v = np.asarray(v)
    if v.dtype.kind in "SO":
        return [x.decode() if isinstance(x, bytes) else x for x in v.ravel().tolist()]
    return (str(v.dtype), v.tolist())


def main(a_path, b_path, *ignored):
    a, b = h5py.File(a_path, "r"), h5py.File(b_path, "r")
    oa, ob = objects(a), objects(b)
    assert set(oa) == set(ob), sorted(set(oa) ^ set(ob))
    n = 0
    for name, o in oa.items():
        p = ob[name]
        if isinstance(o, h5py.Dataset):
            assert value(o[()]) == value(p[()]), name
            n += 1
        assert set(o.attrs) == set(p.attrs), (name, set(o.attrs) ^ set(p.attrs))
        for k in set(o.attrs) - set(ignored):
            assert value(o.attrs[k]) == value(p.attrs[k]), (name, k)
    print("equal", n, "datasets")


if __name__ == "__main__":
    main(*sys.argv[1:])

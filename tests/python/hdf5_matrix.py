"""A seeded random matrix of HDF5 datasets written by h5py (shared by test_kerchunk.py and
test_hdf5.py): chunked with partial edge chunks and an unlimited first dimension, contiguous
and compact layouts; no filter, gzip, shuffle + gzip; little- and big-endian dtypes; fill
values with unwritten chunks; nested groups."""

from __future__ import annotations

import numpy as np

DTYPES = ["<f4", ">f8", "<i2", "|u1", ">i4", "<u8"]
FILTERS = [None, "gzip", "shuffle+gzip"]
# What lsio reads in HDF5 files directly besides (kerchunk's references drop fletcher32).
MORE_FILTERS = FILTERS + ["fletcher32+shuffle+gzip", "zstd", "blosc", "lz4", "bitshuffle"]


def dataset_cases(rng, n, filters=FILTERS):
    cases = []
    for i in range(n):
        nd = int(rng.integers(1, 4))
        shape = tuple(int(x) for x in rng.integers(1, 40, nd))
        layout = ["chunked", "chunked", "contiguous", "compact"][i % 4]
        dtype = DTYPES[i % len(DTYPES)]
        if layout == "compact" and int(np.prod(shape)) * np.dtype(dtype).itemsize > 30000:
            layout = "contiguous"
        chunks = tuple(int(rng.integers(1, s + 1)) for s in shape) if layout == "chunked" else None
        filt = filters[(i // 4) % len(filters)] if layout == "chunked" else None
        fill = None if i % 3 else (7 if np.dtype(dtype).kind in "iu" else -1.5)
        sparse = layout == "chunked" and fill is not None  # leave some chunks unwritten
        cases.append(dict(name=f"v{i}", shape=shape, dtype=dtype, layout=layout, chunks=chunks, filters=filt,
                          fill=fill, sparse=sparse, group="grp/sub" if i % 5 == 4 else ""))
    return cases


def write_h5(path, cases, rng):
    import h5py

    with h5py.File(path, "w") as f:
        for c in cases:
            g = f.require_group(c["group"]) if c["group"] else f
            kw = {}
            if c["layout"] == "chunked":
                kw["chunks"] = c["chunks"]
                kw["maxshape"] = (None,) + c["shape"][1:]  # unlimited first dimension
                if c["filters"] == "gzip":
                    kw["compression"] = "gzip"
                    kw["compression_opts"] = int(rng.integers(1, 9))
                elif c["filters"] == "shuffle+gzip":
                    kw.update(compression="gzip", shuffle=True)
                elif c["filters"] == "fletcher32+shuffle+gzip":
                    kw.update(compression="gzip", shuffle=True, fletcher32=True)
                elif c["filters"] in ("zstd", "blosc", "lz4", "bitshuffle"):
                    import hdf5plugin  # the HDF5 filter plugins, registered when imported

                    if c["filters"] == "bitshuffle":
                        kw.update(hdf5plugin.Bitshuffle(nelems=int(rng.choice([0, 8, 24])),
                                                        cname=str(rng.choice(["none", "lz4", "zstd"]))))
                    elif c["filters"] == "lz4":
                        # Small LZ4 blocks (bytes) too, so that chunks hold several blocks,
                        # the last one short, and some that did not compress.
                        kw.update(hdf5plugin.LZ4(nbytes=int(rng.choice([0, 64, 1000]))))
                    else:
                        kw.update(hdf5plugin.Zstd(clevel=3) if c["filters"] == "zstd" else
                                  hdf5plugin.Blosc(cname="lz4", clevel=5, shuffle=hdf5plugin.Blosc.SHUFFLE))
            elif c["layout"] == "compact":
                kw["layout"] = h5py.h5d.COMPACT if hasattr(h5py.h5d, "COMPACT") else None
                if kw["layout"] is None:
                    del kw["layout"]
            if c["fill"] is not None:
                kw["fillvalue"] = c["fill"]
            dt = np.dtype(c["dtype"])
            if dt.kind == "f":
                data = rng.normal(0, 100, c["shape"]).astype(dt)
            else:
                info = np.iinfo(dt)
                data = rng.integers(max(info.min, -1000), min(info.max, 1000), c["shape"], endpoint=True).astype(dt)
            if c["layout"] == "compact":
                space = h5py.h5s.create_simple(c["shape"])
                plist = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
                plist.set_layout(h5py.h5d.COMPACT)
                tid = h5py.h5t.py_create(dt)
                dsid = h5py.h5d.create(g.id, c["name"].encode(), tid, space, plist)
                dsid.write(h5py.h5s.ALL, h5py.h5s.ALL, np.ascontiguousarray(data))
                continue
            ds = g.create_dataset(c["name"], shape=c["shape"], dtype=dt, **kw)
            if c["sparse"]:
                # Only the first half along the first axis is written: the rest stays unallocated.
                half = max(1, c["shape"][0] // 2)
                ds[:half] = data[:half]
            else:
                ds[...] = data


def selections(shape, rng, n=4):
    sels = [tuple(slice(None) for _ in shape)]
    for _ in range(n):
        key = []
        for s in shape:
            a, b = sorted(int(x) for x in rng.integers(0, s + 1, 2))
            key.append(slice(a, max(b, a + 1) if a < s else s, int(rng.integers(1, 3))))
        sels.append(tuple(key))
    return sels


def assert_reads_in_worker_processes(a):
    """The array pickles, and reads the same in spawned and forked worker processes (it
    travels pickled and is read in the child: operator.getitem(arr, ...))."""
    import multiprocessing as mp
    import operator
    import pickle

    b = pickle.loads(pickle.dumps(a))
    np.testing.assert_array_equal(a[...], b[...])
    for method in ("spawn", "fork"):
        with mp.get_context(method).Pool(1) as pool:
            got = pool.apply(operator.getitem, (b, Ellipsis))
        np.testing.assert_array_equal(got, a[...])


def assert_reads_like(a, want, rng, name):
    """lsio's array `a` equals `want` (the reference reader's whole array) bit for bit: shape,
    dtype, random strided selections and a read_crops batch of half-size crops."""
    assert a.shape == want.shape and a.dtype == want.dtype.newbyteorder("="), name
    for key in selections(want.shape, rng):
        got = a[key]
        assert got.tobytes() == np.ascontiguousarray(want[key]).astype(got.dtype).tobytes(), (name, key)
    crop = tuple(max(1, s // 2) for s in want.shape)
    starts = np.stack([rng.integers(0, s - k + 1, 5) for s, k in zip(want.shape, crop)], axis=1)
    batch = a.read_crops(starts, crop)
    for b, st in enumerate(starts):
        box = tuple(slice(int(o), int(o) + k) for o, k in zip(st, crop))
        np.testing.assert_array_equal(batch[b], want[box], err_msg=name)

"""Integer-array gather (``arr.oindex[...]``, ``arr.take``) and the per-call memory limit.

Gathers are compared with zarr-python's ``oindex`` on the same store, bit for bit, on both
I/O backends: unsorted and repeated indices, negative indices, boolean masks, mixed with
slices (incl. negative steps) and ints, and ``out=`` arrays.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
import zarr
from zarr.codecs import ZstdCodec

import lsio

DATA = np.random.default_rng(7).integers(0, 2**31, size=(23, 41, 17)).astype("int32")


@pytest.fixture(scope="module", params=["sharded", "plain"])
def store(request, tmp_path_factory):
    path = tmp_path_factory.mktemp("gather") / f"{request.param}.zarr"
    kw = dict(chunks=(4, 8, 5), shards=(8, 16, 10)) if request.param == "sharded" else dict(chunks=(5, 7, 6))
    z = zarr.create_array(str(path), shape=DATA.shape, dtype=DATA.dtype, compressors=ZstdCodec(level=1), **kw)
    z[...] = DATA
    return str(path), z


KEYS = [
    ([3, 1, 7, 7, 0, 22],),
    (np.array([-1, 0, -23]), slice(None), [16, 2]),
    (slice(2, 20, 3), [40, 0, 5, 6, 7, 8], slice(None, None, -2)),
    (5, [1, 2, 3, 10, 11], 4),
    (np.arange(23) % 2 == 0, slice(3, 9), [0]),
    ([], slice(None), slice(None)),
    (slice(None), slice(None), np.array([16, 15, 14, 13, 0, 1, 2], dtype=np.uint8)),
]


def numpy_outer(data, key):
    """Reference outer indexing with numpy (np.ix_), ints dropping their axis."""
    idx, drop = [], []
    for d, k in enumerate(key + (slice(None),) * (data.ndim - len(key))):
        n = data.shape[d]
        if isinstance(k, slice):
            idx.append(np.arange(n)[k])
        elif np.ndim(k) == 0:
            idx.append(np.array([k]))
            drop.append(d)
        else:
            a = np.asarray(k)
            idx.append(np.flatnonzero(a) if a.dtype == bool else a.astype(np.int64))
    return data[np.ix_(*idx)].squeeze(axis=tuple(drop)) if drop else data[np.ix_(*idx)]


@pytest.mark.parametrize("io", ["pread", "auto"])
@pytest.mark.parametrize("key", KEYS, ids=[str(i) for i in range(len(KEYS))])
def test_oindex_matches_zarr_and_numpy(store, io, key):
    path, z = store
    arr = lsio.open(path, io=io, threads=2)
    got = arr.oindex[key]
    want = numpy_outer(DATA, key)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert np.array_equal(got, want)
    # zarr-python 3.1 refuses negative slice steps, empty lists and (on unsharded stores)
    # small unsigned index arrays; numpy above is the reference for those keys.
    try:
        ref = z.oindex[key]
    except (IndexError, ValueError, TypeError):
        return
    assert np.array_equal(got, ref)


def test_oindex_into_strided_out(store):
    path, z = store
    arr = lsio.open(path)
    key = ([9, 2, 2, 17], slice(0, 30, 2), [4, 0])
    want = z.oindex[key]
    base = np.full((8,) + want.shape[1:] + (3,), -5, dtype="int32")
    out = base[::2, ..., 1]
    res = arr.oindex.read(key, out=out)
    assert res is out and np.array_equal(out, want)
    assert (base[1::2] == -5).all() and (base[..., 0] == -5).all()


def test_take_matches_numpy(store):
    path, _ = store
    arr = lsio.open(path, threads=1)
    idx = [20, 3, 3, 11, -2]
    for axis in range(3):
        ax_idx = [i % DATA.shape[axis] for i in idx]
        assert np.array_equal(arr.take(ax_idx, axis=axis), np.take(DATA, ax_idx, axis=axis))
    assert np.array_equal(arr.take(idx), np.take(DATA, idx, axis=0))


def test_gather_errors(store):
    path, _ = store
    arr = lsio.open(path)
    with pytest.raises(lsio.BoundsError):
        arr.oindex[[0, 23]]
    with pytest.raises(IndexError):
        arr.oindex[[[0, 1]]]
    with pytest.raises(TypeError):
        arr.oindex[[0.5]]
    with pytest.raises(TypeError):
        arr.oindex.read(([1, 2],), out=np.empty((2, 41, 17), "float64"))
    with pytest.raises(IndexError):
        arr.take([0], axis=3)


def test_memory_limit(store):
    path, z = store
    tight = lsio.open(path, memory_limit=1024)
    with pytest.raises(MemoryError, match="memory limit"):
        tight[...]
    roomy = lsio.open(path, memory_limit=64 << 20)
    assert np.array_equal(roomy[...], DATA)
    with pytest.raises(ValueError):
        lsio.open(path, memory_limit=0)


# --------------------------------------------------------------------------
# Index arithmetic at the int64 edges (Hardening items 3 and 9)
# --------------------------------------------------------------------------

BIG = [sys.maxsize, -sys.maxsize - 1, 2**63, 2**64 - 1, -(2**63) - 1, 2**64, -(2**64)]


@pytest.mark.parametrize("bad", [
    np.array([2**64 - 1], np.uint64),
    np.array([0, 2**63], np.uint64),
    np.array([41], np.uint64),
    np.uint64(2**64 - 1),
    [2**64 - 1],
    [2**64],
    [0, -(2**63) - 1],
    2**70,
    np.array([-(2**63)], np.int64),
    np.array([2**63 - 1], np.int64),
], ids=repr)
def test_gather_indices_beyond_int64_raise_index_error(store, bad):
    # uint64 indices used to be cast to int64 first: 2**64 - 1 read row -1 (the last one)
    # and 2**64 - 3 row -3. numpy 2.4 wraps them the same way; lsio checks bounds first.
    path, _ = store
    arr = lsio.open(path)
    with pytest.raises(lsio.BoundsError):
        arr.oindex[bad]
    with pytest.raises(IndexError):
        arr.oindex[:, bad]
    if np.ndim(bad):
        with pytest.raises(IndexError):
            arr.take(np.asarray(bad) if not isinstance(bad, list) else bad)
        with pytest.raises(IndexError):
            arr.take(bad, axis=2)


def test_take_of_wrapping_uint64_index_is_an_error_not_a_row(store):
    path, _ = store
    arr = lsio.open(path)
    with pytest.raises(IndexError):
        arr.take(np.array([2**64 - 3], np.uint64))
    # In-range uint64 indices still work.
    idx = np.array([22, 0, 5], np.uint64)
    assert np.array_equal(arr.take(idx), DATA[idx.astype(np.int64)])


def _huge_slices():
    edges = BIG + [0, 1, -1, 2, 3, -2, 22, 23, 40, None]
    out = []
    for step in [sys.maxsize, sys.maxsize - 1, -sys.maxsize, -sys.maxsize - 1, 2**63, -(2**63),
                 2**64 - 1, 2**64, -(2**64), 1, -1, 7, -5]:
        for start in (None, 0, -1, 5, sys.maxsize, -sys.maxsize - 1, 2**64 - 1):
            for stop in (None, 3, -2, sys.maxsize, -(2**63), 2**64):
                out.append(slice(start, stop, step))
    return out, edges


HUGE_SLICES, _ = _huge_slices()


@pytest.mark.parametrize("io", ["pread"])
def test_oindex_slices_with_huge_values_match_numpy(store, io):
    path, _ = store
    arr = lsio.open(path, io=io, threads=1)
    for s in HUGE_SLICES:
        for key in [(s,), (slice(None), slice(None), s), (s, 0, 0), (s, [3, 1], s)]:
            want = numpy_outer(DATA, key)
            got = arr.oindex[key]
            assert got.shape == want.shape and np.array_equal(got, want), key


# --------------------------------------------------------------------------
# Planning memory (Hardening item 11): measured in a fresh process
# --------------------------------------------------------------------------

_RSS_SCRIPT = r"""
import sys, numpy as np, lsio
def status(field):  # bytes
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith(field + ":"))
def mark():  # the current RSS, with the high-water mark reset to it
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return status("VmRSS")
def peak():
    return status("VmHWM")
path, case = sys.argv[1], sys.argv[2]
if case == "crops":
    arr = lsio.open(path, memory_limit=16 << 20, threads=1)
    starts = np.random.default_rng(0).integers(0, [23, 41, 17], size=(10**6, 3)).astype(np.int64)
    arr.read_crops(starts[:10], (1, 1, 1))
    before = mark()
    try:
        arr.read_crops(starts, (1, 1, 1))
        result = "read"
    except MemoryError as e:
        result = "MemoryError"
elif case in ("oindex", "oindex_limited"):
    arr = lsio.open(path, threads=1, memory_limit=(16 << 20) if case == "oindex_limited" else None)
    i0 = np.arange(512) * 3 % 23
    i1 = np.arange(512) * 3 % 41
    arr.oindex[i0[:4], i1[:4], 3]
    before = mark()
    got = arr.oindex[i0, i1, 3]  # 1 MiB of int32, 512 x 512 scattered runs
    result = "read" if got.nbytes == 1 << 20 else "wrong"
    np.save(sys.argv[3], got)
elif case == "big":
    arr = lsio.open(path, threads=2)
    n = int(sys.argv[4])
    i0 = np.arange(n) * 3 % 23
    i2 = np.arange(n) * 3 % 17
    arr.oindex[i0[:4], 0, i2[:4]]
    before = mark()
    got = arr.oindex[i0, 7, i2]
    result = "read"
    np.save(sys.argv[3], got[::97, ::89])
print(result, peak() - before)
"""


def _rss_growth(path, case, tmp_path, *extra):
    import subprocess

    script = tmp_path / "rss.py"
    script.write_text(_RSS_SCRIPT)
    res = subprocess.run([sys.executable, str(script), path, case, str(tmp_path / "got.npy"), *extra],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    result, grown = res.stdout.split()
    return result, int(grown)


def test_read_crops_memory_limit_counts_planning_before_allocating(store, tmp_path):
    # 10**6 one-element crops under memory_limit=16 MiB: the plan's bound is over the limit,
    # so the call fails before planning. It used to grow ~300 MiB first.
    path, _ = store
    result, grown = _rss_growth(path, "crops", tmp_path)
    assert result == "MemoryError"
    assert grown < 32 << 20, f"grew {grown >> 20} MiB"


@pytest.mark.parametrize("case", ["oindex", "oindex_limited"])
def test_scattered_oindex_plans_in_memory_proportional_to_runs(store, tmp_path, case):
    # 512 x 512 scattered indices (262,144 index pairs, 1 MiB result): this used to expand
    # into one box per pair (~300 MiB); under a 16 MiB memory_limit it failed.
    path, _ = store
    result, grown = _rss_growth(path, case, tmp_path)
    assert result == "read"
    assert grown < 16 << 20, f"grew {grown >> 20} MiB"
    i0 = np.arange(512) * 3 % 23
    i1 = np.arange(512) * 3 % 41
    assert np.array_equal(np.load(tmp_path / "got.npy"), DATA[np.ix_(i0, i1, [3])][:, :, 0])


def test_large_scattered_gather_within_a_small_multiple_of_its_output(store, tmp_path):
    # 2048 x 2048 scattered (16 MiB of int32); 8192 x 8192 behaves alike (see the report).
    path, _ = store
    n = 2048
    result, grown = _rss_growth(path, "big", tmp_path, str(n))
    assert result == "read"
    assert grown < 3 * n * n * 4, f"grew {grown >> 20} MiB for a {n * n * 4 >> 20} MiB result"
    i0 = np.arange(n) * 3 % 23
    i2 = np.arange(n) * 3 % 17
    assert np.array_equal(np.load(tmp_path / "got.npy"), DATA[np.ix_(i0, [7], i2)][:, 0][::97, ::89])

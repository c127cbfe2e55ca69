"""Bit-for-bit parity of lsio reads with zarr-python and with the writer.

For every supported store of ``stores.py`` (both reference writers, every
dtype, ranks 0-4, sharded and not, all codecs and key encodings lsio reads),
under every I/O backend ("pread" always; "uring" skipped only when the kernel
refuses io_uring; "auto") and thread count (1, 2):

* a full read equals the writer's expected array bit for bit (float NaN
  payloads and signed zeros included) and zarr-python's full read;
* seeded random basic-indexing keys (ints, negative ints, slices with steps
  of either sign, bounds past the ends, Ellipsis, implicit trailing dims)
  equal numpy indexing of the expected array and zarr-python's read of the
  same key (zarr-python has no negative steps: those are checked against
  numpy indexing of zarr-python's full read);
* ``read_crops`` batches (edge crops, repeated crops, crops sharing chunks)
  equal the stack of zarr-python's reads of each crop;
* reads into F-ordered and strided ``out`` arrays equal the same data;
* a hypothesis-driven key search (bounded, derandomized) on a few stores;
* one Array shared by several Python threads, and batches of hundreds of
  crops, on a few stores;
* reads after evicting the store from the page cache (cold reads take the
  slow path of io_uring and of the "auto" hybrid backend).

Stores zarr-python cannot open are compared with the expected array only.
zarr-python drops NaN payloads of fill values, so fill bits are always
checked against the writer's expected array.
"""

from __future__ import annotations

import zlib
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lsio
from selections import (
    crop_slices,
    has_negative_step,
    random_crops,
    random_keys,
)
from page_cache import drop_page_cache
from stores import assert_same_bits, assert_same_values

N_KEYS = 24


def seed_of(name: str) -> int:
    return zlib.crc32(name.encode())


def open_store(store, io_mode="pread", threads=1):
    return lsio.open(str(store.path), threads=threads, io=io_mode)


def check_against_zarr(store, actual, zarr_value, context):
    """Compare with a zarr-python read: bits, or values where zarr-python
    is known to rewrite the fill value's NaN bits."""
    if store.spec.zarr_bits_exact:
        assert_same_bits(actual, zarr_value, context)
    else:
        assert_same_values(actual, zarr_value, context)


def zarr_reference(store, key):
    """zarr-python's read of ``key``, or None when the store is unreadable."""
    if not store.zarr_readable:
        return None
    if has_negative_step(key):
        return store.zarr_full()[key]
    return store.zarr_read(key)


def test_reference_readers_agree(store):
    """Fixture sanity: zarr-python reads back what the writer wrote."""
    if not store.zarr_readable:
        with pytest.raises(Exception):
            store.zarr_full()
        return
    check_against_zarr(store, store.zarr_full(), store.expected, store.name)


def test_full_read(store, io_mode, threads):
    arr = open_store(store, io_mode, threads)
    got = arr[...]
    assert_same_bits(got, store.expected, f"{store.name}[...]")
    if store.zarr_readable:
        check_against_zarr(store, got, store.zarr_full(), store.name)
    again = arr.read(Ellipsis)
    assert_same_bits(again, store.expected, f"{store.name}.read(...)")
    assert not np.shares_memory(got, again)


def test_random_selections(store, io_mode, threads):
    arr = open_store(store, io_mode, threads)
    keys = random_keys(seed_of(store.name), store.expected.shape, N_KEYS)
    for key in keys:
        context = f"{store.name}[{key!r}]"
        got = arr[key]
        assert isinstance(got, np.ndarray), (context, type(got))
        assert_same_bits(got, store.expected[key], context)
        ref = zarr_reference(store, key)
        if ref is not None:
            check_against_zarr(store, got, ref, context)


def test_read_method_matches_getitem(store, io_mode):
    arr = open_store(store, io_mode, 2)
    for key in random_keys(seed_of(store.name) + 1, store.expected.shape, 6):
        assert_same_bits(arr.read(key), store.expected[key], repr(key))


def test_read_crops(store, io_mode, threads):
    arr = open_store(store, io_mode, threads)
    starts, crop = random_crops(
        seed_of(store.name), store.expected.shape, arr.chunks
    )
    got = arr.read_crops(starts, crop)
    assert isinstance(got, np.ndarray)
    assert got.shape == (len(starts),) + tuple(crop)
    want = np.stack([store.expected[crop_slices(s, crop)] for s in starts])
    context = f"{store.name} crops {crop} at {starts.tolist()}"
    assert_same_bits(got, want, context)
    if store.zarr_readable:
        ref = np.stack([store.zarr_read(crop_slices(s, crop)) for s in starts])
        check_against_zarr(store, got, ref, f"{store.name} crops vs zarr")


def test_read_crops_single_and_whole(store, io_mode):
    """One crop spanning the whole array, and a batch of one."""
    arr = open_store(store, io_mode, 2)
    shape = store.expected.shape
    whole = arr.read_crops(np.zeros((1, len(shape)), np.int64), shape)
    assert_same_bits(whole, store.expected[None], store.name)
    if shape and min(shape) > 0:
        last = np.array([[n - 1 for n in shape]], np.int64)
        corner = arr.read_crops(last, (1,) * len(shape))
        want = store.expected[tuple(slice(n - 1, n) for n in shape)][None]
        assert_same_bits(corner, want, store.name)


def _strided_out(shape, dtype, rng):
    """An ``out`` that is a stepped view into a larger sentinel-filled parent.

    Returns (out view, parent, mask of parent elements inside the view).
    """
    steps = [int(rng.integers(1, 4)) for _ in shape]
    offs = [int(rng.integers(0, 3)) for _ in shape]
    pshape = tuple(o + n * s + 1 for n, s, o in zip(shape, steps, offs))
    parent = np.empty(pshape, dtype)
    parent.reshape(-1).view(np.uint8)[:] = 0xA5
    sl = tuple(slice(o, o + n * s, s) for n, s, o in zip(shape, steps, offs))
    if not shape:
        sl = Ellipsis  # parent[()] would be a scalar, not a view
    mask = np.zeros(pshape, bool)
    mask[sl] = True
    return parent[sl], parent, mask


def test_read_into_non_contiguous_out(store, io_mode, threads):
    arr = open_store(store, io_mode, threads)
    rng = np.random.default_rng(seed_of(store.name) + 2)
    dtype = store.expected.dtype
    keys = random_keys(seed_of(store.name) + 3, store.expected.shape, 5)
    for key in keys:
        want = store.expected[key]
        context = f"{store.name}[{key!r}]"

        f_out = np.zeros(want.shape, dtype, order="F")
        res = arr.read(key, out=f_out)
        assert res is f_out, context
        assert_same_bits(f_out, want, context + " into F-order out")

        view, parent, mask = _strided_out(want.shape, dtype, rng)
        before = parent.copy()
        res = arr.read(key, out=view)
        assert res is view, context
        assert_same_bits(view, want, context + " into strided out")
        assert_same_bits(parent[~mask], before[~mask], context + " neighbours")

    starts, crop = random_crops(seed_of(store.name) + 4, store.expected.shape,
                                arr.chunks, count=7)
    want = np.stack([store.expected[crop_slices(s, crop)] for s in starts])
    view, parent, mask = _strided_out(want.shape, dtype, rng)
    before = parent.copy()
    res = arr.read_crops(starts, crop, out=view)
    assert res is view
    assert_same_bits(view, want, f"{store.name} crops into strided out")
    assert_same_bits(parent[~mask], before[~mask], f"{store.name} neighbours")
    f_out = np.zeros(want.shape, dtype, order="F")
    assert arr.read_crops(starts, crop, out=f_out) is f_out
    assert_same_bits(f_out, want, f"{store.name} crops into F-order out")


HYPOTHESIS_STORES = [
    "z_shard_zstd_end",
    "ts_shard_zstd_start",
    "z_4d_shard",
    "z_shard_transpose_3d_inside_crc",
    "ts_dtype_float64_shard",
    "z_be_f64_nan_sparse",
]


@st.composite
def basic_keys(draw, shape):
    parts = []
    for n in shape:
        if draw(st.booleans()) and n > 0:
            parts.append(draw(st.integers(-n, n - 1)))
        else:
            bound = st.none() | st.integers(-n - 2, n + 2)
            step = st.none() | st.integers(-4, 4).filter(lambda s: s != 0)
            parts.append(slice(draw(bound), draw(bound), draw(step)))
    if shape and draw(st.booleans()):
        pos = draw(st.integers(0, len(parts)))
        k = draw(st.integers(0, len(parts) - pos))
        parts = parts[:pos] + [Ellipsis] + parts[pos + k:]
    return tuple(parts)


@pytest.mark.parametrize("name", HYPOTHESIS_STORES)
def test_hypothesis_selections(stores, name):
    store = stores.get(name)
    arr = open_store(store, "pread", 2)
    expected = store.expected

    @settings(
        max_examples=60,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(key=basic_keys(expected.shape))
    def check(key):
        assert_same_bits(arr[key], expected[key], f"{name}[{key!r}]")

    check()


CONCURRENCY_STORES = [
    "z_shard_zstd_end",
    "ts_shard_transpose_inside",
    "z_4d_shard",
    "hand_shard_zstd_frame_variants",
    "z_tiny_chunks_shard",
]


@pytest.mark.parametrize("name", CONCURRENCY_STORES)
def test_concurrent_reads_from_python_threads(stores, name, io_mode):
    """One Array shared by several Python threads (the GIL is released)."""
    store = stores.get(name)
    arr = open_store(store, io_mode, 2)
    expected = store.expected
    keys = random_keys(seed_of(name) + 5, expected.shape, 40)
    batches = [
        random_crops(seed_of(name) + 6 + i, expected.shape, arr.chunks, 9)
        for i in range(8)
    ]
    with ThreadPoolExecutor(max_workers=4) as pool:
        got_keys = list(pool.map(lambda k: arr[k], keys * 2))
        got_crops = list(pool.map(lambda b: arr.read_crops(*b), batches))
    for key, got in zip(keys * 2, got_keys):
        assert_same_bits(got, expected[key], f"{name}[{key!r}]")
    for (starts, crop), got in zip(batches, got_crops):
        want = np.stack([expected[crop_slices(s, crop)] for s in starts])
        assert_same_bits(got, want, f"{name} crops")


@pytest.mark.parametrize("name", CONCURRENCY_STORES)
@pytest.mark.parametrize("n_threads", [1, 4])
def test_large_crop_batch(stores, name, io_mode, n_threads):
    """Hundreds of crops in one call: chunks shared by many crops."""
    store = stores.get(name)
    arr = open_store(store, io_mode, n_threads)
    starts, crop = random_crops(seed_of(name) + 7, store.expected.shape,
                                arr.chunks, count=300)
    got = arr.read_crops(starts, crop)
    want = np.stack([store.expected[crop_slices(s, crop)] for s in starts])
    assert_same_bits(got, want, f"{name} {len(starts)} crops of {crop}")


COLD_STORES = [
    "z_large_shard",
    "z_large_shard_raw_start",
    "ts_large_shard",
    "hand_shard_reversed_gaps_start_nocomp",
    "z_shard_sparse_start_nan",
    "z_4d_shard",
]


@pytest.mark.parametrize("name", COLD_STORES)
def test_cold_page_cache_reads(stores, name, io_mode, threads):
    store = stores.get(name)
    expected = store.expected
    drop_page_cache(store.path)
    arr = open_store(store, io_mode, threads)
    assert_same_bits(arr[...], expected, f"{name} cold full read")
    drop_page_cache(store.path)
    starts, crop = random_crops(seed_of(name) + 8, expected.shape, arr.chunks,
                                count=40)
    got = arr.read_crops(starts, crop)
    want = np.stack([expected[crop_slices(s, crop)] for s in starts])
    assert_same_bits(got, want, f"{name} cold crops")

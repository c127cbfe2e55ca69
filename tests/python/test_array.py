"""The ``lsio.Array`` surface other than ``out=``: metadata and selections.

* Metadata properties for every supported store (shape, dtype in native byte
  order, ndim, chunks, shards, fill_value with exact bits, attrs,
  dimension_names, nbytes, path), checked against an independent parse of
  ``zarr.json`` and against zarr-python.
* Selection semantics: integer keys drop dimensions (an all-integer key gives
  a 0-d ndarray), negative integers, clamped slice bounds, 0-size
  selections, ``None`` (np.newaxis) inserting axes, fresh writable results;
  out-of-range integers raise ``BoundsError`` (an ``IndexError``); step 0
  raises ``ValueError``; lists and integer arrays raise ``TypeError`` naming
  ``oindex`` and ``take``; ``np.asarray(arr)`` reads in one call.
* Paths: ``~`` and ``file://`` URLs; other unknown URL schemes are refused.
* Missing inner chunks and missing shard files read as the fill value.
* ``read_crops`` argument validation.
* ``lsio.open`` options (``io=``, ``threads=``) and ``lsio.io_backend_info()``;
  a new ``open`` after the store is rewritten sees the new data.
* io_uring refused by the kernel (simulated in a child process with a
  seccomp filter returning EPERM or ENOSYS, as container runtimes do):
  ``auto`` falls back to pread and reports why, ``io="uring"`` raises
  ``StorageError``.
* One read touching more chunk or shard files than RLIMIT_NOFILE allows
  open at once.
"""

from __future__ import annotations

import errno
import json
import os
import resource
import subprocess
import sys

import numpy as np
import pytest
import zarr

import lsio
from conftest import require_uring
from stores import (
    SPECS,
    assert_same_bits,
    bits,
    canonical_json,
    crc32c,
    dtype_of,
    expected_chunks_and_shards,
    parse_fill,
)


# --------------------------------------------------------------------------
# Metadata
# --------------------------------------------------------------------------


def test_metadata_matches_zarr_json(store):
    arr = lsio.open(str(store.path))
    m = store.metadata()
    shape = tuple(m["shape"])
    dtype = dtype_of(m["data_type"])
    assert arr.shape == shape
    assert isinstance(arr.shape, tuple)
    assert all(type(n) is int for n in arr.shape)
    assert arr.ndim == len(shape)
    assert isinstance(arr.dtype, np.dtype)
    assert arr.dtype == dtype
    assert arr.dtype.isnative
    assert arr.dtype == store.expected.dtype
    chunks, shards = expected_chunks_and_shards(m)
    assert arr.chunks == chunks
    assert isinstance(arr.chunks, tuple)
    assert arr.shards == shards
    if shards is not None:
        assert isinstance(arr.shards, tuple)
    assert arr.nbytes == int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    assert isinstance(arr.attrs, dict)
    assert canonical_json(arr.attrs) == canonical_json(m.get("attributes", {}))
    names = m.get("dimension_names")
    if names is None:
        assert arr.dimension_names is None
    else:
        assert arr.dimension_names == tuple(names)
        assert isinstance(arr.dimension_names, tuple)
    assert isinstance(arr.path, str)
    assert os.path.realpath(arr.path) == os.path.realpath(store.path)


def test_fill_value_bits(store):
    arr = lsio.open(str(store.path))
    m = store.metadata()
    want = parse_fill(m["fill_value"], dtype_of(m["data_type"]))
    fv = arr.fill_value
    assert isinstance(fv, np.generic), type(fv)
    assert fv.dtype == arr.dtype
    assert_same_bits(np.asarray(fv), np.asarray(want), store.name)


ZARR_READABLE = [n for n, spec in SPECS.items() if spec.zarr_readable]


@pytest.mark.parametrize("name", ZARR_READABLE)
def test_metadata_matches_zarr_python(stores, name):
    store = stores.get(name)
    z = store.zarr_array()
    arr = lsio.open(str(store.path))
    assert arr.shape == tuple(z.shape)
    names = [c.to_dict()["name"] for c in z.metadata.codecs] if z.metadata.zarr_format == 3 else []
    nested = "sharding_indexed" in names and any(
        (c if isinstance(c, str) else c["name"]) == "sharding_indexed"
        for c in z.metadata.codecs[names.index("sharding_indexed")].to_dict()["configuration"]["codecs"])
    if (len(names) > 1 and "sharding_indexed" in names) or nested:
        # zarr-python reports sharding only when it is the one codec (after a transpose, or
        # with whole-shard compression, it shows the shard as the chunk), and nested
        # sharding's first level as the chunk; lsio reports the chunks it reads and decodes
        # (the innermost): compare with zarr.json instead.
        assert (arr.chunks, arr.shards) == expected_chunks_and_shards(store.metadata())
    else:
        assert arr.chunks == tuple(z.chunks)
        assert arr.shards == (None if z.shards is None else tuple(z.shards))
    assert arr.dtype == np.dtype(z.dtype).newbyteorder("=")
    assert canonical_json(arr.attrs) == canonical_json(z.attrs.asdict())
    zn = z.metadata.dimension_names
    assert arr.dimension_names == (None if zn is None else tuple(zn))


FILL_BITS = [
    # store, expected fill bits (unsigned view; complex: (re, im))
    ("ts_fill_hex_nan", np.uint32(0xFFC00001)),
    ("ts_fill_hex_nan_f64_shard", np.uint64(0xFFF8000000000123)),
    ("ts_fill_hex_f16", np.uint16(0x7E01)),
    ("ts_fill_neg_zero", np.uint32(0x80000000)),
    ("z_shard_sparse_start_nan", np.uint32(0x7FC00000)),
    ("z_be_f64_nan_sparse", np.uint64(0x7FF8000000000000)),
    ("z_dtype_float16", np.uint16(0xFC00)),  # -inf
    ("z_dtype_float64_shard", np.uint64(0x7FF0000000000000)),  # +inf
    ("ts_dtype_uint64", np.uint64(2**64 - 1)),
    ("z_dtype_int64_shard", np.uint64(2**63)),  # int64 min
    ("ts_0d_missing", np.uint64(2**64 - 2)),
    ("z_dtype_bool", np.uint8(1)),
    ("z_dtype_complex64", (np.uint32(0x7FC00000), np.uint32(0x3F800000))),
    ("ts_dtype_complex128_shard",
     (np.uint64(0x8000000000000000), np.uint64(0xFFF0000000000000))),
]


@pytest.mark.parametrize("name,want", FILL_BITS, ids=[f[0] for f in FILL_BITS])
def test_special_fill_values(stores, name, want):
    arr = lsio.open(str(stores.get(name).path))
    got = bits(np.asarray(arr.fill_value))
    np.testing.assert_array_equal(got, np.array(want))


def test_big_endian_store_has_native_dtype(stores):
    for name, dt in [
        ("z_be", "int32"), ("z_be_f64_nan_sparse", "float64"),
        ("z_shard_be_crc", "uint16"), ("ts_shard_be_crc", "uint16"),
    ]:
        arr = lsio.open(str(stores.get(name).path))
        assert arr.dtype == np.dtype(dt)
        assert arr.dtype.isnative
        got = arr[:3, :3]
        assert got.dtype.isnative
        assert arr.fill_value.dtype.isnative


def test_explicit_properties(stores):
    a = lsio.open(str(stores.get("z_4d_shard").path))
    assert a.shape == (5, 6, 7, 9)
    assert a.ndim == 4
    assert a.chunks == (2, 3, 4, 4)
    assert a.shards == (4, 6, 4, 8)
    assert a.dtype == np.dtype("uint32")
    assert a.nbytes == 5 * 6 * 7 * 9 * 4
    assert a.attrs == {"a": [1, 2], "b": {"c": "d"}, "unit": "um"}
    assert a.dimension_names == ("t", "z", "y", None)

    b = lsio.open(str(stores.get("z_plain").path))
    assert (b.chunks, b.shards, b.attrs, b.dimension_names) == (
        (32, 32), None, {}, None)
    assert b.fill_value == 0

    c = lsio.open(str(stores.get("ts_auto_shard").path))
    assert (c.chunks, c.shards) == ((10, 10), (50, 50))
    assert c.attrs == {}  # TensorStore omits empty attributes

    d = lsio.open(str(stores.get("z_shard_zstd_end").path))
    assert d.fill_value == 7 and d.fill_value.dtype == np.uint16
    assert d.dimension_names == ("y", "x")
    assert d.attrs == {"k": 1}

    z = lsio.open(str(stores.get("z_0d").path))
    assert (z.shape, z.ndim, z.chunks, z.shards) == ((), 0, (), None)
    assert z.nbytes == 4

    zs = lsio.open(str(stores.get("ts_0d_shard").path))
    assert (zs.shape, zs.chunks, zs.shards) == ((), (), ())


def test_attrs_with_special_floats(stores):
    """zarr-python writes float NaN/Infinity attributes as bare JSON tokens;
    they must come back as floats, like zarr-python reads them."""
    s = stores.get("z_attrs_special")
    attrs = lsio.open(str(s.path)).attrs
    assert isinstance(attrs["nan"], float) and np.isnan(attrs["nan"])
    assert attrs["inf"] == float("inf") and isinstance(attrs["inf"], float)
    assert attrs["ninf"] == float("-inf")
    assert attrs["NaN_string"] == "NaN"
    assert attrs["text"] == "h\u00e9llo \u2713"
    assert attrs["big"] == 2**63 + 5 and attrs["neg"] == -(2**63)
    assert attrs["int_like_float"] == 2.0
    assert isinstance(attrs["int_like_float"], float)
    assert attrs["nested"] == {"list": [1, "two", 3.5, [None, True]],
                               "empty": {}}
    want = s.zarr_array().attrs.asdict()
    assert canonical_json(attrs) == canonical_json(want)


def test_attrs_are_not_shared_state(stores):
    """Mutating the returned attrs must not change what the array reports."""
    arr = lsio.open(str(stores.get("z_4d_shard").path))
    attrs = arr.attrs
    attrs["added"] = 1
    attrs["b"]["c"] = "changed"
    assert arr.attrs == {"a": [1, 2], "b": {"c": "d"}, "unit": "um"}


# --------------------------------------------------------------------------
# Selections
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def plain(stores):
    s = stores.get("z_shard_zstd_end")
    return lsio.open(str(s.path)), s.expected


@pytest.fixture(scope="module")
def four_d(stores):
    s = stores.get("z_4d_shard")
    return lsio.open(str(s.path)), s.expected


ZERO_SIZE_KEYS = [
    np.s_[0:0],
    np.s_[5:2],
    np.s_[:, 3:3],
    np.s_[10:10, ::-1],
    np.s_[200:],
    np.s_[-300:-200],
    np.s_[3, 7:7],
    np.s_[2:5, 9:1:2],
    np.s_[5:10, 1:9:-1],
]


@pytest.mark.parametrize("key", ZERO_SIZE_KEYS, ids=repr)
def test_zero_size_selections(plain, key):
    arr, expected = plain
    want = expected[key]
    assert want.size == 0
    got = arr[key]
    assert isinstance(got, np.ndarray)
    assert got.shape == want.shape
    assert got.dtype == expected.dtype
    out = np.empty(want.shape, expected.dtype)
    assert arr.read(key, out=out) is out


INT_KEYS = [
    3, -1, -100, 99, (1, 2), (-1, -1), (0, -100), (Ellipsis, 1), (1, Ellipsis),
    (slice(None), -7), (7, slice(None, None, -3)), (Ellipsis, 4, 5),
    (Ellipsis, slice(3, 60, 7), 0),
]


@pytest.mark.parametrize("key", INT_KEYS, ids=repr)
def test_integer_index_semantics(plain, key):
    arr, expected = plain
    want = expected[key]
    got = arr[key]
    assert isinstance(got, np.ndarray), type(got)
    assert got.shape == np.shape(want)
    assert_same_bits(got, np.asarray(want), repr(key))


def test_all_integer_key_gives_0d_ndarray(plain, four_d):
    arr, expected = plain
    got = arr[4, 5]
    assert isinstance(got, np.ndarray)
    assert got.shape == ()
    assert got == expected[4, 5]
    arr4, expected4 = four_d
    got = arr4[1, -2, 3, -4]
    assert isinstance(got, np.ndarray) and got.shape == ()
    assert got == expected4[1, -2, 3, -4]
    got = arr4[1, :, 2]
    assert got.shape == (6, 9)
    assert_same_bits(got, expected4[1, :, 2])


def test_zero_dim_array_keys(stores):
    for name in ("z_0d", "ts_0d", "ts_0d_shard", "ts_0d_missing", "z_0d_fill"):
        s = stores.get(name)
        arr = lsio.open(str(s.path))
        for key in (Ellipsis, (), (Ellipsis,)):
            got = arr[key]
            assert isinstance(got, np.ndarray), (name, key, type(got))
            assert got.shape == ()
            assert_same_bits(got, s.expected, f"{name}[{key!r}]")
        with pytest.raises(IndexError):
            arr[0]


def test_clamped_slices(plain):
    arr, expected = plain
    for key in (np.s_[90:200, -300:5], np.s_[-1000:1000:7, 95:],
                np.s_[1000:-1000:-9, :-95:-2], np.s_[:, 99:-1000:-1]):
        assert_same_bits(arr[key], expected[key], repr(key))


def test_results_are_fresh_writable_arrays(plain):
    arr, expected = plain
    a = arr[10:20, 10:20]
    b = arr[10:20, 10:20]
    assert a.flags.writeable and b.flags.writeable
    assert not np.shares_memory(a, b)
    a[...] = 0
    assert_same_bits(b, expected[10:20, 10:20])
    assert_same_bits(arr[10:20, 10:20], expected[10:20, 10:20])


OUT_OF_RANGE = [
    100, -101, (0, 100), (5, -101), (100, slice(None)), (Ellipsis, 100),
    (slice(None), -101), (2**40, 0), (-(2**40), 0),
]


@pytest.mark.parametrize("key", OUT_OF_RANGE, ids=repr)
def test_out_of_range_integer_raises_bounds_error(plain, key):
    arr, _ = plain
    with pytest.raises(IndexError) as info:
        arr[key]
    assert isinstance(info.value, lsio.BoundsError)
    assert isinstance(info.value, lsio.Error)
    with pytest.raises(lsio.BoundsError):
        arr.read(key)


def test_out_of_range_on_4d(four_d):
    arr, _ = four_d
    for key in [(5,), (0, 6), (0, 0, 7), (0, 0, 0, 9), (0, 0, 0, -10)]:
        with pytest.raises(lsio.BoundsError):
            arr[key]


def test_too_many_indices(plain):
    arr, _ = plain
    with pytest.raises(IndexError):
        arr[1, 2, 3]
    with pytest.raises(IndexError):
        arr[:, :, :]


def test_two_ellipses(plain):
    arr, _ = plain
    with pytest.raises(IndexError):
        arr[..., 1, ...]


# int64 edges as start / stop / step / index: numpy gives the answer (Hardening item 9).
EDGES = [sys.maxsize, sys.maxsize - 1, -sys.maxsize - 1, 2**63, -(2**63) - 1, 2**64 - 1, 2**64, -(2**64)]

HUGE_KEYS = [
    np.s_[::sys.maxsize],
    np.s_[:, ::sys.maxsize - 1],
    np.s_[::2**63],
    np.s_[::-(2**63)],
    np.s_[::2**64],
    np.s_[::-(2**64) - 5],
    np.s_[sys.maxsize::-sys.maxsize],
    np.s_[-sys.maxsize - 1:sys.maxsize:sys.maxsize],
    np.s_[2**64 - 1:-(2**64):-(2**63)],
    np.s_[3, ::sys.maxsize],
    np.s_[-(2**63):2**63, 7::2**63],
    np.s_[..., 2**63 - 2::-(2**63) + 1],
]


@pytest.mark.parametrize("key", HUGE_KEYS, ids=repr)
def test_huge_slice_values_match_numpy(plain, four_d, key):
    # These used to loop in the planner (start + k * step overflowed) with the GIL released,
    # or raise pybind11's TypeError (a step of 2**63 does not fit in int64).
    for arr, expected in (plain, four_d):
        want = expected[key]
        assert_same_bits(arr[key], want, repr(key))
        out = np.empty(want.shape, expected.dtype)
        assert arr.read(key, out=out) is out
        assert_same_bits(out, want, repr(key))
        assert_same_bits(arr.oindex[key], want, "oindex " + repr(key))


@pytest.mark.parametrize("index", EDGES + [-sys.maxsize, 2**70, np.uint64(2**64 - 1), np.int64(-(2**63))], ids=repr)
def test_huge_integer_indices_raise_index_error(plain, index):
    arr, expected = plain
    # numpy says IndexError, or OverflowError for ints beyond int64; lsio's documented
    # error for an index outside the array is BoundsError (an IndexError) either way.
    with pytest.raises((IndexError, OverflowError)):
        expected[index]
    with pytest.raises(lsio.BoundsError):
        arr[index]
    with pytest.raises(lsio.BoundsError):
        arr[0, index]
    with pytest.raises(lsio.BoundsError):
        arr.oindex[index]


def test_hypothesis_slices_with_int64_edges_match_numpy(four_d):
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    arr, expected = four_d
    value = st.none() | st.sampled_from(EDGES + [-sys.maxsize]) | st.integers(-12, 12)
    step = st.none() | st.sampled_from(EDGES + [-sys.maxsize]) | st.integers(-5, 5).filter(bool)
    key = st.lists(st.builds(slice, value, value, step), min_size=1, max_size=4).map(tuple)

    @settings(max_examples=300, derandomize=True, database=None, deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(key=key)
    def check(key):
        want = expected[key]
        assert_same_bits(arr[key], want, repr(key))
        assert_same_bits(arr.oindex[key], want, "oindex " + repr(key))

    check()


@pytest.mark.parametrize(
    "key", [np.s_[::0], np.s_[1, 2:5:0], np.s_[..., ::0], np.s_[0:0:0]],
    ids=repr,
)
def test_zero_step_raises_value_error(plain, key):
    arr, _ = plain
    with pytest.raises(ValueError):
        arr[key]
    with pytest.raises(ValueError):
        arr.read(key)


def test_missing_shards_and_inner_chunks_read_as_fill(stores):
    s = stores.get("z_shard_sparse")
    files = sorted(
        os.path.relpath(os.path.join(r, f), s.path)
        for r, _, fs in os.walk(s.path) for f in fs
    )
    # Only shard (0, 1) exists (two inner chunks of it are stored).
    assert files == ["c/0/1", "zarr.json"], files
    arr = lsio.open(str(s.path))
    assert np.all(arr[50:, :] == 0)
    assert np.all(arr[:50, :50] == 0)
    assert np.all(arr[:50, 50:][~np.isin(np.arange(50), range(5, 15))] == 0)
    assert_same_bits(arr[5:15, 60:70], s.expected[5:15, 60:70])
    assert_same_bits(arr[...], s.expected)

    n = stores.get("z_shard_sparse_start_nan")
    arr = lsio.open(str(n.path))
    got = arr[40:60, 40:60]
    np.testing.assert_array_equal(
        bits(got), np.full((20, 20), 0x7FC00000, np.uint32)
    )


def test_shard_file_with_only_empty_entries(stores, tmp_path):
    """A shard whose index marks every inner chunk empty reads as fill."""
    s = stores.fresh("z_shard_zstd_end", tmp_path)  # fill 7, index at end
    index = np.full((25, 2), 2**64 - 1, "<u8").tobytes()
    blob = index + crc32c(index).to_bytes(4, "little")
    (s.path / "c" / "0" / "0").write_bytes(blob)
    arr = lsio.open(str(s.path))
    want = s.expected.copy()
    want[:50, :50] = 7
    assert_same_bits(arr[...], want)


def test_plain_missing_chunks_read_as_fill(stores):
    s = stores.get("z_plain_sparse")
    assert not (s.path / "c" / "3" / "3").exists()
    arr = lsio.open(str(s.path))
    assert np.all(arr[32:, 32:] == -1)
    assert_same_bits(arr[...], s.expected)


# --------------------------------------------------------------------------
# read_crops validation
# --------------------------------------------------------------------------


def test_read_crops_bad_starts_shape(plain):
    arr, _ = plain
    for starts in (
        np.zeros((3, 3), np.int64),  # one coordinate too many
        np.zeros((3, 1), np.int64),  # one too few
        np.zeros((2,), np.int64),  # not 2-d
        np.zeros((2, 2, 1), np.int64),
    ):
        with pytest.raises(ValueError):
            arr.read_crops(starts, (4, 4))


def test_read_crops_wrong_crop_rank(plain):
    arr, _ = plain
    with pytest.raises((ValueError, IndexError)):
        arr.read_crops(np.zeros((2, 2), np.int64), (4, 4, 4))
    with pytest.raises((ValueError, IndexError)):
        arr.read_crops(np.zeros((2, 2), np.int64), (4,))


@pytest.mark.parametrize(
    "starts,crop",
    [
        ([[0, 0], [-1, 0]], (4, 4)),  # negative start
        ([[0, -5]], (4, 4)),
        ([[96, 0]], (5, 4)),  # runs past the end of dim 0
        ([[0, 0], [0, 97]], (4, 4)),
        ([[100, 0]], (1, 1)),
        ([[0, 0]], (101, 1)),
        ([[2**40, 0]], (1, 1)),
    ],
)
def test_read_crops_out_of_bounds(plain, starts, crop):
    arr, _ = plain
    with pytest.raises(IndexError) as info:
        arr.read_crops(np.array(starts, np.int64), crop)
    assert isinstance(info.value, lsio.BoundsError)


@pytest.mark.parametrize(
    "starts,crop",
    [
        ([[1, 0]], (2**63 - 1, 1)),  # start + shape overflows int64
        ([[0, 0]], (2**63, 1)),  # shape beyond int64
        ([[0, 0]], (2**64 + 1, 1)),
        ([[0, 0]], (1, 2**64 - 1)),
        ([[2**63 - 1, 0]], (1, 1)),
        ([[2**63 - 1, 2**63 - 1]], (2**63 - 1, 2**63 - 1)),
        (np.array([[2**64 - 1, 0]], np.uint64), (1, 1)),  # would wrap to -1
        (np.array([[0, 2**63]], np.uint64), (1, 1)),
        (np.array([[3, 2]], np.uint64), (98, 2**64 - 3)),
        ([[-(2**63), 0]], (2**63 - 1, 1)),  # start + shape = -1 < 0 only just
        (np.zeros((0, 2), np.int64), (2**63 - 1, 1)),  # no crops, but a shape that cannot fit
    ],
)
def test_read_crops_overflowing_shapes_and_starts_raise_bounds_error(plain, starts, crop):
    # These raised numpy's ValueError / OverflowError (array too big) instead of IndexError.
    arr, _ = plain
    with pytest.raises(IndexError) as info:
        arr.read_crops(starts if isinstance(starts, np.ndarray) else np.array(starts, np.int64), crop)
    assert isinstance(info.value, lsio.BoundsError)


def test_read_crops_edges_and_dtypes(plain):
    arr, expected = plain
    starts = np.array([[0, 0], [96, 96], [96, 0], [0, 96], [37, 41]])
    want = np.stack([expected[a:a + 4, b:b + 4] for a, b in starts])
    for dt in (np.int64, np.int32, np.uint32, np.intp):
        got = arr.read_crops(starts.astype(dt), (4, 4))
        assert_same_bits(got, want, str(dt))
    assert_same_bits(arr.read_crops(starts, [4, 4]), want, "list shape")
    got = arr.read_crops(starts, np.array([4, 4]))
    assert_same_bits(got, want, "array shape")


def test_read_crops_empty_batch(plain):
    arr, expected = plain
    got = arr.read_crops(np.zeros((0, 2), np.int64), (3, 5))
    assert isinstance(got, np.ndarray)
    assert got.shape == (0, 3, 5)
    assert got.dtype == expected.dtype


def test_read_crops_zero_extent_crop(plain):
    arr, expected = plain
    got = arr.read_crops(np.array([[0, 0], [50, 3]], np.int64), (0, 5))
    assert got.shape == (2, 0, 5)
    assert got.dtype == expected.dtype


def test_read_crops_0d(stores):
    s = stores.get("ts_0d")
    arr = lsio.open(str(s.path))
    got = arr.read_crops(np.zeros((3, 0), np.int64), ())
    assert got.shape == (3,)
    assert_same_bits(got, np.repeat(s.expected[None], 3))


# --------------------------------------------------------------------------
# open() options and io_backend_info()
# --------------------------------------------------------------------------


def test_io_backend_info():
    info = lsio.io_backend_info()
    assert isinstance(info, dict)
    assert set(info) == {"auto", "uring_available", "reason"}
    assert info["auto"] in ("uring", "pread")
    assert isinstance(info["uring_available"], bool)
    assert isinstance(info["reason"], str)
    if info["auto"] == "uring":
        assert info["uring_available"]
    if not info["uring_available"]:
        assert info["auto"] == "pread"
        assert info["reason"]
    assert lsio.io_backend_info() == info  # stable across calls


@pytest.mark.parametrize("io", ["bogus", "URING", "", "io_uring", "mmap"])
def test_unknown_io_value(stores, io):
    with pytest.raises(ValueError):
        lsio.open(str(stores.get("z_plain").path), io=io)


@pytest.mark.parametrize("threads", [-1, -8])
def test_bad_thread_count(stores, threads):
    with pytest.raises(ValueError):
        lsio.open(str(stores.get("z_plain").path), threads=threads)


@pytest.mark.parametrize("io", ["pread", "auto", "uring"])
@pytest.mark.parametrize("threads", [None, 0, 1, 3, 16])
def test_open_options_read_the_same(stores, io, threads):
    if io == "uring":
        require_uring()
    s = stores.get("z_shard_zstd_start")
    arr = lsio.open(str(s.path), threads=threads, io=io)
    assert_same_bits(arr[...], s.expected)
    assert_same_bits(arr[3:77:2, ::-3], s.expected[3:77:2, ::-3])


def test_forced_uring_where_unavailable(stores):
    info = lsio.io_backend_info()
    s = stores.get("z_plain")
    if info["uring_available"]:
        arr = lsio.open(str(s.path), io="uring")
        assert_same_bits(arr[...], s.expected)
        return
    with pytest.raises(lsio.StorageError):
        arr = lsio.open(str(s.path), io="uring")
        arr[...]


def test_error_hierarchy():
    assert issubclass(lsio.Error, Exception)
    assert issubclass(lsio.FormatError, lsio.Error)
    assert issubclass(lsio.FormatError, ValueError)
    assert issubclass(lsio.UnsupportedError, lsio.FormatError)
    assert issubclass(lsio.UnsupportedError, NotImplementedError)
    assert issubclass(lsio.CorruptDataError, lsio.Error)
    assert issubclass(lsio.CorruptDataError, ValueError)
    assert issubclass(lsio.StorageError, lsio.Error)
    assert issubclass(lsio.StorageError, OSError)
    assert issubclass(lsio.BoundsError, lsio.Error)
    assert issubclass(lsio.BoundsError, IndexError)


def test_numpy_integer_keys(plain):
    arr, expected = plain
    keys = [
        (np.int64(3), np.int32(-1)),
        np.uint8(7),
        (slice(np.int64(2), np.int16(50), np.int8(3)), np.intp(4)),
        (slice(np.int64(-5), None, np.int64(-2)),),
    ]
    for key in keys:
        assert_same_bits(arr[key], expected[key], repr(key))


NEWAXIS_KEYS = [
    (None,), (None, 0), (0, None), (None, Ellipsis), (Ellipsis, None), (None, None, 3),
    (slice(2, 9), None, slice(None, None, -2)), (None, 4, None, 5, None), (Ellipsis, None, 7),
    (None, Ellipsis, None), (np.newaxis, slice(60, 2, -7)),
]


@pytest.mark.parametrize("key", NEWAXIS_KEYS, ids=repr)
def test_newaxis_inserts_axes_as_numpy_does(plain, key):
    arr, expected = plain
    want = expected[key]
    got = arr[key]
    assert got.shape == want.shape, key
    assert_same_bits(got, np.asarray(want), repr(key))
    out = np.full(want.shape, 7, expected.dtype)
    assert arr.read(key, out=out) is out
    assert_same_bits(out, np.asarray(want), repr(key))
    with pytest.raises(ValueError):
        arr.read(key, out=np.empty((*want.shape, 1), expected.dtype))


def test_newaxis_does_not_count_as_an_axis(plain, four_d):
    arr, expected = plain
    assert arr[None, 1, 2, None].shape == (1, 1)
    with pytest.raises(IndexError, match="too many indices"):
        arr[None, 1, 2, 3]
    arr4, expected4 = four_d
    assert_same_bits(arr4[None, ..., None, 1], expected4[None, ..., None, 1])


@pytest.mark.parametrize("key", [[1, 2, 3], (slice(None), [0, 2]), np.array([1, 2]), (np.array([[1]]), 0),
                                 True, (0, np.bool_(False))], ids=repr)
def test_integer_array_and_list_keys_point_to_oindex_and_take(plain, key):
    arr, _ = plain
    with pytest.raises(TypeError, match=r"arr\.oindex\[\.\.\.\].*arr\.take\(indices, axis=\.\.\.\)"):
        arr[key]


def test_0d_integer_arrays_are_integer_keys(plain):
    arr, expected = plain
    assert_same_bits(arr[np.array(3), np.array(-1)], expected[3, -1])


def test_asarray_reads_the_array_in_one_call(plain, monkeypatch):
    arr, expected = plain
    calls = []
    real = lsio.Array.read

    def counting(self, *a, **kw):
        calls.append(a)
        return real(self, *a, **kw)

    monkeypatch.setattr(lsio.Array, "read", counting)
    got = np.asarray(arr)
    assert len(calls) == 1, "np.asarray must read once, not one row per call"
    assert_same_bits(got, expected)
    as64 = np.asarray(arr, dtype=np.float64)
    assert as64.dtype == np.float64
    np.testing.assert_array_equal(as64, expected.astype(np.float64))
    assert_same_bits(np.array(arr), expected)
    with pytest.raises(ValueError, match="copy=False"):
        np.asarray(arr, copy=False)


def test_paths_expand_home_and_take_file_urls(tmp_path, monkeypatch):
    home = tmp_path / "home"
    store = home / "my data" / "a.zarr"
    expected = np.arange(6 * 5, dtype=np.int16).reshape(6, 5)
    zarr.create_array(str(store), shape=expected.shape, dtype=expected.dtype, chunks=(2, 5))[...] = expected
    g = zarr.open_group(str(home / "g.zarr"), mode="w")
    g.create_array("t", shape=(3,), dtype="i4", chunks=(2,))[...] = np.array([1, 2, 3], "i4")
    monkeypatch.setenv("HOME", str(home))
    for spelling in ("~/my data/a.zarr", "file://" + str(store), "file://localhost" + str(store),
                     "file://" + str(store).replace(" ", "%20"), "FILE://" + str(store)):
        arr = lsio.open(spelling)
        assert arr.path == str(store), spelling
        assert_same_bits(arr[...], expected, spelling)
    assert_same_bits(lsio.open("~/g.zarr", "t")[...], np.array([1, 2, 3], "i4"))
    assert_same_bits(lsio.open_group("file://" + str(home / "g.zarr"))["t"][...], np.array([1, 2, 3], "i4"))
    with pytest.raises(ValueError, match="names host 'otherhost'"):
        lsio.open("file://otherhost" + str(store))
    for url in ("az://container/a.zarr", "abfs://c/a.zarr", "hdfs://nn/a.zarr"):
        with pytest.raises(ValueError, match=r"unsupported URL scheme .* lsio reads local paths, file://, s3://"):
            lsio.open(url)


def test_reopen_after_rewrite_sees_new_data(tmp_path):
    """A new ``lsio.open`` reads the store as it is now, not a cached copy."""
    path = tmp_path / "rewrite.zarr"
    first = np.arange(60 * 50, dtype=np.int32).reshape(60, 50)
    second = first[::-1].copy() * 3
    kw = dict(shape=first.shape, dtype=first.dtype, chunks=(8, 10),
              shards=(16, 20), overwrite=True)
    zarr.create_array(str(path), **kw)[...] = first
    old = lsio.open(str(path))
    assert_same_bits(old[...], first)
    zarr.create_array(str(path), **kw)[...] = second
    new = lsio.open(str(path))
    assert_same_bits(new[...], second)
    zarr.create_array(str(path), **kw)  # no data: every shard is deleted
    assert_same_bits(lsio.open(str(path))[...], np.zeros_like(first))


# A child process that refuses io_uring_setup/enter/register (425-427, the
# same numbers on every Linux architecture) through a seccomp filter, the way
# container runtimes do, then exercises lsio's fallback.
_SECCOMP_CHILD = r'''
import ctypes, json, sys

ERR = int(sys.argv[2])
libc = ctypes.CDLL(None, use_errno=True)


class SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8),
                ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort),
                ("filter", ctypes.POINTER(SockFilter))]


prog = [
    (0x20, 0, 0, 0),  # A = seccomp_data.nr
    (0x35, 0, 2, 425),  # if A >= 425 (io_uring_setup) ...
    (0x35, 1, 0, 428),  # ... and A < 428 (io_uring_register + 1)
    (0x06, 0, 0, 0x00050000 | ERR),  # return -ERR
    (0x06, 0, 0, 0x7FFF0000),  # allow
]
arr = (SockFilter * len(prog))(*[SockFilter(*p) for p in prog])
fprog = SockFprog(len(prog), arr)
if (libc.prctl(38, 1, 0, 0, 0) != 0  # PR_SET_NO_NEW_PRIVS
        or libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) != 0):  # SECCOMP
    print(json.dumps({"seccomp_errno": ctypes.get_errno()}))
    sys.exit(0)

import numpy as np
import lsio

res = {"info": lsio.io_backend_info()}
res["auto"] = lsio.open(sys.argv[1], io="auto")[...].tolist()
res["pread"] = lsio.open(sys.argv[1], io="pread", threads=2)[...].tolist()
try:
    a = lsio.open(sys.argv[1], io="uring")
    a[...]
    a.read_crops(np.zeros((1, a.ndim), np.int64), (1,) * a.ndim)
    res["uring"] = "no error"
except Exception as exc:
    res["uring"] = [type(exc).__name__, str(exc),
                    isinstance(exc, lsio.StorageError),
                    isinstance(exc, OSError)]
print(json.dumps(res))
'''


@pytest.mark.parametrize("err", ["EPERM", "ENOSYS"])
def test_kernel_refusing_io_uring(stores, err):
    """Where io_uring is refused, ``auto`` falls back to pread and says why;
    forcing ``io="uring"`` raises StorageError."""
    s = stores.get("z_shard_zstd_start")
    proc = subprocess.run(
        [sys.executable, "-c", _SECCOMP_CHILD, str(s.path),
         str(getattr(errno, err))],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "LSIO_IO": "", "LSIO_THREADS": ""},
    )
    assert proc.returncode == 0, proc.stderr
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    if "seccomp_errno" in res:
        pytest.skip(f"cannot simulate a kernel refusing io_uring: no seccomp filter here "
                    f"(errno {res['seccomp_errno']})")
    info = res["info"]
    assert info["uring_available"] is False
    assert info["auto"] == "pread"
    assert info["reason"]
    assert res["auto"] == s.expected.tolist()
    assert res["pread"] == s.expected.tolist()
    assert res["uring"] != "no error"
    name, message, is_storage, is_os = res["uring"]
    assert is_storage and is_os, res["uring"]


@pytest.fixture(scope="module")
def many_files_store(tmp_path_factory):
    """1600 chunk files (unsharded) and 400 shard files (sharded)."""
    root = tmp_path_factory.mktemp("many_files")
    data = np.arange(200 * 200, dtype=np.int16).reshape(200, 200)
    plain = root / "plain.zarr"
    zarr.create_array(str(plain), shape=data.shape, dtype=data.dtype,
                      chunks=(5, 5), compressors=None)[...] = data
    sharded = root / "sharded.zarr"
    zarr.create_array(str(sharded), shape=data.shape, dtype=data.dtype,
                      chunks=(5, 5), shards=(10, 10))[...] = data
    return plain, sharded, data


@pytest.mark.parametrize("io", ["pread", "uring", "auto"])
@pytest.mark.parametrize("threads", [1, 4])
def test_many_files_under_a_low_open_file_limit(many_files_store, io,
                                                threads):
    """One read touching more chunk/shard files than RLIMIT_NOFILE allows
    open at once must still work: lsio keeps its descriptors bounded."""
    if io == "uring":
        require_uring()
    plain, sharded, data = many_files_store
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    in_use = len(os.listdir("/proc/self/fd"))
    limit = in_use + 200  # far fewer than the 1600 chunk files
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
    try:
        for path in (plain, sharded):
            arr = lsio.open(str(path), io=io, threads=threads)
            assert_same_bits(arr[...], data, str(path))
            assert_same_bits(arr[::-1, 3::7], data[::-1, 3::7], str(path))
            starts = np.array([[0, 0], [100, 37], [150, 150]], np.int64)
            got = arr.read_crops(starts, (50, 50))
            want = np.stack([data[a:a + 50, b:b + 50] for a, b in starts])
            assert_same_bits(got, want, str(path))
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


# -- the C++ fast path for ints and step-1 slices (Array.read -> _core read_simple) ----------


def _general_path_calls(arr, monkeypatch):
    calls = []
    orig = lsio.Array._prepare_read

    def spy(self, *a, **k):
        calls.append(a[0])
        return orig(self, *a, **k)

    monkeypatch.setattr(lsio.Array, "_prepare_read", spy)
    return calls


def test_simple_keys_take_the_fast_path_and_equal_numpy(four_d, monkeypatch):
    arr, expected = four_d
    general = _general_path_calls(arr, monkeypatch)
    rng = np.random.default_rng(3)
    shape = arr.shape
    for _ in range(300):
        parts = []
        for n in shape[: rng.integers(0, len(shape) + 1)]:
            kind = rng.integers(0, 4)
            if kind == 0:
                parts.append(int(rng.integers(-n, n)))
            elif kind == 1:
                parts.append(slice(None))
            else:  # any bounds, also reversed, negative and past the end (clamped)
                a, b = (int(x) for x in rng.integers(-n - 3, n + 4, size=2))
                parts.append(slice(a if rng.random() < 0.8 else None, b if rng.random() < 0.8 else None,
                                   1 if rng.random() < 0.3 else None))
        key = tuple(parts) if len(parts) != 1 or rng.random() < 0.5 else parts[0]
        want = expected[key]
        got = arr[key]
        assert got.shape == want.shape and got.dtype == want.dtype and isinstance(got, np.ndarray)
        np.testing.assert_array_equal(got, want)
        out = np.full(want.shape, 7, dtype=arr.dtype)
        assert arr.read(key, out=out) is out
        np.testing.assert_array_equal(out, want)
    assert general == []  # none of these needed the Python path


@pytest.mark.parametrize("key", [
    np.s_[..., 1], np.s_[None, 2], np.s_[::2], np.s_[::-1, 0], np.s_[np.int64(1)], np.s_[1, ..., 2:5],
    np.s_[True], np.s_[np.True_],
])
def test_other_keys_take_the_general_path(four_d, monkeypatch, key):
    arr, expected = four_d
    general = _general_path_calls(arr, monkeypatch)
    if isinstance(key, (bool, np.bool_)):
        with pytest.raises(TypeError, match="oindex"):  # lsio refuses boolean keys
            arr[key]
    else:
        np.testing.assert_array_equal(arr[key], expected[key])
    assert len(general) == 1


@pytest.mark.parametrize("key", [np.s_[10**6], np.s_[0, -10**6], np.s_[2**63], np.s_[-(2**70)]], ids=repr)
def test_fast_path_leaves_errors_to_the_general_path(four_d, key):
    arr, _ = four_d
    with pytest.raises(IndexError):
        arr[key]


def test_fast_path_out_errors_are_the_general_ones(plain):
    arr, expected = plain
    key = np.s_[2:5, 1:4]
    for bad, exc, msg in [
        (np.empty((3, 3), np.float64), TypeError, "expected exactly"),
        (np.empty((3, 4), arr.dtype), ValueError, "out has shape"),
        (np.empty((3, 3), arr.dtype)[:, ::-1], ValueError, "negative strides"),
    ]:
        with pytest.raises(exc, match=msg):
            arr.read(key, out=bad)
    ro = np.empty((3, 3), arr.dtype)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        arr.read(key, out=ro)
    with pytest.raises(TypeError):
        arr.read(key, out=[[0] * 3] * 3)
    # A strided (non-contiguous) out is filled in place.
    big = np.zeros((6, 6), arr.dtype)
    arr.read(key, out=big[::2, 1::2])
    np.testing.assert_array_equal(big[::2, 1::2], expected[key])
    assert not big[1::2].any()


@pytest.mark.parametrize("compressors", [["gzip", "zstd"], ["zstd", "zstd"]])
def test_shards_compressed_whole_twice_over_incompressible_data(tmp_path, compressors):
    # Stacked whole-shard compressors: the stage between them holds the first one's output,
    # larger than the shard on random bytes; each stage is bounded by what the codecs before
    # it make of the largest shard, not by the shard's size.
    from zarr.codecs import BytesCodec, GzipCodec, ShardingCodec, ZstdCodec

    make = {"gzip": lambda: GzipCodec(level=1), "zstd": lambda: ZstdCodec(level=1)}
    data = np.random.default_rng(5).integers(0, 256, (64, 64), dtype=np.uint8)
    z = zarr.create_array(str(tmp_path / "a.zarr"), shape=data.shape, dtype=data.dtype, chunks=(32, 32),
                          serializer=ShardingCodec(chunk_shape=(16, 16), codecs=[BytesCodec()]),
                          compressors=[make[c]() for c in compressors], fill_value=0)
    z[...] = data
    np.testing.assert_array_equal(lsio.open(str(tmp_path / "a.zarr"))[...], data)

"""The strict ``out=`` contract of ``Array.read`` and ``Array.read_crops``.

``out`` must be a writeable numpy array of exactly the array's dtype (byte
order included) and exactly the result shape, with non-negative,
non-overlapping strides.  Valid ``out`` arrays of any layout (C, F, stepped
views, transposed views, memmaps) are filled completely, fill-value regions
included, and returned (``result is out``), never through a hidden temporary
copy; neighbouring elements of a parent array stay untouched.  Invalid ones
raise TypeError (dtype) or ValueError (shape, read-only, negative or
overlapping strides) before any I/O, leaving ``out`` unchanged.

Outputs larger than a quarter of the last-level cache are written with
non-temporal stores (the engine's streamed scatter); the same contract holds
there, checked with outputs sized from the engine's own threshold.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

import lsio
from stores import assert_same_bits

as_strided = np.lib.stride_tricks.as_strided

KEY = np.s_[5:75, 12:97]  # 70 x 85, crosses shards and inner chunks
STARTS = np.array([[0, 0], [90, 88], [37, 41], [37, 41], [45, 45]], np.int64)
CROP = (10, 12)


@pytest.fixture(scope="module")
def u16(stores):
    s = stores.get("z_shard_zstd_end")  # uint16 100x100, sharded
    return lsio.open(str(s.path), threads=2), s.expected


@pytest.fixture(scope="module")
def f64(stores):
    s = stores.get("z_be_f64_nan_sparse")  # big-endian float64 on disk
    return lsio.open(str(s.path), threads=2), s.expected


def sentinel(shape, dtype, order="C"):
    a = np.empty(shape, dtype, order=order)
    a.reshape(-1, order="A").view(np.uint8)[:] = 0x5A if a.size else 0
    return a


def crops_of(expected, starts=STARTS, crop=CROP):
    return np.stack(
        [expected[a:a + crop[0], b:b + crop[1]] for a, b in starts]
    )


def assert_rejected(exc_type, fn, out):
    """``fn(out)`` raises ``exc_type`` and leaves ``out`` byte-identical."""
    before = out.tobytes()
    with pytest.raises(exc_type):
        fn(out)
    assert out.tobytes() == before, "out must be left untouched"


# --------------------------------------------------------------------------
# Valid out arrays
# --------------------------------------------------------------------------


def test_c_contiguous_out(u16):
    arr, expected = u16
    out = sentinel((70, 85), np.uint16)
    res = arr.read(KEY, out=out)
    assert res is out
    assert np.shares_memory(res, out)
    assert_same_bits(out, expected[KEY])

    out = sentinel((len(STARTS),) + CROP, np.uint16)
    res = arr.read_crops(STARTS, CROP, out=out)
    assert res is out
    assert_same_bits(out, crops_of(expected))


def test_native_dtype_spellings_are_accepted(u16):
    arr, expected = u16
    for dt in (np.uint16, "=u2", np.dtype("uint16").newbyteorder("=")):
        out = sentinel((70, 85), dt)
        assert arr.read(KEY, out=out) is out
        assert_same_bits(out, expected[KEY])


def test_f_order_out(u16, f64):
    for arr, expected in (u16, f64):
        want = expected[1:30, ::-2]
        out = sentinel(want.shape, expected.dtype, order="F")
        assert out.flags.f_contiguous and not out.flags.c_contiguous
        assert arr.read(np.s_[1:30, ::-2], out=out) is out
        assert_same_bits(out, want)
    arr, expected = u16
    out = sentinel((len(STARTS),) + CROP, np.uint16, order="F")
    assert arr.read_crops(STARTS, CROP, out=out) is out
    assert_same_bits(out, crops_of(expected))


def test_strided_view_out_leaves_neighbours_untouched(u16):
    arr, expected = u16
    parent = sentinel((3 * 70 + 2, 2 * 85 + 3), np.uint16)
    before = parent.copy()
    out = parent[1::3, 2::2][:70, :85]
    assert out.shape == (70, 85) and not out.flags.c_contiguous
    res = arr.read(KEY, out=out)
    assert res is out
    assert np.shares_memory(res, parent)
    assert_same_bits(out, expected[KEY])
    mask = np.ones(parent.shape, bool)
    mask[1::3, 2::2][:70, :85] = False
    assert_same_bits(parent[mask], before[mask], "neighbours")


def test_inner_dim_sliced_out(u16):
    """C-contiguous rows but a gap between rows: the scratch path."""
    arr, expected = u16
    parent = sentinel((70, 100), np.uint16)
    before = parent.copy()
    out = parent[:, 7:92]
    assert arr.read(KEY, out=out) is out
    assert_same_bits(out, expected[KEY])
    assert_same_bits(parent[:, :7], before[:, :7])
    assert_same_bits(parent[:, 92:], before[:, 92:])


def test_transposed_view_out(u16):
    arr, expected = u16
    base = sentinel((85, 70), np.uint16)
    out = base.T
    assert arr.read(KEY, out=out) is out
    assert_same_bits(out, expected[KEY])
    assert_same_bits(base, expected[KEY].T)


def test_crops_into_strided_and_permuted_out(u16):
    arr, expected = u16
    want = crops_of(expected)
    parent = sentinel((len(STARTS) * 2, CROP[1] + 4, CROP[0] * 2), np.uint16)
    before = parent.copy()
    out = parent[::2, 2:2 + CROP[1], ::2].transpose(0, 2, 1)
    assert out.shape == want.shape
    assert arr.read_crops(STARTS, CROP, out=out) is out
    assert_same_bits(out, want)
    mask = np.ones(parent.shape, bool)
    mask[::2, 2:2 + CROP[1], ::2] = False
    assert_same_bits(parent[mask], before[mask], "neighbours")


def test_size_one_dim_with_zero_stride_is_valid(u16):
    """A 0 stride on a length-1 axis overlaps nothing."""
    arr, expected = u16
    buf = sentinel((85,), np.uint16)
    out = as_strided(buf, shape=(1, 85), strides=(0, 2))
    assert out.flags.writeable
    assert arr.read(np.s_[5:6, 12:97], out=out) is out
    assert_same_bits(buf, expected[5, 12:97])


def test_fill_regions_are_written_into_out(stores):
    """Missing chunks/shards must overwrite whatever ``out`` held."""
    s = stores.get("z_shard_sparse_start_nan")  # float32, NaN fill
    arr = lsio.open(str(s.path))
    for order in ("C", "F"):
        out = sentinel((100, 100), np.float32, order=order)
        assert arr.read(Ellipsis, out=out) is out
        assert_same_bits(out, s.expected)
    s = stores.get("z_shard_sparse")  # uint16, fill 0, 3 shards missing
    arr = lsio.open(str(s.path))
    out = sentinel((4, 30, 30), np.uint16)
    starts = np.array([[0, 0], [60, 60], [0, 55], [70, 0]], np.int64)
    assert arr.read_crops(starts, (30, 30), out=out) is out
    assert_same_bits(out, crops_of(s.expected, starts, (30, 30)))


def test_zero_d_result_into_zero_d_out(u16):
    arr, expected = u16
    out = np.zeros((), np.uint16)
    res = arr.read((4, -3), out=out)
    assert res is out
    assert out[()] == expected[4, -3]


def test_memmap_out(u16, tmp_path):
    arr, expected = u16
    mm = np.memmap(tmp_path / "out.bin", dtype=np.uint16, mode="w+",
                   shape=(70, 85))
    assert arr.read(KEY, out=mm) is mm
    mm.flush()
    assert_same_bits(np.asarray(mm), expected[KEY])
    on_disk = np.fromfile(tmp_path / "out.bin", np.uint16).reshape(70, 85)
    assert_same_bits(on_disk, expected[KEY])


# --------------------------------------------------------------------------
# Rejected out arrays
# --------------------------------------------------------------------------

SWAPPED = ">" if sys.byteorder == "little" else "<"


@pytest.mark.parametrize(
    "dtype", ["float64", "int16", "uint32", "uint8", f"{SWAPPED}u2", "float16"]
)
def test_wrong_dtype_is_type_error(u16, dtype):
    arr, _ = u16
    assert_rejected(TypeError, lambda o: arr.read(KEY, out=o),
                    sentinel((70, 85), dtype))
    assert_rejected(TypeError, lambda o: arr.read_crops(STARTS, CROP, out=o),
                    sentinel((len(STARTS),) + CROP, dtype))


@pytest.mark.parametrize("dtype", [f"{SWAPPED}f8", "float32", "int64",
                                   "complex128"])
def test_wrong_dtype_float_store(f64, dtype):
    arr, _ = f64
    assert_rejected(TypeError, lambda o: arr.read(np.s_[:5, :5], out=o),
                    sentinel((5, 5), dtype))


def test_bool_store_rejects_uint8_out(stores):
    arr = lsio.open(str(stores.get("z_dtype_bool").path))
    assert_rejected(TypeError, lambda o: arr.read(np.s_[:4, :4], out=o),
                    sentinel((4, 4), np.uint8))


@pytest.mark.parametrize(
    "shape",
    [(70, 84), (71, 85), (85, 70), (1, 70, 85), (70 * 85,), (70, 85, 1), ()],
)
def test_wrong_shape_is_value_error(u16, shape):
    arr, _ = u16
    assert_rejected(ValueError, lambda o: arr.read(KEY, out=o),
                    sentinel(shape, np.uint16))


@pytest.mark.parametrize(
    "shape", [(len(STARTS) + 1,) + CROP, (len(STARTS) - 1,) + CROP,
              (len(STARTS), CROP[1], CROP[0]), CROP]
)
def test_read_crops_wrong_shape(u16, shape):
    arr, _ = u16
    assert_rejected(ValueError, lambda o: arr.read_crops(STARTS, CROP, out=o),
                    sentinel(shape, np.uint16))


def test_int_key_wrong_out_shape(u16):
    arr, _ = u16
    assert_rejected(ValueError, lambda o: arr.read((4, 5), out=o),
                    sentinel((1,), np.uint16))
    assert_rejected(ValueError, lambda o: arr.read(4, out=o),
                    sentinel((1, 100), np.uint16))


def test_read_only_out_is_value_error(u16):
    arr, _ = u16
    out = sentinel((70, 85), np.uint16)
    out.flags.writeable = False
    assert_rejected(ValueError, lambda o: arr.read(KEY, out=o), out)
    crops = sentinel((len(STARTS),) + CROP, np.uint16)
    crops.flags.writeable = False
    assert_rejected(ValueError, lambda o: arr.read_crops(STARTS, CROP, out=o),
                    crops)


def test_read_only_view_of_bytes_is_value_error(u16):
    arr, _ = u16
    out = np.frombuffer(bytes(70 * 85 * 2), np.uint16).reshape(70, 85)
    assert not out.flags.writeable
    assert_rejected(ValueError, lambda o: arr.read(KEY, out=o), out)


def test_negative_strides_are_value_error(u16):
    arr, _ = u16
    parent = sentinel((70, 85), np.uint16)
    for out in (parent[::-1], parent[:, ::-1], parent[::-1, ::-1]):
        assert_rejected(ValueError, lambda o: arr.read(KEY, out=o), out)
        assert_same_bits(parent, sentinel((70, 85), np.uint16))
    crops = sentinel((len(STARTS),) + CROP, np.uint16)[::-1]
    assert_rejected(ValueError, lambda o: arr.read_crops(STARTS, CROP, out=o),
                    crops)


def test_zero_stride_is_value_error(u16):
    arr, _ = u16
    buf = sentinel((85,), np.uint16)
    out = as_strided(buf, shape=(70, 85), strides=(0, 2))
    assert out.flags.writeable
    assert_rejected(ValueError, lambda o: arr.read(KEY, out=o), out)
    assert_same_bits(buf, sentinel((85,), np.uint16))
    cbuf = sentinel(CROP, np.uint16)
    crops = as_strided(cbuf, shape=(len(STARTS),) + CROP, strides=(0, 24, 2))
    assert_rejected(ValueError, lambda o: arr.read_crops(STARTS, CROP, out=o),
                    crops)
    assert_same_bits(cbuf, sentinel(CROP, np.uint16))


def test_overlapping_nonzero_strides_are_value_error(u16):
    arr, _ = u16
    buf = sentinel((70 + 85,), np.uint16)
    # element (i, j) lives at buf[i + j]: rows overlap each other
    out = as_strided(buf, shape=(70, 85), strides=(2, 2))
    assert_rejected(ValueError, lambda o: arr.read(KEY, out=o), out)
    buf2 = sentinel((70 * 40 + 85,), np.uint16)
    # rows 40 elements apart but 85 long: each row overlaps the next
    out2 = as_strided(buf2, shape=(70, 85), strides=(80, 2))
    assert_rejected(ValueError, lambda o: arr.read(KEY, out=o), out2)


def test_bad_out_is_reported_before_io(stores, tmp_path):
    """An invalid ``out`` raises its own error even on corrupt data."""
    s = stores.fresh("z_plain", tmp_path)
    for chunk in (s.path / "c").rglob("*"):
        if chunk.is_file():
            chunk.write_bytes(b"\x00garbage" * 5)
    arr = lsio.open(str(s.path))
    assert_rejected(TypeError, lambda o: arr.read(KEY, out=o),
                    sentinel((70, 85), np.float64))
    assert_rejected(ValueError, lambda o: arr.read(KEY, out=o),
                    sentinel((70, 86), np.uint16))
    ro = sentinel((70, 85), np.uint16)
    ro.flags.writeable = False
    assert_rejected(ValueError, lambda o: arr.read(KEY, out=o), ro)
    with pytest.raises(lsio.CorruptDataError):
        arr.read(KEY, out=sentinel((70, 85), np.uint16))


# --------------------------------------------------------------------------
# Outputs larger than the cache: the streamed scatter
# --------------------------------------------------------------------------

BIG_SHAPE = (2, 1024, 1536)
BIG_CROP = (2, 300, 261)  # odd width: rows start at every alignment in the output


@pytest.fixture(scope="module")
def big_stores(tmp_path_factory):
    """float32 data with W1/W8's (1, 128, 128) chunks, written by zarr-python 3 as a
    sharded zstd v3 array and as a v2 blosc-lz4 byte-shuffle array."""
    import numcodecs
    import zarr

    root = tmp_path_factory.mktemp("big")
    rng = np.random.default_rng(7)
    data = rng.standard_normal(BIG_SHAPE, dtype=np.float32)
    data[:, :, 1400:] = 0  # some chunks compress to almost nothing
    v3 = zarr.create_array(str(root / "v3.zarr"), shape=BIG_SHAPE, chunks=(1, 128, 128),
                           shards=(2, 512, 512), dtype="float32",
                           compressors=zarr.codecs.ZstdCodec(level=1), fill_value=0)
    v3[:] = data
    v2 = zarr.create_array(str(root / "v2.zarr"), shape=BIG_SHAPE, chunks=(1, 128, 128), dtype="float32",
                           zarr_format=2, fill_value=0,
                           compressors=numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE))
    v2[:] = data
    return {"v3": root / "v3.zarr", "v2": root / "v2.zarr"}, data


def stream_threshold(arr):
    arr.read(np.s_[0, 0, :4])
    return lsio._core._last_call_profile()["stream_threshold_bytes"]


@pytest.mark.parametrize("fmt", ["v3", "v2"])
def test_crops_larger_than_the_cache_are_streamed_exactly(big_stores, fmt):
    paths, data = big_stores
    arr = lsio.open(str(paths[fmt]), threads=2)
    threshold = stream_threshold(arr)
    crop_bytes = int(np.prod(BIG_CROP)) * 4
    n = threshold // crop_bytes + 2
    rng = np.random.default_rng(3)
    starts = np.stack([np.zeros(n, np.int64),
                       rng.integers(0, BIG_SHAPE[1] - BIG_CROP[1] + 1, n),
                       rng.integers(0, BIG_SHAPE[2] - BIG_CROP[2] + 1, n)], axis=1)
    parent = sentinel((n + 2, *BIG_CROP), np.float32)
    before = parent.copy()
    out = parent[1:-1]
    res = arr.read_crops(starts, BIG_CROP, out=out)
    prof = lsio._core._last_call_profile()
    assert res is out
    assert prof["streamed"], (prof, n * crop_bytes)
    want = np.stack([data[:, a:a + BIG_CROP[1], b:b + BIG_CROP[2]] for _, a, b in starts])
    assert_same_bits(out, want)
    assert_same_bits(parent[[0, -1]], before[[0, -1]], "neighbours")

    # Below the threshold the same crops take the cached path, with the same result.
    small = arr.read_crops(starts[:2], BIG_CROP)
    assert not lsio._core._last_call_profile()["streamed"]
    assert_same_bits(small, want[:2])


def test_streamed_read_into_rows_with_gaps_leaves_neighbours_untouched(big_stores):
    """A big region read into a view whose rows are contiguous but separated by untouched
    columns: streamed rows end mid-line, where the neighbours' bytes must survive."""
    paths, data = big_stores
    arr = lsio.open(str(paths["v2"]), threads=2)
    threshold = stream_threshold(arr)
    key = np.s_[:, 3:1021, 5:1530]
    shape = data[key].shape
    if data[key].nbytes < threshold:
        # Stack the region until the output passes the threshold (crops of one box each).
        reps = threshold // data[key].nbytes + 1
    else:
        reps = 1
    parent = sentinel((reps, shape[0], shape[1] + 2, shape[2] + 7), np.float32)
    before = parent.copy()
    out = parent[:, :, 1:-1, 3:-4]
    assert not out.flags.c_contiguous and out.strides[-1] == 4
    starts = np.tile(np.array([[0, 3, 5]], np.int64), (reps, 1))
    arr.read_crops(starts, shape, out=out)
    assert lsio._core._last_call_profile()["streamed"]
    for r in range(reps):
        assert_same_bits(out[r], data[key])
    mask = np.ones(parent.shape, bool)
    mask[:, :, 1:-1, 3:-4] = False
    assert_same_bits(parent[mask], before[mask], "neighbours")


@pytest.mark.parametrize("threads", [1, 2])
def test_starts_inside_out_are_read_before_out_is_written(tmp_path, threads):
    """``starts`` that share memory with ``out`` (one int64 buffer holding both) give the
    same crops as distinct starts: the engine reads the starts while it writes ``out``."""
    import zarr

    data = np.arange(64 * 64, dtype=np.int64).reshape(64, 64) * 7 + 3
    z = zarr.create_array(str(tmp_path / "i8.zarr"), shape=data.shape, chunks=(8, 8), shards=(32, 32),
                          dtype="i8")
    z[...] = data
    arr = lsio.open(str(tmp_path / "i8.zarr"), threads=threads)
    crop = (4, 4)
    rng = np.random.default_rng(5)
    starts = rng.integers(0, 60, size=(40, 2)).astype(np.int64)
    want = arr.read_crops(starts.copy(), crop)
    assert_same_bits(want, np.stack([data[a:a + 4, b:b + 4] for a, b in starts]))

    buf = np.empty(40 * 4 * 4, np.int64)
    out = buf.reshape(40, 4, 4)
    shared = buf[:80].reshape(40, 2)  # the starts are the first 80 elements of `out`
    shared[...] = starts
    assert np.shares_memory(shared, out)
    assert arr.read_crops(shared, crop, out=out) is out
    assert_same_bits(out, want)
    # also when only a later part of `out` holds them (written after the first crops)
    buf[-80:].reshape(40, 2)[...] = starts
    assert arr.read_crops(buf[-80:].reshape(40, 2), crop, out=out) is out
    assert_same_bits(out, want)

"""The decoded-chunk cache: ``lsio.open(..., chunk_cache_bytes=N)`` / ``LSIO_CACHE_BYTES``.

Reads with the cache equal zarr-python's on every supported local layout (sharded and not,
v3 and v2, direct and scattered chunks, transforms), epoch after epoch; later epochs are
served from the cache (every chunk a hit); the cache stays within its bound while evicting;
a file rewritten by zarr-python is read anew (never stale); Arrays of a process share it; a
forked child starts empty; remote arrays refuse it. Speed is measured by W9
(benchmarks/python/w9.py), not here.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import lsio

zarr = pytest.importorskip("zarr")
from zarr.codecs import ZstdCodec  # noqa: E402


@pytest.fixture(autouse=True)
def empty_cache():
    lsio.cache_clear()
    yield
    lsio.cache_clear()


def write(path, data, chunks, shards=None, zarr_format=3, **kw):
    compressors = ZstdCodec() if zarr_format == 3 else None
    a = zarr.create_array(str(path), shape=data.shape, chunks=chunks, shards=shards, dtype=data.dtype,
                          zarr_format=zarr_format, compressors=compressors, **kw)
    a[...] = data
    return str(path)


def field(shape, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * 10).astype(dtype)


def crops(rng, shape, crop, n):
    return rng.integers(0, np.subtract(shape, crop) + 1, size=(n, len(shape)))


def expected(data, starts, crop):
    return np.stack([data[tuple(slice(int(s), int(s) + c) for s, c in zip(st, crop))] for st in starts])


LAYOUTS = {
    "sharded": dict(chunks=(1, 16, 16), shards=(4, 32, 32)),
    "unsharded": dict(chunks=(2, 16, 16)),
    "v2": dict(chunks=(2, 16, 16), zarr_format=2),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("threads", [1, 2])
def test_epochs_equal_zarr_and_later_ones_are_all_hits(tmp_path, layout, threads):
    data = field((8, 64, 64))
    path = write(tmp_path / "a.zarr", data, **LAYOUTS[layout])
    arr = lsio.open(path, chunk_cache_bytes=64 << 20, threads=threads)
    assert arr.options["chunk_cache_bytes"] == 64 << 20
    rng = np.random.default_rng(1)
    starts = crops(rng, data.shape, (2, 20, 20), 16)
    want = expected(data, starts, (2, 20, 20))
    np.testing.assert_array_equal(arr.read_crops(starts, (2, 20, 20)), want)
    first = lsio.cache_info()
    assert first["inserts"] > 0 and first["bytes"] <= first["capacity"]
    for _ in range(2):
        before = lsio.cache_info()
        np.testing.assert_array_equal(arr.read_crops(starts, (2, 20, 20)), want)
        after = lsio.cache_info()
        assert after["misses"] == before["misses"], "a chunk of a repeated epoch was not served from the cache"
        assert after["hits"] > before["hits"] and after["inserts"] == before["inserts"]
    # whole-array reads (chunks decoded straight into the output) and basic indexing
    np.testing.assert_array_equal(arr[...], data)
    np.testing.assert_array_equal(arr[...], data)
    np.testing.assert_array_equal(arr[1:7:2, 5:60:3, ::-4], data[1:7:2, 5:60:3, ::-4])


def test_transform_and_out_views_with_the_cache(tmp_path):
    data = field((4, 32, 32), dtype=np.int16)
    path = write(tmp_path / "a.zarr", data, chunks=(1, 8, 8), shards=(2, 16, 16))
    arr = lsio.open(path, chunk_cache_bytes=16 << 20)
    for _ in range(2):
        got = arr.read(np.s_[:, 3:30, 2:31], dtype=np.float32, scale=0.5, offset=1.0)
        np.testing.assert_allclose(got, data[:, 3:30, 2:31].astype(np.float32) * 0.5 + 1.0)
        out = np.zeros((8, 32, 32), np.int16)[::2]
        arr.read(np.s_[...], out=out)
        np.testing.assert_array_equal(out, data)


def test_missing_chunks_and_fill_values_with_the_cache(tmp_path):
    path = str(tmp_path / "a.zarr")
    a = zarr.create_array(path, shape=(4, 32, 32), chunks=(1, 8, 8), shards=(2, 16, 16), dtype="f4",
                          compressors=ZstdCodec(), fill_value=7.5)
    a[0, :8, :8] = 1.0
    arr = lsio.open(path, chunk_cache_bytes=1 << 20)
    for _ in range(2):
        got = arr[...]
        want = np.full((4, 32, 32), 7.5, np.float32)
        want[0, :8, :8] = 1.0
        np.testing.assert_array_equal(got, want)


def test_the_cache_stays_within_its_bound(tmp_path):
    data = field((16, 128, 128))  # 1 MiB decoded, chunks of 16 KiB
    path = write(tmp_path / "a.zarr", data, chunks=(1, 64, 64), shards=(4, 128, 128))
    arr = lsio.open(path, chunk_cache_bytes=200_000)
    for _ in range(3):
        np.testing.assert_array_equal(arr[...], data)
        info = lsio.cache_info()
        assert info["bytes"] <= 200_000, info
    assert info["evictions"] > 0 and info["entries"] <= 200_000 // (64 * 64 * 4)


def test_a_rewritten_file_is_never_served_stale(tmp_path):
    data = field((4, 32, 32))
    path = write(tmp_path / "a.zarr", data, chunks=(1, 16, 16), shards=(2, 32, 32))
    arr = lsio.open(path, chunk_cache_bytes=16 << 20)
    np.testing.assert_array_equal(arr[...], data)
    np.testing.assert_array_equal(arr[...], data)
    # zarr-python rewrites shard files (new content, same size); the next read sees it
    z = zarr.open_array(path, mode="r+")
    z[0:2] = data[0:2] + 1
    new = data.copy()
    new[0:2] += 1
    np.testing.assert_array_equal(arr[...], new)
    # rewritten in place with the same bytes length, by hand: still a new version
    shard = os.path.join(path, "c", "1", "0", "0")
    raw = open(shard, "rb").read()
    z2 = zarr.open_array(path, mode="r+")
    z2[2:4] = data[2:4] * 2
    rewritten = open(shard, "rb").read()
    if len(rewritten) == len(raw):
        with open(shard, "r+b") as f:
            f.write(rewritten)
    new[2:4] = data[2:4] * 2
    np.testing.assert_array_equal(arr[...], new)


def test_arrays_of_a_process_share_the_cache(tmp_path):
    data = field((4, 32, 32))
    path = write(tmp_path / "a.zarr", data, chunks=(1, 16, 16), shards=(2, 32, 32))
    lsio.open(path, chunk_cache_bytes=8 << 20)[...]
    before = lsio.cache_info()
    np.testing.assert_array_equal(lsio.open(path, chunk_cache_bytes=8 << 20)[...], data)
    after = lsio.cache_info()
    assert after["misses"] == before["misses"] and after["hits"] >= before["hits"] + 16
    # an array without chunk_cache_bytes neither uses nor fills it
    np.testing.assert_array_equal(lsio.open(path)[...], data)
    assert lsio.cache_info()["hits"] == after["hits"]


def test_old_name_cache_bytes_still_fills_the_cache(tmp_path):
    data = field((2, 16, 16))
    path = write(tmp_path / "a.zarr", data, chunks=(1, 16, 16))
    with pytest.warns(DeprecationWarning, match="now called 'chunk_cache_bytes'"):
        arr = lsio.open(path, cache_bytes=8 << 20)
    np.testing.assert_array_equal(arr[...], data)
    info = lsio.cache_info()
    assert info["capacity"] == 8 << 20 and info["entries"] == 2


def test_environment_variable_and_bad_values(tmp_path, monkeypatch):
    data = field((2, 16, 16))
    path = write(tmp_path / "a.zarr", data, chunks=(1, 16, 16))
    monkeypatch.setenv("LSIO_CACHE_BYTES", "1MiB")
    arr = lsio.open(path)
    assert arr.options["chunk_cache_bytes"] == 1 << 20
    arr[...]
    assert lsio.cache_info()["capacity"] >= 1 << 20
    monkeypatch.delenv("LSIO_CACHE_BYTES")
    with pytest.raises(ValueError):
        lsio.open(path, chunk_cache_bytes=-1)
    with pytest.raises(ValueError, match="local files only"):
        lsio.open("s3://bucket/x.zarr", chunk_cache_bytes=1 << 20)


def test_a_forked_child_starts_with_an_empty_cache(tmp_path):
    data = field((4, 32, 32))
    path = write(tmp_path / "a.zarr", data, chunks=(1, 16, 16), shards=(2, 32, 32))
    arr = lsio.open(path, chunk_cache_bytes=8 << 20, threads=2)
    arr[...]
    assert lsio.cache_info()["entries"] > 0
    pid = os.fork()
    if pid == 0:
        ok = lsio.cache_info()["entries"] == 0
        ok = ok and np.array_equal(arr[...], data) and lsio.cache_info()["entries"] > 0
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0

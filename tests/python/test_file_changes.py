"""Files changing under an open Array: every read sees each file as it is when the read
reaches it, never a cached shard index applied to another version of the file.

Reproduces the hardening issue's silent-wrong-data reports:
* a shard replaced (tmp + rename, as zarr-python's writers do) after its descriptor was
  evicted from the cache (a low RLIMIT_NOFILE makes the cache small), and
* a shard rewritten in place (same inode, ``cp new old``),
on uncompressed stores (where a stale index returns another chunk's bytes without any
error) and zstd stores, on every I/O backend. Also: shards created and deleted between
reads, and unsharded chunk files rewritten in place.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import zarr
from zarr.codecs import ZstdCodec

import lsio

IO_MODES = ("pread", "uring", "auto")


def _backend_ok(io):
    if io == "pread":
        return
    info = lsio.io_backend_info()
    if not info["uring_available"]:
        pytest.skip(f"io_uring unavailable: {info['reason']}")


def _write(path, data, compressed, shards=(16, 8), chunks=(4, 8)):
    z = zarr.create_array(str(path), shape=data.shape, dtype=data.dtype, chunks=chunks, shards=shards,
                          compressors=ZstdCodec(level=1) if compressed else None, fill_value=0,
                          overwrite=True)
    z[...] = data
    return z


def _bump_mtime(path):
    """Rewrites within one timestamp tick keep mtime; make the change visible as a user's
    later rewrite would be."""
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10_000_000))


@pytest.mark.parametrize("compressed", [False, True], ids=["raw", "zstd"])
@pytest.mark.parametrize("io", IO_MODES)
def test_shard_replaced_after_its_descriptor_was_evicted(tmp_path, io, compressed):
    # The reproduction, in a child with RLIMIT_NOFILE = 128 (cache capacity small
    # enough that reading 23 other shards evicts shard 0's descriptor).
    _backend_ok(io)
    data = (np.arange(384 * 8, dtype="int32").reshape(384, 8) + 1)
    path = tmp_path / "a.zarr"
    _write(path, data, compressed)
    new = data[:16].copy()
    new[0:4] = 0  # chunk 0 becomes all fill: zarr-python does not store it
    new[4:16] += 1_000_000
    script = textwrap.dedent(f"""
        import os, resource, shutil, sys
        import numpy as np, zarr
        from zarr.codecs import ZstdCodec
        import lsio
        resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128))
        path = {str(path)!r}
        arr = lsio.open(path, io={io!r}, threads=1)
        first = arr[0:4]
        for s in range(1, 24):
            arr[s * 16:s * 16 + 1]
        # Rewrite shard 0 with zarr-python in a copy of the store, then rename it over.
        shutil.copytree(path, path + ".new")
        z = zarr.open_array(path + ".new", mode="r+")
        z[0:16] = np.load({str(tmp_path / "new.npy")!r})
        os.replace(path + ".new/c/0/0", path + "/c/0/0")
        got = arr[0:16]
        np.save({str(tmp_path / "got.npy")!r}, got)
        np.save({str(tmp_path / "first.npy")!r}, first)
    """)
    np.save(tmp_path / "new.npy", new)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert np.array_equal(np.load(tmp_path / "first.npy"), data[0:4])
    got = np.load(tmp_path / "got.npy")
    assert np.array_equal(got, new), "a cached shard index was applied to the replaced shard"


@pytest.mark.parametrize("compressed", [False, True], ids=["raw", "zstd"])
@pytest.mark.parametrize("io", IO_MODES)
@pytest.mark.parametrize("threads", [1, 2])
def test_shard_rewritten_in_place_between_reads(tmp_path, io, compressed, threads):
    _backend_ok(io)
    data = np.arange(64 * 8, dtype="int32").reshape(64, 8) + 1
    a, b = tmp_path / "a.zarr", tmp_path / "b.zarr"
    _write(a, data, compressed)
    new = data.copy()
    new[0:4] = 0  # not stored: every later chunk moves within the shard file
    new[4:16] *= -3
    _write(b, new, compressed)
    arr = lsio.open(str(a), io=io, threads=threads)
    assert np.array_equal(arr[...], data)
    ino = os.stat(a / "c/0/0").st_ino
    shutil.copyfile(b / "c/0/0", a / "c/0/0")  # same inode, new bytes (cp new old)
    _bump_mtime(a / "c/0/0")
    assert os.stat(a / "c/0/0").st_ino == ino
    assert np.array_equal(arr[...], new)
    assert np.array_equal(arr.read_crops([[0, 0], [2, 3]], (8, 4)),
                          np.stack([new[0:8, 0:4], new[2:10, 3:7]]))


@pytest.mark.parametrize("io", IO_MODES)
def test_same_size_rewrite_in_place_is_seen(tmp_path, io):
    # Uncompressed and all chunks present: the new shard has exactly the old size, so only
    # the timestamps tell the versions apart.
    _backend_ok(io)
    data = np.arange(32 * 8, dtype="int32").reshape(32, 8) + 1
    a, b = tmp_path / "a.zarr", tmp_path / "b.zarr"
    _write(a, data, False)
    _write(b, data[::-1].copy(), False)
    arr = lsio.open(str(a), io=io)
    assert np.array_equal(arr[...], data)
    assert os.path.getsize(a / "c/0/0") == os.path.getsize(b / "c/0/0")
    shutil.copyfile(b / "c/0/0", a / "c/0/0")
    _bump_mtime(a / "c/0/0")
    assert np.array_equal(arr[0:16], data[::-1][0:16])


def test_shards_created_and_deleted_between_reads(tmp_path):
    data = np.arange(64 * 8, dtype="int32").reshape(64, 8) + 1
    a = tmp_path / "a.zarr"
    _write(a, data, True)
    arr = lsio.open(str(a))
    assert np.array_equal(arr[...], data)
    os.unlink(a / "c/1/0")
    want = data.copy()
    want[16:32] = 0
    assert np.array_equal(arr[...], want), "a deleted shard reads as fill"
    z = zarr.open_array(str(a), mode="r+")
    z[16:32] = 7
    want[16:32] = 7
    assert np.array_equal(arr[...], want), "a re-created shard is read"


@pytest.mark.parametrize("compressed", [False, True], ids=["raw", "zstd"])
def test_unsharded_chunk_rewritten_in_place(tmp_path, compressed):
    data = np.arange(16 * 8, dtype="uint16").reshape(16, 8)
    a, b = tmp_path / "a.zarr", tmp_path / "b.zarr"
    for p, d in ((a, data), (b, data * 3 + 1)):
        z = zarr.create_array(str(p), shape=d.shape, dtype=d.dtype, chunks=(4, 8),
                              compressors=ZstdCodec(level=1) if compressed else None)
        z[...] = d
    arr = lsio.open(str(a))
    assert np.array_equal(arr[...], data)
    shutil.copyfile(b / "c/1/0", a / "c/1/0")
    _bump_mtime(a / "c/1/0")
    want = data.copy()
    want[4:8] = data[4:8] * 3 + 1
    assert np.array_equal(arr[...], want)


def test_file_changed_while_an_array_is_open_in_many_arrays(tmp_path):
    # Two Arrays of one store share the process-wide descriptor cache: a change seen
    # through one is seen through the other (no per-Array stale view).
    data = np.arange(64 * 8, dtype="int32").reshape(64, 8) + 1
    a, b = tmp_path / "a.zarr", tmp_path / "b.zarr"
    _write(a, data, False)
    _write(b, -data, False)
    one, two = lsio.open(str(a)), lsio.open(str(a))
    assert np.array_equal(one[...], data) and np.array_equal(two[...], data)
    tmp = a / "c/0/0.tmp"
    shutil.copyfile(b / "c/0/0", tmp)
    os.replace(tmp, a / "c/0/0")
    assert np.array_equal(one[0:16], -data[0:16])
    assert np.array_equal(two[0:16], -data[0:16])


"""Reads in place (io="auto"): ranges of local files that the page cache holds are decoded
from a mapping of the file instead of being read (docs/guide/tuning.md "I/O backends").

* hot crops of a zarr-python sharded zstd store and of an h5py NetCDF-style file are served
  from the mapping (``stats()["mapped_reads"]``) and equal what zarr-python / h5py read;
* ``io="pread"`` and ``io="uring"`` never map;
* ranges the page cache does not hold are read, not mapped (a page fault would read them one
  page run at a time); once read, the next call maps them;
* a file cut short while reader threads run (the case where a mapping raises SIGBUS past the
  new end, and reads zeros on the page that holds it) never kills the process nor returns
  zeros as data: each call returns the file's values or raises lsio's StorageError /
  CorruptDataError / FormatError.
(The deterministic version of the last case, a cut exactly between the residency check and
the access, is tests/cpp/read/mapped_read_test.cc.)
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import zarr
from zarr.codecs import ZstdCodec

import lsio


def _fs_type(path) -> str:
    out = subprocess.run(["stat", "-f", "-c", "%T", str(path)], capture_output=True, text=True)
    return out.stdout.strip()


def _on_tmpfs(path) -> bool:
    return _fs_type(path) == "tmpfs"


def _mapping_applies(path) -> None:
    """Skips where lsio never maps (network and FUSE file systems) or the page cache is not
    where the file's pages live (ZFS keeps its own cache)."""
    t = _fs_type(path)
    if t.startswith(("nfs", "fuse", "cifs", "smb", "ceph", "lustre", "9p", "zfs", "gpfs")):
        pytest.skip(f"{t}: no reads in place here")


def _drop(paths):
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def _shard_files(root):
    return [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f != "zarr.json"]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("mapped") / "a.zarr"
    rng = np.random.default_rng(3)
    data = rng.integers(0, 1000, (64, 256, 256)).astype(np.float32)
    z = zarr.create_array(str(path), shape=data.shape, dtype=data.dtype, chunks=(1, 128, 128),
                          shards=(8, 256, 256), compressors=[ZstdCodec(level=1)])
    z[...] = data
    return str(path), data


def _io_ok(io):
    if io == "uring" and not lsio.io_backend_info()["uring_available"]:
        pytest.skip("io_uring unavailable: " + lsio.io_backend_info()["reason"])


@pytest.mark.parametrize("io", ["auto", "pread", "uring"])
@pytest.mark.parametrize("threads", [1, 2])
def test_hot_crops_are_decoded_in_place_only_with_auto(store, io, threads):
    _io_ok(io)
    path, data = store
    _mapping_applies(path)
    a = lsio.open(path, io=io, threads=threads)
    zarr.open_array(path)[:1]  # touch: the store is hot either way
    rng = np.random.default_rng(threads)
    starts = np.stack([rng.integers(0, 60, 8), rng.integers(0, 130, 8), rng.integers(0, 130, 8)], 1)
    for _ in range(2):  # the first call may meet pages the writer's flush left out
        got = a.read_crops(starts, (4, 120, 120))
    z = zarr.open_array(path)
    for i, (t, y, x) in enumerate(starts):
        np.testing.assert_array_equal(got[i], z[t:t + 4, y:y + 120, x:x + 120])
    mapped = a.stats()["mapped_reads"]
    if io == "auto":
        assert mapped > 0
    else:
        assert mapped == 0


def test_cold_ranges_are_read_then_mapped(tmp_path):
    _mapping_applies(tmp_path)
    if _on_tmpfs(tmp_path):
        pytest.skip("tmpfs pages are always in memory: nothing is cold there")
    path = tmp_path / "cold.zarr"
    rng = np.random.default_rng(5)
    # Incompressible chunks of 64 KiB: the crop's chunk lies far from the shard index at the end.
    data = rng.integers(0, 2**31, (8, 512, 512), dtype=np.int32).view(np.float32)
    z = zarr.create_array(str(path), shape=data.shape, dtype=data.dtype, chunks=(1, 128, 128),
                          shards=(8, 512, 512), compressors=[ZstdCodec(level=1)])
    z[...] = data
    _drop(_shard_files(path))
    a = lsio.open(str(path), io="auto", threads=1)
    sel = (slice(0, 1), slice(0, 100), slice(0, 100))
    np.testing.assert_array_equal(a[sel], data[sel])
    assert a.stats()["mapped_reads"] == 0, "a cold range was mapped instead of read"
    np.testing.assert_array_equal(a[sel], data[sel])
    assert a.stats()["mapped_reads"] > 0, "the range read by the first call was not mapped by the second"


def test_netcdf_file_hot_crops_from_the_mapping(tmp_path):
    _mapping_applies(tmp_path)
    h5py = pytest.importorskip("h5py")
    path = str(tmp_path / "f.nc")
    rng = np.random.default_rng(9)
    data = rng.normal(size=(6, 200, 300)).astype(np.float32)
    with h5py.File(path, "w") as f:
        f.create_dataset("t2m", data=data, chunks=(1, 64, 64), compression="gzip", compression_opts=1, shuffle=True)
    a = lsio.open(path, "t2m", threads=2)
    for _ in range(2):
        got = a[1:5, 10:150, 20:290]
    np.testing.assert_array_equal(got, data[1:5, 10:150, 20:290])
    assert a.stats()["mapped_reads"] > 0


def test_uncompressed_chunks_straight_into_the_output(tmp_path):
    """Uncompressed inner chunks go from the mapping straight into the caller's array (one
    contiguous run: the read's unit.dst path) or through the scatter."""
    _mapping_applies(tmp_path)
    path = str(tmp_path / "raw.zarr")
    rng = np.random.default_rng(12)
    data = rng.integers(-(2**15), 2**15, (16, 64, 96), dtype=np.int16)
    z = zarr.create_array(path, shape=data.shape, dtype=data.dtype, chunks=(1, 64, 96), shards=(8, 64, 96),
                          compressors=None)
    z[...] = data
    a = lsio.open(path, threads=2)
    for _ in range(2):
        whole = a[3:11]  # whole inner chunks: each one contiguous in the output
        part = a[2:14, 5:60, 7:90]
    np.testing.assert_array_equal(whole, data[3:11])
    np.testing.assert_array_equal(part, data[2:14, 5:60, 7:90])
    out = np.full((20, 64, 96), -7, np.int16)
    a.read(np.s_[3:11], out=out[5:13])
    np.testing.assert_array_equal(out[5:13], data[3:11])
    assert (out[:5] == -7).all() and (out[13:] == -7).all(), "written outside the selection"
    assert a.stats()["mapped_reads"] > 0


def test_kerchunk_references_read_in_place(tmp_path):
    """References resolve to byte ranges of the files they name (ManifestStore over the local
    store): mapped reads there land at each reference's offset."""
    _mapping_applies(tmp_path)
    h5py = pytest.importorskip("h5py")
    kerchunk_hdf = pytest.importorskip("kerchunk.hdf")
    import json

    nc = str(tmp_path / "f.h5")
    rng = np.random.default_rng(13)
    data = rng.normal(size=(5, 90, 70)).astype(np.float32)
    with h5py.File(nc, "w") as f:
        f.create_dataset("v", data=data, chunks=(1, 32, 32), compression="gzip", compression_opts=1)
    refs = kerchunk_hdf.SingleHdf5ToZarr(nc).translate()
    rpath = tmp_path / "refs.json"
    rpath.write_text(json.dumps(refs))
    a = lsio.open(str(rpath), "v", threads=2)
    for _ in range(2):
        got = a[1:4, 10:80, 3:69]
    np.testing.assert_array_equal(got, data[1:4, 10:80, 3:69])
    assert a.stats()["mapped_reads"] > 0


_RACE = textwrap.dedent("""
    import os, sys, threading, time, numpy as np, lsio
    path, shard, expected = sys.argv[1], sys.argv[2], sys.argv[3]
    original = open(shard, "rb").read()
    expect = np.load(expected)
    fill = np.full_like(expect, 7)
    stop = threading.Event()

    def writer():
        # The shard cut to a third in place, then replaced whole (tmp + rename): each inode
        # a reader may hold ends shorter than it was opened, never regrown.
        tmp = shard + ".tmp"
        while not stop.is_set():
            with open(tmp, "wb") as f:
                f.write(original)
            os.truncate(shard, len(original) // 3)
            os.replace(tmp, shard)

    t = threading.Thread(target=writer)
    t.start()
    ok = failed = 0
    a = lsio.open(path, threads=2)
    end = time.monotonic() + 4
    try:
        k = 0
        while time.monotonic() < end:
            k += 1
            try:
                got = a[...]
            except (lsio.StorageError, lsio.CorruptDataError, lsio.FormatError):
                failed += 1
                continue
            if not (np.array_equal(got, expect) or np.array_equal(got, fill)):
                print("WRONG DATA on read", k, "zeros:", int((got == 0).sum()))
                sys.exit(3)
            ok += 1
    finally:
        stop.set()
        t.join()
    print("ok", ok, "failed", failed)
""")


def test_a_file_cut_while_read_never_crashes_nor_reads_zeros(tmp_path):
    path = tmp_path / "race.zarr"
    rng = np.random.default_rng(11)
    data = rng.integers(1 << 20, 2**31, (64, 1024), dtype=np.int32)  # no zeros, no 7s
    z = zarr.create_array(str(path), shape=data.shape, dtype=data.dtype, chunks=(8, 1024),
                          shards=(64, 1024), compressors=[ZstdCodec(level=1)], fill_value=7)
    z[...] = data
    (shard,) = _shard_files(path)
    expected = tmp_path / "expected.npy"
    np.save(expected, data)
    r = subprocess.run([sys.executable, "-c", _RACE, str(path), shard, str(expected)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"rc {r.returncode}\n{r.stdout}\n{r.stderr[-3000:]}"
    assert r.stdout.startswith("ok"), r.stdout


def test_close_files_lets_the_page_cache_drop_mapped_pages(tmp_path):
    _mapping_applies(tmp_path)
    if _on_tmpfs(tmp_path):
        pytest.skip("tmpfs pages are always in memory: nothing is cold there")
    path = tmp_path / "pin.zarr"
    rng = np.random.default_rng(6)
    data = rng.integers(0, 2**31, (8, 512, 512), dtype=np.int32).view(np.float32)
    z = zarr.create_array(str(path), shape=data.shape, dtype=data.dtype, chunks=(1, 128, 128),
                          shards=(8, 512, 512), compressors=[ZstdCodec(level=1)])
    z[...] = data
    a = lsio.open(str(path), io="auto", threads=1)
    sel = (slice(0, 1), slice(0, 100), slice(0, 100))
    np.testing.assert_array_equal(a[sel], data[sel])
    np.testing.assert_array_equal(a[sel], data[sel])
    served = a.stats()["mapped_reads"]
    assert served > 0
    # The mapping holds the pages it touched: DONTNEED leaves them, the next read maps again.
    _drop(_shard_files(path))
    np.testing.assert_array_equal(a[sel], data[sel])
    assert a.stats()["mapped_reads"] > served
    served = a.stats()["mapped_reads"]
    # Closed, the pages go with DONTNEED: the next read is a read, not a mapping.
    lsio.close_files()
    _drop(_shard_files(path))
    np.testing.assert_array_equal(a[sel], data[sel])
    assert a.stats()["mapped_reads"] == served

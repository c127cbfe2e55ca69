"""File descriptors: one process-wide budget shared by every Array, derived from the
current RLIMIT_NOFILE, that never fails a read it could serve by evicting; ``close()`` and
``with lsio.open(...)`` give an Array's descriptors and caches back.

Each scenario runs in a child process so that lowering RLIMIT_NOFILE cannot disturb the
test runner.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import zarr
from zarr.codecs import ZstdCodec

import lsio


@pytest.fixture(scope="module")
def many_shards(tmp_path_factory):
    """A (500, 4) int32 store with one shard per row: 500 shard files."""
    path = tmp_path_factory.mktemp("fds") / "many.zarr"
    data = np.arange(500 * 4, dtype="int32").reshape(500, 4) * 7 + 1
    z = zarr.create_array(str(path), shape=data.shape, dtype=data.dtype, chunks=(1, 2), shards=(1, 4),
                          compressors=ZstdCodec(level=1))
    z[...] = data
    return str(path), data


def _run(script, **kw):
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True,
                       timeout=300, **kw)
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    return r.stdout


def _open_fds():
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.parametrize("io", ["pread", "auto"])
def test_ten_arrays_of_a_500_shard_store_under_ulimit_1024(many_shards, io):
    # The report: with per-Array caches of RLIMIT_NOFILE/8 descriptors, the 9th
    # Array failed with EMFILE. One budget for the process serves them all.
    path, data = many_shards
    np.save(path + ".expected.npy", data)
    out = _run(f"""
        import resource
        import numpy as np
        import lsio
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))
        want = np.load({path + ".expected.npy"!r})
        arrays = [lsio.open({path!r}, io={io!r}, threads=2) for _ in range(10)]
        for k, a in enumerate(arrays):
            assert np.array_equal(a[...], want), k
        for k, a in enumerate(arrays):  # again, with every Array's indexes cached
            assert np.array_equal(a.read_crops([[3, 0], [250, 1], [497, 2]], (3, 2)),
                                  np.stack([want[3:6, 0:2], want[250:253, 1:3], want[497:500, 2:4]])), k
        import os
        print(len(os.listdir("/proc/self/fd")))
    """)
    assert int(out.strip()) < 1024 // 4 + 64


@pytest.mark.parametrize("io", ["pread", "auto"])
def test_limit_lowered_after_the_first_read(many_shards, io):
    # The budget follows the current limit: lowering it below what the cache already holds
    # must not fail the next read, which evicts instead.
    path, data = many_shards
    np.save(path + ".expected.npy", data)
    _run(f"""
        import os, resource
        import numpy as np
        import lsio
        want = np.load({path + ".expected.npy"!r})
        a = lsio.open({path!r}, io={io!r})
        assert np.array_equal(a[...], want)
        held = len(os.listdir("/proc/self/fd"))
        assert held > 100, held  # the cache holds many descriptors now
        resource.setrlimit(resource.RLIMIT_NOFILE, (held - 40, held - 40))
        b = lsio.open({path!r}, io={io!r})
        assert np.array_equal(b[...], want)
        assert np.array_equal(a[100:400], want[100:400])
    """)


def test_limit_so_low_that_only_eviction_helps(many_shards):
    # A limit just above what the process has open besides lsio: each read must get by with
    # a handful of descriptors.
    path, data = many_shards
    np.save(path + ".expected.npy", data)
    _run(f"""
        import os, resource
        import numpy as np
        import lsio
        want = np.load({path + ".expected.npy"!r})
        a = lsio.open({path!r}, io="pread", threads=1)
        base = len(os.listdir("/proc/self/fd"))
        resource.setrlimit(resource.RLIMIT_NOFILE, (base + 24, base + 24))
        assert np.array_equal(a[...], want)
        assert np.array_equal(a[::-7], want[::-7])
    """)


def test_close_releases_descriptors_and_reads_then_raise(many_shards):
    path, data = many_shards
    a = lsio.open(path, io="pread")
    before = _open_fds()
    assert np.array_equal(a[...], data)
    assert _open_fds() > before + 50, "the cache keeps descriptors between reads"
    a.close()
    assert _open_fds() <= before + 1
    assert a.closed
    with pytest.raises(ValueError, match="closed"):
        a[0]
    with pytest.raises(ValueError, match="closed"):
        a.read_crops([[0, 0]], (1, 1))
    assert a.shape == (500, 4)  # metadata stays available
    a.close()  # idempotent
    # A pickled copy is an open, independent Array.
    b = pickle.loads(pickle.dumps(a))
    assert not b.closed and np.array_equal(b[7], data[7])
    b.close()


def test_with_block_closes(many_shards):
    path, data = many_shards
    before = _open_fds()
    with lsio.open(path, io="pread") as a:
        assert np.array_equal(a[100:300], data[100:300])
        assert _open_fds() > before + 50
    assert a.closed
    assert _open_fds() <= before + 1


def test_close_keeps_other_arrays_working(many_shards):
    path, data = many_shards
    a, b = lsio.open(path), lsio.open(path)
    assert np.array_equal(a[...], data)
    a.close()
    assert np.array_equal(b[...], data)
    b.close()

"""Fork safety (architecture.md section 3): DataLoader workers under fork, forkserver and
spawn, bare os.fork() with reads on both sides, subprocess / process pools after use, and
the OS thread count after open() and threads=1 reads.

Every check compares with the data written by zarr-python (and with num_workers=0), and
child processes are waited for with a deadline, so a hang fails instead of blocking."""

from __future__ import annotations

import multiprocessing as mp
import os
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest

zarr = pytest.importorskip("zarr")

import lsio  # noqa: E402
from zarr.codecs import ZstdCodec  # noqa: E402

CROP = (2, 9, 11)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("fork") / "a.zarr"
    data = np.random.default_rng(3).standard_normal((8, 48, 40)).astype(np.float32)
    z = zarr.create_array(store=str(path), shape=data.shape, chunks=(2, 8, 8), shards=(4, 24, 40),
                          dtype=data.dtype, compressors=ZstdCodec(level=1))
    z[:] = data
    return str(path), data


def reference_batches(ds, sampler, epochs, data, batch_size):
    """Batches computed from zarr-python's data at the dataset's own crop origins."""
    out = []
    for e in epochs:
        sampler.set_epoch(e)
        keys = list(sampler)
        for b in range(0, len(keys), batch_size):
            (st,) = ds.source.starts(keys[b : b + batch_size])
            out.append(np.stack([data[tuple(slice(s, s + c) for s, c in zip(row, CROP))] for row in st]))
    return out


def loader_batches(ds, sampler, epochs, **kw):
    from lsio.torch import collate
    from torch.utils.data import DataLoader

    loader = DataLoader(ds, sampler=sampler, batch_size=4, collate_fn=collate, **kw)
    out = []
    for e in epochs:
        sampler.set_epoch(e)
        out.extend(b.numpy().copy() for b in loader)
    return out


# fork: 3 epochs; forkserver/spawn workers take seconds to start, so 2 epochs there.
@pytest.mark.parametrize("parent_reads", [False, True], ids=["fresh", "parent-read"])
@pytest.mark.parametrize("persistent", [False, True], ids=["transient", "persistent"])
@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_dataloader_workers(store, method, persistent, parent_reads):
    pytest.importorskip("torch")
    from lsio.torch import CropDataset, CropSampler, worker_init_fn

    path, data = store
    epochs = [0, 1, 2] if method == "fork" else [0, 1]
    arr = lsio.open(path, threads=2)
    if parent_reads:
        # A read in the parent first: caches, shard indexes and (threads=2) a pool exist.
        np.testing.assert_array_equal(arr[0:8, 0:48, 0:40], data)
    ds = CropDataset(arr, CROP, length=12, seed=9)
    sampler = CropSampler(ds, num_replicas=1, rank=0, seed=4)
    ref = reference_batches(ds, sampler, epochs, data, 4)
    serial = loader_batches(ds, sampler, epochs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # multi-threaded fork (threads=2)
        got = loader_batches(ds, sampler, epochs, num_workers=2, multiprocessing_context=method,
                             persistent_workers=persistent, worker_init_fn=worker_init_fn, timeout=120)
    assert len(got) == len(serial) == len(ref) == 3 * len(epochs)
    for r, s, g in zip(ref, serial, got):
        np.testing.assert_array_equal(s, r)
        np.testing.assert_array_equal(g, r)
    # The parent still reads correctly afterwards.
    np.testing.assert_array_equal(arr[1:3, 5:20, 7:9], data[1:3, 5:20, 7:9])


def wait_child(pid, deadline_s=120.0):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.01)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail(f"forked child {pid} hung")


@pytest.mark.parametrize("io", ["pread", "auto"])
def test_bare_fork_child_and_parent_read(store, io):
    path, data = store
    arr = lsio.open(path, threads=2, io=io)
    rng = np.random.default_rng(0)
    hi = np.subtract(data.shape, CROP) + 1

    def check(n_batches, seed):
        r = np.random.default_rng(seed)
        for _ in range(n_batches):
            st = r.integers(0, hi, size=(16, 3))
            got = arr.read_crops(st, CROP)
            for j, row in enumerate(st):
                if not np.array_equal(got[j], data[tuple(slice(s, s + c) for s, c in zip(row, CROP))]):
                    return False
        return True

    assert check(3, 1)  # parent has read with a pool before forking
    st0 = rng.integers(0, hi, size=(8, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # child: read, report through the exit code, never return into pytest
        code = 1
        try:
            ok = check(20, 2) and np.array_equal(arr[:, :, :], data)
            code = 0 if ok else 3
        except BaseException:
            code = 4
        finally:
            os._exit(code)
    # Parent keeps reading while the child reads.
    ok = check(20, 3)
    assert wait_child(pid) == 0
    assert ok
    np.testing.assert_array_equal(arr.read_crops(st0, CROP)[0], data[tuple(slice(s, s + c) for s, c in zip(st0[0], CROP))])


def _pool_read(args):
    path, start = args
    a = lsio.open(path, threads=1)
    return a.read_crops(np.asarray([start]), CROP)[0]


def test_subprocess_and_process_pools_after_use(store):
    path, data = store
    arr = lsio.open(path, threads=2)
    arr.read_crops(np.zeros((4, 3), dtype=np.int64), CROP)  # a pool exists now
    r = subprocess.run([sys.executable, "-c", "print('ok')"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "ok"
    starts = [(0, 0, 0), (5, 30, 20), (6, 39, 29)]
    expect = [data[s[0] : s[0] + 2, s[1] : s[1] + 9, s[2] : s[2] + 11] for s in starts]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with mp.get_context("fork").Pool(2) as pool:
            res = pool.map_async(_pool_read, [(path, s) for s in starts]).get(timeout=120)
    for g, e in zip(res, expect):
        np.testing.assert_array_equal(g, e)
    # Pickled handles opened in the parent also work in forked pool workers.
    import concurrent.futures as cf

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with cf.ProcessPoolExecutor(2, mp_context=mp.get_context("fork")) as ex:
            futs = [ex.submit(arr.read_crops, np.asarray([s]), CROP) for s in starts]
            res = [f.result(timeout=120)[0] for f in futs]
    for g, e in zip(res, expect):
        np.testing.assert_array_equal(g, e)


def test_dask_multiprocessing_after_use(store):
    dask = pytest.importorskip("dask")
    path, data = store
    arr = lsio.open(path, threads=1)
    arr.read_crops(np.zeros((2, 3), dtype=np.int64), CROP)
    tasks = [dask.delayed(arr.read)((slice(i, i + 1), slice(0, 48), slice(0, 40))) for i in range(4)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        res = dask.compute(*tasks, scheduler="processes", num_workers=2)
    np.testing.assert_array_equal(np.concatenate(res), data[:4])


def test_tqdm_after_use(store):
    tqdm = pytest.importorskip("tqdm")
    path, data = store
    arr = lsio.open(path, threads=2)
    total = 0
    for i in tqdm.tqdm(range(4), disable=False, file=open(os.devnull, "w")):
        total += arr[i].size
    assert total == 4 * 48 * 40


THREAD_PROBE = """
import os, sys
def n():
    return len(os.listdir("/proc/self/task"))
import numpy as np
base = n()
import lsio
assert n() == base, ("import", base, n())
a = lsio.open(sys.argv[1])                      # default threads: still lazy
assert n() == base, ("open", base, n())
b = lsio.open(sys.argv[1], threads=1)
x = b.read_crops(np.zeros((3, 3), dtype=np.int64), (2, 9, 11))
y = b[:, :5, :5]
assert n() == base, ("threads=1 read", base, n())
import lsio.grain
assert n() == base, ("import lsio.grain", base, n())
print("BASE", base)
"""


def test_thread_count(store):
    path, _ = store
    env = dict(os.environ)
    for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
        env[k] = "1"
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(THREAD_PROBE), path], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "BASE 1" in r.stdout, r.stdout  # one OS thread: lsio added none

"""lsio._async: read_crops_async (concurrent.futures / asyncio) and prefetch."""

from __future__ import annotations

import asyncio
import os
import threading
import time
import warnings

import numpy as np
import pytest

zarr = pytest.importorskip("zarr")

import lsio  # noqa: E402
from lsio import _async  # noqa: E402
from lsio._async import prefetch, read_crops_async  # noqa: E402
from zarr.codecs import ZstdCodec  # noqa: E402

CROP = (3, 7, 5)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("async") / "a.zarr"
    data = np.random.default_rng(8).standard_normal((9, 30, 25)).astype(np.float32)
    z = zarr.create_array(store=str(path), shape=data.shape, chunks=(3, 10, 5), shards=(9, 30, 25),
                          dtype=data.dtype, compressors=ZstdCodec(level=1))
    z[:] = data
    return lsio.open(str(path)), data


def crops(data, starts):
    return np.stack([data[tuple(slice(s, s + c) for s, c in zip(row, CROP))] for row in starts])


def random_starts(seed, n=6):
    return np.random.default_rng(seed).integers(0, np.subtract((9, 30, 25), CROP) + 1, size=(n, 3))


def test_future_result_and_out(store):
    arr, data = store
    st = random_starts(0)
    fut = read_crops_async(arr, st, CROP)
    np.testing.assert_array_equal(fut.result(timeout=60), crops(data, st))
    assert fut.done()
    out = np.empty((6, *CROP), dtype=np.float32)
    st2 = random_starts(1)
    buf = st2.copy()
    fut = read_crops_async(arr, buf, CROP, out)
    buf[:] = 0  # starts were copied at submission
    assert fut.result(timeout=60) is out
    np.testing.assert_array_equal(out, crops(data, st2))


def test_future_errors(store):
    arr, _ = store
    with pytest.raises(lsio.BoundsError):
        read_crops_async(arr, [[8, 0, 0]], CROP).result(timeout=60)
    with pytest.raises(TypeError):
        read_crops_async(arr, [[0, 0, 0]], CROP, np.empty((1, *CROP), np.float64)).result(timeout=60)


def test_asyncio_wrap_future(store):
    arr, data = store

    async def main():
        futs = [asyncio.wrap_future(read_crops_async(arr, random_starts(s), CROP)) for s in range(4)]
        return await asyncio.gather(*futs)

    res = asyncio.run(main())
    for s, r in enumerate(res):
        np.testing.assert_array_equal(r, crops(data, random_starts(s)))


@pytest.mark.parametrize("depth", [0, 1, 2, 5])
def test_prefetch_order_and_results(store, depth):
    arr, data = store
    specs = [(arr, random_starts(s), CROP) for s in range(7)]
    specs.append(lambda: "callable")
    out = np.empty((6, *CROP), np.float32)
    specs.append((arr, random_starts(99), CROP, out))
    res = list(prefetch(iter(specs), depth=depth))
    assert len(res) == 9
    for s in range(7):
        np.testing.assert_array_equal(res[s], crops(data, random_starts(s)))
    assert res[7] == "callable"
    assert res[8] is out
    np.testing.assert_array_equal(out, crops(data, random_starts(99)))


def test_prefetch_bounded_and_lazy():
    taken = []
    running = []
    lock = threading.Lock()
    max_seen = [0]

    def gen():
        for i in range(20):
            taken.append(i)

            def job(i=i):
                with lock:
                    running.append(i)
                    max_seen[0] = max(max_seen[0], len(running))
                time.sleep(0.001)
                with lock:
                    running.remove(i)
                return i

            yield job

    it = prefetch(gen(), depth=3)
    for k, v in enumerate(it):
        assert v == k
        # the consumer holds item k; at most `depth` more have been taken
        assert len(taken) <= k + 1 + 3
    assert max_seen[0] <= 3
    assert taken == list(range(20))


def test_prefetch_errors_and_early_close(store):
    arr, data = store

    def boom():
        raise RuntimeError("boom")

    it = prefetch([lambda: 1, boom, lambda: 3], depth=2)
    assert next(it) == 1
    with pytest.raises(RuntimeError, match="boom"):
        next(it)
    with pytest.raises(TypeError):
        list(prefetch([42]))
    with pytest.raises(ValueError):
        list(prefetch([], depth=-1))
    # Closing early waits for reads in flight: nothing writes after close().
    done = []

    def slow(i):
        def f():
            time.sleep(0.05)
            done.append(i)
            return i
        return f

    it = prefetch((slow(i) for i in range(10)), depth=3)
    assert next(it) == 0
    it.close()
    n = len(done)
    time.sleep(0.2)
    assert len(done) == n <= 4


def test_executor_per_process(store):
    arr, data = store
    read_crops_async(arr, random_starts(0), CROP).result(timeout=60)
    ex = _async.executor()
    assert _async.executor() is ex
    r, w = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:
        code = 1
        try:
            ok = _async.executor() is not ex
            got = read_crops_async(arr, random_starts(3), CROP).result(timeout=60)
            ok = ok and np.array_equal(got, crops(data, random_starts(3)))
            ok = ok and [x.shape for x in prefetch([(arr, random_starts(4), CROP)] * 3)] == [(6, *CROP)] * 3
            code = 0 if ok else 3
        except BaseException:
            code = 4
        finally:
            os._exit(code)
    os.close(w)
    os.close(r)
    end = time.monotonic() + 120
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > end:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("child hung")
        time.sleep(0.01)
    assert os.waitstatus_to_exitcode(status) == 0
    assert _async.executor() is ex

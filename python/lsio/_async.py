"""Background reads: :func:`read_crops_async` and :func:`prefetch`.

Both run on one small thread pool per process, created on first use and created afresh
when ``os.getpid()`` changes (a forked child never touches its parent's pool, whose threads
do not exist there). Until the first background read, importing lsio starts no thread; once
the pool exists, forking prints Python 3.12+'s multi-threaded-fork DeprecationWarning like
any other thread pool would.

``read_crops_async(arr, starts, shape, out=None)`` returns a ``concurrent.futures.Future``
(``.result()``, ``.done()``, ``asyncio.wrap_future(fut)`` in async code).

``prefetch(batches, depth=2)`` yields the results of ``batches`` in order while the next
``depth`` are read in the background::

    specs = ((arr, rng.integers(0, hi, (32, 3)), (4, 64, 64)) for _ in range(100))
    for batch in lsio.prefetch(specs, depth=2):
        train_step(batch)
"""

from __future__ import annotations

import collections
import concurrent.futures
import os
import threading
from typing import Any, Iterable, Iterator, Optional, Sequence

import numpy as np

__all__ = ["read_crops_async", "prefetch", "executor"]

_lock = threading.Lock()
_executor: Optional[concurrent.futures.ThreadPoolExecutor] = None
_executor_pid = -1


def _max_workers() -> int:
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - non-Linux
        n = os.cpu_count() or 1
    return max(2, min(8, n))


def _after_fork_in_child() -> None:
    # The parent's lock may have been held by another thread at fork time; the parent's
    # pool threads do not exist here. Abandon both, never shut the pool down.
    global _lock, _executor, _executor_pid
    _lock = threading.Lock()
    _executor = None
    _executor_pid = -1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def executor() -> concurrent.futures.ThreadPoolExecutor:
    """This process's background-read pool (created on first use, per process)."""
    global _executor, _executor_pid
    pid = os.getpid()
    ex = _executor
    if ex is not None and _executor_pid == pid:
        return ex
    with _lock:
        if _executor is None or _executor_pid != pid:
            _executor = concurrent.futures.ThreadPoolExecutor(
                max_workers=_max_workers(), thread_name_prefix="lsio-async"
            )
            _executor_pid = pid
        return _executor


def read_crops_async(
    arr: Any,
    starts: "np.ndarray | Sequence[Sequence[int]]",
    shape: Sequence[int],
    out: Optional[np.ndarray] = None,
) -> "concurrent.futures.Future[np.ndarray]":
    """``arr.read_crops(starts, shape, out)`` on a background thread; returns a Future.

    ``starts`` is copied now, so the caller may reuse its buffer at once; ``out`` (if
    given) must not be touched until the future is done. Errors (bounds, dtype, I/O) are
    raised by ``.result()``.
    """
    st = np.array(starts, copy=True)
    shp = tuple(shape)
    return executor().submit(arr.read_crops, st, shp, out)


def _run(item: Any) -> Any:
    if callable(item):
        return item()
    if isinstance(item, tuple) and len(item) in (3, 4):
        arr, starts, shape = item[:3]
        out = item[3] if len(item) == 4 else None
        return arr.read_crops(starts, shape, out)
    raise TypeError(
        "prefetch() items must be callables or (array, starts, shape[, out]) tuples, "
        f"got {type(item).__name__}"
    )


def prefetch(batches: Iterable[Any], depth: int = 2) -> Iterator[Any]:
    """Yield the result of each item of ``batches``, in order, reading ahead in the background.

    An item is a zero-argument callable (its return value is yielded) or a tuple
    ``(array, starts, shape)`` / ``(array, starts, shape, out)``, read with
    ``array.read_crops``. While the consumer holds one result, at most ``depth`` further
    items have been taken from ``batches`` and are being read, so memory stays bounded
    (``depth=0`` reads each item only when asked). An item's exception is raised when its
    turn comes. Closing the generator early cancels the reads not yet started and waits for
    those running, so no ``out`` buffer is written after the loop has ended.
    """
    depth = int(depth)
    if depth < 0:
        raise ValueError(f"depth must be >= 0, got {depth}")
    it = iter(batches)
    if depth == 0:
        for item in it:
            yield _run(item)
        return
    ex = executor()
    pending: "collections.deque[concurrent.futures.Future]" = collections.deque()
    exhausted = False

    def fill() -> None:
        nonlocal exhausted
        while not exhausted and len(pending) < depth:
            try:
                item = next(it)
            except StopIteration:
                exhausted = True
                return
            pending.append(ex.submit(_run, item))

    try:
        fill()
        while pending:
            fut = pending.popleft()
            try:
                result = fut.result()
            finally:
                fill()  # keep `depth` reads in flight while the consumer works
            yield result
            result = None
    finally:
        for f in pending:
            f.cancel()
        concurrent.futures.wait(list(pending))

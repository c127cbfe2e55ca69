"""Opt-in progress bars for long reads (needs ``tqdm``: ``pip install tqdm``, or lsio's ``progress`` extra).

>>> import lsio.progress
>>> x = lsio.progress.read(arr, (slice(None), slice(0, 4096)))      # like arr.read(key)
>>> b = lsio.progress.read_crops(arr, starts, (4, 256, 256))         # like arr.read_crops

Results are identical to :meth:`lsio.Array.read` / :meth:`~lsio.Array.read_crops`; the
read is split into pieces aligned to the chunk grid (so no chunk is read twice) and the
bar, drawn with ``tqdm.auto`` on stderr, advances per piece. Bars are never drawn inside
worker processes (DataLoader, multiprocessing); there the functions just read.
"""

from __future__ import annotations

import multiprocessing
import sys
from contextlib import contextmanager
from typing import Any, Iterator, Optional, Sequence

import numpy as np

from .array import Array

__all__ = ["read", "read_crops", "bar", "in_worker"]

_MAX_PIECES = 200


def in_worker() -> bool:
    """True inside a multiprocessing child (where no bar is drawn)."""
    try:
        return multiprocessing.parent_process() is not None
    except Exception:  # noqa: BLE001
        return False


class _NullBar:
    def update(self, n: float = 1) -> None:
        pass

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        pass

    def close(self) -> None:
        pass


@contextmanager
def bar(total: Optional[float] = None, desc: Optional[str] = None, enable: Optional[bool] = True, **kwargs: Any) -> Iterator[Any]:
    """A tqdm bar on stderr, or a do-nothing stand-in.

    ``enable=True`` requires tqdm (ImportError with an install hint otherwise);
    ``enable=None`` draws a bar only if tqdm is installed and stderr is a terminal;
    ``enable=False`` never draws. No bar is drawn in worker processes.
    """
    b: Any = _NullBar()
    if enable is not False and not in_worker():
        try:
            from tqdm.auto import tqdm
        except ImportError:
            if enable:
                raise ImportError("progress bars need tqdm: pip install tqdm (or lsio[progress])") from None
            tqdm = None
        if tqdm is not None and (enable or (sys.stderr is not None and sys.stderr.isatty())):
            kwargs.setdefault("file", sys.stderr)
            kwargs.setdefault("dynamic_ncols", True)
            b = tqdm(total=total, desc=desc, **kwargs)
    try:
        yield b
    finally:
        b.close()


def read(arr: Array, key: Any = (), out: Optional[np.ndarray] = None, *, desc: Optional[str] = None, enable: Optional[bool] = True) -> np.ndarray:
    """``arr.read(key, out)`` with a progress bar (in bytes)."""
    out, view, (starts, counts, steps), _ = arr._prepare_read(key, out)
    if view is None:
        return out
    native = arr._native()
    pieces = _pieces(starts, counts, steps, arr.chunks)
    axis = pieces[0]
    with bar(total=out.nbytes, desc=desc or "read", enable=enable, unit="B", unit_scale=True, unit_divisor=1024) as b:
        for lo, hi in pieces[1]:
            st, ct = list(starts), list(counts)
            if axis is not None:
                st[axis] = starts[axis] + lo * steps[axis]
                ct[axis] = hi - lo
                sub = view[(slice(None),) * axis + (slice(lo, hi),)]
            else:
                sub = view
            native.read_into(st, ct, list(steps), sub)
            b.update(sub.nbytes)
    return out


def _pieces(starts: Sequence[int], counts: Sequence[int], steps: Sequence[int], chunks: Sequence[int]):
    """Split along the outermost axis spanning several chunks, at chunk boundaries.

    Returns (axis or None, [(lo, hi), ...]) in selected-element indices along ``axis``.
    """
    for d, (s, c, k, ch) in enumerate(zip(starts, counts, steps, chunks)):
        last = s + (c - 1) * k
        if c > 1 and s // ch != last // ch:
            bounds = [0]
            i = 0
            while i < c:
                # first selected element in the next chunk along d
                nxt_chunk_start = ((s + i * k) // ch + 1) * ch
                j = -(-(nxt_chunk_start - s) // k)
                i = min(c, j)
                bounds.append(i)
            # merge into at most _MAX_PIECES pieces
            n = len(bounds) - 1
            stride = -(-n // _MAX_PIECES)
            kept = bounds[::stride]
            if kept[-1] != c:
                kept.append(c)
            return d, list(zip(kept[:-1], kept[1:]))
    return None, [(0, 1)]


def read_crops(
    arr: Array,
    starts: Any,
    shape: Sequence[int],
    out: Optional[np.ndarray] = None,
    *,
    batch: Optional[int] = None,
    desc: Optional[str] = None,
    enable: Optional[bool] = True,
) -> np.ndarray:
    """``arr.read_crops(starts, shape, out)`` with a progress bar (in crops).

    The crops are read ``batch`` at a time (default: about 1% of them, at least 1);
    chunks shared by crops of different batches are read once per batch.
    """
    st = np.asarray(starts)
    n = int(st.shape[0]) if st.ndim == 2 else 0
    if out is None:
        out = np.empty((n, *tuple(int(s) for s in shape)), dtype=arr.dtype)
    # validates everything (bounds, dtype, out) on the first batch; an empty read checks all
    arr.read_crops(st[:0] if st.ndim == 2 else st, shape, out=out[:0] if out.ndim else out)
    if st.ndim != 2 or n != out.shape[0]:
        return arr.read_crops(st, shape, out=out)
    if batch is None:
        batch = max(1, n // 100)
    with bar(total=n, desc=desc or "crops", enable=enable, unit="crop") as b:
        for i in range(0, n, batch):
            arr.read_crops(st[i : i + batch], shape, out=out[i : i + batch])
            b.update(min(batch, n - i))
    return out

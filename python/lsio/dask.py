"""dask adapter: lazy dask arrays that read through lsio (imports dask).

>>> import lsio, lsio.dask
>>> x = lsio.open("weather.zarr/t2m").to_dask()          # chunks = the shard grid
>>> x[:, :100].mean().compute()

``to_dask`` calls ``dask.array.from_array`` with chunks aligned to the shard grid (the chunk
grid if unsharded), an empty numpy ``meta``, ``lock=False`` (lsio reads are thread-safe) and
``fancy=False`` (lsio supports basic indexing only). Task names come from
``Array.__dask_tokenize__`` so they are deterministic. ``dask.array.from_array(arr)`` works
on an :class:`lsio.Array` directly too (it has ``shape``, ``dtype``, ``ndim``, ``chunks``
and ``__getitem__``); pass ``fancy=False`` and ``lock=False`` there as well.

Each dask task calls the engine once; the engine itself uses ``threads`` workers, so with
dask's threaded scheduler consider ``lsio.open(..., threads=1)`` to avoid oversubscription.
"""

from __future__ import annotations

from typing import Any

import numpy as np

try:
    import dask.array as da
except ImportError as e:  # the optional dependency: say how to get it
    raise ImportError(f"lsio's dask adapter (Array.to_dask, lsio.dask) needs dask: pip install 'dask[array]' "
                      f"(or pip install 'lsio[dask]'); importing it failed: {e}") from e

__all__ = ["to_dask", "default_chunks"]


def default_chunks(arr: Any) -> tuple:
    """The shard shape of ``arr`` (its chunk shape if unsharded), clipped to the array."""
    block = arr.shards if arr.shards is not None else arr.chunks
    return tuple(max(1, min(int(b), int(s))) if s else 1 for b, s in zip(block, arr.shape))


def to_dask(arr: Any, chunks: Any = None, **kwargs: Any) -> "da.Array":
    """A lazy ``dask.array.Array`` over the :class:`lsio.Array` ``arr``.

    ``chunks=None`` uses :func:`default_chunks` (whole shards per task); other values are
    passed to ``dask.array.from_array`` unchanged, except ``"auto"``, which picks
    multiples of the shard shape (dask's ``previous_chunks``). Extra ``kwargs`` go to ``from_array`` too.
    """
    if chunks is None:
        chunks = default_chunks(arr)
    elif isinstance(chunks, str) and chunks == "auto":
        from dask.array.core import normalize_chunks

        chunks = normalize_chunks("auto", arr.shape, dtype=arr.dtype, previous_chunks=default_chunks(arr))
    kwargs.setdefault("lock", False)
    kwargs.setdefault("fancy", False)
    kwargs.setdefault("asarray", False)
    kwargs.setdefault("meta", np.empty((0,) * arr.ndim, dtype=arr.dtype))
    if "name" not in kwargs:
        from dask.base import tokenize

        kwargs["name"] = "lsio-" + tokenize(arr, chunks)
    return da.from_array(arr, chunks=chunks, **kwargs)

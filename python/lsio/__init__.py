"""lsio: light-speed reads of crops from sharded Zarr v3 arrays into numpy.

>>> import lsio
>>> arr = lsio.open("weather.zarr/t2m")
>>> arr[0, 100:356, 200:456]                       # numpy basic indexing
>>> arr.read_crops(starts, (4, 256, 256))          # a batch of same-shape crops

The C++ engine plans each call as a whole: shard indexes are fetched once and cached, inner
chunks shared by several crops are read and decoded once, nearby byte ranges are merged,
and every chunk is decoded straight into its final place in the output where the layout
allows. Importing lsio or opening an array starts no threads and opens no files beyond
``zarr.json``.

Exploration: ``lsio.open_group(path)`` lists a group's members, ``arr.to_dask()`` gives a
dask array, ``xr.open_dataset(path, engine="lsio")`` an xarray Dataset, ``lsio.progress``
reads with a progress bar, and ``python -m lsio info|bench|verify`` is the command line.
Beyond Zarr, ``lsio.read_ranges`` reads many byte ranges of files or objects in one call,
and ``lsio.safetensors`` loads checkpoints with it.
These adapters import their frameworks only when used.
"""

from __future__ import annotations

from . import _core
from .array import Array
from ._open import open
from ._async import prefetch
from .group import Group, open_group, open_icechunk
from ._strings import StringArray
from ._ranges import read_ranges
from .errors import (
    BoundsError,
    CorruptDataError,
    Error,
    FormatError,
    StorageError,
    NotFoundError,
    PermissionDeniedError,
    UnsupportedError,
)

__version__ = "0.1.0"

# `from __future__ import annotations` (above) binds `annotations` here: not part of the API.
del annotations

__all__ = [
    "Array",
    "StringArray",
    "open",
    "Group",
    "open_group",
    "open_icechunk",
    "prefetch",
    "read_ranges",
    "io_backend_info",
    "cache_info",
    "cache_clear",
    "close_files",
    "Error",
    "FormatError",
    "UnsupportedError",
    "CorruptDataError",
    "StorageError",
    "NotFoundError",
    "PermissionDeniedError",
    "BoundsError",
]


def io_backend_info() -> dict:
    """What ``io="auto"`` resolves to in this process, and why.

    Returns a dict with ``"auto"`` (``"uring"`` or ``"pread"``), ``"uring_available"``
    (bool) and ``"reason"`` (why io_uring cannot be used here; empty when it can).
    """
    return dict(_core.io_backend_info())


def cache_info() -> dict:
    """Use of the decoded-chunk cache (``lsio.open(..., chunk_cache_bytes=N)``), one per process.

    Returns a dict: ``capacity`` (bytes: the largest ``chunk_cache_bytes`` any array has read
    with since the last :func:`cache_clear`), ``bytes`` (held now: decoded chunks plus about 128 bytes per entry), ``entries``,
    and since the process started ``hits``, ``misses``, ``inserts`` and ``evictions``. A
    forked child starts with an empty cache.
    """
    return dict(_core.cache_info())


def close_files() -> None:
    """Closes the local files lsio keeps open between reads in this process (its descriptor
    cache), and with them the mappings that hot reads decode from (``io="auto"``). Pages a
    mapping touched stay in the process's page tables, where ``posix_fadvise(DONTNEED)`` and
    ``drop_caches`` cannot drop them: call this first to measure cold reads, or before
    unmounting a file system. Later reads reopen the files (arrays stay usable)."""
    _core.close_files()


def cache_clear() -> None:
    """Drops every chunk held by the decoded-chunk cache and resets its capacity to 0; the
    next read of an array opened with ``chunk_cache_bytes`` sets it again. Counters stay."""
    _core.cache_clear()

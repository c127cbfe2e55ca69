"""Exception classes raised by lsio.

Each class derives from :class:`lsio.Error` and from the builtin a caller would naturally
catch, so ``except ValueError`` and ``except lsio.Error`` both work. Errors raised while
reading carry, where known, the attributes ``path`` (the file), ``chunk`` (the chunk's
grid coordinates) and ``byte_range`` ((start, end) in that file); the message names them too.
"""

from __future__ import annotations

__all__ = [
    "Error",
    "FormatError",
    "UnsupportedError",
    "CorruptDataError",
    "StorageError",
    "BoundsError",
]


class Error(Exception):
    """Base class of every lsio error."""

    path: str | None = None
    chunk: str | None = None
    byte_range: tuple[int, int] | None = None


class FormatError(Error, ValueError):
    """The array's metadata (zarr.json) is malformed."""


class UnsupportedError(FormatError, NotImplementedError):
    """The store is valid Zarr but uses a feature lsio does not support yet."""


class CorruptDataError(Error, ValueError):
    """Stored data is corrupt: bad shard index, checksum mismatch, undecodable chunk."""


class StorageError(Error, OSError):
    """An I/O operation failed (``errno`` and ``filename`` are set when known)."""


class BoundsError(Error, IndexError):
    """A selection or crop lies outside the array."""

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
    "NotFoundError",
    "PermissionDeniedError",
    "BoundsError",
]

import errno as _errno


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
    """An I/O operation failed (``errno`` and ``filename`` are set when known).

    A missing file, object or array is a :class:`NotFoundError` (also a
    ``FileNotFoundError``), a refused permission a :class:`PermissionDeniedError` (also a
    ``PermissionError``), so ``except FileNotFoundError`` works as with zarr-python and
    xarray."""

    def __str__(self) -> str:
        # The message names the file already; OSError would append ": '<filename>'" again.
        if self.errno is not None and self.strerror is not None:
            return f"[Errno {self.errno}] {self.strerror}"
        return super().__str__()


class NotFoundError(StorageError, FileNotFoundError):
    """The file, object, array or group does not exist."""


class PermissionDeniedError(StorageError, PermissionError):
    """The storage refused access (permissions, credentials)."""


def storage_error(code: int, message: str, filename: "str | None" = None) -> StorageError:
    """The StorageError subclass ``code`` (an errno) calls for, with the message and file."""
    cls = {_errno.ENOENT: NotFoundError, _errno.EACCES: PermissionDeniedError,
           _errno.EPERM: PermissionDeniedError}.get(code, StorageError)
    return cls(code, message) if filename is None else cls(code, message, filename)


class BoundsError(Error, IndexError):
    """A selection or crop lies outside the array."""

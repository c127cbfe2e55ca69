"""Node metadata for groups, listings and string arrays, read by the engine.

``_core.read_node`` (lsio/node.h) reads a node's metadata files through a store, once:
``zarr.json``, or Zarr v2's ``.zarray`` / ``.zgroup`` with ``.zattrs`` (and ``.zmetadata``),
translated to the v3 form in C++ (cpp/src/zarr/node.cc says how). It returns a dict:
``node_type``, ``zarr_format``, ``metadata`` (the v3 form), ``consolidated`` (members from
consolidated metadata, or None) and ``files`` (what was read; ``lsio.open`` hands them to the
engine so that an array's metadata is not read twice). This module only says where to read
from: a local directory, or the shared store of the process's remote context for a URL
(lsio._remote), which refreshes its credentials and is looked up again in a forked or
unpickled process.
"""

from __future__ import annotations

import errno
import os
import warnings
from typing import Any, Dict, Optional

from . import _core
from ._remote import Handle as _Handle
from .errors import FormatError, StorageError, UnsupportedError, storage_error

__all__ = ["LocalNodes", "RemoteNodes", "missing"]


def missing(path: str, where: str) -> StorageError:
    """The error for a path holding no node metadata."""
    err = storage_error(errno.ENOENT, f"no zarr.json (or Zarr v2 .zarray / .zgroup) at {path!r}: "
                       "not a Zarr group or array", where)
    err.path = where  # type: ignore[attr-defined]
    return err


class LocalNodes:
    """Node access for a group in a local directory."""

    remote = False

    def join(self, base: str, name: str) -> str:
        return os.path.join(base, name)

    def basename(self, path: str) -> str:
        return os.path.basename(path.rstrip(os.sep)) or path

    def read(self, path: str, v2_consolidated: bool = True) -> dict:
        """The node at ``path`` (StorageError ENOENT when there is none)."""
        node = _core.read_node(path, "", v2_consolidated)
        if node is None:
            raise missing(path, os.path.join(path, "zarr.json"))
        return node

    def list_children(self, path: str) -> Dict[str, dict]:
        """Members found by listing the directory: name -> node metadata."""
        try:
            entries = sorted(os.scandir(path), key=lambda e: e.name)
        except OSError as e:
            raise storage_error(e.errno, f"cannot list group {path!r}: {e.strerror}", path) from None
        children: Dict[str, dict] = {}
        for entry in entries:
            if entry.is_dir() and any(os.path.isfile(os.path.join(entry.path, f))
                                      for f in ("zarr.json", ".zarray", ".zgroup")):
                try:
                    children[entry.name] = self.read(entry.path, False)["metadata"]
                except (FormatError, UnsupportedError) as e:
                    _not_listed(entry.path, e)  # malformed, or not a node lsio reads: not a member
        return children

    def array_options(self) -> Dict[str, Any]:
        return {}


def _not_listed(path: str, e: Exception) -> None:
    """A directory with node metadata lsio cannot read is left out of its group's listing,
    with a warning naming it and why (opening it by name raises the error itself)."""
    warnings.warn(f"lsio: {path!r} is left out of its group's members: {e}", UserWarning, stacklevel=4)


class UrlPaths:
    """Node paths below a root named by a URL or reference file (``self.display``): '/'-joined."""

    display: str

    def join(self, base: str, name: str) -> str:
        return base.rstrip("/") + "/" + name

    def basename(self, path: str) -> str:
        return path.rstrip("/").rsplit("/", 1)[-1]

    def rel(self, path: str) -> str:
        """``path`` relative to the root ("" for the root itself)."""
        return path[len(self.display):].strip("/") if path.startswith(self.display) else ""


class RemoteNodes(UrlPaths):
    """Node access for a group behind a URL (S3, GCS, HTTP)."""

    remote = True

    def __init__(self, url: str, storage_options: Optional[dict]) -> None:
        self.url = url.rstrip("/")
        self.storage_options = dict(storage_options or {})
        self._handle = _Handle(self.url, self.storage_options)
        ctx = self._handle.get()  # validates the URL and options now
        self.display = ctx.display.rstrip("/")
        self.listable = ctx.config.list_root is not None

    def __getstate__(self) -> dict:
        return {"url": self.url, "storage_options": self.storage_options}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["url"], state["storage_options"])  # type: ignore[misc]

    def store(self) -> Any:
        return self._handle.get().store()

    def read(self, path: str, v2_consolidated: bool = True) -> dict:
        store = self.store()
        rel = self.rel(path)
        node = _core.read_node(store, rel, v2_consolidated)
        if node is None:
            raise missing(path, store.location(f"{rel}/zarr.json" if rel else "zarr.json"))
        return node

    def list_children(self, path: str) -> Dict[str, dict]:
        if not self.listable:
            raise UnsupportedError(
                f"cannot list the members of remote group {path!r}: HTTP cannot list and the group "
                "has no consolidated metadata (write it with zarr.consolidate_metadata, or open "
                "members by name: group['t2m'])"
            )
        # S3/GCS: the "directories" below the group (ListObjectsV2), then each one's metadata.
        children: Dict[str, dict] = {}
        for name in self.store().list_children(self.rel(path)):
            try:
                children[name] = self.read(self.join(path, name), False)["metadata"]
            except (FormatError, UnsupportedError, StorageError) as e:
                if isinstance(e, StorageError) and e.errno != errno.ENOENT:
                    raise
                if not isinstance(e, StorageError):
                    _not_listed(self.join(path, name), e)  # malformed: said, not a member
                continue  # not a node (no metadata): not a member
        return children

    def array_options(self) -> Dict[str, Any]:
        return {"storage_options": self.storage_options}

"""Variable-length string arrays: Zarr v3 ``string`` (``vlen-utf8`` codec) and Zarr v2 object
arrays with the ``vlen-utf8`` filter, as zarr-python writes them.

Their elements have no fixed size, so they do not go through the engine's crop path. The
engine's ``_core.StringArray`` (lsio/strings.h) takes the node metadata read by
``_core.read_node`` (v2 translated to the v3 form there), builds chunk keys from the chunk key
encoding and reads and decodes whole chunks through the store; a :class:`StringArray` picks
the chunks a selection touches (on the calling thread) and returns numpy ``StringDType``
arrays equal to zarr-python's. Enough for string coordinates and labels; unsharded arrays
only (sharded ones raise UnsupportedError).

``lsio.open`` returns a StringArray for such arrays, and the xarray backend and groups use it
like :class:`lsio.Array` (``shape``, ``dtype``, ``chunks``, ``attrs``, ``dimension_names``,
``fill_value``, ``arr[key]``, ``arr.read(key)``, ``np.asarray(arr)``; no ``read_crops``).
"""

from __future__ import annotations

import itertools
import json
import operator
import os
from typing import Any, Optional, Tuple

import numpy as np

from . import _core, _storage
from ._hdf5 import typed_attrs as _typed
from ._nodes import LocalNodes, RemoteNodes
from ._remote import Handle as _Handle
from .errors import BoundsError

__all__ = ["StringArray", "is_vlen_string"]


def _string_dtype() -> np.dtype:
    sd = getattr(np.dtypes, "StringDType", None) if hasattr(np, "dtypes") else None
    return np.dtype(sd()) if sd is not None else np.dtype(object)  # numpy < 2: object arrays


def is_vlen_string(meta: dict) -> bool:
    """Whether node metadata (the v3 form, from _core.read_node) is a variable-length string
    array."""
    return meta.get("node_type") == "array" and meta.get("data_type") == "string"


class StringArray:
    """A variable-length string array (see the module docstring). Create with :func:`lsio.open`."""

    def __init__(self, path: str, meta: dict, metadata_location: str, storage_options: Optional[dict] = None,
                 references: Optional[dict] = None) -> None:
        """``path``: the array's directory or URL; ``meta``: its node metadata (v3 form);
        ``metadata_location``: the file it came from (named in errors). ``references``: the
        spec (lsio/_kerchunk.py) when ``path`` is a node inside references, a NetCDF/HDF5 file
        or an Icechunk repository, whose chunks are read through a view of them."""
        self._refs = references
        self._refs_prefix = ""
        self._refs_handle: Any = None  # kept alive while reading (credentials refresh)
        self._refs_store: Any = None
        if references is not None:
            from . import _kerchunk  # noqa: PLC0415

            self._refs_prefix = _kerchunk.prefix_of(str(path), references)
        remote = references is None and _storage.is_remote(path)
        self._url = path if remote else None
        self._storage_options = storage_options
        self._handle = _Handle(path, dict(storage_options or {})) if self._url is not None else None
        self._path = (str(path) if references is not None else self._handle.get().display if self._handle is not None
                      else _storage.local_path(path))
        self._meta_json = json.dumps(meta)
        self._meta_location = metadata_location
        self._native_obj: Any = None
        self._native_key: Any = None
        native = self._native()  # checks the metadata now
        self.zarr_format = int(meta.get("zarr_format", 3))
        self.shape = tuple(native.shape)
        self.chunks = tuple(native.chunks)
        self._fill = native.fill_value
        self.codecs = native.codecs
        attrs = meta.get("attributes")
        self._attrs = attrs if isinstance(attrs, dict) else {}
        dims = meta.get("dimension_names")
        self._dimension_names = dims if isinstance(dims, list) and len(dims) == len(self.shape) else None
        self.dtype = _string_dtype()

    def _native(self) -> Any:
        """The engine's array, over the store of this process's remote context (rebuilt when
        that changes: in a forked child; credentials are refreshed in the shared store)."""
        source: Any = self._path
        if self._refs is not None:
            key0 = (os.getpid(), "refs")
            if self._native_obj is not None and self._native_key == key0:
                return self._native_obj
            from . import _kerchunk  # noqa: PLC0415

            view, self._refs_handle, self._refs_store = _kerchunk.open_view(self._refs, self._refs_prefix, {})
            self._native_obj = _core.StringArray(view, self._meta_json, self._meta_location)
            self._native_key = key0
            return self._native_obj
        if self._handle is not None:
            source = self._handle.get().store()
        key = (os.getpid(), id(source))
        if self._native_obj is None or self._native_key != key:
            self._native_obj = _core.StringArray(source, self._meta_json, self._meta_location)
            self._native_key = key
        return self._native_obj

    # -- metadata ---------------------------------------------------------------------------

    @property
    def path(self) -> str:
        return self._path

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def shards(self) -> None:
        return None

    @property
    def attrs(self) -> dict:
        return _typed(self._attrs)

    @property
    def dimension_names(self) -> Optional[Tuple[Optional[str], ...]]:
        return None if self._dimension_names is None else tuple(self._dimension_names)

    @property
    def fill_value(self) -> Any:
        return np.array(self._fill, dtype=self.dtype)[()]

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __repr__(self) -> str:
        return f"<lsio.StringArray {self._path!r} shape={self.shape} chunks={self.chunks} {self.codecs}>"

    def __reduce__(self):
        if self._refs is not None:
            return (_reopen_in_references, (self._path, json.loads(self._meta_json), self._meta_location, self._refs))
        return (_reopen, (self._url or self._path, self._storage_options))

    def close(self) -> None:
        pass

    # -- reading ----------------------------------------------------------------------------

    def _where(self, key: str) -> str:
        """The path or URL of chunk key ``key``."""
        return self._native().location(key)

    def _chunk(self, coords) -> np.ndarray:
        """Chunk `coords` as a full-size array in C order (missing: the fill value)."""
        chunk = self._stored_chunk(coords)
        return np.full(self.chunks, self._fill, dtype=self.dtype) if chunk is None else chunk

    def chunk_keys(self):
        """``(coords, key)`` of every chunk of the grid, in C order (keys from the engine's
        chunk key encoding, relative to the array)."""
        native = self._native()
        grid = [-(-s // c) for s, c in zip(self.shape, self.chunks)]
        for coords in itertools.product(*(range(g) for g in grid)):
            yield coords, native.chunk_key(coords)

    def _stored_chunk(self, coords) -> Optional[np.ndarray]:
        """Chunk `coords` decoded, or None when it is not stored (``lsio verify`` tells
        missing chunks from stored ones; a read fills them). Errors name the chunk's file."""
        items = self._native().read_chunk(tuple(coords))
        if items is None:
            return None
        return np.array(items, dtype=self.dtype).reshape(self.chunks)

    def _index(self, key) -> Tuple[list, Tuple[int, ...]]:
        """numpy basic indexing: per array dimension the selected indices (numpy array), and
        the result's shape (integer-indexed dimensions dropped, a length-1 axis per ``None``
        where the key has it)."""
        if not isinstance(key, tuple):
            key = (key,)
        ellipses = [j for j, k in enumerate(key) if k is Ellipsis]
        if len(ellipses) > 1:
            raise IndexError("an index can only have a single ellipsis ('...')")
        named = sum(1 for k in key if k is not None and k is not Ellipsis)  # array axes the key names
        if named > self.ndim:
            raise IndexError(f"too many indices for array: array is {self.ndim}-dimensional, "
                             f"but {named} were indexed")
        if ellipses:
            i = ellipses[0]
            key = key[:i] + (slice(None),) * (self.ndim - named) + key[i + 1:]
        else:
            key = key + (slice(None),) * (self.ndim - named)
        idx, out_shape = [], []
        d = 0  # the array dimension the next entry other than None indexes
        for k in key:
            if k is None:
                out_shape.append(1)
                continue
            n = self.shape[d]
            if isinstance(k, slice):
                idx.append(np.arange(n)[k])
                out_shape.append(len(idx[-1]))
            else:
                # numpy reads a bool as a mask (advanced indexing), not as 0 / 1
                if isinstance(k, (bool, np.bool_)):
                    raise TypeError(f"lsio.StringArray takes ints, slices, ... and None, got {k!r}")
                try:
                    i = operator.index(k)
                except TypeError:
                    raise TypeError(f"lsio.StringArray takes ints, slices, ... and None, got {k!r}") from None
                if not -n <= i < n:
                    raise BoundsError(f"index {i} is out of bounds for axis {d} with size {n}")
                idx.append(np.array([i % n]))
            d += 1
        return idx, tuple(out_shape)

    def read(self, key: Any = ()) -> np.ndarray:
        idx, result_shape = self._index(key)
        out_shape = tuple(len(i) for i in idx)
        out = np.full(out_shape, self._fill, dtype=self.dtype)
        if all(out_shape):
            per_dim = [sorted(set((i // c).tolist())) for i, c in zip(idx, self.chunks)]
            for coords in itertools.product(*per_dim):
                chunk = self._chunk(coords)
                # Positions of the selection inside this chunk, and where they go in `out`.
                sel_src, sel_dst = [], []
                for d, c in enumerate(coords):
                    lo = c * self.chunks[d]
                    mask = (idx[d] >= lo) & (idx[d] < lo + self.chunks[d])
                    sel_dst.append(np.nonzero(mask)[0])
                    sel_src.append(idx[d][mask] - lo)
                out[np.ix_(*sel_dst)] = chunk[np.ix_(*sel_src)]
        # Basic indexing keeps the key's order of axes, so dropping the integer-indexed ones
        # and inserting the None ones is a reshape.
        return out.reshape(result_shape)

    def __getitem__(self, key: Any) -> Any:
        """``arr[key]`` as numpy indexes the whole array: an integer for every dimension (and
        nothing else: no slice, ``...`` or ``None``; on a 0-d array the key ``()``) gives the
        element itself, a ``str``; any other key an array. ``read(key)`` always returns an
        array (the xarray backend relies on that)."""
        out = self.read(key)
        parts = key if isinstance(key, tuple) else (key,)
        if len(parts) == self.ndim and not any(k is None or k is Ellipsis or isinstance(k, slice) for k in parts):
            return out[()]
        return out

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        a = self.read(())
        return a if dtype is None else a.astype(dtype)


def open_string_array(path: str, node: dict, storage_options: Optional[dict] = None) -> StringArray:
    """A StringArray for the array at `path` (local directory or URL) whose node (a
    _core.read_node dict) is `node`."""
    return StringArray(path, node["metadata"], node["files"][0]["location"], storage_options)


def _reopen_in_references(path: str, meta: dict, location: str, spec: dict) -> StringArray:
    # References, NetCDF/HDF5 files and Icechunk snapshots do not change under a spec (a
    # version is part of it, or it is read again): the metadata travels.
    return StringArray(path, meta, location, references=spec)


def _reopen(path: str, storage_options: Optional[dict]) -> StringArray:
    nodes: Any = RemoteNodes(path, storage_options) if _storage.is_remote(path) else LocalNodes()
    where = nodes.display if nodes.remote else _storage.local_path(path)
    return open_string_array(path, nodes.read(where, False), storage_options)

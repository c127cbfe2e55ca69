"""Variable-length string arrays: Zarr v3 ``string`` (``vlen-utf8`` codec) and Zarr v2 object
arrays with the ``vlen-utf8`` filter, as zarr-python writes them.

Their elements have no fixed size, so they do not go through the engine's crop path: a
:class:`StringArray` reads the whole chunks a selection touches on the calling thread, each
decoded by the engine's codecs and vlen-utf8 parser (``_core.decode_vlen_utf8``, lsio/strings.h),
and returns numpy ``StringDType`` arrays equal to zarr-python's. Enough for string
coordinates and labels; unsharded arrays only (sharded ones raise UnsupportedError).

``lsio.open`` returns a StringArray for such arrays, and the xarray backend and groups use it
like :class:`lsio.Array` (``shape``, ``dtype``, ``chunks``, ``attrs``, ``dimension_names``,
``fill_value``, ``arr[key]``, ``arr.read(key)``, ``np.asarray(arr)``; no ``read_crops``).
"""

from __future__ import annotations

import itertools
import json
import operator
import os
from typing import Any, Callable, Optional, Tuple

import numpy as np

from . import _core, _storage
from .errors import BoundsError, CorruptDataError, FormatError, StorageError, UnsupportedError

__all__ = ["StringArray", "is_vlen_string"]


def _string_dtype() -> np.dtype:
    sd = getattr(np.dtypes, "StringDType", None) if hasattr(np, "dtypes") else None
    return np.dtype(sd()) if sd is not None else np.dtype(object)  # numpy < 2: object arrays


def is_vlen_string(meta: dict) -> bool:
    """Whether node metadata (zarr.json, or a v2 node dict from lsio.group) is a
    variable-length string array."""
    if meta.get("node_type") != "array":
        return False
    if meta.get("zarr_format") == 2:
        filters = meta.get("filters") or []
        return meta.get("dtype") == "|O" and any(isinstance(f, dict) and f.get("id") == "vlen-utf8" for f in filters)
    return meta.get("data_type") == "string"


def _codec_name(c: Any) -> str:
    return c if isinstance(c, str) else (c.get("name") if isinstance(c, dict) else str(c))


class StringArray:
    """A variable-length string array (see the module docstring). Create with :func:`lsio.open`."""

    def __init__(self, path: str, meta: dict, get: Callable[[str], Optional[bytes]], where: Callable[[str], str],
                 url: Optional[str] = None, storage_options: Optional[dict] = None) -> None:
        self._path = path
        self._url = url
        self._storage_options = storage_options
        self._get = get
        self._where = where
        self._meta = meta
        self.zarr_format = int(meta.get("zarr_format", 3))
        md = self._where("zarr.json" if self.zarr_format == 3 else ".zarray")
        try:
            self.shape = tuple(int(s) for s in meta["shape"])
            if self.zarr_format == 3:
                grid = meta["chunk_grid"]
                if grid.get("name") != "regular":
                    raise UnsupportedError(f"{md}: chunk grid {grid.get('name')!r} is not supported by lsio")
                self.chunks = tuple(int(c) for c in grid["configuration"]["chunk_shape"])
                codecs = list(meta["codecs"])
                if not codecs or _codec_name(codecs[0]) != "vlen-utf8":
                    names = [_codec_name(c) for c in codecs]
                    if "sharding_indexed" in names:
                        raise UnsupportedError(f"{md}: sharded variable-length strings are not supported by lsio yet")
                    raise UnsupportedError(f"{md}: string array with codecs {names}: lsio reads vlen-utf8 strings")
                self._codecs = codecs[1:]
                cke = meta.get("chunk_key_encoding") or {"name": "default"}
                cfg = cke.get("configuration") or {}
                self._v2_keys = cke.get("name") == "v2"
                self._sep = cfg.get("separator", "." if self._v2_keys else "/")
                self._order = "C"
                fill = meta.get("fill_value")
                self._dimension_names = meta.get("dimension_names")
                self._attrs = meta.get("attributes") or {}
            else:
                self.chunks = tuple(int(c) for c in meta["chunks"])
                filters = list(meta.get("filters") or [])
                if [f.get("id") for f in filters] != ["vlen-utf8"]:
                    raise UnsupportedError(f"{md}: object array with filters {filters}: lsio reads vlen-utf8 strings")
                comp = meta.get("compressor")
                self._codecs = [] if comp is None else [_v2_compressor_as_v3(comp, md)]
                self._v2_keys = True
                self._sep = meta.get("dimension_separator") or "."
                self._order = meta.get("order", "C")
                fill = meta.get("fill_value")
                self._attrs = meta.get("attributes") or {}
                dims = self._attrs.get("_ARRAY_DIMENSIONS")
                self._dimension_names = dims if isinstance(dims, list) and len(dims) == len(self.shape) else None
        except (KeyError, TypeError, ValueError) as e:
            if isinstance(e, FormatError):
                raise
            raise FormatError(f"{md}: malformed string array metadata ({type(e).__name__}: {e})") from None
        if len(self.chunks) != len(self.shape) or any(c < 1 for c in self.chunks):
            raise FormatError(f"{md}: chunks {self.chunks} do not fit shape {self.shape}")
        self._fill = "" if fill is None else str(fill)
        self._codecs_json = json.dumps(self._codecs)
        self.dtype = _string_dtype()

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
        return dict(self._attrs)

    @property
    def dimension_names(self) -> Optional[Tuple[Optional[str], ...]]:
        return None if self._dimension_names is None else tuple(self._dimension_names)

    @property
    def fill_value(self) -> Any:
        return np.array(self._fill, dtype=self.dtype)[()]

    @property
    def codecs(self) -> str:
        return "vlen-utf8" + ("[" + ", ".join(_codec_name(c) for c in self._codecs) + "]" if self._codecs else "")

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __repr__(self) -> str:
        return f"<lsio.StringArray {self._path!r} shape={self.shape} chunks={self.chunks} {self.codecs}>"

    def __reduce__(self):
        return (_reopen, (self._url or self._path, self._storage_options))

    def close(self) -> None:
        pass

    # -- reading ----------------------------------------------------------------------------

    def _key(self, coords) -> str:
        if self._v2_keys:
            return self._sep.join(str(c) for c in coords) if coords else "0"
        return "c" + "".join(self._sep + str(c) for c in coords) if coords else "c"

    def _chunk(self, coords) -> np.ndarray:
        """Chunk `coords` as a full-size array in C order (missing: the fill value)."""
        chunk = self._stored_chunk(coords)
        return np.full(self.chunks, self._fill, dtype=self.dtype) if chunk is None else chunk

    def chunk_keys(self):
        """``(coords, key)`` of every chunk of the grid, in C order (``key`` relative to the
        array: what ``_get`` and ``_where`` take)."""
        grid = [-(-s // c) for s, c in zip(self.shape, self.chunks)]
        for coords in itertools.product(*(range(g) for g in grid)):
            yield coords, self._key(coords)

    def _stored_chunk(self, coords) -> Optional[np.ndarray]:
        """Chunk `coords` decoded, or None when it is not stored (``lsio verify`` tells
        missing chunks from stored ones; a read fills them)."""
        n = int(np.prod(self.chunks, dtype=np.int64))
        key = self._key(coords)
        stored = self._get(key)
        if stored is None:
            return None
        try:
            items = _core.decode_vlen_utf8(self._codecs_json, stored, n)
        except (CorruptDataError, FormatError) as e:  # name the chunk and its file
            err = type(e)(f"{e} [chunk {tuple(coords)}, file {self._where(key)!r}, bytes [0, {len(stored)})]")
            err.path = self._where(key)  # type: ignore[attr-defined]
            raise err from None
        flat = np.array(items, dtype=self.dtype)
        return flat.reshape(self.chunks, order="F" if self._order == "F" else "C")

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


def _v2_compressor_as_v3(comp: dict, where: str) -> dict:
    """A v2 compressor as the v3 bytes -> bytes codec the engine runs (see metadata_v2.cc)."""
    cid = comp.get("id")
    if cid == "zstd":
        return {"name": "zstd", "configuration": {"level": int(comp.get("level") or 0), "checksum": False}}
    if cid in ("gzip", "zlib"):
        return {"name": "gzip", "configuration": {"level": min(9, max(0, int(comp.get("level") or 1)))}}
    if cid == "lz4":
        return {"name": "numcodecs.lz4", "configuration": {}}
    if cid == "blosc":
        # Only the keys the .zarray gives: a null one (numcodecs keeps None) stays out, as in
        # metadata_v2.cc, instead of reaching the codec's validation; decoding needs none.
        config = {k: comp[k] for k in ("cname", "clevel", "blocksize") if comp.get(k) is not None}
        if comp.get("shuffle") is not None:
            config["shuffle"] = {0: "noshuffle", 2: "bitshuffle"}.get(comp["shuffle"], "shuffle")
        return {"name": "blosc", "configuration": {**config, "typesize": 1}}
    raise UnsupportedError(f"{where}: compressor {cid!r} is not supported by lsio yet")


def open_string_array(path: str, meta: dict, storage_options: Optional[dict] = None) -> StringArray:
    """A StringArray for the array at `path` (local directory or URL) whose node metadata is
    `meta` (lsio.group's reading of zarr.json or .zarray)."""
    if isinstance(path, str) and _storage.is_remote(path):
        from .group import _RemoteNodes

        nodes = _RemoteNodes(path, storage_options)
        # Through the context at every call, not one store kept: its credentials are
        # refreshed there, and a forked child gets a store of its own.
        return StringArray(nodes.display, meta, lambda key: nodes.store().get(key),
                           lambda key: nodes.store().location(key), url=path, storage_options=storage_options)
    from .group import _read_file

    root = _storage.local_path(path)

    def get(key: str) -> Optional[bytes]:
        return _read_file(os.path.join(root, *key.split("/")))

    return StringArray(root, meta, get, lambda key: os.path.join(root, *key.split("/")))


def _reopen(path: str, storage_options: Optional[dict]) -> StringArray:
    from .group import _RemoteNodes, _read_json

    if isinstance(path, str) and _storage.is_remote(path):
        nodes = _RemoteNodes(path, storage_options)
        meta = nodes.read_json(nodes.display)
    else:
        meta = _read_json(path)
    return open_string_array(path, meta, storage_options)

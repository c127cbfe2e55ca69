"""xarray backend: ``xr.open_dataset(store, engine="lsio")`` (imports xarray).

Registered through the ``xarray.backends`` entry point as ``lsio``. Opens a Zarr v3 group's
arrays as lazy variables whose reads go through lsio:

- dimension names come from each array's ``dimension_names`` (or the ``_ARRAY_DIMENSIONS``
  attribute); a 1-D array named like its dimension becomes that dimension's coordinate;
- attributes are the arrays' and the group's; CF decoding (``scale_factor``, ``_FillValue``,
  times, ``coordinates``) is xarray's, as with ``engine="zarr"``: for Zarr v3 the array's
  ``fill_value`` is kept in ``encoding["fill_value"]`` and not used as a mask; record
  (structured) variables are never masked (xarray would make them objects): their
  ``_FillValue`` and ``missing_value`` go to ``encoding``;
- ``encoding`` holds ``chunks`` (read chunks), ``shards`` and ``preferred_chunks`` (the shard
  grid), so ``chunks={}`` gives dask arrays with one task per shard, and the codecs as
  xarray's zarr backend gives them (v3: ``compressors``, ``filters``, ``serializer``; v2:
  ``compressors``, ``filters`` as numcodecs codecs), so ``ds.to_zarr(other)`` writes the same
  codecs and levels. As with ``xr.open_zarr``, writing another Zarr format than the source's
  needs those keys dropped (zarr-python takes v3 codecs for v3 only, numcodecs for v2 only).

Keyword arguments: ``group`` (a subgroup path), ``consolidated`` (see
:func:`lsio.open_group`), ``threads``, ``io`` and ``storage_options`` (see :func:`lsio.open`;
the path may be an ``s3://``, ``gs://`` or ``http(s)://`` URL), plus xarray's usual
decoders and ``drop_variables``. The path may also name a single array, which becomes a
one-variable dataset. Arrays lsio cannot read raise unless listed in ``drop_variables``.

The path may also be an Icechunk repository (a local one is recognised; for a URL pass
``backend_kwargs={"icechunk": {}}``): ``icechunk={"branch": ..., "tag": ..., "snapshot": ...,
"virtual_chunk_containers": {...}}`` picks the snapshot as :func:`lsio.open_icechunk` does;
``group`` a group inside it. kerchunk references and NetCDF4/HDF5 files open the same way.

The backend does not claim stores on its own (``guess_can_open`` is False): ask for it
with ``engine="lsio"``.
"""

from __future__ import annotations

import os
from typing import Any, Iterable, Optional

import numpy as np
from xarray.backends import BackendArray, BackendEntrypoint
from xarray.backends.common import AbstractDataStore
from xarray.backends.store import StoreBackendEntrypoint
from xarray.core import indexing
from xarray.core.utils import FrozenDict
from xarray.core.variable import Variable

from .array import Array
from . import _storage
from ._nodes import LocalNodes, RemoteNodes
from ._strings import StringArray, is_vlen_string
from .errors import UnsupportedError
from .group import Group, group_from

__all__ = ["LsioBackendEntrypoint", "LsioBackendArray", "LsioStore"]

DIMENSION_KEY = "_ARRAY_DIMENSIONS"


class LsioBackendArray(BackendArray):
    """A lazily indexed lsio array (basic indexing); thread-safe and picklable."""

    __slots__ = ("array", "shape", "dtype")

    def __init__(self, array: Array) -> None:
        self.array = array
        self.shape = tuple(array.shape)
        self.dtype = np.dtype(array.dtype)
        if self.dtype.fields is not None and self.dtype != self.dtype.newbyteorder("="):
            # (isnative does not look inside subarray fields)
            # Records with fields in the other byte order (Zarr v2): in native order, as xarray
            # makes other arrays native (its own endianness decoding fails on records).
            self.dtype = self.dtype.newbyteorder("=")

    def __getitem__(self, key: indexing.ExplicitIndexer) -> np.ndarray:
        return indexing.explicit_indexing_adapter(
            key, self.shape, indexing.IndexingSupport.BASIC, self._raw_indexing_method
        )

    def _raw_indexing_method(self, key: tuple) -> np.ndarray:
        out = self.array.read(key)
        return out if out.dtype == self.dtype else out.astype(self.dtype)


def _dims(name: str, arr: Array, attrs: dict) -> tuple:
    names = arr.dimension_names
    from_attr = attrs.pop(DIMENSION_KEY, None)
    if names is None and isinstance(from_attr, (list, tuple)) and len(from_attr) == arr.ndim:
        names = tuple(from_attr)
    if names is None:
        names = (None,) * arr.ndim
    return tuple(n if n is not None else f"{name}_dim_{i}" for i, n in enumerate(names))


def _codec_encoding(meta: Optional[dict], arr: Array) -> dict:
    """The codec keys of a variable's ``encoding``, as xarray's zarr backend sets them, so
    ``to_zarr`` writes the codecs (and levels) the store has: Zarr v3 ``compressors``,
    ``filters`` and ``serializer`` (zarr-python codec objects; those inside the shards for a
    sharded array), v2 ``compressors`` and ``filters`` (numcodecs codecs, as zarr-python 3
    takes them for v2). Empty when zarr-python is not installed or does not know a codec
    (``to_zarr`` then uses its defaults, as before)."""
    if not meta:
        return {}
    try:
        if int(meta.get("zarr_format", 3)) == 2:
            return _v2_codec_encoding(meta.get("codecs") or [], arr.codecs)
        from zarr.abc.codec import ArrayArrayCodec, ArrayBytesCodec, BytesBytesCodec
        from zarr.codecs.sharding import ShardingCodec
        from zarr.core.metadata.v3 import parse_codecs

        codecs = parse_codecs(meta.get("codecs") or [])
        if len(codecs) == 1 and isinstance(codecs[0], ShardingCodec):
            codecs = codecs[0].codecs  # what zarr-python's Array.compressors etc. report
        serializer = [c for c in codecs if isinstance(c, ArrayBytesCodec)]
        return {
            "compressors": tuple(c for c in codecs if isinstance(c, BytesBytesCodec)),
            "filters": tuple(c for c in codecs if isinstance(c, ArrayArrayCodec)),
            **({"serializer": serializer[0]} if serializer else {}),
        }
    except Exception:  # noqa: BLE001 - encoding is a hint for writing; reading must not fail on it
        return {}


# Codecs of a v2 array in the engine's v3 form (cpp/src/zarr/metadata_v2.cc) -> numcodecs ids.
_V2_FILTERS = {"lsio.v2.delta": "delta", "numcodecs.shuffle": "shuffle"}
_V2_SHUFFLE = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}


def _v2_codec_encoding(codecs: list, description: str) -> dict:
    """numcodecs compressor and filters of a v2 array from its v3-form codec list."""
    import numcodecs

    filters = []
    compressor = None
    for c in codecs:
        name = c if isinstance(c, str) else c.get("name")
        cfg = dict(c.get("configuration") or {}) if isinstance(c, dict) else {}
        if name in ("bytes", "transpose"):
            continue  # the serializer, and order="F"
        if name in _V2_FILTERS:
            filters.append(numcodecs.get_codec({"id": _V2_FILTERS[name], **cfg}))
        elif name == "zstd":
            compressor = numcodecs.get_codec({"id": "zstd", **cfg})
        elif name == "gzip":  # v2 gzip and zlib are both read by the gzip codec
            zlib = "zlib" in description.rsplit(",", 1)[-1]
            compressor = numcodecs.get_codec({"id": "zlib" if zlib else "gzip", **cfg})
        elif name == "blosc":
            cfg.pop("typesize", None)  # numcodecs takes it from the data
            if "shuffle" in cfg:
                cfg["shuffle"] = _V2_SHUFFLE[cfg["shuffle"]]
            compressor = numcodecs.get_codec({"id": "blosc", **cfg})
        elif name == "numcodecs.lz4":
            compressor = numcodecs.get_codec({"id": "lz4", **cfg})
        else:
            raise ValueError(f"no numcodecs codec for {name!r}")
    return {"compressors": () if compressor is None else (compressor,), "filters": tuple(filters)}


def _decode_fill_attr(value: Any, dtype: np.dtype) -> Any:
    try:
        from xarray.backends.zarr import FillValueCoder

        return FillValueCoder.decode(value, dtype)
    except Exception:  # noqa: BLE001 - fall back to the JSON value
        return value


class LsioStore(AbstractDataStore):
    """A read-only xarray data store over an lsio group (or a single array)."""

    def __init__(self, arrays: "dict[str, Array]", attrs: dict, metas: Optional[dict] = None) -> None:
        self._arrays = arrays
        self._attrs = attrs
        # Each array's node metadata (zarr.json, or a v2 .zarray's keys): v2 fill values.
        self._metas = metas or {}

    @classmethod
    def open(
        cls,
        path: "str | os.PathLike[str]",
        *,
        group: Optional[str] = None,
        consolidated: Optional[bool] = None,
        drop_variables: Optional[Iterable[str]] = None,
        storage_options: Optional[dict] = None,
        remote_options: Optional[dict] = None,
        remote_protocol: Optional[str] = None,
        icechunk: Optional[dict] = None,
        **options: Any,
    ) -> "LsioStore":
        parts = [p for p in (group or "").split("/") if p]
        nodes: Any
        from . import _icechunk, _kerchunk  # noqa: PLC0415 - loaded when used

        if icechunk is not None or _icechunk.is_icechunk(path):
            # An Icechunk repository (lsio/_icechunk.py) at one snapshot: icechunk={"branch": ...,
            # "tag": ..., "snapshot": ..., "virtual_chunk_containers": {...}}.
            if remote_options is not None or remote_protocol is not None:
                raise ValueError("remote_options and remote_protocol apply to kerchunk reference files")
            unknown = set(icechunk or {}) - {"branch", "tag", "snapshot", "virtual_chunk_containers"}
            if unknown:
                raise ValueError(f"icechunk= takes branch, tag, snapshot and virtual_chunk_containers, not "
                                 f"{sorted(unknown)}")
            nodes = _kerchunk.ReferenceNodes(_icechunk.spec_for(path, storage_options=storage_options,
                                                                **(icechunk or {})))
            root = "/".join([nodes.display, *parts])
            options.update(nodes.array_options())
        elif _kerchunk.is_references(path):
            # kerchunk references (lsio/_kerchunk.py): arrays carry the reference spec.
            nodes = _kerchunk.ReferenceNodes(_kerchunk.spec_for(path, storage_options, remote_options,
                                                                remote_protocol))
            root = "/".join([nodes.display, *parts])
            options.update(nodes.array_options())
        elif remote_options is not None or remote_protocol is not None:
            raise ValueError("remote_options and remote_protocol apply to kerchunk reference files")
        elif isinstance(path, str) and _storage.is_remote(path):
            root = "/".join([path.rstrip("/"), *parts])
            nodes = RemoteNodes(root, storage_options)
            root = nodes.display
            options["storage_options"] = storage_options
        else:
            if storage_options is not None:
                raise ValueError("storage_options apply to URLs (s3://, gs://, http(s)://), not to local paths")
            root = os.path.join(_storage.local_path(path), *parts)
            nodes = LocalNodes()
        drop = set([drop_variables] if isinstance(drop_variables, str) else (drop_variables or ()))
        node = nodes.read(root, consolidated is not False)
        meta = node["metadata"]
        if node["node_type"] == "array":
            name = nodes.basename(root)
            url = nodes.url if nodes.remote else root
            if name in drop:
                arrays = {}
            elif is_vlen_string(meta):
                arrays = {name: StringArray(url, meta, node["files"][0]["location"], options.get("storage_options"),
                                            references=options.get("_references"))}
            else:
                arrays = {name: Array(url, **options, _files=node["files"])}
            return cls(arrays, {}, {name: meta})
        # The group's zarr.json is the one read above, not fetched again.
        g: Group = group_from(nodes, root, node, consolidated,
                               {k: v for k, v in options.items() if k not in ("storage_options", "_references")})
        names = [n for n in g.array_names if n not in drop]
        arrays = {}
        for n in names:
            try:
                arrays[n] = g[n]
            except UnsupportedError as e:
                # Say how to open the rest of the dataset.
                err = UnsupportedError(f"variable {n!r}: {e} (open the dataset without it: "
                                       f"xr.open_dataset(..., engine='lsio', drop_variables=[{n!r}]))")
                err.path = getattr(e, "path", None)  # type: ignore[attr-defined]
                raise err from e
        return cls(arrays, g.attrs, {n: g.member_metadata(n) for n in names})

    def open_store_variable(self, name: str, arr: Array) -> Variable:
        attrs = dict(arr.attrs)
        dims = _dims(name, arr, attrs)
        data = indexing.LazilyIndexedArray(LsioBackendArray(arr))
        block = arr.shards if arr.shards is not None else arr.chunks
        encoding = {
            "chunks": tuple(arr.chunks),
            "shards": None if arr.shards is None else tuple(arr.shards),
            "preferred_chunks": dict(zip(dims, (int(b) for b in block))),
            "fill_value": arr.fill_value,
            "source": arr.path,
            **_codec_encoding(self._metas.get(name), arr),
        }
        if arr.dtype.fields is not None:
            # Records: xarray's CF masking would turn them into objects; their fill value and
            # missing value (an HDF5 compound variable's _FillValue) go to encoding, unapplied.
            for k in ("_FillValue", "missing_value"):
                if k in attrs:
                    encoding[k] = attrs.pop(k)
        elif arr.zarr_format == 2:
            # As xarray's zarr backend does for v2: the array's fill value is the variable's
            # _FillValue (CF masking), unless .zarray says null (no fill value).
            if self._metas.get(name, {}).get("fill_value", 0) is not None:
                attrs["_FillValue"] = arr.fill_value
        elif "_FillValue" in attrs and not isinstance(attrs["_FillValue"], (np.generic, np.ndarray)):
            # (a typed value is an HDF5 file's attribute as the file has it: kept as it is)
            attrs["_FillValue"] = _decode_fill_attr(attrs["_FillValue"], arr.dtype)
        return Variable(dims, data, attrs, encoding)

    def get_variables(self) -> FrozenDict:
        return FrozenDict((k, self.open_store_variable(k, a)) for k, a in self._arrays.items())

    def get_attrs(self) -> FrozenDict:
        return FrozenDict((k, v) for k, v in self._attrs.items() if not k.lower().startswith("_nc"))

    def get_dimensions(self) -> FrozenDict:  # pragma: no cover - not used by xarray's decoder
        dims: dict = {}
        for name, var in self.get_variables().items():
            dims.update(zip(var.dims, var.shape))
        return FrozenDict(dims)

    def close(self) -> None:
        """``Dataset.close()``: give back the arrays' descriptors and index caches."""
        for arr in self._arrays.values():
            arr.close()


class LsioBackendEntrypoint(BackendEntrypoint):
    """``engine="lsio"``: Zarr v3 and v2 groups and arrays read through lsio."""

    description = "Open Zarr v3 and v2 groups and arrays with lsio (fast crops, C++ engine)"
    url = "https://github.com/lsio/lsio"
    open_dataset_parameters = (
        "filename_or_obj",
        "mask_and_scale",
        "decode_times",
        "concat_characters",
        "decode_coords",
        "drop_variables",
        "use_cftime",
        "decode_timedelta",
        "group",
        "consolidated",
        "threads",
        "io",
        "storage_options",
        "remote_options",
        "remote_protocol",
        "icechunk",
    )

    def open_dataset(  # type: ignore[override]
        self,
        filename_or_obj: Any,
        *,
        mask_and_scale: bool = True,
        decode_times: Any = True,
        concat_characters: bool = True,
        decode_coords: Any = True,
        drop_variables: Any = None,
        use_cftime: Any = None,
        decode_timedelta: Any = None,
        group: Optional[str] = None,
        consolidated: Optional[bool] = None,
        threads: Optional[int] = None,
        io: Optional[str] = None,
        storage_options: Optional[dict] = None,
        remote_options: Optional[dict] = None,
        remote_protocol: Optional[str] = None,
        icechunk: Optional[dict] = None,
    ) -> Any:
        if not isinstance(filename_or_obj, (str, os.PathLike)):
            raise TypeError(
                f"engine='lsio' opens a local directory path or a URL, got {type(filename_or_obj).__name__}"
            )
        store = LsioStore.open(
            filename_or_obj,
            group=group,
            consolidated=consolidated,
            drop_variables=drop_variables,
            storage_options=storage_options,
            remote_options=remote_options,
            remote_protocol=remote_protocol,
            icechunk=icechunk,
            threads=threads,
            io=io,
        )
        return StoreBackendEntrypoint().open_dataset(
            store,
            mask_and_scale=mask_and_scale,
            decode_times=decode_times,
            concat_characters=concat_characters,
            decode_coords=decode_coords,
            drop_variables=drop_variables,
            use_cftime=use_cftime,
            decode_timedelta=decode_timedelta,
        )

    def guess_can_open(self, filename_or_obj: Any) -> bool:
        return False

"""The lsio arrays behind the variables of an xarray Dataset, and where its view of them lies.

:class:`lsio.grain.CropSource` (so also ``lsio.torch.CropDataset`` and ``GrainCropSource``)
takes an xarray Dataset or DataArray in place of lsio arrays. Its crops must equal what
xarray shows, so each variable is traced through xarray's lazy wrappers down to the stored
array:

- opened with ``engine="lsio"``: the lsio array itself (a new handle on it, so closing the
  Dataset does not close the crop source's arrays);
- opened with ``engine="zarr"`` (``xr.open_zarr``) from a local directory: the same array,
  reopened with lsio at the path zarr-python read it from (store root + array path, so a
  ``group=`` is followed);
- as dask arrays (``chunks={}``, ``open_zarr``'s default): the array dask was built on, when
  nothing was computed on it after ``chunk`` (no ``isel``, rechunk or arithmetic there).

Selections xarray applied lazily (``isel``/``sel`` with slices of step 1, an index list that
is a contiguous ascending run, ``rename``) become a window of the stored array: the view's
offsets and shape, and the Dataset's dimension names. Everything else is refused with
:class:`lsio.UnsupportedError` (a ValueError) naming the variable, never read at the wrong
place: values in memory (built in memory, or loaded by ``.load()``/``.values``, which
xarray caches), values xarray decodes (``scale_factor``/``add_offset``, a ``_FillValue``
mask, times), steps, reversed or reordered indices, dropped or added dimensions,
transposes, other stores and engines.

Imports xarray (only called with xarray objects).
"""

from __future__ import annotations

import os
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from .array import Array
from .errors import UnsupportedError

__all__ = ["View", "resolve"]

_SUPPORTED = ("variables of a Dataset opened from a Zarr store with xr.open_dataset(path, engine='lsio') "
              "(or xr.open_zarr / engine='zarr' on a local directory), lazily (the default) or as dask arrays "
              "(chunks={}), optionally subset with isel/sel slices of step 1")


class View:
    """One variable as lsio reads it: ``array`` (a fresh lsio handle), the Dataset's ``dims``,
    ``shape`` (the view's) and ``offset`` (where the view starts in the stored array)."""

    def __init__(self, name: str, array: Array, dims: Tuple[str, ...], shape: Tuple[int, ...],
                 offset: Tuple[int, ...]) -> None:
        self.name, self.array, self.dims, self.shape, self.offset = name, array, dims, shape, offset


def _refuse(name: str, why: str) -> UnsupportedError:
    return UnsupportedError(f"variable {name!r}: {why}; lsio crops {_SUPPORTED}")


def _fresh(arr: Array) -> Array:
    """A new lazily opened handle on ``arr``'s array with the same options (as unpickled)."""
    new = Array.__new__(Array)
    new.__setstate__(arr.__getstate__())
    return new


def _reopen_zarr(name: str, zarr_array: Any) -> Array:
    """The lsio array at the path zarr-python read ``zarr_array`` from (local stores only)."""
    store_path = getattr(zarr_array, "store_path", None)
    store = getattr(store_path, "store", None)
    root = getattr(store, "root", None)
    if store_path is None or root is None or type(store).__name__ != "LocalStore":
        raise _refuse(name, f"it was opened by zarr-python from a {type(store).__name__} (not a local directory); "
                            f"open remote stores with xr.open_dataset(url, engine='lsio', storage_options=...)")
    path = os.path.join(os.fspath(root), *[p for p in str(store_path.path).split("/") if p])
    return Array(path)


def _dask_source(name: str, data: Any) -> Any:
    """What a dask array made by xarray's ``chunk``/``chunks=`` was built on (the object in its
    ``original-`` layer), provided nothing was computed on it since."""
    layers = dict(getattr(getattr(data, "dask", None), "layers", {}) or {})
    originals = [k for k in layers if str(k).startswith("original-")]
    if len(layers) == 1 and not originals:
        raise _refuse(name, "it is a dask array built with inline_array=True, whose graph does not keep the array "
                            "it reads; open with inline_array=False (the default) or without chunks=")
    if len(layers) != 2 or len(originals) != 1 or data.name not in layers:
        raise _refuse(name, f"it is a dask array computed after chunking ({len(layers)} graph layers: isel/sel, "
                            f"rechunking or arithmetic on the dask array), so lsio cannot tell which stored elements it holds; "
                            f"select on the lazy Dataset instead (open with chunks=None, then isel/sel)")
    values = list(dict(layers[originals[0]]).values())
    if len(values) != 1:
        raise _refuse(name, "its dask graph is not the one xarray builds for a stored variable")
    src = values[0]
    if tuple(getattr(src, "shape", ())) != tuple(data.shape):
        raise _refuse(name, "its dask array does not cover the array it was built on")
    return src


def _contiguous(name: str, dim: str, k: Any, n: int) -> Tuple[int, int]:
    """(start, length) of the window index ``k`` selects along a dimension of length n."""
    if isinstance(k, slice):
        start, stop, step = k.indices(n)
        length = len(range(start, stop, step))
        if step != 1 and length > 1:
            raise _refuse(name, f"dimension {dim!r} is selected with step {step} (a strided or reversed view)")
        return (start if length else 0), length
    if isinstance(k, (int, np.integer)):
        raise _refuse(name, f"dimension {dim!r} was dropped by an integer selection (isel({dim}=i)); keep it "
                            f"with a slice (isel({dim}=slice(i, i + 1)))")
    a = np.asarray(k)
    if a.ndim == 1 and a.dtype.kind in "iu":
        a = np.where(a < 0, a + n, a).astype(np.int64)
        if a.size == 0:
            return 0, 0
        if np.array_equal(a, np.arange(a[0], a[0] + a.size)):
            return int(a[0]), int(a.size)
        raise _refuse(name, f"dimension {dim!r} is selected with indices that are not one ascending run "
                            f"(a list, sortby or reindex): its crops would not be contiguous in the store")
    raise _refuse(name, f"dimension {dim!r} is selected with {type(k).__name__}")


def _trace(name: str, var: Any) -> Tuple[Array, Tuple[int, ...]]:
    """(fresh lsio array, offset of the view in it) behind the xarray Variable ``var``."""
    from xarray.core import indexing

    dims = tuple(str(d) for d in var.dims)
    offset = [0] * len(dims)
    d = var._data
    if type(d).__module__.split(".")[0] == "dask":
        d = _dask_source(name, d)
    for _ in range(64):
        if isinstance(d, (indexing.MemoryCachedArray, indexing.CopyOnWriteArray,
                          indexing.ImplicitToExplicitIndexingAdapter)):
            d = d.array
            continue
        if isinstance(d, indexing.LazilyIndexedArray):
            key = d.key.tuple
            inner = tuple(d.array.shape)
            if len(key) != len(inner) or len(inner) != len(dims):
                if any(isinstance(k, (int, np.integer)) for k in key):
                    raise _refuse(name, "a dimension was dropped by an integer selection (isel(dim=i)); keep it "
                                        "with a slice (isel(dim=slice(i, i + 1)))")
                raise _refuse(name, "a selection dropped or added dimensions")
            for i, (k, n) in enumerate(zip(key, inner)):
                start, _length = _contiguous(name, dims[i], k, n)
                offset[i] += start
            d = d.array
            continue
        break
    else:  # pragma: no cover - xarray never nests this deep
        raise _refuse(name, "too many nested lazy wrappers")
    from .xarray_backend import LsioBackendArray

    if isinstance(d, LsioBackendArray):
        if not isinstance(d.array, Array):  # a variable-length string array
            raise _refuse(name, f"it is a {type(d.array).__name__} (variable-length strings), not a fixed-size "
                                f"numeric array")
        arr = _fresh(d.array)
    elif type(d).__name__ == "ZarrArrayWrapper" and hasattr(d, "get_array"):
        arr = _reopen_zarr(name, d.get_array())
    elif isinstance(d, indexing.LazilyVectorizedIndexedArray):
        raise _refuse(name, "it was transposed or indexed with arrays (a vectorized view); keep the stored "
                            "dimension order")
    elif isinstance(d, (np.ndarray, indexing.NumpyIndexingAdapter, indexing.PandasIndexingAdapter)):
        raise _refuse(name, "its values are in memory (a Dataset built in memory, an index coordinate, or one "
                            "loaded by .load(), .values or .compute(), which xarray keeps): lsio cannot tell "
                            "whether they are still the stored ones; open the store again, and to compute statistics on "
                            "it without keeping values open with cache=False or chunks={}")
    elif type(d).__name__ == "_ElementwiseFunctionArray":
        raise _refuse(name, "xarray decodes its stored values (CF scale_factor/add_offset, a _FillValue mask or "
                            "times): open with mask_and_scale=False / decode_times=False for the stored values, "
                            "and normalise with scale=/offset= instead")
    else:
        raise _refuse(name, f"its values come from a {type(d).__module__}.{type(d).__name__}, which is not a "
                            f"Zarr array lsio can read")
    if len(arr.shape) != len(dims):
        raise _refuse(name, f"its view has {len(dims)} dimensions, the stored array {len(arr.shape)}")
    if np.dtype(arr.dtype).fields is not None and np.dtype(arr.dtype).newbyteorder("=") == np.dtype(var.dtype) \
            and np.dtype(arr.dtype) != np.dtype(var.dtype):
        raise _refuse(name, f"its records are stored with fields in another byte order ({arr.dtype}), which xarray "
                            f"shows native ({var.dtype}) and lsio's crops keep as stored: read them with "
                            f"lsio.open(...).read_crops")
    if np.dtype(arr.dtype) != np.dtype(var.dtype):
        raise _refuse(name, f"xarray shows it as {var.dtype}, stored as {arr.dtype} (decoded values); open with "
                            f"mask_and_scale=False / decode_times=False")
    for i, (o, n, s) in enumerate(zip(offset, var.shape, arr.shape)):
        if o + n > s:  # pragma: no cover - a slice cannot select past the end
            raise _refuse(name, f"its view of dimension {dims[i]!r} ends at {o + n}, past the stored {s}")
    return arr, tuple(offset)


def resolve(obj: Any, variables: Optional[Sequence[str]]) -> Tuple[str, List[View]]:
    """("single", [view]) for a DataArray, ("dict", views by name) for a Dataset
    (``variables``: names of data variables or coordinates; default: every data variable)."""
    if type(obj).__name__ == "DataArray":
        if variables is not None:
            raise ValueError("variables= names variables of a Dataset; a DataArray is one variable already")
        name = str(obj.name) if obj.name is not None else "<unnamed DataArray>"
        pairs = [(name, obj.variable)]
        kind = "single"
    else:
        if isinstance(variables, str):
            raise TypeError(f"variables= is a list of names, got the string {variables!r}")
        names = list(obj.data_vars) if variables is None else list(variables)
        missing = [v for v in names if v not in obj.variables]
        if missing:
            raise ValueError(f"variables {missing} are not in the Dataset (it has {list(obj.variables)})")
        if not names:
            raise ValueError("the Dataset has no data variables; name the ones to crop with variables=[...]")
        pairs = [(str(v), obj.variables[v]) for v in names]
        kind = "dict"
    views = []
    for name, var in pairs:
        arr, offset = _trace(name, var)
        views.append(View(name, arr, tuple(str(d) for d in var.dims), tuple(int(n) for n in var.shape), offset))
    return kind, views

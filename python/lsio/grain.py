"""Random crops from lsio arrays as a Grain data source, without importing Grain.

:class:`GrainCropSource` satisfies Grain's ``RandomAccessDataSource`` protocol
(``__len__``, a thread-safe and deterministic ``__getitem__``, the batched ``_getitems``
that Grain's batch push-down calls, a stable ``__repr__`` for checkpoints) and pickles as
its configuration, so Grain's ``mp_prefetch`` (spawned workers) can use it::

    import grain
    import lsio
    from lsio.grain import GrainCropSource

    src = GrainCropSource({"x": lsio.open("era5.zarr/t2m"), "y": lsio.open("era5.zarr/tp")},
                          crop_shape={"x": (4, 128, 128), "y": (1, 128, 128)},
                          length=100_000, seed=0)
    ds = grain.MapDataset.source(src).shuffle(seed=1).batch(32)

One record is a crop from every array at matching coordinates over the dimensions the
arrays share, by dimension name when they have names (see ``shared_dims``), returned as numpy arrays in the structure the arrays
were given in (one array, a tuple, or a dict). The crop origin of record ``i`` is a pure
function of ``(seed, epoch, i)``, so it does not depend on workers, threads or restarts.
``length`` is virtual: a record costs nothing until it is read, so a long ``length`` (or a
new ``epoch``) gives fresh crops.

:class:`CropSource` is the same thing under a framework-neutral name; ``lsio.torch``
builds its ``CropDataset`` on it. This module imports only numpy and lsio.
"""

from __future__ import annotations

from typing import Any, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from .array import Array
from .group import Group

__all__ = ["CropSource", "GrainCropSource", "with_options", "crop_origins"]

_M64 = (1 << 64) - 1
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_C1 = np.uint64(0xBF58476D1CE4E5B9)
_C2 = np.uint64(0x94D049BB133111EB)


def _is_xarray(obj: Any) -> bool:
    """An xarray Dataset or DataArray (checked without importing xarray)."""
    t = type(obj)
    return t.__module__.split(".")[0] == "xarray" and t.__name__ in ("Dataset", "DataArray")


def with_options(arr: Array, **options: Any) -> Array:
    """A new handle on ``arr``'s array with some open options replaced (e.g. ``threads=1``).

    The handle is built like an unpickled one: lazily, in the process that first reads.
    """
    state = arr.__getstate__()
    config = dict(state["config"])
    for k, v in options.items():
        if k not in config or k == "path":
            raise TypeError(f"unexpected option {k!r}")
        if k == "threads" and v is None:
            v = 0
        config[k] = v
    new = Array.__new__(Array)
    new.__setstate__({**state, "config": config})  # keeps the URL of a remote array
    return new


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on a uint64 array (wrapping arithmetic)."""
    x = (x ^ (x >> np.uint64(30))) * _C1
    x = (x ^ (x >> np.uint64(27))) * _C2
    return x ^ (x >> np.uint64(31))


def _u64(x: Any) -> np.ndarray:
    a = np.asarray(x)
    if a.dtype == object:
        a = np.asarray([int(v) & _M64 for v in a.ravel()], dtype=np.uint64).reshape(a.shape)
    return a.astype(np.int64, copy=False).view(np.uint64) if a.dtype.kind == "i" else a.astype(np.uint64)


def crop_origins(seed: int, epochs: Any, indices: Any, spans: Sequence[int], stream: int = 0) -> np.ndarray:
    """Random crop origins, a pure function of ``(seed, epoch, index, stream, dimension)``.

    Returns int64 ``(N, len(spans))`` with column ``d`` uniform in ``[0, spans[d])``.
    ``epochs`` broadcasts against ``indices``. Counter-based (splitmix64), vectorised.
    """
    idx = _u64(np.atleast_1d(np.asarray(indices, dtype=np.int64)))
    ep = _u64(np.broadcast_to(np.asarray(epochs, dtype=np.int64), idx.shape))
    with np.errstate(over="ignore"):
        s = _mix(np.asarray([int(seed) & _M64], dtype=np.uint64) + _GOLDEN)
        h = _mix(_mix(s ^ ep) ^ (idx + _GOLDEN))
        out = np.empty((idx.shape[0], len(spans)), dtype=np.int64)
        for d, span in enumerate(spans):
            u = _mix(h + _GOLDEN * np.uint64(1 + d + 64 * stream))
            f = (u >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))
            out[:, d] = np.minimum(np.floor(f * span), span - 1).astype(np.int64)
    return out


class CropSource:
    """Records of random crops from one or more lsio arrays (numpy, no framework).

    Parameters
    ----------
    arrays:
        An :class:`lsio.Array`, a sequence of them, or a mapping name -> Array (records have
        the same structure); or an :class:`lsio.Group` with ``variables=[names]`` (records
        are dicts by name); or an xarray Dataset opened from a Zarr store
        (``xr.open_dataset(path, engine="lsio")``, or ``xr.open_zarr`` on a local directory),
        with ``variables=[names]`` (default: its data variables; records are dicts by name),
        or one of its DataArrays (records are arrays). Crops then follow xarray's view: its
        dimension names (after ``rename``), and the window an ``isel``/``sel`` with slices of
        step 1 left (``starts`` are positions in the stored arrays, :attr:`offsets` where
        the window begins). Views lsio cannot reproduce exactly (values in memory or decoded
        by xarray, strides, reordering, dropped dimensions, transposes) raise
        :class:`lsio.UnsupportedError` naming the variable.
    crop_shape:
        One shape for every array, or a sequence / mapping of per-array shapes (matching
        ``arrays``), with one entry per dimension of its array; a ``None`` entry takes the
        whole extent of that dimension. A shape of another length raises ValueError (it is
        not padded: numpy habits say trailing alignment, others leading). Or a mapping
        dimension name -> size (``{"time": 2, "lat": 64, "lon": 64}``) for arrays with
        dimension names: each array takes the sizes of its own dimensions (every one of them
        must be given; None for a whole dimension).
    length:
        Records per epoch (virtual; nothing is read until asked). Required unless
        ``origins`` is given.
    seed, epoch:
        Crop origins are a pure function of ``(seed, epoch, index)``. ``epoch`` is the
        default for integer keys; ``(epoch, index)`` keys override it.
    shared_dims:
        Left at None, arrays whose dimensions all have names (``dimension_names``, or
        xarray's ``_ARRAY_DIMENSIONS`` in Zarr v2) are aligned **by name**: one origin per
        dimension name, so ``t2m(time, lat, lon)`` and a static ``z(lat, lon)`` crop the same
        latitudes and longitudes whatever their dimension order (a name must have one size in
        every array that has it, and an array that shares no name with the others is an
        error). Arrays without names are aligned over their leading dimensions of equal size,
        and two or more arrays that share none is an error. An int aligns that many leading
        dimensions (every array's crop starts at the same coordinates there, with equal
        sizes) and gives the others an independent origin per array; ``shared_dims=0`` crops
        every array independently.
    origins:
        Optional fixed origins, int ``(M, D)``: record ``i`` starts at ``origins[i]`` over
        the aligned dimensions (D = len(:attr:`dims`) when aligned by name, else
        ``shared_dims``) and at 0 elsewhere (e.g. a validation grid); ``length`` defaults to
        ``M`` and ``seed``/``epoch`` are then unused.
    threads:
        When not None, reopen the arrays with this many native threads per read.
    dtype, scale, offset:
        Convert while reading (:meth:`lsio.Array.read_crops`'s ``dtype``/``scale``/
        ``offset``: ``value * scale + offset`` as float32 or float64, computed in the
        engine's copy, so normalising costs no extra pass): one value for every array, or a
        mapping / sequence per array (``scale={"t2m": 1 / 12.5}``; a missing entry reads the
        array as stored).
    stack:
        True: a record is ONE array ``(len(arrays), *crop)`` with the arrays as channels, in
        the order given (every crop shape and output dtype must match); each array is read
        straight into its channel.
    """

    def __init__(
        self,
        arrays: Union[Array, Sequence[Array], Mapping[str, Array]],
        crop_shape: Any,
        *,
        length: Optional[int] = None,
        seed: int = 0,
        epoch: int = 0,
        shared_dims: Optional[int] = None,
        origins: Any = None,
        threads: Optional[int] = None,
        dtype: Any = None,
        scale: Any = None,
        offset: Any = None,
        stack: bool = False,
        variables: Optional[Sequence[str]] = None,
    ) -> None:
        views = None
        if _is_xarray(arrays):
            from ._xarray_views import resolve

            kind, views = resolve(arrays, variables)
            names = None if kind == "single" else [v.name for v in views]
            arrs = [v.array for v in views]
        elif isinstance(arrays, Group):
            if variables is None:
                raise ValueError(f"a group needs variables=[...] naming the arrays to crop; it has "
                                 f"{[n for n, _ in arrays.walk_arrays()]}")
            arrays = {str(v): arrays[v] for v in variables}
        elif variables is not None:
            raise ValueError("variables= names arrays of a group or variables of an xarray Dataset: pass the group "
                             "(lsio.open_group) or the Dataset as arrays")
        if views is not None:
            pass
        elif isinstance(arrays, Array):
            kind, names, arrs = "single", None, [arrays]
        elif isinstance(arrays, Mapping):
            kind, names, arrs = "dict", list(arrays.keys()), list(arrays.values())
        else:
            kind, names, arrs = "tuple", None, list(arrays)
        if not arrs:
            raise ValueError("at least one array is needed")
        for a in arrs:
            if not isinstance(a, Array):
                raise TypeError(f"expected lsio.Array objects, got {type(a).__name__}")
        if threads is not None:
            arrs = [with_options(a, threads=threads) for a in arrs]
        self._kind, self._names, self._arrays = kind, names, arrs
        if views is not None:
            # An xarray Dataset's view: its dimension names, and the window of each stored
            # array it shows (isel/sel); crops are drawn in the window and read offset by it.
            dim_names: List[Any] = [v.dims for v in views]
            shapes = [v.shape for v in views]
            offsets = [v.offset for v in views]
            self._offsets: Optional[List[Tuple[int, ...]]] = (
                None if all(not any(o) and v.shape == tuple(v.array.shape) for o, v in zip(offsets, views))
                else offsets)
        else:
            dim_names = [a.dimension_names for a in arrs]
            shapes = [tuple(a.shape) for a in arrs]
            self._offsets = None
        self._shapes = shapes
        self._by_name = shared_dims is None and all(
            n is not None and all(isinstance(x, str) and x for x in n) and len(set(n)) == len(n) for n in dim_names)
        self._crops = self._crop_shapes(crop_shape, dim_names)
        for s, c in zip(shapes, self._crops):
            if any(ci > si for ci, si in zip(c, s)):
                raise ValueError(f"crop shape {c} is larger than array shape {s}")
        if self._by_name:
            self._align_by_name(dim_names, shapes)
        else:
            self._align_leading(shared_dims, shapes)
        self._transforms = [
            (self._per_array(dtype, j), self._per_array(scale, j), self._per_array(offset, j)) for j in range(len(arrs))]
        self._out_dtypes = [np.dtype(a._transform(*t)[1]) if any(v is not None for v in t) else np.dtype(a.dtype)
                            for a, t in zip(arrs, self._transforms)]
        self._stack = bool(stack)
        if self._stack and (len(set(self._crops)) != 1 or len(set(self._out_dtypes)) != 1):
            raise ValueError(f"stack=True needs one crop shape and one output dtype for every array; got crops "
                             f"{self._crops} and dtypes {[str(d) for d in self._out_dtypes]} (convert with dtype=)")
        if origins is not None:
            o = np.asarray(origins)
            width = len(self._shared_spans)
            if o.dtype.kind not in "iu" or o.ndim != 2 or o.shape[1] != width:
                raise ValueError(f"origins must be an integer array of shape (M, {width})"
                                 + (f": one column per dimension of {self._dims}" if self._by_name else ""))
            o = o.astype(np.int64)
            if o.size and ((o < 0).any() or (o >= np.asarray(self._shared_spans)).any()):
                raise ValueError("origins put crops outside the arrays")
            self._origins: Optional[np.ndarray] = o
            if length is None:
                length = o.shape[0]
            elif length > o.shape[0]:
                raise ValueError(f"length {length} exceeds the {o.shape[0]} origins")
        else:
            self._origins = None
        if length is None:
            raise TypeError("length is required (records per epoch) unless origins are given")
        if int(length) < 0:
            raise ValueError("length must be >= 0")
        self._length = int(length)
        self.seed = int(seed)
        self.epoch = int(epoch)

    def _per_array(self, value: Any, j: int) -> Any:
        """Array j's entry of a per-array option (one value, a mapping by name, a sequence)."""
        if isinstance(value, Mapping):
            if self._names is None or not set(value) <= set(self._names):
                raise ValueError(f"a per-array mapping needs arrays given by name; keys {sorted(value)}")
            return value.get(self._names[j])
        if isinstance(value, (list, tuple)) and self._kind != "single":
            if len(value) != len(self._arrays):
                raise ValueError(f"a per-array sequence needs {len(self._arrays)} entries, got {len(value)}")
            return value[j]
        return value

    def _label(self, j: int) -> str:
        return repr(self._names[j]) if self._names is not None else f"array {j} ({self._arrays[j].path!r})"

    def _align_leading(self, shared_dims: Optional[int], shapes: List[Tuple[int, ...]]) -> None:
        min_nd = min(len(s) for s in shapes)
        if shared_dims is None:
            shared_dims = 0
            while shared_dims < min_nd and len({s[shared_dims] for s in shapes}) == 1:
                shared_dims += 1
            if shared_dims == 0 and len(shapes) > 1:
                # Unrelated crops from every array would be wrong data without a word.
                raise ValueError(
                    f"the arrays share no leading dimension of equal size ({[tuple(s) for s in shapes]}) and not all "
                    f"have dimension names to align by: give them dimension names (Zarr v3 dimension_names, or "
                    f"xarray's _ARRAY_DIMENSIONS), or pass shared_dims=0 to crop every array independently")
        shared_dims = int(shared_dims)
        if not 0 <= shared_dims <= min_nd:
            raise ValueError(f"shared_dims must be in [0, {min_nd}], got {shared_dims}")
        for d in range(shared_dims):
            if len({s[d] for s in shapes}) != 1:
                raise ValueError(f"arrays differ in shared dimension {d}: {[s[d] for s in shapes]}")
        self._shared = shared_dims
        self._dims: Optional[List[str]] = None
        # Spans of valid origins: shared dims limited by the largest crop there.
        self._shared_spans = [min(s[d] - c[d] for s, c in zip(shapes, self._crops)) + 1 for d in range(shared_dims)]
        self._own_spans = [[s[d] - c[d] + 1 for d in range(shared_dims, len(s))] for s, c in zip(shapes, self._crops)]

    def _align_by_name(self, dim_names: List[Tuple[str, ...]], shapes: List[Tuple[int, ...]]) -> None:
        dims: List[str] = []
        size: dict = {}
        for j, (names, shape) in enumerate(zip(dim_names, shapes)):
            for name, n in zip(names, shape):
                if name not in size:
                    dims.append(name)
                    size[name] = (int(n), j)
                elif size[name][0] != int(n):
                    raise ValueError(f"dimension {name!r} has size {size[name][0]} in {self._label(size[name][1])} "
                                     f"and {int(n)} in {self._label(j)}: arrays aligned by name must agree")
        if len(dim_names) > 1:
            for j, names in enumerate(dim_names):
                others = {x for k, n in enumerate(dim_names) if k != j for x in n}
                if not others.intersection(names):
                    raise ValueError(
                        f"{self._label(j)} (dimensions {tuple(names)}) shares no dimension name with the other arrays "
                        f"({sorted(others)}): its crops would be unrelated to theirs; pass shared_dims=0 to crop "
                        f"every array independently")
        self._dims = dims
        self._shared = sum(1 for d in dims if all(d in n for n in dim_names))
        self._shared_spans = [
            min(s[list(n).index(d)] - c[list(n).index(d)] for n, s, c in zip(dim_names, shapes, self._crops) if d in n) + 1
            for d in dims]
        self._columns = [[dims.index(x) for x in n] for n in dim_names]
        self._own_spans = [[] for _ in dim_names]

    def _crop_shapes(self, crop_shape: Any, dim_names: Sequence[Any]) -> List[Tuple[int, ...]]:
        n = len(self._arrays)
        if isinstance(crop_shape, Mapping) and not (self._kind == "dict" and set(crop_shape) == set(self._names)):
            if not self._by_name:
                raise ValueError("a crop_shape mapping must have the same keys as arrays, or, when every array "
                                 "has dimension names, give a size per dimension name")
            per = []
            for j, names in enumerate(dim_names):
                missing = [x for x in names if x not in crop_shape]
                if missing:
                    raise ValueError(f"crop_shape gives no size for dimension(s) {missing} of {self._label(j)} "
                                     f"(None takes a whole dimension)")
                per.append(tuple(crop_shape[x] for x in names))
            unused = set(crop_shape) - {x for names in dim_names for x in names}
            if unused:
                raise ValueError(f"crop_shape names dimension(s) {sorted(unused)} that no array has")
        elif isinstance(crop_shape, Mapping):
            per = [crop_shape[k] for k in self._names]
        elif self._kind != "single" and len(crop_shape) == n and all(
            c is not None and not isinstance(c, (int, np.integer)) for c in crop_shape
        ):
            per = list(crop_shape)
        else:
            per = [crop_shape] * n
        out = []
        for shape, c in zip(self._shapes, per):
            c = tuple(c)
            nd = len(shape)
            if len(c) != nd:
                # No implicit padding: numpy users read a short shape as aligned to the trailing
                # dimensions, others to the leading ones; either guess crops silently wrong.
                raise ValueError(
                    f"crop shape {c} has {len(c)} dimensions, the array {nd} (shape {shape}): give one size "
                    f"per dimension, None for a whole dimension, e.g. {(1,) * (nd - len(c)) + c} or "
                    f"{(None,) * (nd - len(c)) + c}")
            full = tuple(int(shape[d]) if v is None else int(v) for d, v in enumerate(c))
            if any(v < 0 for v in full):
                raise ValueError(f"crop shape {full} has negative entries")
            out.append(full)
        return out

    # -- protocol ---------------------------------------------------------------------------

    def __len__(self) -> int:
        return self._length

    def __repr__(self) -> str:
        arrays = [f"{a.path!r}:{a.shape}:{a.dtype.str}" for a in self._arrays]
        if self._offsets is not None:  # an xarray view: the window of each array it shows
            arrays = [f"{t}[{', '.join(f'{o}:{o + n}' for o, n in zip(off, shape))}]"
                      for t, off, shape in zip(arrays, self._offsets, self._shapes)]
        if self._names is not None:
            arrays = [f"{k}={v}" for k, v in zip(self._names, arrays)]
        origins = "" if self._origins is None else f", origins={self._origins.shape[0]}"
        align = f"dims={self._dims}" if self._by_name else f"shared_dims={self._shared}"
        if any(any(v is not None for v in t) for t in self._transforms):
            align += f", transforms={self._transforms}"
        if self._stack:
            align += ", stack=True"
        return (
            f"{type(self).__name__}(arrays=[{', '.join(arrays)}], crop_shapes={self._crops}, "
            f"length={self._length}, seed={self.seed}, epoch={self.epoch}, "
            f"{align}{origins})"
        )

    def __getstate__(self) -> dict:
        return dict(self.__dict__)

    def __setstate__(self, state: dict) -> None:
        state.setdefault("_by_name", False)  # pickled before alignment by name
        state.setdefault("_dims", None)
        state.setdefault("_stack", False)
        state.setdefault("_offsets", None)  # pickled before xarray views
        if "_shapes" not in state:
            state["_shapes"] = [tuple(a.shape) for a in state["_arrays"]]
        if "_transforms" not in state:
            state["_transforms"] = [(None, None, None)] * len(state["_arrays"])
            state["_out_dtypes"] = [np.dtype(a.dtype) for a in state["_arrays"]]
        self.__dict__.update(state)

    @property
    def arrays(self) -> List[Array]:
        return list(self._arrays)

    @property
    def crop_shapes(self) -> List[Tuple[int, ...]]:
        return list(self._crops)

    @property
    def shared_dims(self) -> int:
        """Dimensions every array's crop shares: leading ones, or (aligned by name) the names
        every array has."""
        return self._shared

    @property
    def out_dtypes(self) -> List[np.dtype]:
        """Per array, the dtype its crops are delivered in (after any conversion)."""
        return list(self._out_dtypes)

    @property
    def stacked(self) -> bool:
        return self._stack

    def batch_shapes(self, n: int) -> List[Tuple[Tuple[int, ...], np.dtype]]:
        """(shape, dtype) of each array a batch of ``n`` records is read into."""
        if self._stack:
            return [((n, len(self._arrays), *self._crops[0]), self._out_dtypes[0])]
        return [((n, *c), d) for c, d in zip(self._crops, self._out_dtypes)]

    @property
    def offsets(self) -> List[Tuple[int, ...]]:
        """Per array, where the crops' coordinates start in the stored array: zeros, except
        for an xarray Dataset subset with ``isel``/``sel`` (the start of its window)."""
        if self._offsets is None:
            return [(0,) * len(s) for s in self._shapes]
        return [tuple(o) for o in self._offsets]

    @property
    def dims(self) -> Optional[List[str]]:
        """The dimension names crops are aligned by (one origin each), or None when the
        arrays are aligned over leading dimensions (``shared_dims``)."""
        return None if self._dims is None else list(self._dims)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def _split_keys(self, keys: Sequence[Any]) -> Tuple[np.ndarray, np.ndarray]:
        """Keys (ints or (epoch, index) pairs) -> (epochs, indices) int64 arrays."""
        if isinstance(keys, np.ndarray) and keys.dtype.kind in "iu" and keys.ndim == 1:
            # Unsigned keys are checked before the cast: 2**64 - 1 would wrap to -1, the last record.
            if keys.dtype.kind == "u" and keys.size and int(keys.max()) >= self._length:
                raise IndexError(f"index {int(keys.max())} out of range for {self._length} records")
            idx = keys.astype(np.int64)
            ep = np.full(idx.shape, self.epoch, dtype=np.int64)
        else:
            ep_l, idx_l = [], []
            for k in keys:
                if isinstance(k, (tuple, list)):
                    e, i = k
                else:
                    e, i = self.epoch, k
                i = int(i)
                if not -self._length <= i < self._length:  # exact: Python ints beyond int64 too
                    raise IndexError(f"index {i} out of range for {self._length} records")
                ep_l.append(int(e))
                idx_l.append(i)
            idx = np.asarray(idx_l, dtype=np.int64).reshape(-1)
            ep = np.asarray(ep_l, dtype=np.int64).reshape(-1)
        if idx.size:
            neg = idx < 0
            if neg.any():
                idx = np.where(neg, idx + self._length, idx)
            if idx.min() < 0 or idx.max() >= self._length:
                bad = int(idx[(idx < 0) | (idx >= self._length)][0])
                raise IndexError(f"index {bad} out of range for {self._length} records")
        return ep, idx

    def starts(self, keys: Sequence[Any]) -> List[np.ndarray]:
        """Per array, the int64 ``(N, ndim)`` crop origins of the records ``keys``, in the
        stored array (what ``read_crops`` is given). For a subset xarray Dataset, subtract
        :attr:`offsets` for positions in the Dataset's view."""
        ep, idx = self._split_keys(keys)
        n = idx.shape[0]
        if self._origins is not None:
            shared = self._origins[idx]
        else:
            shared = crop_origins(self.seed, ep, idx, self._shared_spans, stream=0)
        if self._by_name:
            out = [np.ascontiguousarray(shared[:, cols]) for cols in self._columns]
        else:
            out = []
            for a, (arr, spans) in enumerate(zip(self._arrays, self._own_spans)):
                st = np.zeros((n, arr.ndim), dtype=np.int64)
                st[:, : self._shared] = shared
                if spans and self._origins is None:
                    st[:, self._shared :] = crop_origins(self.seed, ep, idx, spans, stream=1 + a)
                out.append(st)
        if self._offsets is not None:  # origins in an xarray view -> positions in the stored arrays
            out = [st + np.asarray(off, dtype=np.int64) for st, off in zip(out, self._offsets)]
        return out

    def read_batch_arrays(self, keys: Sequence[Any], outs: Optional[Sequence[np.ndarray]] = None) -> List[np.ndarray]:
        """Read the records ``keys`` as one ``(N, *crop)`` array per array: one
        ``read_crops`` call per array (into ``outs[j]`` when given)."""
        starts = self.starts(keys)
        if self._stack:
            n = starts[0].shape[0]
            shape, dt = self.batch_shapes(n)[0]
            out = np.empty(shape, dtype=dt) if outs is None else outs[0]
            for j, (arr, st, crop) in enumerate(zip(self._arrays, starts, self._crops)):
                arr.read_crops(st, crop, out=out[:, j], **self._convert_kwargs(j))
            return [out]
        res = []
        for j, (arr, st, crop) in enumerate(zip(self._arrays, starts, self._crops)):
            res.append(arr.read_crops(st, crop, out=None if outs is None else outs[j], **self._convert_kwargs(j)))
        return res

    def _convert_kwargs(self, j: int) -> dict:
        """read_crops's conversion arguments for array j (none when it is read as stored)."""
        return {k: v for k, v in zip(("dtype", "scale", "offset"), self._transforms[j]) if v is not None}

    def _structure(self, items: Sequence[Any]) -> Any:
        if self._kind == "single" or self._stack:
            return items[0]
        if self._kind == "dict":
            return dict(zip(self._names, items))
        return tuple(items)

    def _flatten(self, structure: Any) -> List[Any]:
        if self._kind == "single" or self._stack:
            return [structure]
        if self._kind == "dict":
            return [structure[k] for k in self._names]
        return list(structure)

    def read_batch(self, keys: Sequence[Any]) -> Any:
        """The records ``keys`` stacked: ``(N, *crop)`` arrays in the arrays' structure."""
        return self._structure(self.read_batch_arrays(keys))

    def __getitem__(self, index: Any) -> Any:
        """Record ``index`` (an int, or an ``(epoch, index)`` pair). Thread-safe."""
        return self._structure([b[0] for b in self.read_batch_arrays([index])])

    def _getitems(self, indices: Sequence[Any]) -> List[Any]:
        """Records ``indices`` as a list, read with one ``read_crops`` call per array."""
        batch = self.read_batch_arrays(list(indices))
        return [self._structure([b[i] for b in batch]) for i in range(len(indices))]

    def __getitems__(self, indices: Sequence[Any]) -> List[Any]:
        return self._getitems(indices)


class GrainCropSource(CropSource):
    """A Grain ``RandomAccessDataSource`` of random crops; see :class:`CropSource`.

    ``len(src)`` is ``length``; ``src[i]`` is record ``i`` of ``epoch`` (numpy arrays),
    deterministic and thread-safe; ``src._getitems(indices)`` reads a batch with one
    ``read_crops`` call per array. The source pickles as its configuration (array paths and
    options), so Grain's multiprocessing workers reopen the arrays themselves; pass
    ``threads=1`` to keep each worker to one native thread.
    """


"""The user-facing :class:`Array` handle (:func:`lsio.open`, in lsio._open, creates it).

Python only normalises arguments here: keys become per-dimension (start, count, step)
selections, ``out`` arrays are checked by the engine before any I/O, and the engine does
all planning, I/O and decoding with the GIL released.

An :class:`Array` pickles as its configuration (path and options). The native object is
rebuilt lazily in the receiving process, and also whenever ``os.getpid()`` changes (a
forked worker), so handles can be passed to DataLoader workers.
"""

from __future__ import annotations

import copy
import json
import operator
import os
from typing import TYPE_CHECKING, Any, Optional, Sequence, Tuple

if TYPE_CHECKING:
    import concurrent.futures

import numpy as np

from . import _core, _dtypes, _options, _storage, _tune
from ._hdf5 import typed_attrs as _typed
from ._remote import Handle as _Handle, ProcessLock as _ProcessLock
from .errors import BoundsError, FormatError

__all__ = ["Array"]

_IO_MODES = ("auto", "uring", "pread")



def _numpy_dtype(info: dict) -> np.dtype:
    """The output dtype of an opened array: its typestr, or for record (structured) types the
    numpy descr the engine parsed (fields in their stored byte order, as zarr-python reads them)."""
    descr = info.get("descr")
    if descr:
        try:
            return _dtypes.record_dtype(json.loads(descr))
        except (TypeError, ValueError) as e:  # a record type the engine accepts and numpy does not
            raise FormatError(f"{info.get('path', '?')}: record dtype {descr} is not one numpy makes ({e})") from None
    return np.dtype(info["typestr"])

class Array:
    """An opened Zarr v3 array. Create with :func:`lsio.open`.

    Reading: ``arr[key]`` and ``arr.read(key, out=None)`` take numpy basic indexing (ints,
    slices with any step, ``...``, ``None``); ``arr.read_crops(starts, shape, out=None)`` reads a
    batch of same-shape crops in one engine call. Safe to use from several threads at once.
    """

    def __init__(self, path: "str | os.PathLike[str]", **options: Any) -> None:
        tune = bool(options.pop("tune", False))
        storage_options = options.pop("storage_options", None)
        # lsio.open read the metadata files already (and, remote, with this store): the
        # first native open takes them instead of reading them again.
        self._first_files: Optional[list] = options.pop("_files", None)
        self._first_store: Any = options.pop("_store", None)
        self._handle: Optional[_Handle] = None
        # kerchunk references (lsio/_kerchunk.py): the node at `path` ("<refs>/t2m") inside them.
        self._refs: Optional[dict] = options.pop("_references", None)
        self._refs_prefix = ""
        self._refs_handle: Optional[_Handle] = None
        if self._refs is not None:
            from . import _kerchunk

            self._refs_prefix = _kerchunk.prefix_of(str(path), self._refs)
            kind, root = _kerchunk.target_location(self._refs, self._refs_prefix)
            if storage_options is not None:
                raise ValueError("storage_options: pass them for the reference file to lsio.open")
            self._config = (_options.resolve_remote(root, options) if kind == "remote"
                            else _options.resolve(root, options))
            self._config["path"] = str(path)
        elif isinstance(path, str) and _storage.is_remote(path):
            self._config = _options.resolve_remote(path, options)
            # Kept as given (not resolved): a worker process re-resolves it, so credentials
            # come from its own environment and a credentials callable is called there.
            self._config["storage_options"] = dict(storage_options or {})
            self._handle = _Handle(path, self._config["storage_options"])
            self._config["path"] = self._handle.get().display
        else:
            self._config = _options.resolve(_storage.local_path(path), options)
        self._url = path if self._handle is not None else None
        self._lock = _ProcessLock()
        self._store: Any = None
        self._native_obj = None
        self._pid = -1
        self._info: Optional[dict] = None
        self._closed = False
        self._native()  # validate the metadata now
        if tune:
            _tune.tune(self._config)
            self._native_obj = None  # rebuilt with the tuned options on first use

    # -- native handle, rebuilt per process -----------------------------------------------

    def _native(self) -> Any:
        if self._closed:
            raise ValueError(f"I/O operation on a closed lsio.Array ({self.path!r}): open it again")
        native = self._native_obj
        if native is not None and self._pid == os.getpid():
            if self._handle is not None:
                self._handle.get().refresh_if_needed()
            elif self._refs_handle is not None:
                self._refs_handle.get().refresh_if_needed()
            return native
        return self._open_native()

    def _open_native(self) -> Any:
        """Builds the native array once per process, however many threads arrive together
        (dask's threaded scheduler first uses an unpickled array from all its threads)."""
        with self._lock:
            pid = os.getpid()
            if self._native_obj is None or self._pid != pid:
                engine = {_options.ENGINE_NAMES.get(k, k): v for k, v in self._config.items()
                          if k not in _options.NOT_ENGINE}
                files, self._first_files = self._first_files, None
                if self._refs is not None:
                    from . import _kerchunk

                    engine.pop("path")
                    view, self._refs_handle, remote_store = _kerchunk.open_view(self._refs, self._refs_prefix,
                                                                                self._config)
                    native = _core.open_references(
                        view, files=files, **{k: v for k, v in engine.items()
                                              if k in ("threads", "max_gap", "max_request", "index_cache_bytes",
                                                       "memory_limit", "cache_bytes", "adaptive_coalescing")})
                    self._store = (view, remote_store)  # alive: the context refreshes its credentials
                elif self._handle is not None:
                    # A store of this array's own (its counters are Array.stats()), built by
                    # the process's context for the URL, which refreshes its credentials. In
                    # a forked child the handle resolves again (its environment, its call).
                    engine.pop("path")
                    store, self._first_store = self._first_store, None
                    if store is None or files is None:
                        store = self._handle.get().new_store()
                    native = _core.open_remote(store, files=files, **engine)
                    # Kept with the native array: the context refreshes only stores that
                    # are alive, and the engine reads through this one.
                    self._store = store
                else:
                    native = _core.open(files=files, **engine)
                if self._info is None:
                    self._set_info(native.info())
                self._native_obj = native
                self._pid = pid
            return self._native_obj

    @property
    def _remote(self) -> Optional["_storage.RemoteConfig"]:
        """The remote configuration in use (credentials as refreshed), None for local arrays."""
        return None if self._handle is None else self._handle.get().config

    def _set_info(self, info: dict) -> None:
        self._info = info
        self._dtype = _numpy_dtype(info)
        self._shape = tuple(int(s) for s in info["shape"])

    def _meta(self) -> dict:
        if self._info is None:
            self._native()
        assert self._info is not None
        return self._info

    def close(self) -> None:
        """Release what this array holds in the process now: its cached file descriptors
        (in lsio's process-wide descriptor cache) and its cached shard indexes. Reading
        afterwards raises ValueError; metadata stays available. ``with lsio.open(...) as a:``
        closes on exit. Idempotent. Pickled copies (DataLoader workers) are independent."""
        native, self._native_obj = self._native_obj, None
        self._store = None
        if native is not None and self._pid == os.getpid():
            native.close()
        self._closed = True

    @property
    def closed(self) -> bool:
        """True after :meth:`close`."""
        return self._closed

    def __enter__(self) -> "Array":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __getstate__(self) -> dict:
        state = {"config": dict(self._config), "url": self._url}
        if self._refs is not None:  # kerchunk references: the file and the node inside them
            state["references"] = self._refs
            state["references_prefix"] = self._refs_prefix
        return state

    def __setstate__(self, state: dict) -> None:
        self._config = dict(state["config"])
        self._url = state.get("url")
        self._refs = state.get("references")
        self._refs_prefix = state.get("references_prefix", "")
        self._refs_handle = None
        # Resolved on first use, in this process (its environment, its credentials call).
        self._handle = None if self._url is None else _Handle(self._url, self._config["storage_options"])
        self._lock = _ProcessLock()
        self._store = None
        self._first_files = None
        self._first_store = None
        self._native_obj = None
        self._pid = -1
        self._info = None
        self._closed = False

    # -- metadata -------------------------------------------------------------------------

    @property
    def path(self) -> str:
        return self._config["path"]

    @property
    def options(self) -> dict:
        """The options in effect (arguments, else environment variables, else defaults).

        ``threads`` 0 means all available CPUs. ``storage`` is the detected storage kind
        that chose the coalescing defaults; ``tuning`` (with ``tune=True``) what was measured;
        ``direct_decision`` (local arrays opened in this process) how ``direct`` reads: ``mode`` ("auto: buffered",
        "auto: direct misses", "on", "off"), ``stored_bytes`` and ``room_bytes`` (the
        estimate and the page cache room it was compared with), ``room_source`` and ``reason``.
        """
        out = {k: v for k, v in self._config.items() if k not in ("path", "explicit", "storage_options")}
        out = copy.deepcopy(out)
        native = self._native_obj
        if "direct" in out and self._refs is None and native is not None and self._pid == os.getpid():
            # What direct= ("auto" above all) chose for this array in this process, and why
            # (decided when the native array opens: absent until then, e.g. after unpickling).
            out["direct_decision"] = dict(native.direct_decision())
        if "storage_options" in self._config:
            # Shown without secrets: keys, tokens, headers and callables are masked.
            out["storage_options"] = _storage.masked_options(self._config["storage_options"])
        return out

    @property
    def shape(self) -> Tuple[int, ...]:
        self._meta()
        return self._shape

    @property
    def dtype(self) -> np.dtype:
        """The element type, always in native byte order (big-endian stores are swapped)."""
        self._meta()
        return self._dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=object)) if self.shape else 1

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def chunks(self) -> Tuple[int, ...]:
        """Shape of the chunks that are read and decoded (inner chunks of a sharded array)."""
        return tuple(int(c) for c in self._meta()["chunks"])

    @property
    def shards(self) -> Optional[Tuple[int, ...]]:
        """Shard shape of a sharded array, else None."""
        s = self._meta()["shards"]
        return None if s is None else tuple(int(c) for c in s)

    @property
    def fill_value(self) -> Any:
        """The fill value as a numpy scalar of :attr:`dtype` (bit-exact, NaN payloads kept)."""
        return np.frombuffer(self._meta()["fill_value"], dtype=self.dtype)[0]

    @property
    def attrs(self) -> dict:
        return _typed(json.loads(self._meta()["attributes_json"]))

    @property
    def dimension_names(self) -> Optional[Tuple[Optional[str], ...]]:
        names = self._meta()["dimension_names"]
        return None if names is None else tuple(names)

    @property
    def codecs(self) -> str:
        """A summary of the codec chain, e.g. ``'sharding_indexed[bytes, zstd]'``."""
        return self._meta()["codecs"]

    @property
    def zarr_format(self) -> int:
        """3 for a Zarr v3 array (``zarr.json``), 2 for a Zarr v2 array (``.zarray``)."""
        return int(self._meta().get("zarr_format", 3))

    @property
    def io_backend(self) -> str:
        """The backend this array's reads use in this process (``pread``, ``uring``, ...;
        ``http`` for remote stores)."""
        return self._native().backend_name()

    def stats(self) -> dict:
        """Counters of this array's store in this process since it was opened: ``requests``
        (HTTP requests, retries included), ``retries``, ``bytes_fetched`` (received),
        ``bytes_used`` (metadata, shard indexes and chunks the reads needed) and ``errors``;
        local arrays report zeros there, and count ``direct_reads`` (reads sent with
        ``O_DIRECT``) and ``page_cache_reads`` (ranges of such files found in the page cache
        and read from it) when they read with ``O_DIRECT`` (``direct=True``, or ``"auto"``
        on an array larger than the page cache room), and ``mapped_reads`` (ranges the page
        cache held, decoded in place from a mapping of the file, with ``io="auto"``)."""
        return dict(self._native().stats())

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __repr__(self) -> str:
        return (
            f"<lsio.Array {self.path!r} shape={self.shape} dtype={self.dtype} "
            f"chunks={self.chunks} shards={self.shards} codecs={self.codecs!r}>"
        )

    def _repr_html_(self) -> str:
        """Jupyter display: metadata plus stored bytes and the share of chunks present."""
        from ._repr import array_html

        return array_html(self)

    # -- dask -----------------------------------------------------------------------------

    def to_dask(self, chunks: Any = None, **kwargs: Any) -> Any:
        """A lazy ``dask.array.Array`` reading through lsio (imports dask).

        ``chunks`` defaults to the shard shape (the chunk shape if unsharded); any value
        ``dask.array.from_array`` accepts works, e.g. ``"auto"`` or ``(1, -1, -1)``.
        ``kwargs`` go to ``from_array`` (e.g. ``name``). See :func:`lsio.dask.to_dask`.
        """
        from .dask import to_dask

        return to_dask(self, chunks=chunks, **kwargs)

    def __dask_tokenize__(self) -> Any:
        """A deterministic dask token: the path, options, and what zarr.json says."""
        meta = self._meta()
        return (
            "lsio.Array",
            tuple(sorted(self._config.items())),
            tuple(self.shape),
            str(self.dtype),
            meta.get("codecs"),
            tuple(meta.get("chunks") or ()),
        )

    # -- reading --------------------------------------------------------------------------

    def __getitem__(self, key: Any) -> np.ndarray:
        return self.read(key)

    def __array__(self, dtype: Any = None, copy: Optional[bool] = None) -> np.ndarray:
        """``np.asarray(arr)``: the whole array in one engine call (as ``arr[...]``), as
        zarr-python and dask arrays do. Without it numpy would still read everything, one
        row per call, through ``len()`` and ``arr[i]``. ``copy=False`` raises ValueError:
        the data lives in storage, so there is no array to share."""
        if copy is False:
            raise ValueError(f"np.asarray(copy=False) cannot share an lsio.Array's data ({self.path!r}): it is "
                             "read from storage; use copy=None or arr[...]")
        data = self.read()
        if dtype is not None and np.dtype(dtype) != data.dtype:
            data = data.astype(dtype)
        return data

    def _transform(self, dtype: Any, scale: Optional[float], offset: Optional[float]):
        """(engine transform or None, output dtype) for the dtype/scale/offset arguments."""
        if dtype is None and scale is None and offset is None:
            return None, self._dtype
        if dtype is None:
            dtype = np.float64 if self._dtype == np.float64 else np.float32
        want = np.dtype(dtype)
        if want == self._dtype and scale is None and offset is None:
            return None, self._dtype
        if want not in (np.dtype(np.float32), np.dtype(np.float64)) or not want.isnative:
            raise TypeError(f"dtype must be float32 or float64 to convert while reading, got {want}")
        if self._dtype.kind == "c":
            raise TypeError("complex arrays cannot be converted to a real dtype while reading")
        t = _core.ElementTransform(want.name, 1.0 if scale is None else float(scale),
                                   0.0 if offset is None else float(offset))
        return t, want

    def read(
        self,
        key: Any = (),
        out: Optional[np.ndarray] = None,
        *,
        dtype: Any = None,
        scale: Optional[float] = None,
        offset: Optional[float] = None,
        stream: Any = None,
    ) -> np.ndarray:
        """Read ``self[key]`` (numpy basic indexing) into a new array, or into ``out``.

        ``out`` must be a writeable numpy array of exactly :attr:`dtype` and the result's
        shape, with non-negative, non-overlapping strides; it is filled and returned.
        Anything else raises (TypeError for the dtype, ValueError otherwise) before any I/O.
        An all-integer key returns a 0-d array.

        ``dtype`` (float32 or float64), ``scale`` and ``offset`` convert while reading:
        the result holds ``value * scale + offset`` (computed in double precision, rounded
        once), so a uint16 store feeds float32 tensors without a second pass.

        ``out`` may also be a CPU torch tensor (filled through the numpy array sharing its
        memory, and returned), or a contiguous CUDA tensor (torch,
        ``__cuda_array_interface__`` or DLPack): chunks are then decoded on the GPU
        (:mod:`lsio.gpu`), on ``stream`` (default the current torch stream).
        """
        if _cuda_out(out):
            from .gpu import require

            require()
            from .gpu._cuda import read_into

            return read_into(self, key, _normalize_key(key, self._shape), out, dtype, scale, offset, stream)
        given, out = _host_out(out)
        if given is not out:
            self.read(key, out, dtype=dtype, scale=scale, offset=offset)
            return given
        if dtype is None and scale is None and offset is None and type(out) in (np.ndarray, type(None)):
            # Ints and step-1 slices, decided and read in one C++ call (the per-call cost of
            # small reads from many Python threads); None: the general path below.
            done = self._native().read_simple(key, out, self._dtype)
            if done is not None:
                return done
        out, view, sel, transform = self._prepare_read(key, out, dtype, scale, offset)
        if view is not None:
            self._native().read_into(*sel, view, transform)
        return out

    def _prepare_read(self, key: Any, out: Optional[np.ndarray], dtype: Any = None,
                      scale: Optional[float] = None, offset: Optional[float] = None):
        """Normalises a basic-indexing read: returns (out, view or None when empty,
        (starts, counts, steps), transform). `view` is `out` with integer-indexed axes
        re-inserted and negative-step axes flipped, as the engine's selection addresses it."""
        native = self._native()
        starts, counts, steps, out_shape, int_axes, flips, new_axes = _normalize_key(key, self._shape)
        transform, out_dtype = self._transform(dtype, scale, offset)
        if out is None:
            out = np.empty(out_shape, dtype=out_dtype)
        else:
            _core.check_out(out, native, list(out_shape), transform)
        if 0 in counts:
            return out, None, (starts, counts, steps), transform
        view = out
        if new_axes:  # the engine sees the result without the axes None inserted
            # (the trailing Ellipsis keeps a 0-d view instead of a scalar copy)
            view = view[tuple(0 if a in new_axes else slice(None) for a in range(view.ndim)) + (Ellipsis,)]
        if int_axes:
            view = np.expand_dims(view, tuple(int_axes))
        if flips:
            view = view[tuple(slice(None, None, -1) if d in flips else slice(None) for d in range(len(counts)))]
        return out, view, (starts, counts, steps), transform

    def read_crops_async(
        self,
        starts: "np.ndarray | Sequence[Sequence[int]]",
        shape: Sequence[int],
        out: Optional[np.ndarray] = None,
    ) -> "concurrent.futures.Future[np.ndarray]":
        """:meth:`read_crops` on a background thread of this process; returns a
        ``concurrent.futures.Future`` (``.result()``, ``.done()``; ``asyncio.wrap_future``
        for asyncio). ``starts`` is copied at submission."""
        from ._async import read_crops_async

        return read_crops_async(self, starts, shape, out)

    @property
    def oindex(self) -> "_OIndex":
        """Outer (orthogonal) indexing, as zarr-python's ``oindex``. Per axis an integer
        array / list (any order, repeats allowed, negative from the end), a slice or an int.

        ``arr.oindex[[3, 1, 7], :, 10:20]`` reads rows 3, 1 and 7. The engine plans all
        selected indices as one call, so chunks shared by several indices are read and
        decoded once. ``arr.oindex.read(key, out=None)`` fills a given ``out``.
        """
        return _OIndex(self)

    def take(self, indices: Any, axis: int = 0, out: Optional[np.ndarray] = None) -> np.ndarray:
        """Select records by index along ``axis`` (like :func:`numpy.take` with an integer
        array): equals ``arr.oindex[(slice(None),) * axis + (indices,)]``."""
        nd = len(self.shape)
        axis = operator.index(axis)
        if not -nd <= axis < nd:
            raise np.exceptions.AxisError(axis, nd) if hasattr(np, "exceptions") else IndexError(axis)
        axis %= nd
        key = (slice(None),) * axis + (np.asarray(indices),)
        return self.oindex.read(key, out=out)

    def read_crops(
        self,
        starts: "np.ndarray | Sequence[Sequence[int]]",
        shape: Sequence[int],
        out: Optional[np.ndarray] = None,
        *,
        dtype: Any = None,
        scale: Optional[float] = None,
        offset: Optional[float] = None,
        stream: Any = None,
    ) -> np.ndarray:
        """Read N crops of one ``shape`` whose origins are the rows of ``starts`` (N, ndim).

        Returns an array of shape ``(N, *shape)`` (or fills ``out``). Every crop must lie
        inside the array (:class:`lsio.BoundsError` otherwise). All crops are planned
        together: each needed chunk is read and decoded once, even when crops overlap.
        ``dtype``/``scale``/``offset`` convert while reading, as in :meth:`read`.

        ``out`` may be a CPU torch tensor (filled in place and returned), or a contiguous
        CUDA tensor of shape ``(N, *shape)`` (torch,
        ``__cuda_array_interface__`` or DLPack): the compressed chunks are then copied to the
        GPU and decoded there by nvCOMP (:mod:`lsio.gpu`), on ``stream`` (default the current
        torch stream); the call returns once the batch is in ``out``.
        """
        native = self._native()
        nd = len(self._shape)
        st = np.asarray(starts)
        if st.dtype.kind not in "iu":
            if st.size == 0 and st.dtype.kind == "f":
                st = st.astype(np.int64)
            else:
                raise TypeError(f"starts must be an integer array, got dtype {st.dtype}")
        if st.ndim != 2 or st.shape[1] != nd:
            raise ValueError(f"starts must have shape (N, {nd}), got {st.shape}")
        try:
            crop = tuple(operator.index(s) for s in shape)
        except TypeError:
            raise TypeError("shape must be a sequence of integers") from None
        if len(crop) != nd:
            raise ValueError(f"crop shape {crop} has {len(crop)} dimensions, the array has {nd}")
        if any(c < 0 for c in crop):
            raise ValueError(f"crop shape {crop} has negative entries")
        if st.shape[0]:
            # Bounds in exact (Python int) arithmetic on per-axis extremes, in the starts'
            # own dtype: no cast can wrap a uint64 start, no start + shape can overflow, and
            # no temporary the size of `starts` is allocated (10**6 crops stay cheap).
            lo = [int(x) for x in st.min(axis=0)]
            hi = [int(x) for x in st.max(axis=0)]
            if any(lo[d] < 0 or hi[d] + crop[d] > self._shape[d] for d in range(nd)):
                _raise_first_bad_crop(st, crop, self._shape)
        elif any(c > n for c, n in zip(crop, self._shape)):
            raise BoundsError(f"crop shape {crop} does not fit in the array's shape {self._shape}")
        st64 = np.ascontiguousarray(st, dtype=np.int64)
        if _cuda_out(out):
            from .gpu import require

            require()
            from .gpu._cuda import read_crops_into

            return read_crops_into(self, st64, crop, out, dtype, scale, offset, stream)
        given, out = _host_out(out)
        if given is not out:
            self.read_crops(st64, crop, out, dtype=dtype, scale=scale, offset=offset)
            return given
        full = (st64.shape[0],) + crop
        transform, out_dtype = self._transform(dtype, scale, offset)
        if out is None:
            out = np.empty(full, dtype=out_dtype)
        else:
            _core.check_out(out, native, list(full), transform)
        if st64.shape[0] == 0 or 0 in crop:
            return out
        if np.may_share_memory(st64, out):
            # The engine reads the starts while it writes `out`: starts that live in `out`'s
            # memory would be overwritten by the first crops before later ones are read.
            st64 = st64.copy()
        native.read_crops_into(st64, list(crop), out, transform)
        return out


_ADVANCED_HINT = ("lsio indexes with ints, slices, ... and None (np.newaxis); for integer arrays or lists use "
                  "arr.oindex[...] (one index array per axis, orthogonally) or arr.take(indices, axis=...)")


def _host_out(out: Any) -> Tuple[Any, Any]:
    """(what to return, the numpy array to fill): a CPU torch tensor is filled through the
    numpy array that shares its memory, and returned itself."""
    if out is None or isinstance(out, np.ndarray):
        return out, out
    if type(out).__module__.split(".")[0] == "torch" and hasattr(out, "numpy") and not getattr(out, "is_cuda", False):
        try:
            return out, out.detach().numpy()
        except (RuntimeError, TypeError) as e:  # e.g. a dtype numpy lacks (bfloat16)
            raise TypeError(f"out: this torch tensor has no numpy view ({e})") from None
    return out, out


def _cuda_out(out: Any) -> bool:
    """True for an ``out`` on a CUDA device (torch tensor, __cuda_array_interface__, DLPack),
    decided without importing torch."""
    if out is None or isinstance(out, np.ndarray):
        return False
    if hasattr(out, "__cuda_array_interface__") or getattr(out, "is_cuda", False) is True:
        return True
    dev = getattr(out, "__dlpack_device__", None)
    if dev is None:
        return False
    try:
        return int(dev()[0]) in (2, 13)  # kDLCUDA, kDLCUDAManaged
    except Exception:
        return False


def _normalize_key(key: Any, shape: Tuple[int, ...]):
    """numpy basic indexing -> engine selection.

    Returns (starts, counts, steps, out_shape, int_axes, flips, new_axes): per-dimension
    selections with positive steps, the result's shape (integer-indexed axes dropped, one
    length-1 axis per ``None``), the array axes indexed by integers, the array axes whose
    (negative) step was turned around, and the result's axes that ``None`` inserted.
    """
    nd = len(shape)
    if not isinstance(key, tuple):
        key = (key,)
    for k in key:
        if isinstance(k, list) or (isinstance(k, np.ndarray) and k.ndim > 0):
            raise TypeError(f"{_ADVANCED_HINT}; got {type(k).__name__}")
    n_ellipsis = sum(1 for k in key if k is Ellipsis)
    if n_ellipsis > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    n_axes = sum(1 for k in key if k is not None and k is not Ellipsis)  # array axes the key names
    if n_axes > nd:
        raise IndexError(f"too many indices for array: array is {nd}-dimensional, but {n_axes} were indexed")
    if n_ellipsis:
        i = next(j for j, k in enumerate(key) if k is Ellipsis)
        key = key[:i] + (slice(None),) * (nd - n_axes) + key[i + 1 :]
    else:
        key = key + (slice(None),) * (nd - n_axes)
    starts, counts, steps, out_shape, int_axes, flips, new_axes = [], [], [], [], [], set(), []
    d = 0  # the array axis the next non-None entry indexes
    for k in key:
        if k is None:
            new_axes.append(len(out_shape))
            out_shape.append(1)
            continue
        n = shape[d]
        if isinstance(k, slice):
            start, stop, step = k.indices(n)  # ValueError for a zero step
            count = len(range(start, stop, step))
            if count == 0:
                start, step = 0, 1
            elif count == 1:
                # One element: the step is irrelevant, and may not even fit in int64 (::2**63).
                step = 1
            elif step < 0:
                start, step = start + (count - 1) * step, -step
                flips.add(d)
            starts.append(start)
            counts.append(count)
            steps.append(step)
            out_shape.append(count)
        elif isinstance(k, (bool, np.bool_)):
            raise TypeError(f"{_ADVANCED_HINT}; got {k!r}")
        else:
            try:
                i = operator.index(k)
            except TypeError:
                raise TypeError(f"{_ADVANCED_HINT}; got {type(k).__name__}") from None
            if i < 0:
                i += n
            if not 0 <= i < n:
                raise BoundsError(f"index {k} is out of bounds for axis {d} with size {n}")
            starts.append(i)
            counts.append(1)
            steps.append(1)
            int_axes.append(d)
        d += 1
    return starts, counts, steps, tuple(out_shape), int_axes, flips, new_axes


def _raise_first_bad_crop(st: np.ndarray, crop: Tuple[int, ...], shape: Tuple[int, ...]) -> None:
    """Raises BoundsError naming the first crop (row-major) outside the array. Limits are
    Python ints clamped into the starts' dtype, so nothing wraps."""
    first = None
    for d in range(len(shape)):
        col = st[:, d]
        limit = shape[d] - crop[d]  # largest valid start
        bad = np.ones(col.shape, bool) if limit < 0 else col > limit
        if col.dtype.kind == "i":
            bad |= col < 0
        if bad.any():
            i = int(np.argmax(bad))
            if first is None or i < first[0]:
                first = (i, d)
    assert first is not None
    i, d = first
    raise BoundsError(
        f"crop {i} starting at {tuple(int(x) for x in st[i])} with shape {crop} "
        f"lies outside dimension {d} of size {shape[d]}"
    )


def _is_int(x: Any) -> bool:
    try:
        operator.index(x)
    except TypeError:
        return False
    return not isinstance(x, (bool, np.bool_))


class _OIndex:
    """``arr.oindex[...]``: outer indexing through one batched engine call."""

    def __init__(self, arr: Array) -> None:
        self._arr = arr

    def __getitem__(self, key: Any) -> np.ndarray:
        return self.read(key)

    def read(self, key: Any, out: Optional[np.ndarray] = None) -> np.ndarray:
        arr = self._arr
        native = arr._native()
        shape = arr._shape
        runs, out_shape, int_axes = _outer_runs(key, shape)
        if out is None:
            out = np.empty(out_shape, dtype=arr._dtype)
        else:
            _core.check_out(out, native, list(out_shape))
        if 0 in out_shape:
            return out
        # Integer-indexed axes are dropped from the result: read into a view that has them.
        view = np.expand_dims(out, tuple(int_axes)) if int_axes else out
        native.read_outer_into(runs, view)
        return out


def _outer_runs(key: Any, shape: Tuple[int, ...]):
    """Outer-indexing key -> per-axis runs (start, count, step, dst_offset), the result's
    shape and the axes indexed by a scalar (dropped from the result)."""
    nd = len(shape)
    if not isinstance(key, tuple):
        key = (key,)
    if any(k is Ellipsis for k in key):
        i = next(j for j, k in enumerate(key) if k is Ellipsis)
        key = key[:i] + (slice(None),) * (nd - len(key) + 1) + key[i + 1 :]
    if len(key) > nd:
        raise IndexError(f"too many indices for array: array is {nd}-dimensional, but {len(key)} were indexed")
    key = key + (slice(None),) * (nd - len(key))
    runs, out_shape, int_axes = [], [], []
    for d, (k, n) in enumerate(zip(key, shape)):
        if isinstance(k, slice):
            start, stop, step = k.indices(n)
            count = len(range(start, stop, step))
            if count <= 1:
                step = 1  # irrelevant for one element, and may not fit in int64 (::-2**63)
            runs.append(np.array([[start, count, step, 0]] if count else np.zeros((0, 4)), dtype=np.int64))
            out_shape.append(count)
            continue
        idx = np.asarray(k)
        if idx.dtype == bool:
            if idx.shape != (n,):
                raise IndexError(f"boolean index for axis {d} must have length {n}, got shape {idx.shape}")
            idx = np.flatnonzero(idx)
        elif idx.size == 0 and idx.ndim == 1:
            idx = idx.astype(np.int64)  # [] arrives as float64
        elif idx.dtype == object and all(_is_int(x) for x in idx.reshape(-1)):
            # Python ints beyond int64 (numpy makes such lists object arrays): bounds exactly.
            for x in idx.reshape(-1):
                i = operator.index(x)
                if not -n <= i < n:
                    raise BoundsError(f"index {i} is out of bounds for axis {d} with size {n}")
            idx = idx.astype(np.int64)
        elif idx.dtype.kind not in "iu":
            raise TypeError(f"oindex takes integer arrays, booleans, slices or ints; got {idx.dtype} for axis {d}")
        scalar = idx.ndim == 0
        if idx.ndim > 1:
            raise IndexError(f"oindex takes 1-d index arrays; got {idx.ndim}-d for axis {d}")
        # Bounds before any cast to int64, where 2**64 - 1 would wrap to -1 (= the last row).
        if idx.dtype.kind == "u" and idx.size and int(idx.max()) >= n:
            bad = int(idx.reshape(-1)[np.argmax(idx.reshape(-1) >= n)])
            raise BoundsError(f"index {bad} is out of bounds for axis {d} with size {n}")
        idx = idx.astype(np.int64, copy=False).reshape(-1)
        idx = np.where(idx < 0, idx + n, idx)
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            bad = int(np.asarray(k).reshape(-1)[np.flatnonzero((idx < 0) | (idx >= n))[0]])
            raise BoundsError(f"index {bad} is out of bounds for axis {d} with size {n}")
        if idx.size == 0:
            runs.append(np.zeros((0, 4), dtype=np.int64))
        else:
            # Runs of consecutive indices become one box each (vectorised, no Python loop).
            breaks = np.flatnonzero(np.diff(idx) != 1) + 1
            starts = np.concatenate(([0], breaks))
            counts = np.diff(np.concatenate((starts, [idx.size])))
            runs.append(np.stack([idx[starts], counts, np.ones_like(counts), starts], axis=1).astype(np.int64))
        if scalar:
            int_axes.append(d)
        else:
            out_shape.append(idx.size)
    return runs, tuple(out_shape), int_axes

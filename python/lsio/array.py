"""The user-facing :class:`Array` handle and :func:`open`.

Python only normalises arguments here: keys become per-dimension (start, count, step)
selections, ``out`` arrays are checked by the engine before any I/O, and the engine does
all planning, I/O and decoding with the GIL released.

An :class:`Array` pickles as its configuration (path and options). The native object is
rebuilt lazily in the receiving process, and also whenever ``os.getpid()`` changes (a
forked worker), so handles can be passed to DataLoader workers.
"""

from __future__ import annotations

import json
import operator
import os
from typing import Any, Optional, Sequence, Tuple

import numpy as np

from . import _core
from .errors import BoundsError

__all__ = ["Array", "open"]

_IO_MODES = ("auto", "uring", "pread")


def _threads_option(threads: Optional[int]) -> int:
    if threads is None:
        env = os.environ.get("LSIO_THREADS", "").strip()
        if not env:
            return 0  # the engine uses the CPUs available to the process
        try:
            threads = int(env)
        except ValueError:
            raise ValueError(f"LSIO_THREADS must be an integer >= 1, got {env!r}") from None
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)):
        raise TypeError(f"threads must be an integer or None, got {type(threads).__name__}")
    if threads < 1:
        raise ValueError(f"threads must be >= 1 (or None for all available CPUs), got {threads}")
    return int(threads)


def _io_option(io: Optional[str]) -> str:
    if io is None:
        io = os.environ.get("LSIO_IO", "").strip() or "auto"
    if io not in _IO_MODES:
        raise ValueError(f"io must be one of {_IO_MODES}, got {io!r}")
    return io


def open(  # noqa: A001 - mirrors zarr.open / builtins.open naming on purpose
    path: "str | os.PathLike[str]",
    *,
    threads: Optional[int] = None,
    io: Optional[str] = None,
    queue_depth: int = 64,
    max_gap: int = 64 << 10,
    max_request: int = 16 << 20,
    index_cache_bytes: int = 64 << 20,
) -> "Array":
    """Open the Zarr v3 array stored in directory ``path`` (the one holding ``zarr.json``).

    Parameters
    ----------
    threads:
        Worker threads per read call, the calling thread included. ``None`` reads
        ``LSIO_THREADS``, else uses every CPU available to the process. ``1`` reads on the
        calling thread alone and never starts a background thread.
    io:
        ``"auto"`` (default, or ``LSIO_IO``): io_uring where the kernel allows it, with
        page-cache hits served inline by ``preadv2(RWF_NOWAIT)``; ``pread`` otherwise.
        ``"uring"`` forces io_uring (reads raise :class:`lsio.StorageError` where it is
        unavailable); ``"pread"`` forces plain positional reads.
    queue_depth, max_gap, max_request, index_cache_bytes:
        Engine tuning: reads in flight per thread; coalescing of nearby byte ranges (merge
        when the gap is at most ``max_gap`` bytes and the read at most ``max_request``);
        bytes of shard indexes cached per array.

    Raises
    ------
    lsio.FormatError, lsio.UnsupportedError, lsio.StorageError, ValueError
    """
    return Array(
        path,
        threads=threads,
        io=io,
        queue_depth=queue_depth,
        max_gap=max_gap,
        max_request=max_request,
        index_cache_bytes=index_cache_bytes,
    )


class Array:
    """An opened Zarr v3 array. Create with :func:`lsio.open`.

    Reading: ``arr[key]`` and ``arr.read(key, out=None)`` take numpy basic indexing (ints,
    slices with any step, ``...``); ``arr.read_crops(starts, shape, out=None)`` reads a
    batch of same-shape crops in one engine call. Safe to use from several threads at once.
    """

    def __init__(self, path: "str | os.PathLike[str]", **options: Any) -> None:
        self._config = {
            "path": os.path.abspath(os.fspath(path)),
            "threads": _threads_option(options.pop("threads", None)),
            "io": _io_option(options.pop("io", None)),
            "queue_depth": int(options.pop("queue_depth", 64)),
            "max_gap": int(options.pop("max_gap", 64 << 10)),
            "max_request": int(options.pop("max_request", 16 << 20)),
            "index_cache_bytes": int(options.pop("index_cache_bytes", 64 << 20)),
        }
        if options:
            raise TypeError(f"unexpected options: {', '.join(sorted(options))}")
        self._native_obj = None
        self._pid = -1
        self._info: Optional[dict] = None
        self._native()  # validate the metadata now

    # -- native handle, rebuilt per process -----------------------------------------------

    def _native(self) -> Any:
        pid = os.getpid()
        if self._native_obj is None or self._pid != pid:
            self._native_obj = _core.open(**self._config)
            self._pid = pid
            if self._info is None:
                self._set_info(self._native_obj.info())
        return self._native_obj

    def _set_info(self, info: dict) -> None:
        self._info = info
        self._dtype = np.dtype(info["typestr"])
        self._shape = tuple(int(s) for s in info["shape"])

    def _meta(self) -> dict:
        if self._info is None:
            self._native()
        assert self._info is not None
        return self._info

    def __getstate__(self) -> dict:
        return {"config": dict(self._config)}

    def __setstate__(self, state: dict) -> None:
        self._config = dict(state["config"])
        self._native_obj = None
        self._pid = -1
        self._info = None

    # -- metadata -------------------------------------------------------------------------

    @property
    def path(self) -> str:
        return self._config["path"]

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
        return json.loads(self._meta()["attributes_json"])

    @property
    def dimension_names(self) -> Optional[Tuple[Optional[str], ...]]:
        names = self._meta()["dimension_names"]
        return None if names is None else tuple(names)

    @property
    def codecs(self) -> str:
        """A summary of the codec chain, e.g. ``'sharding_indexed[bytes, zstd]'``."""
        return self._meta()["codecs"]

    @property
    def io_backend(self) -> str:
        """The backend this array's reads use in this process (``pread``, ``uring``, ...)."""
        return self._native().backend_name()

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __repr__(self) -> str:
        return (
            f"<lsio.Array {self.path!r} shape={self.shape} dtype={self.dtype} "
            f"chunks={self.chunks} shards={self.shards} codecs={self.codecs!r}>"
        )

    # -- reading --------------------------------------------------------------------------

    def __getitem__(self, key: Any) -> np.ndarray:
        return self.read(key)

    def read(self, key: Any = (), out: Optional[np.ndarray] = None) -> np.ndarray:
        """Read ``self[key]`` (numpy basic indexing) into a new array, or into ``out``.

        ``out`` must be a writeable numpy array of exactly :attr:`dtype` and the result's
        shape, with non-negative, non-overlapping strides; it is filled and returned.
        Anything else raises (TypeError for the dtype, ValueError otherwise) before any I/O.
        An all-integer key returns a 0-d array.
        """
        native = self._native()
        starts, counts, steps, out_shape, int_axes, flips = _normalize_key(key, self._shape)
        if out is None:
            out = np.empty(out_shape, dtype=self._dtype)
        else:
            _core.check_out(out, native, list(out_shape))
        if 0 in counts:
            return out
        view = out
        if int_axes:
            view = np.expand_dims(view, tuple(int_axes))
        if flips:
            view = view[tuple(slice(None, None, -1) if d in flips else slice(None) for d in range(len(counts)))]
        native.read_into(starts, counts, steps, view)
        return out

    def read_crops(
        self,
        starts: "np.ndarray | Sequence[Sequence[int]]",
        shape: Sequence[int],
        out: Optional[np.ndarray] = None,
    ) -> np.ndarray:
        """Read N crops of one ``shape`` whose origins are the rows of ``starts`` (N, ndim).

        Returns an array of shape ``(N, *shape)`` (or fills ``out``). Every crop must lie
        inside the array (:class:`lsio.BoundsError` otherwise). All crops are planned
        together: each needed chunk is read and decoded once, even when crops overlap.
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
        if st.dtype.kind == "u" and st.size and st.max() > np.iinfo(np.int64).max:
            raise BoundsError("crop start exceeds the int64 range")
        st64 = np.ascontiguousarray(st, dtype=np.int64)
        if st64.shape[0]:
            bad = (st64 < 0) | (st64 + np.asarray(crop, dtype=np.int64) > np.asarray(self._shape, dtype=np.int64))
            if bad.any():
                i, d = (int(x) for x in np.argwhere(bad)[0])
                raise BoundsError(
                    f"crop {i} starting at {tuple(int(x) for x in st64[i])} with shape {crop} "
                    f"lies outside dimension {d} of size {self._shape[d]}"
                )
        full = (st64.shape[0],) + crop
        if out is None:
            out = np.empty(full, dtype=self._dtype)
        else:
            _core.check_out(out, native, list(full))
        if st64.shape[0] == 0 or 0 in crop:
            return out
        native.read_crops_into(st64, list(crop), out)
        return out


def _normalize_key(key: Any, shape: Tuple[int, ...]):
    """numpy basic indexing -> engine selection.

    Returns (starts, counts, steps, out_shape, int_axes, flips): per-dimension selections
    with positive steps, the result's shape (integer-indexed axes dropped), the axes indexed
    by integers, and the axes whose (negative) step was turned around.
    """
    nd = len(shape)
    if not isinstance(key, tuple):
        key = (key,)
    n_ellipsis = sum(1 for k in key if k is Ellipsis)
    if n_ellipsis > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if n_ellipsis:
        i = next(j for j, k in enumerate(key) if k is Ellipsis)
        fill = nd - (len(key) - 1)
        if fill < 0:
            raise IndexError(f"too many indices for array: array is {nd}-dimensional, but {len(key) - 1} were indexed")
        key = key[:i] + (slice(None),) * fill + key[i + 1 :]
    if len(key) > nd:
        raise IndexError(f"too many indices for array: array is {nd}-dimensional, but {len(key)} were indexed")
    key = key + (slice(None),) * (nd - len(key))
    starts, counts, steps, out_shape, int_axes, flips = [], [], [], [], [], set()
    for d, (k, n) in enumerate(zip(key, shape)):
        if isinstance(k, slice):
            start, stop, step = k.indices(n)  # ValueError for a zero step
            count = len(range(start, stop, step))
            if count == 0:
                start, step = 0, 1
            elif step < 0:
                start, step = start + (count - 1) * step, -step
                flips.add(d)
            starts.append(start)
            counts.append(count)
            steps.append(step)
            out_shape.append(count)
        elif isinstance(k, (bool, np.bool_)) or k is None:
            raise TypeError(f"lsio supports basic indexing only (ints, slices, ...); got {k!r}")
        else:
            try:
                i = operator.index(k)
            except TypeError:
                raise TypeError(
                    f"lsio supports basic indexing only (ints, slices, ...); got {type(k).__name__}"
                ) from None
            if i < 0:
                i += n
            if not 0 <= i < n:
                raise BoundsError(f"index {k} is out of bounds for axis {d} with size {n}")
            starts.append(i)
            counts.append(1)
            steps.append(1)
            int_axes.append(d)
    return starts, counts, steps, tuple(out_shape), int_axes, flips

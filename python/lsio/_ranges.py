"""``lsio.read_ranges``: many byte ranges of files or objects into buffers, in one engine call.

The Zarr-free face of the engine (C++: ``lsio/ranges.h``). Python only normalises the
arguments (sources to local paths or remote stores, ranges to flat arrays, ``out`` to
buffers); planning, coalescing, reading and copying happen in C++ with the GIL released.
``lsio.safetensors`` is built on it.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _core, _options, _remote, _storage

Source = Union[str, "os.PathLike[str]"]


def _is_one_source(source: Any) -> bool:
    return isinstance(source, (str, bytes, os.PathLike))


def _split_url(url: str) -> Tuple[str, str]:
    """``s3://bucket/dir/file`` -> (``s3://bucket/dir``, ``file``).

    The whole URL is checked as ``lsio.open`` checks it first: a query string
    (``?versionId=...``) or fragment would otherwise be cut off here, and the current object
    read in place of the one the URL names."""
    _storage.check_url(url)
    head, sep, rest = url.partition("://")
    parent, slash, name = rest.rstrip("/").rpartition("/")
    if not slash or not name or not parent:
        raise ValueError(f"{url!r} names no object (expected {head}://host-or-bucket/.../name)")
    return head + sep + parent, name


def _native_sources(sources: Sequence[Any], storage_options: Optional[Mapping]) -> List[Any]:
    """Each source as the binding takes it: a local path (str) or (RemoteStore, key)."""
    stores: Dict[str, Any] = {}
    out: List[Any] = []
    any_remote = False
    for s in sources:
        if isinstance(s, str) and _storage.is_remote(s):
            any_remote = True
            parent, key = _split_url(s)
            store = stores.get(parent)
            if store is None:
                # The process's context for the object's parent: credentials resolved once
                # and refreshed there, shared with concurrent calls and arrays of the same
                # configuration.
                store = stores[parent] = _remote.context(parent, storage_options).store()
            out.append((store, key))
        elif _is_one_source(s):
            out.append(_storage.local_path(s))
        else:
            raise TypeError(f"a source must be a path or URL (str or os.PathLike), got {type(s).__name__}")
    if storage_options is not None and not any_remote:
        raise ValueError("storage_options apply to URLs (s3://, gs://, http(s)://), not to local paths")
    return out


def _ranges_array(ranges: Any) -> np.ndarray:
    r = np.asarray(ranges)
    if r.size == 0:
        r = r.reshape(0, 2).astype(np.uint64)  # [] is float64 to numpy
    if r.ndim != 2 or r.shape[1] != 2:
        raise ValueError(f"ranges must have shape (N, 2) of (offset, length), got shape {r.shape}")
    if r.dtype == bool or not np.issubdtype(r.dtype, np.integer):
        raise TypeError(f"ranges must be integers, got dtype {r.dtype}")
    if r.size and int(r.min()) < 0:
        i = int(np.argwhere(r < 0)[0][0])
        raise ValueError(f"range {i} has a negative offset or length: {tuple(int(v) for v in r[i])}")
    if r.dtype.kind == "u" and r.dtype.itemsize == 8 and r.size and int(r.max()) > np.iinfo(np.int64).max:
        raise ValueError("range offsets and lengths must be below 2**63")
    return np.ascontiguousarray(r, dtype=np.uint64)


def read_ranges(
    source: Union[Source, Sequence[Source]],
    ranges: Any,
    *,
    out: Any = None,
    storage_options: Optional[Mapping[str, Any]] = None,
    threads: Optional[int] = None,
    io: Optional[str] = None,
    max_gap: Optional[int] = None,
    max_request: Optional[int] = None,
    stats: Optional[Dict[str, int]] = None,
) -> List[np.ndarray]:
    """Reads byte ranges of files or objects in one planned call.

    Parameters
    ----------
    source:
        A path (``str``/``os.PathLike``; ``~`` and ``file://`` work) or URL (``s3://``,
        ``gs://``, ``http(s)://``), or a sequence of them with one per range.
    ranges:
        ``(N, 2)`` integers: ``(offset, length)`` per range.
    out:
        ``None``: one new buffer is allocated and the result views it. Or a 1-D, C-contiguous,
        writeable ``uint8`` array of exactly the total length, filled in order. Or a list of
        ``N`` writeable C-contiguous buffers (numpy arrays of any dtype, ``memoryview``,
        ``tensor.numpy()``), each of exactly its range's length in bytes.
    storage_options:
        Options of remote stores, as for :func:`lsio.open`.
    threads, io, max_gap, max_request:
        As for :func:`lsio.open`. ``max_gap``/``max_request`` default to 16 KiB / 8 MiB for
        local files and 1 MiB / 16 MiB for remote objects; a range longer than ``max_request``
        is split into several requests read by several threads (a split into more than
        about four million requests is refused: ``ValueError``). ``max_gap=0`` merges only
        ranges that touch.
    stats:
        A dict, or ``None``. The call's counts are added to its ``"ranges"`` (ranges given),
        ``"requests"`` (reads issued after coalescing and splitting) and ``"bytes_read"``
        (bytes those reads cover, the gaps between merged neighbours included) entries
        (missing ones start at 0) when the call succeeds.

    Returns
    -------
    A list of ``N`` 1-D ``uint8`` arrays viewing the bytes (views of ``out`` when given).

    Ranges are sorted, identical ranges read once, neighbours within ``max_gap`` merged into
    one read of at most ``max_request`` bytes. A missing file or object, or a range past its
    end, raises :class:`lsio.StorageError` naming it and the byte range, before anything is
    written to ``out``. Zero-length ranges read nothing (and are not checked against remote
    objects, which are sized by their first request).
    """
    r = _ranges_array(ranges)
    n = r.shape[0]
    if _is_one_source(source):
        srcs: List[Any] = [source]
        index = np.zeros(n, dtype=np.uint32)
    else:
        srcs = list(source)
        if len(srcs) != n:
            raise ValueError(f"{len(srcs)} sources for {n} ranges: give one source, or one per range")
        # One native source per distinct path/URL (a file opened once however often named).
        first: Dict[Any, int] = {}
        idx = [first.setdefault(os.fspath(s) if _is_one_source(s) else id(s), len(first)) for s in srcs]
        uniq: List[Any] = [None] * len(first)
        for s, i in zip(srcs, idx):
            uniq[i] = s
        srcs = uniq
        index = np.asarray(idx, dtype=np.uint32).reshape(n)
    offsets = np.ascontiguousarray(r[:, 0])
    lengths = np.ascontiguousarray(r[:, 1])
    starts = np.zeros(n, dtype=np.uint64)
    if n:
        np.cumsum(lengths[:-1], out=starts[1:])
    total = int(lengths.sum()) if n else 0
    engine = dict(storage_options=storage_options, threads=threads, io=io, max_gap=max_gap,
                  max_request=max_request, stats=stats)
    if out is None:
        buf = np.empty(total, dtype=np.uint8)
        read_into(srcs, index, offsets, lengths, buf, starts, **engine)
        return [buf[int(a):int(a) + int(b)] for a, b in zip(starts, lengths)]
    if isinstance(out, np.ndarray):
        if out.dtype != np.uint8 or out.ndim != 1:
            raise TypeError(f"out must be a 1-D uint8 array (or a list of buffers), got {out.dtype} with shape {out.shape}")
        if out.shape[0] != total:
            raise ValueError(f"out has {out.shape[0]} bytes, the ranges {total}")
        read_into(srcs, index, offsets, lengths, out, starts, **engine)
        return [out[int(a):int(a) + int(b)] for a, b in zip(starts, lengths)]
    if isinstance(out, (list, tuple)):
        bufs = list(out)
        read_into(srcs, index, offsets, lengths, bufs, None, **engine)
        return [_byte_view(b) for b in bufs]
    raise TypeError(f"out must be None, a 1-D uint8 array or a list of buffers, got {type(out).__name__}")


def read_into(sources: Sequence[Any], source_index: np.ndarray, offsets: np.ndarray,
              lengths: np.ndarray, out: Any, out_offsets: Optional[np.ndarray], *,
              storage_options: Optional[Mapping[str, Any]] = None, threads: Optional[int] = None,
              io: Optional[str] = None, max_gap: Optional[int] = None,
              max_request: Optional[int] = None, stats: Optional[Dict[str, int]] = None) -> None:
    """The engine call under :func:`read_ranges`, for callers that lay out ``out`` themselves
    (``lsio.safetensors.load_jax``: shards at aligned places of one group buffer).

    ``sources``: distinct paths/URLs; ``source_index``, ``offsets``, ``lengths``: one entry
    per range (uint32 / uint64 arrays); ``out``: one writeable buffer with ``out_offsets``
    (where each range goes), or a list of one buffer per range with ``out_offsets`` None."""
    counts = _core.read_ranges(*_call_args(sources, source_index, offsets, lengths, out, out_offsets,
                                           storage_options),
                               **_engine_options(threads, io, max_gap, max_request))
    if stats is not None:
        for k, v in counts.items():
            stats[k] = stats.get(k, 0) + int(v)


def gather_records(kind: int, sources: Sequence[Any], source_index: np.ndarray, offsets: np.ndarray,
                   lengths: np.ndarray, out: np.ndarray, out_offsets: np.ndarray, *,
                   storage_options: Optional[Mapping[str, Any]] = None, threads: Optional[int] = None,
                   io: Optional[str] = None) -> Any:
    """:func:`read_into` of compressed zrecord payloads that decodes each one as it lands
    (lsio.records): ``(GatheredRecords, -1, "")``, or ``(None, position, message)`` for a
    corrupt payload; I/O errors raise as in :func:`read_into`."""
    return _core.records_gather(kind, *_call_args(sources, source_index, offsets, lengths, out, out_offsets,
                                                  storage_options),
                                **_engine_options(threads, io, None, None))


def _call_args(sources, source_index, offsets, lengths, out, out_offsets, storage_options) -> tuple:
    return (_native_sources(sources, storage_options), np.ascontiguousarray(source_index, dtype=np.uint32),
            np.ascontiguousarray(offsets, dtype=np.uint64), np.ascontiguousarray(lengths, dtype=np.uint64), out,
            None if out_offsets is None else np.ascontiguousarray(out_offsets, dtype=np.uint64))


def _engine_options(threads, io, max_gap, max_request) -> Dict[str, Any]:
    # None: the store kind's default (unless LSIO_MERGE_GAP says otherwise); 0: no gap.
    gap = (None if max_gap is None and _options._env("max_gap") is None
           else _options.size_option(max_gap, "max_gap", 0))
    if gap is not None and gap >= 1 << 63:
        raise ValueError(f"max_gap (or LSIO_MERGE_GAP) must be below 2**63, got {gap}")
    return dict(
        threads=_options.threads_option(threads),
        io=_options.io_option(io),
        max_gap=gap,
        max_request=_options.size_option(max_request, "max_request", 0, lo=1),  # 0: engine default
    )


def _byte_view(buf: Any) -> np.ndarray:
    if isinstance(buf, np.ndarray):
        return buf.reshape(-1).view(np.uint8)
    return np.frombuffer(memoryview(buf).cast("B"), dtype=np.uint8)

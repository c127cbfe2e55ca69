"""Sharded loading of safetensors checkpoints: ``lsio.safetensors.load_jax`` and the chunk plan.

``load_jax`` puts each tensor on a JAX mesh reading only what this process keeps: for every
tensor it asks the tensor's sharding which index box each *addressable* device holds, turns
each distinct box into byte ranges of the file (a box is a set of equal-length contiguous
runs: one run when it splits only the first axis, one per row when it splits the last), and
reads a group of whole tensors at a time in one engine call (``_ranges.read_into``: the
engine sorts, coalesces neighbours within ``max_gap`` and splits long runs across threads)
into one 64-byte-aligned host buffer, each box at an aligned place. A tensor's boxes are never
split over groups: a strided box's runs are merged across the gaps between them, which are
its neighbours' columns, and a second call would read those again. Each tensor is then placed
with one ``jax.make_array_from_callback`` (replicas are read once per process and put on every
device holding them); the transfer of one group runs while the next is read, and the reads
wait for the group before that, so at most two groups are in host memory (``group_bytes``,
default 256 MiB, ``LSIO_JAX_GROUP_BYTES``; at least one tensor's share). Nothing is exchanged
between processes: each reads its own shards, so the result needs no redistribution.

The chunk plan (``chunk_plan`` / ``load_chunk``) is the scheme of Levanter's safetensors
loader (the design this project started from), kept for users who want whole-chunk reads:
tensors in file order packed into chunks of at most ``chunk_bytes`` (default 2 GiB, the
design's; Levanter's code now uses 1 GiB; ``LSIO_SAFETENSORS_CHUNK_BYTES``) that never split a
tensor, chunk ``i`` owned by process ``i % process_count``. Chunks are numbered across all the
checkpoint's files (Levanter plans one file at a time, so its numbers restart per file and
chunk 0 of every file is process 0's).

jax is imported by ``load_jax`` only; the chunk plan needs numpy alone.
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import sys
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _options, _ranges
from . import _safetensors_format as _st
from .errors import StorageError, UnsupportedError

#: Default bytes read per group by ``load_jax`` (``LSIO_JAX_GROUP_BYTES`` overrides).
GROUP_BYTES = 256 << 20
#: Default chunk size of ``chunk_plan`` (``LSIO_SAFETENSORS_CHUNK_BYTES`` overrides), the design's 2 GB.
CHUNK_BYTES = 2 << 30
#: load_jax's coalescing gap for remote checkpoints (``max_gap`` / ``LSIO_MERGE_GAP`` override).
REMOTE_GAP = 64 << 10
_ALIGN = 64  # where each box starts in a group buffer: aligned for every dtype and for SIMD copies

Box = Tuple[Tuple[int, int], ...]  # per axis [start, stop)


# ---------------------------------------------------------------------------------------
# Boxes -> byte ranges


def box_runs(shape: Sequence[int], itemsize: int, box: Box) -> Tuple[np.ndarray, int]:
    """The byte ranges of index box ``box`` of a C-order tensor of ``shape``: (offsets of the
    runs relative to the tensor's first byte, in the box's C order; the length of each run).
    The runs, concatenated, are the box's bytes in C order. An empty box has no runs."""
    n = len(shape)
    lens = [b - a for a, b in box]
    if any(x == 0 for x in lens):
        return np.zeros(0, np.int64), 0
    strides = [1] * n
    for d in range(n - 2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
    # Trailing axes the box covers whole join the run; the last partial axis ends it.
    j = n - 1
    while j >= 0 and box[j] == (0, shape[j]):
        j -= 1
    if j < 0:
        return np.zeros(1, np.int64), int(np.prod(shape, dtype=np.int64)) * itemsize
    run = lens[j] * strides[j] * itemsize
    offs = np.array([box[j][0] * strides[j]], np.int64)
    for d in range(j - 1, -1, -1):
        outer = np.arange(box[d][0], box[d][1], dtype=np.int64) * strides[d]
        offs = (outer[:, None] + offs[None, :]).reshape(-1)
    return offs * itemsize, run


def _box_of(index: Tuple[Any, ...], shape: Tuple[int, ...], where: str, name: str) -> Box:
    """A device's index (the sharding's tuple of slices) as [start, stop) per axis."""
    if not isinstance(index, tuple):
        index = (index,)
    out = []
    for d, size in enumerate(shape):
        s = index[d] if d < len(index) else slice(None)
        if not isinstance(s, slice):
            raise _st._error(UnsupportedError, where, f"tensor {name!r}: the sharding gives axis {d} "
                             f"the index {s!r}; only slices are supported")
        a, b, step = s.indices(size)
        if step != 1:
            raise _st._error(UnsupportedError, where, f"tensor {name!r}: the sharding gives axis {d} "
                             f"a strided slice {s!r}; only contiguous slices are supported")
        out.append((a, max(a, b)))
    return tuple(out)


# ---------------------------------------------------------------------------------------
# Per-tensor choices: sharding and result dtype


ShardingsArg = Union[Any, Mapping[str, Any], Callable[[str, Tuple[int, ...], np.dtype], Any]]
DtypeArg = Union[None, Any, Mapping[str, Any], Callable[[str, Tuple[int, ...], np.dtype], Any]]


def _sharding_for(jax: Any, shardings: ShardingsArg, t: _st.TensorInfo, stored: np.dtype,
                  where: str) -> Any:
    Sharding = jax.sharding.Sharding
    if isinstance(shardings, Sharding):
        sh = shardings
    elif isinstance(shardings, Mapping):
        if t.name not in shardings:
            raise KeyError(f"shardings has no entry for tensor {t.name!r} of {where} (give one for "
                           "every tensor loaded, restrict names=, or pass a callable)")
        sh = shardings[t.name]
    elif callable(shardings):
        sh = shardings(t.name, t.shape, stored)
    else:
        raise TypeError("shardings must be a jax.sharding.Sharding, a dict name -> Sharding, or a "
                        f"callable (name, shape, dtype) -> Sharding, got {type(shardings).__name__}")
    if not isinstance(sh, Sharding):
        raise TypeError(f"the sharding for tensor {t.name!r} must be a jax.sharding.Sharding, got "
                        f"{type(sh).__name__}")
    return sh


def _is_float(dt: np.dtype) -> bool:
    if dt.kind in "fc":
        return dt.kind == "f"
    try:
        import ml_dtypes  # bfloat16 and the float8 kinds are kind 'V' to numpy
    except ImportError:
        return False
    try:
        ml_dtypes.finfo(dt)
        return True
    except (TypeError, ValueError):
        return False


def _wanted(dtype: DtypeArg, t: _st.TensorInfo, stored: np.dtype) -> Optional[np.dtype]:
    """The dtype ``dtype`` asks for tensor ``t`` (None: keep the stored one)."""
    if dtype is None:
        want = None
    elif isinstance(dtype, Mapping):
        want = dtype.get(t.name)
    elif callable(dtype) and not isinstance(dtype, type) and not hasattr(dtype, "dtype"):
        want = dtype(t.name, t.shape, stored)  # a function, not a scalar type like jnp.bfloat16
    else:
        want = dtype if _is_float(stored) else None  # one dtype: floating tensors only
    if want is None:
        return None
    try:
        return np.dtype(want)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{t.file}: tensor {t.name!r}: {want!r} is not a dtype: {e}") from e


def _result_dtype(jax: Any, dtype: DtypeArg, t: _st.TensorInfo, stored: np.dtype) -> np.dtype:
    """The dtype a tensor is returned in, canonical for this jax (64-bit types become 32-bit
    ones unless jax_enable_x64 is on, as jax.device_put would make them)."""
    want = _wanted(dtype, t, stored)
    try:
        out = np.dtype(jax.dtypes.canonicalize_dtype(stored if want is None else want))
    except (TypeError, ValueError) as e:
        raise TypeError(f"{t.file}: tensor {t.name!r}: dtype {want!r} is not one jax can hold: {e}") from e
    if out.kind not in "biufc" and not _is_float(out):  # strings, objects, records
        raise TypeError(f"{t.file}: tensor {t.name!r}: dtype {out} is not one jax can hold (numbers "
                        "and bool only)")
    return out


# ---------------------------------------------------------------------------------------
# load_jax


@dataclasses.dataclass
class _Piece:
    """One distinct box of one tensor: read once, put on every device that holds it."""

    tensor: int                 # index into the load's tensors
    box: Box
    devices: List[Any]
    nbytes: int


@dataclasses.dataclass
class _Tensor:
    file: int
    info: _st.TensorInfo
    stored: np.dtype
    result: np.dtype
    sharding: Any
    pending: int = 0                                       # boxes not read yet
    hosts: Dict[Box, np.ndarray] = dataclasses.field(default_factory=dict)


def _aligned(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


def _groups(pieces: Sequence[_Piece], limit: int) -> List[List[_Piece]]:
    """Pieces packed into groups of whole tensors, at most ``limit`` bytes each; a tensor
    whose boxes (this process's share) exceed it is a group of its own. A tensor's boxes
    are never split over groups: the engine merges a strided box's runs across the gaps
    between them, which are the other boxes' bytes; read in another call, they would be
    read again."""
    out: List[List[_Piece]] = []
    fill = 0
    k = 0
    while k < len(pieces):
        j = k
        while j < len(pieces) and pieces[j].tensor == pieces[k].tensor:
            j += 1
        size = sum(_aligned(p.nbytes) for p in pieces[k:j])
        if not out or (fill and fill + size > limit):
            out.append([])
            fill = 0
        out[-1].extend(pieces[k:j])
        fill += size
        k = j
    return out


def _aligned_empty(n: int) -> np.ndarray:
    """n bytes starting at a 64-byte boundary (numpy itself guarantees 16)."""
    raw = np.empty(n + _ALIGN, np.uint8)
    skip = -raw.ctypes.data % _ALIGN
    return raw[skip:skip + n]


def _read_group(ck: _st._Checkpoint, tensors: Sequence[_Tensor], group: Sequence[_Piece],
                probes: Sequence[Tuple[int, int]], storage_options: Optional[Mapping[str, Any]],
                threads: Optional[int], max_gap: Optional[int], counts: Dict[str, int]
                ) -> Tuple[np.ndarray, List[int]]:
    """One engine call for every run of every box of ``group`` (and the truncation probes).
    Returns the buffer and where each piece starts in it."""
    starts: List[int] = []
    src: List[np.ndarray] = []
    offs: List[np.ndarray] = []
    lens: List[np.ndarray] = []
    at: List[np.ndarray] = []
    pos = 0
    for p in group:
        t = tensors[p.tensor]
        starts.append(pos)
        rel, run = box_runs(t.info.shape, t.stored.itemsize, p.box)
        if run:
            src.append(np.full(rel.size, t.file, np.uint32))
            offs.append(rel + t.info.offset)
            lens.append(np.full(rel.size, run, np.int64))
            at.append(pos + np.arange(rel.size, dtype=np.int64) * run)
        pos += _aligned(p.nbytes)
    for i, off in probes:  # one byte at the data end of remote files (truncation)
        src.append(np.array([i], np.uint32))
        offs.append(np.array([off], np.int64))
        lens.append(np.array([1], np.int64))
        at.append(np.array([pos], np.int64))
        pos += 1
    buf = _aligned_empty(pos)
    if not src:
        return buf, starts
    which = np.concatenate(src)
    used = sorted(set(int(w) for w in np.unique(which)))
    remap = np.zeros(len(ck.files), np.uint32)
    remap[used] = np.arange(len(used), dtype=np.uint32)
    try:
        _ranges.read_into([ck.files[i].source for i in used], remap[which],
                          np.concatenate(offs).astype(np.uint64), np.concatenate(lens).astype(np.uint64),
                          buf, np.concatenate(at).astype(np.uint64), storage_options=storage_options,
                          threads=threads, max_gap=max_gap, stats=counts)
    except StorageError as e:
        err = _st._truncated(e, [ck.files[i] for i in used])
        if err is e:
            raise
        raise err from e
    return buf, starts


def _landed(arrays: Sequence[Any]) -> None:
    """Waits until the transfers of ``arrays`` are done; jax then drops its references to
    their host buffers (on CPU devices jax may keep 64-byte-aligned host memory as the
    device buffer itself: there the host buffers are the results)."""
    for a in arrays:
        a.block_until_ready()


def _reach(tensors: Sequence[_Tensor], pieces: Sequence[_Piece]) -> Dict[int, int]:
    """file index -> the end of the last byte this process reads of it (the truncation probe
    of a remote file is needed where this process's own reads stop short of its data end)."""
    out: Dict[int, int] = {}
    for p in pieces:
        t = tensors[p.tensor]
        rel, run = box_runs(t.info.shape, t.stored.itemsize, p.box)
        if run:
            out[t.file] = max(out.get(t.file, 0), t.info.offset + int(rel[-1]) + run)
    return out


def load_jax(path: Any, shardings: ShardingsArg, *, names: Optional[Sequence[str]] = None,
             dtype: DtypeArg = None, storage_options: Optional[Mapping[str, Any]] = None,
             threads: Optional[int] = None, group_bytes: Optional[int] = None,
             max_gap: Optional[int] = None, stats: Optional[Dict[str, int]] = None) -> Dict[str, Any]:
    """See :func:`lsio.safetensors.load_jax`."""
    jax = _st.import_for("jax", "load_jax", "JAX", "jax")
    limit = _options.size_option(group_bytes, "jax_group_bytes", GROUP_BYTES, lo=1)
    ck = _st._open(path, names, storage_options, threads)
    tensors: List[_Tensor] = []
    pieces: List[_Piece] = []
    for i, t in ck.chosen:
        where = ck.files[i].display
        stored = _st._numpy_dtype(t)
        result = _result_dtype(jax, dtype, t, stored)
        sh = _sharding_for(jax, shardings, t, stored, where)
        try:
            index_map = sh.addressable_devices_indices_map(t.shape)
        except Exception as e:  # jax says why (rank, divisibility) in its own words
            raise ValueError(f"{where}: tensor {t.name!r} of shape {list(t.shape)}: its sharding "
                             f"{sh} does not fit it: {e}") from e
        k = len(tensors)
        tensors.append(_Tensor(i, t, stored, result, sh))
        by_box: Dict[Box, List[Any]] = {}
        for dev, index in index_map.items():
            by_box.setdefault(_box_of(index, t.shape, where, t.name), []).append(dev)
        for box, devs in by_box.items():
            n = int(np.prod([b - a for a, b in box], dtype=np.int64)) * stored.itemsize
            pieces.append(_Piece(k, box, devs, n))
        tensors[-1].pending = len(by_box)
    if max_gap is None and _options._env("max_gap") is None and any(f.remote for f in ck.files):
        # Between one process's boxes lie the other processes' shards: merged, they are read
        # for nothing, on a link that is the bound. The remote default (1 MiB, made for chunk
        # reads) would merge a small tensor's halves; 64 KiB still folds narrow strided rows
        # into few requests.
        max_gap = REMOTE_GAP
    counts: Dict[str, int] = {}
    probes = _st._probes(ck, _reach(tensors, pieces))
    # Groups follow the files' byte order (results keep the caller's): a tensor lying between
    # two of one group, within max_gap, would otherwise be read by that group's merged
    # request and again by its own group.
    in_file_order = sorted(pieces, key=lambda p: (tensors[p.tensor].file, tensors[p.tensor].info.offset))
    groups = _groups(in_file_order, limit) or [[]]
    results: List[Any] = [None] * len(tensors)
    in_flight: List[List[Any]] = []
    for g, group in enumerate(groups):
        # Group g-1 transfers while group g is read; group g-2's transfers must be done
        # first, so that at most two groups' host buffers are alive.
        if len(in_flight) > 1:
            _landed(in_flight.pop(0))
        buf, starts = _read_group(ck, tensors, group, probes if g == 0 else (), storage_options,
                                  threads, max_gap, counts)
        done: List[Any] = []
        for p, pos in zip(group, starts):
            t = tensors[p.tensor]
            host = buf[pos:pos + p.nbytes].view(t.stored).reshape([b - a for a, b in p.box])
            _st._swap(host.reshape(-1).view(np.uint8), _st._DTYPES[t.info.dtype][4])
            t.hosts[p.box] = host if t.result == t.stored else host.astype(t.result)
            t.pending -= 1
            if t.pending == 0:
                # Every box of the tensor is on the host (its boxes share a group): one call
                # puts all its shards (jax batches the transfers; a device_put per shard
                # costs ~0.1 ms of Python each).
                hosts, shape, name, where = t.hosts, t.info.shape, t.info.name, ck.files[t.file].display
                arr = jax.make_array_from_callback(
                    shape, t.sharding,
                    lambda index, h=hosts, sh=shape, n=name, w=where: h[_box_of(index, sh, w, n)])
                results[p.tensor] = arr
                t.hosts = {}
                done.append(arr)
        in_flight.append(done)
        del buf
    for k, t in enumerate(tensors):
        if results[k] is None:  # no device of this process holds a part of it: nothing to read
            try:
                results[k] = jax.make_array_from_single_device_arrays(t.info.shape, t.sharding, [],
                                                                      dtype=t.result)
            except TypeError:  # no dtype= yet: such an array cannot be made without data
                raise _st._error(UnsupportedError, ck.files[t.file].display,
                                 f"tensor {t.info.name!r}: no device of this process holds a shard of it, "
                                 f"and this jax ({jax.__version__}) cannot make such an array "
                                 "(make_array_from_single_device_arrays has no dtype=): upgrade jax") from None
    out = {t.info.name: a for t, a in zip(tensors, results)}
    if stats is not None:
        add = dict(counts, tensors=len(tensors), shards_read=len(pieces), groups=len(groups),
                   device_puts=sum(len(p.devices) for p in pieces),
                   bytes_needed=sum(p.nbytes for p in pieces))
        for key, v in add.items():
            stats[key] = stats.get(key, 0) + int(v)
    return out


# ---------------------------------------------------------------------------------------
# The chunk plan (whole-chunk reads, the design's scheme)


@dataclasses.dataclass(frozen=True)
class Chunk:
    """Consecutive tensors of one file, read as one range ``[offset, offset + nbytes)``.

    ``index`` is the chunk's place in the plan, ``owner`` the process that reads it under
    the design's rule (``index % process_count``), ``file`` the file (URL userinfo removed),
    ``tensors`` the names it holds in file order. The range covers anything stored between
    them (tensors not chosen by ``names``)."""

    index: int
    file: str
    offset: int
    nbytes: int
    tensors: Tuple[str, ...]
    owner: int
    _source: str = dataclasses.field(default="", repr=False, compare=False)
    _infos: Tuple[_st.TensorInfo, ...] = dataclasses.field(default=(), repr=False, compare=False)
    # The file as the plan saw it: header length and digest, end of its data.
    _header_len: int = dataclasses.field(default=0, repr=False, compare=False)
    _header_digest: bytes = dataclasses.field(default=b"", repr=False, compare=False)
    _data_end: int = dataclasses.field(default=0, repr=False, compare=False)


def _distributed_running(jax: Any) -> bool:
    """Whether jax.distributed.initialize() has run (jax.distributed.is_initialized, or on jax
    versions without it, the client it sets up)."""
    initialized = getattr(jax.distributed, "is_initialized", None)
    if initialized is not None:
        return bool(initialized())
    try:
        from jax._src.distributed import global_state
    except ImportError:
        raise RuntimeError("cannot tell whether jax.distributed is initialized in this jax "
                           f"({jax.__version__}): pass process_count= to chunk_plan") from None
    return global_state.client is not None


def chunk_plan(path: Any, *, chunk_bytes: Optional[int] = None, process_count: Optional[int] = None,
               names: Optional[Sequence[str]] = None, storage_options: Optional[Mapping[str, Any]] = None,
               threads: Optional[int] = None) -> List[Chunk]:
    """See :func:`lsio.safetensors.chunk_plan`."""
    limit = _options.size_option(chunk_bytes, "chunk_bytes", CHUNK_BYTES, lo=1)
    if process_count is None:
        # jax.process_count() would start jax's backends, after which
        # jax.distributed.initialize() refuses to run: ask only once it has run.
        jax = sys.modules.get("jax")
        process_count = int(jax.process_count()) if jax is not None and _distributed_running(jax) else 1
    if isinstance(process_count, bool) or not isinstance(process_count, int) or process_count < 1:
        raise ValueError(f"process_count must be an integer >= 1, got {process_count!r}")
    ck = _st._open(path, names, storage_options, threads)
    order = sorted(ck.chosen, key=lambda it: (it[0], it[1].offset, it[1].nbytes))
    spans: List[Tuple[int, List[_st.TensorInfo]]] = []
    for i, t in order:
        if spans and spans[-1][0] == i:
            first = spans[-1][1][0]
            if t.offset + t.nbytes - first.offset <= limit:
                spans[-1][1].append(t)
                continue
        spans.append((i, [t]))
    plan = []
    for k, (i, ts) in enumerate(spans):
        f = ck.files[i]
        begin = ts[0].offset
        end = max(t.offset + t.nbytes for t in ts)
        plan.append(Chunk(k, f.display, begin, end - begin, tuple(t.name for t in ts), k % process_count,
                          f.source, tuple(ts), f.header_len, f.header_digest, f.data_end))
    return plan


def load_chunk(chunk: Chunk, *, dtype: DtypeArg = None, storage_options: Optional[Mapping[str, Any]] = None,
               threads: Optional[int] = None) -> Dict[str, np.ndarray]:
    """See :func:`lsio.safetensors.load_chunk`."""
    if not isinstance(chunk, Chunk) or not chunk._source:
        raise TypeError(f"chunk must be a Chunk from lsio.safetensors.chunk_plan, got {type(chunk).__name__}")
    # The header is read again with the chunk (one call): a file replaced since the plan was
    # made would otherwise be sliced with the old layout.
    head = 8 + chunk._header_len
    buf = _aligned_empty(head + chunk.nbytes)
    try:
        _ranges.read_into([chunk._source], np.zeros(2, np.uint32), np.array([0, chunk.offset], np.uint64),
                          np.array([head, chunk.nbytes], np.uint64), buf, np.array([0, head], np.uint64),
                          storage_options=storage_options, threads=threads)
    except StorageError as e:
        f = _st._File(chunk._source, chunk.file, _st._storage.is_remote(chunk._source))
        f.data_end = chunk._data_end
        err = _st._truncated(e, [f])
        if err is e:
            raise
        raise err from e
    if (int(buf[:8].view("<u8")[0]) != chunk._header_len
            or hashlib.sha256(buf[8:head].tobytes()).digest() != chunk._header_digest):
        raise _st._storage_error(errno.ESTALE, chunk.file, "the file changed since chunk_plan read "
                                 "its header (another header now): make the plan again")
    body = buf[head:]
    out: Dict[str, np.ndarray] = {}
    for t in chunk._infos:
        stored = _st._numpy_dtype(t)
        a = body[t.offset - chunk.offset:t.offset - chunk.offset + t.nbytes].view(stored).reshape(t.shape)
        _st._swap(a.reshape(-1).view(np.uint8), _st._DTYPES[t.dtype][4])
        want = _wanted(dtype, t, stored)
        if want is not None and want != stored:
            a = a.astype(want)
        out[t.name] = a
    return out

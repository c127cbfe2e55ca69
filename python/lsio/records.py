"""``lsio.records``: zrecord stores of variable-length records, gathered by index.

A store holds N records with ids ``0..N-1``; a record is a 1-D array of the store's dtype
(or a byte string for ``dtype=bytes``). Reading is a gather: ``r.take(indices)`` reads any
records in one engine call (planned, coalesced, io_uring, decoded on the worker threads
with the GIL released) and returns a :class:`RecordBatch` in index order. Writing appends
at the end of a chunk file and points the offset table at it.

On disk (``path/``; docs/guide/records.md has the whole format)::

    meta.json        the published state: length, chunks, open chunks' write positions,
                     dtype, compression (replaced atomically: write, fsync, rename)
    offset           the offset table: one 16-byte entry per id at 16 x id,
                     [chunk u32][offset u64][physical_length u32], little-endian
    chunk/<n>.zr     chunk files: records' bytes end to end, in the order written
    .lock            held (flock) by the one writer

Guarantees: one writer (any process) and any number of readers (any processes). A writer
makes the records' bytes and offset entries durable (fsync) before it publishes the new
length in meta.json, so a reader never sees an id whose bytes are missing, and a writer
killed at any point loses at most the records it had not published. Entries of published
records are repointed (modify, delete) with single 16-byte stores, so a concurrent reader
sees the old entry or the new one. Corrupt files raise :class:`lsio.CorruptDataError`
naming the record, its chunk file and byte range.
"""

from __future__ import annotations

import builtins
import collections
import concurrent.futures
import contextlib
import errno
import fcntl
import json
import mmap
import os
import shutil
import sys
import threading
import uuid
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _core, _options, _ranges, _remote, _storage
from .errors import BoundsError, CorruptDataError, FormatError, NotFoundError, StorageError, storage_error

__all__ = ["create", "open", "Records", "RecordBatch", "collate", "RaggedCollate"]

FORMAT = "zrecord"
VERSION = 1
ENTRY_BYTES = 16
EMPTY_CHUNK = 0xFFFFFFFF   # chunk of an empty record's entry (length 0, nothing stored)
TABLE_GROW = 1 << 20       # the offset table grows by 1M entries (16 MiB) at a time
META_MAX = 1 << 20         # a meta.json larger than this is not a zrecord store's
MAX_WRITERS = 4
_MAX_LENGTH = 2 ** 59      # 16 bytes per id must stay below 2**63
_MAX_MAPS = 1024           # chunks a handle keeps mapped (vm.max_map_count is 65530)
_KIND = {None: 0, "zstd": 1, "deflate": 2}
_LEVELS = {"zstd": (3, -131072, 22), "deflate": (6, 0, 12)}
# Remote offset-table reads: entries of one batch within 64 KiB merge into one request.
_REMOTE_TABLE_GAP = 64 << 10

PathLike = Union[str, "os.PathLike[str]"]


# ---- the published state ------------------------------------------------------------------

def _dtype_of(spec: Any) -> Optional[np.dtype]:
    """None for byte-string records, else the records' numpy dtype (fixed-size, no objects)."""
    if spec is bytes or spec == "bytes":
        return None
    dt = np.dtype(spec)
    if dt.hasobject or dt.itemsize == 0 or dt.kind in "OV" and dt.fields is None:
        raise TypeError(f"records hold fixed-size items: dtype {dt} is not supported (use dtype=bytes for raw bytes)")
    return dt


def _dtype_name(dt: Optional[np.dtype]) -> Any:
    """meta.json's "dtype": "bytes", a dtype string, or for structured and subarray dtypes an
    object that numpy rebuilds exactly (field offsets and item size included: a padded or
    aligned struct's ``descr`` would come back with its padding as fields)."""
    if dt is None:
        return "bytes"
    if dt.subdtype is not None:
        base, shape = dt.subdtype
        return {"subarray": _dtype_name(base), "shape": list(shape)}
    if dt.fields is not None:
        names = list(dt.names)
        return {"names": names, "formats": [_dtype_name(dt.fields[n][0]) for n in names],
                "offsets": [int(dt.fields[n][1]) for n in names], "itemsize": int(dt.itemsize)}
    return dt.str


def _tuples(x: Any) -> Any:
    return tuple(_tuples(v) for v in x) if isinstance(x, list) else x


def _dtype_from_meta(d: Any) -> Optional[np.dtype]:
    """The inverse of _dtype_name; also reads the ``descr`` lists earlier versions wrote."""
    if d == "bytes":
        return None
    if isinstance(d, str):
        return np.dtype(d)
    if isinstance(d, list):  # a structured dtype's descr (JSON made its tuples lists)
        return np.dtype([_tuples(f) for f in d])
    if isinstance(d, dict) and set(d) == {"subarray", "shape"}:
        if not isinstance(d["shape"], list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in d["shape"]):
            raise ValueError("a subarray's shape must be a list of integers")
        return np.dtype((_dtype_from_meta(d["subarray"]), tuple(d["shape"])))
    if isinstance(d, dict) and set(d) == {"names", "formats", "offsets", "itemsize"}:
        if not all(isinstance(d[k], list) for k in ("names", "formats", "offsets")):
            raise ValueError("names, formats and offsets must be lists")
        return np.dtype({"names": d["names"], "formats": [_dtype_from_meta(f) for f in d["formats"]],
                         "offsets": d["offsets"], "itemsize": d["itemsize"]})
    raise ValueError("not a dtype string, structured dtype or subarray")


def _check_meta(meta: Any, where: str) -> Dict[str, Any]:
    def bad(why: str) -> FormatError:
        e = FormatError(f"{where}: not a zrecord store's meta.json: {why}")
        e.path = where
        return e

    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise bad('"format" must be "zrecord"')
    if meta.get("version") != VERSION:
        raise bad(f"version {meta.get('version')!r} (this lsio reads version {VERSION})")
    if meta.get("compression") not in _KIND:
        raise bad(f'"compression" {meta.get("compression")!r} is not one of null, "zstd", "deflate"')
    for key, top in (("length", _MAX_LENGTH), ("chunk_records", EMPTY_CHUNK), ("num_chunks", EMPTY_CHUNK),
                     ("generation", 2 ** 62), ("epoch", 2 ** 62), ("stored_bytes", 2 ** 62),
                     ("writers", MAX_WRITERS)):
        v = meta.get(key)
        if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= top:
            raise bad(f'"{key}" must be an integer in 0..{top}, got {v!r}')
    if meta["chunk_records"] < 1:
        raise bad('"chunk_records" must be at least 1')
    lo, hi = _LEVELS[meta["compression"]][1:] if meta.get("compression") in _LEVELS else (0, 0)
    if not isinstance(meta.get("level"), int) or isinstance(meta.get("level"), bool) or not lo <= meta["level"] <= hi:
        raise bad(f'"level" must be an integer in {lo}..{hi}, got {meta.get("level")!r}')
    if not 1 <= meta["writers"] <= MAX_WRITERS:
        raise bad(f'"writers" must be in 1..{MAX_WRITERS}')
    if meta["num_chunks"] > EMPTY_CHUNK:
        raise bad(f'"num_chunks" {meta["num_chunks"]} exceeds the 32-bit chunk ids')
    d = meta.get("dtype")
    if not isinstance(d, (str, list, dict)):  # (np.dtype(None) would be float64)
        raise bad(f'"dtype" must be a dtype string or a structured dtype, got {d!r}')
    try:
        dt = _dtype_from_meta(d)
        _dtype_of(bytes if dt is None else dt)
    except (TypeError, ValueError, KeyError, RecursionError) as e:
        raise bad(f'"dtype" {meta.get("dtype")!r}: {e}') from None
    opens = meta.get("open_chunks")
    if not isinstance(opens, list) or len(opens) > MAX_WRITERS:
        raise bad('"open_chunks" must be a list of at most 4 chunks')
    for c in opens:
        if not isinstance(c, dict) or any(not isinstance(c.get(k), int) or isinstance(c.get(k), bool) or c.get(k) < 0
                                          for k in ("id", "write_pos", "records")):
            raise bad('each of "open_chunks" needs non-negative integers "id", "write_pos", "records"')
        if c["id"] >= meta["num_chunks"] or c["records"] > meta["chunk_records"] or c["write_pos"] > 2 ** 62:
            raise bad(f"open chunk {c['id']} is not one of the store's {meta['num_chunks']} chunks, or over-full")
    if len({c["id"] for c in opens}) != len(opens):
        raise bad('"open_chunks" names a chunk twice')
    if not isinstance(meta.get("uuid"), str) or not 0 < len(meta["uuid"]) <= 64:
        raise bad(f'"uuid" must be a string, got {meta.get("uuid")!r}')
    for key in ("offset_file", "chunk_dir"):
        v = meta.get(key)
        if not isinstance(v, str) or not v or "/" in v or v.startswith("."):
            raise bad(f'"{key}" must be a plain file name, got {v!r}')
    return meta


def _meta_dtype(meta: Dict[str, Any]) -> Optional[np.dtype]:
    return _dtype_from_meta(meta["dtype"])


def _entries_of_bytes(buf: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(chunk, offset, length) of packed 16-byte entries (a remote read, not a live table)."""
    raw = buf.reshape(-1, ENTRY_BYTES)
    chunk = raw[:, 0:4].copy().view("<u4").reshape(-1)
    offset = raw[:, 4:12].copy().view("<u8").reshape(-1)
    length = raw[:, 12:16].copy().view("<u4").reshape(-1)
    return chunk, offset, length


# ---- ragged batches -----------------------------------------------------------------------

class RecordBatch:
    """Records gathered by :meth:`Records.take`, in the order asked for.

    ``values`` holds the records end to end (a 1-D array of the store's dtype; ``uint8`` for
    byte-string stores) and ``offsets`` (int64, ``len + 1``) where each starts: record ``i``
    is ``values[offsets[i]:offsets[i + 1]]``. A batch taken with ``copy=False`` holds views
    of the mapped chunk files instead, and builds ``values`` (a copy) only when asked.
    The batch stays valid until :meth:`release` or until it is dropped.
    """

    __slots__ = ("_values", "_offsets", "_views", "_bytes", "_dtype")

    def __init__(self, values: Optional[np.ndarray], offsets: np.ndarray, *, is_bytes: bool = False,
                 views: Optional[List[np.ndarray]] = None, dtype: Any = None) -> None:
        self._values = values
        self._offsets = offsets
        self._views = views
        self._bytes = is_bytes
        self._dtype = np.dtype(dtype if dtype is not None else (values.dtype if values is not None else np.uint8))

    @property
    def offsets(self) -> np.ndarray:
        return self._offsets

    @property
    def values(self) -> np.ndarray:
        if self._values is None:
            if self._views is None:
                raise ValueError("the batch was released")
            self._values = np.concatenate(self._views) if self._views else np.empty(0, self._dtype)
        return self._values

    @property
    def lengths(self) -> np.ndarray:
        """Items per record (int64)."""
        return np.diff(self._offsets)

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def _array(self, i: int) -> np.ndarray:
        if self._views is not None:
            return self._views[i]
        if self._values is None:
            raise ValueError("the batch was released")
        return self._values[self._offsets[i]:self._offsets[i + 1]]

    def __getitem__(self, i: int) -> Any:
        n = len(self)
        i = int(i)
        if not -n <= i < n:
            raise IndexError(f"record {i} of a batch of {n}")
        a = self._array(i % n)
        return a.tobytes() if self._bytes else a

    def __iter__(self) -> Iterator[Any]:
        return (self[i] for i in range(len(self)))

    def arrays(self) -> List[np.ndarray]:
        """The records as numpy arrays (views of the batch; ``uint8`` for byte strings)."""
        return [self._array(i) for i in range(len(self))]

    def tolist(self) -> List[Any]:
        """The records as a list: ``bytes`` for byte-string stores, numpy arrays otherwise."""
        return list(self)

    def to_padded(self, pad_value: Any = 0, length: Optional[int] = None) -> Tuple[np.ndarray, np.ndarray]:
        """``(padded, lengths)``: a ``(len, length)`` array, record ``i`` in row ``i`` and the
        rest ``pad_value``; ``length`` defaults to the longest record (longer ones are cut)."""
        lengths = self.lengths
        width = int(lengths.max()) if length is None and len(lengths) else int(length or 0)
        values = self.values
        out = np.full((len(self), width), pad_value, dtype=values.dtype)
        keep = np.minimum(lengths, width)
        mask = np.arange(width)[None, :] < keep[:, None]
        if width and len(self):
            take = (self._offsets[:-1, None] + np.arange(width)[None, :])[mask]
            out[mask] = values[take]
        return out, lengths

    def to_torch(self, layout: str = "padded", pad_value: Any = 0) -> Any:
        """The batch as torch tensors: ``"padded"`` -> ``(padded, lengths)``; ``"nested"`` -> a
        jagged nested tensor over the values (no copy); ``"flat"`` -> ``(values, offsets)``."""
        import torch

        if layout == "padded":
            padded, lengths = self.to_padded(pad_value)
            return torch.from_numpy(_native_order(padded)), torch.from_numpy(lengths)
        values = torch.from_numpy(np.ascontiguousarray(_native_order(self.values)))
        offsets = torch.from_numpy(np.ascontiguousarray(self._offsets))
        if layout == "flat":
            return values, offsets
        if layout == "nested":
            return torch.nested.nested_tensor_from_jagged(values, offsets)
        raise ValueError(f'layout must be "padded", "nested" or "flat", got {layout!r}')

    def release(self) -> None:
        """Drops the batch's buffers (and its hold on mapped chunk files) now."""
        self._values = None
        self._views = None

    def __repr__(self) -> str:
        return f"<lsio.records.RecordBatch: {len(self)} records>"


def _native_order(a: np.ndarray) -> np.ndarray:
    """torch takes native byte order only (a big-endian store's records are swapped)."""
    if a.dtype.byteorder == ">" or (a.dtype.byteorder == "<" and sys.byteorder == "big"):
        return a.astype(a.dtype.newbyteorder("="))
    return a


class RaggedCollate:
    """A ``collate_fn`` for torch's ``DataLoader`` over a :class:`Records` store.

    The DataLoader hands it what ``Records.__getitems__`` returned (a :class:`RecordBatch`)
    or a list of records; it returns :meth:`RecordBatch.to_torch` of ``layout``."""

    def __init__(self, layout: str = "padded", pad_value: Any = 0) -> None:
        if layout not in ("padded", "nested", "flat"):
            raise ValueError(f'layout must be "padded", "nested" or "flat", got {layout!r}')
        self.layout = layout
        self.pad_value = pad_value

    def __call__(self, samples: Any) -> Any:
        if not isinstance(samples, RecordBatch):
            arrays = [np.frombuffer(s, np.uint8) if isinstance(s, (bytes, bytearray)) else np.asarray(s)
                      for s in samples]
            lengths = np.array([len(a) for a in arrays], dtype=np.int64)
            offsets = np.zeros(len(arrays) + 1, dtype=np.int64)
            np.cumsum(lengths, out=offsets[1:])
            values = np.concatenate(arrays) if arrays else np.empty(0, np.uint8)
            samples = RecordBatch(values, offsets)
        return samples.to_torch(self.layout, self.pad_value)


collate = RaggedCollate()


# ---- the store ----------------------------------------------------------------------------

def _local_root(path: PathLike) -> str:
    return _storage.local_path(path)


def _write_meta(root: str, meta: Dict[str, Any], durable: bool) -> None:
    """Publishes `meta`: written beside, made durable, renamed over meta.json."""
    tmp = os.path.join(root, f".meta.json.{os.getpid()}.{threading.get_ident()}")
    data = json.dumps(meta, separators=(",", ":"), sort_keys=True).encode()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, os.path.join(root, "meta.json"))
    if durable:
        _fsync_dir(root)


def _open_readonly(path: str, what: str) -> int:
    try:
        return os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        raise NotFoundError(errno.ENOENT, f"{path!r}: {what} is missing", path) from None


def _pwrite_all(fd: int, data: memoryview, pos: int) -> None:
    """All of `data` at `pos` (one pwrite stops at 2 GiB, and may stop short anywhere)."""
    while data:
        wrote = os.pwrite(fd, data, pos)
        data = data[wrote:]
        pos += wrote


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def create(path: PathLike, dtype: Any = bytes, *, compression: Optional[str] = None, level: Optional[int] = None,
           chunk_records: int = 8192, writers: int = 1, durable: bool = True, threads: Optional[int] = None,
           exist_ok: bool = False) -> "Records":
    """Creates an empty store at ``path`` (a new or empty directory) and opens it for writing.

    Parameters
    ----------
    dtype:
        ``bytes`` (records are byte strings) or a numpy dtype (records are 1-D arrays of it).
    compression:
        ``None``, ``"zstd"`` or ``"deflate"`` (zlib streams): each record compressed alone.
    level:
        zstd -131072..22 (negative: zstd's fast levels; default 3), deflate 0..12 (default 6;
        libdeflate's levels).
    chunk_records:
        Records per chunk file (versions written by modifies count too): a full chunk is
        closed and the next records start a new one.
    writers:
        1-4 open chunks an append's records are spread over, written by that many threads.
    durable:
        ``True``: data and offsets are fsynced before each publication (safe against power
        loss). ``False``: not (still safe against a writer process dying).
    exist_ok:
        Open an existing store for writing instead of raising :class:`FileExistsError`,
        provided its records are what was asked for (same dtype and compression, and level
        when given; its chunk_records and writers stay as they are).
    """
    root = _local_root(path)
    if _storage.is_remote(str(path)):
        raise ValueError("lsio.records writes local stores only; remote stores are read-only")
    dt = _dtype_of(dtype)
    if dt is not None and _dtype_from_meta(json.loads(json.dumps(_dtype_name(dt)))) != dt:
        raise TypeError(f"dtype {dt} cannot be stored in meta.json exactly (field titles?)")
    if compression not in _KIND:
        raise ValueError(f'compression must be None, "zstd" or "deflate", got {compression!r}')
    if compression is not None:
        lo, hi = _LEVELS[compression][1:]
        lvl = _LEVELS[compression][0] if level is None else operator_index(level, "level")
        if not lo <= lvl <= hi:
            raise ValueError(f"{compression} level must be in {lo}..{hi}, got {lvl}")
    elif level is not None:
        raise ValueError("level applies to compressed stores only")
    else:
        lvl = 0
    chunk_records = operator_index(chunk_records, "chunk_records")
    if not 1 <= chunk_records < 2 ** 32:
        raise ValueError(f"chunk_records must be in 1..2**32-1, got {chunk_records}")
    writers = operator_index(writers, "writers")
    if not 1 <= writers <= MAX_WRITERS:
        raise ValueError(f"writers must be in 1..{MAX_WRITERS}, got {writers}")
    _options.threads_option(threads)  # checked before the lock is taken (the handle takes it over)
    os.makedirs(root, exist_ok=True)
    # The writer lock first: two processes creating the same store must not both write it.
    lock = os.open(os.path.join(root, ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise BlockingIOError(errno.EWOULDBLOCK, f"another writer holds the zrecord store {root!r}",
                                  root) from None
        if os.path.exists(os.path.join(root, "meta.json")):
            if not exist_ok:
                raise FileExistsError(errno.EEXIST, f"{root!r} already holds a zrecord store", root)
            where = os.path.join(root, "meta.json")
            with builtins.open(where, "rb") as f:
                data = f.read(META_MAX + 1)
            try:
                have = _check_meta(json.loads(data), where)
            except ValueError as e:  # not JSON (FormatError is one too, and passes as it is)
                raise e if isinstance(e, FormatError) else FormatError(f"{where}: not JSON: {e}") from None
            # What the records are must match; layout settings (chunk_records, writers) need not.
            differ = [k for k, same in (("dtype", _dtype_from_meta(have["dtype"]) == dt),
                                        ("compression", have["compression"] == compression),
                                        ("level", level is None or have["level"] == lvl)) if not same]
            if differ:
                raise FileExistsError(errno.EEXIST, f"{root!r} holds a zrecord store with another "
                                      + ", ".join(f"{k} ({have[k]!r})" for k in differ), root)
        else:
            if any(not n.startswith(".") for n in os.listdir(root)):
                raise FileExistsError(errno.EEXIST, f"{root!r} is not empty", root)
            os.makedirs(os.path.join(root, "chunk"), exist_ok=True)
            fd = os.open(os.path.join(root, "offset"), os.O_RDWR | os.O_CREAT, 0o644)
            os.close(fd)
            meta = {"format": FORMAT, "version": VERSION, "length": 0, "chunk_records": chunk_records,
                    "num_chunks": 0, "open_chunks": [], "dtype": _dtype_name(dt), "compression": compression,
                    "level": lvl, "writers": writers, "generation": 0, "epoch": 0, "offset_file": "offset",
                    "chunk_dir": "chunk", "stored_bytes": 0, "uuid": uuid.uuid4().hex}
            _write_meta(root, meta, durable)
    except BaseException:
        os.close(lock)
        raise
    # The handle takes the lock as it is held: dropping it in between would let another
    # process's writer in first.
    return Records(root, "a", threads=threads, durable=durable, _lock_fd=lock)


def _reopen(root: str, storage_options: Optional[Mapping[str, Any]], threads: Optional[int],
            io: Optional[str]) -> "Records":
    """Unpickling: the store opened again, read-only."""
    return Records(root, "r", storage_options=storage_options, threads=threads, io=io)


def operator_index(value: Any, name: str) -> int:
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    return value.__index__()


def open(path: PathLike, mode: str = "r", *, storage_options: Optional[Mapping[str, Any]] = None,
         threads: Optional[int] = None, io: Optional[str] = None, durable: bool = True) -> "Records":
    """Opens the store at ``path``: ``mode="r"`` (read-only; local, ``s3://``, ``gs://``,
    ``http(s)://`` with ``storage_options`` as :func:`lsio.open`) or ``"a"`` (the writer;
    local only, one per store at a time: another raises :class:`BlockingIOError`)."""
    if mode not in ("r", "a"):
        raise ValueError(f'mode must be "r" or "a", got {mode!r}')
    return Records(path, mode, storage_options=storage_options, threads=threads, io=io, durable=durable)


# Writer handles of this process: a forked child closes its copies of their descriptors.
_WRITERS: "weakref.WeakSet[Records]" = weakref.WeakSet()


def _after_fork_in_child() -> None:
    """The writer lock is a flock on the open file: a child's copy of its descriptor would
    keep the store locked after the parent closes its writer, for as long as the child lives
    (a DataLoader worker), and a dead writer's store could not be recovered meanwhile."""
    for w in list(_WRITERS):
        fds = [fd for fd in [w._lock_fd, w._table_fd, *w._chunk_fds.values()] if fd is not None]
        w._lock_fd, w._table_fd, w._chunk_fds, w._pool = None, None, {}, None
        for fd in fds:
            try:
                os.close(fd)
            except OSError:
                pass


os.register_at_fork(after_in_child=_after_fork_in_child)


class Records:
    """A zrecord store (:func:`open`, :func:`create`). ``len(r)``, ``r[i]``, ``r[indices]``,
    :meth:`take`; with ``mode="a"`` also :meth:`append`, ``r[i] = rec``, ``del r[i]``,
    :meth:`rebalance`. Picklable (a read-only handle: a DataLoader worker reopens it) and
    fork-safe for reading; a writer is used only by the process that opened it."""

    def __init__(self, path: PathLike, mode: str = "r", *, storage_options: Optional[Mapping[str, Any]] = None,
                 threads: Optional[int] = None, io: Optional[str] = None, durable: bool = True,
                 _lock_fd: Optional[int] = None) -> None:
        self._remote = isinstance(path, str) and _storage.is_remote(path)
        if self._remote:
            _storage.check_url(path)
            self._root = path.rstrip("/")
            if mode != "r":
                raise ValueError("remote stores are read-only: open them with mode=\"r\"")
        else:
            if storage_options is not None:
                raise ValueError("storage_options apply to URLs (s3://, gs://, http(s)://), not to local paths")
            self._root = _local_root(path)
        self._storage_options = dict(storage_options) if storage_options else None
        self._threads = _options.threads_option(threads)
        self._threads_given = threads
        self._io = io
        self._mode = mode
        self._durable = bool(durable)
        self._pid = os.getpid()
        self._lock = threading.RLock()
        self._lock_pid = self._pid
        self._meta_raw = b""      # meta.json's bytes as last read
        self._table: Optional[mmap.mmap] = None   # local: the offset table, mapped
        self._table_entries = 0
        # chunk -> (read-only mapping, bytes), least recently used first
        self._maps: "collections.OrderedDict[int, Tuple[Any, int]]" = collections.OrderedDict()
        self._sizes: Dict[int, int] = {}  # full chunk -> bytes (full chunks never change)
        self._closed = False
        # writer state
        self._lock_fd: Optional[int] = None
        self._table_fd: Optional[int] = None
        self._chunk_fds: Dict[int, int] = {}
        self._pool: Optional[ThreadPoolExecutor] = None
        self._broken: Optional[str] = None  # why writes stopped (a failure left the state unknown)
        if mode == "a":
            _WRITERS.add(self)
        if mode == "a" and _lock_fd is not None:
            self._lock_fd = _lock_fd  # create() holds it already
        elif mode == "a":
            self._lock_fd = os.open(os.path.join(self._root, ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(self._lock_fd)
                self._lock_fd = None
                raise BlockingIOError(errno.EWOULDBLOCK, f"another writer holds the zrecord store {self._root!r}",
                                      self._root) from None
        try:
            self._load_meta()
            if mode == "a":
                self._recover()
        except BaseException:
            self.close()
            raise

    # -- state --

    def _guard(self) -> "threading.RLock":
        """The handle's lock, made anew in a forked child: fork copies a lock in whatever state
        another thread of the parent held it, and the child would wait on it forever."""
        if self._lock_pid != os.getpid():
            self._lock = threading.RLock()
            self._lock_pid = os.getpid()
        return self._lock

    def _where(self, name: str) -> str:
        return f"{self._root}/{name}" if self._remote else os.path.join(self._root, name)

    def _chunk_path(self, chunk: int, meta: Optional[Dict[str, Any]] = None) -> str:
        m = meta or self._meta
        return self._where(f"{m['chunk_dir']}/{chunk}.zr") if self._remote else \
            os.path.join(self._root, m["chunk_dir"], f"{chunk}.zr")

    def _meta_bytes(self) -> bytes:
        where = self._where("meta.json")
        if self._remote:
            data = _remote.context(self._root, self._storage_options).store().get("meta.json", META_MAX + 1)
            if data is None:
                raise NotFoundError(errno.ENOENT, f"{where!r}: no zrecord store here (meta.json is missing)", where)
            return bytes(data)
        try:
            with builtins.open(where, "rb") as f:
                return f.read(META_MAX + 1)
        except FileNotFoundError:
            raise NotFoundError(errno.ENOENT, f"{where!r}: no zrecord store here (meta.json is missing)",
                                where) from None
        except OSError as e:
            raise storage_error(e.errno or errno.EIO, f"cannot read {where!r}: {e.strerror}", where) from None

    def _parse_meta(self, data: bytes) -> Dict[str, Any]:
        where = self._where("meta.json")
        if len(data) > META_MAX:
            raise FormatError(f"{where}: larger than a zrecord meta.json ({META_MAX} bytes)")
        try:
            meta = json.loads(data)
        except ValueError as e:
            raise FormatError(f"{where}: not JSON: {e}") from None
        return _check_meta(meta, where)

    def _load_meta(self, data: Optional[bytes] = None) -> None:
        if data is None:
            data = self._meta_bytes()
        meta = self._parse_meta(data)
        old = getattr(self, "_meta", None)
        if old is not None and (old["generation"], old["uuid"]) != (meta["generation"], meta["uuid"]):
            # Other files (a rebalance's generation, or another store created at this path):
            # nothing mapped or sized from the old ones holds.
            self._drop_maps()
        self._meta = meta
        self._meta_raw = data
        self._dtype = _meta_dtype(meta)
        self._item = 1 if self._dtype is None else self._dtype.itemsize
        self._kind = _KIND[meta["compression"]]

    def _drop_maps(self) -> None:
        self._maps = collections.OrderedDict()
        self._sizes = {}
        self._table = None
        self._table_entries = 0

    def _sync(self) -> bool:
        """Local readers: rereads meta.json when a publication replaced it. True when it
        changed. Compared by content, not by stat: a publication renames a new file over it,
        but a freed inode is reused and kernels before 6.13 stamp files with a coarse clock, so
        two quick publications can look alike to stat. Writers own the state, and remote
        stores are read as the snapshot opened (refresh() rereads)."""
        if self._remote or (self._mode == "a" and os.getpid() == self._pid):
            return False  # (a writer's forked child reads as a reader does)
        data = self._meta_bytes()
        if data == self._meta_raw:
            return False
        self._load_meta(data)
        return True

    def refresh(self) -> "Records":
        """Reads the newest published state (a reader following a writer sees its appends)."""
        with self._guard():
            self._check_open()
            self._load_meta()
        return self

    # -- properties --

    def __len__(self) -> int:
        """Records published (local readers: as of now; remote: as of open or refresh())."""
        with self._guard():
            if not self._closed:
                self._sync()
            return self._meta["length"]

    @property
    def dtype(self) -> Any:
        """``bytes`` or the records' numpy dtype."""
        return bytes if self._dtype is None else self._dtype

    @property
    def compression(self) -> Optional[str]:
        return self._meta["compression"]

    @property
    def chunk_records(self) -> int:
        return self._meta["chunk_records"]

    @property
    def num_chunks(self) -> int:
        return self._meta["num_chunks"]

    @property
    def path(self) -> str:
        return self._root

    @property
    def utilization(self) -> float:
        """``sum(record bytes) / sum(chunk bytes)``: the share of the chunk files that live
        records use (modified and deleted records' old bytes are the rest). 1.0 when empty.
        Beside a writer it is a statistic of one moment: entries are read as they are."""
        with self._guard():
            self._check_open()
            self._sync()
            stored, n = self._meta["stored_bytes"], self._meta["length"]
            if stored == 0:
                return 1.0
            live = 0
            step = 1 << 20
            for a in range(0, n, step):
                _, _, length = self._load_entries(np.arange(a, min(n, a + step), dtype=np.int64))
                live += int(length.sum(dtype=np.uint64))
            return live / stored

    def __repr__(self) -> str:
        kind = "bytes" if self._dtype is None else str(self._dtype)
        return (f"<lsio.records.Records {self._root!r}: {len(self)} records of {kind}, "
                f"compression={self.compression!r}, mode={self._mode!r}>")

    # -- pickling and fork --

    def __reduce__(self) -> Any:
        return (_reopen, (self._root, self._storage_options, self._threads_given, self._io))

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError("the zrecord store is closed")

    def _check_writer(self) -> None:
        self._check_open()
        if self._mode != "a":
            raise PermissionError(errno.EBADF, f"the zrecord store {self._root!r} is open read-only "
                                               '(lsio.records.open(path, mode="a") writes)')
        if os.getpid() != self._pid:
            raise RuntimeError("a zrecord writer is used only by the process that opened it (this is a forked "
                               "child): open the store again here")
        if self._broken is not None:
            raise storage_error(errno.EIO, f"the zrecord writer of {self._root!r} stopped after a failed write left "
                                           f"its state unknown ({self._broken}): open the store again", self._root)

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """One write (append, modify, delete, rebalance): on any failure the handle takes the
        published state from disk again, as a reopen would."""
        with self._guard():
            self._check_writer()
            try:
                yield
            except BaseException:
                self._resync_after_failure()
                raise

    # -- reading --

    def _map_table(self, need: int) -> Optional[mmap.mmap]:
        """The local offset table mapped over at least `need` entries."""
        if self._table is None or self._table_entries < need:
            path = os.path.join(self._root, self._meta["offset_file"])
            if self._table_fd is not None:
                fd = self._table_fd
            else:
                # Missing: a rebalance removed this generation's table since meta.json was read.
                fd = _open_readonly(path, "the offset table")
            try:
                size = os.fstat(fd).st_size
                if size < need * ENTRY_BYTES:
                    e = CorruptDataError(f"{path}: the offset table has {size // ENTRY_BYTES} entries, the store "
                                         f"{need} records")
                    e.path = path
                    raise e
                if size == 0:
                    return None
                writable = self._table_fd is not None
                self._table = mmap.mmap(fd, size, access=mmap.ACCESS_WRITE if writable else mmap.ACCESS_READ)
                self._table_entries = size // ENTRY_BYTES
            finally:
                if self._table_fd is None:
                    os.close(fd)
        return self._table

    def _load_entries(self, ids: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(chunk, offset, length) of each id, as the table holds them now."""
        if ids.size == 0:
            return np.empty(0, np.uint32), np.empty(0, np.uint64), np.empty(0, np.uint32)
        if self._remote:
            at = ids.astype(np.uint64) * ENTRY_BYTES
            buf = np.empty(ids.size * ENTRY_BYTES, np.uint8)
            _ranges.read_into([self._where(self._meta["offset_file"])], np.zeros(ids.size, np.uint32), at,
                              np.full(ids.size, ENTRY_BYTES, np.uint64), buf,
                              np.arange(ids.size, dtype=np.uint64) * ENTRY_BYTES,
                              storage_options=self._storage_options, threads=self._threads, io=self._io,
                              max_gap=_REMOTE_TABLE_GAP)
            return _entries_of_bytes(buf)
        table = self._map_table(self._meta["length"])
        return _core.records_load_entries(table, self._table_entries, ids)

    def _entries(self, ids: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Entries of published records only. A table entry at an id the store no longer has
        (a delete shortened it) may already belong to a writer's unpublished append, so the
        entries count only if meta.json did not change while they were loaded; if it did,
        the ids are checked against the new length and the entries loaded again."""
        for _ in range(64):
            before = self._meta
            entries = self._load_entries(ids)
            if not self._sync():
                return entries
            self._check_ids(ids)
            # Publications that only appended or modified (same files, no delete since: the
            # delete count "epoch" is unchanged) never made these ids unpublished, so the
            # entries hold; after a delete they are loaded again.
            if all(before[k] == self._meta[k] for k in ("uuid", "generation", "epoch")):
                return entries
        raise StorageError(errno.EAGAIN, f"{self._root!r}: meta.json changed by a delete or rebalance during "
                                         "each of 64 reads of the offset table", self._root)

    def _check_ids(self, ids: np.ndarray) -> None:
        n = self._meta["length"]
        if ids.size and int(ids.max()) >= n:
            raise BoundsError(f"record {int(ids.max())} no longer exists in {self._root!r}: the store has {n} "
                              "records now (a delete shortened it)")

    def _ids(self, indices: Any) -> np.ndarray:
        n = self._meta["length"]
        if isinstance(indices, slice):
            return np.arange(n, dtype=np.int64)[indices]
        ids = np.asarray(indices)
        if ids.dtype == bool:
            if ids.shape != (n,):
                raise BoundsError(f"a boolean mask must have shape ({n},), got {ids.shape}")
            return np.flatnonzero(ids).astype(np.int64)
        if ids.size == 0:
            return np.empty(0, np.int64)
        if not np.issubdtype(ids.dtype, np.integer):
            raise TypeError(f"record indices must be integers, got dtype {ids.dtype}")
        if ids.dtype.kind == "u" and int(ids.max()) >= n:
            raise BoundsError(f"record index {int(ids.max())} is out of range for {self._root!r} with {n} records")
        ids = ids.astype(np.int64).reshape(-1)
        bad = (ids < -n) | (ids >= n)
        if bad.any():
            raise BoundsError(f"record index {int(ids[bad][0])} is out of range for {self._root!r} "
                              f"with {n} records")
        return np.where(ids < 0, ids + n, ids)

    def _corrupt(self, id_: int, chunk: int, offset: int, length: int, why: str) -> CorruptDataError:
        where = self._chunk_path(chunk) if chunk < self._meta["num_chunks"] else self._where(self._meta["offset_file"])
        e = CorruptDataError(f"{where}: record {id_} (chunk {chunk}, bytes [{offset}, {offset + length})): {why}")
        e.path = where
        e.chunk = str(chunk)
        e.byte_range = (offset, offset + length)
        return e

    def _chunk_size(self, c: int) -> int:
        """The bytes of chunk c that published records may use: an open chunk's write
        position, a full local chunk's size (a full chunk never changes; asked once per
        generation). A full remote chunk is not asked for (a HEAD request per chunk, one
        after another): all the store's bytes bound it, and the engine checks each range
        against the object's real size before writing anything."""
        for oc in self._meta["open_chunks"]:
            if oc["id"] == c:
                return oc["write_pos"]
        if self._remote:
            return self._meta["stored_bytes"]
        size = self._sizes.get(c)
        if size is None:
            path = self._chunk_path(c)
            try:
                size = os.stat(path).st_size
            except FileNotFoundError:
                raise NotFoundError(errno.ENOENT, f"{path!r}: chunk file is missing", path) from None
            self._sizes[c] = size
        return size

    def _validate(self, ids: np.ndarray, chunk: np.ndarray, offset: np.ndarray, length: np.ndarray) -> np.ndarray:
        """True where a record is empty; raises for holes and for entries outside their chunk
        files, before anything is allocated for them."""
        empty = chunk == EMPTY_CHUNK
        hole = (length == 0) & ~empty
        bad_chunk = ~empty & (chunk >= self._meta["num_chunks"])
        bad_empty = empty & ((length != 0) | (offset != 0))
        for mask, why in ((hole, "the offset table entry is empty (no record)"),
                          (bad_chunk, f"names a chunk past the store's {self._meta['num_chunks']}"),
                          (bad_empty, "an empty record's entry with a length or offset")):
            if mask.any():
                i = int(np.flatnonzero(mask)[0])
                raise self._corrupt(int(ids[i]), int(chunk[i]), int(offset[i]), int(length[i]), why)
        live = ~empty
        if live.any():
            used = np.unique(chunk[live])
            limit = np.array([self._chunk_size(int(c)) for c in used], dtype=np.uint64)
            lim = limit[np.minimum(np.searchsorted(used, chunk), used.size - 1)]  # empty records: masked
            end = offset + length.astype(np.uint64)
            past = live & ((offset > lim) | (end > lim) | (end < offset))
            if past.any():
                i = int(np.flatnonzero(past)[0])
                raise self._corrupt(int(ids[i]), int(chunk[i]), int(offset[i]), int(length[i]),
                                    f"past the end of the chunk's {int(lim[i])} published bytes")
        return empty

    def _read_payloads(self, chunk, offset, length, live, decode: bool = False) -> Tuple[np.ndarray, np.ndarray, Any]:
        """The stored bytes of the `live` records into one buffer: (buffer, starts, decoded).
        With `decode`, compressed payloads are also decoded as each one lands (decoding
        overlaps the reads still in flight), and decoded is _ranges.gather_records' result
        (None when no record is live)."""
        n = int(live.sum())
        lengths = length[live].astype(np.uint64)
        starts = np.zeros(n, np.uint64)
        if n:
            np.cumsum(lengths[:-1], out=starts[1:])
        buf = np.empty(int(lengths.sum()) if n else 0, np.uint8)
        decoded = None
        if n:
            decoded = self._gather(chunk[live], offset[live], lengths, buf, starts, decode)
        return buf, starts, decoded

    def _gather(self, chunk, offsets, lengths, out, out_offsets, decode: bool = False) -> Any:
        """Reads the ranges into out at out_offsets; with `decode`, compressed payloads are
        decoded as they land (_ranges.gather_records) and that call's result returned."""
        chunks, index = np.unique(chunk, return_inverse=True)
        sources = [self._chunk_path(int(c)) for c in chunks]
        where = dict(storage_options=self._storage_options if self._remote else None,
                     threads=self._threads, io=self._io)
        try:
            if decode:
                return _ranges.gather_records(self._kind, sources, index.astype(np.uint32), offsets, lengths,
                                              out, out_offsets, **where)
            return _ranges.read_into(sources, index.astype(np.uint32), offsets, lengths, out, out_offsets, **where)
        except NotFoundError:
            raise
        except StorageError as e:
            if e.errno == errno.EINVAL:  # a range past the end of its chunk file (it shrank)
                e2 = CorruptDataError(f"{self._root}: an offset table entry points past the end of its chunk: {e}")
                e2.path, e2.byte_range = e.path, e.byte_range
                raise e2 from None
            raise

    def take(self, indices: Any, *, copy: bool = True) -> RecordBatch:
        """The records at ``indices`` (ints, negative from the end; a slice; a boolean mask), in
        that order, as a :class:`RecordBatch`. ``copy=False`` (local, uncompressed stores)
        returns views of the mapped chunk files instead of one gathered buffer.

        Local readers see the newest publication at each call (meta.json is read again);
        remote stores are read as opened (:meth:`refresh` rereads them)."""
        with self._guard():
            self._check_open()
            self._sync()
            ids = self._ids(indices)
            for attempt in (0, 1):
                try:
                    return self._take(ids, copy)
                except (NotFoundError, CorruptDataError):
                    # This handle's meta.json is older than the files it met: a rebalance
                    # replaced the chunk files (the same ids name the same records in the new
                    # generation), or (remote) the store was republished. Read the newest
                    # state once; still wrong then is an error.
                    before = self._meta
                    self._load_meta()
                    if attempt or self._meta == before:
                        raise
                    self._check_ids(ids)
            raise AssertionError("unreachable")

    def _take(self, ids: np.ndarray, copy: bool) -> RecordBatch:
        chunk, offset, length = self._entries(ids)
        empty = self._validate(ids, chunk, offset, length)
        live = ~empty
        is_bytes = self._dtype is None
        dt = np.dtype(np.uint8) if is_bytes else self._dtype
        if not copy:
            if self._remote or self._kind:
                raise ValueError("copy=False (views of the chunk files) needs a local, uncompressed store")
            return self._views(ids, chunk, offset, length, empty, dt, is_bytes)
        if self._kind == 0:
            sizes = length.astype(np.uint64)
            sizes[empty] = 0
            self._check_items(ids, chunk, offset, length, sizes)
            offsets = np.zeros(ids.size + 1, np.int64)
            np.cumsum(sizes // self._item, out=offsets[1:])
            out = np.empty(int(offsets[-1]) * self._item, np.uint8)
            if live.any():
                self._gather(chunk[live], offset[live], length[live].astype(np.uint64), out,
                             offsets[:-1][live].astype(np.uint64) * self._item)
            return RecordBatch(out.view(dt), offsets, is_bytes=is_bytes)
        # Compressed: the payloads are read and sized; those the disk delivers are decoded as
        # they land (into buffers of their own: sizes are only known from the payloads), the
        # page cache's hits after, straight into the result (GatherRecords, lsio/records.h).
        _, _, decoded = self._read_payloads(chunk, offset, length, live, decode=True)
        sizes = np.zeros(ids.size, np.uint64)
        gathered = None
        if decoded is not None:
            gathered, failed, msg = decoded
            if failed >= 0:
                j = np.flatnonzero(live)[failed]
                raise self._corrupt(int(ids[j]), int(chunk[j]), int(offset[j]), int(length[j]), msg)
            sizes[live] = gathered.sizes()
        self._check_items(ids, chunk, offset, length, sizes)
        offsets = np.zeros(ids.size + 1, np.int64)
        np.cumsum(sizes // self._item, out=offsets[1:])
        out = np.empty(int(offsets[-1]) * self._item, np.uint8)
        if gathered is not None:
            failed, msg = gathered.place(out, offsets[:-1][live].astype(np.uint64) * self._item, self._threads)
            if failed >= 0:
                j = np.flatnonzero(live)[failed]
                raise self._corrupt(int(ids[j]), int(chunk[j]), int(offset[j]), int(length[j]), msg)
        return RecordBatch(out.view(dt), offsets, is_bytes=is_bytes)

    def _check_items(self, ids, chunk, offset, length, sizes) -> None:
        if self._item > 1:
            odd = sizes % np.uint64(self._item) != 0
            if odd.any():
                i = int(np.flatnonzero(odd)[0])
                raise self._corrupt(int(ids[i]), int(chunk[i]), int(offset[i]), int(length[i]),
                                    f"{int(sizes[i])} bytes are not a whole number of {self._item}-byte items")

    def _chunk_map(self, c: int, need: int) -> Tuple[Any, int]:
        """Chunk c mapped read-only over at least `need` bytes (mapped again when an open
        chunk has grown past the mapping). No descriptor is kept (_core.MappedFile), and at
        most _MAX_MAPS chunks stay mapped: views hold their own mapping."""
        got = self._maps.get(c)
        if got is None or got[1] < need:
            m = _core.MappedFile(self._chunk_path(c))
            got = (m, len(m))
            self._maps[c] = got
            while len(self._maps) > _MAX_MAPS:
                self._maps.popitem(last=False)
        else:
            self._maps.move_to_end(c)
        return got

    def _views(self, ids, chunk, offset, length, empty, dt, is_bytes) -> RecordBatch:
        # Every entry was checked against the chunk's published bytes (_validate), which a
        # writer never truncates: a view never reaches a page past the end of its file.
        sizes = length.astype(np.int64)
        sizes[empty] = 0
        self._check_items(ids, chunk, offset, length, sizes.astype(np.uint64))
        counts = sizes // self._item
        # Each chunk mapped once over the batch's furthest byte of it; then one view per record
        # (a slice of the chunk's byte array, viewed as the dtype).
        live = ~empty
        arrays: Dict[int, np.ndarray] = {}
        if live.any():
            used = np.unique(chunk[live])
            ends = offset[live] + length[live].astype(np.uint64)
            far = np.zeros(used.size, np.uint64)
            np.maximum.at(far, np.searchsorted(used, chunk[live]), ends)
            for c, need in zip(used.tolist(), far.tolist()):
                m, size = self._chunk_map(c, need)
                if need > size:
                    i = int(np.flatnonzero(live & (chunk == c))[0])
                    raise self._corrupt(int(ids[i]), c, int(offset[i]), int(length[i]),
                                        f"past the end of the {size}-byte chunk file")
                arrays[c] = np.frombuffer(m, dtype=np.uint8) if size else np.empty(0, np.uint8)
        zero = np.empty(0, dt)
        views = [zero if c == EMPTY_CHUNK else arrays[c][a:a + n].view(dt)
                 for c, a, n in zip(chunk.tolist(), offset.tolist(), sizes.tolist())]
        offsets = np.zeros(ids.size + 1, np.int64)
        np.cumsum(counts, out=offsets[1:])
        return RecordBatch(None, offsets, is_bytes=is_bytes, views=views, dtype=dt)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, (int, np.integer)):
            local_raw = not self._remote and self._kind == 0
            return self.take([int(index)], copy=not local_raw)[0]
        return self.take(index)

    def __getitems__(self, indices: Sequence[int]) -> RecordBatch:
        """torch's DataLoader fetches a whole batch through this (one gather), then hands
        the :class:`RecordBatch` to its ``collate_fn`` (:data:`collate`)."""
        return self.take(list(indices))

    def __iter__(self) -> Iterator[Any]:
        n = self._meta["length"]
        step = 4096
        for a in range(0, n, step):
            yield from self.take(slice(a, min(n, a + step)))

    # -- writing --

    def _recover(self) -> None:
        """Writer open: drops whatever a dead writer wrote past the published state."""
        meta = self._meta
        self._table_fd = os.open(os.path.join(self._root, meta["offset_file"]), os.O_RDWR)
        for c in meta["open_chunks"]:
            fd = self._chunk_fd(c["id"])
            if os.fstat(fd).st_size > c["write_pos"]:
                os.ftruncate(fd, c["write_pos"])
        # Chunk files numbered past num_chunks were started by an append that was never published.
        cdir = os.path.join(self._root, meta["chunk_dir"])
        for name in os.listdir(cdir):
            stem = name[:-3] if name.endswith(".zr") else None
            if stem is not None and stem.isdigit() and int(stem) >= meta["num_chunks"]:
                os.unlink(os.path.join(cdir, name))
        for name in os.listdir(self._root):
            if name.startswith(".meta.json.") or (name.startswith(("offset.", "chunk.")) and
                                                   name not in (meta["offset_file"], meta["chunk_dir"])):
                p = os.path.join(self._root, name)
                if name.startswith(".meta.json.") or name.startswith("offset."):
                    os.unlink(p)
                else:
                    shutil.rmtree(p, ignore_errors=True)
        if meta["offset_file"] != "offset" and os.path.exists(os.path.join(self._root, "offset")):
            os.unlink(os.path.join(self._root, "offset"))
        if meta["chunk_dir"] != "chunk" and os.path.isdir(os.path.join(self._root, "chunk")):
            shutil.rmtree(os.path.join(self._root, "chunk"), ignore_errors=True)

    def _resync_after_failure(self) -> None:
        """After a write that raised: rereads the published state and drops what no publication
        names (recovery, as at open). The failure may have come after meta.json was renamed
        over (its directory's fsync, an interrupt), so the handle cannot tell whether its
        write was published; going on from its own state would let the next append
        overwrite published records. If even this fails, the handle stops writing."""
        try:
            fds = list(self._chunk_fds.values()) + ([self._table_fd] if self._table_fd is not None else [])
            self._chunk_fds, self._table_fd = {}, None
            for fd in fds:
                os.close(fd)
            self._drop_maps()
            self._load_meta()
            self._recover()
        except BaseException as e:  # noqa: BLE001 - the write's own error is the one raised
            self._broken = f"{type(e).__name__}: {e}"

    def _chunk_fd(self, c: int) -> int:
        fd = self._chunk_fds.get(c)
        if fd is None:
            fd = os.open(self._chunk_path(c), os.O_RDWR | os.O_CREAT, 0o644)
            self._chunk_fds[c] = fd
        return fd

    def _grow_table(self, need: int) -> None:
        if self._table is not None and self._table_entries >= need:
            return
        size = os.fstat(self._table_fd).st_size
        if size < need * ENTRY_BYTES:
            new = -(-need // TABLE_GROW) * TABLE_GROW * ENTRY_BYTES
            # Blocks are reserved, not a sparse hole: a later store through the mapping can
            # then not fail for space (which a mapping reports as SIGBUS, not an error).
            os.posix_fallocate(self._table_fd, 0, new)
        self._table = None
        self._map_table(need)

    def _pack(self, records: Any) -> Tuple[np.ndarray, np.ndarray]:
        """Records -> (bytes uint8, byte offsets uint64 of n + 1)."""
        if isinstance(records, RecordBatch):
            vals = np.ascontiguousarray(records.values)
            if self._dtype is not None and vals.dtype != self._dtype:
                if not np.can_cast(vals.dtype, self._dtype, casting="same_kind") and vals.size:
                    raise TypeError(f"cannot store a batch of {vals.dtype} as {self._dtype}")
                vals = vals.astype(self._dtype)
            return vals.view(np.uint8).reshape(-1), records.offsets.astype(np.uint64) * np.uint64(vals.itemsize)
        if isinstance(records, (bytes, bytearray, memoryview, str)) or \
                (isinstance(records, np.ndarray) and records.dtype != object):
            raise TypeError("append takes a sequence of records (a list of arrays or byte strings, or a "
                            "RecordBatch); to append one record, pass [record]")
        parts: List[np.ndarray] = []
        for k, rec in enumerate(records):
            if self._dtype is None:
                if isinstance(rec, str) or not isinstance(rec, (bytes, bytearray, memoryview, np.ndarray)):
                    raise TypeError(f"record {k}: a byte-string store takes bytes-like records, got {type(rec).__name__}")
                a = np.frombuffer(rec, np.uint8) if not isinstance(rec, np.ndarray) else rec
                if a.ndim != 1:
                    raise ValueError(f"record {k}: expected a 1-D byte array, got shape {a.shape}")
                parts.append(np.ascontiguousarray(a).view(np.uint8))
            else:
                a = np.asarray(rec)
                if a.ndim != 1:
                    raise ValueError(f"record {k}: records are 1-D arrays, got shape {a.shape}")
                if a.dtype != self._dtype:
                    if not np.can_cast(a.dtype, self._dtype, casting="same_kind") and a.size:
                        raise TypeError(f"record {k}: cannot store {a.dtype} as {self._dtype}")
                    a = a.astype(self._dtype)
                parts.append(np.ascontiguousarray(a).view(np.uint8))
        lengths = np.fromiter((p.size for p in parts), dtype=np.uint64, count=len(parts))
        offsets = np.zeros(len(parts) + 1, np.uint64)
        np.cumsum(lengths, out=offsets[1:])
        vals = np.concatenate(parts) if parts else np.empty(0, np.uint8)
        return vals, offsets

    def _encode(self, vals: np.ndarray, offs: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        if self._kind:
            payload, poffs = _core.records_compress(self._kind, self._meta["level"], vals, offs, self._threads)
        else:
            payload, poffs = vals, offs
        big = np.diff(poffs) >= np.uint64(1 << 32)
        if big.any():
            raise ValueError(f"record {int(np.flatnonzero(big)[0])} has 4 GiB or more; a record holds less")
        return payload, poffs

    def _place(self, meta: Dict[str, Any], counts: List[int]) -> List[List[Tuple[int, int, int, int]]]:
        """Chunk space for consecutive parts of `counts` records, one part per writer slot:
        per slot, (chunk, first record, end record, write position) pieces. Updates `meta`'s
        open chunks and num_chunks; byte positions are filled in by the caller."""
        opens = list(meta["open_chunks"])
        cap = meta["chunk_records"]
        plans: List[List[Tuple[int, int, int, int]]] = []
        start = 0
        for slot, count in enumerate(counts):
            pieces = []
            left = count
            while left:
                if slot < len(opens) and opens[slot] is not None and opens[slot]["records"] < cap:
                    c = opens[slot]
                else:
                    c = {"id": meta["num_chunks"], "write_pos": 0, "records": 0}
                    meta["num_chunks"] += 1
                    if meta["num_chunks"] > EMPTY_CHUNK:
                        raise OverflowError("the store would need more than 2**32 - 1 chunks")
                    while len(opens) <= slot:
                        opens.append(None)
                    opens[slot] = c
                k = min(left, cap - c["records"])
                pieces.append((c["id"], start, start + k, c["write_pos"]))
                c["records"] += k
                start += k
                left -= k
            plans.append(pieces)
        meta["open_chunks"] = opens
        return plans

    def _write(self, records: Any, slots: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray, Dict[str, Any], List[int]]:
        """Writes records' bytes into chunk space: their (chunk, offset, length) entries, the
        meta to publish, the chunk files written."""
        vals, offs = self._pack(records)
        n = len(offs) - 1
        payload, poffs = self._encode(vals, offs)
        meta = json.loads(json.dumps(self._meta))
        slots = max(1, min(slots, n))
        per = -(-n // slots) if n else 0
        counts = [max(0, min(per, n - s * per)) for s in range(slots)]
        plans = self._place(meta, counts)
        chunk = np.empty(n, np.uint32)
        offset = np.empty(n, np.uint64)
        length = np.diff(poffs).astype(np.uint32)
        jobs = []
        for pieces in plans:
            for c, a, b, pos in pieces:
                chunk[a:b] = c
                offset[a:b] = np.uint64(pos) + (poffs[a:b] - poffs[a])
                nbytes = int(poffs[b] - poffs[a])
                jobs.append((c, pos, int(poffs[a]), nbytes))
        # open chunks' byte positions, and the bytes stored
        ends: Dict[int, int] = {}
        for c, pos, _, nbytes in jobs:
            ends[c] = max(ends.get(c, 0), pos + nbytes)
        for oc in meta["open_chunks"]:
            if oc is not None and oc["id"] in ends:
                oc["write_pos"] = ends[oc["id"]]
        meta["stored_bytes"] += int(poffs[-1]) if n else 0
        if self._kind == 0:
            empty = length == 0
            chunk[empty] = EMPTY_CHUNK
            offset[empty] = 0
        data = memoryview(payload).cast("B") if payload.size else memoryview(b"")

        # Chunks this write fills are written, made durable and closed by their job; only the
        # chunks left open keep a descriptor (an append of many chunks must not hold one each).
        still_open = {oc["id"] for oc in meta["open_chunks"]
                      if oc is not None and oc["records"] < meta["chunk_records"]}
        held = {c: self._chunk_fds.pop(c) for c, *_ in jobs if c not in still_open and c in self._chunk_fds}

        def run(job: Tuple[int, int, int, int]) -> None:
            c, pos, a, nbytes = job
            full = c not in still_open
            fd = held.pop(c, None) if full else self._chunk_fds[c]
            if fd is None:
                fd = os.open(self._chunk_path(c), os.O_RDWR | os.O_CREAT, 0o644)
            try:
                _pwrite_all(fd, data[a:a + nbytes], pos)
                if full and self._durable:
                    os.fsync(fd)
            finally:
                if full:
                    os.close(fd)

        for c in still_open:
            self._chunk_fd(c)  # opened here, on this thread
        try:
            if len(jobs) > 1 and slots > 1:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(MAX_WRITERS, thread_name_prefix="lsio-records")
                futures = [self._pool.submit(run, job) for job in jobs]
                # Every job ends before this returns or raises: a failure must not close (or
                # let the caller reuse) descriptors another job is still writing through.
                interrupted: Optional[BaseException] = None
                while True:
                    try:
                        concurrent.futures.wait(futures)
                        break
                    except BaseException as e:  # noqa: BLE001 - an interrupt: the jobs end first
                        interrupted = e
                if interrupted is not None:
                    raise interrupted
                for f in futures:
                    f.result()
            else:
                for job in jobs:
                    run(job)
        finally:
            for fd in held.values():
                os.close(fd)
        written = sorted({c for c, *_ in jobs if c in still_open})
        return chunk, offset, length, meta, written

    def _finish(self, meta: Dict[str, Any], written: Iterable[int]) -> None:
        """Makes the data durable, then publishes `meta` (chunks this write filled were made
        durable and closed by their write)."""
        if self._durable:
            for c in written:
                os.fsync(self._chunk_fds[c])
            if self._table_fd is not None:
                os.fsync(self._table_fd)
            if meta["num_chunks"] != self._meta["num_chunks"]:
                # New chunk files: their directory entries too, or a power loss could leave a
                # published meta.json naming a file that is gone.
                _fsync_dir(os.path.join(self._root, meta["chunk_dir"]))
        meta["open_chunks"] = [c for c in meta["open_chunks"] if c is not None and c["records"] < meta["chunk_records"]]
        self._publish(meta)

    def _publish(self, meta: Dict[str, Any]) -> None:
        _write_meta(self._root, meta, self._durable)
        self._meta = meta

    def append(self, records: Any) -> range:
        """Appends records (a sequence of 1-D arrays, or of byte strings for ``dtype=bytes``;
        or a :class:`RecordBatch`) and publishes them; returns their ids. One publication
        (and fsync) per call: append many records per call."""
        with self._writing():
            n0 = self._meta["length"]
            chunk, offset, length, meta, written = self._write(records, self._meta["writers"])
            n = len(chunk)
            if n == 0:
                return range(n0, n0)
            self._grow_table(n0 + n)
            _core.records_store_entries(self._table, self._table_entries,
                                        np.arange(n0, n0 + n, dtype=np.int64), chunk, offset, length)
            meta["length"] = n0 + n
            self._finish(meta, written)
            return range(n0, n0 + n)

    extend = append

    def __setitem__(self, index: Any, value: Any) -> None:
        """``r[i] = record``, or ``r[indices] = records``: writes the new versions and repoints
        the ids' entries (the old bytes stay until :meth:`rebalance`)."""
        with self._writing():
            single = isinstance(index, (int, np.integer))
            ids = self._ids([index] if single else index)
            records = [value] if single else value
            if len(np.unique(ids)) != len(ids):
                raise ValueError("each record id may be assigned once per call")
            if hasattr(records, "__len__") and len(records) != len(ids):
                raise ValueError(f"{len(records)} records for {len(ids)} ids")
            if len(ids) == 0:
                return
            chunk, offset, length, meta, written = self._write(records, 1)
            if len(chunk) != len(ids):
                raise ValueError(f"{len(chunk)} records for {len(ids)} ids")
            # The new bytes are published (durable, space taken) before any entry points at them.
            self._finish(meta, written)
            self._grow_table(self._meta["length"])
            _core.records_store_entries(self._table, self._table_entries, ids, chunk, offset, length)
            if self._durable:
                os.fsync(self._table_fd)

    def __delitem__(self, index: Any) -> None:
        """``del r[i]`` (or indices): the last record moves into the deleted slot and the store
        shortens by one per record (so the last record's id changes, as the format
        specifies)."""
        with self._writing():
            ids = np.unique(self._ids([index] if isinstance(index, (int, np.integer)) else index))[::-1]
            if ids.size == 0:
                return
            n = self._meta["length"]
            self._grow_table(n)
            for i in ids:
                last = n - 1
                if i != last:
                    c, o, ln = _core.records_load_entries(self._table, self._table_entries,
                                                          np.array([last], np.int64))
                    _core.records_store_entries(self._table, self._table_entries, np.array([i], np.int64), c, o, ln)
                n -= 1
            if self._durable:
                os.fsync(self._table_fd)
            meta = json.loads(json.dumps(self._meta))
            meta["length"] = n
            meta["epoch"] += 1  # readers holding entries of ids past the new length load them again
            self._publish(meta)

    def rebalance(self) -> Dict[str, float]:
        """Rewrites the live records in id order into fresh, full chunks (a new generation of
        chunk files and offset table), swaps it in with one publication and removes the old
        files. Returns ``{"utilization_before": u, "utilization_after": u}``. Readers that
        still map old chunk files keep reading them; a reader that meets a removed file
        rereads meta.json and goes on in the new generation (ids are unchanged)."""
        with self._writing():
            before = self.utilization
            old = self._meta
            gen = old["generation"] + 1
            cdir_name, table_name = f"chunk.{gen}", f"offset.{gen}"
            cdir = os.path.join(self._root, cdir_name)
            os.makedirs(cdir, exist_ok=True)
            n, cap = self._meta["length"], old["chunk_records"]
            tfd = os.open(os.path.join(self._root, table_name), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
            stored = 0
            last_chunk = None
            try:
                if n:
                    os.posix_fallocate(tfd, 0, -(-n // TABLE_GROW) * TABLE_GROW * ENTRY_BYTES)
                for k, a in enumerate(range(0, n, cap)):
                    ids = np.arange(a, min(n, a + cap), dtype=np.int64)
                    chunk, offset, length = self._entries(ids)
                    empty = self._validate(ids, chunk, offset, length)
                    buf, starts, _ = self._read_payloads(chunk, offset, length, ~empty)
                    new_off = np.zeros(ids.size, np.uint64)
                    new_off[~empty] = starts
                    new_chunk = np.full(ids.size, k, np.uint32)
                    new_chunk[empty] = EMPTY_CHUNK
                    new_off[empty] = 0
                    path = os.path.join(cdir, f"{k}.zr")
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                    try:
                        _pwrite_all(fd, memoryview(buf).cast("B") if buf.size else memoryview(b""), 0)
                        if self._durable:
                            os.fsync(fd)
                    finally:
                        os.close(fd)
                    stored += buf.size
                    raw = np.zeros((ids.size, ENTRY_BYTES), np.uint8)
                    raw[:, 0:4] = new_chunk.astype("<u4").view(np.uint8).reshape(-1, 4)
                    raw[:, 4:12] = new_off.astype("<u8").view(np.uint8).reshape(-1, 8)
                    raw[:, 12:16] = length.astype("<u4").view(np.uint8).reshape(-1, 4)
                    _pwrite_all(tfd, memoryview(raw).cast("B"), a * ENTRY_BYTES)
                    if ids.size < cap:
                        last_chunk = {"id": k, "write_pos": int(buf.size), "records": int(ids.size)}
                if self._durable:
                    os.fsync(tfd)
                    _fsync_dir(cdir)
            finally:
                os.close(tfd)
            meta = json.loads(json.dumps(old))
            meta.update(generation=gen, offset_file=table_name, chunk_dir=cdir_name, num_chunks=-(-n // cap),
                        open_chunks=[last_chunk] if last_chunk else [], stored_bytes=stored)
            if self._durable:
                _fsync_dir(self._root)  # offset.<gen> and chunk.<gen> exist before meta.json names them
            new_table_fd = os.open(os.path.join(self._root, table_name), os.O_RDWR)
            try:
                _write_meta(self._root, meta, self._durable)
            except BaseException:
                os.close(new_table_fd)  # _writing() takes whichever state was published
                raise
            # Published: the handle moves to the new generation (fields first, as in close()).
            old_fds = [*self._chunk_fds.values(), self._table_fd]
            self._chunk_fds, self._table_fd = {}, new_table_fd
            for fd in old_fds:
                if fd is not None:
                    os.close(fd)
            self._meta = meta
            self._drop_maps()
            # The old generation: readers that mapped it keep their mappings.
            if old["offset_file"] != table_name:
                try:
                    os.unlink(os.path.join(self._root, old["offset_file"]))
                except FileNotFoundError:
                    pass
            shutil.rmtree(os.path.join(self._root, old["chunk_dir"]), ignore_errors=True)
            return {"utilization_before": before, "utilization_after": self.utilization}

    # -- closing --

    def close(self) -> None:
        """Releases the writer lock and descriptors; mapped chunk files stay valid for batches
        still holding views of them."""
        with self._guard():
            if self._closed:
                return
            self._closed = True
            # The fields first, then the descriptors: an interrupt in between must not leave
            # numbers a later close would close again (by then another file's).
            fds = [*self._chunk_fds.values(), self._table_fd, self._lock_fd]  # the lock last: releases the flock
            pool = self._pool
            self._chunk_fds, self._table_fd, self._lock_fd, self._pool = {}, None, None, None
            if os.getpid() == self._pid:
                if pool is not None:
                    pool.shutdown(wait=True)
                for fd in fds:
                    if fd is not None:
                        os.close(fd)

    def __enter__(self) -> "Records":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass



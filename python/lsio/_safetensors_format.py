"""The safetensors format for lsio.safetensors: locating a checkpoint (file, index, directory,
URL), reading and checking its headers as strictly as the safetensors crate, dtypes, and the
engine calls that read tensor bytes. The loaders (``lsio.safetensors``: numpy, torch;
``_safetensors_shards``: JAX shards and the chunk plan) are built on it.
"""

from __future__ import annotations

import dataclasses
import difflib
import errno
import hashlib
import json
import os
import stat as _stat
import sys
import urllib.parse
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _storage
from .errors import CorruptDataError, Error, FormatError, StorageError, UnsupportedError, storage_error

#: The largest header the safetensors format allows (the crate's ``MAX_HEADER_SIZE``).
MAX_HEADER_SIZE = 100_000_000
#: The index file name ``transformers`` and ``huggingface_hub`` write for sharded checkpoints.
INDEX_NAME = "model.safetensors.index.json"
_SINGLE_NAME = "model.safetensors"
_U64 = 1 << 64

PathLike = Union[str, "os.PathLike[str]"]

# safetensors dtype -> (bits per element, numpy dtype name or None, ml_dtypes type name or
# None, torch dtype name or None, byte-swap unit on big-endian hosts).
_DTYPES: Dict[str, Tuple[int, Optional[str], Optional[str], Optional[str], int]] = {
    "BOOL": (8, "bool", None, "bool", 1),
    "U8": (8, "uint8", None, "uint8", 1),
    "I8": (8, "int8", None, "int8", 1),
    "F8_E5M2": (8, None, "float8_e5m2", "float8_e5m2", 1),
    "F8_E4M3": (8, None, "float8_e4m3fn", "float8_e4m3fn", 1),
    "F8_E8M0": (8, None, "float8_e8m0fnu", "float8_e8m0fnu", 1),
    "F8_E4M3FNUZ": (8, None, "float8_e4m3fnuz", "float8_e4m3fnuz", 1),
    "F8_E5M2FNUZ": (8, None, "float8_e5m2fnuz", "float8_e5m2fnuz", 1),
    "I16": (16, "int16", None, "int16", 2),
    "U16": (16, "uint16", None, "uint16", 2),
    "F16": (16, "float16", None, "float16", 2),
    "BF16": (16, None, "bfloat16", "bfloat16", 2),
    "I32": (32, "int32", None, "int32", 4),
    "U32": (32, "uint32", None, "uint32", 4),
    "F32": (32, "float32", None, "float32", 4),
    "C64": (64, "complex64", None, "complex64", 4),
    "F64": (64, "float64", None, "float64", 8),
    "I64": (64, "int64", None, "int64", 8),
    "U64": (64, "uint64", None, "uint64", 8),
    "F4": (4, None, None, "float4_e2m1fn_x2", 1),
    "F6_E2M3": (6, None, None, None, 1),
    "F6_E3M2": (6, None, None, None, 1),
}


@dataclasses.dataclass(frozen=True)
class TensorInfo:
    """One tensor of a checkpoint as its file's header describes it (see :func:`info`).

    ``dtype`` is the safetensors name (``"BF16"``), ``shape`` the logical shape, ``file``
    the path or URL of the file holding it (URL userinfo removed), ``offset`` the absolute
    byte offset of its data in that file and ``nbytes`` its size in bytes."""

    name: str
    dtype: str
    shape: Tuple[int, ...]
    file: str
    offset: int
    nbytes: int


@dataclasses.dataclass
class _File:
    """One safetensors file of a load: where to read it and, once read, its header."""

    source: str                    # what read_ranges is given
    display: str                   # what messages say (no userinfo)
    remote: bool
    size: Optional[int] = None     # local files: from stat; remote: unknown
    header_len: int = 0
    tensors: Dict[str, TensorInfo] = dataclasses.field(default_factory=dict)
    meta: Optional[Dict[str, str]] = None
    data_end: int = 0              # absolute offset of the end of the data
    header_digest: bytes = b""     # sha256 of the header bytes (chunk_plan: is it still the file?)


@dataclasses.dataclass
class _Checkpoint:
    files: List[_File]
    chosen: List[Tuple[int, TensorInfo]]     # (file index, tensor), in result order
    where: str                               # the single file or the index, for messages


# ---------------------------------------------------------------------------------------
# Errors


def _error(cls: "type[Error]", where: str, message: str,
           byte_range: Optional[Tuple[int, int]] = None) -> Error:
    err = cls(f"{where}: {message}")
    err.path = where
    if byte_range is not None:
        err.byte_range = byte_range
    return err


def _storage_error(code: int, where: str, message: str) -> StorageError:
    err = storage_error(code, f"{where}: {message}", where)
    err.path = where
    return err


def _display(location: str) -> str:
    """A location for messages: URL userinfo (user:password@) removed."""
    if _storage.is_remote(location):
        parts = urllib.parse.urlsplit(location)
        if "@" in parts.netloc:
            return urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))
    return location


# ---------------------------------------------------------------------------------------
# Engine reads


def _read(sources: Union[str, List[str]], ranges: List[List[int]], out: Any,
          storage_options: Optional[Mapping[str, Any]], threads: Optional[int]) -> List[np.ndarray]:
    from . import read_ranges  # the engine's batch byte-range read

    return read_ranges(sources, ranges, out=out, storage_options=storage_options,
                       threads=threads)


def _past_end(e: StorageError) -> bool:
    """True when read_ranges failed because a range ends past the end of its file."""
    return e.errno == errno.EINVAL


def _failed_file(e: StorageError, files: Sequence[_File]) -> Optional[_File]:
    """The file a read_ranges error names (its ``path``), among ``files``."""
    named = str(getattr(e, "path", None) or e.filename or "")
    for f in files:
        if named in (f.source, f.display) or _display(named) == f.display:
            return f
    if len(files) == 1:
        return files[0]
    tails = [f for f in files if named.endswith("/" + f.display.rsplit("/", 1)[-1])]
    return tails[0] if len(tails) == 1 else None


def _one_source(files: Sequence[_File], which: Sequence[int]) -> Union[str, List[str]]:
    sources = [files[i].source for i in which]
    return sources[0] if sources and all(s == sources[0] for s in sources) else sources


# ---------------------------------------------------------------------------------------
# Headers


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _pairs(pairs: List[Tuple[str, Any]]) -> Dict[str, Any]:
    # serde rejects a repeated struct field or __metadata__; repeated tensor names: last wins.
    out: Dict[str, Any] = {}
    for k, v in pairs:
        if k in out and k in ("__metadata__", "dtype", "shape", "data_offsets"):
            raise ValueError(f"duplicate field {k!r}")
        out[k] = v
    return out


def _u64(value: Any) -> bool:
    return type(value) is int and 0 <= value < _U64


def _parse_header(f: _File, raw: bytes) -> None:
    """Parse and check one header (``raw``: its N bytes); fills f.tensors, f.meta, f.data_end."""
    where = f.display
    n = f.header_len
    hdr_range = (8, 8 + n)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _error(FormatError, where, f"safetensors header is not valid UTF-8 ({e})",
                     hdr_range) from None
    try:
        doc = json.loads(text, object_pairs_hook=_pairs, parse_constant=_reject_constant)
    except RecursionError:
        raise _error(FormatError, where, "safetensors header is not valid JSON (nested too deeply)",
                     hdr_range) from None
    except ValueError as e:
        raise _error(FormatError, where, f"safetensors header is not valid JSON: {e}",
                     hdr_range) from None
    if not isinstance(doc, dict):
        raise _error(FormatError, where, "safetensors header must be a JSON object, not "
                     f"{type(doc).__name__}", hdr_range)
    meta = doc.pop("__metadata__", None)
    if meta is not None:
        if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
            raise _error(FormatError, where, "safetensors header: __metadata__ must map strings "
                         f"to strings, got {json.dumps(meta)[:200]}", hdr_range)
        f.meta = meta
    entries: List[Tuple[str, str, Tuple[int, ...], int, int]] = []
    for name, t in doc.items():
        if not isinstance(t, dict):
            raise _error(FormatError, where, f"safetensors header: tensor {name!r} must be an "
                         f"object with dtype, shape and data_offsets, got {json.dumps(t)[:200]}",
                         hdr_range)
        for field in ("dtype", "shape", "data_offsets"):
            if field not in t:
                raise _error(FormatError, where, f"safetensors header: tensor {name!r} has no "
                             f"{field!r}", hdr_range)
        dtype, shape, offsets = t["dtype"], t["shape"], t["data_offsets"]
        if not isinstance(dtype, str):
            raise _error(FormatError, where, f"safetensors header: tensor {name!r}: dtype must "
                         f"be a string, got {dtype!r}", hdr_range)
        if dtype not in _DTYPES:
            raise _error(UnsupportedError, where, f"safetensors header: tensor {name!r} has "
                         f"unknown dtype {dtype!r} (known: {', '.join(_DTYPES)})", hdr_range)
        if not isinstance(shape, list) or not all(_u64(d) for d in shape):
            raise _error(FormatError, where, f"safetensors header: tensor {name!r}: shape must "
                         f"be a list of non-negative integers, got {shape!r}", hdr_range)
        if (not isinstance(offsets, list) or len(offsets) != 2
                or not all(_u64(o) for o in offsets)):
            raise _error(FormatError, where, f"safetensors header: tensor {name!r}: "
                         "data_offsets must be two non-negative integers [begin, end], got "
                         f"{offsets!r}", hdr_range)
        entries.append((name, dtype, tuple(shape), offsets[0], offsets[1]))

    # The crate's Metadata::validate: sorted by offsets, contiguous from 0, sizes match.
    base = 8 + n
    start = 0
    prev = None
    for name, dtype, shape, s, end in sorted(entries, key=lambda x: (x[3], x[4])):
        rng = (base + s, base + max(s, end))
        if s != start or end < s:
            if end < s:
                why = f"data_offsets [{s}, {end}] end before they begin"
            elif s < start:
                why = (f"data_offsets [{s}, {end}] overlap tensor {prev!r}, which ends at "
                       f"{start}")
            else:
                why = (f"data_offsets [{s}, {end}] leave a hole: the previous tensor "
                       f"{'(' + repr(prev) + ') ' if prev is not None else ''}ends at {start}")
            raise _error(CorruptDataError, where, f"safetensors header: tensor {name!r}: {why} "
                         "(tensors must cover the data contiguously from 0)", rng)
        start = end
        prev = name
        count = 1
        for d in shape:
            count *= d
            if count >= _U64:
                raise _error(CorruptDataError, where, f"safetensors header: tensor {name!r}: "
                             f"shape {list(shape)} overflows 64 bits", rng)
        bits = _DTYPES[dtype][0]
        nbits = count * bits
        if nbits >= _U64:
            raise _error(CorruptDataError, where, f"safetensors header: tensor {name!r}: "
                         f"shape {list(shape)} of {dtype} overflows 64 bits", rng)
        if nbits % 8:
            raise _error(CorruptDataError, where, f"safetensors header: tensor {name!r}: "
                         f"{count} elements of {dtype} ({bits} bits each) do not end on a "
                         "byte boundary", rng)
        if end - s != nbits // 8:
            raise _error(CorruptDataError, where, f"safetensors header: tensor {name!r}: "
                         f"data_offsets [{s}, {end}] hold {end - s} bytes, but shape "
                         f"{list(shape)} of {dtype} needs {nbits // 8}", rng)
    f.data_end = base + start
    for name, dtype, shape, s, end in entries:
        f.tensors[name] = TensorInfo(name, dtype, shape, f.display, base + s, end - s)
    if f.size is not None and f.data_end != f.size:
        raise _error(CorruptDataError, where, f"the safetensors header says the data ends at "
                     f"byte {f.data_end}, but the file has {f.size} bytes "
                     f"({'truncated' if f.size < f.data_end else 'trailing bytes'}; safetensors "
                     "files end exactly where their data ends)",
                     (min(f.size, f.data_end), max(f.size, f.data_end)))


def _stat_local(f: _File, listed_in: Optional[str]) -> None:
    try:
        st = os.stat(f.source)
    except OSError as e:
        extra = f" (listed in {listed_in})" if listed_in else ""
        raise _storage_error(e.errno or errno.EIO, f.display,
                             f"cannot open safetensors file{extra}: {e.strerror}") from None
    if _stat.S_ISDIR(st.st_mode):
        raise _storage_error(errno.EISDIR, f.display, "is a directory, not a safetensors file")
    f.size = st.st_size


def _read_headers(files: List[_File], storage_options: Optional[Mapping[str, Any]],
                  threads: Optional[int], listed_in: Optional[str] = None) -> None:
    """Every file's header: one read_ranges call for the length prefixes, one for the headers."""
    for f in files:
        if not f.remote:
            _stat_local(f, listed_in)
            if f.size is not None and f.size < 8:
                raise _error(FormatError, f.display, f"not a safetensors file: {f.size} bytes, "
                             "fewer than the 8-byte header length", (0, f.size))
    if not files:
        return
    try:
        prefixes = _read(_one_source(files, range(len(files))), [[0, 8]] * len(files), None,
                         storage_options, threads)
    except StorageError as e:
        if not _past_end(e):
            raise
        bad = _failed_file(e, files)
        raise _error(FormatError, bad.display if bad else str(e.filename),
                     "not a safetensors file: fewer than 8 bytes (the header length)",
                     (0, 8)) from e
    for f, p in zip(files, prefixes):
        n = int(np.frombuffer(p.tobytes(), "<u8")[0])
        if n > MAX_HEADER_SIZE:
            raise _error(FormatError, f.display, f"safetensors header length {n} is over the "
                         f"limit of {MAX_HEADER_SIZE} bytes (not a safetensors file?)", (0, 8))
        if f.size is not None and 8 + n > f.size:
            raise _error(CorruptDataError, f.display, f"safetensors header length {n} runs past "
                         f"the end of the file ({f.size} bytes): truncated, or not a "
                         "safetensors file", (8, 8 + n))
        f.header_len = n
    want = [i for i, f in enumerate(files) if f.header_len > 0]
    raws: Dict[int, bytes] = {i: b"" for i in range(len(files))}
    if want:
        try:
            got = _read(_one_source(files, want), [[8, files[i].header_len] for i in want], None,
                        storage_options, threads)
        except StorageError as e:
            if not _past_end(e):
                raise
            bad = _failed_file(e, [files[i] for i in want])
            n = bad.header_len if bad else 0
            raise _error(CorruptDataError, bad.display if bad else str(e.filename),
                         f"safetensors header length {n} runs past the end of the file: "
                         "truncated, or not a safetensors file", (8, 8 + n)) from e
        for i, buf in zip(want, got):
            raws[i] = buf.tobytes()
    for i, f in enumerate(files):
        f.header_digest = hashlib.sha256(raws[i]).digest()
        _parse_header(f, raws[i])


# ---------------------------------------------------------------------------------------
# Locating the checkpoint


def _remote_store(dir_url: str, storage_options: Optional[Mapping[str, Any]]) -> Any:
    from . import _core

    return _core.RemoteStore(_storage.resolve(dir_url, storage_options).to_core())


def _split_url(url: str) -> Tuple[str, str]:
    base, _, name = url.rstrip("/").rpartition("/")
    return base, name


def _join(base: str, name: str, remote: bool) -> str:
    if not remote:
        return os.path.join(base, name)
    if urllib.parse.urlsplit(base).scheme.lower() in ("http", "https"):
        name = urllib.parse.quote(name)  # http(s) paths are percent-decoded per segment
    return base.rstrip("/") + "/" + name


def _locate(path: Any, storage_options: Optional[Mapping[str, Any]]
            ) -> Tuple[str, bool, Optional[bytes]]:
    """(file or index location, remote, index bytes or None for a single file)."""
    if isinstance(path, (bytes, bytearray)) or not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike, not {type(path).__name__}")
    if _storage.is_remote(path):
        url = str(path).rstrip("/")
        base, name = _split_url(url)
        if name.lower().endswith(".json"):
            raw = _remote_store(base, storage_options).get(name, MAX_HEADER_SIZE)
            if raw is None:
                raise _storage_error(errno.ENOENT, _display(url), "no such index file")
            return url, True, raw
        if name.lower().endswith(".safetensors"):
            return url, True, None
        store = _remote_store(url, storage_options)
        raw = store.get(INDEX_NAME, MAX_HEADER_SIZE)
        if raw is not None:
            return _join(url, INDEX_NAME, True), True, raw
        if store.exists(_SINGLE_NAME):
            return _join(url, _SINGLE_NAME, True), True, None
        raise _storage_error(errno.ENOENT, _display(url), f"neither {INDEX_NAME} nor "
                             f"{_SINGLE_NAME} found under this prefix (name a .safetensors or "
                             ".json object to read it directly)")
    local = _storage.local_path(path)
    if os.path.isdir(local):
        for name in (INDEX_NAME, _SINGLE_NAME):
            candidate = os.path.join(local, name)
            if os.path.isfile(candidate):
                local = candidate
                break
        else:
            raise _storage_error(errno.ENOENT, local, f"directory holds neither {INDEX_NAME} "
                                 f"nor {_SINGLE_NAME}")
    if local.lower().endswith(".json"):
        try:
            with open(local, "rb") as fh:
                return local, False, fh.read()
        except OSError as e:
            raise _storage_error(e.errno or errno.EIO, local,
                                 f"cannot read index file: {e.strerror}") from None
    return local, False, None


def _parse_index(raw: bytes, where: str) -> Tuple[Dict[str, str], Dict[str, Any]]:
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise _error(FormatError, where, f"safetensors index is not valid JSON: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("weight_map"), dict):
        raise _error(FormatError, where, 'safetensors index must be a JSON object with a '
                     '"weight_map" object (tensor name -> shard file name)')
    weight_map = doc["weight_map"]
    for name, shard in weight_map.items():
        if not isinstance(shard, str) or not shard:
            raise _error(FormatError, where, f"safetensors index: weight_map[{name!r}] must be "
                         f"a shard file name, got {shard!r}")
        parts = shard.replace("\\", "/").split("/")
        if shard.startswith("/") or ".." in parts or "://" in shard:
            raise _error(FormatError, where, f"safetensors index: weight_map[{name!r}] = "
                         f"{shard!r} must be a file name relative to the index's directory")
    meta = doc.get("metadata")
    return weight_map, meta if isinstance(meta, dict) else {}


def _key_error(missing: str, available: Sequence[str], where: str) -> KeyError:
    close = difflib.get_close_matches(missing, available, n=3)
    hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
    some = ", ".join(repr(a) for a in list(available)[:5])
    more = ", ..." if len(available) > 5 else ""
    return KeyError(f"no tensor named {missing!r} in {where}{hint} (it has {len(available)} "
                    f"tensors: {some}{more})")


def _names_list(names: Optional[Iterable[str]]) -> Optional[List[str]]:
    if names is None:
        return None
    if isinstance(names, str):
        names = [names]
    out: List[str] = []
    seen = set()
    for n in names:
        if not isinstance(n, str):
            raise TypeError(f"names must be tensor names (str), got {type(n).__name__}")
        if n not in seen:
            seen.add(n)
            out.append(n)
    return out


def _open(path: Any, names: Optional[Iterable[str]], storage_options: Optional[Mapping[str, Any]],
          threads: Optional[int]) -> _Checkpoint:
    """Resolve ``path``, read the needed headers (checked) and pick the tensors."""
    wanted = _names_list(names)
    location, remote, index_raw = _locate(path, storage_options)
    where = _display(location)
    if index_raw is None:
        f = _File(location, where, remote)
        _read_headers([f], storage_options, threads)
        if wanted is None:
            return _Checkpoint([f], [(0, t) for t in f.tensors.values()], where)
        chosen = []
        for n in wanted:
            if n not in f.tensors:
                raise _key_error(n, list(f.tensors), where)
            chosen.append((0, f.tensors[n]))
        return _Checkpoint([f], chosen, where)

    weight_map, _ = _parse_index(index_raw, where)
    if wanted is None:
        wanted = list(weight_map)
    for n in wanted:
        if n not in weight_map:
            raise _key_error(n, list(weight_map), where)
    shard_names = list(dict.fromkeys(weight_map[n] for n in wanted))
    base = _split_url(location)[0] if remote else os.path.dirname(location)
    files = []
    for s in shard_names:
        src = _join(base, s, remote)
        files.append(_File(src, _display(src), remote))
    _read_headers(files, storage_options, threads, listed_in=where)
    slot = {s: i for i, s in enumerate(shard_names)}
    chosen = []
    for n in wanted:
        i = slot[weight_map[n]]
        t = files[i].tensors.get(n)
        if t is None:
            raise _error(CorruptDataError, files[i].display, f"index {where} puts tensor {n!r} "
                         "in this shard, but its header has no such tensor")
        chosen.append((i, t))
    return _Checkpoint(files, chosen, where)


# ---------------------------------------------------------------------------------------
# Reading the tensors


def _probes(ck: _Checkpoint, reach: Optional[Dict[int, int]] = None) -> List[Tuple[int, int]]:
    """(file index, offset) of one byte at the data end of every remote file whose reads do
    not already reach it: a truncated remote file fails the load (local files were checked
    against their size). ``reach``: file index -> end of the last byte read (default: the
    chosen tensors' ends)."""
    if reach is None:
        reach = {}
        for i, t in ck.chosen:
            reach[i] = max(reach.get(i, 0), t.offset + t.nbytes)
    out = []
    for i, f in enumerate(ck.files):
        if f.remote and f.data_end > 8 + f.header_len and reach.get(i, -1) < f.data_end:
            out.append((i, f.data_end - 1))
    return out


def _swap(buf: np.ndarray, unit: int) -> None:
    """Little-endian bytes of `unit`-byte elements -> native order, in place (big-endian hosts)."""
    if unit > 1 and sys.byteorder == "big" and buf.size:
        b = buf.reshape(-1, unit)
        b[...] = b[:, ::-1].copy()


def _read_pieces(ck: _Checkpoint, pieces: Sequence[Tuple[int, int, int, np.ndarray]],
                 storage_options: Optional[Mapping[str, Any]], threads: Optional[int],
                 probes: Sequence[Tuple[int, int]] = ()) -> None:
    """One read_ranges call: pieces are (file index, offset, length, uint8 destination)."""
    which = [p[0] for p in pieces] + [i for i, _ in probes]
    if not which:
        return
    ranges = [[p[1], p[2]] for p in pieces] + [[off, 1] for _, off in probes]
    outs = [p[3] for p in pieces] + [np.empty(1, np.uint8) for _ in probes]
    try:
        _read(_one_source(ck.files, which), ranges, outs, storage_options, threads)
    except StorageError as e:
        err = _truncated(e, [ck.files[i] for i in dict.fromkeys(which)])
        if err is e:
            raise
        raise err from e


def _truncated(e: StorageError, files: Sequence[_File]) -> Error:
    """A failed data read as a load reports it: a range past the end of a file is a
    truncated file (CorruptDataError naming it); any other error is returned as it is."""
    if not _past_end(e):
        return e
    bad = _failed_file(e, files)
    where = bad.display if bad else str(e.filename)
    end = bad.data_end if bad else 0
    return _error(CorruptDataError, where, "the file ends before the data its safetensors "
                  f"header describes (data end at byte {end}): truncated file",
                  (end - 1, end) if end else None)


def _numpy_dtype(t: TensorInfo) -> np.dtype:
    _, np_name, ml_name, _, _ = _DTYPES[t.dtype]
    if np_name is not None:
        return np.dtype(np_name)
    if ml_name is None:
        raise _error(UnsupportedError, t.file, f"tensor {t.name!r} has dtype {t.dtype}, which "
                     "numpy cannot represent" + (" (two 4-bit values a byte); "
                     "lsio.safetensors.load_torch loads it as torch.float4_e2m1fn_x2"
                     if t.dtype == "F4" else ""))
    try:
        import ml_dtypes
    except ImportError:
        raise _error(UnsupportedError, t.file, f"tensor {t.name!r} has dtype {t.dtype}, which "
                     "numpy has no type for: pip install ml_dtypes (or 'lsio[safetensors]'), or "
                     "load it with lsio.safetensors.load_torch") from None
    typ = getattr(ml_dtypes, ml_name, None)
    if typ is None:
        raise _error(UnsupportedError, t.file, f"tensor {t.name!r} has dtype {t.dtype}; this "
                     f"ml_dtypes ({getattr(ml_dtypes, '__version__', '?')}) has no {ml_name}: "
                     "upgrade ml_dtypes, or use lsio.safetensors.load_torch")
    return np.dtype(typ)  # type: ignore[no-any-return]


def import_for(module: str, function: str, package: str, extra: str) -> Any:
    """``import module`` for ``lsio.safetensors.<function>``; ImportError saying what to install."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(f"lsio.safetensors.{function} needs {package}: pip install {module} (or "
                          f"pip install 'lsio[{extra}]'); importing it failed: {e}") from e

"""The ``lsio`` command line (also ``python -m lsio``).

``lsio info STORE [ARRAY]``
    Metadata, chunk and shard statistics, bytes on disk and compression ratio of an array, or
    of every array in a group.
``lsio bench STORE [ARRAY] --crop 4,256,256 --batch 32 --threads 8 --io auto``
    Random-crop throughput (crops/s, MB/s, batch latency percentiles).
``lsio verify STORE [ARRAY]``
    Reads every stored chunk (checksums are checked by the decoder), reports corrupt and
    missing chunks; exit status 1 if any chunk is corrupt or unreadable.

Every command takes ``--json`` (one JSON document on stdout). Exit status: 0 success,
1 corruption found by ``verify``, 2 usage error or a store that cannot be opened, 3 an
internal error (a bug in lsio: the traceback is printed; please report it).

``verify`` can only find what the stored bytes make detectable: a chunk that fails to decode,
or one whose checksum does not match. Codecs with a checksum: v3 ``crc32c``, ``zstd`` with
``checksum: true``, ``gzip``; v2 ``zlib``, ``gzip``, ``zstd`` with ``checksum``. Without one
(zarr-python's default zstd, blosc, lz4, uncompressed), flipped bits that still decode go
unnoticed; ``verify`` names such arrays and says once how to write checksummed chunks for
their Zarr format. Chunks failing alike (one file, one kind of error) print as one line.
Progress bars (tqdm, stderr) are drawn for ``verify`` when stderr is a terminal;
``--progress`` / ``--no-progress`` force them on or off.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import math
import os
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import __version__
from .array import Array
from .errors import CorruptDataError, Error, FormatError, StorageError, UnsupportedError
from . import _storage
from ._hdf5 import typed_attrs as _typed
from ._nodes import LocalNodes, RemoteNodes
from ._strings import StringArray, is_vlen_string
from .group import group_from

__all__ = ["main"]

EXIT_OK, EXIT_CORRUPT, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3
_LIST_LIMIT = 1000


# -- helpers -----------------------------------------------------------------------------


class _Unreadable:
    """An array lsio cannot read (an unsupported codec or data type): its metadata and why."""

    def __init__(self, path: str, meta: Dict[str, Any], why: str) -> None:
        self.path, self.meta, self.why = path, meta, why


def _open_array(path: str, node: Dict[str, Any], opts: Dict[str, Any], unreadable_ok: bool) -> Any:
    meta = node["metadata"]
    try:
        if is_vlen_string(meta):
            # Outside the engine's crop path, as lsio.open and groups open them.
            return StringArray(path, meta, node["files"][0]["location"], opts.get("storage_options"))
        return Array(path, **opts, _files=node["files"])
    except UnsupportedError as e:
        if not unreadable_ok:
            raise
        return _Unreadable(path, meta, str(e))


class _Targets:
    """What a command opened: ``kind`` ("array" or "group"), ``arrays`` [(name, Array or
    _Unreadable)], the Group (None for an array) and each array's node metadata by name,
    so nothing is read twice (each read is a request on remote stores)."""

    def __init__(self, kind: str, arrays: List[Tuple[str, Any]], group: Any, metas: Dict[str, Dict[str, Any]]):
        self.kind, self.arrays, self.group, self.metas = kind, arrays, group, metas


def _open_targets(store: str, name: Optional[str], opts: Dict[str, Any],
                  unreadable_ok: bool = False) -> _Targets:
    """The arrays of an array path or URL, a group, or group + array name. With
    ``unreadable_ok``, arrays lsio cannot read come back as :class:`_Unreadable`."""
    try:
        return _open_targets_unchecked(store, name, opts, unreadable_ok)
    except TypeError as e:  # option values of the wrong type (--storage-option JSON)
        raise _Usage(str(e)) from e


def _open_targets_unchecked(store: str, name: Optional[str], opts: Dict[str, Any],
                            unreadable_ok: bool) -> _Targets:
    from . import _icechunk  # noqa: PLC0415 - loaded when used

    ref = opts.pop("_icechunk", None)
    if ref is not None or _icechunk.is_icechunk(store):
        return _icechunk_targets(store, name, opts, ref or {}, unreadable_ok)
    if _storage.is_remote(store):
        path = "/".join([store.rstrip("/"), *(p for p in (name or "").split("/") if p)])
        nodes: Any = RemoteNodes(path, opts.get("storage_options"))
        path = nodes.display
        node = nodes.read(path)
        base = nodes.basename(path)
        url = nodes.url
    else:
        if opts.get("storage_options"):
            raise _Usage("--storage-option applies to URLs (s3://, gs://, http(s)://)")
        opts = {k: v for k, v in opts.items() if k != "storage_options"}
        root = _storage.local_path(store)  # '~' and file:// as lsio.open takes them
        path = os.path.join(root, name) if name else root
        nodes = LocalNodes()
        node = nodes.read(path)
        base = os.path.basename(os.path.abspath(path))
        url = path
    if node["node_type"] == "array":
        label = name or base
        return _Targets("array", [(label, _open_array(url, node, opts, unreadable_ok))], None,
                        {label: node["metadata"]})
    # The group's zarr.json is the one just read; its members' metadata comes with it.
    g = group_from(nodes, path, node, None, {k: v for k, v in opts.items() if k != "storage_options"})
    return _group_targets(g, lambda rel: nodes.join(path, rel), unreadable_ok)


def _group_targets(g: Any, where: Any, unreadable_ok: bool) -> _Targets:
    """Every array below group ``g`` (``where(rel)`` names one that cannot be read)."""
    members: List[Tuple[str, Any]] = []
    metas: Dict[str, Dict[str, Any]] = {}
    for rel, member_meta in g.walk_arrays():
        metas[rel] = member_meta
        try:
            members.append((rel, g[rel]))
        except UnsupportedError as e:
            if not unreadable_ok:
                raise
            members.append((rel, _Unreadable(where(rel), member_meta, str(e))))
    return _Targets("group", members, g, metas)


def _icechunk_targets(store: str, name: Optional[str], opts: Dict[str, Any], ref: Dict[str, str],
                      unreadable_ok: bool) -> _Targets:
    """An Icechunk repository's root group (or the node ``name`` in it) at ``ref``."""
    from .group import open_icechunk  # noqa: PLC0415

    engine = {k: v for k, v in opts.items() if k != "storage_options"}
    g = open_icechunk(store, storage_options=opts.get("storage_options"), **ref, **engine)
    parts = [p for p in (name or "").split("/") if p]
    if parts:
        parent = g["/".join(parts[:-1])] if len(parts) > 1 else g
        meta = parent.member_metadata(parts[-1]) if parts[-1] in parent.keys() else None
        if meta is None:
            raise _Usage(f"{name!r} is not in the Icechunk repository {store!r} (snapshot {g.snapshot_id})")
        if meta.get("node_type") == "array":
            try:
                arr: Any = g[name]
            except UnsupportedError as e:
                if not unreadable_ok:
                    raise
                arr = _Unreadable(name, meta, str(e))
            return _Targets("array", [(name, arr)], None, {name: meta})
        g = g[name]
    return _group_targets(g, lambda rel: rel, unreadable_ok)


def _open_one(store: str, name: Optional[str], opts: Dict[str, Any]) -> Tuple[str, Array]:
    t = _open_targets(store, name, opts)
    if t.kind == "group":
        names = [n for n, _ in t.arrays]
        raise _Usage(f"{store!r} is a group; name one of its arrays: {', '.join(names) or '(none)'}")
    name_, arr = t.arrays[0]
    if isinstance(arr, StringArray):
        raise _Usage(f"{name_!r} is a variable-length string array: bench times crops of "
                     "fixed-size data types")
    return name_, arr


class _Usage(Exception):
    pass


def _fmt_shape(t: Optional[Sequence[int]]) -> str:
    if t is None:
        return "-"
    return "(" + ", ".join(str(int(v)) for v in t) + ("," if len(t) == 1 else "") + ")"


def _opts(args: argparse.Namespace) -> Dict[str, Any]:
    opts: Dict[str, Any] = {"threads": args.threads, "io": args.io}
    so = _storage_options(args)
    if so is not None:
        opts["storage_options"] = so
    ref = getattr(args, "icechunk", None)
    if ref is not None:
        kind, sep, value = ref.partition(":")
        if not sep or kind not in ("branch", "tag", "snapshot") or not value:
            raise _Usage(f"--icechunk expects branch:NAME, tag:NAME or snapshot:ID, got {ref!r}")
        opts["_icechunk"] = {kind: value}
    return opts


def _storage_options(args: argparse.Namespace) -> Optional[Dict[str, Any]]:
    """--storage-option KEY=VALUE (VALUE parsed as JSON when it parses to a type the option
    takes: numbers, true, {"a": 1}; options typed str keep the text) and --anon, or None when
    neither was given."""
    pairs = getattr(args, "storage_option", None) or []
    if not pairs and not getattr(args, "anon", False):
        return None
    so: Dict[str, Any] = {}
    for item in pairs:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise _Usage(f"--storage-option expects KEY=VALUE, got {item!r}")
        so[key] = _storage.option_from_text(key, value)
    if getattr(args, "anon", False):
        so["anonymous"] = True
    return so


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):  # numeric attributes of HDF5 files are typed (_hdf5.typed_attrs)
        return _jsonable(x.tolist())
    if isinstance(x, bytes):
        return x.decode("utf-8", "replace")
    if isinstance(x, np.generic):
        v = x.item()
        if isinstance(v, bytes):
            return v.decode("utf-8", "replace")
        if isinstance(v, float) and not math.isfinite(v):
            return str(v)
        if isinstance(v, complex):
            return [v.real, v.imag]
        return v
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    if isinstance(x, complex):  # inside records' tuples (their .item() gives Python values)
        return [_jsonable(x.real), _jsonable(x.imag)]
    if isinstance(x, (datetime.datetime, datetime.date, datetime.timedelta)):
        return str(x)
    return x


def _emit_json(doc: Any) -> None:
    json.dump(_jsonable(doc), sys.stdout, indent=2)
    sys.stdout.write("\n")


# -- info --------------------------------------------------------------------------------


def _string_info(name: str, arr: StringArray) -> Dict[str, Any]:
    """``info`` of a variable-length string array: the same metadata as other arrays; chunk
    statistics from the stored chunk files on local stores (the engine's survey does not
    cover them, and their decoded size is not known without reading them)."""
    d: Dict[str, Any] = {
        "name": name, "path": arr.path, "shape": list(arr.shape), "dtype": str(arr.dtype),
        "chunks": list(arr.chunks), "shards": None, "codecs": arr.codecs,
        "fill_value": str(arr.fill_value),
        "dimension_names": None if arr.dimension_names is None else list(arr.dimension_names),
        "attributes": arr.attrs, "variable_length": True,
    }
    total = math.prod(-(-s // c) for s, c in zip(arr.shape, arr.chunks)) if arr.ndim else 1
    d["chunks_total"] = total
    if _storage.is_remote(arr.path):
        # One request per chunk just to count them: not worth it for info.
        d["files"] = d["bytes_on_disk"] = None
        return d
    sizes = []
    for _coords, key in arr.chunk_keys():
        try:
            sizes.append(os.stat(arr._where(key)).st_size)
        except FileNotFoundError:
            pass
    d.update({"chunks_present": len(sizes), "present_fraction": len(sizes) / total if total else 1.0,
              "stored_bytes": sum(sizes)})
    d["files"], d["bytes_on_disk"] = _disk_usage(arr.path)
    return d


def _array_info(name: str, arr: Array) -> Dict[str, Any]:
    from ._repr import chunk_stats

    if isinstance(arr, StringArray):
        return _string_info(name, arr)

    d: Dict[str, Any] = {
        "name": name,
        "path": arr.path,
        "shape": list(arr.shape),
        "dtype": str(arr.dtype),
        "chunks": list(arr.chunks),
        "shards": None if arr.shards is None else list(arr.shards),
        "codecs": arr.codecs,
        "fill_value": arr.fill_value.item(),
        "dimension_names": None if arr.dimension_names is None else list(arr.dimension_names),
        "attributes": arr.attrs,
        "nbytes": arr.nbytes,
    }
    try:
        d.update(chunk_stats(arr))
    except Error as e:
        d["stats_error"] = f"{type(e).__name__}: {e}"
    if _storage.is_remote(arr.path):
        d["files"] = None  # object stores are not walked (HTTP cannot list)
        d["bytes_on_disk"] = None
        return d
    d["files"], d["bytes_on_disk"] = _disk_usage(arr.path)
    return d


def _disk_usage(path: str) -> Tuple[int, int]:
    """Files below a local store's directory and their bytes (vanished files skipped)."""
    files, size = 0, 0
    for root, _dirs, names in os.walk(path):
        for n in names:
            try:
                size += os.stat(os.path.join(root, n)).st_size
                files += 1
            except OSError:
                pass
    return files, size


# Configuration entries left out of codec descriptions: derived or default values.
_QUIET_CONFIG = {"bytes": {"endian": "little"}, "blosc": {"typesize": None, "blocksize": 0}}
# v2 filters and compressors as the engine names them in the v3 form -> numcodecs ids.
_V2_NAMES = {"lsio.v2.delta": "delta", "numcodecs.shuffle": "shuffle", "numcodecs.lz4": "lz4"}


def _codec_details(meta: Optional[Dict[str, Any]], engine_codecs: Any = None) -> Optional[str]:
    """The codec chain of node metadata (the v3 form; a v2 .zarray as the engine translates
    it) with each codec's configuration: ``bytes, blosc(cname=lz4, clevel=5, shuffle=shuffle)``,
    ``v2[...]`` for Zarr v2, ``sharding_indexed[inner codecs]``."""
    if not isinstance(meta, dict) or not isinstance(meta.get("codecs"), list):
        return None
    v2 = meta.get("zarr_format") == 2
    zlib = v2 and isinstance(engine_codecs, str) and "zlib" in engine_codecs  # v2 zlib is read by gzip

    def value(v: Any) -> str:
        return v if isinstance(v, str) else json.dumps(_jsonable(v))

    def text(cs: Any) -> str:
        parts = []
        for c in cs or []:
            n = c if isinstance(c, str) else c.get("name") if isinstance(c, dict) else None
            cfg = c.get("configuration", {}) if isinstance(c, dict) else {}
            cfg = cfg if isinstance(cfg, dict) else {}
            if n == "sharding_indexed":
                parts.append(f"sharding_indexed[{text(cfg.get('codecs'))}]")
                continue
            if v2:
                n = "zlib" if zlib and n == "gzip" else _V2_NAMES.get(str(n), n)
            quiet = _QUIET_CONFIG.get(str(n), {})
            shown = [f"{k}={value(v)}" for k, v in cfg.items() if not (k in quiet and quiet[k] in (None, v))]
            parts.append(f"{n}({', '.join(shown)})" if shown else str(n))
        return ", ".join(parts)

    body = text(meta["codecs"])
    return f"v2[{body}]" if v2 else body


def _unreadable_info(name: str, u: _Unreadable) -> Dict[str, Any]:
    """What the metadata says of an array lsio cannot read (its zarr.json, or its v2 .zarray
    in the v3 form the engine translates it to)."""
    m = u.meta
    grid = m.get("chunk_grid")
    chunks = grid.get("configuration", {}).get("chunk_shape") if isinstance(grid, dict) else None
    dtype = m.get("data_type")
    return {"name": name, "path": u.path, "readable": False, "not_readable_because": u.why,
            "shape": m.get("shape"), "dtype": dtype if isinstance(dtype, str) else json.dumps(dtype),
            "chunks": chunks, "codecs": _codec_details(m) or "", "attributes": _typed(m.get("attributes") or {})}


def _print_info(d: Dict[str, Any]) -> None:
    from ._repr import format_bytes

    p = print
    p(f"{d['name']}  ({d['path']})")
    if d.get("readable") is False:
        p(f"  shape          {_fmt_shape(d['shape'])}   dtype {d['dtype']}")
        p(f"  chunks         {_fmt_shape(d['chunks'])}")
        p(f"  codecs         {d['codecs']}")
        p(f"  not readable by lsio: {d['not_readable_because']}")
        return
    p(f"  shape          {_fmt_shape(d['shape'])}   dtype {d['dtype']}   fill {d['fill_value']!r}")
    if d.get("dimension_names"):
        p(f"  dimensions     {', '.join(str(n) for n in d['dimension_names'])}")
    p(f"  chunks         {_fmt_shape(d['chunks'])}   shards {_fmt_shape(d['shards'])}")
    p(f"  codecs         {d.get('codec_details') or d['codecs']}")
    if not d.get("variable_length"):
        p(f"  size           {format_bytes(d['nbytes'])} uncompressed")
    if d.get("variable_length"):
        if "chunks_present" in d:
            p(f"  chunks         {d['chunks_present']:,} of {d['chunks_total']:,} stored "
              f"({d['present_fraction']:.1%}), {format_bytes(d['stored_bytes'])} of chunk data")
        else:
            p(f"  chunks         {d['chunks_total']:,} in the grid (stored ones not counted on remote stores)")
    elif "stats_error" in d:
        p(f"  statistics     unavailable: {d['stats_error']}")
    else:
        p(
            f"  chunks         {d['chunks_present']:,} of {d['chunks_total']:,} stored "
            f"({d['present_fraction']:.1%}), grid {_fmt_shape(d['chunk_grid'])}"
        )
        if d["chunks_present"]:
            p(
                f"  chunk bytes    min {format_bytes(d['stored_chunk_bytes_min'])}  "
                f"mean {format_bytes(d['stored_chunk_bytes_mean'])}  max {format_bytes(d['stored_chunk_bytes_max'])}"
            )
        if "shards_total" in d:
            p(f"  shards         {d['shards_present']:,} of {d['shards_total']:,} stored, grid {_fmt_shape(d['shard_grid'])}")
            if d["shards_present"]:
                p(
                    f"  shard bytes    min {format_bytes(d['shard_bytes_min'])}  "
                    f"mean {format_bytes(d['shard_bytes_mean'])}  max {format_bytes(d['shard_bytes_max'])}"
                )
        ratio = d["compression_ratio"]
        p(f"  chunk data     {format_bytes(d['stored_bytes'])}   compression ratio {'-' if ratio is None else f'{ratio:.2f}x'}")
    if d["files"] is not None:
        p(f"  bytes on disk  {format_bytes(d['bytes_on_disk'])} in {d['files']:,} files (metadata and indexes included)")
    if d.get("attributes"):
        p(f"  attributes     {_attrs_text(d['attributes'])}")


def _attrs_text(attrs: Dict[str, Any]) -> str:
    text = json.dumps(_jsonable(attrs))
    return text if len(text) < 200 else text[:197] + "..."


def cmd_info(args: argparse.Namespace) -> int:
    t = _open_targets(args.store, args.array, _opts(args), unreadable_ok=True)
    kind = t.kind
    infos = [_unreadable_info(n, a) if isinstance(a, _Unreadable) else _array_info(n, a) for n, a in t.arrays]
    for (n, a), d in zip(t.arrays, infos):
        if not isinstance(a, _Unreadable):  # each codec with its configuration (levels, blosc cname)
            d["codec_details"] = _codec_details(t.metas.get(n), d.get("codecs"))
    remote = _storage.is_remote(args.store)
    doc: Dict[str, Any] = {"store": args.store if remote else _storage.local_path(args.store), "kind": kind, "arrays": infos}
    if kind == "group":
        g = t.group
        doc["attributes"] = g.attrs
        doc["consolidated"] = g.consolidated
        if g.snapshot_id is not None:
            doc["icechunk_snapshot"] = g.snapshot_id
    if args.json:
        _emit_json(doc)
        return EXIT_OK
    if kind == "group":
        n = len(infos)
        how = ("Icechunk snapshot " + doc["icechunk_snapshot"] if "icechunk_snapshot" in doc
               else "consolidated metadata" if doc["consolidated"] else "listed")
        print(f"group {doc['store']}: {n} array{'' if n == 1 else 's'} ({how})")
        if doc["attributes"]:
            print(f"  attributes     {_attrs_text(doc['attributes'])}")
    for d in infos:
        _print_info(d)
    return EXIT_OK


# -- bench -------------------------------------------------------------------------------


def _parse_shape(text: str) -> Tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.replace("x", ",").split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a shape like 4,256,256, got {text!r}") from None


def _chunks_touched(starts: np.ndarray, crop: Tuple[int, ...], chunks: Tuple[int, ...]) -> int:
    """Distinct read chunks a batch of crops touches (what the engine reads and decodes)."""
    c = np.asarray(chunks, dtype=np.int64)
    lo = starts // c
    hi = (starts + np.asarray(crop, dtype=np.int64) - 1) // c
    seen = set()
    for a, b in zip(lo.tolist(), hi.tolist()):
        seen.update(itertools.product(*(range(x, y + 1) for x, y in zip(a, b))))
    return len(seen)


_STAT_COUNTERS = ("requests", "retries", "bytes_fetched", "bytes_used", "errors")


def _coalescing(arr: Array, st: Dict[str, Any]) -> Dict[str, Any]:
    """How a remote array merges byte ranges: the store's adaptive values (in its stats) or
    the ones given (--max-gap / --max-request, or LSIO_MERGE_GAP / LSIO_MAX_READ)."""
    opts = arr.options
    adaptive = bool(opts.get("adaptive_coalescing", "max_gap" in st))
    return {"max_gap": int(st.get("max_gap", opts.get("max_gap", 0))),
            "max_request": int(st.get("max_request", opts.get("max_request", 0))), "adaptive": adaptive}


def cmd_bench(args: argparse.Namespace) -> int:
    opts = _opts(args)
    from ._options import parse_size

    for k in ("max_gap", "max_request"):
        if getattr(args, k, None) is not None:
            try:
                opts[k] = parse_size(str(args.__dict__[k]).strip(), "--" + k.replace("_", "-"))
            except ValueError as e:
                raise _Usage(str(e)) from None
    name, arr = _open_one(args.store, args.array, opts)
    if args.crop is None:
        crop = tuple(min(s, c) for s, c in zip(arr.shape, arr.shards or arr.chunks))
    else:
        crop = args.crop
        if len(crop) != arr.ndim:
            raise _Usage(f"--crop has {len(crop)} dimensions, the array has {arr.ndim}")
        if any(c < 1 or c > s for c, s in zip(crop, arr.shape)):
            raise _Usage(f"--crop {crop} does not fit in the array shape {arr.shape}")
    rng = np.random.default_rng(args.seed)
    hi = np.subtract(arr.shape, crop) + 1
    buf = np.empty((args.batch, *crop), dtype=arr.dtype)
    arr.read_crops(rng.integers(0, hi, size=(args.batch, arr.ndim)), crop, out=buf)  # warm-up
    remote = _storage.is_remote(arr.path)
    st0 = arr.stats() if remote else None  # the timed batches' counters start here
    times: List[float] = []
    touched = 0  # distinct chunks per batch, summed (counted outside the timed calls)
    t_end = time.perf_counter() + args.seconds if args.seconds else None
    from .progress import bar

    with bar(total=None if t_end else args.rounds, desc="bench", enable=args.progress, unit="batch") as b:
        for i in itertools.count():
            if t_end is None and i >= args.rounds:
                break
            if t_end is not None and time.perf_counter() >= t_end and i > 0:
                break
            starts = rng.integers(0, hi, size=(args.batch, arr.ndim))
            t0 = time.perf_counter()
            arr.read_crops(starts, crop, out=buf)
            times.append(time.perf_counter() - t0)
            touched += _chunks_touched(starts, crop, arr.chunks)
            b.update(1)
    total = sum(times)
    n_crops = len(times) * args.batch
    doc = {
        "array": name,
        "path": arr.path,
        "shape": list(arr.shape),
        "dtype": str(arr.dtype),
        "crop": list(crop),
        "batch": args.batch,
        "batches": len(times),
        "threads": args.threads,
        "io": arr.io_backend,
        "seconds": total,
        "crops_per_s": n_crops / total if total else None,
        "mb_per_s": n_crops * buf[0].nbytes / total / 1e6 if total else None,
        # Output MB/s counts overlapping crops once per crop; these count what was decoded.
        "chunks_per_s": touched / total if total else None,
        "decoded_mb_per_s": touched * math.prod(arr.chunks) * arr.dtype.itemsize / total / 1e6 if total else None,
        "batch_ms_p50": float(np.percentile(times, 50) * 1e3),
        "batch_ms_p90": float(np.percentile(times, 90) * 1e3),
        "batch_ms_max": float(max(times) * 1e3),
    }
    if remote:
        st1 = arr.stats()
        doc["store_stats"] = st1  # since the open: metadata, warm-up batch and timed batches
        timed = {k: int(st1.get(k, 0)) - int(st0.get(k, 0)) for k in _STAT_COUNTERS}
        doc["timed_store_stats"] = timed
        # What was received per byte the reads needed (chunks and shard indexes). Above 1: byte
        # ranges of one object less than max_gap apart were fetched as one request (the gap
        # too), and retried transfers; max_gap=0 fetches only what is used, in more requests.
        doc["fetched_per_used"] = timed["bytes_fetched"] / timed["bytes_used"] if timed["bytes_used"] else None
        doc["coalescing"] = _coalescing(arr, st1)
    if args.json:
        _emit_json(doc)
    else:
        print(
            f"{name}: crop {_fmt_shape(crop)} x batch {args.batch}, {len(times)} batches, io={doc['io']}, "
            f"threads={args.threads or 'all'}\n"
            f"  {doc['crops_per_s']:,.1f} crops/s   {doc['mb_per_s']:,.1f} MB/s   "
            f"batch p50 {doc['batch_ms_p50']:.2f} ms  p90 {doc['batch_ms_p90']:.2f} ms  max {doc['batch_ms_max']:.2f} ms\n"
            f"  {doc['chunks_per_s']:,.0f} chunks/s decoded ({doc['decoded_mb_per_s']:,.1f} MB/s of decoded chunks; "
            "the MB/s above is output, where overlapping crops count twice)"
        )
        st = doc.get("store_stats")
        if st:
            from ._repr import format_bytes

            used = st["bytes_used"] or 1
            print(
                f"  {st['requests']:,} requests ({st['requests'] / (len(times) + 1):.1f} per batch, warm-up "
                f"included), {st['retries']:,} retries, fetched {format_bytes(st['bytes_fetched'])} for "
                f"{format_bytes(st['bytes_used'])} used ({st['bytes_fetched'] / used:.2f}x)"
            )
            tm, co, ratio = doc["timed_store_stats"], doc["coalescing"], doc["fetched_per_used"]
            print(
                f"  timed batches: {tm['requests']:,} requests ({tm['requests'] / max(1, len(times)):.1f} per batch), "
                f"fetched {format_bytes(tm['bytes_fetched'])} for {format_bytes(tm['bytes_used'])} of chunks and "
                f"indexes used" + ("" if ratio is None else f" ({ratio:.2f}x)")
            )
            if ratio is not None and ratio > 1.005:
                why = "gap filling" + (f" and {tm['retries']:,} retried requests" if tm["retries"] else "")
                print(
                    f"  the {format_bytes(tm['bytes_fetched'] - tm['bytes_used'])} fetched beyond use is {why}: byte "
                    f"ranges of one shard less than max_gap={format_bytes(co['max_gap'])} apart are fetched as one "
                    f"request, up to max_request={format_bytes(co['max_request'])} "
                    f"({'chosen by the store from its latency and throughput' if co['adaptive'] else 'fixed'}); "
                    f"--max-gap 0 fetches only used bytes, in more requests"
                )
    return EXIT_OK


# -- verify ------------------------------------------------------------------------------


def _blocks(grid: Tuple[int, ...], per: Tuple[int, ...]):
    ranges = [range(0, g, p) for g, p in zip(grid, per)]
    for origin in itertools.product(*ranges):
        yield tuple(origin), tuple(min(p, g - o) for o, p, g in zip(origin, per, grid))


def _verify_block_size(arr: Array, grid: Tuple[int, ...]) -> Tuple[int, ...]:
    if arr.shards is not None:
        return tuple(max(1, s // c) for s, c in zip(arr.shards, arr.chunks))
    # unsharded: blocks of chunks up to ~32 MiB decoded, growing from the last dimension
    chunk_bytes = max(1, math.prod(arr.chunks) * arr.dtype.itemsize)
    budget = max(1, (32 << 20) // chunk_bytes)
    per = [1] * len(grid)
    for d in reversed(range(len(grid))):
        take = max(1, min(grid[d], budget))
        per[d] = take
        budget //= take
        if budget <= 1:
            break
    return tuple(per)


def _chunk_slices(arr: Array, origin: Tuple[int, ...], count: Tuple[int, ...]) -> tuple:
    return tuple(
        slice(o * c, min((o + n) * c, s)) for o, n, c, s in zip(origin, count, arr.chunks, arr.shape)
    )


def _checksums(meta: Dict[str, Any]) -> Tuple[bool, str]:
    """(chunks carry a checksum the decoder checks, what the codecs give) from an array's
    node metadata in the v3 form (a v2 zlib or gzip compressor is v3's gzip codec there)."""
    found: List[str] = []
    codecs: List[str] = []

    def walk(cs: Any) -> None:
        for c in cs or []:
            n = c if isinstance(c, str) else c.get("name") if isinstance(c, dict) else None
            cfg = c.get("configuration", {}) if isinstance(c, dict) else {}
            if n == "sharding_indexed":  # the chunks' own codecs (index_codecs guard the index)
                walk(cfg.get("codecs"))
                continue
            codecs.append(str(n))
            if n == "crc32c" or n == "gzip" or (n == "zstd" and cfg.get("checksum")):
                found.append("zstd with checksum" if n == "zstd" else str(n))

    walk(meta.get("codecs"))
    if found:
        return True, ", ".join(found)
    return False, f"{', '.join(codecs) or 'no codecs'}, without a checksum"


def _verify_strings(arr: StringArray, res: Dict[str, Any], bar_: Any) -> Dict[str, Any]:
    """Every stored chunk of a variable-length string array read and decoded, one by one
    (the engine's chunk survey and block reads do not apply: its elements have no fixed size)."""
    missing: List[List[int]] = []
    bad: Dict[str, List[Dict[str, Any]]] = {"corrupt": [], "unreadable": []}
    checked = 0
    for coords, _key in arr.chunk_keys():
        try:
            if arr._stored_chunk(coords) is None:
                missing.append(list(coords))
            else:
                checked += 1
        except (CorruptDataError, FormatError) as e:  # FormatError: items that do not parse
            _problem(bad["corrupt"], coords, e)
        except StorageError as e:
            _problem(bad["unreadable"], coords, e)
        bar_.update(1)
    res["chunks_total"] = checked + len(missing) + len(bad["corrupt"]) + len(bad["unreadable"])
    res["missing_count"] = len(missing)
    res["missing"] = missing[:_LIST_LIMIT]
    res["chunks_present"] = res["chunks_total"] - len(missing)
    res["chunks_checked"] = checked
    for kind in ("corrupt", "unreadable"):
        res[f"{kind}_count"] = len(bad[kind])
        res[kind] = bad[kind]  # capped by the caller, after grouping
    return res


def _chunk_key(meta: Dict[str, Any], coords: Sequence[int]) -> str:
    """The store key of chunk (for a sharded array: shard) ``coords`` under the array, from
    the node metadata's chunk key encoding (v3 ``default``, or ``v2``)."""
    enc = meta.get("chunk_key_encoding")
    enc = enc if isinstance(enc, dict) else {}
    cfg = enc.get("configuration") if isinstance(enc.get("configuration"), dict) else {}
    if enc.get("name") == "v2":
        return str(cfg.get("separator", ".")).join(str(int(c)) for c in coords) or "0"
    return str(cfg.get("separator", "/")).join(["c", *(str(int(c)) for c in coords)])


def _key_exists(arr: Array, key: str) -> Optional[bool]:
    """Whether the object ``key`` below the array is stored (None: cannot tell)."""
    if _storage.is_remote(arr.path):
        try:
            arr._native()
            store = getattr(arr, "_store", None)
            return None if store is None else bool(store.exists(key))
        except Error:
            return None
    return os.path.exists(os.path.join(arr.path, *key.split("/")))


def _problem(kind_list: List[Dict[str, Any]], idx: Sequence[int], e: Exception) -> None:
    kind_list.append({"chunk": list(map(int, idx)), "error": f"{type(e).__name__}: {e}",
                      "file": getattr(e, "path", None)})


def _group_problems(kind: str, entries: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Problems of one kind grouped: chunks of one file failing with the same type of error
    (a shard with a bad index fails for every chunk), or with the same message. Each group:
    ``kind``, ``count``, ``first`` (chunk), ``lo``/``hi`` (bounding box of the chunks),
    ``error`` (the first), ``same_error`` (all messages equal), ``file``."""
    groups: Dict[Any, Dict[str, Any]] = {}
    for c in entries:
        key = (c["file"], c["error"].split(":", 1)[0]) if c.get("file") else (None, c["error"])
        g = groups.get(key)
        if g is None:
            groups[key] = {"kind": kind, "count": 1, "first": list(c["chunk"]), "lo": list(c["chunk"]),
                           "hi": list(c["chunk"]), "error": c["error"], "same_error": True, "file": c.get("file")}
            continue
        g["count"] += 1
        g["lo"] = [min(a, b) for a, b in zip(g["lo"], c["chunk"])]
        g["hi"] = [max(a, b) for a, b in zip(g["hi"], c["chunk"])]
        g["same_error"] = g["same_error"] and c["error"] == g["error"]
    return list(groups.values())


def _group_text(g: Dict[str, Any]) -> str:
    if g["count"] == 1:
        return f"  {g['kind']} chunk {tuple(g['first'])}: {g['error']}"
    box = "(" + ", ".join(str(a) if a == b else f"{a}..{b}" for a, b in zip(g["lo"], g["hi"])) + ")"
    where = f" in {g['file']!r}" if g["file"] else ""
    first = "" if g["same_error"] else f"; first of {g['count']:,} errors"
    return f"  {g['kind']} chunks {box}: {g['count']:,} chunks{where}{first}: {g['error']}"


def _verify_array(name: str, arr: Array, meta: Dict[str, Any], bar_: Any) -> Dict[str, Any]:
    res: Dict[str, Any] = {"name": name, "path": arr.path, "corrupt": [], "unreadable": [], "missing": []}
    res["checksums"], res["integrity"] = _checksums(meta)
    res["zarr_format"] = int(meta.get("zarr_format", 3))
    if isinstance(arr, StringArray):
        res = _verify_strings(arr, res, bar_)
        res["problems"] = _group_problems("corrupt", res["corrupt"]) + _group_problems("unreadable", res["unreadable"])
        res["corrupt"] = res["corrupt"][:_LIST_LIMIT]
        res["unreadable"] = res["unreadable"][:_LIST_LIMIT]
        return res
    nd = arr.ndim
    try:
        sizes: Optional[np.ndarray] = np.asarray(arr._native().stored_chunk_nbytes())
        grid = tuple(int(s) for s in sizes.shape)
    except (CorruptDataError, StorageError) as e:
        # An unreadable shard index: read shard by shard and let the reads name the chunks.
        # Shards that are not stored are told apart by their key (a read gives the fill value).
        sizes = None
        grid = tuple(-(-s // c) for s, c in zip(arr.shape, arr.chunks))
        res["survey_error"] = f"{type(e).__name__}: {e}"
    res["chunks_total"] = int(math.prod(grid)) if nd else 1
    if sizes is not None:
        missing = np.argwhere(sizes < 0)
        res["missing_count"] = int(len(missing))
        res["missing"] = [list(map(int, m)) for m in missing[:_LIST_LIMIT]]
        res["chunks_present"] = res["chunks_total"] - res["missing_count"]
    if nd == 0 or 0 in arr.shape:
        if nd == 0:
            try:
                arr.read(())
            except (CorruptDataError, StorageError) as e:
                _problem(res["corrupt" if isinstance(e, CorruptDataError) else "unreadable"], (), e)
        bar_.update(res["chunks_total"])
        res["chunks_checked"] = 1 if nd == 0 and not (res["corrupt"] or res["unreadable"]) else 0
        res["corrupt_count"] = len(res["corrupt"])
        res["unreadable_count"] = len(res["unreadable"])
        res["problems"] = _group_problems("corrupt", res["corrupt"]) + _group_problems("unreadable", res["unreadable"])
        return res
    per = _verify_block_size(arr, grid)
    by_shard = sizes is None and arr.shards is not None  # blocks are shards: look their keys up
    missing_chunks: List[List[int]] = []
    n_missing = 0
    buf = np.empty(tuple(min(p * c, s) for p, c, s in zip(per, arr.chunks, arr.shape)), dtype=arr.dtype)
    n_checked = 0
    for origin, count in _blocks(grid, per):
        n_block = math.prod(count)
        n_stored = n_block
        if sizes is not None:
            block = sizes[tuple(slice(o, o + n) for o, n in zip(origin, count))]
            n_stored = int((block >= 0).sum())
            if not n_stored:
                bar_.update(n_block)
                continue
        elif by_shard and _key_exists(arr, _chunk_key(meta, [o // p for o, p in zip(origin, per)])) is False:
            n_missing += n_block
            if len(missing_chunks) < _LIST_LIMIT:
                missing_chunks.extend(list(map(int, idx)) for idx in itertools.product(
                    *(range(o, o + n) for o, n in zip(origin, count))))
            bar_.update(n_block)
            continue
        key = _chunk_slices(arr, origin, count)
        sub = buf[tuple(slice(0, k.stop - k.start) for k in key)]
        try:
            arr.read(key, out=sub)
            n_checked += n_stored
        except (CorruptDataError, StorageError):
            # find the culprits chunk by chunk
            for idx in itertools.product(*(range(o, o + n) for o, n in zip(origin, count))):
                if sizes is not None and sizes[idx] < 0:
                    continue
                ck = _chunk_slices(arr, idx, (1,) * nd)
                try:
                    arr.read(ck, out=buf[tuple(slice(0, k.stop - k.start) for k in ck)])
                    n_checked += 1
                except CorruptDataError as e:
                    _problem(res["corrupt"], idx, e)
                except StorageError as e:
                    _problem(res["unreadable"], idx, e)
        bar_.update(n_block)
    if by_shard:
        # Whole shards only: chunks missing inside a readable shard read as the fill value
        # and count as read (their index is what could not be surveyed).
        res["missing_count"] = n_missing
        res["missing"] = missing_chunks[:_LIST_LIMIT]
        res["chunks_present"] = res["chunks_total"] - n_missing
        res["missing_by_shard"] = True
    res["chunks_checked"] = n_checked
    res["corrupt_count"] = len(res["corrupt"])
    res["unreadable_count"] = len(res["unreadable"])
    res["problems"] = _group_problems("corrupt", res["corrupt"]) + _group_problems("unreadable", res["unreadable"])
    res["corrupt"] = res["corrupt"][:_LIST_LIMIT]
    res["unreadable"] = res["unreadable"][:_LIST_LIMIT]
    return res


# How to write chunks verify can check, by Zarr format (zarr-python 3 spellings).
_CHECKSUM_ADVICE = {
    3: "v3: add the crc32c codec (compressors=[ZstdCodec(), Crc32cCodec()]) or use ZstdCodec(checksum=True)",
    2: "v2: compress with numcodecs.Zstd(checksum=True), numcodecs.Zlib or numcodecs.GZip",
}


def cmd_verify(args: argparse.Namespace) -> int:
    t = _open_targets(args.store, args.array, _opts(args))
    kind, arrays = t.kind, t.arrays
    from .progress import bar

    total = 0
    for _, a in arrays:
        total += math.prod(-(-s // c) for s, c in zip(a.shape, a.chunks)) if a.ndim else 1
    results = []
    with bar(total=total, desc="verify", enable=args.progress, unit="chunk") as b:
        for n, a in arrays:
            results.append(_verify_array(n, a, t.metas[n], b))
    bad = sum(r["corrupt_count"] + r["unreadable_count"] for r in results)
    missing = sum(r.get("missing_count", 0) for r in results)
    for r in results:  # the same rule as the summary's, per array
        r["ok"] = r["corrupt_count"] + r["unreadable_count"] == 0 and not (
            args.fail_on_missing and r.get("missing_count", 0))
    ok = all(r["ok"] for r in results)
    doc = {"store": args.store if _storage.is_remote(args.store) else _storage.local_path(args.store), "ok": ok,
           "corrupt_chunks": bad, "missing_chunks": missing,
           "all_checksummed": all(r["checksums"] for r in results), "arrays": results}
    if args.json:
        _emit_json(doc)
    else:
        for r in results:
            if r["corrupt_count"] + r["unreadable_count"]:
                status = "CORRUPT"
            elif not r["ok"]:
                status = "MISSING CHUNKS (--fail-on-missing)"
            else:
                status = "OK"
            extra = f", {r['missing_count']:,} missing (read as fill)" if "missing_count" in r else ""
            print(f"{r['name']}: {status}: {r['chunks_checked']:,} chunks read{extra}, {r['corrupt_count']} corrupt, {r['unreadable_count']} unreadable")
            if not r["checksums"]:
                print(f"  no checksums ({r['integrity']})")
            if "survey_error" in r:
                print(f"  shard index survey failed: {r['survey_error']}")
                if r.get("missing_by_shard"):
                    print("  missing chunks counted by whole shards: chunks missing inside a readable shard "
                          "read as the fill value and count as read")
            problems = r["problems"]
            for g in problems[:20]:
                print(_group_text(g))
            if len(problems) > 20:
                print(f"  ... {len(problems) - 20} more groups of corrupt or unreadable chunks (see --json)")
        unchecked = [r for r in results if not r["checksums"]]
        note = f"; {len(unchecked)} of {len(results)} arrays without checksums" if unchecked else ""
        print("OK" if ok else "FAILED", f"({bad} corrupt or unreadable, {missing} missing{note})")
        if unchecked:
            # Said once: only chunks that fail to decode can be found in those arrays.
            advice = "; ".join(_CHECKSUM_ADVICE[f] for f in sorted({r["zarr_format"] for r in unchecked}, reverse=True)
                               if f in _CHECKSUM_ADVICE)
            print(f"Without checksums only chunks that fail to decode can be found; flipped bits that still decode "
                  f"cannot. To write chunks verify can check: {advice}.")
    return EXIT_OK if ok else EXIT_CORRUPT


# -- entry point -------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="lsio", description="Inspect, benchmark and verify Zarr v3 stores with lsio.")
    p.add_argument("--version", action="version", version=f"lsio {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="{info,bench,verify}")

    def common(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("store", help="an array or group directory (the one holding zarr.json), or a URL: "
                        "s3://bucket/x.zarr, gs://bucket/x.zarr, https://host/x.zarr")
        sp.add_argument("array", nargs="?", default=None, help="array path inside a group STORE")
        sp.add_argument("--json", action="store_true", help="print one JSON document on stdout")
        sp.add_argument("--threads", type=int, default=None, help="engine threads (default: LSIO_THREADS or all CPUs)")
        sp.add_argument("--io", choices=("auto", "uring", "pread"), default=None, help="I/O backend (default: LSIO_IO or auto)")
        sp.add_argument("--storage-option", action="append", metavar="KEY=VALUE",
                        help="a storage option for URLs, e.g. endpoint_url=http://127.0.0.1:9000 (repeatable; "
                        "VALUE is JSON when it parses, except for options that take a string)")
        sp.add_argument("--anon", action="store_true", help="anonymous (unsigned) requests for URLs")
        sp.add_argument("--icechunk", metavar="REF", nargs="?", const="branch:main", default=None,
                        help="STORE is an Icechunk repository (found by itself when local): read REF, "
                             "branch:NAME (default branch:main), tag:NAME or snapshot:ID")
        g = sp.add_mutually_exclusive_group()
        g.add_argument("--progress", dest="progress", action="store_const", const=True, default=None, help="draw a progress bar (tqdm)")
        g.add_argument("--no-progress", dest="progress", action="store_const", const=False)

    sp = sub.add_parser("info", help="metadata, chunk/shard statistics, bytes on disk, compression ratio")
    common(sp)
    sp.set_defaults(func=cmd_info)

    sp = sub.add_parser("bench", help="random-crop read throughput")
    common(sp)
    sp.add_argument("--crop", type=_parse_shape, default=None, help="crop shape, e.g. 4,256,256 (default: one shard or chunk)")
    sp.add_argument("--batch", type=int, default=32, help="crops per read_crops call (default 32)")
    sp.add_argument("--rounds", type=int, default=20, help="batches to time (default 20)")
    sp.add_argument("--seconds", type=float, default=None, help="time for this long instead of --rounds")
    sp.add_argument("--seed", type=int, default=0)
    sp.add_argument("--max-gap", dest="max_gap", default=None, metavar="BYTES",
                    help="merge byte ranges at most this far apart into one read (e.g. 0, 64K, 1M; default: "
                    "measured by remote stores, LSIO_MERGE_GAP or the storage kind's)")
    sp.add_argument("--max-request", dest="max_request", default=None, metavar="BYTES",
                    help="largest merged read (default: as --max-gap)")
    sp.set_defaults(func=cmd_bench)

    sp = sub.add_parser("verify", help="read every chunk; report corrupt and missing chunks (exit 1 on corruption)")
    common(sp)
    sp.add_argument("--fail-on-missing", action="store_true", help="also exit 1 when chunks are missing")
    sp.set_defaults(func=cmd_verify)
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the CLI with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    if getattr(args, "batch", 1) < 1 or getattr(args, "rounds", 1) < 1:
        parser.error("--batch and --rounds must be >= 1")
    try:
        return int(args.func(args))
    except _Usage as e:
        print(f"lsio {args.command}: {e}", file=sys.stderr)
        return EXIT_USAGE
    except (Error, OSError, ValueError) as e:
        print(f"lsio {args.command}: {type(e).__name__}: {e}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as e:  # noqa: BLE001 - a bug: say so, with the traceback, not "usage"
        import traceback

        traceback.print_exc()
        print(f"lsio {args.command}: internal error (a bug in lsio {__version__}; please report it with the "
              f"traceback above): {type(e).__name__}: {e}", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

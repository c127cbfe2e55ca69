"""kerchunk references: arrays and groups whose chunks are byte ranges of other files.

``lsio.open("refs.json", "t2m")``, ``lsio.open_group("refs.json")`` and the xarray backend
read kerchunk's JSON references (versions 0 and 1: what ``kerchunk.hdf.SingleHdf5ToZarr``,
``MultiZarrToZarr`` and VirtualiZarr's kerchunk writer produce) through the engine: the
references become a manifest (cpp/src/store/manifest.h; parsed in C++, a few tens of bytes per
chunk), served as a store over the *target* that holds the referenced files, so every chunk
read is the engine's (coalesced local reads or concurrent range requests, decoded in place).

Targets: every URL of the references must live in one place, a local directory tree or one
remote bucket / host:
- absolute paths and ``file://`` URLs; relative paths, resolved against the reference file's
  directory (fsspec resolves them against the working directory: lsio takes the file's
  directory, where kerchunk users keep them, and says which file is missing otherwise);
- ``s3://``, ``gs://``, ``http(s)://`` URLs of one bucket or host, read with
  ``remote_options`` (fsspec's name: lsio's ``storage_options`` for the referenced objects);
  paths without a scheme with ``remote_protocol`` set are URLs of that protocol.
``storage_options`` apply to the reference file itself when it is a URL.

What is read where: this module resolves the reference file and its targets and caches the
parsed references per process (keyed by the file and, for local files, its size and mtime);
lsio.array.Array opens a view of them (``_core.References.local_view`` / ``remote_view``) in
each process, so arrays pickle as their reference file, name and options.
"""

from __future__ import annotations

import collections
import json
import os
import posixpath
import threading
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from . import _core, _storage
from ._nodes import UrlPaths, missing
from ._remote import Handle as _Handle
from .errors import FormatError, StorageError, UnsupportedError

__all__ = ["is_references", "spec_for", "describe", "prefix_of", "ReferenceNodes"]

_MAX_REFS_BYTES = 1 << 30  # a reference file larger than this is refused before it is read

_lock = threading.Lock()
# path -> (pid, version, parsed), least recently used first; at most _CACHED entries, so
# open_mfdataset over thousands of reference files does not keep every one's translation.
_cache: "collections.OrderedDict[str, Tuple[int, Tuple[Any, ...], Any]]" = collections.OrderedDict()
_CACHED = 256


def is_references(path: Any) -> bool:
    """True for kerchunk references: a JSON reference file (a local file whose name ends in
    ``.json`` or whose first byte is ``{``, or a URL ending in ``.json``) or a parquet
    reference directory (fsspec's layout: ``.zmetadata`` with ``record_size``; a URL ending in
    ``.parq`` or ``.parquet``)."""
    return _format(path) is not None


# Remote files taken for NetCDF4/HDF5 by their names (a local file by its signature).
_HDF5_SUFFIXES = (".nc", ".nc4", ".h5", ".hdf5", ".he5", ".hdf", ".h5nc", ".cdf")


def _format(path: Any) -> Optional[str]:
    if isinstance(path, str) and _storage.is_remote(path):
        p = path.rstrip("/").lower()
        if p.endswith(_HDF5_SUFFIXES):
            return "hdf5"
        return "json" if p.endswith(".json") else "parquet" if p.endswith((".parq", ".parquet")) else None
    try:
        p = _storage.local_path(path)
    except (TypeError, ValueError):
        return None
    if os.path.isfile(p):
        from . import _hdf5  # noqa: PLC0415 - the HDF5 route is loaded when used

        if _hdf5.is_hdf5(p):
            return "hdf5"
        if _hdf5.is_netcdf3(p):
            return "netcdf3"
    if os.path.isdir(p):
        z = os.path.join(p, ".zmetadata")
        if not os.path.isfile(z):
            return None
        # fsspec writes {"metadata": {...}, "record_size": n}: the key is in the last bytes, so
        # zarr's own consolidated .zmetadata (a large file, maybe) is not parsed here.
        try:
            with open(z, "rb") as f:
                f.seek(max(0, os.fstat(f.fileno()).st_size - 256))
                tail = f.read()
        except OSError:
            return None
        return "parquet" if b'"record_size"' in tail else None
    return "json" if _is_json_file(p) else None


def _is_json_file(p: str) -> bool:
    if not os.path.isfile(p):
        return False
    if p.lower().endswith(".json"):
        return True
    try:
        with open(p, "rb") as f:
            return f.read(64).lstrip()[:1] == b"{"
    except OSError:
        return False


def describe(spec: Dict[str, Any]) -> str:
    """How messages name what ``spec`` describes."""
    if spec.get("format") == "icechunk":
        return _icechunk().describe(spec)
    if spec.get("format") in ("hdf5", "netcdf3"):
        return f"the NetCDF/HDF5 file {spec['refs']!r}"
    return f"the kerchunk references {spec['refs']!r}"


def spec_for(path: Any, storage_options: Optional[dict], remote_options: Optional[dict],
             remote_protocol: Optional[str]) -> Dict[str, Any]:
    """The picklable description of a reference file and its targets."""
    remote = isinstance(path, str) and _storage.is_remote(path)
    fmt = _format(path) or "json"
    if fmt in ("hdf5", "netcdf3"):
        # A NetCDF/HDF5 file references itself: its storage_options are those of its chunks.
        if remote_options is not None or remote_protocol is not None:
            raise ValueError("remote_options and remote_protocol apply to kerchunk reference files, not to "
                             "NetCDF/HDF5 files (use storage_options)")
        if storage_options is not None and not remote:
            raise ValueError("storage_options apply to URLs (s3://, gs://, http(s)://), not to local paths")
        remote_options = dict(storage_options or {}) if remote else None
    if storage_options is not None and not remote:
        raise ValueError("storage_options apply to a reference file at a URL; for the referenced files use "
                         "remote_options")
    return {"refs": path.rstrip("/") if remote else _storage.local_path(path).rstrip(os.sep),
            "format": fmt,
            "storage_options": dict(storage_options or {}) if remote else None,
            "remote_options": None if remote_options is None else dict(remote_options),
            "remote_protocol": remote_protocol}


def _read_text(spec: Dict[str, Any]) -> bytes:
    refs = spec["refs"]
    if _storage.is_remote(refs):
        base, _, name = refs.rpartition("/")
        store = _Handle(base, spec["storage_options"] or {}).get().new_store()
        text = store.get(name, _MAX_REFS_BYTES)
        if text is None:
            raise missing(refs, refs)
        return text
    with open(refs, "rb") as f:
        return f.read(_MAX_REFS_BYTES + 1)


def references(spec: Dict[str, Any]) -> Any:
    """This process's parsed references of ``spec`` (_core.References). A local file is
    parsed once per process and version (size, mtime, inode); a remote one at every call
    (arrays and groups keep what they parsed)."""
    refs = spec["refs"]
    if spec.get("format") == "icechunk":
        return _icechunk().metadata_references(spec)
    if spec.get("format") == "hdf5":
        from . import _hdf5  # noqa: PLC0415 - the HDF5 route is loaded when used

        return _hdf5.references(spec, lambda url: _open_object(url, spec.get("remote_options") or {}))
    if spec.get("format") == "netcdf3":
        from . import _hdf5  # noqa: PLC0415

        raise _hdf5.netcdf3_error(refs)
    version: Optional[Tuple[Any, ...]] = None
    if not _storage.is_remote(refs):
        version = _local_version(refs, spec.get("format") == "parquet")
        with _lock:
            hit = _cache.get(refs)
            if hit is not None:
                _cache.move_to_end(refs)
        if hit is not None and hit[0] == os.getpid() and hit[1] == version:
            return hit[2]
    if spec.get("format") == "parquet":
        parsed = _parquet_references(spec)
    else:
        text = _read_text(spec)
        if len(text) > _MAX_REFS_BYTES:
            raise FormatError(f"kerchunk references {refs!r} are larger than lsio reads ({_MAX_REFS_BYTES} bytes)")
        if b'"gen"' in text:
            text = _expand_gen(text, refs)
        parsed = _core.References.from_kerchunk(text, refs)
    if version is not None:
        with _lock:
            _cache[refs] = (os.getpid(), version, parsed)  # one entry per file: older versions go
            _cache.move_to_end(refs)
            while len(_cache) > _CACHED:
                _cache.popitem(last=False)
    return parsed


_MAX_GENERATED = 50_000_000  # references a "gen" section may make


def _expand_gen(text: bytes, where: str) -> bytes:
    """Version 1's generated references (``"gen"``) made into plain ones, as fsspec's
    ReferenceFileSystem makes them (with ``simple_templates=False``): for every combination of
    the dimensions' values, jinja2's sandbox renders the key, URL, offset and length with the
    templates and those values; a generated key replaces an explicit one. Without a non-empty
    "gen", ``text`` is returned as is."""
    try:
        doc = json.loads(text)
    except ValueError:
        return text  # the C++ parser says what is wrong, naming the file
    gens = doc.get("gen") if isinstance(doc, dict) and doc.get("version") == 1 else None
    if not gens:
        return text
    try:
        import jinja2
        import jinja2.sandbox
    except ImportError as e:
        raise UnsupportedError(f"kerchunk references {where!r} have generated references (\"gen\"), which need jinja2 "
                               f"to render: pip install 'lsio[references]' or jinja2 ({e})") from None
    import itertools

    templates = doc.get("templates") or {}
    # The sandbox, as fsspec's: a reference file from elsewhere must not run code here.
    env = jinja2.sandbox.SandboxedEnvironment(undefined=jinja2.StrictUndefined)
    out: Dict[str, Any] = {}
    try:
        for gen in gens:
            dims = {}
            for k, v in gen["dimensions"].items():
                dims[k] = v if isinstance(v, list) else range(int(v.get("start", 0)), int(v["stop"]),
                                                                   int(v.get("step", 1)))
            total = 1
            for v in dims.values():
                total *= len(v)
            if len(out) + total > _MAX_GENERATED:
                raise FormatError(f"kerchunk references {where!r}: \"gen\" makes more than {_MAX_GENERATED} references")
            key_t, url_t = env.from_string(gen["key"]), env.from_string(gen["url"])
            has_off, has_len = "offset" in gen, "length" in gen
            if has_off != has_len:
                raise ValueError("a generated byte range needs both offset and length")
            off_t = env.from_string(str(gen["offset"])) if has_off else None
            len_t = env.from_string(str(gen["length"])) if has_len else None
            for values in itertools.product(*dims.values()):
                ctx = {**templates, **dict(zip(dims, values))}
                url = url_t.render(**ctx)
                out[key_t.render(**ctx)] = ([url, int(off_t.render(**ctx)), int(len_t.render(**ctx))] if off_t is not None
                                            else [url])
    except FormatError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, jinja2.TemplateError,
            jinja2.sandbox.SecurityError) as e:
        raise FormatError(f"kerchunk references {where!r}: malformed \"gen\" entry ({type(e).__name__}: {e})") from None
    refs = dict(doc.get("refs") or {})
    refs.update(out)  # generated keys win, as in fsspec
    # Generated URLs are rendered already; templates stay for the explicit references.
    return json.dumps({"version": 1, "templates": templates, "refs": refs}).encode()


def _icechunk() -> Any:
    from . import _icechunk as m  # noqa: PLC0415 - Icechunk support is loaded when used

    return m


def _open_object(url: str, options: Dict[str, Any]) -> Tuple[Any, str, int, str]:
    """(store, key, size, version) of the remote object at ``url`` (a NetCDF/HDF5 file h5py
    reads through range requests), in the process context of its parent."""
    base, _, name = url.rpartition("/")
    store = _Handle(base, options).get().new_store()
    st = store.stat(name)
    if st is None:
        raise missing(url, url)
    return store, name, int(st["size"]), str(st["version"])


def _local_version(refs: str, parquet: bool) -> Tuple[Any, ...]:
    """What changes when a local reference file (or any file of a parquet directory) does."""
    def one(p: str) -> Tuple[Any, ...]:
        st = os.stat(p)
        return (p, st.st_size, st.st_mtime_ns, st.st_ino)

    try:
        if not parquet:
            return one(refs)
        parts = [one(os.path.join(refs, ".zmetadata"))]
        for d, _, files in os.walk(refs):
            parts += [one(os.path.join(d, f)) for f in sorted(files) if f.endswith(".parq")]
        return tuple(parts)
    except OSError as e:
        raise StorageError(e.errno, f"cannot read kerchunk references {refs!r}: {e.strerror}", refs) from None


def _read_member(spec: Dict[str, Any], rel: str) -> Optional[bytes]:
    """A file inside a parquet reference directory, None when it is not there."""
    refs = spec["refs"]
    if _storage.is_remote(refs):
        return _Handle(refs, spec["storage_options"] or {}).get().new_store().get(rel, _MAX_REFS_BYTES)
    p = os.path.join(refs, *rel.split("/"))
    try:
        with open(p, "rb") as f:
            return f.read(_MAX_REFS_BYTES + 1)
    except FileNotFoundError:
        return None


def _parquet_references(spec: Dict[str, Any]) -> Any:
    """fsspec's parquet reference layout (fsspec/implementations/reference.py, what
    kerchunk.df.refs_to_dataframe writes): ``.zmetadata`` holds ``{"metadata": {key: document},
    "record_size": n}``; the references of array ``v`` are in ``v/refs.<i>.parq``, row j of
    file i being the chunk whose C-order number is i * n + j, with columns ``path``,
    ``offset``, ``size`` and ``raw`` (inline bytes; path null: missing; offset = size = 0: the
    whole file)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as e:
        raise UnsupportedError(f"parquet kerchunk references need pyarrow: pip install 'lsio[parquet]' ({e})") from None
    refs = spec["refs"]
    head = _read_member(spec, ".zmetadata")
    if head is None:
        raise StorageError(2, f"parquet kerchunk references {refs!r} have no .zmetadata", refs)
    try:
        zmeta = json.loads(head)
        record_size = int(zmeta["record_size"])
        meta = zmeta["metadata"]
        if record_size < 1 or not isinstance(meta, dict):
            raise ValueError("record_size must be >= 1 and metadata an object")
    except (ValueError, KeyError, TypeError) as e:
        raise FormatError(f"parquet kerchunk references {refs!r}: malformed .zmetadata ({e})") from None
    inline: Dict[str, bytes] = {}
    for k, v in meta.items():
        inline[k] = (v if isinstance(v, str) else json.dumps(v)).encode()
    keys: List[str] = []
    url_ids: List[int] = []
    offsets: List[int] = []
    lengths: List[int] = []
    urls: List[str] = []
    url_index: Dict[str, int] = {}
    for k, v in meta.items():
        if not (k == ".zarray" or k.endswith("/.zarray")):
            continue
        var = k[: -len(".zarray")].rstrip("/")
        try:
            za = json.loads(v) if isinstance(v, str) else v
            shape, chunks = [int(x) for x in za["shape"]], [int(x) for x in za["chunks"]]
            sep = za.get("dimension_separator") or "."
            if len(shape) != len(chunks) or any(x < 0 for x in shape) or any(c < 1 for c in chunks):
                raise ValueError("shape and chunks must be non-negative / positive and of one length")
        except (ValueError, KeyError, TypeError) as e:
            raise FormatError(f"parquet kerchunk references {refs!r}: malformed {k} ({e})") from None
        grid = [-(-s // c) for s, c in zip(shape, chunks)]
        n = int(np.prod(grid, dtype=object)) if grid else 1
        files = -(-n // record_size)
        if files > 1 << 24:
            raise FormatError(f"parquet kerchunk references {refs!r}: {k} describes {n} chunks in {files} record "
                              "files, more than lsio reads")
        for i in range(files):
            rel = f"{var}/refs.{i}.parq" if var else f"refs.{i}.parq"
            data = _read_member(spec, rel)
            if data is None:
                continue  # no references in this record: its chunks read as the fill value
            try:
                t = pq.read_table(pa.BufferReader(data), columns=["path", "offset", "size", "raw"])
            except Exception as e:  # noqa: BLE001 - pyarrow's errors: one typed error naming the file
                raise FormatError(f"parquet kerchunk references {refs!r}: cannot read {rel} ({e})") from None
            paths, offs, sizes, raws = (t.column(c).to_pylist() for c in ("path", "offset", "size", "raw"))
            if len(paths) > record_size:
                raise FormatError(f"parquet kerchunk references {refs!r}: {rel} holds {len(paths)} rows, more than "
                                  f"the record size {record_size}")
            first = i * record_size
            for j in range(min(len(paths), n - first)):
                coords = np.unravel_index(first + j, grid) if grid else ()
                key = sep.join(str(int(c)) for c in coords) if grid else "0"
                key = f"{var}/{key}" if var else key
                if raws[j] is not None:
                    inline[key] = raws[j]
                    continue
                path = paths[j]
                if path is None:
                    continue  # missing
                u = url_index.get(path)
                if u is None:
                    u = url_index[path] = len(urls)
                    urls.append(path)
                keys.append(key)
                url_ids.append(u)
                off, size = int(offs[j] or 0), int(sizes[j] or 0)
                if off < 0 or size < 0:
                    raise FormatError(f"parquet kerchunk references {refs!r}: {rel} row {j} ({key}) has offset {off} "
                                      f"and size {size}; neither may be negative")
                whole = off == 0 and size == 0
                offsets.append(off)
                lengths.append(-1 if whole else size)
    return _core.References.from_entries(inline, keys, urls, url_ids, offsets, lengths, refs)


def prefix_of(path: str, spec: Dict[str, Any]) -> str:
    """The key prefix of the node at ``path`` ("<refs>/a/b") inside the references."""
    p = str(path)
    refs = spec["refs"]
    if p.rstrip("/") == refs:
        return ""
    if not p.startswith(refs + "/"):
        raise ValueError(f"{p!r} is not inside kerchunk references {refs!r}")
    parts = [x for x in p[len(refs) + 1:].split("/") if x not in ("", ".")]
    if ".." in parts:
        raise ValueError(f"invalid node path {p!r}")
    return "/".join(parts)


def _scheme(url: str) -> Tuple[str, str]:
    scheme, sep, rest = url.partition("://")
    return (scheme.lower(), rest) if sep else ("", url)


def targets(spec: Dict[str, Any], refs: Any) -> Tuple[str, str, List[str]]:
    """("local", root directory, keys) or ("remote", root URL, keys): where every referenced
    URL lives, and each one's key below that root."""
    base = posixpath.dirname(spec["refs"]) if _storage.is_remote(spec["refs"]) else os.path.dirname(spec["refs"])
    protocol = (spec.get("remote_protocol") or "").lower() or None
    local: List[str] = []
    remote: List[Tuple[str, str]] = []
    for url in refs.urls():
        scheme, rest = _scheme(url)
        if not scheme and protocol and protocol not in ("file", "local"):
            scheme, rest = protocol, url.lstrip("/") if protocol in ("s3", "gs", "gcs") else url
            url = f"{scheme}://{rest}"
        if scheme in ("", "file", "local"):
            if _storage.is_remote(spec["refs"]) and not os.path.isabs(rest) and scheme == "":
                # A relative path in a remote reference file: beside the file, remotely.
                remote.append(_split_remote(posixpath.join(base, rest)))
                continue
            if _storage.is_remote(spec["refs"]) and protocol not in ("file", "local"):
                # A reference file fetched from elsewhere must not make lsio read this
                # machine's files (credentials, keys) as array data.
                raise UnsupportedError(f"kerchunk references {spec['refs']!r} (a URL) name the local file "
                                       f"{url!r}; pass remote_protocol='file' to allow references to local files")
            p = _storage.local_path(url) if scheme == "file" else rest
            local.append(os.path.normpath(p if os.path.isabs(p) else os.path.join(base, p)))
        elif _storage.is_remote(url):
            remote.append(_split_remote(url))
        else:
            raise UnsupportedError(f"kerchunk references {spec['refs']!r} name {url!r}: lsio reads local files "
                                   "and s3://, gs://, http(s):// objects")
    if local and remote:
        raise UnsupportedError(f"kerchunk references {spec['refs']!r} name both local files and remote objects; "
                               "lsio reads references whose files live in one place")
    if remote:
        roots = sorted({r for r, _ in remote})
        if len(roots) > 1:
            raise UnsupportedError(f"kerchunk references {spec['refs']!r} name objects in {len(roots)} buckets or "
                                   f"hosts ({', '.join(roots[:3])}{', ...' if len(roots) > 3 else ''}); lsio reads "
                                   "references whose objects share one bucket or host")
        return "remote", roots[0], [k for _, k in remote]
    if not local:
        return "local", base or os.getcwd(), []
    root = os.path.commonpath([os.path.dirname(p) for p in local])
    return "local", root, [os.path.relpath(p, root) for p in local]


def _split_remote(url: str) -> Tuple[str, str]:
    """(root URL: scheme://bucket or scheme://host, key below it)."""
    scheme, rest = _scheme(url)
    host, _, key = rest.partition("/")
    return f"{scheme}://{host}", key


def view(spec: Dict[str, Any], prefix: str, config: Dict[str, Any]) -> Any:
    """A _core.ReferenceView of ``spec``'s references below ``prefix``, over their target."""
    return open_view(spec, prefix, config)[0]


def open_view(spec: Dict[str, Any], prefix: str, config: Dict[str, Any]) -> Tuple[Any, Any, Any]:
    """(view, handle, store): the view, and for a remote target the process context's handle
    and the RemoteStore the view reads through. Keep both while reading: the context refreshes
    expiring credentials only in stores that are alive (``handle.get().refresh_if_needed()``)."""
    if spec.get("format") == "icechunk":
        return _icechunk().open_view(spec, prefix, config)
    versions: List[str] = []
    if spec.get("format") == "hdf5" and _storage.is_remote(spec["refs"]):
        from . import _hdf5  # noqa: PLC0415

        # A remote NetCDF/HDF5 file: its chunks are read pinned to the version whose chunk
        # index was translated (If-Match), so a file rewritten since fails, never mixes.
        refs, etag = _hdf5.references_and_version(spec, lambda url: _open_object(url, spec.get("remote_options") or {}))
        versions = [etag] * len(refs.urls()) if etag else []
    else:
        refs = references(spec)
    kind, root, keys = targets(spec, refs)
    if kind == "local":
        if config.get("direct") is True:
            raise UnsupportedError("direct=True is not supported for kerchunk references yet")
        return (refs.local_view(prefix, root, keys, config.get("io", "auto"), int(config.get("queue_depth", 64)),
                                False), None, None)
    handle = _Handle(root, spec.get("remote_options") or {})
    store = handle.get().new_store()
    return refs.remote_view(prefix, store, keys, versions), handle, store


def target_location(spec: Dict[str, Any], prefix: str = "") -> Tuple[str, str]:
    """(kind, root) of the target of the node at ``prefix``: what the array's options are
    resolved for."""
    if spec.get("format") == "icechunk":
        return _icechunk().target_location(spec, prefix)
    kind, root, _ = targets(spec, references(spec))
    return kind, root


class ReferenceNodes(UrlPaths):
    """Node access (lsio._nodes) for a group inside kerchunk references."""

    remote = False
    listable = True

    def __init__(self, spec: Dict[str, Any]) -> None:
        self.spec = spec
        self.display = spec["refs"]
        self._view: Any = None
        self._pid = -1

    def __getstate__(self) -> dict:
        return {"spec": self.spec}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["spec"])  # type: ignore[misc]

    def _root(self) -> Any:
        if self._view is None or self._pid != os.getpid():
            self._view = view(self.spec, "", {})
            self._pid = os.getpid()
        return self._view

    def read(self, path: str, v2_consolidated: bool = True) -> dict:
        rel = self.rel(path)
        # Read through a view of the node itself: its files' keys are then the node's own
        # (".zarray"), as Array takes them.
        node = _core.read_node(self._root().sub(rel) if rel else self._root(), "", v2_consolidated)
        if node is None:
            raise missing(path, self._root().location(f"{rel}/.zgroup" if rel else ".zgroup"))
        return node

    def list_children(self, path: str) -> Dict[str, dict]:
        children: Dict[str, dict] = {}
        for name in references(self.spec).children(self.rel(path)):
            try:
                children[name] = self.read(self.join(path, name), False)["metadata"]
            except (FormatError, UnsupportedError, StorageError):
                continue  # not a node (no metadata, malformed): not a member
        return children

    def array_options(self) -> Dict[str, Any]:
        return {"_references": self.spec}

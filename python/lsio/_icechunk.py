"""Icechunk repositories (spec versions 1 and 2), read-only: ``lsio.open_icechunk``.

The read path is the spec's: the branch or tag names a snapshot (version 2: the repo info
file ``repo``; version 1: ``refs/branch.<name>/ref.json``, ``refs/tag.<name>/ref.json``); the
snapshot (``snapshots/<id>``) holds every node's ``zarr.json`` and, per array, the manifests
holding its chunk references with the chunk-index extents each covers; the manifests
(``manifests/<id>``) map chunk coordinates to inline bytes, a range of a chunk object of the
repository (``chunks/<id>``) or a range of another object (a *virtual* chunk). Parsing is C++
(cpp/src/store/icechunk.cc: header, zstd, FlatBuffers verified by flatc's generated code);
the references of one array become a manifest (``_core.References.from_icechunk``) served as a
store over the one place its chunks live, like kerchunk references (lsio/_kerchunk.py), so
every chunk read is the engine's.

The version is fixed at open: the snapshot id is resolved once (a branch's ``repo`` / ref file
is read fresh at every open) and carried in the spec that arrays pickle, so workers read the
same snapshot. Snapshots and manifests are immutable: they are cached per process by id without
revalidation (bounded: ``_SNAPSHOTS`` files, ``_MANIFEST_BYTES`` of manifests).

Virtual chunks are read only from containers the caller authorizes, as with icechunk: their
URL must fall under a prefix passed in ``virtual_chunk_containers`` (``{url_prefix:
storage_options}``: the credentials of that container), whose settings extend those of the
repository's own container for it (version 2: the repo info file's configuration; version 1:
``config.yaml``, read when PyYAML is installed): endpoint, region, anonymity. A reference's ETag is enforced on every read
(If-Match: another version of the object is a StorageError, never other bytes); a
last-modified time is checked when the array is opened (the object's modification time must
not be later).

An array's chunks may live in several places (native chunks in the repository and virtual ones
in local files and buckets): one target each (ManifestStore reads each target's share of a
call in turn). Not supported (UnsupportedError naming the array): virtual chunk containers on
Azure. Writing, transaction logs and the ops log are not read.
"""

from __future__ import annotations

import collections
import json
import os
import errno
import threading
import urllib.parse
from typing import Any, Dict, List, Optional, Tuple

from . import _core, _storage
from ._remote import Handle as _Handle
from .errors import FormatError, NotFoundError, StorageError, UnsupportedError

__all__ = ["is_icechunk", "spec_for", "metadata_references", "array_references", "placement", "open_view"]

MAGIC = b"ICE\xf0\x9f\xa7\x8aCHUNK"
_MAX_FILE = 1 << 30          # a metadata file larger than this is refused before it is read
_SNAPSHOTS = 16              # parsed snapshots kept per process
_MANIFEST_BYTES = 256 << 20  # manifest files kept per process (their bytes, as stored)
_ARRAY_REFS = 64             # arrays' references kept per process

_lock = threading.Lock()


def _after_fork_in_child() -> None:
    # A fork while another thread held the lock must not leave the child's caches locked.
    global _lock
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)
_snapshot_cache: "collections.OrderedDict[Tuple[str, str], dict]" = collections.OrderedDict()
_manifest_cache: "collections.OrderedDict[Tuple[str, str], bytes]" = collections.OrderedDict()
_manifest_cached_bytes = 0
_refs_cache: "collections.OrderedDict[Tuple[Any, ...], Any]" = collections.OrderedDict()


def is_icechunk(path: Any) -> bool:
    """True for a local directory holding an Icechunk repository (a ``repo`` file with
    Icechunk's header, or version 1's ``refs/`` and ``snapshots/``)."""
    if isinstance(path, str) and _storage.is_remote(path):
        return False
    try:
        p = _storage.local_path(path)
    except (TypeError, ValueError):
        return False
    if not os.path.isdir(p):
        return False
    repo = os.path.join(p, "repo")
    if os.path.isfile(repo):
        try:
            with open(repo, "rb") as f:
                return f.read(len(MAGIC)) == MAGIC
        except OSError:
            return False
    # Version 1: no repo file; a repository always has its main branch.
    return os.path.isfile(os.path.join(p, "refs", "branch.main", "ref.json")) and \
        os.path.isdir(os.path.join(p, "snapshots"))


def is_remote_icechunk(url: str, storage_options: Optional[dict]) -> bool:
    """Whether the URL holds an Icechunk repository (its `repo` file starts with Icechunk's
    header, or it has version 1's refs/branch.main): one or two requests."""
    repo = url.rstrip("/")
    try:
        head = _get(repo, storage_options, "repo")
        if head is not None:
            return head[:len(MAGIC)] == MAGIC
        return _get(repo, storage_options, "refs/branch.main/ref.json") is not None
    except (StorageError, FormatError):
        return False


def describe(spec: Dict[str, Any]) -> str:
    return f"the Icechunk repository {spec['refs']!r} (snapshot {spec['snapshot']})"


# ---- reading the repository's files -----------------------------------------------------

def _get(repo: str, storage_options: Optional[dict], key: str) -> Optional[bytes]:
    """The object ``key`` of the repository, None when it does not exist."""
    if _storage.is_remote(repo):
        return _Handle(repo, storage_options or {}).get().new_store().get(key, _MAX_FILE)
    p = os.path.join(repo, *key.split("/"))
    try:
        with open(p, "rb") as f:
            data = f.read(_MAX_FILE + 1)
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        return None
    except OSError as e:
        raise StorageError(e.errno, f"cannot read {p!r}: {e.strerror}", p) from None
    if len(data) > _MAX_FILE:
        raise FormatError(f"{p!r} is larger than lsio reads as an Icechunk metadata file ({_MAX_FILE} bytes)")
    return data


def _location(repo: str, key: str) -> str:
    return f"{repo}/{key}" if _storage.is_remote(repo) else os.path.join(repo, *key.split("/"))


def _need(repo: str, storage_options: Optional[dict], key: str, what: str) -> bytes:
    data = _get(repo, storage_options, key)
    if data is None:
        loc = _location(repo, key)
        raise NotFoundError(2, f"Icechunk repository {repo!r}: {what} {key!r} does not exist", loc)
    return data


def _ref_json(repo: str, storage_options: Optional[dict], key: str) -> Optional[str]:
    data = _get(repo, storage_options, key)
    if data is None:
        return None
    try:
        sid = json.loads(data)["snapshot"]
        if not isinstance(sid, str) or len(sid) != 20:
            raise ValueError("not a snapshot id")
        return sid
    except (ValueError, KeyError, TypeError) as e:
        raise FormatError(f"Icechunk repository {repo!r}: malformed reference file {key!r} ({e})") from None


def spec_for(path: Any, *, branch: Optional[str] = None, tag: Optional[str] = None, snapshot: Optional[str] = None,
             storage_options: Optional[dict] = None,
             virtual_chunk_containers: Optional[Dict[str, dict]] = None) -> Dict[str, Any]:
    """The picklable description of one snapshot of a repository: the branch or tag is read
    now (fresh), so everything opened from the spec reads that snapshot."""
    if sum(x is not None for x in (branch, tag, snapshot)) > 1:
        raise ValueError("pass at most one of branch, tag and snapshot")
    for what, name in (("branch", branch), ("tag", tag)):
        if name is not None and (not isinstance(name, str) or not name or "/" in name or name in (".", "..")):
            raise ValueError(f"{what} {name!r} is not an Icechunk {what} name (no '/', not empty)")
    if snapshot is not None:
        snapshot = _check_snapshot_id(snapshot)
    remote = isinstance(path, str) and _storage.is_remote(path)
    if storage_options is not None and not remote:
        raise ValueError("storage_options apply to URLs (s3://, gs://, http(s)://), not to local paths")
    repo = path.rstrip("/") if remote else _storage.local_path(path).rstrip(os.sep)
    so = dict(storage_options or {}) if remote else None
    info_file = _get(repo, so, "repo")
    config: Optional[str] = None
    if info_file is not None:
        info = _core.icechunk_repo(info_file, _location(repo, "repo"))
        config = info["config"] or None
        if snapshot is not None:
            if snapshot not in info["snapshots"]:
                raise NotFoundError(2, f"Icechunk repository {repo!r} has no snapshot {snapshot} (expired, or never "
                                    "in this repository)", repo)
            sid, ref = snapshot, f"snapshot {snapshot}"
        elif tag is not None:
            tags = dict(info["tags"])
            if tag not in tags:
                deleted = " (it was deleted)" if tag in info["deleted_tags"] else ""
                raise NotFoundError(2, f"Icechunk repository {repo!r} has no tag {tag!r}{deleted}", repo)
            sid, ref = tags[tag], f"tag {tag}"
        else:
            name = branch or "main"
            branches = dict(info["branches"])
            if name not in branches:
                raise NotFoundError(2, f"Icechunk repository {repo!r} has no branch {name!r}", repo)
            sid, ref = branches[name], f"branch {name}"
    else:  # spec version 1: one JSON file per branch and tag
        if snapshot is not None:
            sid, ref = snapshot, f"snapshot {snapshot}"
        elif tag is not None:
            if _get(repo, so, f"refs/tag.{tag}/ref.json.deleted") is not None:
                raise NotFoundError(2, f"Icechunk repository {repo!r} has no tag {tag!r} (it was deleted)", repo)
            found = _ref_json(repo, so, f"refs/tag.{tag}/ref.json")
            if found is None:
                _require_repository(repo, so)
                raise NotFoundError(2, f"Icechunk repository {repo!r} has no tag {tag!r}", repo)
            sid, ref = found, f"tag {tag}"
        else:
            name = branch or "main"
            found = _ref_json(repo, so, f"refs/branch.{name}/ref.json")
            if found is None:
                _require_repository(repo, so)
                raise NotFoundError(2, f"Icechunk repository {repo!r} has no branch {name!r}", repo)
            sid, ref = found, f"branch {name}"
        raw = _get(repo, so, "config.yaml")
        config = _yaml_config(repo, raw) if raw is not None else None
    containers = _containers(repo, config)
    authorized: Dict[str, dict] = {}
    for prefix, opts in (virtual_chunk_containers or {}).items():
        if not isinstance(prefix, str) or "://" not in prefix or not (opts is None or isinstance(opts, dict)):
            raise ValueError("virtual_chunk_containers maps URL prefixes (\"s3://bucket/path/\") to storage_options "
                             "dicts")
        authorized[_prefix(prefix)] = dict(opts or {})
    spec = {"refs": repo, "format": "icechunk", "snapshot": sid, "ref": ref, "storage_options": so,
            "containers": containers, "authorized": authorized, "remote_options": None, "remote_protocol": None}
    _snapshot(spec)  # read now: a missing or malformed snapshot fails the open
    return spec


def _require_repository(repo: str, so: Optional[dict]) -> None:
    if _get(repo, so, "refs/branch.main/ref.json") is None:
        raise NotFoundError(2, f"{repo!r} is not an Icechunk repository (no repo file and no refs/branch.main)",
                            repo)


_CROCKFORD = set("0123456789ABCDEFGHJKMNPQRSTVWXYZ")


def _check_snapshot_id(sid: str) -> str:
    """The id as file names spell it: Crockford base 32 is read case-insensitively, with I
    and L for 1 and O for 0."""
    if isinstance(sid, str):
        norm = sid.upper().replace("I", "1").replace("L", "1").replace("O", "0")
        if len(norm) == 20 and set(norm) <= _CROCKFORD:
            return norm
    raise ValueError(f"snapshot {sid!r} is not an Icechunk snapshot id (20 characters of Crockford base 32)")


def _yaml_config(repo: str, raw: bytes) -> Optional[str]:
    """Version 1's config.yaml as JSON text, or None when PyYAML is not installed (virtual
    chunk containers must then be passed by the caller)."""
    try:
        import yaml  # noqa: PLC0415 - optional: only version 1 repositories need it
    except ImportError:
        return None

    class _Loader(yaml.SafeLoader):
        pass

    def tagged(loader: Any, suffix: str, node: Any) -> Any:  # "!s3_compatible {...}" -> {"s3_compatible": {...}}
        if isinstance(node, yaml.MappingNode):
            value: Any = loader.construct_mapping(node, deep=True)
        elif isinstance(node, yaml.SequenceNode):
            value = loader.construct_sequence(node, deep=True)
        else:
            value = loader.construct_scalar(node)
        return {suffix: value}

    _Loader.add_multi_constructor("!", tagged)
    try:
        doc = yaml.load(raw, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except (yaml.YAMLError, TypeError, ValueError) as e:
        raise FormatError(f"Icechunk repository {repo!r}: malformed config.yaml ({e})") from None
    # Aliases share nodes, which JSON would copy out: bound what the copy may hold (a
    # configuration is a few hundred values), so a small file cannot expand without bound.
    budget = [4 * len(raw) + 1024]

    def count(x: Any) -> None:
        budget[0] -= 1
        if budget[0] < 0:
            raise FormatError(f"Icechunk repository {repo!r}: config.yaml expands to more values than its size allows")
        if isinstance(x, dict):
            for v in x.values():
                count(v)
        elif isinstance(x, list):
            for v in x:
                count(v)

    count(doc)
    return json.dumps(doc, default=str)


def _normal_url(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    scheme = scheme.lower()
    return ("gs" if scheme == "gcs" else scheme) + "://" + rest


def _prefix(url_prefix: str) -> str:
    """A container's URL prefix as Icechunk matches it: ending in "/" (a prefix "s3://bucket"
    must not take "s3://bucket2/...")."""
    p = _normal_url(url_prefix)
    return p if p.endswith("/") else p + "/"


def _containers(repo: str, config: Optional[str]) -> Dict[str, dict]:
    """url_prefix -> storage_options from the repository's virtual chunk containers (and,
    under "_name", the container's name: version 2's "vcc://<name>/path" locations use it)."""
    if not config:
        return {}
    try:
        cfg = json.loads(config)
    except ValueError as e:
        raise FormatError(f"Icechunk repository {repo!r}: malformed configuration ({e})") from None
    raw = cfg.get("virtual_chunk_containers") if isinstance(cfg, dict) else None
    out: Dict[str, dict] = {}
    if not isinstance(raw, dict):
        return out
    for value in raw.values():
        if not isinstance(value, dict) or not isinstance(value.get("url_prefix"), str):
            continue
        prefix = value["url_prefix"]
        if "://" not in prefix:
            continue  # version 1's defaults ("s3", "gcs", "file"...) name schemes, not containers
        opts = _store_options(value.get("store"))
        if isinstance(value.get("name"), str):
            opts["_name"] = value["name"]
        out[_prefix(prefix)] = opts
    return out


def _store_options(store: Any) -> dict:
    """lsio storage_options for an Icechunk ObjectStoreConfig ({"s3_compatible": {...}}, ...)."""
    if not isinstance(store, dict) or len(store) != 1:
        return {}
    (kind, conf), = store.items()
    if kind == "azure":
        return {"_unsupported": "Azure"}
    if not isinstance(conf, dict):
        return {}
    opts: dict = {}
    if kind in ("s3", "s3_compatible", "tigris"):
        if conf.get("endpoint_url"):
            opts["endpoint_url"] = conf["endpoint_url"]
        if conf.get("region"):
            opts["region"] = conf["region"]
        if conf.get("anonymous"):
            opts["anonymous"] = True
        if conf.get("force_path_style"):
            opts["addressing_style"] = "path"
    return opts


# ---- snapshots, manifests and references --------------------------------------------------

def _snapshot(spec: Dict[str, Any]) -> dict:
    key = (spec["refs"], spec["snapshot"])
    with _lock:
        hit = _snapshot_cache.get(key)
        if hit is not None:
            _snapshot_cache.move_to_end(key)
            return hit
    name = f"snapshots/{spec['snapshot']}"
    data = _need(spec["refs"], spec["storage_options"], name, "snapshot")
    snap = _core.icechunk_snapshot(data, _location(spec["refs"], name))
    if snap["id"] != spec["snapshot"]:
        raise FormatError(f"{_location(spec['refs'], name)!r} holds snapshot {snap['id']}, not {spec['snapshot']}")
    snap["by_path"] = {n["path"]: n for n in snap["nodes"]}
    with _lock:
        _snapshot_cache[key] = snap
        while len(_snapshot_cache) > _SNAPSHOTS:
            _snapshot_cache.popitem(last=False)
    return snap


def snapshot_info(spec: Dict[str, Any]) -> dict:
    """id, parent_id (version 1), message, flushed_at_us, spec_version of the spec's snapshot."""
    s = _snapshot(spec)
    return {k: s[k] for k in ("id", "parent_id", "message", "flushed_at_us", "spec_version")}


def _manifest(spec: Dict[str, Any], mid: str) -> bytes:
    global _manifest_cached_bytes
    key = (spec["refs"], mid)
    with _lock:
        hit = _manifest_cache.get(key)
        if hit is not None:
            _manifest_cache.move_to_end(key)
            return hit
    data = _need(spec["refs"], spec["storage_options"], f"manifests/{mid}", "manifest")
    with _lock:
        if key not in _manifest_cache and len(data) <= _MANIFEST_BYTES:
            _manifest_cache[key] = data
            _manifest_cached_bytes += len(data)
            while _manifest_cached_bytes > _MANIFEST_BYTES:
                _, old = _manifest_cache.popitem(last=False)
                _manifest_cached_bytes -= len(old)
    return data


def _rel(path: str) -> str:
    return path.strip("/")


def metadata_references(spec: Dict[str, Any]) -> Any:
    """References holding every node's zarr.json (no chunks): groups and listings."""
    key = (spec["refs"], spec["snapshot"], None)
    with _lock:
        hit = _refs_cache.get(key)
        if hit is not None:
            return hit
    snap = _snapshot(spec)
    inline = {(f"{_rel(n['path'])}/zarr.json" if _rel(n["path"]) else "zarr.json"): n["zarr_json"]
              for n in snap["nodes"]}
    refs = _core.References.from_icechunk(inline, [], [], [], describe(spec))
    with _lock:
        _refs_cache[key] = refs
    return refs


def array_references(spec: Dict[str, Any], prefix: str) -> Any:
    """References of the node at ``prefix`` ("a/t2m"): its zarr.json and, for an array, its
    chunks from every manifest the snapshot takes them from (inside the extents it takes)."""
    key = (spec["refs"], spec["snapshot"], prefix)
    with _lock:
        hit = _refs_cache.get(key)
        if hit is not None:
            _refs_cache.move_to_end(key)
            return hit
    snap = _snapshot(spec)
    node = snap["by_path"].get("/" + prefix if prefix else "/")
    if node is None or not node["is_array"]:
        return metadata_references(spec)
    meta_key = f"{prefix}/zarr.json" if prefix else "zarr.json"
    try:
        meta = json.loads(node["zarr_json"])
        ndim = len(meta["shape"])
        enc = meta.get("chunk_key_encoding") or {"name": "default"}
        name = enc["name"] if isinstance(enc, dict) else enc
        conf = (enc.get("configuration") or {}) if isinstance(enc, dict) else {}
        if name not in ("default", "v2"):
            raise ValueError(f"chunk_key_encoding {name!r}")
        sep = conf.get("separator", "/" if name == "default" else ".")
    except (ValueError, KeyError, TypeError) as e:
        raise FormatError(f"{describe(spec)}: malformed zarr.json of {node['path']!r} ({e})") from None
    files: List[bytes] = []
    locations: List[str] = []
    manifests: List[Tuple[int, list]] = []
    for mid, extents in node["manifests"]:
        files.append(_manifest(spec, mid))
        locations.append(_location(spec["refs"], f"manifests/{mid}"))
        manifests.append((len(files) - 1, extents))
    refs = _core.References.from_icechunk({meta_key: node["zarr_json"]},
                                          [(node["node_id"], prefix, sep, name == "v2", ndim, manifests)],
                                          files, locations, describe(spec))
    with _lock:
        _refs_cache[key] = refs
        while len(_refs_cache) > _ARRAY_REFS:
            _refs_cache.popitem(last=False)
    return refs


# ---- where an array's chunks live ---------------------------------------------------------

def _absolute(spec: Dict[str, Any], url: str) -> str:
    """Version 2's container-relative locations ("vcc://<container name>/<path>") as URLs."""
    if not url.startswith("vcc://"):
        return url
    name, _, rel = url[len("vcc://"):].partition("/")
    for prefix, opts in spec["containers"].items():
        if opts.get("_name") == name:
            return prefix + rel
    raise UnsupportedError(f"{describe(spec)}: virtual chunk location {url!r} names the container {name!r}, which the "
                           "repository's configuration does not have")


def _longest(prefixes: Any, url: str) -> str:
    best = ""
    for prefix in prefixes:
        if url.startswith(prefix) and len(prefix) > len(best):
            best = prefix
    return best


def _container_for(spec: Dict[str, Any], url: str) -> Tuple[str, dict]:
    """The authorized container holding ``url`` and its storage options: the repository's
    container's settings (endpoint, region, anonymous) under the caller's. As with icechunk,
    a repository's containers are read only when the caller authorizes them: a repository
    from elsewhere must not make lsio read other buckets or this machine's files with the
    caller's credentials."""
    declared = _longest(spec["containers"], url)
    best = _longest(spec.get("authorized", {}), url)
    if not best:
        if declared:
            raise UnsupportedError(f"{describe(spec)}: virtual chunk location {url!r} is in the repository's virtual "
                                   f"chunk container {declared!r}, which was not authorized: pass "
                                   f"virtual_chunk_containers={{{declared!r}: {{storage options}}}} to read it")
        raise UnsupportedError(f"{describe(spec)}: virtual chunk location {url!r} is in no virtual chunk container "
                               "of the repository; pass its storage options as virtual_chunk_containers="
                               f"{{'{url.rsplit('/', 1)[0]}/': {{...}}}} to read it")
    base = _longest(spec["containers"], best) or declared
    opts = {k: v for k, v in spec["containers"].get(base, {}).items() if k != "_name"}
    opts.update(spec["authorized"][best])
    if "_unsupported" in opts:
        raise UnsupportedError(f"{describe(spec)}: virtual chunks in {opts['_unsupported']} containers ({url!r}) "
                               "are not supported")
    return best, opts


class Placement:
    """Where an array's referenced objects live: ``places`` [(kind, root, storage_options)]
    ("local": a directory; "remote": a bucket or host URL), and per URL of the references the
    number of its place, its key there and the version it must be at ("" for any)."""

    def __init__(self) -> None:
        self.places: List[Tuple[str, str, dict]] = []
        self.target_of: List[int] = []
        self.keys: List[str] = []
        self.versions: List[str] = []

    def place(self, kind: str, root: str, opts: dict) -> int:
        # Two containers in one bucket may carry different options (credentials, endpoint):
        # a place is its root and its options.
        for i, (k, r, o) in enumerate(self.places):
            if (k, r) == (kind, root) and o == opts:
                return i
        self.places.append((kind, root, opts))
        return len(self.places) - 1


def placement(spec: Dict[str, Any], refs: Any, check: bool = True) -> Placement:
    """Where every object ``refs`` names lives: native chunks in the repository, virtual ones
    in their containers (a local file system, or one place per bucket / host). ``check``: make
    the last-modified checks of virtual references (I/O) and pin ETags."""
    repo = spec["refs"]
    remote_repo = _storage.is_remote(repo)
    out = Placement()
    for url in refs.urls():
        if url.startswith("chunks/"):
            out.target_of.append(out.place("remote" if remote_repo else "local", repo, dict(spec["storage_options"] or {})))
            out.keys.append(url)
            continue
        # Icechunk keeps locations percent-encoded ("my%20file.nc") and decodes them before
        # matching containers and naming objects; the stores here encode keys themselves.
        url = _normal_url(_absolute(spec, url))
        scheme, _, rest = url.partition("://")
        host, _, path = rest.partition("/")
        if scheme in ("s3", "gs"):
            path = path.split("?", 1)[0].split("#", 1)[0]
        path = urllib.parse.unquote(path)
        url = f"{scheme}://{host}/{path}"
        _, opts = _container_for(spec, url)
        if scheme == "file":
            if host not in ("", "localhost"):
                raise UnsupportedError(f"{describe(spec)}: virtual chunk location {url!r} names a file on another "
                                       "host")
            out.target_of.append(out.place("local", "/", {}))
            out.keys.append(path.lstrip("/"))
        elif _storage.is_remote(url):
            out.target_of.append(out.place("remote", f"{scheme}://{host}", opts))
            out.keys.append(path)
        else:
            raise UnsupportedError(f"{describe(spec)}: virtual chunk location {url!r}: lsio reads local files and "
                                   "s3://, gs://, http(s):// objects")
    _narrow_local_root(out)
    if check:
        out.versions = _check_virtual(spec, refs, out)
    return out


def _narrow_local_root(p: Placement) -> None:
    """Virtual chunks in local files are first placed under "/": the place is rooted at the
    files' common directory instead (closing a store rooted at "/" would drop every array's
    cached descriptors)."""
    for t, (kind, root, opts) in enumerate(p.places):
        if kind != "local" or root != "/":
            continue
        idx = [i for i, x in enumerate(p.target_of) if x == t]
        if not idx:
            continue
        common = os.path.commonpath([os.path.dirname("/" + p.keys[i]) for i in idx])
        p.places[t] = (kind, common, opts)
        for i in idx:
            p.keys[i] = os.path.relpath("/" + p.keys[i], common)


def _location_of(p: Placement, i: int) -> str:
    kind, root, _ = p.places[p.target_of[i]]
    if kind == "local":
        return os.path.join(root, *p.keys[i].split("/"))
    return f"{root}/{p.keys[i]}"


def _check_virtual(spec: Dict[str, Any], refs: Any, p: Placement) -> List[str]:
    """Checks the last-modified times virtual references ask for (local files: their mtime;
    remote objects: a HEAD's Last-Modified, the objects then read pinned to the ETag that HEAD
    saw) and returns the ETag each remote object must be at ("" for any)."""
    checks = refs.checks()
    versions = [""] * len(checks)
    heads: List[int] = []
    for i, (etag, modified) in enumerate(checks):
        kind = p.places[p.target_of[i]][0]
        where = _location_of(p, i)
        if etag:
            if kind == "local":
                raise UnsupportedError(f"{describe(spec)}: virtual references to the local file {where!r} carry an "
                                       "ETag, which a local file has not")
            versions[i] = etag if etag.startswith(("\"", "W/")) else f"\"{etag}\""
        elif modified and kind == "local":
            try:
                mtime = os.stat(where).st_mtime
            except OSError as e:
                raise StorageError(e.errno, f"cannot read {where!r}: {e.strerror}", where) from None
            if mtime > modified:
                raise _modified(spec, where, mtime, modified)
        elif modified:
            heads.append(i)
    if heads:
        stores: Dict[int, Any] = {}
        for i in heads:
            t = p.target_of[i]
            if t not in stores:
                _, root, opts = p.places[t]
                stores[t] = _Handle(root, opts).get().store()

        def head(i: int) -> Tuple[int, Optional[dict]]:
            return i, stores[p.target_of[i]].stat(p.keys[i])

        import concurrent.futures  # noqa: PLC0415

        with concurrent.futures.ThreadPoolExecutor(min(16, len(heads))) as pool:
            for i, st in pool.map(head, heads):
                url = _location_of(p, i)
                if st is None:
                    raise NotFoundError(errno.ENOENT, f"{url!r}, which virtual chunks of {describe(spec)} reference, "
                                        "does not exist", url)
                when = _http_date(st.get("last_modified", ""))
                if when is None:
                    raise StorageError(errno.ESTALE, f"{url!r} sent no Last-Modified date: the last-modified check "
                                       f"the virtual references of {describe(spec)} ask for cannot be made", url)
                if when > checks[i][1]:
                    raise _modified(spec, url, when, checks[i][1])
                versions[i] = st["version"] or ""  # later reads: this version, or they fail
    return versions if any(versions) else []


def _modified(spec: Dict[str, Any], where: str, mtime: float, allowed: int) -> StorageError:
    return StorageError(errno.ESTALE, f"{where!r} was modified after the virtual references to it were written "
                        f"(modified at {mtime:.0f}, references allow up to {allowed}): {describe(spec)} no longer "
                        "describes its bytes", where)


def _http_date(text: str) -> Optional[float]:
    import email.utils  # noqa: PLC0415

    try:
        return email.utils.parsedate_to_datetime(text).timestamp() if text else None
    except (TypeError, ValueError):
        return None


class _Handles:
    """The remote contexts of an array whose chunks live in several places: refreshing it
    refreshes each (lsio.Array keeps one handle)."""

    def __init__(self, handles: List[Any]) -> None:
        self.handles = handles

    def get(self) -> "_Handles":
        return self

    def refresh_if_needed(self) -> None:
        for h in self.handles:
            h.get().refresh_if_needed()


def open_view(spec: Dict[str, Any], prefix: str, config: Dict[str, Any]) -> Tuple[Any, Any, Any]:
    """(view, handle, store) of the node at ``prefix``, as _kerchunk.open_view."""
    refs = array_references(spec, prefix)
    p = placement(spec, refs)
    io, qd = config.get("io", "auto"), int(config.get("queue_depth", 64))
    if config.get("direct") is True:
        raise UnsupportedError("direct=True is not supported for Icechunk repositories yet")
    if not p.places:
        return refs.local_view(prefix, "/", [], io, qd, False), None, None
    if len(p.places) == 1:
        kind, root, opts = p.places[0]
        if kind == "local":
            return refs.local_view(prefix, root, p.keys, io, qd, False), None, None
        handle = _Handle(root, opts)
        store = handle.get().new_store()
        return refs.remote_view(prefix, store, p.keys, p.versions), handle, store
    # Chunks in several places (native and virtual, or several buckets): one target each.
    handles, targets = [], []
    for kind, root, opts in p.places:
        if kind == "local":
            targets.append(root)
        else:
            h = _Handle(root, opts)
            handles.append(h)
            targets.append(h.get().new_store())
    view = refs.mixed_view(prefix, targets, p.target_of, p.keys, p.versions, io, qd)
    return view, _Handles(handles) if handles else None, tuple(t for t in targets if not isinstance(t, str))


def target_location(spec: Dict[str, Any], prefix: str) -> Tuple[str, str]:
    """(kind, root) the array's options are resolved for: its one place, or the first remote
    one of several."""
    p = placement(spec, array_references(spec, prefix), check=False)
    if not p.places:
        return "local", "/"
    remote = [(k, r) for k, r, _ in p.places if k == "remote"]
    return remote[0] if remote else (p.places[0][0], p.places[0][1])

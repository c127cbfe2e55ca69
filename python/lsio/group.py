"""Zarr groups (v3 and v2): :func:`open_group` and :class:`Group`.

A group is a directory whose ``zarr.json`` has ``"node_type": "group"`` (Zarr v2: a directory
holding ``.zgroup``). Its members are the subdirectories holding a ``zarr.json`` (v2:
``.zarray`` or ``.zgroup``). When the group's ``zarr.json`` carries zarr-python's inline
consolidated metadata (``"consolidated_metadata"``, keys are full relative paths), or a v2
group has ``.zmetadata``, members are listed from it without touching the children;
otherwise the directory is listed and each child's metadata read. Nothing else is opened
until an array is requested with ``group[name]`` (which returns an :class:`lsio.Array`).
v2 nodes are described by v3-shaped dicts (``zarr_format`` 2, ``node_type``,
``attributes`` from ``.zattrs``, and the ``.zarray`` keys).

Remote groups (``s3://``, ``gs://``, ``http(s)://``) read ``zarr.json`` objects through the
engine's HTTP client. Consolidated metadata is used when present; otherwise S3 and GCS
groups are listed (ListObjectsV2 with delimiter '/') and each child's ``zarr.json`` read,
while plain HTTP, which cannot list, still opens members by path (``group[name]``) and
raises UnsupportedError for listing.

>>> g = lsio.open_group("weather.zarr")
>>> g.array_names, g.group_names
(('t2m', 'u10'), ('forecast',))
>>> t2m = g["t2m"]                       # same as lsio.open("weather.zarr", "t2m")
>>> sub = g["forecast/run1"]             # nested paths work too
"""

from __future__ import annotations

import errno
import json
import os
from typing import Any, Dict, Iterator, Optional, Tuple

from . import _storage
from ._remote import Handle as _Handle
from .errors import FormatError, StorageError, UnsupportedError

__all__ = ["Group", "open_group"]


def _read_file(file: str) -> Optional[bytes]:
    """A local metadata file's bytes, None when there is none."""
    try:
        with open(file, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        err = StorageError(e.errno, f"cannot read {file!r}: {e.strerror}", file)
        err.path = file  # type: ignore[attr-defined]
        raise err from None


def _read_json(path: str) -> dict:
    """A node's metadata: zarr.json, or a Zarr v2 node's .zarray / .zgroup (+ .zattrs)."""
    file = os.path.join(path, "zarr.json")
    raw = _read_file(file)
    if raw is not None:
        return _parse_json(raw, file)
    v2 = _read_v2_node(lambda name: _read_file(os.path.join(path, name)), lambda name: os.path.join(path, name))
    if v2 is not None:
        return v2
    err = StorageError(2, f"no zarr.json (or Zarr v2 .zarray / .zgroup) in {path!r}", file)
    err.path = file  # type: ignore[attr-defined]
    raise err


def _read_v2_node(get, where) -> Optional[dict]:
    """A Zarr v2 node as v3-shaped metadata (see _v2_node), or None when it is not one.

    ``get(name)`` returns a file's bytes or None; ``where(name)`` names it in errors.
    """
    for kind in ("array", "group"):
        name = ".zarray" if kind == "array" else ".zgroup"
        raw = get(name)
        if raw is None:
            continue
        attrs_raw = get(".zattrs")
        attrs = _parse_json(attrs_raw, where(".zattrs")) if attrs_raw is not None else {}
        return _v2_node(kind, _parse_json(raw, where(name)), attrs, where(name))
    return None


_V2_SOURCE = "_lsio_v2_source"  # the .zarray / .zgroup a v2 node dict was made from


def _v2_node(kind: str, meta: dict, attrs: dict, where: str) -> dict:
    """Zarr v2 metadata shaped like a v3 node's: ``zarr_format`` 2, ``node_type``,
    ``attributes`` (.zattrs) and, for arrays, the .zarray keys plus ``data_type`` (numpy's
    name of the dtype, for listings); the engine reads the array itself from .zarray."""
    if meta.get("zarr_format") != 2:
        raise FormatError(f"{where}: zarr_format must be 2, got {meta.get('zarr_format')!r}")
    node = {**meta, "zarr_format": 2, "node_type": kind, "attributes": attrs, _V2_SOURCE: where}
    if kind == "array":
        try:
            import numpy as np

            node["data_type"] = np.dtype(meta.get("dtype")).newbyteorder("=").name
        except Exception:  # noqa: BLE001 - listings only; lsio.open says what is wrong
            node["data_type"] = str(meta.get("dtype"))
        dims = attrs.get("_ARRAY_DIMENSIONS")
        if isinstance(dims, list):
            node["dimension_names"] = dims
    return node


def _v2_consolidated(zmetadata: dict, where: str) -> Dict[str, dict]:
    """Members (relative path -> node metadata) from a Zarr v2 group's .zmetadata."""
    meta = zmetadata.get("metadata")
    if not isinstance(meta, dict):
        raise FormatError(f"{where}: .zmetadata lacks a \"metadata\" object")
    members: Dict[str, dict] = {}
    for key, value in meta.items():
        for suffix, kind in (("/.zarray", "array"), ("/.zgroup", "group")):
            if str(key).endswith(suffix) and isinstance(value, dict):
                rel = str(key)[: -len(suffix)].strip("/")
                attrs = meta.get(rel + "/.zattrs")
                members[rel] = _v2_node(kind, value, attrs if isinstance(attrs, dict) else {}, where)
    return members


def _parse_json(raw: bytes, file: str) -> dict:
    try:
        meta = json.loads(raw)
    except ValueError as e:
        err = FormatError(f"invalid JSON in {file!r}: {e}")
        err.path = file  # type: ignore[attr-defined]
        raise err from None
    if not isinstance(meta, dict):
        raise FormatError(f"{file!r} does not hold a JSON object")
    return meta


class _LocalNodes:
    """Node access for a group in a local directory."""

    remote = False

    def join(self, base: str, name: str) -> str:
        return os.path.join(base, name)

    def basename(self, path: str) -> str:
        return os.path.basename(path.rstrip(os.sep)) or path

    def read_json(self, path: str) -> dict:
        return _read_json(path)

    def list_children(self, path: str) -> Dict[str, dict]:
        try:
            entries = sorted(os.scandir(path), key=lambda e: e.name)
        except OSError as e:
            raise StorageError(e.errno, f"cannot list group {path!r}: {e.strerror}", path) from None
        children: Dict[str, dict] = {}
        for entry in entries:
            if entry.is_dir() and any(os.path.isfile(os.path.join(entry.path, f))
                                      for f in ("zarr.json", ".zarray", ".zgroup")):
                try:
                    meta = _read_json(entry.path)
                except FormatError:
                    continue  # malformed: not a member
                if meta.get("node_type") in ("array", "group"):
                    children[entry.name] = meta
        return children

    def read_v2_consolidated(self, path: str) -> Optional[Dict[str, dict]]:
        file = os.path.join(path, ".zmetadata")
        raw = _read_file(file)
        return None if raw is None else _v2_consolidated(_parse_json(raw, file), file)

    def array_options(self) -> Dict[str, Any]:
        return {}


class _RemoteNodes:
    """Node access for a group behind a URL: zarr.json objects through the shared store of
    the process's remote context for the URL (lsio._remote), which refreshes its credentials
    and is looked up again in a forked or unpickled process."""

    remote = True

    def __init__(self, url: str, storage_options: Optional[dict]) -> None:
        self.url = url.rstrip("/")
        self.storage_options = dict(storage_options or {})
        self._handle = _Handle(self.url, self.storage_options)
        ctx = self._handle.get()  # validates the URL and options now
        self.display = ctx.display.rstrip("/")
        self.listable = ctx.config.list_root is not None

    def __getstate__(self) -> dict:
        return {"url": self.url, "storage_options": self.storage_options}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["url"], state["storage_options"])  # type: ignore[misc]

    def store(self) -> Any:
        return self._handle.get().store()

    def join(self, base: str, name: str) -> str:
        return base.rstrip("/") + "/" + name

    def basename(self, path: str) -> str:
        return path.rstrip("/").rsplit("/", 1)[-1]

    def _key(self, path: str, name: str) -> str:
        rel = path[len(self.display):].strip("/") if path.startswith(self.display) else ""
        return f"{rel}/{name}" if rel else name

    def read_json(self, path: str) -> dict:
        store = self.store()
        key = self._key(path, "zarr.json")
        raw = store.get(key)
        where = store.location(key)
        if raw is None:
            v2 = _read_v2_node(lambda name: store.get(self._key(path, name)),
                               lambda name: store.location(self._key(path, name)))
            if v2 is not None:
                return v2
            err = StorageError(errno.ENOENT, f"no zarr.json (or Zarr v2 .zarray / .zgroup) at {path!r}: "
                               "not a Zarr group or array", where)
            err.path = where  # type: ignore[attr-defined]
            raise err
        return _parse_json(raw, where)

    def read_v2_consolidated(self, path: str) -> Optional[Dict[str, dict]]:
        store = self.store()
        key = self._key(path, ".zmetadata")
        raw = store.get(key)
        return None if raw is None else _v2_consolidated(_parse_json(raw, store.location(key)), store.location(key))

    def list_children(self, path: str) -> Dict[str, dict]:
        if not self.listable:
            raise UnsupportedError(
                f"cannot list the members of remote group {path!r}: HTTP cannot list and the group "
                "has no consolidated metadata (write it with zarr.consolidate_metadata, or open "
                "members by name: group['t2m'])"
            )
        # S3/GCS: the "directories" below the group (ListObjectsV2), then each one's zarr.json.
        rel = path[len(self.display):].strip("/") if path.startswith(self.display) else ""
        children: Dict[str, dict] = {}
        for name in self.store().list_children(rel):
            try:
                meta = self.read_json(self.join(path, name))
            except (FormatError, StorageError) as e:
                if isinstance(e, StorageError) and e.errno != errno.ENOENT:
                    raise
                continue  # not a node (no metadata, malformed): not a member
            if meta.get("node_type") in ("array", "group"):
                children[name] = meta
        return children

    def array_options(self) -> Dict[str, Any]:
        return {"storage_options": self.storage_options}


def _public(meta: dict) -> dict:
    """Node metadata as users see it (without lsio's own bookkeeping key)."""
    return {k: v for k, v in meta.items() if k != _V2_SOURCE}


def _node_type(meta: dict, where: str) -> str:
    if meta.get("zarr_format") == 2 and _V2_SOURCE not in meta:
        raise FormatError(f"{where}: zarr.json says zarr_format 2; a Zarr v2 node keeps its metadata in "
                          ".zarray or .zgroup")
    if meta.get("zarr_format") not in (2, 3):
        raise UnsupportedError(f"{where}: zarr_format is {meta.get('zarr_format')!r}; lsio reads Zarr v3 and v2")
    nt = meta.get("node_type")
    if nt not in ("array", "group"):
        raise FormatError(f"{where}: node_type must be 'array' or 'group', got {nt!r}")
    return nt


def open_group(
    path: "str | os.PathLike[str]",
    *,
    consolidated: Optional[bool] = None,
    storage_options: Optional[dict] = None,
    **options: Any,
) -> "Group":
    """Open the Zarr group stored in directory ``path`` (the one holding its ``zarr.json``, or
    for Zarr v2 its ``.zgroup``).

    ``consolidated``: ``None`` (default) uses consolidated metadata (v3: inline in
    ``zarr.json``; v2: ``.zmetadata``) when the group has it and lists the directory otherwise; ``True`` requires it (``FormatError`` if absent);
    ``False`` always lists the directory. Other keyword arguments (``threads``, ``io``, ...)
    are passed to :func:`lsio.open` for the arrays opened through the group.

    ``path`` may be a URL (``s3://``, ``gs://``, ``http(s)://``) with ``storage_options`` as
    for :func:`lsio.open`; see the module docstring for listing remote groups.

    Raises ``lsio.FormatError`` if ``path`` is an array (use :func:`lsio.open`) or not a
    group, ``lsio.StorageError`` if it has neither ``zarr.json`` nor ``.zgroup``.
    """
    nodes: Any
    if isinstance(path, str) and _storage.is_remote(path):
        nodes = _RemoteNodes(path, storage_options)
        root = nodes.display
    else:
        if storage_options is not None:
            raise ValueError("storage_options apply to URLs (s3://, gs://, http(s)://), not to local paths")
        nodes = _LocalNodes()
        root = _storage.local_path(path)
    return _group_from(nodes, root, nodes.read_json(root), consolidated, options)


def _group_from(nodes: Any, root: str, meta: dict, consolidated: Optional[bool], options: Dict[str, Any]) -> "Group":
    """The Group at ``root`` whose metadata ``meta`` the caller read already (the xarray
    backend and the CLI read it to tell groups from arrays: reading it again costs a request
    on remote stores)."""
    if _node_type(meta, nodes.join(root, "zarr.json")) != "group":
        raise FormatError(f"{root!r} is an array, not a group; open it with lsio.open()")
    members: Optional[Dict[str, dict]] = None
    cm = meta.get("consolidated_metadata")
    if consolidated is not False and isinstance(cm, dict) and isinstance(cm.get("metadata"), dict):
        members = {str(k).strip("/"): v for k, v in cm["metadata"].items() if isinstance(v, dict)}
    elif consolidated is not False and meta.get("zarr_format") == 2:
        members = nodes.read_v2_consolidated(root)  # .zmetadata, when the group has one
    if consolidated and members is None:
        raise FormatError(f"group {root!r} has no consolidated metadata")
    return Group(root, meta, members, options, nodes)


class Group:
    """A Zarr group (v3 or v2). Create with :func:`lsio.open_group`.

    ``group[name]`` returns an :class:`lsio.Array` or a :class:`Group` (``name`` may be a
    ``/``-separated path). ``array_names`` / ``group_names`` list the direct members;
    ``arrays()`` / ``groups()`` / ``members()`` iterate them; ``walk_arrays()`` yields
    ``(path, metadata)`` for every array below the group.
    """

    def __init__(
        self,
        path: str,
        meta: dict,
        consolidated: Optional[Dict[str, dict]],
        options: Dict[str, Any],
        nodes: Any = None,
    ) -> None:
        self._nodes = nodes if nodes is not None else _LocalNodes()
        self._path = path
        self._meta = meta
        self._consolidated = consolidated
        self._options = dict(options)
        self._children: Optional[Dict[str, dict]] = None

    # -- metadata -------------------------------------------------------------------------

    @property
    def path(self) -> str:
        return self._path

    @property
    def name(self) -> str:
        return self._nodes.basename(self._path)

    @property
    def attrs(self) -> dict:
        a = self._meta.get("attributes") or {}
        return dict(a) if isinstance(a, dict) else {}

    @property
    def consolidated(self) -> bool:
        """Whether members are listed from consolidated metadata."""
        return self._consolidated is not None

    def _member_meta(self) -> Dict[str, dict]:
        """Direct members: name -> that member's zarr.json content."""
        if self._children is None:
            children: Dict[str, dict] = {}
            if self._consolidated is not None:
                for key, meta in self._consolidated.items():
                    if key and "/" not in key:
                        children[key] = meta
            else:
                children = self._nodes.list_children(self._path)
            self._children = dict(sorted(children.items()))
        return self._children

    @property
    def array_names(self) -> Tuple[str, ...]:
        return tuple(k for k, m in self._member_meta().items() if m.get("node_type") == "array")

    @property
    def group_names(self) -> Tuple[str, ...]:
        return tuple(k for k, m in self._member_meta().items() if m.get("node_type") == "group")

    def keys(self) -> Tuple[str, ...]:
        return tuple(self._member_meta())

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self._member_meta())

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        try:
            self._lookup(name)
        except KeyError:
            return False
        return True

    def member_metadata(self, name: str) -> dict:
        """The ``zarr.json`` content of member ``name`` (from consolidated metadata if used; a
        Zarr v2 member: its ``.zarray``/``.zgroup`` keys with ``zarr_format``, ``node_type`` and
        ``attributes``)."""
        return _public(self._lookup(name)[2])

    # -- access ---------------------------------------------------------------------------

    def _lookup(self, name: str) -> Tuple["Group", str, dict]:
        """(parent group, member name, member metadata) of a ``/``-separated path."""
        parts = [p for p in str(name).split("/") if p not in ("", ".")]
        if not parts or ".." in parts:
            raise KeyError(name)
        group: Group = self
        for part in parts[:-1]:
            meta = group._member(part)
            if meta is None or meta.get("node_type") != "group":
                raise KeyError(name)
            group = group._child_group(part, meta)
        meta = group._member(parts[-1])
        if meta is None:
            raise KeyError(name)
        return group, parts[-1], meta

    def _member(self, part: str) -> Optional[dict]:
        """A direct member's metadata; a remote group without consolidated metadata reads
        the member's zarr.json instead of listing (HTTP cannot list)."""
        if self._consolidated is None and self._nodes.remote and self._children is None and \
                not self._nodes.listable:
            try:
                meta = self._nodes.read_json(self._nodes.join(self._path, part))
            except StorageError as e:
                if e.errno == errno.ENOENT:
                    return None
                raise
            return meta if meta.get("node_type") in ("array", "group") else None
        return self._member_meta().get(part)

    def _child_group(self, name: str, meta: dict) -> "Group":
        sub: Optional[Dict[str, dict]] = None
        if self._consolidated is not None:
            prefix = name + "/"
            sub = {k[len(prefix) :]: v for k, v in self._consolidated.items() if k.startswith(prefix)}
        return Group(self._nodes.join(self._path, name), meta, sub, self._options, self._nodes)

    def __getitem__(self, name: str) -> Any:
        """The member ``name`` (a ``/``-separated path): an :class:`lsio.Array` or a :class:`Group`."""
        try:
            parent, part, meta = self._lookup(name)
        except KeyError:
            try:
                known = f"(arrays: {list(self.array_names)}, groups: {list(self.group_names)})"
            except UnsupportedError:
                known = "(the group cannot be listed)"
            raise KeyError(f"{name!r} is not a member of group {self._path!r} {known}") from None
        if meta.get("node_type") == "group":
            return parent._child_group(part, meta)
        from . import _strings
        from .array import Array

        path = self._nodes.join(parent._path, part)
        if _strings.is_vlen_string(meta):
            # Variable-length strings are read outside the engine's crop path (_strings.py).
            return _strings.open_string_array(path, meta, self._nodes.array_options().get("storage_options"))
        return Array(path, **self._options, **self._nodes.array_options())

    def get(self, name: str, default: Any = None) -> Any:
        try:
            return self[name]
        except KeyError:
            return default

    def arrays(self) -> Iterator[Tuple[str, Any]]:
        """``(name, lsio.Array)`` for each direct array member (opened on iteration)."""
        for n in self.array_names:
            yield n, self[n]

    def groups(self) -> Iterator[Tuple[str, "Group"]]:
        for n in self.group_names:
            yield n, self[n]

    def members(self) -> Iterator[Tuple[str, Any]]:
        for n in self.keys():
            yield n, self[n]

    def walk_arrays(self) -> Iterator[Tuple[str, dict]]:
        """``(relative path, zarr.json metadata)`` of every array below this group, depth first."""
        for n, meta in self._member_meta().items():
            if meta.get("node_type") == "array":
                yield n, _public(meta)
            else:
                for sub, m in self._child_group(n, meta).walk_arrays():
                    yield f"{n}/{sub}", m

    # -- display --------------------------------------------------------------------------

    def tree(self) -> str:
        """A text tree of the members with shapes and data types."""
        lines = [self.name + "/"]

        def rec(g: "Group", indent: str) -> None:
            items = list(g._member_meta().items())
            for i, (n, meta) in enumerate(items):
                last = i == len(items) - 1
                branch = "└── " if last else "├── "
                if meta.get("node_type") == "group":
                    lines.append(f"{indent}{branch}{n}/")
                    rec(g._child_group(n, meta), indent + ("    " if last else "│   "))
                else:
                    lines.append(f"{indent}{branch}{n} {tuple(meta.get('shape', ()))} {meta.get('data_type')}")

        rec(self, "")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (
            f"<lsio.Group {self._path!r} arrays={list(self.array_names)} "
            f"groups={list(self.group_names)}>"
        )

    def _repr_html_(self) -> str:
        from ._repr import group_html

        return group_html(self)

"""Zarr groups (v3 and v2): :func:`open_group` and :class:`Group`.

A group is a directory whose ``zarr.json`` has ``"node_type": "group"`` (Zarr v2: a directory
holding ``.zgroup``). Its members are the subdirectories holding a ``zarr.json`` (v2:
``.zarray`` or ``.zgroup``). When the group's ``zarr.json`` carries zarr-python's inline
consolidated metadata (``"consolidated_metadata"``, keys are full relative paths), or a v2
group has ``.zmetadata``, members are listed from it without touching the children;
otherwise the directory is listed and each child's metadata read (a child whose metadata
lsio cannot read, malformed JSON say, is left out of the listing with a ``UserWarning``
naming it; ``group[name]`` then raises its error). Nothing else is opened
until an array is requested with ``group[name]`` (which returns an :class:`lsio.Array`).
Metadata is read by the engine (``_core.read_node``, lsio._nodes): v2 nodes come translated to
the v3 form (``zarr_format`` 2, ``node_type``, ``attributes`` from ``.zattrs``, and for arrays
v3's ``shape``, ``data_type``, ``chunk_grid``, ``codecs``, ... as cpp/src/zarr/node.h says).

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
import os
from typing import Any, Dict, Iterator, List, Optional, Tuple

from . import _storage
from ._hdf5 import typed_attrs as _typed
from ._nodes import LocalNodes, RemoteNodes
from ._strings import StringArray, is_vlen_string
from .array import Array
from .errors import FormatError, StorageError, UnsupportedError

__all__ = ["Group", "open_group"]


def open_group(
    path: "str | os.PathLike[str]",
    *,
    consolidated: Optional[bool] = None,
    storage_options: Optional[dict] = None,
    remote_options: Optional[dict] = None,
    remote_protocol: Optional[str] = None,
    **options: Any,
) -> "Group":
    """Open the Zarr group stored in directory ``path`` (the one holding its ``zarr.json``, or
    for Zarr v2 its ``.zgroup``).

    ``consolidated``: ``None`` (default) uses consolidated metadata (v3: inline in
    ``zarr.json``; v2: ``.zmetadata``) when the group has it and lists the directory otherwise; ``True`` requires it (``FormatError`` if absent);
    ``False`` always lists the directory. Other keyword arguments (``threads``, ``io``, ...)
    are passed to :func:`lsio.open` for the arrays opened through the group.

    ``path`` may be a URL (``s3://``, ``gs://``, ``http(s)://``) with ``storage_options`` as
    for :func:`lsio.open`; see the module docstring for listing remote groups. ``path`` may
    also be a NetCDF4/HDF5 file (its HDF5 groups as groups, :mod:`lsio._hdf5`) or a kerchunk
    JSON reference file (local or a URL), with ``remote_options`` and ``remote_protocol`` for
    the files it references (:mod:`lsio._kerchunk`).

    Raises ``lsio.FormatError`` if ``path`` is an array (use :func:`lsio.open`) or not a
    group, ``lsio.StorageError`` if it has neither ``zarr.json`` nor ``.zgroup``.
    """
    nodes: Any
    from . import _kerchunk  # noqa: PLC0415 - kerchunk support is loaded when used

    from . import _icechunk  # noqa: PLC0415

    if _icechunk.is_icechunk(path):
        if remote_options is not None or remote_protocol is not None:
            raise ValueError("remote_options and remote_protocol apply to kerchunk reference files")
        return open_icechunk(path, storage_options=storage_options, consolidated=consolidated, **options)
    if _kerchunk.is_references(path):
        # kerchunk references: the group at their root (lsio/_kerchunk.py).
        nodes = _kerchunk.ReferenceNodes(_kerchunk.spec_for(path, storage_options, remote_options, remote_protocol))
        root = nodes.display
        return group_from(nodes, root, nodes.read(root, consolidated is not False), consolidated, options)
    if remote_options is not None or remote_protocol is not None:
        raise ValueError("remote_options and remote_protocol apply to kerchunk reference files")
    if isinstance(path, str) and _storage.is_remote(path):
        nodes = RemoteNodes(path, storage_options)
        root = nodes.display
        try:
            node = nodes.read(root, consolidated is not False)
        except StorageError as e:
            # No Zarr node here: an Icechunk repository is opened at its branch main (asked
            # only now, so Zarr groups cost no extra request).
            if e.errno == errno.ENOENT and _icechunk.is_remote_icechunk(path, storage_options):
                return open_icechunk(path, storage_options=storage_options, consolidated=consolidated, **options)
            raise
        return group_from(nodes, root, node, consolidated, options)
    else:
        if storage_options is not None:
            raise ValueError("storage_options apply to URLs (s3://, gs://, http(s)://), not to local paths")
        nodes = LocalNodes()
        root = _storage.local_path(path)
    # A v2 group's .zmetadata is read with it unless the caller does not want it.
    return group_from(nodes, root, nodes.read(root, consolidated is not False), consolidated, options)


def open_icechunk(path: "str | os.PathLike[str]", *, branch: Optional[str] = None, tag: Optional[str] = None,
                  snapshot: Optional[str] = None, storage_options: Optional[dict] = None,
                  virtual_chunk_containers: Optional[Dict[str, dict]] = None, consolidated: Optional[bool] = None,
                  **options: Any) -> "Group":
    """The root group of an Icechunk repository (spec version 1 or 2) at one snapshot.

    ``path``: a local directory or a URL (``s3://``, ``gs://``, ``http(s)://``, with
    ``storage_options`` as for :func:`lsio.open`). Which snapshot: ``branch`` (default
    ``"main"``; read fresh now), ``tag``, or ``snapshot`` (an id); the group's
    :attr:`Group.snapshot_id` says which one was read, and every array opened from it (in this
    process or, pickled, in a worker) reads that snapshot. ``virtual_chunk_containers``:
    ``{url_prefix: storage_options}`` for virtual chunks (credentials per container; the
    repository's own containers supply their endpoints). Other keyword arguments (``threads``,
    ...) are passed to the arrays, as :func:`open_group` does. See :mod:`lsio._icechunk`.
    """
    from . import _icechunk, _kerchunk  # noqa: PLC0415 - loaded when used

    spec = _icechunk.spec_for(path, branch=branch, tag=tag, snapshot=snapshot, storage_options=storage_options,
                              virtual_chunk_containers=virtual_chunk_containers)
    nodes = _kerchunk.ReferenceNodes(spec)
    root = nodes.display
    return group_from(nodes, root, nodes.read(root, consolidated is not False), consolidated, options)


def group_from(nodes: Any, root: str, node: dict, consolidated: Optional[bool], options: Dict[str, Any]) -> "Group":
    """The Group at ``root`` whose node (a _core.read_node dict) the caller read already (the
    xarray backend and the CLI read it to tell groups from arrays: reading it again costs a
    request on remote stores)."""
    if node["node_type"] != "group":
        raise FormatError(f"{root!r} is an array, not a group; open it with lsio.open()")
    members: Optional[Dict[str, dict]] = None if consolidated is False else node["consolidated"]
    if consolidated and members is None:
        raise FormatError(f"group {root!r} has no consolidated metadata")
    return Group(root, node["metadata"], members, options, nodes)



def _path_parts(name: str) -> Optional[List[str]]:
    """A member path's parts ("a/./b/" -> ["a", "b"]); None if empty or holding ".."."""
    parts = [p for p in str(name).split("/") if p not in ("", ".")]
    return parts if parts and ".." not in parts else None

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
        self._nodes = nodes if nodes is not None else LocalNodes()
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
        return _typed(a) if isinstance(a, dict) else {}

    @property
    def snapshot_id(self) -> Optional[str]:
        """The Icechunk snapshot this group was opened at (:func:`lsio.open_icechunk`): log it
        to know exactly which data a run read. None for other groups."""
        spec = self._nodes.array_options().get("_references") if hasattr(self._nodes, "array_options") else None
        return spec.get("snapshot") if isinstance(spec, dict) and spec.get("format") == "icechunk" else None

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
        Zarr v2 member: its ``.zarray``/``.zgroup`` and ``.zattrs`` in the v3 form, with
        ``zarr_format`` 2)."""
        return self._lookup(name)[2]

    # -- access ---------------------------------------------------------------------------

    def _lookup(self, name: str) -> Tuple["Group", str, dict]:
        """(parent group, member name, member metadata) of a ``/``-separated path."""
        parts = _path_parts(name)
        if parts is None:
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
                meta = self._nodes.read(self._nodes.join(self._path, part), False)["metadata"]
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
            # A member left out of the listing because its metadata cannot be read: that
            # error, not "not a member".
            parts = _path_parts(name)
            if parts is not None and self._consolidated is None:
                try:
                    self._nodes.read(self._nodes.join(self._path, "/".join(parts)), False)
                except (FormatError, UnsupportedError):
                    raise
                except Exception:  # noqa: BLE001 - absent or unreachable: not a member, as said below
                    pass
            try:
                known = f"(arrays: {list(self.array_names)}, groups: {list(self.group_names)})"
            except UnsupportedError:
                known = "(the group cannot be listed)"
            raise KeyError(f"{name!r} is not a member of group {self._path!r} {known}") from None
        if meta.get("node_type") == "group":
            return parent._child_group(part, meta)
        path = self._nodes.join(parent._path, part)
        if is_vlen_string(meta):
            # Variable-length strings are read outside the engine's crop path (_strings.py).
            where = self._nodes.join(path, "zarr.json" if meta.get("zarr_format") == 3 else ".zarray")
            opts = self._nodes.array_options()
            return StringArray(path, meta, where, opts.get("storage_options"), references=opts.get("_references"))
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
                yield n, meta
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

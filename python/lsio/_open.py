"""``lsio.open``: the node at a path is read once (``_core.read_node``), then opened as an
:class:`lsio.Array`, a :class:`lsio.StringArray` (variable-length strings), or refused as a
group naming its arrays. Above array.py, group.py and _strings.py, which do not import it.
"""

from __future__ import annotations

import difflib
import errno
import os
import warnings
from typing import Any, Dict, Optional

from . import _core, _kerchunk, _options, _storage
from ._remote import Handle as _Handle
from ._strings import is_vlen_string, open_string_array
from .array import Array
from .errors import Error, FormatError, NotFoundError, UnsupportedError
from .group import open_group

__all__ = ["open"]


def open(  # noqa: A001 - mirrors zarr.open / builtins.open naming on purpose
    path: "str | os.PathLike[str]",
    name: Optional[str] = None,
    *,
    threads: Optional[int] = None,
    io: Optional[str] = None,
    queue_depth: Optional[int] = None,
    max_gap: Optional[int] = None,
    max_request: Optional[int] = None,
    index_cache_bytes: Optional[int] = None,
    memory_limit: Optional[int] = None,
    direct: "Optional[bool | str]" = None,
    chunk_cache_bytes: Optional[int] = None,
    tune: bool = False,
    cache_bytes: Optional[int] = None,
    storage_options: Optional[dict] = None,
    remote_options: Optional[dict] = None,
    remote_protocol: Optional[str] = None,
) -> "Array":
    """Open the Zarr v3 array stored in directory ``path`` (the one holding ``zarr.json``),
    or at a URL: ``s3://bucket/x.zarr``, ``gs://bucket/x.zarr``, ``https://host/x.zarr``.

    Parameters
    ----------
    name:
        With ``path`` a group, the array's path inside it (``"t2m"``, ``"forecast/t2m"``);
        ``lsio.open("store.zarr", "t2m")`` equals ``lsio.open("store.zarr/t2m")``. Opening
        a group without ``name`` raises :class:`lsio.FormatError` listing its arrays.
    threads:
        Worker threads per read call, the calling thread included. ``None`` reads
        ``LSIO_THREADS``, else uses every CPU available to the process. ``1`` reads on the
        calling thread alone and never starts a background thread.
    io:
        ``"auto"`` (default, or ``LSIO_IO``): io_uring where the kernel allows it, with
        page-cache hits served inline by ``preadv2(RWF_NOWAIT)``; ``pread`` otherwise.
        ``"uring"`` forces io_uring (reads raise :class:`lsio.StorageError` where it is
        unavailable); ``"pread"`` forces plain positional reads.
    queue_depth:
        Reads in flight per thread with io_uring (``None``: ``LSIO_QUEUE_DEPTH`` or 64).
    max_gap, max_request:
        Coalescing: byte ranges of one file are merged into one read while the gap between
        them is at most ``max_gap`` bytes and the read at most ``max_request`` bytes
        (``None``: ``LSIO_MERGE_GAP`` / ``LSIO_MAX_READ``, else by storage kind: 16 KiB /
        1 MiB on local disks and in memory, 1 MiB / 16 MiB on network file systems and
        spinning disks). ``max_request`` also bounds each thread's read buffer.
    index_cache_bytes:
        Bytes of decoded shard indexes cached per array (``None``: 64 MiB).
    memory_limit:
        Bytes one read call may allocate for its plan and read/decode buffers (``None``:
        ``LSIO_MEMORY_LIMIT`` or no limit). An upper bound of the plan is checked before the
        plan is built (about 32 bytes per crop and chunk it touches, plus ~200 bytes per
        distinct chunk), so a call with too many crops fails without growing first. Calls
        then use fewer threads and smaller batches to fit, else raise :class:`MemoryError`
        before reading.
    direct:
        ``"auto"`` (default; ``None``: ``LSIO_DIRECT`` or ``"auto"``), ``True`` or ``False``.
        ``True`` reads with ``O_DIRECT``, bypassing the page cache; ``False`` reads through
        it. ``"auto"`` decides per array at open: when the array's stored bytes exceed the
        page cache room (``MemAvailable``, or less under a memory cgroup limit: the limit
        minus the group's anonymous memory; ``LSIO_PAGE_CACHE_BYTES`` overrides), the data
        cannot stay cached, so ranges the page cache holds are read from it and the others
        with ``O_DIRECT`` (they would only evict other data); an array that fits is read
        buffered, so later epochs hit the cache. ``Array.options["direct_decision"]`` shows
        the decision and its numbers. ``O_DIRECT`` reads are widened to 4 KiB-aligned
        ranges; file systems without ``O_DIRECT`` (tmpfs on older kernels) are read
        buffered. Local Zarr arrays only: references, HDF5 and Icechunk read buffered.
    chunk_cache_bytes:
        Keep decoded chunks in memory, up to this many bytes (``None``: ``LSIO_CACHE_BYTES``
        or 0, no cache). One cache serves every array of the process (its size is the
        largest ``chunk_cache_bytes`` any array asked for), least recently used chunks go first,
        and entries are keyed by each file's version, which every read checks: a rewritten
        file is never served from the cache. Chunks found there are copied into the output
        without reading or decoding: later epochs over data that fits run at memory speed.
        Local arrays only; :func:`lsio.cache_info` shows its use. (Remote bytes are cached
        on disk instead: ``storage_options`` ``cache_dir`` and ``disk_cache_bytes``.)
    cache_bytes:
        The old name of ``chunk_cache_bytes``: still works, with a ``DeprecationWarning``.
    tune:
        Measure the storage at open (a few ms; reads up to ~9 MiB of the store) and set
        ``max_gap`` to its bandwidth / IOPS and ``max_request`` to 64x that, unless they
        were given explicitly. ``Array.options["tuning"]`` shows the measurement. Local
        stores only.
    storage_options:
        For URLs: endpoint, region, credentials, headers, TLS, concurrency, timeouts and
        retries (see the README's "Remote stores" and :mod:`lsio._storage`); fsspec/s3fs
        spellings (``anon``, ``key``, ``secret``, ``client_kwargs``) are accepted. For
        remote arrays ``io``, ``queue_depth`` and ``direct`` do not apply, and unless
        ``max_gap``/``max_request`` are given the store measures how far to coalesce
        (within 1 MiB / 16 MiB; ``Array.stats()`` shows the values in use).

    remote_options, remote_protocol:
        ``path`` may also be a NetCDF4/HDF5 file (local, or a URL ending in ``.nc``, ``.h5``, ...;
        ``name`` is the variable's path inside it; see :mod:`lsio._hdf5`) or kerchunk references.
        For kerchunk references (``path`` a ``.json`` reference file, local or at a URL):
        ``storage_options`` for the objects the references name (fsspec's names), and the
        protocol of reference paths written without one. ``storage_options`` then apply to
        the reference file itself. See :mod:`lsio._kerchunk`. A local Icechunk repository
        opens the array ``name`` at the head of its branch ``main`` (:func:`lsio.open_icechunk`
        for other versions and for URLs).

    Raises
    ------
    lsio.FormatError, lsio.UnsupportedError, lsio.StorageError, ValueError

    Notes
    -----
    Environment variables are read when the array is opened; ``Array.options`` shows the
    values in effect.
    """
    from . import _icechunk  # noqa: PLC0415 - loaded when used

    if _icechunk.is_icechunk(path):
        # A local Icechunk repository: the array `name` at the head of branch main
        # (lsio.open_icechunk picks other branches, tags and snapshots).
        from .group import open_icechunk  # noqa: PLC0415

        if remote_options is not None or remote_protocol is not None:
            raise ValueError("remote_options and remote_protocol apply to kerchunk reference files")
        if name is None:
            raise FormatError(f"{str(path)!r} is an Icechunk repository: pass the array's path as name, or use "
                              "lsio.open_icechunk")
        member = open_icechunk(path, threads=threads, io=io, queue_depth=queue_depth, max_gap=max_gap,
                               max_request=max_request, index_cache_bytes=index_cache_bytes,
                               memory_limit=memory_limit, direct=direct, chunk_cache_bytes=chunk_cache_bytes,
                               cache_bytes=cache_bytes)[name]
        if not isinstance(member, Array):
            raise FormatError(f"{name!r} is a group in the Icechunk repository {str(path)!r}, not an array")
        return member
    if _kerchunk.is_references(path):
        return _open_references(path, name, storage_options, remote_options, remote_protocol,
                                dict(threads=threads, io=io, queue_depth=queue_depth, max_gap=max_gap,
                                     max_request=max_request, index_cache_bytes=index_cache_bytes,
                                     memory_limit=memory_limit, direct=direct, chunk_cache_bytes=chunk_cache_bytes,
                                     cache_bytes=cache_bytes))
    if remote_options is not None or remote_protocol is not None:
        raise ValueError("remote_options and remote_protocol apply to kerchunk reference files")
    remote = isinstance(path, str) and _storage.is_remote(path)
    base = path
    if name is not None:
        parts = _name_parts(name)
        path = "/".join([path.rstrip("/"), *parts]) if remote else os.path.join(_storage.local_path(path), *parts)
    if storage_options is not None and not remote:
        raise ValueError("storage_options apply to URLs (s3://, gs://, http(s)://), not to local paths")
    options = dict(threads=threads, io=io, queue_depth=queue_depth, max_gap=max_gap, max_request=max_request,
                   index_cache_bytes=index_cache_bytes, memory_limit=memory_limit, direct=direct,
                   chunk_cache_bytes=chunk_cache_bytes, cache_bytes=cache_bytes)
    if remote and tune:
        raise ValueError("tune=True measures local storage; remote stores measure their coalescing themselves")
    if remote:
        # Options are checked before any request: a local-only option given for a URL is
        # refused without reading the node first (Array checks them again, cheaply).
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # Array warns, at the caller's line
            _options.resolve_remote(path, options)
    # The node's metadata is read once, here: it says whether the array holds variable-length
    # strings (read outside the engine's crop path) or is a group, and the engine takes the
    # same files. Without a node there (or when it cannot be read) the engine opens the path
    # itself and says what is wrong.
    store: Any = None
    node: Optional[dict] = None
    if remote:
        # `context` stays referenced until the array holds it: the registry keeps contexts
        # weakly, and resolving again would call a credentials callable again.
        context = _Handle(path, dict(storage_options or {})).get()
        store = context.new_store()
        try:
            node = _core.read_node(store, "", False)
        except (FormatError, UnsupportedError) as e:
            # An oversized metadata object is refused as it is: reading it again for the
            # engine's words would download it (up to the limit) a second time.
            if "larger than" in str(e):
                raise
            # malformed: the engine names what is wrong (its parser is the strict one)
    else:
        try:
            node = _core.read_node(_storage.local_path(path), "", False)
        except (Error, OSError, ValueError):
            pass  # not a directory, unreadable, malformed: reading again costs no request
    if node is None and name is not None and not remote:
        _raise_if_not_in_group(_storage.local_path(base), name)
    if node is not None and node["node_type"] == "group":
        err = FormatError(_group_message(path, storage_options))
        err.path = node["files"][0]["location"]  # type: ignore[attr-defined]
        raise err
    if node is not None and is_vlen_string(node["metadata"]):
        return open_string_array(path, node, storage_options)  # type: ignore[return-value]
    first: Dict[str, Any] = {} if node is None else {"_files": node["files"], "_store": store}
    if remote:
        return Array(path, storage_options=storage_options, **options, **first)
    return Array(path, tune=tune, **options, **first)


def _name_parts(name: Any) -> list:
    """The segments of an array name inside a group ("forecast/t2m"); TypeError / ValueError
    for a name that is not a str or leaves the group."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise ValueError(f"invalid array name {name!r}")
    return parts


def _raise_if_not_in_group(base: str, name: str) -> None:
    """lsio.open(group, name) where the group has no node `name`: a NotFoundError that lists
    the arrays it does have (a typo then shows its fix)."""
    member = os.path.join(base, name)
    if any(os.path.lexists(os.path.join(member, f)) for f in ("zarr.json", ".zarray", ".zgroup", ".zattrs")):
        return  # the member exists but could not be read: the engine says why
    try:
        node = _core.read_node(base, "", False)
    except (Error, OSError, ValueError):
        return  # no group there: the engine says what is missing
    if node is None or node["node_type"] != "group":
        return
    try:
        names = [n for n, _ in open_group(base).walk_arrays()]
    except Exception:  # noqa: BLE001 - the listing is best effort
        names = []
    close = difflib.get_close_matches(name, names, n=1)
    listing = ", ".join(repr(n) for n in names[:50]) or "none"
    if len(names) > 50:
        listing += f", ... ({len(names)} in all)"
    hint = f"; did you mean {close[0]!r}?" if close else ""
    err = NotFoundError(errno.ENOENT, f"group {base!r} has no array {name!r} (arrays: {listing}){hint}")
    err.path = member  # type: ignore[attr-defined]
    raise err


def _group_message(path: str, storage_options: Optional[dict] = None) -> str:
    """The error text for opening a group as an array: name its arrays."""
    try:
        group = open_group(path, storage_options=storage_options) if storage_options is not None else open_group(path)
        names = [n for n, _ in group.walk_arrays()]
    except Exception:  # noqa: BLE001 - the message is best effort
        names = []
    listing = ", ".join(repr(n) for n in names[:50]) or "none"
    if len(names) > 50:
        listing += f", ... ({len(names)} in all)"
    return (
        f"{path!r} is a Zarr group, not an array; pass an array name, e.g. "
        f"lsio.open(path, {names[0]!r}) (arrays: {listing}), or use lsio.open_group(path)"
        if names
        else f"{path!r} is a Zarr group, not an array, and holds no arrays; use lsio.open_group(path)"
    )


def _open_references(path: Any, name: Optional[str], storage_options: Optional[dict], remote_options: Optional[dict],
                     remote_protocol: Optional[str], options: Dict[str, Any]) -> "Array":
    """lsio.open on kerchunk references: the array ``name`` inside them (lsio/_kerchunk.py)."""
    spec = _kerchunk.spec_for(path, storage_options, remote_options, remote_protocol)
    nodes = _kerchunk.ReferenceNodes(spec)
    where = spec["refs"]
    if name is not None:
        where = nodes.join(where, "/".join(_name_parts(name)))
    try:
        node = nodes.read(where, False)
    except NotFoundError:
        if name is None:
            raise
        names = [n for n, _ in open_group(path, storage_options=storage_options, remote_options=remote_options,
                                          remote_protocol=remote_protocol).walk_arrays()]
        close = difflib.get_close_matches(name, names, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        listing = ", ".join(repr(n) for n in names[:50]) or "none"
        err = NotFoundError(errno.ENOENT, f"{_kerchunk.describe(spec)} has no array {name!r} "
                                          f"(arrays: {listing}){hint}")
        err.path = where  # type: ignore[attr-defined]
        raise err from None
    if node["node_type"] == "group":
        names = [n for n, _ in open_group(path, storage_options=storage_options, remote_options=remote_options,
                                          remote_protocol=remote_protocol).walk_arrays()]
        listing = ", ".join(repr(n) for n in names[:50]) or "none"
        raise FormatError(f"{where!r} is a group in {_kerchunk.describe(spec)}, not an array; pass an array name "
                          f"(arrays: {listing}) or use lsio.open_group")
    if is_vlen_string(node["metadata"]):
        from ._strings import StringArray  # noqa: PLC0415

        return StringArray(where, node["metadata"], node["files"][0]["location"], references=spec)  # type: ignore
    return Array(where, _references=spec, _files=node["files"], **options)

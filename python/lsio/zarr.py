"""lsio as zarr-python's codec pipeline: ``zarr.open_array(...)[...]`` read by lsio's engine.

Enable it with any of::

    lsio.zarr.enable()                                                  # this process
    zarr.config.set({"codec_pipeline.path": "lsio.zarr.LsioCodecPipeline"})
    ZARR_CODEC_PIPELINE__PATH=lsio.zarr.LsioCodecPipeline              # environment

(the class is registered through the ``zarr.codec_pipeline`` entry point, so zarr finds it
by that path without importing lsio first).

zarr-python creates one pipeline per array with :meth:`LsioCodecPipeline.from_array_metadata_and_store`.
The first read opens the array with lsio (its path comes from the first chunk key zarr
hands over) and checks that lsio sees the same array as zarr (shape, data type, fill
value, chunk grid). Every later ``read`` batch (all chunks of one selection: basic, integer
array / orthogonal, block, coordinate and mask selections) becomes one engine call, run on
a worker thread with the GIL released, that writes straight into zarr's output buffer.

Whatever lsio cannot read goes to zarr's own :class:`~zarr.core.codec_pipeline.BatchedCodecPipeline`
for that array: other stores than :class:`zarr.storage.LocalStore`, ``FsspecStore`` over
HTTP(S), S3 (s3fs) and GCS (gcsfs, anonymous or with Application Default Credentials) and
``ObjectStore`` over obstore's local, HTTP and S3 stores, codecs or data types lsio does not
read, 0-d arrays, output buffers that are not writable numpy arrays, and an
lsio error while reading (zarr then reads, and raises its own error if the data is bad).
Writes always go to zarr's pipeline. Falling back is silent unless the config key
``codec_pipeline.strict`` is true (``lsio.zarr.enable(strict=True)``,
``ZARR_CODEC_PIPELINE__STRICT=True``): then it raises :class:`lsio.UnsupportedError`.
:func:`stats` counts what lsio served and what fell back.
"""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any, Dict, Iterable, List, Optional, Tuple

import numpy as np
from zarr.abc.codec import CodecPipeline
from zarr.core.codec_pipeline import BatchedCodecPipeline
from zarr.registry import register_pipeline

from . import _open
from ._remote import ProcessLock
from .array import Array
from .errors import Error, UnsupportedError

__all__ = ["LsioCodecPipeline", "enable", "disable", "stats", "reset_stats", "PATH"]

PATH = "lsio.zarr.LsioCodecPipeline"
"""The value of zarr's ``codec_pipeline.path`` config key that selects lsio."""

_DEFAULT_PATH = "zarr.core.codec_pipeline.BatchedCodecPipeline"

try:  # zarr-python >= 3.2: read returns one GetResult per chunk
    from zarr.abc.codec import GetResult as _GetResult  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - depends on the installed zarr
    _GetResult = None

# Reads whose output is at most this many bytes run on zarr's event-loop thread (the engine
# releases the GIL either way); larger ones on a worker thread of the loop's executor.
_INLINE_BYTES = 1 << 20

_stats_lock = threading.Lock()
_STAT_KEYS = ("reads", "chunks", "fallback_reads", "fallback_arrays", "writes")
_stats: Dict[str, int] = dict.fromkeys(_STAT_KEYS, 0)


def _count(**deltas: int) -> None:
    with _stats_lock:
        for k, v in deltas.items():
            _stats[k] += v


def _after_fork_in_child() -> None:
    global _stats_lock
    _stats_lock = threading.Lock()  # another thread may have held it at fork time


os.register_at_fork(after_in_child=_after_fork_in_child)


def stats() -> Dict[str, int]:
    """Counters of this process since it started (or :func:`reset_stats`): ``reads``
    (read batches lsio served), ``chunks`` (zarr chunks or shards in them),
    ``fallback_reads`` (read batches zarr's pipeline served for an lsio pipeline),
    ``fallback_arrays`` (arrays whose pipeline fell back to zarr's), ``writes`` (write
    batches, always zarr's)."""
    with _stats_lock:
        return dict(_stats)


def reset_stats() -> None:
    """Sets every :func:`stats` counter to 0."""
    with _stats_lock:
        for k in _STAT_KEYS:
            _stats[k] = 0


def enable(strict: bool = False, **options: Any) -> None:
    """Makes zarr-python read through lsio in this process: sets zarr's config keys
    ``codec_pipeline.path`` (to :data:`PATH`), ``codec_pipeline.strict`` and
    ``codec_pipeline.lsio_options`` (``options`` for :func:`lsio.open`, e.g.
    ``threads=2``). Arrays zarr opens afterwards use it."""
    import zarr

    zarr.config.set({"codec_pipeline.path": PATH, "codec_pipeline.strict": bool(strict),
                     "codec_pipeline.lsio_options": dict(options)})


def disable() -> None:
    """Restores zarr-python's default pipeline for arrays opened afterwards."""
    import zarr

    zarr.config.set({"codec_pipeline.path": _DEFAULT_PATH, "codec_pipeline.strict": False,
                     "codec_pipeline.lsio_options": {}})


def _config(key: str, default: Any) -> Any:
    from zarr.core.config import config

    return config.get(key, default)


def _strict() -> bool:
    v = _config("codec_pipeline.strict", False)
    if isinstance(v, str):
        return v.strip().lower() in ("1", "true", "yes", "on")
    return bool(v)


class _Source:
    """What lsio needs to read one array: the lsio.Array, zarr's metadata and the chunk-key
    layout. Built on the first read (the array's path is known only from a chunk key)."""

    def __init__(self, array: Array, prefix: str, metadata: Any, store: Any, grid: Tuple[int, ...],
                 nparts: int) -> None:
        self.array = array
        self.store = store
        self.prefix = prefix  # the array's path in the store, with a trailing "/" ("" at the root)
        self.metadata = metadata
        self.grid = grid  # zarr's chunk shape (the shard shape of a sharded array)
        self.nparts = nparts  # "/"-separated parts of a chunk key
        self.dtype = array.dtype
        self.ndim = len(grid)
        self.local_root: Optional[str] = None  # the store's directory, for a local store
        self._coords: Dict[str, Tuple[int, ...]] = {}

    def coords(self, path: str) -> Tuple[int, ...]:
        """A chunk key (the store path of a chunk) -> its grid coordinates; ValueError when
        it is not one of this array's keys. Keys seen before come from a bounded cache."""
        found = self._coords.get(path)
        if found is not None:
            return found
        coords = self._parse(path)
        if len(self._coords) >= 65536:
            self._coords.clear()
        self._coords[path] = coords
        return coords

    def _parse(self, path: str) -> Tuple[int, ...]:
        if not path.startswith(self.prefix):
            raise ValueError(path)
        key = path[len(self.prefix):]
        text = key[2:] if key.startswith("c") and self.metadata.zarr_format == 3 and key != "c" else key
        if key == "c":
            text = ""
        parts = [p for p in text.replace("/", ".").split(".") if p != ""]
        coords = tuple(int(p) for p in parts)
        if len(coords) != self.ndim or self.metadata.encode_chunk_key(coords) != key:
            raise ValueError(path)
        return coords


class _Fallback(Exception):
    """lsio cannot serve this read; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class LsioCodecPipeline(CodecPipeline):
    """zarr-python's codec pipeline with reads served by lsio (see :mod:`lsio.zarr`).

    Every method but :meth:`read` is zarr's :class:`BatchedCodecPipeline`'s. ``fallback_reason``
    is None while lsio serves this array's reads, else why it does not.
    """

    def __init__(self, inner: BatchedCodecPipeline, metadata: Any = None, store: Any = None,
                 reason: Optional[str] = None) -> None:
        self._inner = inner
        self._metadata = metadata
        self._store = store
        self._reason = reason
        self._lock = ProcessLock()  # a forked child gets a fresh one (never one held at the fork)
        self._source: Optional[_Source] = None
        self._counted = False
        # A pipeline zarr made for a whole array (False: a sharding codec's inner pipeline,
        # always zarr's, neither counted nor subject to strict mode).
        self._array_level = metadata is not None
        self.last_error: Optional[BaseException] = None  # lsio's error on the last read zarr took over
        if reason is not None and self._array_level:
            self._counted = True
            _count(fallback_arrays=1)

    # -- construction ---------------------------------------------------------------------

    @classmethod
    def from_codecs(cls, codecs: Iterable[Any], **kwargs: Any) -> "LsioCodecPipeline":
        # Without the array's metadata and store (inner pipelines of sharding codecs,
        # zarr-python before 3.1): zarr's pipeline does everything.
        return cls(BatchedCodecPipeline.from_codecs(codecs, **kwargs), reason="no array metadata and store")

    @classmethod
    def from_array_metadata_and_store(cls, array_metadata: Any, store: Any) -> "LsioCodecPipeline":
        from zarr.core.array import create_codec_pipeline

        # zarr's own construction without a store (from_codecs, and in newer zarr-python
        # evolve_from_array_spec): the pipeline zarr would have used, for what lsio does not do.
        made = create_codec_pipeline(metadata=array_metadata)
        inner = made._inner if isinstance(made, LsioCodecPipeline) else made
        return cls(inner, array_metadata, store, _static_reason(array_metadata, store))

    def _give_up(self, reason: str) -> None:
        """Marks this pipeline as zarr's (counted once)."""
        self._reason = reason
        if not self._counted:
            self._counted = True
            _count(fallback_arrays=1)

    @property
    def fallback_reason(self) -> Optional[str]:
        """None while lsio serves this array's reads, else why zarr's pipeline does."""
        return self._reason

    def __getstate__(self) -> dict:
        return {"inner": self._inner, "metadata": self._metadata, "store": self._store, "reason": self._reason}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["inner"], state["metadata"], state["store"], None)  # type: ignore[misc]
        self._reason = state["reason"]
        self._counted = True  # counted where it was created

    def __eq__(self, other: object) -> bool:
        # As zarr's pipelines (dataclasses): equal when they read the same way, so a zarr
        # array equals its unpickled copy.
        if not isinstance(other, LsioCodecPipeline):
            return NotImplemented
        return (self._inner == other._inner and self._metadata == other._metadata
                and self._store == other._store and self._array_level == other._array_level)

    def __hash__(self) -> int:
        return hash((type(self), self._inner))

    def __repr__(self) -> str:
        how = "lsio" if self._reason is None else f"zarr ({self._reason})"
        return f"<LsioCodecPipeline reads by {how}>"

    # -- zarr's pipeline for everything else ----------------------------------------------

    def evolve_from_array_spec(self, array_spec: Any) -> "LsioCodecPipeline":
        new = type(self)(self._inner.evolve_from_array_spec(array_spec), self._metadata, self._store, None)
        new._reason, new._counted, new._array_level = self._reason, True, self._array_level
        return new

    @property
    def supports_partial_decode(self) -> bool:
        return self._inner.supports_partial_decode

    @property
    def supports_partial_encode(self) -> bool:
        return self._inner.supports_partial_encode

    def __iter__(self):  # the codecs, as BatchedCodecPipeline
        return iter(self._inner)

    def validate(self, *, shape: Any, dtype: Any, chunk_grid: Any) -> None:
        self._inner.validate(shape=shape, dtype=dtype, chunk_grid=chunk_grid)

    def compute_encoded_size(self, byte_length: int, array_spec: Any) -> int:
        return self._inner.compute_encoded_size(byte_length, array_spec)

    async def decode(self, chunk_bytes_and_specs: Any) -> Any:
        return await self._inner.decode(chunk_bytes_and_specs)

    async def encode(self, chunk_arrays_and_specs: Any) -> Any:
        return await self._inner.encode(chunk_arrays_and_specs)

    async def write(self, batch_info: Any, value: Any, drop_axes: Tuple[int, ...] = ()) -> Any:
        if self._array_level:
            _count(writes=1)
        return await self._inner.write(batch_info, value, drop_axes)

    # -- reads ----------------------------------------------------------------------------

    async def read(self, batch_info: Any, out: Any, drop_axes: Tuple[int, ...] = ()) -> Any:
        if not self._array_level:
            return await self._inner.read(batch_info, out, drop_axes)
        batch = list(batch_info)
        if self._reason is not None and _strict():
            raise UnsupportedError(f"lsio cannot read this zarr array ({self._reason}); "
                                   "codec_pipeline.strict is set, so zarr's own pipeline is not used")
        if self._reason is None and batch:
            try:
                source = self._get_source(batch[0][0])
                dst = out.as_ndarray_like()
                if type(dst) is not np.ndarray:
                    raise _Fallback(f"output buffer is {type(dst).__module__}.{type(dst).__name__}, not numpy")
                plan = _plan(source, batch, dst, drop_axes)
                loop = asyncio.get_running_loop()
                if dst.nbytes <= _INLINE_BYTES:
                    # Small reads run on the event loop's thread: handing them to a worker
                    # thread costs more than the read (64x64 float32 crops: 1.3x slower).
                    results = _execute(source, plan, batch)
                else:  # larger ones leave the loop free for other reads meanwhile
                    results = await loop.run_in_executor(None, _execute, source, plan, batch)
                _count(reads=1, chunks=len(batch))
                return results
            except _Fallback as e:
                if _strict():
                    raise UnsupportedError(f"lsio cannot read this zarr array ({e.reason}); "
                                           "codec_pipeline.strict is set, so zarr's own pipeline is not used") from None
            except Exception as e:  # noqa: BLE001 - zarr's pipeline is the answer to any failure
                # lsio refused or failed (an lsio.Error, MemoryError under memory_limit, ...)
                # where zarr may not: zarr reads this batch again, whole, and raises its own
                # error if the data is bad. Strict mode raises lsio's.
                if _strict():
                    raise
                self.last_error = e
        _count(fallback_reads=1)
        return await self._inner.read(batch, out, drop_axes)

    def _get_source(self, byte_getter: Any) -> _Source:
        source = self._source
        if source is not None:
            return source
        with self._lock:
            if self._source is None:
                try:
                    self._source = _open_source(self._metadata, self._store, byte_getter)
                except _Fallback as e:
                    self._give_up(e.reason)
                    raise
            return self._source


register_pipeline(LsioCodecPipeline)


def _store_root(store: Any) -> Tuple[Optional[str], Optional[dict], Optional[str]]:
    """(root path or URL, storage_options for URLs, None) for a store lsio reads, else
    (None, None, why not)."""
    from zarr.storage import LocalStore

    if isinstance(store, LocalStore):
        # The directory the OS opens for zarr: "~" is a name, not $HOME, and "link/.." the
        # parent of the link's target (os.path.abspath would drop "link/.." as text).
        return os.path.realpath(str(store.root)), None, None
    try:
        from zarr.storage import FsspecStore
    except ImportError:  # pragma: no cover - zarr without fsspec support
        FsspecStore = None  # type: ignore[assignment,misc]
    if FsspecStore is not None and isinstance(store, FsspecStore):
        protocol = store.fs.protocol
        protocols = (protocol,) if isinstance(protocol, str) else tuple(protocol)
        if set(protocols) & {"http", "https"}:
            if _GetResult is not None:
                return None, None, "FsspecStore on zarr-python >= 3.2 (per-chunk presence is reported for local stores only)"
            root = str(store.path)
            if not root.startswith(("http://", "https://")):
                return None, None, f"FsspecStore path {root!r} is not a URL"
            # The file system's own options (headers, ...) go to lsio's HTTP store; an option
            # lsio does not take makes the open fail, and zarr reads.
            return root.rstrip("/"), dict(getattr(store.fs, "storage_options", {}) or {}), None
        if set(protocols) & {"s3", "s3a"}:
            if _GetResult is not None:
                return None, None, "FsspecStore on zarr-python >= 3.2 (per-chunk presence is reported for local stores only)"
            # s3fs: the path is "bucket/prefix"; its storage_options (key, secret, token,
            # anon, endpoint_url, client_kwargs, ...) are spelled as lsio takes them.
            return ("s3://" + str(store.path).strip("/"), dict(getattr(store.fs, "storage_options", {}) or {}),
                    None)
        if set(protocols) & {"gs", "gcs"}:
            if _GetResult is not None:
                return None, None, "FsspecStore on zarr-python >= 3.2 (per-chunk presence is reported for local stores only)"
            return _gcsfs_root(store)
        return None, None, (f"FsspecStore over {'/'.join(protocols)} (lsio reads fsspec's HTTP(S), S3 and GCS "
                            "file systems)")
    try:
        from zarr.storage import ObjectStore
    except ImportError:  # pragma: no cover - zarr without obstore support
        ObjectStore = None  # type: ignore[assignment,misc]
    if ObjectStore is not None and isinstance(store, ObjectStore):
        return _obstore_root(store.store)
    return None, None, (f"store {type(store).__name__} (lsio reads zarr's LocalStore, FsspecStore over HTTP(S) "
                        "and S3 and ObjectStore over obstore's LocalStore, HTTPStore and S3Store)")


# gcsfs options that do not change which bytes are read or who reads them (caching, timeouts,
# the event loop); any other option (endpoint_url, requester_pays, version_aware, ...) makes
# zarr's pipeline read that array.
_GCSFS_NEUTRAL = {"project", "access", "consistency", "cache_timeout", "secure_serialize", "check_connection",
                  "requests_timeout", "timeout", "asynchronous", "loop", "skip_instance_cache", "use_listings_cache",
                  "listings_expiry_time", "max_paths", "block_size"}


def _gcsfs_root(store: Any) -> Tuple[Optional[str], Optional[dict], Optional[str]]:
    """gcsfs under zarr's FsspecStore: ("gs://bucket/prefix", storage_options, None) when lsio
    authenticates as gcsfs does, else why not. gcsfs resolves its credentials when it is
    made (``fs.credentials.method``): anonymous stays anonymous, Application Default
    Credentials (incl. the GCE metadata server) become lsio's ``GoogleAuthCredentials``; a
    token, cached or browser login, or service-account dict lsio cannot take over leaves the
    array to zarr's pipeline, so enabling lsio never reads with other credentials."""
    fs = store.fs
    opts = dict(getattr(fs, "storage_options", {}) or {})
    opts.pop("token", None)
    other = sorted(k for k in opts if k not in _GCSFS_NEUTRAL)
    if other:
        return None, None, f"gcsfs with options {other}"
    path = str(store.path).strip("/")
    if not path:
        return None, None, "gcsfs store without a bucket"
    method = getattr(getattr(fs, "credentials", None), "method", None)
    if method == "anon":
        return "gs://" + path, {"token": "anon"}, None
    if method in ("google_default", "cloud"):
        from ._storage.credentials import GoogleAuthCredentials

        return "gs://" + path, {"credentials": GoogleAuthCredentials()}, None
    return None, None, f"gcsfs credentials of kind {method!r} (lsio takes anonymous access and Application Default Credentials)"


# obstore S3Store config keys -> lsio storage_options keys (values as strings)
_OBSTORE_S3 = {"endpoint": "endpoint_url", "region": "region", "access_key_id": "access_key_id",
               "secret_access_key": "secret_access_key", "session_token": "session_token",
               "token": "session_token"}


def _obstore_root(obs: Any) -> Tuple[Optional[str], Optional[dict], Optional[str]]:
    """zarr's ObjectStore: the obstore store inside as (root, storage_options, None), or why
    lsio does not read it. Only configurations whose every setting lsio carries over."""
    kind = type(obs).__name__
    if kind == "LocalStore":
        prefix = getattr(obs, "prefix", None)
        return (None, None, "obstore LocalStore without a prefix") if prefix is None else (str(prefix), None, None)
    if _GetResult is not None:
        return None, None, f"obstore {kind} on zarr-python >= 3.2 (per-chunk presence is reported for local stores only)"
    if getattr(obs, "credential_provider", None) is not None:
        return None, None, f"obstore {kind} with a credential provider"
    client = dict(getattr(obs, "client_options", None) or {})
    allow_http = str(client.pop("allow_http", "false")).lower() == "true"
    if client:
        return None, None, f"obstore {kind} with client options {sorted(client)}"
    if kind == "HTTPStore":
        url = str(obs.url).rstrip("/")
        if url.startswith("http://") and not allow_http:
            return None, None, "obstore HTTPStore over http:// without allow_http"
        return url, {}, None
    if kind == "S3Store":
        config = {k: str(v) for k, v in dict(obs.config or {}).items()}
        bucket = config.pop("bucket", None)
        if not bucket:
            return None, None, "obstore S3Store without a bucket"
        options: dict = {}
        if config.pop("skip_signature", "false").lower() == "true":
            options["anonymous"] = True
        if config.pop("virtual_hosted_style_request", "false").lower() == "true":
            options["addressing_style"] = "virtual"
        for key in list(config):
            if key in _OBSTORE_S3:
                options[_OBSTORE_S3[key]] = config.pop(key)
        if config:
            return None, None, f"obstore S3Store with settings lsio does not carry over: {sorted(config)}"
        if options.get("endpoint_url", "").startswith("http://") and not allow_http:
            return None, None, "obstore S3Store over http:// without allow_http"
        prefix = str(getattr(obs, "prefix", None) or "").strip("/")
        return f"s3://{bucket}" + (f"/{prefix}" if prefix else ""), options, None
    return None, None, f"obstore {kind}"


def _static_reason(metadata: Any, store: Any) -> Optional[str]:
    """Why lsio cannot read an array, decided from its metadata and store alone (None: try)."""
    root, _options, why = _store_root(store)
    if root is None:
        return why
    if len(metadata.shape) == 0:
        return "0-d array"
    try:
        metadata.shards or metadata.chunks  # noqa: B018 - raises for chunk grids that are not regular
    except NotImplementedError:
        return "chunk grid is not regular"
    return None


def _open_source(metadata: Any, store: Any, byte_getter: Any) -> _Source:
    if getattr(byte_getter, "store", None) is not store:
        raise _Fallback("chunk read through another store")
    ndim = len(metadata.shape)
    grid = tuple(int(c) for c in (metadata.shards or metadata.chunks))
    nparts = metadata.encode_chunk_key((0,) * ndim).count("/") + 1
    path = str(byte_getter.path)
    parts = path.split("/")
    if len(parts) < nparts:
        raise _Fallback(f"chunk key {path!r} does not match the array's key encoding")
    prefix = "/".join(parts[: len(parts) - nparts])
    root, storage_options, why = _store_root(store)
    if root is None:
        raise _Fallback(str(why))
    options = dict(_config("codec_pipeline.lsio_options", {}) or {})
    if storage_options is None:
        location = os.path.join(root, *prefix.split("/")) if prefix else root
    else:
        location = root + "/" + prefix if prefix else root
        options["storage_options"] = {**storage_options, **dict(options.get("storage_options") or {})}
    try:
        arr = _open.open(location, **options)
    except (Error, OSError, ValueError, NotImplementedError) as e:
        raise _Fallback(f"lsio cannot open it: {type(e).__name__}: {e}") from None
    if not isinstance(arr, Array):
        raise _Fallback(f"lsio opens it as {type(arr).__name__}, not an Array")
    source = _Source(arr, prefix + "/" if prefix else "", metadata, store, grid, nparts)
    source.local_root = root if storage_options is None else None
    _check_same(arr, metadata, grid)
    try:
        source.coords(path)
    except ValueError:
        raise _Fallback(f"chunk key {path!r} does not match the array's key encoding") from None
    return source


def _check_same(arr: Array, metadata: Any, grid: Tuple[int, ...]) -> None:
    """Refuses (_Fallback) an lsio array that is not the array zarr holds the metadata of
    (rewritten since, or read differently)."""
    if tuple(arr.shape) != tuple(metadata.shape):
        raise _Fallback(f"lsio sees shape {arr.shape}, zarr {tuple(metadata.shape)}")
    lsio_grid = arr.shards or arr.chunks
    if tuple(lsio_grid) != grid:
        raise _Fallback(f"lsio sees chunks {lsio_grid}, zarr {grid}")
    zdt = metadata.dtype.to_native_dtype()
    if zdt.newbyteorder("=") != arr.dtype.newbyteorder("=") or zdt.kind != arr.dtype.kind:
        raise _Fallback(f"lsio reads dtype {arr.dtype}, zarr {zdt}")
    if zdt.fields is not None and zdt != arr.dtype:
        # Records are copied as stored, never swapped: each field's byte order must be zarr's
        # (zarr-python keeps a big-endian field's order in the session that wrote it).
        raise _Fallback(f"lsio reads record dtype {arr.dtype}, zarr {zdt}")
    fill = metadata.fill_value
    if fill is None:  # a null v2 fill value: zarr fills with its data type's default scalar
        fill = metadata.dtype.default_scalar() if hasattr(metadata.dtype, "default_scalar") else np.zeros((), zdt)[()]
    try:
        want = np.asarray(fill, dtype=zdt).astype(arr.dtype).tobytes()
    except (TypeError, ValueError):
        raise _Fallback(f"fill value {fill!r}") from None
    if want != np.asarray(arr.fill_value, dtype=arr.dtype).tobytes():
        raise _Fallback(f"lsio sees fill value {arr.fill_value!r}, zarr {fill!r}")
    # The element order inside chunks: the same bytes read as other values where it changed
    # (v2 "order"; v3 a transpose codec), so the files must say what zarr's metadata says.
    meta = arr._meta()
    if int(meta.get("zarr_format", 3)) != int(metadata.zarr_format):
        raise _Fallback(f"lsio sees a Zarr v{meta.get('zarr_format')} array, zarr v{metadata.zarr_format}")
    lsio_transposes = str(meta.get("codecs", "")).count("transpose")

    def transposes(codecs: Any) -> int:  # inner codecs of sharding too (not its index's)
        return sum(1 if type(c).__name__ == "TransposeCodec" else transposes(getattr(c, "codecs", ()))
                   for c in codecs)

    if metadata.zarr_format == 2:
        zarr_transposes = int(getattr(metadata, "order", "C") == "F" and len(metadata.shape) > 1)
    else:
        zarr_transposes = transposes(getattr(metadata, "codecs", ()))
    if lsio_transposes != zarr_transposes:
        raise _Fallback("the chunks' element order in the files is not the one in zarr's metadata")


# -- planning a batch ---------------------------------------------------------------------


def _as_dim(sel: Any) -> Any:
    """One dimension's selection: an int, a (start, count, step) tuple, or a 1-d int64 array."""
    if isinstance(sel, slice):
        start, stop, step = sel.start or 0, sel.stop, sel.step or 1
        return (int(start), max(0, len(range(start, stop, step))), int(step))
    if isinstance(sel, np.ndarray):
        if sel.dtype == bool:
            return np.flatnonzero(sel.reshape(-1))
        return sel.reshape(-1).astype(np.int64, copy=False)
    return int(sel)


def _dims(sel: Any, ndim: int) -> List[Any]:
    """A per-chunk selection (tuple of ints/slices/arrays, or np.ix_ open-mesh arrays) as
    one entry per dimension."""
    if not isinstance(sel, tuple):
        sel = (sel,)
    if len(sel) != ndim:
        raise _Fallback(f"selection of {len(sel)} entries for {ndim} dimensions")
    return [_as_dim(s) for s in sel]


def _vector(d: Any) -> np.ndarray:
    if isinstance(d, tuple):
        start, count, step = d
        return start + step * np.arange(count, dtype=np.int64)
    if isinstance(d, np.ndarray):
        return d
    return np.array([d], dtype=np.int64)


def _runs(src: Any, dst: Any, origin: int) -> Any:
    """(start, count, step, dst_offset) rows reading array indices origin + src into
    output indices dst (dst None: a dropped axis, output index 0): one Python row for an
    int or a slice (the common case, kept out of numpy), else an int64 array of rows."""
    if isinstance(src, int):
        return [origin + src, 1, 1, 0]
    if isinstance(src, tuple) and (dst is None or isinstance(dst, tuple)) and (dst is None or dst[2] == 1):
        start, count, step = src
        if dst is not None and dst[1] != count:
            raise _Fallback("chunk and output selections differ in length")
        return [origin + start, count, step if count > 1 else 1, 0 if dst is None else dst[0]]
    s = _vector(src)
    t = np.arange(s.size, dtype=np.int64) if dst is None else _vector(dst)
    if s.size != t.size:
        raise _Fallback("chunk and output selections differ in length")
    if s.size == 0:
        return np.zeros((0, 4), dtype=np.int64)
    breaks = np.flatnonzero((np.diff(s) != 1) | (np.diff(t) != 1)) + 1
    first = np.concatenate(([0], breaks))
    counts = np.diff(np.concatenate((first, [s.size])))
    return np.stack([origin + s[first], counts, np.ones_like(counts), t[first]], axis=1).astype(np.int64)


class _Outer:
    """One orthogonal read: per-dimension runs over the whole batch, into ``view``."""

    def __init__(self, runs: List[np.ndarray], view: np.ndarray, target: Optional[np.ndarray]) -> None:
        self.runs = runs
        self.view = view  # what the engine fills (zarr's output, or a native-dtype temporary)
        self.target = target  # zarr's output to copy `view` into, when it is a temporary


class _Points:
    """One coordinate read: N points (N, ndim) into out[dst]."""

    def __init__(self, starts: np.ndarray, dst: Any, out: np.ndarray) -> None:
        self.starts = starts
        self.dst = dst
        self.out = out


def _direct(dst: np.ndarray, dtype: np.dtype) -> bool:
    return dst.dtype == dtype and dst.flags.writeable and dst.flags.aligned and all(s >= 0 for s in dst.strides)


def _plan(source: _Source, batch: list, out: np.ndarray, drop_axes: Tuple[int, ...]) -> Any:
    ndim = source.ndim
    grid = source.grid
    items = []
    for byte_getter, _spec, chunk_sel, out_sel, *_rest in batch:
        if byte_getter.store is not source.store:
            raise _Fallback("chunk read through another store")
        try:
            coords = source.coords(str(byte_getter.path))
        except ValueError:
            raise _Fallback(f"chunk key {byte_getter.path!r} is not one of the array's") from None
        items.append((coords, chunk_sel, out_sel))
    if not isinstance(items[0][2], tuple):
        return _plan_points(source, items, out)
    # Orthogonal (basic, integer-array, Boolean-array and block selections): per dimension,
    # each chunk coordinate maps one piece of the chunk to one piece of the output.
    per_dim: List[Dict[int, Tuple[Any, Any]]] = [dict() for _ in range(ndim)]
    for coords, chunk_sel, out_sel in items:
        cdims = _dims(chunk_sel, ndim)
        if drop_axes:
            dropped = set(drop_axes)
        else:
            dropped = {d for d in range(ndim) if isinstance(cdims[d], int)}
        kept = [d for d in range(ndim) if d not in dropped]
        odims = _dims(out_sel, len(kept)) if kept or out_sel != () else []
        omap: Dict[int, Any] = dict(zip(kept, odims))
        for d in range(ndim):
            entry = (cdims[d], omap.get(d))
            seen = per_dim[d].get(coords[d])
            if seen is None:
                per_dim[d][coords[d]] = entry
            elif not _same_entry(seen, entry):
                raise _Fallback("batch is not an orthogonal selection")
    total = 1
    for m in per_dim:
        total *= len(m)
    if total != len(items):
        raise _Fallback("batch does not cover an orthogonal selection")
    runs = []
    for d in range(ndim):
        rows = [_runs(src, dst, c * grid[d]) for c, (src, dst) in sorted(per_dim[d].items())]
        if all(isinstance(r, list) for r in rows):
            runs.append(np.array(rows, dtype=np.int64).reshape(-1, 4))
        else:
            runs.append(np.concatenate([np.array([r], dtype=np.int64) if isinstance(r, list) else r for r in rows]))
    dropped_axes = sorted({d for d in range(ndim) if per_dim[d] and next(iter(per_dim[d].values()))[1] is None})
    view = np.expand_dims(out, tuple(dropped_axes)) if dropped_axes else out
    if view.ndim != ndim:
        raise _Fallback("output rank does not match the selection")
    extent = [int((r[:, 3] + r[:, 1]).max()) if r.size else 0 for r in runs]
    if tuple(extent) != view.shape:
        raise _Fallback("batch does not fill the output buffer")
    if _direct(view, source.dtype):
        return _Outer(runs, view, None)
    return _Outer(runs, np.empty(view.shape, dtype=source.dtype), view)


def _same_entry(a: Tuple[Any, Any], b: Tuple[Any, Any]) -> bool:
    for x, y in zip(a, b):
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            if not (isinstance(x, np.ndarray) and isinstance(y, np.ndarray) and np.array_equal(x, y)):
                return False
        elif x != y:
            return False
    return True


def _plan_points(source: _Source, items: list, out: np.ndarray) -> _Points:
    ndim = source.ndim
    grid = source.grid
    starts, dsts = [], []
    for coords, chunk_sel, out_sel in items:
        cdims = _dims(chunk_sel, ndim)
        if not all(isinstance(c, np.ndarray) for c in cdims):
            raise _Fallback("coordinate selection without index arrays")
        n = cdims[0].size
        if any(c.size != n for c in cdims):
            raise _Fallback("coordinate arrays differ in length")
        starts.append(np.stack([c + coords[d] * grid[d] for d, c in enumerate(cdims)], axis=1))
        dst = _as_dim(out_sel)
        dst = _vector(dst)
        if dst.size != n:
            raise _Fallback("chunk and output selections differ in length")
        dsts.append(dst)
    st = np.ascontiguousarray(np.concatenate(starts), dtype=np.int64)
    dst = np.concatenate(dsts)
    if out.ndim != 1:
        raise _Fallback("coordinate selection into a multi-dimensional output")
    return _Points(st, dst, out)


def _execute(source: _Source, plan: Any, batch: list) -> Any:
    """Runs on a worker thread: the engine call (GIL released inside), then the copy into
    zarr's buffer where it could not be filled directly."""
    native = source.array._native()
    if isinstance(plan, _Outer):
        native.read_outer_into(plan.runs, plan.view, None)
        if plan.target is not None:
            plan.target[...] = plan.view
    else:
        n = plan.starts.shape[0]
        ones = [1] * source.ndim
        out = plan.out
        if (n == out.shape[0] and _direct(out, source.dtype)
                and np.array_equal(plan.dst, np.arange(n))):
            native.read_crops_into(plan.starts, ones, out.reshape((n,) + (1,) * source.ndim), None)
        else:
            tmp = np.empty((n,) + (1,) * source.ndim, dtype=source.dtype)
            native.read_crops_into(plan.starts, ones, tmp, None)
            out[plan.dst] = tmp.reshape(n)
    if _GetResult is None:
        return None
    return tuple(_chunk_status(source, item[0]) for item in batch)


def _chunk_status(source: _Source, byte_getter: Any) -> Any:
    """zarr >= 3.2's GetResult for one chunk: whether its key exists in the (local) store."""
    path = os.path.join(str(source.local_root), *str(byte_getter.path).split("/"))
    return _GetResult(status="present" if os.path.exists(path) else "missing")

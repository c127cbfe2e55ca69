"""Tunables of :func:`lsio.open`: defaults, environment variables and storage-kind defaults.

Every tunable resolves the same way, first match wins:

1. the argument given to ``lsio.open`` (or ``Array(...)``),
2. its environment variable (read when the array is opened),
3. the default for the kind of storage the array lives on (coalescing only), else
4. the built-in default.

| option            | environment          | default                                           |
|-------------------|----------------------|---------------------------------------------------|
| threads           | LSIO_THREADS         | CPUs available to the process (also 0)            |
| io                | LSIO_IO              | "auto" (io_uring + inline page-cache hits)        |
| queue_depth       | LSIO_QUEUE_DEPTH     | 64 reads in flight per thread                     |
| max_gap           | LSIO_MERGE_GAP       | 16 KiB local disk / memory, 1 MiB network or HDD |
| max_request       | LSIO_MAX_READ        | 1 MiB local disk / memory, 16 MiB network or HDD |
| memory_limit      | LSIO_MEMORY_LIMIT    | none                                              |
| direct            | LSIO_DIRECT          | "auto" (also 0/1, false/true); the page cache     |
|                   |                      | room "auto" compares with: LSIO_PAGE_CACHE_BYTES  |
| chunk_cache_bytes | LSIO_CACHE_BYTES     | 0 (no decoded-chunk cache; local arrays only)     |
| index_cache_bytes | -                    | 64 MiB                                            |

``chunk_cache_bytes`` was called ``cache_bytes``, which also named the disk cache's bound in
``storage_options`` (now ``disk_cache_bytes``): the old name still works, with a
``DeprecationWarning``; giving both names is a ``ValueError``.

Sizes in environment variables take an optional binary suffix: ``64K``, ``4MiB``, ``1G``.

Why these coalescing defaults: merging two reads pays off while reading the gap costs less
than one more request, which with many reads in flight is about bandwidth / IOPS. On the dev
VM's virtio disk a sweep of W1-like random crop batches (2 threads, benchmarks/) put cold
reads at 561 crops/s with 16 KiB / 1 MiB against 541 (0 / 1 MiB), 512 (64 KiB / 1 MiB),
477 (64 KiB / 4 MiB) and 422 (256 KiB / 2 MiB); page-cache-hot reads did not care
(1037-1109, within noise). Smaller reads also keep each thread's buffer small. Network
file systems and spinning disks have 10-100x fewer IOPS at similar bandwidth, so their
break-even gap is ~1 MiB (reasoned from that ratio, not measured here). ``tune=True``
(see ``_tune.py``) measures bandwidth / IOPS instead of assuming it.
"""

from __future__ import annotations

import operator
import os
import re
from typing import Any, Dict, Optional, Tuple

from ._storage.validate import renamed

ENV = {
    "threads": "LSIO_THREADS",
    "io": "LSIO_IO",
    "queue_depth": "LSIO_QUEUE_DEPTH",
    "max_gap": "LSIO_MERGE_GAP",
    "max_request": "LSIO_MAX_READ",
    "memory_limit": "LSIO_MEMORY_LIMIT",
    "direct": "LSIO_DIRECT",
    "chunk_cache_bytes": "LSIO_CACHE_BYTES",
    # lsio.safetensors: load_jax's read groups, chunk_plan's chunk size.
    "jax_group_bytes": "LSIO_JAX_GROUP_BYTES",
    "chunk_bytes": "LSIO_SAFETENSORS_CHUNK_BYTES",
}

IO_MODES = ("auto", "uring", "pread")

# (max_gap, max_request) per storage kind.
COALESCING = {
    "local": (16 << 10, 1 << 20),
    "memory": (16 << 10, 1 << 20),
    "rotational": (1 << 20, 16 << 20),
    "network": (1 << 20, 16 << 20),
}

_NETWORK_FS = {
    "nfs", "nfs4", "cifs", "smb3", "smbfs", "lustre", "ceph", "gpfs", "beegfs", "glusterfs",
    "9p", "afs", "ocfs2", "gfs2", "orangefs", "pvfs2", "wekafs", "panfs", "davfs",
}
_MEMORY_FS = {"tmpfs", "ramfs", "hugetlbfs", "devtmpfs"}

_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?)(i?b)?\s*$", re.IGNORECASE)


def parse_size(text: str, what: str) -> int:
    """``"4M"`` -> 4194304. Plain integers are bytes; suffixes are binary (K = 1024)."""
    m = _SIZE.match(text)
    if not m:
        raise ValueError(f"{what} must be a number of bytes with an optional K/M/G/T suffix, got {text!r}")
    return int(m.group(1)) << (10 * " kmgt".index(m.group(2).lower() or " "))


def _env(name: str) -> Optional[str]:
    value = os.environ.get(ENV[name], "").strip()
    return value or None


def _default(value: Any, default: Any) -> Any:
    return default if value is None else value


def _count(value: Any, name: str, lo: int, hi: Optional[int] = None) -> int:
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    value = operator.index(value)
    if value < lo or (hi is not None and value > hi):
        bounds = f">= {lo}" if hi is None else f"in {lo}..{hi}"
        raise ValueError(f"{name} must be {bounds}, got {value}")
    return int(value)


def threads_option(threads: Optional[int]) -> int:
    """0 means: the CPUs available to the process (decided by the engine). ``None`` reads
    ``LSIO_THREADS``, else 0; ``0`` is accepted as an argument and in ``LSIO_THREADS`` too,
    since ``Array.options["threads"]`` reports it (and passing back what ``options`` shows
    must work)."""
    if threads is None:
        env = _env("threads")
        if env is None:
            return 0
        try:
            threads = int(env)
        except ValueError:
            raise ValueError(f"LSIO_THREADS must be an integer >= 0 (0: all available CPUs), got {env!r}") from None
        if threads < 0:
            raise ValueError(f"LSIO_THREADS must be an integer >= 0 (0: all available CPUs), got {env!r}")
    if isinstance(threads, bool) or not hasattr(threads, "__index__"):
        raise TypeError(f"threads must be an integer or None, got {type(threads).__name__}")
    threads = operator.index(threads)
    if threads < 0:
        raise ValueError(f"threads must be >= 0 (0 or None: all available CPUs), got {threads}")
    return int(threads)


def io_option(io: Optional[str]) -> str:
    if io is None:
        io = _env("io") or "auto"
    if io not in IO_MODES:
        raise ValueError(f"io must be one of {IO_MODES}, got {io!r}")
    return io


def size_option(value: Optional[int], name: str, default: int, lo: int = 0) -> int:
    if value is None:
        env = _env(name)
        if env is None:
            return default
        value = parse_size(env, ENV[name])
        if value < lo:
            raise ValueError(f"{ENV[name]} must be >= {lo}, got {env!r}")
        return value
    return _count(value, name, lo)


def queue_depth_option(value: Optional[int]) -> int:
    if value is None:
        env = _env("queue_depth")
        if env is None:
            return 64
        try:
            value = int(env)
        except ValueError:
            raise ValueError(f"LSIO_QUEUE_DEPTH must be an integer in 1..4096, got {env!r}") from None
        if not 1 <= value <= 4096:
            raise ValueError(f"LSIO_QUEUE_DEPTH must be an integer in 1..4096, got {env!r}")
        return value
    return _count(value, "queue_depth", 1, 4096)


def memory_limit_option(limit: Optional[int]) -> int:
    """0 means no limit."""
    if limit is None:
        env = _env("memory_limit")
        if env is None:
            return 0
        try:
            limit = parse_size(env, "LSIO_MEMORY_LIMIT")
        except ValueError:
            raise ValueError(f"LSIO_MEMORY_LIMIT must be a number of bytes, got {env!r}") from None
        if limit <= 0:
            raise ValueError(f"LSIO_MEMORY_LIMIT must be a positive number of bytes, got {env!r}")
        return limit
    limit = operator.index(limit)
    if limit <= 0:
        raise ValueError(f"memory_limit must be a positive number of bytes (or None), got {limit}")
    return int(limit)


def direct_option(direct: "Optional[bool | str]") -> "bool | str":
    """True, False or "auto" (the default): see :func:`lsio.open`'s ``direct``."""
    if direct is None:
        env = _env("direct")
        if env is None:
            return "auto"
        low = env.lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        if low == "auto":
            return "auto"
        raise ValueError(f"LSIO_DIRECT must be auto, 0/1 (or true/false), got {env!r}")
    if isinstance(direct, str):
        if direct != "auto":
            raise ValueError(f"direct must be True, False or 'auto', got {direct!r}")
        return direct
    if not isinstance(direct, bool):
        raise TypeError(f"direct must be True, False, 'auto' or None, got {type(direct).__name__}")
    return direct


def _mount_fstype(path: str) -> Optional[str]:
    """The file system type of the mount holding ``path`` (longest mount point prefix)."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            lines = f.readlines()
    except OSError:
        return None
    best, best_len = None, -1
    real = os.path.realpath(path)
    for line in lines:
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields = left.split()
        if len(fields) < 5:
            continue
        mount = fields[4].replace("\\040", " ")
        inside = real == mount or real.startswith(mount.rstrip("/") + "/") or mount == "/"
        if inside and len(mount) > best_len:
            best, best_len = right.split()[0], len(mount)
    return best


def _rotational(path: str) -> Optional[bool]:
    """The block device's rotational flag; None when unknown or not trustworthy."""
    try:
        dev = os.stat(path).st_dev
    except OSError:
        return None
    base = f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}"
    # Virtual disks (virtio, Xen) report whatever the hypervisor chose, usually
    # "rotational" even when backed by SSDs: their flag says nothing, so it is ignored.
    real = os.path.realpath(base)
    if "/virtio" in real or os.path.basename(real).startswith(("vd", "xvd")):
        return None
    for queue in (f"{base}/queue/rotational", f"{base}/../queue/rotational"):
        try:
            with open(queue, encoding="ascii") as f:
                return f.read().strip() == "1"
        except OSError:
            continue
    return None


def storage_kind(path: str) -> Tuple[str, str]:
    """("local" | "memory" | "rotational" | "network", file system type or "?")."""
    fstype = _mount_fstype(path) or "?"
    base = fstype.split(".")[0]
    if base in _NETWORK_FS or fstype.startswith("fuse"):
        return "network", fstype
    if base in _MEMORY_FS:
        return "memory", fstype
    if _rotational(path):
        return "rotational", fstype
    return "local", fstype


def _chunk_cache_bytes(options: Dict[str, Any]) -> Optional[int]:
    """``chunk_cache_bytes`` popped from ``options``, also under its old name ``cache_bytes``."""
    return renamed(options.pop("cache_bytes", None), options.pop("chunk_cache_bytes", None),
                   "cache_bytes", "chunk_cache_bytes", "lsio.open() argument",
                   " (the decoded-chunk cache; the disk cache's bound is storage_options "
                   "'disk_cache_bytes')")


# The engine's keyword for chunk_cache_bytes (the C++ binding keeps the old name).
ENGINE_NAMES = {"chunk_cache_bytes": "cache_bytes"}


def resolve(path: str, given: Dict[str, Any]) -> Dict[str, Any]:
    """The engine configuration for ``lsio.open(path, **given)`` (tune handled by the caller).

    ``config["explicit"]`` lists the coalescing options that came from an argument or the
    environment, which ``tune=True`` must not override.
    """
    options = dict(given)
    explicit = [k for k in ("max_gap", "max_request")
                if options.get(k) is not None or _env(k) is not None]
    kind, fstype = storage_kind(path)
    gap_default, request_default = COALESCING[kind]
    config = {
        "path": path,
        "threads": threads_option(options.pop("threads", None)),
        "io": io_option(options.pop("io", None)),
        "queue_depth": queue_depth_option(options.pop("queue_depth", None)),
        "max_gap": size_option(options.pop("max_gap", None), "max_gap", gap_default),
        "max_request": size_option(options.pop("max_request", None), "max_request", request_default, lo=1),
        "index_cache_bytes": _count(_default(options.pop("index_cache_bytes", None), 64 << 20),
                                    "index_cache_bytes", 0),
        "memory_limit": memory_limit_option(options.pop("memory_limit", None)),
        "direct": direct_option(options.pop("direct", None)),
        "chunk_cache_bytes": size_option(_chunk_cache_bytes(options), "chunk_cache_bytes", 0),
    }
    if options:
        raise TypeError(f"unexpected options: {', '.join(sorted(options))}")
    room = os.environ.get("LSIO_PAGE_CACHE_BYTES")
    if room is not None and room.strip() and config["direct"] == "auto":
        # The engine reads it at open (src/io/page_cache.cc) and would ignore a bad value.
        parse_size(room, "LSIO_PAGE_CACHE_BYTES")
    config["storage"] = {"kind": kind, "fstype": fstype}
    config["explicit"] = explicit
    return config


def resolve_remote(url: str, given: Dict[str, Any]) -> Dict[str, Any]:
    """The engine configuration for ``lsio.open(url, **given)`` on a remote store.

    Coalescing: unless ``max_gap`` or ``max_request`` is given (argument or environment),
    the store measures the bytes one first-byte latency is worth and coalesces up to that
    (``adaptive_coalescing``), within the object-store bounds 1 MiB gap / 16 MiB requests
    (what object_store/obstore and zarr-python use; S3 guidance is 8-16 MiB ranges). ``io``,
    ``queue_depth``, ``direct`` and ``chunk_cache_bytes`` concern local files: given
    explicitly they raise ValueError; from the environment they are ignored.
    """
    options = dict(given)
    options["chunk_cache_bytes"] = _chunk_cache_bytes(options)
    for local_only in ("io", "queue_depth", "direct", "chunk_cache_bytes"):
        if options.pop(local_only, None) is not None:
            hint = ("; remote bytes are cached on disk with storage_options cache_dir and "
                    "disk_cache_bytes") if local_only == "chunk_cache_bytes" else ""
            raise ValueError(f"{local_only}= applies to local files only, not to {url!r}{hint}")
    explicit = [k for k in ("max_gap", "max_request")
                if options.get(k) is not None or _env(k) is not None]
    gap_default, request_default = COALESCING["network"]
    config = {
        "path": url,
        "threads": threads_option(options.pop("threads", None)),
        "max_gap": size_option(options.pop("max_gap", None), "max_gap", gap_default),
        "max_request": size_option(options.pop("max_request", None), "max_request", request_default, lo=1),
        "index_cache_bytes": _count(_default(options.pop("index_cache_bytes", None), 64 << 20),
                                    "index_cache_bytes", 0),
        "memory_limit": memory_limit_option(options.pop("memory_limit", None)),
        "adaptive_coalescing": not explicit,
    }
    if options:
        raise TypeError(f"unexpected options: {', '.join(sorted(options))}")
    config["storage"] = {"kind": "remote", "fstype": url.split(":", 1)[0].lower()}
    config["explicit"] = explicit
    return config


# Keys of a resolved configuration that are not engine options.
NOT_ENGINE = ("storage", "explicit", "tuning", "storage_options")


"""Reader adapters: lsio and each peer behind one small interface, for suite.py.

Every reader is opened on a store with an explicit thread count and then answers three kinds
of batch (see suite.Batch):

  crops(starts, shape)    a batch of same-shape crops (W1, W2, W4); lsio: one read_crops call
                          into a preallocated out; peers: all crops issued concurrently
                          (TensorStore futures in one ts.Batch, zarr-python/zarrs
                          asyncio.gather over AsyncArray.getitem) and returned as a list
                          (never stacked: no extra copy is charged to a peer).
  singles(starts, shape)  single inner-chunk reads (W3): N Python threads each reading one
                          chunk at a time (lsio: Arrays opened with threads=1).
  full()                  the whole array (W5): lsio reads into a preallocated out.

Thread limits: lsio threads=N; TensorStore Context data_copy_concurrency and
file_io_concurrency limits = N; zarr-python threading.max_workers = N (the executor of its
event loop, which runs the zstd decodes; async.concurrency stays at its default 10, the
number of chunk requests in flight); zarrs: the same zarr config, and its codec pipeline takes
threading.max_workers as its own thread count.

Remote stores (W7): ``path`` may be an ``http://`` URL (the store served by object_server.py).
lsio then opens the URL (option ``request_concurrency`` -> storage_options), TensorStore uses
its ``http`` kvstore, zarr-python reads through ``zarr.storage.ObjectStore`` over obstore's
``HTTPStore`` (option ``store="obstore"``) or ``FsspecStore`` over fsspec's aiohttp
``HTTPFileSystem`` (``store="fsspec"``), and zarrs runs its codec pipeline over one of those
(REMOTE_READERS).

A peer that cannot be imported is listed by :func:`available_readers` as "not installed".
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib.metadata
from typing import Any

import numpy as np


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def is_url(path) -> bool:
    return str(path).startswith(("http://", "https://", "s3://", "gs://"))


def _boxes(starts: np.ndarray, shape) -> list[tuple[slice, ...]]:
    return [tuple(slice(int(s), int(s) + int(n)) for s, n in zip(row, shape)) for row in starts]


class Reader:
    """Base class: one reader opened on one store with one thread count."""

    name = "?"
    needs_reopen_for_cold = True

    def __init__(self, path: str, threads: int, **options: Any):
        self.path = str(path)
        self.threads = int(threads)
        self.options = options
        self.open()

    def open(self) -> None:  # (re)create handles; called again before each cold round
        raise NotImplementedError

    def crops(self, starts: np.ndarray, shape) -> Any:
        raise NotImplementedError

    def singles(self, starts: np.ndarray, shape) -> Any:
        boxes = _boxes(starts, shape)
        if self.threads == 1:
            return [self._one(b) for b in boxes]
        with concurrent.futures.ThreadPoolExecutor(self.threads) as pool:
            return list(pool.map(self._one, boxes))

    def _one(self, box) -> np.ndarray:
        raise NotImplementedError

    def full(self) -> np.ndarray:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def config(self) -> dict:
        return {"threads": self.threads, **self.options}


# ----------------------------------------------------------------------------- lsio


class LsioReader(Reader):
    """lsio: read_crops / read into preallocated outputs. options: io=None|"pread"|...,
    direct=None|True (O_DIRECT),
    singles_mode="threads" (N Python threads, Arrays with threads=1) or "read_crops"."""

    name = "lsio"

    def open(self) -> None:
        import lsio

        io = self.options.get("io")
        direct = self.options.get("direct")
        if is_url(self.path):
            so = {k: self.options[k] for k in ("request_concurrency",) if self.options.get(k) is not None}
            self.arr = lsio.open(self.path, threads=self.threads, storage_options=so or None)
            self.arr1 = None  # singles are not a remote workload
        else:
            self.arr = lsio.open(self.path, threads=self.threads, io=io, direct=direct)
            self.arr1 = lsio.open(self.path, threads=1, io=io, direct=direct)  # singles on N Python threads
        self._outs: dict[tuple, np.ndarray] = getattr(self, "_outs", {})

    def _out(self, shape) -> np.ndarray:
        key = tuple(shape)
        if key not in self._outs:
            out = np.empty(key, dtype=self.arr.dtype)
            out.fill(0)  # touch: page faults are not charged to the read
            self._outs[key] = out
        return self._outs[key]

    def crops(self, starts, shape):
        return self.arr.read_crops(starts, shape, out=self._out((len(starts), *shape)))

    def singles(self, starts, shape):
        if self.options.get("singles_mode") == "read_crops":
            return self.crops(starts, shape)
        out = self._out((len(starts), *shape))
        boxes = _boxes(starts, shape)
        if self.threads == 1:
            for i, b in enumerate(boxes):
                self.arr1.read(b, out=out[i])
            return out
        def work(i):
            self.arr1.read(boxes[i], out=out[i])
        with concurrent.futures.ThreadPoolExecutor(self.threads) as pool:
            list(pool.map(work, range(len(boxes))))
        return out

    def full(self):
        return self.arr.read((), out=self._out(self.arr.shape))

    def close(self) -> None:
        self._outs = {}

    def stats(self) -> dict:
        return self.arr.stats()

    def config(self) -> dict:
        opts = getattr(self.arr, "options", None)  # the engine options in effect
        return {"threads": self.threads, **self.options, "lsio_options": dict(opts) if opts else None}


# ----------------------------------------------------------------------------- TensorStore


class TensorStoreReader(Reader):
    name = "tensorstore"

    def open(self) -> None:
        import tensorstore as ts

        self.ts = ts
        ctx = ts.Context({
            "data_copy_concurrency": {"limit": self.threads},
            "file_io_concurrency": {"limit": self.threads},
        })
        kvstore = self.path.rstrip("/") + "/" if is_url(self.path) else {"driver": "file", "path": self.path}
        # driver "zarr" (Zarr v2) for W8's store; "zarr3" otherwise.
        self.t = ts.open({"driver": self.options.get("driver", "zarr3"), "kvstore": kvstore}, read=True,
                         context=ctx).result()

    def crops(self, starts, shape):
        with self.ts.Batch() as batch:
            futs = [self.t[b].read(batch=batch) for b in _boxes(starts, shape)]
        return [f.result() for f in futs]

    def _one(self, box):
        return self.t[box].read().result()

    def full(self):
        return self.t.read().result()

    def config(self) -> dict:
        c = {"threads": self.threads, "data_copy_concurrency": self.threads,
             "file_io_concurrency": self.threads, "cache_pool": "default (0 bytes)"}
        if is_url(self.path):
            c["kvstore"] = "http"
            c["http_request_concurrency"] = "default (32, shared)"
        return c


# ----------------------------------------------------------------------------- zarr-python


def set_zarr_threads(n: int) -> None:
    """zarr-python runs decodes on one process-wide executor created on first use with
    threading.max_workers; replace it when the thread count changes."""
    import zarr
    import zarr.core.sync as zsync

    zarr.config.set({"threading.max_workers": n})
    ex = zsync._executor
    if ex is not None and getattr(ex, "_max_workers", None) == n:
        return
    if ex is not None:
        ex.shutdown(wait=True)
        zsync._executor = None
    zsync._get_executor()  # new executor with max_workers=n, set as the loop's default


class ZarrPythonReader(Reader):
    name = "zarr-python"
    pipeline = None  # default BatchedCodecPipeline

    def open(self) -> None:
        import zarr

        set_zarr_threads(self.threads)
        conf = {"codec_pipeline.path": self.pipeline} if self.pipeline else {}
        if self.pipeline:
            conf["codec_pipeline.strict"] = True  # never fall back to Python silently
        with zarr.config.set(conf):
            self.z = zarr.open_array(self._store(), mode="r")
        self.pipeline_type = type(self.z.async_array.codec_pipeline).__name__

    def _store(self):
        kind = self.options.get("store")
        if not is_url(self.path):
            return self.path
        if kind == "obstore":
            import obstore.store
            import zarr.storage

            http = obstore.store.HTTPStore.from_url(self.path, client_options={"allow_http": self.path.startswith("http://")})
            return zarr.storage.ObjectStore(http, read_only=True)
        if kind == "fsspec":
            import zarr.storage

            return zarr.storage.FsspecStore.from_url(self.path, read_only=True)
        raise ValueError(f"remote zarr-python reader needs store='obstore' or 'fsspec', got {kind!r}")

    def _run(self, coro):
        from zarr.core.sync import sync

        set_zarr_threads(self.threads)
        return sync(coro)

    def crops(self, starts, shape):
        a = self.z.async_array

        async def batch():
            return await asyncio.gather(*(a.getitem(b) for b in _boxes(starts, shape)))

        return self._run(batch())

    def singles(self, starts, shape):
        set_zarr_threads(self.threads)
        return super().singles(starts, shape)

    def _one(self, box):
        return self.z[box]

    def full(self):
        set_zarr_threads(self.threads)
        return self.z[...]

    def config(self) -> dict:
        import zarr

        c = {"threads": self.threads, "threading.max_workers": self.threads,
             "async.concurrency": zarr.config.get("async.concurrency"),
             "codec_pipeline": self.pipeline_type}
        if is_url(self.path):
            c["store"] = type(self.z.store).__name__ + f" ({self.options.get('store')})"
        return c


class ZarrsReader(ZarrPythonReader):
    name = "zarrs"
    pipeline = "zarrs.ZarrsCodecPipeline"

    def open(self) -> None:
        import zarrs  # noqa: F401  (registers the pipeline)

        super().open()
        if self.pipeline_type != "ZarrsCodecPipeline":
            raise RuntimeError(f"zarrs pipeline not active (got {self.pipeline_type})")


# ----------------------------------------------------------------------------- discovery


READERS = {
    "lsio": (LsioReader, {}),
    "lsio io=pread": (LsioReader, {"io": "pread"}),
    "lsio direct": (LsioReader, {"direct": True}),
    "lsio read_crops": (LsioReader, {"singles_mode": "read_crops"}),
    "tensorstore": (TensorStoreReader, {}),
    "zarr-python": (ZarrPythonReader, {}),
    "zarrs": (ZarrsReader, {}),
}


# W7 (remote, over HTTP from object_server.py): name -> (class, options). "lsio" uses lsio's
# default request_concurrency (32); the rc= rows measure others so the default can be chosen.
# zarrs runs over FsspecStore(HTTPFileSystem), which it reads with its own HTTP client (a HEAD
# and a GET per chunk; over zarr's ObjectStore(obstore) it did the same at the same speed).
REMOTE_READERS = {
    "lsio": (LsioReader, {}),
    "lsio rc=8": (LsioReader, {"request_concurrency": 8}),
    "lsio rc=64": (LsioReader, {"request_concurrency": 64}),
    "tensorstore": (TensorStoreReader, {}),
    "zarr-python obstore": (ZarrPythonReader, {"store": "obstore"}),
    "zarr-python fsspec": (ZarrPythonReader, {"store": "fsspec"}),
    "zarrs": (ZarrsReader, {"store": "fsspec"}),
}
# Extra modules a remote reader needs (beyond its base package).
REMOTE_NEEDS = {"tensorstore": ["tensorstore"], "zarr-python obstore": ["zarr", "obstore"],
                "zarr-python fsspec": ["zarr", "fsspec", "aiohttp"], "zarrs": ["zarr", "zarrs", "fsspec", "aiohttp"]}


def remote_missing(name: str) -> list[str]:
    """Modules a remote reader needs that are not importable."""
    out = []
    for mod in REMOTE_NEEDS.get(name, []):
        try:
            __import__(mod)
        except Exception:  # noqa: BLE001
            out.append(mod)
    return out


IMPORT_ERRORS: dict[str, str] = {}


def peer_versions() -> dict[str, str | None]:
    """Installed version of lsio and each peer (None: not usable; why in IMPORT_ERRORS)."""
    out = {}
    for name, mod, dist in (("lsio", "lsio", "lsio"), ("tensorstore", "tensorstore", "tensorstore"),
                            ("zarr-python", "zarr", "zarr"), ("zarrs", "zarrs", "zarrs")):
        try:
            m = __import__(mod)
        except ImportError as e:
            out[name] = None
            IMPORT_ERRORS[name] = "not installed" if isinstance(e, ModuleNotFoundError) and e.name == mod \
                else f"import failed: {e}"
            continue
        except Exception as e:  # noqa: BLE001 - a broken peer is reported, not fatal
            out[name] = None
            IMPORT_ERRORS[name] = f"import failed: {type(e).__name__}: {e}"
            continue
        out[name] = getattr(m, "__version__", None) or _version(dist) or "?"
    if out.get("zarr-python") and not out["zarr-python"].startswith("3"):
        IMPORT_ERRORS["zarr-python"] = f"zarr {out['zarr-python']} installed, need >= 3"
        out["zarr-python"] = None
    if out.get("zarrs") and out.get("zarr-python") is None:
        IMPORT_ERRORS["zarrs"] = "needs zarr-python 3"
        out["zarrs"] = None
    return out


def unavailable_reason(name: str) -> str:
    return IMPORT_ERRORS.get(name.split()[0], "not installed")


def make_reader(name: str, path, threads: int) -> Reader:
    cls, opts = (REMOTE_READERS if is_url(path) else READERS)[name]
    r = cls(path, threads, **opts)
    r.name = name
    return r

"""GPU feed: batches of random crops into a CUDA tensor behind a small model step.

    python benchmarks/python/gpu_feed.py                        # needs CUDA; W1 store, batch 32
    python benchmarks/python/gpu_feed.py --workers 8 --threads 16 --batches 400 --json /tmp/feed.json
    python benchmarks/python/gpu_feed.py --modes lsio,lsio.torch --quick
    python benchmarks/python/gpu_feed.py --modes lsio,lsio.gpu,lsio.gpu.manual --threads 16   # GPU decode
    python benchmarks/python/gpu_feed.py --device cpu --quick --batch 8 --batches 3   # CPU smoke run

Without CUDA (and without ``--device cpu``) it prints one line saying it skipped and exits 0.

Store: W1's (float32 (32, 2048, 2048), shards (8, 512, 512), inner chunks (1, 128, 128), zstd 3;
``--quick``: the (8, 1024, 1024) one), written once by zarr-python into benchmarks/.cache. Page
cache hot (every file read once first). Crops (4, 256, 256) float32, ``--batch`` (32) per batch,
the same seeded crop origins, in the same order, for every mode.

Modes (``--modes``):
- ``lsio``: in-process, double-buffered. Two pinned host buffers
  (``torch.empty(..., pin_memory=True)``); a background Python thread runs
  ``arr.read_crops(starts, shape, out=buf.numpy())`` for batch k+1 (the read releases the GIL,
  ``threads=--threads``) while batch k is copied with ``.to(device, non_blocking=True)`` on a
  side CUDA stream and consumed by the model step on the compute stream. A buffer is refilled
  only after the CUDA event recorded behind its previous copy has completed.
- ``lsio.torch``: ``DataLoader(CropDataset(arr, origins=<the same origins>), batch_size=B,
  sampler=CropSampler(shuffle=False), collate_fn=collate, num_workers=--workers,
  persistent_workers=True, pin_memory=True, worker_init_fn=worker_init_fn)``: the adapter's
  recommended settings (one ``read_crops`` per batch in a worker, one native thread per worker,
  the batch in shared memory); its pinned batches are copied and consumed as above.
- ``lsio.gpu``: in-process, decoded on the GPU: ``lsio.torch.CropLoader(CropDataset(arr,
  origins=<the same origins>), batch_size=B, sampler=CropSampler(shuffle=False),
  device="cuda")`` iterated; it double-buffers internally (the next batch's host read overlaps
  the current step) and yields CUDA tensors that lsio decoded on the GPU (nvCOMP + a Triton
  scatter), so there is no host batch and no H2D copy of decoded crops here. Where
  ``lsio.torch`` has no ``CropLoader`` this mode runs the ``lsio.gpu.manual`` loop instead
  (its ``config`` says which).
- ``lsio.gpu.depth1``: the same with ``depth=1`` (``lsio.gpu`` uses ``--gpu-depth``, default
  3, CropLoader's default): each batch's GPU half finishes before the next one is queued, as
  before CropLoader kept several batches on the GPU.
- ``lsio.gpu.manual``: the same decode without the loader: two CUDA output tensors; a
  background thread runs ``arr.read_crops(starts, shape, out=cuda_tensor)`` for batch k+1 on a
  side CUDA stream and synchronizes that stream (so the batch is complete when handed over)
  while step k runs; a tensor is refilled only after the CUDA event recorded behind the step
  that consumed it has completed.
- ``tensorstore``, ``zarrs``: the suite's adapters (readers.py; TensorStore ``zarr3`` with
  ``ts.Batch`` futures, zarrs-python's codec pipeline under zarr-python 3; concurrency =
  ``--threads``) fed the same double-buffered way: their per-crop numpy arrays are copied into
  the pinned buffer on the background thread, then as lsio.
- ``model only``: always run first: the step on a batch already on the device, no reading. Its
  rate is what the model can consume; its wait figures show the method's floor.

Model step: ``Conv2d(4, w, 3) - ReLU - Conv2d(w, w, 3, stride 2) - ReLU - Conv2d(w, w, 3,
stride 2) - ReLU - global mean - Linear(w, 1)``, MSE against each crop's mean, backward,
SGD step (``--width`` w = 32 on CUDA, 4 on CPU; channels = the crop's 4 leading planes;
cudnn.benchmark on). ``--step-ms T`` repeats forward+backward until a model-only step takes
about T ms. On an H100 the default is a few ms per batch of 32.

Measured per mode, over ``--batches`` timed batches after ``--warmup`` untimed ones (the
pipeline stays full across the boundary; the device is synchronized before the clock starts
and before it stops):
- crops/s and GB/s delivered to the device (bytes of the batches that reached it / wall time);
- "GPU waited": CUDA events with timing are recorded on the compute stream just before each
  step (after it waits on the batch's copy event) and just after it. The gap between step k-1's
  end event and step k's start event is time the GPU had nothing to run: it was waiting for
  batch k (its read, its H2D copy, or the host issuing it). A step counts as waited when that
  gap exceeds ``--eps-ms`` (0.1 ms); the table gives the share of such steps and the mean gap
  per step. ``host wait`` is the host-side time (perf_counter) the training loop blocked
  getting the next host batch (the background read's future, or ``next()`` on the
  DataLoader): when it is ~0 the host ran ahead and any GPU gap is launch/copy latency.
- CPU seconds per GB delivered: process CPU time over the timed batches (``time.process_time()``:
  user + system of every thread of the training process: lsio's pool, the DataLoader's pin
  thread, the loop and the model step's launches; the "model only" row shows that last part
  alone), plus, for DataLoader modes, the CPU time of the worker processes over the same span
  (``psutil``, children of the process; where psutil is missing the figure is the main
  process only and the JSON says so), / GB delivered.
- ``--device cpu`` (a smoke test of this script, NOT a GPU measurement): no pinning, no
  streams, the "copy" is a ``clone()``, and since the step is synchronous, "waited" is the
  host wait > eps. ``lsio.gpu`` then passes ``device="cpu"`` to the loader, and
  ``lsio.gpu.manual`` fills its tensors from ``lsio.gpu.read_crops_reference`` (the CPU
  reference executor of the same device plan); both are skipped where ``lsio.gpu`` is not
  importable.
- check: a float64 sum of every delivered batch, on the device; every mode must agree (same
  crops). Exit status 1 if one differs.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

CACHE_DIR = HERE.parent / ".cache"
CROP = (4, 256, 256)
MODES = ("lsio", "lsio.torch", "lsio.gpu", "lsio.gpu.depth1", "lsio.gpu.manual", "tensorstore", "zarrs")
SKIP_MSG = "gpu_feed: no CUDA device (torch.cuda.is_available() is False): skipped"


def log(msg: str = "") -> None:
    print(msg, flush=True)


# ----------------------------------------------------------------------------- model


def make_model(torch, width: int, device):
    nn = torch.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(
                nn.Conv2d(CROP[0], width, 3, padding=1), nn.ReLU(),
                nn.Conv2d(width, width, 3, stride=2, padding=1), nn.ReLU(),
                nn.Conv2d(width, width, 3, stride=2, padding=1), nn.ReLU())
            self.head = nn.Linear(width, 1)

        def forward(self, x):
            return self.head(self.body(x).mean(dim=(2, 3))).squeeze(1)

    net = Net().to(device)
    opt = torch.optim.SGD(net.parameters(), lr=1e-6)
    return net, opt


class Stepper:
    """One training step on a batch already on the device; ``repeat`` forward+backward passes."""

    def __init__(self, torch, net, opt, repeat: int = 1):
        self.torch, self.net, self.opt, self.repeat = torch, net, opt, repeat

    def __call__(self, x):
        if not self.repeat:  # --no-model: the feed alone
            return
        self.opt.zero_grad(set_to_none=True)
        target = x.mean(dim=(1, 2, 3))
        for _ in range(self.repeat):
            loss = self.torch.nn.functional.mse_loss(self.net(x), target)
            loss.backward()
        self.opt.step()


# ----------------------------------------------------------------------------- feeding


class Feed:
    """Moves host batches to the device and runs the step, timing what the GPU waited."""

    def __init__(self, torch, device, step, eps_ms: float, light: bool = False):
        self.torch, self.device, self.step, self.eps_ms = torch, device, step, eps_ms
        self.light = light  # --no-model on the CPU: no copy, a sampled checksum
        self.cuda = device.type == "cuda"
        if self.cuda:
            self.copy_stream = torch.cuda.Stream(device)
            self.compute = torch.cuda.current_stream(device)
        self.events = []        # (start, end) per step (CUDA)
        self.host_waits = []    # seconds the loop blocked for each host batch
        self.check = None

    def h2d(self, hb):
        """hb (host) -> device tensor; returns (tensor, event marking hb free again or None)."""
        if not self.cuda:
            return (hb if self.light else hb.clone()), None
        with self.torch.cuda.stream(self.copy_stream):
            xd = hb.to(self.device, non_blocking=True)
            done = self.torch.cuda.Event()
            done.record(self.copy_stream)
        self.compute.wait_event(done)
        xd.record_stream(self.compute)
        return xd, done

    def run_step(self, xd):
        torch = self.torch
        if self.cuda:
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record(self.compute)
        self.step(xd)
        c = (xd[:, :, ::16, ::16] if self.light else xd).sum(dtype=torch.float64)
        self.check = c if self.check is None else self.check + c
        if self.cuda:
            e.record(self.compute)
            self.events.append((s, e))

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize(self.device)

    def gaps_ms(self, first: int) -> list[float]:
        """Device idle time before each step from index ``first`` (needs step first-1)."""
        if self.cuda:
            return [max(0.0, self.events[k - 1][1].elapsed_time(self.events[k][0]))
                    for k in range(max(first, 1), len(self.events))]
        return [w * 1e3 for w in self.host_waits[first:]]


def children_cpu_s() -> float | None:
    """CPU seconds (user + system) of this process's live descendants (DataLoader workers);
    None without psutil."""
    try:
        import psutil
    except ImportError:
        return None
    total = 0.0
    for c in psutil.Process().children(recursive=True):
        try:
            t = c.cpu_times()
            total += t.user + t.system
        except psutil.Error:  # exited meanwhile
            pass
    return total


def run_loop(feed: Feed, get_batch, total: int, warmup: int) -> tuple[float, float, float | None]:
    """``get_batch(k)`` -> host tensor (blocking); returns the timed wall seconds, the process
    CPU seconds and the child processes' CPU seconds (None without psutil) over them."""
    t_start = c_start = w_start = None
    for k in range(total):
        if k == warmup:
            feed.sync()
            t_start, c_start, w_start = time.perf_counter(), time.process_time(), children_cpu_s()
        t0 = time.perf_counter()
        hb = get_batch(k)
        feed.host_waits.append(time.perf_counter() - t0)
        xd, _ = feed.h2d(hb)
        feed.run_step(xd)
    feed.sync()
    seconds, cpu = time.perf_counter() - t_start, time.process_time() - c_start
    w_end = children_cpu_s()
    return seconds, cpu, (None if w_start is None or w_end is None else w_end - w_start)


def double_buffered(torch, feed: Feed, fill, batch: int, total: int):
    """get_batch for in-process readers: ``fill(k, out_numpy)`` runs on a background thread
    for batch k+1 while batch k is copied and consumed; two (pinned on CUDA) host buffers."""
    pin = feed.cuda
    bufs = [torch.empty((batch, *CROP), dtype=torch.float32, pin_memory=pin) for _ in range(2)]
    for b in bufs:
        b.zero_()  # touch: page faults are not charged to the reads
    free = [None, None]  # CUDA event behind each buffer's last H2D copy
    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="gpu_feed_read")
    state = {"fut": None}

    def job(k, j):
        if free[j] is not None:
            free[j].synchronize()  # its previous copy has finished (releases the GIL)
        fill(k, bufs[j].numpy())
        return bufs[j]

    def get_batch(k):
        if state["fut"] is None:
            state["fut"] = pool.submit(job, k, k % 2)
        hb = state["fut"].result()
        if k + 1 < total:
            state["fut"] = pool.submit(job, k + 1, (k + 1) % 2)
        return hb

    orig_h2d = feed.h2d

    def h2d(hb):
        xd, done = orig_h2d(hb)
        free[0 if hb is bufs[0] else 1] = done
        return xd, done

    feed.h2d = h2d
    return get_batch, pool


def gpu_double_buffered(torch, feed: Feed, fill, batch: int, total: int):
    """get_batch for lsio.gpu.manual: ``fill(k, out)`` fills the device tensor ``out`` on a
    background thread (on a side CUDA stream, synchronized there) for batch k+1 while step k
    runs; two device tensors, each refilled only after the step that consumed it finished."""
    bufs = [torch.zeros((batch, *CROP), dtype=torch.float32, device=feed.device) for _ in range(2)]
    used = [None, None]  # CUDA event recorded behind the last step that read each buffer
    stream = torch.cuda.Stream(feed.device) if feed.cuda else None
    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="gpu_feed_gpu_read")
    state = {"fut": None}

    def job(k, j):
        if used[j] is not None:
            used[j].synchronize()  # releases the GIL
        if stream is None:
            fill(k, bufs[j])
        else:
            with torch.cuda.stream(stream):
                fill(k, bufs[j])
            stream.synchronize()
        return bufs[j]

    def get_batch(k):
        if state["fut"] is None:
            state["fut"] = pool.submit(job, k, k % 2)
        xd = state["fut"].result()
        if k + 1 < total:
            state["fut"] = pool.submit(job, k + 1, (k + 1) % 2)
        return xd

    orig_step = feed.run_step

    def run_step(xd):
        orig_step(xd)
        if feed.cuda:
            ev = torch.cuda.Event()
            ev.record(feed.compute)
            used[0 if xd is bufs[0] else 1] = ev

    feed.h2d = lambda xd: (xd, None)  # already on the device
    feed.run_step = run_step
    return get_batch, pool


def first_tensor(b):
    """A loader's batch as one tensor (a tensor, or the first of a tuple/list/dict)."""
    while not hasattr(b, "shape"):
        b = next(iter(b.values())) if isinstance(b, dict) else b[0]
    return b


# ----------------------------------------------------------------------------- modes


def warm_page_cache(path: Path) -> None:
    for root, _, files in os.walk(path):
        for f in files:
            with open(os.path.join(root, f), "rb") as fh:
                while fh.read(1 << 24):
                    pass


def run_mode(mode: str, torch, device, args, path: Path, starts: np.ndarray, step, total: int) -> dict:
    B = args.batch
    feed = Feed(torch, device, step, args.eps_ms, light=args.no_model and device.type == "cpu")
    config: dict = {}
    pool = None
    it = None  # a loader's iterator
    if mode == "model only":
        x = torch.zeros((B, *CROP), dtype=torch.float32)

        def get_batch(k):
            return x
        feed.h2d = lambda hb, _x=x.to(device): (_x, None)
    elif mode == "lsio.torch":
        import lsio
        from lsio.torch import CropDataset, CropSampler, collate, worker_init_fn

        arr = lsio.open(str(path), threads=args.threads)
        ds = CropDataset(arr, CROP, origins=starts[: total * B], worker_threads=1, pool_batches=args.pool_batches)
        sampler = CropSampler(ds, shuffle=False)
        kw = dict(batch_size=B, sampler=sampler, collate_fn=collate, num_workers=args.workers,
                  pin_memory=feed.cuda, worker_init_fn=worker_init_fn if args.workers else None)
        if args.workers:
            kw.update(persistent_workers=True, prefetch_factor=args.prefetch)
        loader = torch.utils.data.DataLoader(ds, **kw)
        it = iter(loader)
        config = {"num_workers": args.workers, "pin_memory": feed.cuda, "persistent_workers": bool(args.workers),
                  "prefetch_factor": args.prefetch if args.workers else None, "worker_threads": 1,
                  "pool_batches": args.pool_batches,
                  "collate_fn": "lsio.torch.collate", "main_process_threads": args.threads}

        def get_batch(k):
            return next(it)
    elif mode in ("lsio.gpu", "lsio.gpu.depth1", "lsio.gpu.manual"):
        import lsio
        import lsio.gpu as lg
        import lsio.torch as lt

        arr = lsio.open(str(path), threads=args.threads)
        loader_cls = getattr(lt, "CropLoader", None)
        if mode in ("lsio.gpu", "lsio.gpu.depth1") and loader_cls is not None:
            ds = lt.CropDataset(arr, CROP, origins=starts[: total * B])
            depth = 1 if mode == "lsio.gpu.depth1" else args.gpu_depth
            kw = {"depth": depth} if "depth" in loader_cls.__init__.__code__.co_varnames else {}
            loader = loader_cls(ds, batch_size=B, sampler=lt.CropSampler(ds, shuffle=False),
                                device="cuda" if feed.cuda else "cpu", **kw)
            it = iter(loader)
            config = {"loader": "lsio.torch.CropLoader(CropDataset(arr, origins=...), batch_size=B, "
                                f"sampler=CropSampler(shuffle=False), device=..., depth={kw.get('depth', 'n/a')})",
                      "threads": args.threads}

            def get_batch(k):
                return first_tensor(next(it))
            feed.h2d = lambda xd: (xd, None)  # already on the device
        else:
            config = {"loader": "manual: double-buffered read_crops(out=cuda tensor) on a background thread"
                                + ("" if mode == "lsio.gpu.manual" else " (lsio.torch has no CropLoader)"),
                      "threads": args.threads}
            if feed.cuda:
                def fill(k, out):
                    arr.read_crops(starts[k * B:(k + 1) * B], CROP, out=out)
            else:
                config["loader"] += ", CPU smoke: lsio.gpu.read_crops_reference"

                def fill(k, out):
                    out.copy_(torch.from_numpy(np.ascontiguousarray(
                        lg.read_crops_reference(arr, starts[k * B:(k + 1) * B], CROP))))
            get_batch, pool = gpu_double_buffered(torch, feed, fill, B, total)
    else:
        if mode == "lsio":
            import lsio

            arr = lsio.open(str(path), threads=args.threads)
            config = {"threads": args.threads, "read": "read_crops(out=pinned buffer)"}

            def fill(k, out):
                arr.read_crops(starts[k * B:(k + 1) * B], CROP, out=out)
        else:
            import readers

            reader = readers.make_reader(mode, path, args.threads)
            config = reader.config()

            def fill(k, out):
                parts = reader.crops(starts[k * B:(k + 1) * B], CROP)
                for i, p in enumerate(parts):
                    out[i] = np.asarray(p)
        get_batch, pool = double_buffered(torch, feed, fill, B, total)
    try:
        seconds, cpu_s, workers_cpu_s = run_loop(feed, get_batch, total, args.warmup)
    finally:
        if pool is not None:
            pool.shutdown(wait=True)
        close = getattr(it, "close", None)
        if close is not None:  # a loader iterator with background work (CropLoader)
            close()
    n = args.batches
    gaps = feed.gaps_ms(args.warmup + 1)  # the first timed step follows the synchronize
    waited = sum(g > args.eps_ms for g in gaps)
    host = feed.host_waits[args.warmup:]
    nbytes = n * B * int(np.prod(CROP)) * 4
    all_cpu = cpu_s + (workers_cpu_s or 0.0)
    return {"mode": mode, "config": config, "batches": n, "batch": B, "seconds": seconds,
            "crops_s": n * B / seconds, "GBps": nbytes / seconds / 1e9, "step_ms": seconds / n * 1e3,
            "waited_steps": waited, "counted_steps": len(gaps),
            "waited_frac": waited / len(gaps) if gaps else float("nan"),
            "mean_gap_ms": statistics.fmean(gaps) if gaps else float("nan"),
            "max_gap_ms": max(gaps) if gaps else float("nan"),
            "host_wait_ms": statistics.fmean(host) * 1e3 if host else float("nan"),
            "cpu_s": cpu_s, "workers_cpu_s": workers_cpu_s, "cpu_s_per_GB": all_cpu / (nbytes / 1e9),
            "workers_cpu_s_per_GB": None if workers_cpu_s is None else workers_cpu_s / (nbytes / 1e9),
            "cores_busy": all_cpu / seconds,
            "check": None if mode == "model only" else float(feed.check.item())}


def available(mode: str, cuda: bool = True) -> str | None:
    """None when the mode can run, else why not."""
    if mode in ("lsio.gpu", "lsio.gpu.depth1", "lsio.gpu.manual"):
        try:
            import lsio.gpu as lg
        except Exception as e:  # noqa: BLE001 - the GPU API may be absent or fail to import
            return f"lsio.gpu not importable: {type(e).__name__}: {e}"
        if not cuda:
            if mode == "lsio.gpu.manual" and not hasattr(lg, "read_crops_reference"):
                return "lsio.gpu has no read_crops_reference"
            return None
        try:
            ok, why = lg.available()
        except Exception as e:  # noqa: BLE001
            return f"lsio.gpu.available() failed: {type(e).__name__}: {e}"
        return None if ok else f"lsio.gpu unavailable: {why}"
    mod = {"tensorstore": "tensorstore", "zarrs": "zarrs"}.get(mode)
    if mod is None:
        return None
    try:
        __import__(mod)
    except Exception as e:  # noqa: BLE001
        return "not installed" if isinstance(e, ModuleNotFoundError) else f"import failed: {e}"
    return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=("cuda", "cpu"), default=None,
                    help="default: cuda when available, else skip; cpu: smoke run of the script")
    ap.add_argument("--modes", default=",".join(MODES), help=f"subset of {','.join(MODES)}")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--batches", type=int, default=200, help="timed batches per mode")
    ap.add_argument("--warmup", type=int, default=None, help="untimed batches first (default 10; cpu 2)")
    ap.add_argument("--workers", type=int, default=min(8, os.cpu_count() or 1), help="lsio.torch num_workers")
    ap.add_argument("--prefetch", type=int, default=2, help="lsio.torch prefetch_factor")
    ap.add_argument("--pool-batches", type=int, default=4,
                    help="lsio.torch CropDataset(pool_batches=): shared-memory slots per worker (0: a new one per batch)")
    ap.add_argument("--no-model", action="store_true",
                    help="no model step: the feed alone (what the host delivers). With --device cpu also no copy "
                         "and a checksum of every 16th row and column only: issue 13's DataLoader vs in-process "
                         "comparison without the consumer competing for the cores")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                    help="native threads / concurrency of the in-process readers")
    ap.add_argument("--width", type=int, default=None, help="conv channels (default 32; cpu 4)")
    ap.add_argument("--step-ms", type=float, default=None, help="repeat fwd+bwd until a step takes about this")
    ap.add_argument("--eps-ms", type=float, default=0.1, help="a gap above this counts as the GPU waiting")
    ap.add_argument("--quick", action="store_true", help="the 4x smaller W1 store")
    ap.add_argument("--gpu-depth", type=int, default=3, help="lsio.gpu: CropLoader's batches in flight on the GPU")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache-dir", type=Path, default=CACHE_DIR)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)

    try:
        import torch
    except ImportError as e:
        log(f"gpu_feed: torch is not importable ({e}): skipped")
        return 0
    if args.device != "cpu" and not torch.cuda.is_available():
        log(SKIP_MSG)
        return 0
    device = torch.device(args.device or "cuda")
    cpu = device.type == "cpu"
    if args.warmup is None:
        args.warmup = 2 if cpu else 10
    if args.width is None:
        args.width = 4 if cpu else 32
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad:
        ap.error(f"unknown mode(s) {bad}; choose from {MODES}")

    from stores import ensure_store
    from suite import STORES

    spec = STORES["weather"][1 if args.quick else 0]
    path = ensure_store(spec, args.cache_dir, log=log)
    warm_page_cache(path)
    total = args.warmup + args.batches
    B = args.batch
    high = np.asarray(spec.shape) - np.asarray(CROP) + 1
    starts = (np.random.default_rng(args.seed).random((total * B, len(CROP))) * high).astype(np.int64)

    if cpu:
        log("gpu_feed: CPU SMOKE RUN (--device cpu): the pipeline on the CPU, no pinning, no CUDA streams; "
            "NOT a GPU measurement")
        dev_name = "cpu"
    else:
        torch.backends.cudnn.benchmark = True
        dev_name = torch.cuda.get_device_name(device)
    log(f"gpu_feed: {spec.describe()}, crops {CROP} float32, batch {B} "
        f"({B * int(np.prod(CROP)) * 4 / 2**20:.0f} MiB), {args.batches} timed + {args.warmup} warm-up batches, "
        f"device {dev_name}, {os.cpu_count()} CPUs, threads {args.threads}, workers {args.workers}")

    net, opt = make_model(torch, args.width, device)
    step = Stepper(torch, net, opt, repeat=0 if args.no_model else 1)
    if args.step_ms and not args.no_model:
        x = torch.zeros((B, *CROP), device=device)
        for _ in range(3):
            step(x)
        if not cpu:
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        for _ in range(5):
            step(x)
        if not cpu:
            torch.cuda.synchronize(device)
        one = (time.perf_counter() - t0) / 5
        step.repeat = max(1, round(args.step_ms / (one * 1e3)))
    log(f"model step: width {args.width}, {step.repeat} fwd+bwd per step" + (" (--no-model)" if args.no_model else ""))

    results = []
    for mode in ["model only"] + modes:
        why = available(mode, cuda=not cpu)
        if why:
            log(f"  {mode}: {why}")
            results.append({"mode": mode, "status": why})
            continue
        try:
            r = run_mode(mode, torch, device, args, path, starts, step, total)
        except Exception as e:  # noqa: BLE001 - a failing peer is reported; the others go on
            log(f"  {mode}: failed: {type(e).__name__}: {e}\n{traceback.format_exc()}")
            results.append({"mode": mode, "status": f"error: {type(e).__name__}: {e}"})
            continue
        r["status"] = "ok"
        results.append(r)
        log(f"  {mode}: {r['crops_s']:.0f} crops/s, {r['GBps']:.2f} GB/s, GPU waited in "
            f"{r['waited_steps']}/{r['counted_steps']} steps, {r['cpu_s_per_GB']:.3f} CPU s/GB")

    checks = {round(r["check"], 1) for r in results if r.get("status") == "ok" and r.get("check") is not None}
    ok = len(checks) <= 1
    log(f"check: every mode delivered the same crops (float64 sums): {'ok' if ok else 'MISMATCH ' + str(checks)}")
    log("")
    if cpu:
        log("CPU smoke run (--device cpu), not a GPU measurement: \"waited\" is host wait > eps.")
    log("| mode | crops/s | GB/s to device | ms per step | steps the GPU waited | mean GPU gap (ms) "
        "| host wait (ms/step) | CPU s per GB (workers) |")
    log("|---|---|---|---|---|---|---|---|")
    for r in results:
        if r.get("status") != "ok":
            log(f"| {r['mode']} | {r['status']} | | | | | | |")
            continue
        w = r["workers_cpu_s_per_GB"]
        cpu_col = f"{r['cpu_s_per_GB']:.3f} ({'n/a: no psutil' if w is None else f'{w:.3f}'})"
        label = r["mode"] + (f" (W={args.workers}, pool_batches={args.pool_batches})" if r["mode"] == "lsio.torch" else "")
        if r["mode"] in ("lsio.gpu", "lsio.gpu.depth1"):
            label += " (CropLoader)" if r["config"]["loader"].startswith("lsio.torch.CropLoader") else " (manual loop)"
        log(f"| {label} | {r['crops_s']:.0f} | {r['GBps']:.2f} | {r['step_ms']:.2f} | "
            f"{r['waited_steps']}/{r['counted_steps']} ({100 * r['waited_frac']:.0f}%) | {r['mean_gap_ms']:.2f} | "
            f"{r['host_wait_ms']:.2f} | {cpu_col} |")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({
            "benchmark": "gpu_feed", "cpu_smoke_run": cpu, "device": dev_name, "store": spec.describe(),
            "crop": CROP, "batch": B, "batches": args.batches, "warmup": args.warmup, "threads": args.threads,
            "workers": args.workers, "pool_batches": args.pool_batches, "no_model": args.no_model,
            "width": args.width, "step_repeat": step.repeat, "eps_ms": args.eps_ms,
            "cpus": os.cpu_count(), "torch": torch.__version__, "checks_ok": ok,
            "cpu_time": "process_time() of this process" + (" + psutil children (DataLoader workers)"
                                                            if children_cpu_s() is not None else
                                                            " only (psutil not installed: workers not counted)"),
            "results": results}, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

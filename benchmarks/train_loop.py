"""A small CNN trained on CPU from random crops fed by lsio's CropDataset through a DataLoader.

Prints, for 0, 1 and 2 DataLoader workers: samples/s of the loader alone, samples/s of the
whole training loop, and per step how long the model step took versus how long the loop
waited for the loader (does lsio keep up?).

    python benchmarks/train_loop.py [--steps 40] [--batch 32] [--crop 4 64 64] [--workers 0 1 2]

The store (float32, sharded, zstd; 2 variables sharing (time, y, x)) is written once with
zarr-python into benchmarks/.cache/ (or --store DIR).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np


def make_store(root: Path, shape) -> None:
    import zarr
    from zarr.codecs import ZstdCodec

    if (root / "x" / "zarr.json").exists() and (root / "y" / "zarr.json").exists():
        return
    print(f"writing {root} ...", file=sys.stderr)
    rng = np.random.default_rng(0)
    t, h, w = shape
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    for name in ("x", "y"):
        z = zarr.create_array(store=str(root / name), shape=shape, chunks=(1, 64, 64), shards=(8, 256, 256),
                              dtype=np.float32, compressors=ZstdCodec(level=3), overwrite=True)
        for i in range(0, t, 8):
            k = np.arange(i, min(i + 8, t), dtype=np.float32)[:, None, None]
            field = np.sin(xx / 37.0 + k / 5.0) * np.cos(yy / 23.0 - k / 7.0)
            if name == "y":
                field = field**2
            z[i : i + len(k)] = (field + 0.1 * rng.standard_normal(field.shape)).astype(np.float32)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", default=str(Path(__file__).parent / ".cache" / "train_loop.zarr"))
    ap.add_argument("--shape", type=int, nargs=3, default=(64, 512, 512))
    ap.add_argument("--crop", type=int, nargs=3, default=(4, 64, 64))
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--workers", type=int, nargs="+", default=(0, 1, 2))
    ap.add_argument("--torch-threads", type=int, default=None)
    args = ap.parse_args()

    import torch
    import torch.nn as nn
    from torch.utils.data import DataLoader

    import lsio
    from lsio.torch import CropDataset, CropSampler, collate, worker_init_fn

    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    root = Path(args.store)
    make_store(root, tuple(args.shape))
    x, y = lsio.open(root / "x"), lsio.open(root / "y")
    crop = tuple(args.crop)
    n = args.batch * args.steps
    ds = CropDataset({"x": x, "y": y}, {"x": crop, "y": (1, *crop[1:])}, length=n, seed=0)

    def model_fn():
        torch.manual_seed(0)
        return nn.Sequential(
            nn.Conv2d(crop[0], 16, 3, padding=1), nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1, stride=2), nn.ReLU(),
            nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(),
            nn.ConvTranspose2d(32, 1, 2, stride=2),
        )

    def step(model, opt, batch):
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.mse_loss(model(batch["x"]), batch["y"])
        loss.backward()
        opt.step()
        return loss

    def loader(workers):
        sampler = CropSampler(ds, num_replicas=1, rank=0, seed=0)
        kw = dict(num_workers=workers, worker_init_fn=worker_init_fn)
        if workers:
            kw.update(persistent_workers=True, prefetch_factor=4, multiprocessing_context="fork")
        return sampler, DataLoader(ds, batch_size=args.batch, sampler=sampler, collate_fn=collate, **kw)

    mb = args.batch * (np.prod(crop) + np.prod(crop[1:])) * 4 / 1e6
    print(f"lsio {lsio.__version__} ({lsio.__file__}); torch {torch.__version__}, "
          f"{torch.get_num_threads()} torch threads, {os.cpu_count()} CPUs; io={x.io_backend}")
    print(f"store {root} x,y {x.shape} {x.dtype} chunks {x.chunks} shards {x.shards}; "
          f"batch {args.batch} x crops {crop} (+ y {(1, *crop[1:])}) = {mb:.1f} MB; {args.steps} steps")

    # Model step alone, on one fixed batch (no loading).
    model = model_fn()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    fixed = ds.read_batch([(0, i) for i in range(args.batch)])
    for _ in range(3):
        step(model, opt, fixed)
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step(model, opt, fixed)
    t_model = (time.perf_counter() - t0) / args.steps
    print(f"\nmodel step alone: {t_model * 1e3:.1f} ms/step = {args.batch / t_model:,.0f} samples/s")
    print(f"\n{'workers':>7} {'loader only':>16} {'training loop':>16} {'step ms':>8} {'wait ms':>8} {'keeps up':>8}")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for workers in args.workers:
            sampler, dl = loader(workers)
            # Loader alone (epoch 0); the first batch (worker start-up) is not timed.
            sampler.set_epoch(0)
            it = iter(dl)
            next(it)
            t0 = time.perf_counter()
            k = sum(1 for _ in it)
            t_load = (time.perf_counter() - t0) / max(k, 1)
            # Training loop (epoch 1): time waiting for the loader vs. the model step.
            model = model_fn()
            opt = torch.optim.SGD(model.parameters(), lr=1e-3)
            sampler.set_epoch(1)
            it = iter(dl)
            step(model, opt, next(it))
            wait = work = 0.0
            steps = 0
            t_start = time.perf_counter()
            while True:
                t0 = time.perf_counter()
                try:
                    batch = next(it)
                except StopIteration:
                    break
                t1 = time.perf_counter()
                step(model, opt, batch)
                t2 = time.perf_counter()
                wait += t1 - t0
                work += t2 - t1
                steps += 1
            total = time.perf_counter() - t_start
            keeps = "yes" if wait < 0.1 * work else ("mostly" if wait < 0.5 * work else "no")
            print(f"{workers:>7} {args.batch / t_load:>10,.0f} smp/s {args.batch * steps / total:>10,.0f} smp/s "
                  f"{work / steps * 1e3:>8.1f} {wait / steps * 1e3:>8.1f} {keeps:>8}")
            del it, dl


if __name__ == "__main__":
    main()

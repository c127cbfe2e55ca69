"""W2b: epochs of crops over a store larger than the memory the process may use (issue 29).

    python benchmarks/python/w2b.py                       # 3 epochs, memory cgroup of 256 MiB
    python benchmarks/python/w2b.py --limit-mib 192,384 --epochs 4 --json /tmp/w2b.json
    python benchmarks/python/w2b.py --quick               # the 8x smaller W1 store, 48 MiB

The store is W1's (float32 (32, 2048, 2048), shards (8, 512, 512), inner chunks
(1, 128, 128), zstd 3: 362 MiB stored). Each reader runs in its own subprocess inside a fresh
memory cgroup (v2 ``memory.max`` or v1 ``memory.limit_in_bytes``; needs root) whose limit
is below the store's size, so the page cache it may fill cannot hold the store: the
situation of a training set larger than RAM, scaled down. The store is dropped from the page
cache (``posix_fadvise(DONTNEED)``) before each reader. An epoch visits every (4, 256, 256)
tile once in a new random order (as W9), in batches of 16 crops.

Readers: ``lsio`` (defaults: ``direct="auto"``, which sees the cgroup's room), ``lsio
direct=True``, ``lsio direct=False``, ``tensorstore`` (``zarr3``, concurrency = threads).
Per epoch: crops/s, the cgroup's page cache (v2 ``file``, v1 ``cache``) and RSS at its end;
``--rounds`` runs of each reader in rotated order (the VM host's own cache warms during a run,
so a fixed order would favour the later readers), the table shows the median per epoch.
Target (issue 29): the default within 0.95x of the better of ``direct=True/False`` in every
epoch. Without a usable memory cgroup the script says so and exits 2.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import w9  # noqa: E402
from w9 import BATCH, CROP  # noqa: E402

CACHE_DIR = HERE.parent / ".cache"
READERS = ("lsio", "lsio direct=True", "lsio direct=False", "tensorstore")


def log(msg: str = "") -> None:
    print(msg, flush=True)


SEED_BASE = 2000  # W9's epochs (every tile once), in other orders


def epoch_batches(shape, epoch: int) -> list[np.ndarray]:
    return w9.epoch_batches(shape, epoch, seed_base=SEED_BASE)


# -- memory cgroups ------------------------------------------------------------------------

class Cgroup:
    """A fresh memory cgroup below this process's own (v2 or v1), removed by close()."""

    def __init__(self, name: str, limit: int):
        self.v2 = os.path.exists("/sys/fs/cgroup/cgroup.controllers")
        own = self._own_path()
        base = Path("/sys/fs/cgroup") if self.v2 else Path("/sys/fs/cgroup/memory")
        parent = base / own.lstrip("/")
        if self.v2:
            # A v2 group with processes cannot have children with controllers: go one up.
            parent = parent.parent if (parent / "cgroup.procs").read_text().strip() else parent
        if self.v2:
            try:  # children get the memory controller (fails harmlessly where it is on already)
                (parent / "cgroup.subtree_control").write_text("+memory")
            except OSError:
                pass
        self.dir = parent / name
        self.dir.mkdir(exist_ok=True)
        (self.dir / ("memory.max" if self.v2 else "memory.limit_in_bytes")).write_text(str(limit))
        if self.v2:
            if (self.dir / "memory.swap.max").exists():
                (self.dir / "memory.swap.max").write_text("0")

    def _own_path(self) -> str:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            hid, ctrl, path = line.split(":", 2)
            if (self.v2 and hid == "0") or (not self.v2 and "memory" in ctrl.split(",")):
                return path
        raise RuntimeError("no memory cgroup in /proc/self/cgroup")

    def stat(self) -> dict:
        out = {}
        for line in (self.dir / "memory.stat").read_text().splitlines():
            k, v = line.split()
            out[k] = int(v)
        return out

    def page_cache(self) -> int:
        s = self.stat()
        return s.get("file", s.get("total_cache", s.get("cache", 0)))

    def close(self) -> None:
        try:
            self.dir.rmdir()
        except OSError:
            pass


def cgroups_usable() -> str | None:
    """None when memory cgroups can be made here, else why not."""
    if os.geteuid() != 0:
        return "memory cgroups need root"
    try:
        g = Cgroup(f"lsio-w2b-probe-{os.getpid()}", 1 << 30)
        g.close()
    except (OSError, RuntimeError) as e:
        return f"cannot create a memory cgroup: {e}"
    return None


def drop(path: Path) -> None:
    for root, _, files in os.walk(path):
        for f in files:
            fd = os.open(os.path.join(root, f), os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


# -- one reader, in the cgroup -------------------------------------------------------------

def child(reader: str, path: str, threads: int, epochs: int, cgroup_dir: str) -> dict:
    stat_file = Path(cgroup_dir) / "memory.stat"

    def page_cache() -> int:
        s = dict((k, int(v)) for k, v in (line.split() for line in stat_file.read_text().splitlines()))
        return s.get("file", s.get("total_cache", s.get("cache", 0)))

    decision = None
    if reader.startswith("lsio"):
        import lsio

        direct = {"lsio": None, "lsio direct=True": True, "lsio direct=False": False}[reader]
        arr = lsio.open(path, threads=threads, direct=direct)
        decision = arr.options["direct_decision"]
        shape = arr.shape
        out = np.empty((BATCH, *CROP), np.float32)

        def read(starts):
            return arr.read_crops(starts, CROP, out=out[:len(starts)])
    else:
        from readers import TensorStoreReader  # the suite's adapter: one ts.Batch per batch

        tsr = TensorStoreReader(path, threads)
        shape = tuple(tsr.t.shape)

        def read(starts):
            return tsr.crops(starts, CROP)
    rows, check = w9.run_epochs(read, shape, epochs, lambda: {"page_cache": page_cache()}, seed_base=SEED_BASE)
    return {"reader": reader, "epochs": rows, "check": check, "decision": decision}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2,
                    help="each reader runs once per round, in an order rotated per round; per epoch the "
                         "median over rounds (the host's own cache warms during a run: order matters)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--limit-mib", default="256", help="comma-separated cgroup memory limits (MiB)")
    ap.add_argument("--quick", action="store_true", help="the 8x smaller W1 store (limit 48 MiB unless given)")
    ap.add_argument("--readers", default=",".join(READERS))
    ap.add_argument("--cache-dir", type=Path, default=CACHE_DIR)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--path", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--cgroup-dir", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.path, args.threads, args.epochs, args.cgroup_dir)), flush=True)
        return 0
    why = cgroups_usable()
    if why is not None:
        log(f"W2b: skipped: {why}")
        return 2

    from stores import ensure_store
    from suite import STORES

    spec = STORES["weather"][1 if args.quick else 0]
    path = ensure_store(spec, args.cache_dir, log=log)
    stored = sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())
    limits = [int(x) << 20 for x in (("48" if args.quick and args.limit_mib == "256" else args.limit_mib).split(","))]
    log(f"W2b: {spec.describe()}, {stored / 2**20:.0f} MiB stored; threads {args.threads}; "
        f"{args.epochs} epochs of {len(epoch_batches(spec.shape, 0))} batches x {BATCH} crops; "
        f"memory cgroup limits {', '.join(f'{x >> 20} MiB' for x in limits)}")
    all_results = []
    status = 0
    names = args.readers.split(",")
    for limit in limits:
        runs: dict[str, list[dict]] = {n: [] for n in names}
        order = [names[(i + k) % len(names)] for k in range(args.rounds) for i in range(len(names))]
        for n_run, reader in enumerate(order):
            drop(Path(path))
            g = Cgroup(f"lsio-w2b-{os.getpid()}-{limit >> 20}-{n_run}", limit)
            try:
                cmd = [sys.executable, __file__, "--child", reader, "--path", str(path), "--threads",
                       str(args.threads), "--epochs", str(args.epochs), "--cgroup-dir", str(g.dir)]
                shell = f"echo $$ > {shlex.quote(str(g.dir / 'cgroup.procs'))} && exec {shlex.join(cmd)}"
                p = subprocess.run(["sh", "-c", shell], capture_output=True, text=True)
            finally:
                drop(Path(path))  # uncharge the group's pages so it can go
                g.close()
            if p.returncode != 0:
                log(f"  {reader} (limit {limit >> 20} MiB): failed ({p.returncode}): {p.stderr.strip()[-1500:]}")
                continue
            res = json.loads(p.stdout.strip().splitlines()[-1])
            runs[reader].append(res)
            d = res.get("decision")
            if d:
                log(f"  {reader}: {d['mode']} ({d['reason']})")
            log(f"  {reader} limit {limit >> 20} MiB: " + ", ".join(
                f"epoch {r['epoch']} {r['crops_s']:.0f} crops/s ({r['page_cache'] / 2**20:.0f} MiB cache, "
                f"RSS {r['rss'] / 2**20:.0f} MiB)" for r in res["epochs"]))
        results = []
        for reader in names:
            if not runs[reader]:
                continue
            res = dict(runs[reader][0])
            res["limit"] = limit
            res["rounds"] = runs[reader]
            res["epochs"] = [dict(runs[reader][0]["epochs"][e],
                                  crops_s=float(np.median([r["epochs"][e]["crops_s"] for r in runs[reader]])),
                                  page_cache=int(np.median([r["epochs"][e]["page_cache"] for r in runs[reader]])))
                             for e in range(args.epochs)]
            res["check"] = runs[reader][-1]["check"]
            results.append(res)
        checks = {round(r["check"], 3) for r in results}
        log(f"check: every reader's last crop sums to the same value: {'ok' if len(checks) == 1 else 'MISMATCH ' + str(checks)}")
        if len(checks) > 1:
            status = 1
        by = {r["reader"]: r for r in results}
        log("")
        log("| limit | epoch | " + " | ".join(r["reader"] for r in results) + " | default / best of direct=True/False | target |")
        log("|---|---|" + "---|" * len(results) + "---|---|")
        for e in range(args.epochs):
            cells = [f"{r['epochs'][e]['crops_s']:.0f} ({r['epochs'][e]['page_cache'] / 2**20:.0f} MiB cache)"
                     for r in results]
            verdict = ratio_s = ""
            if all(k in by for k in ("lsio", "lsio direct=True", "lsio direct=False")):
                best = max(by["lsio direct=True"]["epochs"][e]["crops_s"], by["lsio direct=False"]["epochs"][e]["crops_s"])
                ratio = by["lsio"]["epochs"][e]["crops_s"] / best
                ratio_s = f"{ratio:.2f}x"
                verdict = "met" if ratio >= 0.95 else "missed"
            log(f"| {limit >> 20} MiB | {e + 1} | " + " | ".join(cells) + f" | {ratio_s} | {verdict} |")
        log("")
        all_results.extend(results)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"workload": "W2b", "store": spec.describe(), "stored_bytes": stored,
                                         "threads": args.threads, "results": all_results}, indent=1))
    return status


if __name__ == "__main__":
    sys.exit(main())

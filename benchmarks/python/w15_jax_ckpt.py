"""W15: a ~2 GiB safetensors checkpoint onto 8 JAX CPU devices, by one and by two processes.

    python benchmarks/python/w15_jax_ckpt.py                    # 2 GiB, 3 rounds, hot and cold
    python benchmarks/python/w15_jax_ckpt.py --gib 0.25 --rounds 1 --json /tmp/w15.json

The checkpoint is W10's (benchmarks/python/w10.py: float32 matrices shaped like a language
model, 2 shards and an index). Every tensor is sharded on its first axis over a mesh of all 8
devices (``NamedSharding(Mesh(devices, "x"), P("x"))``). With two processes
(``jax.distributed`` on 127.0.0.1, 4 CPU devices each) each process keeps half of every
tensor. Each (reader, processes) run starts fresh worker processes; after jax is up they meet
at a file barrier, then time the load until every array is ready; the run's wall time is the
last end minus the first start.

Readers (each process builds global ``jax.Array``s with the sharding):
- ``lsio``: ``lsio.safetensors.load_jax`` (reads only the shards this process's devices hold).
- ``design``: the approach of the design this project started from (Levanter's
  ``fsspec_safetensor``): tensors packed into chunks of at most 2 GiB
  (``lsio.safetensors.chunk_plan``), every process reads every chunk whole with fsspec's
  ``cat_file`` and slices it with ``jax.make_array_from_callback``.
- ``safetensors``: ``safetensors.numpy.load_file`` of every shard, then
  ``jax.device_put(array, sharding)`` per tensor.

Bytes read per process: lsio's own count (``stats["bytes_read"]``: what its engine asked the
storage for), the chunks' bytes for the design, the whole checkpoint for safetensors (it loads
whole tensors); cold rounds also show the process's ``/proc/self/io`` ``read_bytes`` (pages it
brought in from the disk; with two processes reading one file, a page one brought in is a hit
for the other). Cold rounds evict the shard files first (fsync + posix_fadvise(DONTNEED)).
The first run of each reader is checked: every addressable shard equals the same slice of
``safetensors.numpy.load_file``'s tensor (a sample of tensors, all shards).

Targets (issue "Sharded checkpoints for JAX"): lsio's bytes per process ~ 1/P of the
checkpoint; wall time >= 2x the design's with two processes.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

READERS = ("lsio", "design", "safetensors")


def log(msg: str = "") -> None:
    print(msg, flush=True)


# ----------------------------------------------------------------------------- worker

def _proc_read_bytes() -> int:
    try:
        with open("/proc/self/io") as f:
            for line in f:
                if line.startswith("read_bytes:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1


def worker(a: argparse.Namespace) -> None:
    os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={8 // a.nproc}"
    os.environ["JAX_PLATFORMS"] = "cpu"
    import jax
    import numpy as np

    if a.nproc > 1:
        jax.distributed.initialize(f"127.0.0.1:{a.port}", num_processes=a.nproc, process_id=a.pid,
                                   initialization_timeout=120)
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    import lsio.safetensors as lst

    d = Path(a.dir)
    index = f"{a.url}/model.safetensors.index.json" if a.url else d / "model.safetensors.index.json"
    sharding = NamedSharding(Mesh(np.array(jax.devices()), ("x",)), P("x"))
    # Barrier: both processes start timing together.
    Path(a.barrier, f"ready{a.pid}").write_text("1")
    while len(list(Path(a.barrier).glob("ready*"))) < a.nproc:
        time.sleep(0.002)
    io0 = _proc_read_bytes()
    t0 = time.time()
    read = 0
    engine_s = 0.0
    if a.worker == "lsio":
        from lsio import _safetensors_shards as shards

        real = shards._read_group

        def timed(*args, **kw):  # the engine calls' share of the load
            nonlocal engine_s
            t = time.perf_counter()
            try:
                return real(*args, **kw)
            finally:
                engine_s += time.perf_counter() - t
        shards._read_group = timed
        stats: dict = {}
        out = lst.load_jax(index, sharding, threads=a.threads, stats=stats)
        read = stats["bytes_read"]
    elif a.worker == "design":
        import fsspec

        fs = fsspec.filesystem("http" if a.url else "file")
        out = {}
        for c in lst.chunk_plan(index, process_count=a.nproc):
            raw = np.frombuffer(fs.cat_file(c.file, start=c.offset, end=c.offset + c.nbytes), np.uint8)
            read += c.nbytes
            for t in c._infos:
                view = raw[t.offset - c.offset:t.offset - c.offset + t.nbytes].view(np.float32).reshape(t.shape)
                out[t.name] = jax.make_array_from_callback(t.shape, sharding, lambda idx, v=view: v[idx])
            del raw
    else:  # safetensors reads local files only
        from safetensors.numpy import load_file

        out = {}
        for p in sorted(d.glob("*.safetensors")):
            for name, arr in load_file(str(p)).items():
                out[name] = jax.device_put(arr, sharding)
                read += arr.nbytes
    for v in out.values():
        v.block_until_ready()
    t1 = time.time()
    io1 = _proc_read_bytes()
    checked = 0
    if a.check:
        from safetensors import safe_open

        names = sorted(out)[:: max(1, len(out) // 12)]
        for p in sorted(d.glob("*.safetensors")):
            with safe_open(str(p), framework="np") as f:
                for name in names:
                    if name in f.keys():
                        want = f.get_tensor(name)
                        for s in out[name].addressable_shards:
                            assert np.asarray(s.data).tobytes() == np.ascontiguousarray(want[s.index]).tobytes(), name
                            checked += 1
    Path(a.out).write_text(json.dumps({"start": t0, "end": t1, "bytes_read": read, "engine_s": engine_s,
                                       "disk_read_bytes": io1 - io0 if io0 >= 0 else -1,
                                       "checked": checked, "tensors": len(out)}))
    if a.nproc > 1:
        jax.distributed.shutdown()


# ----------------------------------------------------------------------------- driver

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(d: Path, rate: str, latency_ms: float) -> tuple:
    """object_server.py on loopback serving `d`: (process, base URL)."""
    p = subprocess.Popen([sys.executable, str(HERE / "object_server.py"), str(d), "--rate", rate,
                          "--latency-ms", str(latency_ms)], stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if "listening on" not in line:
        p.kill()
        raise RuntimeError(f"object_server.py did not start: {line!r}")
    return p, line.split("listening on", 1)[1].split()[0].rstrip("/")


def served_bytes(url: str) -> int:
    import urllib.request

    with urllib.request.urlopen(url + "/__stats") as r:
        return int(json.loads(r.read())["bytes"])


def run_once(reader: str, nproc: int, d: Path, threads: int, check: bool, rate: str | None = None,
             latency_ms: float = 20.0) -> dict:
    """One run: nproc fresh worker processes; with `rate`, each reads over HTTP from its own
    object server paced to `rate` (each process's own network path, as on separate hosts)."""
    servers = [start_server(d, rate, latency_ms) for _ in range(nproc)] if rate else []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            port = str(free_port())
            procs = []
            for i in range(nproc):
                cmd = [sys.executable, __file__, "--worker", reader, "--pid", str(i), "--nproc", str(nproc),
                       "--port", port, "--dir", str(d), "--barrier", tmp, "--threads", str(threads),
                       "--out", os.path.join(tmp, f"out{i}.json")] + (["--check"] if check else [])
                if servers:
                    cmd += ["--url", servers[i][1]]
                procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
            outs = [p.communicate(timeout=1800)[0] for p in procs]
            for p, o in zip(procs, outs):
                if p.returncode != 0:
                    raise RuntimeError(f"{reader} x{nproc} failed:\n{o[-3000:]}")
            res = [json.loads(Path(tmp, f"out{i}.json").read_text()) for i in range(nproc)]
        served = [served_bytes(url) for _, url in servers]
    finally:
        for p, _ in servers:
            p.kill()
            p.wait()
    return {"wall_s": max(r["end"] for r in res) - min(r["start"] for r in res),
            "bytes_read": [r["bytes_read"] for r in res], "disk_read_bytes": [r["disk_read_bytes"] for r in res],
            "served": served, "engine_s": [r.get("engine_s", 0.0) for r in res],
            "checked": sum(r["checked"] for r in res)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gib", type=float, default=2.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--caches", default="cold,hot",
                    help="cold, hot, remote (HTTP from one paced object server per process)")
    ap.add_argument("--rate", default="200M", help="remote: each process's bandwidth (object_server --rate)")
    ap.add_argument("--latency-ms", type=float, default=20.0, help="remote: time to first byte")
    ap.add_argument("--url")
    ap.add_argument("--cache-dir", type=Path, help="where W10's checkpoint is written (default benchmarks/.cache)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--worker", choices=READERS)
    ap.add_argument("--pid", type=int, default=0)
    ap.add_argument("--nproc", type=int, default=1)
    ap.add_argument("--port", default="0")
    ap.add_argument("--dir")
    ap.add_argument("--barrier")
    ap.add_argument("--out")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args(argv)
    if a.worker:
        worker(a)
        return 0
    import limits
    import w10

    d = w10.ensure_checkpoint(a.gib, 2, *([a.cache_dir] if a.cache_dir else []))
    files = sorted(d.glob("*.safetensors"))
    total = sum(t.nbytes for t in __import__("lsio.safetensors").safetensors.info(
        d / "model.safetensors.index.json").values())
    log(f"W15: {d} ({total / 2**30:.2f} GiB of tensors), 8 CPU devices, {a.threads} lsio threads, "
        f"{a.rounds} rounds")
    results: dict = {}
    checked = set()
    runs = [(c, r, p) for c in a.caches.split(",") for p in (1, 2) for r in READERS
            if not (c == "remote" and r == "safetensors")]   # safetensors reads local files only
    caches = a.caches.split(",")
    for rnd in range(a.rounds):
        k = rnd % len(READERS)
        order = sorted(runs, key=lambda x: (caches.index(x[0]), x[2], (READERS.index(x[1]) - k) % len(READERS)))
        for cache, reader, nproc in order:
            if cache == "remote":
                for f in files:  # the servers read from the page cache: the network is the bound
                    with open(f, "rb") as fh:
                        while fh.read(64 << 20):
                            pass
            elif cache == "cold":
                limits.drop_cache(files)
                assert limits.resident_bytes(files) == 0
            else:
                for f in files:  # hot: read once untimed
                    with open(f, "rb") as fh:
                        while fh.read(64 << 20):
                            pass
            r = run_once(reader, nproc, d, a.threads, check=(cache, reader, nproc) not in checked,
                         rate=a.rate if cache == "remote" else None, latency_ms=a.latency_ms)
            if r["checked"]:
                checked.add((cache, reader, nproc))
            results.setdefault((cache, reader, nproc), []).append(r)
            log(f"  round {rnd} {cache:4} {reader:11} x{nproc}: {r['wall_s']:.2f} s, per process read "
                f"{[round(b / 2**30, 2) for b in r['bytes_read']]} GiB, disk "
                f"{[round(b / 2**30, 2) for b in r['disk_read_bytes']]} GiB"
                + (f", served {[round(b / 2**30, 2) for b in r['served']]} GiB" if r["served"] else "")
                + (f", engine {[round(x, 2) for x in r['engine_s']]} s" if reader == "lsio" else "")
                + (f", checked {r['checked']} shards" if r["checked"] else ""))
    rows = []
    for (cache, reader, nproc), rs in sorted(results.items(), key=lambda kv: (caches.index(kv[0][0]), kv[0][2],
                                                                              READERS.index(kv[0][1]))):
        wall = statistics.median(r["wall_s"] for r in rs)
        design = statistics.median(r["wall_s"] for r in results[(cache, "design", nproc)])
        per = statistics.median(max(r["bytes_read"]) for r in rs)
        disk = statistics.median(max(r["served"] or r["disk_read_bytes"]) for r in rs)
        rows.append({"cache": cache, "reader": reader, "processes": nproc, "wall_s": wall,
                     "gb_s": total / wall / 1e9, "vs_design": design / wall,
                     "bytes_per_process": per, "fraction": per / total, "disk_per_process": disk})
    log("")
    log("| cache | processes | reader | wall s | GB/s | vs design | read per process | of the checkpoint | "
        "disk read (cold) / served (remote) per process |")
    log("|---|---|---|---|---|---|---|---|---|")
    for x in rows:
        log(f"| {x['cache']} | {x['processes']} | {x['reader']} | {x['wall_s']:.2f} | {x['gb_s']:.2f} | "
            f"{x['vs_design']:.2f}x | {x['bytes_per_process'] / 2**30:.2f} GiB | {x['fraction']:.2f} | "
            + (f"{x['disk_per_process'] / 2**30:.2f} GiB |" if x["cache"] != "hot" else "- |"))
    if a.json:
        a.json.write_text(json.dumps({"total_bytes": total, "rows": rows, "rounds": a.rounds,
                                      "threads": a.threads}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""W7: the W1 crops over HTTP from an emulated object store on loopback (used by suite.py).

The W1 store is served by object_server.py, a separate process (no shared GIL with the
readers) that delays the first byte of every response by --w7-latency-ms (default 20 ms,
S3's typical time to first byte) and counts the requests and bytes it serves. Every reader
opens the store's URL: lsio (``lsio.open(url)``, its default request_concurrency and the rows
``lsio rc=8`` / ``lsio rc=64``), TensorStore (zarr3 over the ``http`` kvstore), zarr-python 3
over obstore's HTTPStore and over fsspec's HTTPFileSystem (aiohttp), and zarrs-python (its
codec pipeline over the fsspec HTTP store, which it reads with its own HTTP client).

Same batches for all (the W1 generator), interleaved rounds in a rotating order, round 0 an
untimed warm-up checked bit for bit against zarr-python reading the local store. Per timed
batch the server's counters are reset before and read after (both untimed), giving:

- crops/s (median over rounds),
- requests per batch (server count: every reader's requests, retries included),
- bytes fetched per byte used: body bytes the server sent / compressed bytes of the chunks
  the batch needs (stores.byte_ranges; shard indexes not counted as needed),
- first-batch latency: a fresh reader object opened on the URL plus its first batch
  (metadata, shard indexes, chunks), the median of a few tries after the timed rounds.
  Process-wide state stays warm (lsio's and TensorStore's connection pools, imports).

A reader whose warm-up batch is slow (zarrs-python over HTTP fetches chunks nearly one at a
time) is timed in one round only (quick mode: not timed).

Bandwidth-capped row (--w7-rate, bytes/s): lsio and TensorStore read the same batches in a
child process started with ``unshare -n`` (a private network namespace, root needed) where
``tc qdisc add dev lo root tbf`` caps loopback; the server runs inside it too. The link
bound is rate / needed bytes per batch. Where unshare or tc fail, the fallback is the
server's own token bucket (object_server.py --rate) in the normal namespace, and the row
says which was used.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import readers as readers_mod  # noqa: E402
from stores import ShardLayout, byte_ranges  # noqa: E402

SERVER = HERE / "object_server.py"
# Untimed batches each reader reads after its warm-up (see measure()).
SETTLE_BATCHES = 24
PEERS = ["tensorstore", "zarr-python obstore", "zarr-python fsspec", "zarrs"]
CAPPED_READERS = ["lsio", "tensorstore"]


def log(msg: str = "") -> None:
    print(msg, flush=True)


# ----------------------------------------------------------------------------- server


class Server:
    """object_server.py in its own process, serving `root` on 127.0.0.1 (any free port)."""

    def __init__(self, root: Path, latency_ms: float, rate: float | None = None):
        cmd = [sys.executable, str(SERVER), str(root), "--port", "0", "--latency-ms", str(latency_ms)]
        if rate:
            cmd += ["--rate", str(int(rate))]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("listening on "):
            self.proc.kill()
            raise RuntimeError(f"object_server did not start: {line!r} {self.proc.stderr.read()[-500:]}")
        self.base = line.split()[2]
        self.line = line.strip()

    def _call(self, path: str, method: str = "GET") -> dict:
        req = urllib.request.Request(self.base + path, method=method)
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read())

    def stats(self) -> dict:
        return self._call("/__stats")

    def reset(self) -> None:
        self._call("/__reset", "POST")

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


# ----------------------------------------------------------------------------- reading


def _open(name: str, url: str, threads: int):
    return readers_mod.make_reader(name, url, threads)


def _same(got, want) -> str:
    got = [np.asarray(g) for g in got]
    if len(got) != len(want):
        return f"MISMATCH: {len(got)} results, expected {len(want)}"
    bad = [i for i, (g, r) in enumerate(zip(got, want))
           if g.shape != r.shape or g.dtype != r.dtype
           or not np.array_equal(np.ascontiguousarray(g).view(np.uint8), np.ascontiguousarray(r).view(np.uint8))]
    return f"MISMATCH in {len(bad)}/{len(want)} results (first: #{bad[0]})" if bad else "ok"


def measure(names: list[str], url: str, threads: int, batches: list, server: Server, *, ref=None,
            slow_s: float = 5.0, time_slow: bool = True, first_tries: int = 3, settle: int = 0) -> dict[str, dict]:
    """Round 0: warm-up (+ check against `ref`, a list of expected crop lists per batch),
    then `settle` untimed batches per reader (a training loop's first batches: readers that
    tune themselves, like lsio's measured coalescing, settle; the same for every reader);
    rounds 1..: timed, rotating order. Then first-batch latency with fresh readers.
    Returns per reader: status, check, times, per-round server counters, first-batch."""
    res: dict[str, dict] = {}
    live = []
    for name in names:
        r = {"status": "ok", "check": "-", "times_s": [], "requests": [], "bytes": [], "in_flight_max": [],
             "lsio_stats": [], "first_s": [], "first_requests": [], "first_bytes": []}
        res[name] = r
        miss = readers_mod.remote_missing(name)
        if miss:
            r["status"] = f"not installed ({', '.join(miss)})"
            continue
        try:
            r["reader"] = _open(name, url, threads)
            r["config"] = r["reader"].config()
            live.append(name)
        except Exception as e:  # noqa: BLE001 - a failing peer is reported, not fatal
            r["status"] = f"error: {type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
            log(f"    {name}: cannot open: {r['status']}")
    rounds = len(batches) - 1
    for k in range(rounds + 1 if live else 0):
        b = batches[k]
        order = live if k == 0 else live[k % len(live):] + live[:k % len(live)]
        for name in order:
            r = res[name]
            if r["status"] != "ok" or (k > 0 and r.get("slow") and (not time_slow or k > 1)):
                continue
            rd = r["reader"]
            try:
                server.reset()
                s0 = rd.stats() if hasattr(rd, "stats") else None
                t0 = time.perf_counter()
                got = rd.crops(b.starts, b.shape)
                dt = time.perf_counter() - t0
                st = server.stats()
                s1 = rd.stats() if hasattr(rd, "stats") else None
            except Exception as e:  # noqa: BLE001
                r["status"] = f"error: {type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
                log(f"    {name}: {r['status']}")
                continue
            if k == 0:
                r["warmup_s"] = dt
                if ref is not None:
                    r["check"] = _same(got, ref)
                    if r["check"] != "ok":
                        r["status"] = r["check"]
                        log(f"    {name}: {r['status']} vs zarr-python (local)")
                else:
                    r["check"] = "unchecked"
                if dt > slow_s:
                    r["slow"] = True
                    log(f"    {name}: warm-up took {dt:.1f} s: "
                        f"{'timed in 1 round' if time_slow else 'not timed (quick mode)'}")
            else:
                r["times_s"].append(dt)
                r["requests"].append(st["requests"])
                r["bytes"].append(st["bytes"])
                r["in_flight_max"].append(st["in_flight_max"])
                r["round_batches"] = r.get("round_batches", []) + [k]
                if s0 is not None:
                    r["lsio_stats"].append({key: s1[key] - s0[key] for key in s1})
            del got
        if k == 0 and settle and rounds:
            for name in live:
                r = res[name]
                if r["status"] != "ok" or r.get("slow"):
                    continue
                for j in range(settle):
                    b2 = batches[1 + j % rounds]
                    r["reader"].crops(b2.starts, b2.shape)
        gc.collect()
    for name in live:
        res[name].pop("reader").close()
    # First batch: a fresh reader object (open + first batch), rotating order.
    for k in range(first_tries if live else 0):
        b = batches[1 + k % rounds] if rounds else batches[0]
        order = live[k % len(live):] + live[:k % len(live)] if live else []
        for name in order:
            r = res[name]
            if r["status"] != "ok" or (r.get("slow") and (not time_slow or k > 0)):
                continue
            try:
                server.reset()
                t0 = time.perf_counter()
                rd = _open(name, url, threads)
                rd.crops(b.starts, b.shape)
                dt = time.perf_counter() - t0
                st = server.stats()
                rd.close()
                del rd
            except Exception as e:  # noqa: BLE001
                r["status"] = f"error (first batch): {type(e).__name__}: {str(e)[:160]}"
                continue
            r["first_s"].append(dt)
            r["first_requests"].append(st["requests"])
            r["first_bytes"].append(st["bytes"])
        gc.collect()
    return res


def make_rows(res: dict[str, dict], batches: list, needed: list[int], threads: int, cache: str,
              extra: dict | None = None) -> list[dict]:
    rows = []
    for name, r in res.items():
        row = {"workload": "W7", "cache": cache, "reader": name, "kind": "reader", "threads": threads,
               "unit": "crops", "status": r["status"], "check": r["check"], "times_s": r["times_s"],
               "config": r.get("config"), **(extra or {})}
        if r.get("slow"):
            row["slow"] = True
            row["warmup_s"] = r.get("warmup_s")
        if r["status"] == "ok" and r["times_s"]:
            idx = r["round_batches"]
            row["median_s"] = statistics.median(r["times_s"])
            row["units_per_s"] = statistics.median(batches[i].units / t for i, t in zip(idx, r["times_s"]))
            row["MBps"] = statistics.median(batches[i].out_bytes / t / 1e6 for i, t in zip(idx, r["times_s"]))
            row["requests_per_batch"] = statistics.median(r["requests"])
            row["requests_all"] = r["requests"]
            row["bytes_per_batch"] = statistics.median(r["bytes"])
            row["needed_bytes_per_batch"] = statistics.median(needed[i] for i in idx)
            row["fetched_per_used"] = statistics.median(r["bytes"][j] / needed[i] for j, i in enumerate(idx))
            row["in_flight_max"] = max(r["in_flight_max"])
            if r["lsio_stats"]:
                row["lsio_stats"] = r["lsio_stats"]
                row["lsio_requests_per_batch"] = statistics.median(s["requests"] for s in r["lsio_stats"])
                row["lsio_fetched_per_used"] = statistics.median(
                    s["bytes_fetched"] / max(1, s["bytes_used"]) for s in r["lsio_stats"])
        elif r["status"] == "ok":
            row["status"] = "not timed (slow)"
        if r["first_s"]:
            row["first_batch_s"] = statistics.median(r["first_s"])
            row["first_batch_requests"] = statistics.median(r["first_requests"])
            row["first_batch_all_s"] = r["first_s"]
        rows.append(row)
    return rows


# ----------------------------------------------------------------------------- capped (netns)


def _tc_rate(rate: float) -> list[str]:
    bits = int(rate * 8)
    burst = max(256 << 10, int(rate / 250) * 2)  # >= rate / HZ, and >= loopback's 64 KiB MTU
    return ["rate", f"{bits}bit", "burst", str(burst), "latency", "100ms"]


def run_capped(args, store: Path, batches: list, needed: list[int], rate: float, latency_ms: float,
               threads: int, names: list[str]) -> list[dict]:
    """Capped rows: a child in its own network namespace with tc tbf on lo, else the server's
    token bucket."""
    tmp = Path(args.out) / "w7_capped"
    tmp.mkdir(parents=True, exist_ok=True)
    np.savez(tmp / "batches.npz", starts=np.stack([b.starts for b in batches]), shape=np.asarray(batches[0].shape))
    child = [sys.executable, str(Path(__file__)), "--store", str(store), "--batches", str(tmp / "batches.npz"),
             "--rate", str(rate), "--latency-ms", str(latency_ms), "--threads", str(threads),
             "--readers", ",".join(names), "--out", str(tmp / "capped.json")]
    method, res = None, None
    why = ""
    if os.geteuid() == 0 and shutil.which("unshare") and shutil.which("tc") and shutil.which("ip"):
        p = subprocess.run(["unshare", "-n", "--", *child, "--netns"], capture_output=True, text=True, timeout=900)
        if p.returncode == 0:
            res = json.loads((tmp / "capped.json").read_text())
            method = f"tc tbf on lo in a network namespace ({' '.join(_tc_rate(rate))})"
        else:
            why = (p.stderr.strip() or p.stdout.strip())[-300:]
            log(f"    tc/netns cap failed ({why}); falling back to the server's token bucket")
    else:
        why = "not root or no unshare/tc/ip"
    if res is None:
        p = subprocess.run(child, capture_output=True, text=True, timeout=900)
        if p.returncode != 0:
            raise RuntimeError(f"capped child failed: {(p.stderr or p.stdout)[-500:]}")
        res = json.loads((tmp / "capped.json").read_text())
        method = f"object_server.py token bucket ({why})"
    cache = f"remote {latency_ms:g} ms, capped {rate / 1e6:g} MB/s"
    for r in res.values():
        if r["check"] == "unchecked":
            r["check"] = "ok (uncapped rows)"  # same reader code, checked in the uncapped warm-up
    rows = make_rows(res, batches, needed, threads, cache, {"cap_method": method, "rate": rate})
    # The link bound: the cap moving exactly the needed bytes.
    idx = range(1, len(batches))
    bound = {"workload": "W7", "cache": cache, "reader": f"limit: link {rate / 1e6:g} MB/s", "kind": "limit",
             "threads": threads, "unit": "crops", "status": "ok", "check": "n/a", "times_s": [],
             "median_s": statistics.median(needed[i] / rate for i in idx),
             "units_per_s": statistics.median(batches[i].units / (needed[i] / rate) for i in idx),
             "MBps": statistics.median(batches[i].out_bytes / (needed[i] / rate) / 1e6 for i in idx),
             "needed_bytes_per_batch": statistics.median(needed[i] for i in idx), "cap_method": method, "rate": rate}
    return rows + [bound]


def _child_main(argv=None) -> int:
    """The capped measurement, run by run_capped (inside `unshare -n` with --netns)."""
    p = argparse.ArgumentParser()
    p.add_argument("--store", type=Path, required=True)
    p.add_argument("--batches", type=Path, required=True)
    p.add_argument("--rate", type=float, required=True)
    p.add_argument("--latency-ms", type=float, default=20)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--readers", default="lsio")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--netns", action="store_true", help="cap with tc tbf on lo (we are in our own netns)")
    a = p.parse_args(argv)
    if a.netns:
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
        subprocess.run(["tc", "qdisc", "add", "dev", "lo", "root", "tbf", *_tc_rate(a.rate)], check=True)
    d = np.load(a.batches)
    shape = tuple(int(x) for x in d["shape"])

    class B:  # the fields measure() uses
        def __init__(self, starts):
            self.starts, self.shape = starts, shape

    batches = [B(s) for s in d["starts"]]
    server = Server(a.store.parent, a.latency_ms, None if a.netns else a.rate)
    try:
        res = measure(a.readers.split(","), server.base + "/" + a.store.name, a.threads, batches, server,
                      ref=None, slow_s=1e9, first_tries=1, settle=SETTLE_BATCHES)
    finally:
        server.close()
    for r in res.values():
        r.pop("reader", None)
    a.out.write_text(json.dumps(res, default=str))
    return 0


# ----------------------------------------------------------------------------- the workload


def remote_versions() -> dict:
    import importlib.metadata as md

    out = {}
    for dist in ("obstore", "fsspec", "aiohttp"):
        try:
            out[dist] = md.version(dist)
        except md.PackageNotFoundError:
            out[dist] = None
    return out


def run(w, args, store: Path, spec, make_batches, log_line) -> dict:
    """W7 for suite.py: returns {"rows", "details"} like suite.run_workload."""
    layout = ShardLayout.open(store)
    rounds = args.rounds if args.rounds is not None else (2 if args.quick else w.rounds)
    threads = args.threads
    rng = np.random.default_rng([args.seed, 7, threads])
    batches = make_batches(w, layout, np.dtype(spec.dtype).itemsize, rounds + 1, args.quick, rng)
    needed = [byte_ranges(layout, b.chunks).nbytes for b in batches]
    b = batches[0]
    latency = args.w7_latency_ms
    log(f"  W7 threads={threads}: {rounds} timed rounds + 1 warm-up; per batch {b.units} crops, "
        f"{len(b.chunks)} chunks, {needed[0] / 2**20:.1f} MiB of chunk bytes needed, {b.out_bytes / 2**20:.1f} MiB out")
    names = [n for n in readers_mod.REMOTE_READERS if not args.readers or n in args.readers]
    # Reference: zarr-python on the local store, per batch (untimed).
    zp = readers_mod.make_reader("zarr-python", store, threads)
    refs = [[np.asarray(x) for x in zp.crops(x.starts, x.shape)] for x in batches[:1]]
    zp.close()
    try:
        import aiohttp  # noqa: F401  (object_server.py needs it)
    except ImportError:
        log("  W7 needs aiohttp for object_server.py (pip install aiohttp): not run")
        return {"rows": [{"workload": "W7", "cache": f"remote {latency:g} ms", "reader": n, "kind": "reader",
                          "threads": threads, "unit": "crops", "status": "not run (aiohttp not installed)",
                          "check": "-", "times_s": []} for n in names], "details": [{"latency_ms": latency}]}
    server = Server(store.parent, latency)
    log(f"  object_server: {server.line}")
    url = server.base + "/" + store.name
    t0 = time.perf_counter()
    try:
        res = measure(names, url, threads, batches, server, ref=refs[0],
                      slow_s=2.0 if args.quick else 5.0, time_slow=not args.quick,
                      first_tries=1 if args.quick else min(3, rounds),
                      settle=0 if args.quick else SETTLE_BATCHES)
    finally:
        server.close()
    cache = f"remote {latency:g} ms"
    rows = make_rows(res, batches, needed, threads, cache, {"latency_ms": latency})
    for row in rows:
        log("    " + log_line(row))
    details = {"threads": threads, "rounds": rounds, "latency_ms": latency, "seconds": time.perf_counter() - t0,
               "needed_bytes": needed, "batch_units": [x.units for x in batches], "server": server.line,
               "reference": "zarr-python (local store)", "peer_versions": remote_versions()}
    if args.w7_rate and not args.quick:
        cnames = [n for n in CAPPED_READERS if not args.readers or n in args.readers]
        cr = max(2, min(3, rounds))
        t1 = time.perf_counter()
        try:
            crows = run_capped(args, store, batches[:cr + 1], needed[:cr + 1], args.w7_rate, latency, threads, cnames)
        except Exception as e:  # noqa: BLE001
            crows = [{"workload": "W7", "cache": f"remote {latency:g} ms, capped", "reader": "lsio", "kind": "reader",
                      "threads": threads, "unit": "crops", "status": f"error: {e}", "check": "-", "times_s": []}]
        for row in crows:
            log("    " + log_line(row))
        rows += crows
        details["capped_seconds"] = time.perf_counter() - t1
    return {"rows": rows, "details": [details]}


if __name__ == "__main__":
    sys.exit(_child_main())

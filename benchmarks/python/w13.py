"""W13: reads through zarr-python's own API with each codec pipeline (used by suite.py).

zarr-python 3 reads every selection through a codec pipeline chosen by the config key
``codec_pipeline.path``; W13 runs the same reads through three of them:

  zarr default pipeline   zarr.core.codec_pipeline.BatchedCodecPipeline
  zarrs pipeline          zarrs.ZarrsCodecPipeline (zarrs-python)
  lsio pipeline           lsio.zarr.LsioCodecPipeline

beside ``lsio native`` (lsio's own API on the same store: the reference every result is
checked against, bit for bit, and a measure of what zarr-python's own per-call work costs).

Cases (page cache hot, the suite's stores):

  crops arr[box]     W1's batches (16 random (4,256,256) float32 crops, the same seed, so the
                     same crops as W1) as 16 ``z[box]`` calls spread over N Python threads
                     (a persistent ThreadPoolExecutor(N), N = --threads); native: one
                     ``read_crops`` call.
  chunks oindex      W3's reads (random single 64^3 uint16 inner chunks of the volume store,
                     same seed as W3's N-thread rows) as ``z.oindex[box]`` calls (box: slices)
                     over N Python threads; native: ``Array.read(box)`` on N Python threads
                     (arrays opened with threads=1, as W3's lsio row).
  xarray isel crops  W1's batches through ``xr.open_zarr(store, consolidated=False,
                     chunks=None)["t2m"].isel(...).values`` (no dask: xarray's lazy indexing
                     straight to zarr) over N Python threads. The store is a group wrapping
                     the W1 array (its ``c/`` directory is a symlink to W1's, its zarr.json
                     gains dimension_names); native: ``xr.open_dataset(..., engine="lsio")``.
  dask mean          ``dask.array.from_zarr(z, chunks=z.shards).mean().compute(scheduler=
                     "threads", num_workers=N)`` over W5's 1 GiB array; native:
                     ``lsio.open(...).to_dask()`` (the same chunks). Checked: the mean's bits
                     and, in the warm-up round, the CRC-32 of a full ``z[...]`` read.

Threads: for every pipeline zarr's ``async.concurrency`` and ``threading.max_workers`` = N
(the executor of zarr's event loop is replaced to take it); zarrs takes
``threading.max_workers`` as its Rust thread count and ``codec_pipeline.chunk_concurrent_maximum``
= N (zarrs-python 0.2 has no other thread option; both are fixed when a pipeline is
created, so they are set before opening); lsio's pipeline opens its arrays with
``codec_pipeline.lsio_options = {"threads": N}``. ``codec_pipeline.strict`` is true, so
neither zarrs nor lsio can fall back to zarr's pipeline silently; lsio's ``stats()`` (reads
served, fallbacks) is kept in the JSON.

Rounds: an untimed warm-up whose results are checked against lsio native's, then timed
rounds in a rotating order; medians are reported. A pipeline that is not installed or fails
gets a row saying so.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import statistics
import time
import traceback
import zlib
from pathlib import Path
from typing import Any, Callable

import numpy as np

import readers as readers_mod
from stores import ShardLayout

PIPELINES = {
    "zarr default pipeline": "zarr.core.codec_pipeline.BatchedCodecPipeline",
    "zarrs pipeline": "zarrs.ZarrsCodecPipeline",
    "lsio pipeline": "lsio.zarr.LsioCodecPipeline",
}
NATIVE = "lsio native"
CROP_CASES = ("crops arr[box]", "xarray isel crops")  # targets: >= 3x default, >= 1.5x zarrs
CASES = ("crops arr[box]", "chunks oindex", "xarray isel crops", "dask mean")
VAR = "t2m"
DIMS = ("time", "lat", "lon")


def log(msg: str = "") -> None:
    print(msg, flush=True)


def _err(e: BaseException) -> str:
    msg = str(e).splitlines()[0][:160] if str(e) else ""
    return f"error: {type(e).__name__}: {msg}"


def _boxes(starts, shape) -> list[tuple[slice, ...]]:
    return [tuple(slice(int(s), int(s) + int(n)) for s, n in zip(row, shape)) for row in starts]


def _same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and \
        bool(np.array_equal(np.ascontiguousarray(a).view(np.uint8), np.ascontiguousarray(b).view(np.uint8)))


def xarray_store(weather: Path, cache_dir: Path) -> Path:
    """A Zarr v3 group with one array ``t2m`` (dims time, lat, lon) whose chunks are the W1
    store's own files (a symlinked ``c/``): xarray needs dimension names, the data stays W1's."""
    path = cache_dir / f"w13_xarray_{weather.name}"
    meta = json.loads((weather / "zarr.json").read_text())
    meta["dimension_names"] = list(DIMS)
    link = path / VAR / "c"
    target = (weather / "c").resolve()
    if link.is_symlink() and link.resolve() == target and (path / "zarr.json").exists():
        return path
    (path / VAR).mkdir(parents=True, exist_ok=True)
    (path / "zarr.json").write_text(json.dumps({"zarr_format": 3, "node_type": "group", "attributes": {}}))
    (path / VAR / "zarr.json").write_text(json.dumps(meta))
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(target, target_is_directory=True)
    return path


class Case:
    """One W13 case: batches, and per contender a reader function batch -> result."""

    def __init__(self, cid: str, unit: str, batches: list, store: Path):
        self.id, self.unit, self.batches, self.store = cid, unit, batches, store
        self.fns: dict[str, Callable] = {}
        self.status: dict[str, str] = {}
        self.config: dict[str, dict] = {}
        self.check: dict[str, str] = {}
        self.times: dict[str, list[float]] = {}


def run(w, args, paths: dict, make_batches, wdefs: dict, log_line) -> dict:
    """W13 for suite.py: returns {"rows", "details"} like suite.run_workload. ``paths``: store
    key -> (path, spec); ``wdefs``: the suite's WorkloadDefs by id (W1's, W3's, W5's batches)."""
    import zarr

    threads = args.threads
    quick = args.quick
    pool = concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="w13")

    def pmap(fn, items):
        return list(pool.map(fn, items))

    installed = {"zarr default pipeline": True}
    why = {}
    for name, mod in (("zarrs pipeline", "zarrs"), ("lsio pipeline", "lsio.zarr")):
        try:
            __import__(mod)
            installed[name] = True
        except Exception as e:  # noqa: BLE001 - reported as a row
            installed[name] = False
            why[name] = "not installed" if isinstance(e, ModuleNotFoundError) else _err(e)
    for mod in ("xarray", "dask.array"):
        try:
            __import__(mod)
        except Exception as e:  # noqa: BLE001
            why[mod] = "not installed" if isinstance(e, ModuleNotFoundError) else _err(e)

    conf = {"async.concurrency": threads, "threading.max_workers": threads, "codec_pipeline.strict": True,
            "codec_pipeline.lsio_options": {"threads": threads},
            "codec_pipeline.chunk_concurrent_maximum": threads}
    details = {"threads": threads, "zarr_config": conf, "python_threads": threads,
               "versions": {"lsio": _lsio_version(), "zarr": zarr.__version__, **{k: readers_mod._version(d) for k, d in
                            (("zarrs", "zarrs"), ("xarray", "xarray"), ("dask", "dask"))}}}
    rows: list[dict] = []
    with zarr.config.set(conf):
        readers_mod.set_zarr_threads(threads)
        cases = []
        for cid in CASES:
            try:
                cases.append(_make_case(cid, args, paths, make_batches, wdefs, installed, why, threads, pmap))
            except Exception as e:  # noqa: BLE001 - a case that cannot be set up is a row, not a crash
                log(f"    {cid}: cannot set up: {_err(e)}")
                rows.append({"workload": "W13", "cache": "hot", "case": cid, "reader": "(all)", "kind": "pipeline",
                             "threads": threads, "unit": "-", "status": _err(e), "check": "-", "times_s": [],
                             "traceback": traceback.format_exc()})
        for case in cases:
            rounds = args.rounds if args.rounds is not None else (2 if quick else _default_rounds(case.id))
            rounds = min(rounds, len(case.batches) - 1)
            b0 = case.batches[0]
            log(f"  W13 {case.id} threads={threads}: {rounds} timed rounds + 1 warm-up; per batch {b0.units} "
                f"{case.unit}, {b0.out_bytes / 2**20:.1f} MiB out; store {case.store.name}")
            lsio_before = _lsio_stats()
            _run_case(case, rounds)
            lsio_after = _lsio_stats()
            if lsio_before is not None and "lsio pipeline" in case.config:
                case.config["lsio pipeline"]["lsio.zarr.stats() delta"] = {
                    k: lsio_after[k] - lsio_before[k] for k in lsio_after}
                d = case.config["lsio pipeline"]["lsio.zarr.stats() delta"]
                if case.status.get("lsio pipeline") == "ok" and (d.get("fallback_reads") or not d.get("reads")):
                    case.status["lsio pipeline"] = f"error: lsio served {d.get('reads')} reads, " \
                                                   f"{d.get('fallback_reads')} fell back"
            for row in _rows(case, threads, rounds):
                rows.append(row)
                log("    " + log_line(row))
    pool.shutdown(wait=True)
    return {"rows": rows, "details": [details]}


def _lsio_version():
    try:
        import lsio

        return getattr(lsio, "__version__", None) or readers_mod._version("lsio")
    except Exception:  # noqa: BLE001
        return None


def _default_rounds(cid: str) -> int:
    return {"crops arr[box]": 10, "chunks oindex": 5, "xarray isel crops": 10, "dask mean": 3}[cid]


def _lsio_stats():
    try:
        import lsio.zarr

        return lsio.zarr.stats()
    except Exception:  # noqa: BLE001
        return None


def _open_zarr(path: Path, pipeline: str):
    import zarr

    with zarr.config.set({"codec_pipeline.path": pipeline}):
        z = zarr.open_array(str(path), mode="r")
    got = type(z.async_array.codec_pipeline).__name__
    want = pipeline.rsplit(".", 1)[1]
    if got != want:
        raise RuntimeError(f"pipeline {want} not active (got {got})")
    return z


def _make_case(cid, args, paths, make_batches, wdefs, installed, why, threads, pmap) -> Case:
    import lsio

    rounds = args.rounds if args.rounds is not None else (2 if args.quick else _default_rounds(cid))
    key = {"crops arr[box]": "weather", "chunks oindex": "volume", "xarray isel crops": "weather",
           "dask mean": "full"}[cid]
    wid = {"crops arr[box]": "W1", "chunks oindex": "W3", "xarray isel crops": "W1", "dask mean": "W5"}[cid]
    store, spec = paths[key]
    layout = ShardLayout.open(store)
    rng = np.random.default_rng([args.seed, int(wid[1:]), threads])  # the same batches as W1/W3/W5
    batches = make_batches(wdefs[wid], layout, np.dtype(spec.dtype).itemsize, rounds + 1, args.quick, rng)
    unit = "chunks" if cid in ("chunks oindex", "dask mean") else "crops"
    if cid == "xarray isel crops":
        store = xarray_store(store, args.cache_dir)
    case = Case(cid, unit, batches, store)

    def add(name, make, config):
        case.config[name] = config
        if name in PIPELINES and not installed.get(name):
            case.status[name] = why.get(name, "not installed")
            return
        for mod in ("xarray",) if cid.startswith("xarray") else ("dask.array",) if cid == "dask mean" else ():
            if mod in why:
                case.status[name] = f"{mod}: {why[mod]}"
                return
        try:
            case.fns[name] = make()
            case.status[name] = "ok"
        except Exception as e:  # noqa: BLE001
            case.status[name] = _err(e)
            case.config[name]["traceback"] = traceback.format_exc()
            log(f"    {cid} {name}: cannot open: {case.status[name]}")

    if cid == "crops arr[box]":
        def native():
            la = lsio.open(str(store), threads=threads)
            return lambda b: la.read_crops(b.starts, b.shape)

        add(NATIVE, native, {"call": "Array.read_crops(starts, shape)", "threads": threads})
        for name, p in PIPELINES.items():
            def make(p=p):
                z = _open_zarr(store, p)
                return lambda b: pmap(z.__getitem__, _boxes(b.starts, b.shape))

            add(name, make, {"call": f"z[box] x16 on {threads} Python threads", "codec_pipeline.path": p})
    elif cid == "chunks oindex":
        def native():
            la = lsio.open(str(store), threads=1)
            return lambda b: pmap(la.read, _boxes(b.starts, b.shape))

        add(NATIVE, native, {"call": f"Array.read(box) on {threads} Python threads, arrays threads=1"})
        for name, p in PIPELINES.items():
            def make(p=p):
                z = _open_zarr(store, p)
                return lambda b: pmap(lambda box: z.oindex[box], _boxes(b.starts, b.shape))

            add(name, make, {"call": f"z.oindex[box] on {threads} Python threads", "codec_pipeline.path": p})
    elif cid == "xarray isel crops":
        def isel_fn(ds):
            v = ds[VAR]

            def one(box):
                return v.isel({d: s for d, s in zip(DIMS, box)}).values

            return lambda b: pmap(one, _boxes(b.starts, b.shape))

        def native():
            import xarray as xr
            from lsio.xarray_backend import LsioBackendEntrypoint  # engine="lsio" once lsio is installed

            return isel_fn(xr.open_dataset(str(store), engine=LsioBackendEntrypoint, threads=threads, chunks=None))

        add(NATIVE, native, {"call": f"xr.open_dataset(engine='lsio', threads={threads}).isel(...).values "
                                     f"on {threads} Python threads"})
        for name, p in PIPELINES.items():
            def make(p=p):
                import xarray as xr
                import zarr

                with zarr.config.set({"codec_pipeline.path": p}):
                    ds = xr.open_zarr(str(store), consolidated=False, chunks=None)
                return isel_fn(ds)

            add(name, make, {"call": f"xr.open_zarr(consolidated=False, chunks=None).isel(...).values on "
                                     f"{threads} Python threads", "codec_pipeline.path": p})
    else:  # dask mean
        def mean(x):
            return x.mean().compute(scheduler="threads", num_workers=threads)

        def native():
            import lsio.dask  # noqa: F401

            la = lsio.open(str(store), threads=threads)
            x = la.to_dask()
            return lambda b, full=False: (mean(x), la.read(()) if full else None)

        add(NATIVE, native, {"call": f"lsio.open(threads={threads}).to_dask().mean(), threaded scheduler "
                                     f"num_workers={threads}"})
        for name, p in PIPELINES.items():
            def make(p=p):
                import dask.array as da

                z = _open_zarr(store, p)
                x = da.from_zarr(z, chunks=z.shards or z.chunks)
                return lambda b, full=False: (mean(x), z[...] if full else None)

            add(name, make, {"call": f"dask.array.from_zarr(z, chunks=z.shards).mean(), threaded scheduler "
                                     f"num_workers={threads}", "codec_pipeline.path": p})
    return case


def _compare(case: Case, got: Any, ref: Any) -> str:
    if case.id == "dask mean":
        (m, full), (rm, rfull) = got, ref
        if not _same(np.asarray(m), np.asarray(rm)):
            return f"MISMATCH: mean {m!r} vs {rm!r}"
        if full is not None and rfull is not None:
            if full.shape != rfull.shape or zlib.crc32(np.ascontiguousarray(full)) != zlib.crc32(rfull):
                return "MISMATCH: full read (crc32)"
        return "ok"
    got = [np.asarray(g) for g in got]
    ref = [np.asarray(r) for r in ref]
    if len(got) != len(ref):
        return f"MISMATCH: {len(got)} results, expected {len(ref)}"
    bad = [i for i, (g, r) in enumerate(zip(got, ref)) if not _same(g, r)]
    return f"MISMATCH in {len(bad)}/{len(ref)} results (first: #{bad[0]})" if bad else "ok"


def _run_case(case: Case, rounds: int) -> None:
    names = [n for n in (NATIVE, *PIPELINES) if case.status.get(n) == "ok"]
    b0 = case.batches[0]
    # Warm-up: lsio native first (the reference), then each pipeline, checked bit for bit.
    ref = None
    for n in names:
        try:
            res = case.fns[n](b0, True) if case.id == "dask mean" else case.fns[n](b0)
        except Exception as e:  # noqa: BLE001
            case.status[n] = _err(e)
            log(f"    {case.id} {n}: {case.status[n]}")
            continue
        if n == NATIVE:
            ref = res
            case.check[n] = "reference"
        elif ref is None:
            case.check[n] = "unchecked (lsio native failed)"
        else:
            case.check[n] = _compare(case, res, ref)
            if case.check[n] != "ok":
                case.status[n] = case.check[n]
                log(f"    {case.id} {n}: {case.check[n]} vs lsio native")
        del res
    del ref
    live = [n for n in names if case.status.get(n) == "ok"]
    for n in live:
        case.times[n] = []
    for r in range(1, rounds + 1):
        b = case.batches[r]
        for n in live[r % len(live):] + live[:r % len(live)]:
            if case.status[n] != "ok":
                continue
            try:
                t0 = time.perf_counter()
                res = case.fns[n](b)
                dt = time.perf_counter() - t0
            except Exception as e:  # noqa: BLE001
                case.status[n] = _err(e)
                log(f"    {case.id} {n}: {case.status[n]}")
                continue
            case.times[n].append(dt)
            del res


def _rows(case: Case, threads: int, rounds: int) -> list[dict]:
    rows = []
    for n in (*PIPELINES, NATIVE):
        if n not in case.status:
            continue
        row = {"workload": "W13", "cache": "hot", "case": case.id, "reader": n,
               "kind": "reference" if n == NATIVE else "pipeline", "threads": threads, "unit": case.unit,
               "status": case.status[n], "check": case.check.get(n, "-"), "times_s": case.times.get(n, []),
               "config": case.config.get(n), "store": str(case.store)}
        ts = row["times_s"]
        if ts and row["status"] == "ok":
            row["median_s"] = statistics.median(ts)
            row["units_per_s"] = statistics.median(case.batches[i + 1].units / t for i, t in enumerate(ts))
            row["MBps"] = statistics.median(case.batches[i + 1].out_bytes / t / 1e6 for i, t in enumerate(ts))
        rows.append(row)
    return rows


def targets(w, threads: int, rows: list[dict]) -> list[dict]:
    """Per case: the lsio pipeline's rate over the default pipeline's and zarrs'; crop cases
    need >= 3x default and >= 1.5x zarrs, every case >= 1x both. Adds lsio_ratio to rows."""
    out = []
    by_case: dict[str, list[dict]] = {}
    for r in rows:
        by_case.setdefault(r.get("case"), []).append(r)
    for cid, rs in by_case.items():
        rate = {r["reader"]: r["units_per_s"] for r in rs if r.get("status") == "ok" and "units_per_s" in r}
        lsio_rate = rate.get("lsio pipeline")
        if lsio_rate is None:
            continue
        for r in rs:
            if r["reader"] in rate and r["reader"] != "lsio pipeline":
                r["lsio_ratio"] = lsio_rate / rate[r["reader"]]
        need = {"zarr default pipeline": 3.0, "zarrs pipeline": 1.5} if cid in CROP_CASES else \
            {"zarr default pipeline": 1.0, "zarrs pipeline": 1.0}
        checks = []
        for peer, k in need.items():
            if peer in rate:
                x = lsio_rate / rate[peer]
                checks.append((x >= k, f"{x:.2f}x {'default' if peer.startswith('zarr ') else 'zarrs'}"))
        if not checks:
            continue
        met = all(m for m, _ in checks)
        detail = ", ".join(d for _, d in checks)
        row = next(r for r in rs if r["reader"] == "lsio pipeline")
        row["target"] = ("met" if met else "missed") + f" ({detail})"
        target = ("lsio pipeline >= 3x default, >= 1.5x zarrs" if cid in CROP_CASES
                  else "lsio pipeline >= default and >= zarrs")
        out.append({"workload": "W13", "cache": "hot", "threads": threads, "reader": f"lsio pipeline ({cid})",
                    "target": target, "met": bool(met), "detail": detail})
    return out

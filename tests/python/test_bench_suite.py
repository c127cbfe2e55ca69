"""Smoke test of the benchmark suite (benchmarks/python/suite.py) so it cannot rot.

Runs `suite.py --quick --only W1 --rounds 1` into a temporary directory (stores included,
about 10-30 s) and checks the JSON's structure and that every reader's result matched
zarr-python's. It asserts no timing: speed is measured by the suite, never by tests.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "benchmarks" / "python" / "suite.py"


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    pytest.importorskip("zarr", minversion="3")
    tmp = tmp_path_factory.mktemp("bench")
    cmd = [sys.executable, str(SUITE), "--quick", "--only", "W1", "--rounds", "1", "--out", str(tmp / "out"),
           "--cache-dir", str(tmp / "cache"), "--results-md", str(tmp / "RESULTS.md")]
    env = dict(os.environ, LSIO_BENCH_COMMAND="pytest smoke")
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=tmp)
    return tmp, p


def test_suite_runs_and_checks_pass(quick_run):
    tmp, p = quick_run
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    doc = json.loads((tmp / "out" / "results.json").read_text())
    for key in ("date", "command", "mode", "machine", "versions", "stores", "cold_check", "workloads",
                "rows", "targets", "checks_passed", "elapsed_s"):
        assert key in doc, key
    assert doc["mode"] == "quick"
    assert doc["command"] == "pytest smoke"
    assert doc["checks_passed"] is True
    assert set(doc["workloads"]) == {"W1"}
    assert doc["machine"]["cpus"] >= 1 and "kernel" in doc["machine"]

    (store,) = doc["stores"].values()
    assert 1.0 < store["ratio"] < 5.0  # realistic data, not a 25x-compressible toy

    rows = {r["reader"]: r for r in doc["rows"]}
    assert rows["lsio"]["status"] == "ok" and rows["lsio"]["check"] == "ok"
    assert rows["zarr-python"]["status"] == "ok"
    for name, r in rows.items():
        assert not str(r["status"]).startswith(("MISMATCH", "error")), (name, r["status"])
        if r["kind"] == "reader" and r["status"] == "ok":
            assert r["check"] == "ok", name
            assert len(r["times_s"]) == 1 and r["units_per_s"] > 0 and r["MBps"] > 0
        if r["status"] == "not installed":
            assert r["reader"] in ("tensorstore", "zarrs")
    for limit in ("limit: raw read pread", "limit: zstd 1 thread x2", "limit: memcpy output"):
        assert rows[limit]["status"] == "ok", rows[limit]
        assert rows[limit]["units_per_s"] > 0
    assert rows["limit: raw read pread"]["read_bytes_per_batch"] > 0
    assert any(v["workload"] == "W1" and v["reader"] == "lsio" for v in doc["targets"])


def test_suite_writes_report_files(quick_run):
    tmp, p = quick_run
    assert p.returncode == 0
    md = (tmp / "out" / "results.md").read_text()
    assert "| W1 | hot | lsio |" in md
    assert not (tmp / "RESULTS.md").exists()  # only full runs (or --write-results) write it
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    assert (tmp / "out" / "results.png").stat().st_size > 0


def test_w11_runs_in_the_suite(tmp_path):
    """W11 (NetCDF4 file and kerchunk references) through suite.py --quick: every reader's
    first batch equals lsio's, rows for hot and cold, both targets evaluated."""
    for mod in ("netCDF4", "h5py", "kerchunk", "xarray", "h5netcdf", "fsspec", "zarr"):
        pytest.importorskip(mod)
    cmd = [sys.executable, str(SUITE), "--quick", "--only", "W11", "--rounds", "1", "--out", str(tmp_path / "out"),
           "--cache-dir", str(tmp_path / "cache"), "--no-plot"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path,
                       env=dict(os.environ, LSIO_BENCH_COMMAND="pytest smoke"))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    doc = json.loads((tmp_path / "out" / "results.json").read_text())
    rows = [r for r in doc["rows"] if r["workload"] == "W11"]
    assert {r["cache"] for r in rows} == {"hot", "cold"}
    for r in rows:
        assert r["status"] == "ok" and r["check"] == "ok", r
        assert r["units_per_s"] > 0
    names = {r["reader"] for r in rows}
    assert {"lsio", "lsio refs", "zarr-python refs", "netCDF4-python", "h5py", "xarray h5netcdf"} <= names
    assert {(v["cache"], v["reader"]) for v in doc["targets"] if v["workload"] == "W11"} == {
        ("hot", "lsio"), ("hot", "lsio refs"), ("cold", "lsio"), ("cold", "lsio refs")}


def test_limits_module_measures_the_same_bytes(tmp_path):
    """The native limit helpers read and decode what they are given, and report errors."""
    np = pytest.importorskip("numpy")
    from lsio._core import _limits

    import lsio

    data = np.arange(1 << 16, dtype=np.uint8).tobytes()
    f = tmp_path / "f.bin"
    f.write_bytes(data)
    files = np.zeros(4, dtype=np.int64)
    offsets = np.array([0, 1000, 4096, 60000], dtype=np.uint64)
    lengths = np.array([10, 3000, 8192, 5536], dtype=np.uint64)
    ios = ["pread"] + (["uring"] if lsio.io_backend_info()["uring_available"] else [])
    for io in ios:
        for threads in (1, 2):
            assert _limits.raw_read([str(f)], files, offsets, lengths, io=io, threads=threads) >= 0
    with pytest.raises(lsio.CorruptDataError):  # past the end of the file
        _limits.raw_read([str(f)], files[:1], np.array([len(data)], np.uint64), np.array([1], np.uint64))
    with pytest.raises(ValueError):
        _limits.raw_read([str(f)], np.array([1], np.int64), offsets[:1], lengths[:1])
    numcodecs = pytest.importorskip("numcodecs")
    frame = numcodecs.Zstd(level=3).encode(data)
    assert _limits.zstd_decode([frame, frame], len(data), 2) >= 0
    with pytest.raises(lsio.CorruptDataError):
        _limits.zstd_decode([b"not zstd"], 16)
    assert _limits.memcpy(1 << 20, 2) >= 0


def test_w10_checkpoint_benchmark_runs(tmp_path):
    """W10 (benchmarks/python/w10.py) on a 20 MB checkpoint: it writes the checkpoint, checks
    lsio against safetensors' loader byte for byte (it exits non-zero otherwise), runs every
    reader cold and hot, and writes its JSON. No timing is asserted."""
    pytest.importorskip("safetensors")
    w10 = ROOT / "benchmarks" / "python" / "w10.py"
    out = tmp_path / "w10.json"
    cmd = [sys.executable, str(w10), "--gib", "0.02", "--shards", "3", "--rounds", "1",
           "--cache-dir", str(tmp_path / "cache"), "--json", str(out)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "lsio equals safetensors.numpy.load_file" in p.stdout
    doc = json.loads(out.read_text())
    assert doc["shards"] == 3
    readers = {(r["cache"], r["reader"]) for r in doc["rows"]}
    for cache in ("cold", "hot"):
        for reader in ("lsio", "safetensors load_file", "safetensors safe_open", "plain reads", "raw read"):
            assert (cache, reader) in readers


def test_w15_jax_checkpoint_benchmark_runs(tmp_path):
    """W15 (benchmarks/python/w15_jax_ckpt.py) on a 20 MB checkpoint, hot and remote (one paced
    object server per process), one and two jax processes: every reader's shards are checked
    against safetensors in its first run (a mismatch fails the script), lsio's processes read
    half each with two. No timing is asserted."""
    pytest.importorskip("jax")
    pytest.importorskip("safetensors")
    w15 = ROOT / "benchmarks" / "python" / "w15_jax_ckpt.py"
    out = tmp_path / "w15.json"
    cmd = [sys.executable, str(w15), "--gib", "0.02", "--rounds", "1", "--caches", "hot,remote",
           "--rate", "500M", "--latency-ms", "2", "--cache-dir", str(tmp_path / "cache"), "--json", str(out)]
    # The script and its workers import what this process imports (installed lsio in CI).
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(os.path.abspath(p) for p in sys.path if p))
    env.pop("XLA_FLAGS", None)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert p.stdout.count("checked") >= 10, p.stdout
    rows = {(r["cache"], r["reader"], r["processes"]): r for r in json.loads(out.read_text())["rows"]}
    assert set(rows) == {(c, r, n) for c in ("hot", "remote") for r in ("lsio", "design", "safetensors")
                         for n in (1, 2) if not (c == "remote" and r == "safetensors")}
    for cache in ("hot", "remote"):
        assert rows[(cache, "lsio", 2)]["fraction"] <= 0.55
    assert rows[("remote", "lsio", 2)]["disk_per_process"] <= 0.55 * json.loads(out.read_text())["total_bytes"]


def test_w14_records_benchmark_runs(tmp_path):
    """W14 (benchmarks/python/w14_records.py) on 600 records: every reader's first batch is
    checked against the records written (a mismatch exits 1), rows for every reader, cache and
    compression. No timing is asserted."""
    pytest.importorskip("array_record")
    w14 = ROOT / "benchmarks" / "python" / "w14_records.py"
    out = tmp_path / "w14.json"
    cmd = [sys.executable, str(w14), "--records", "600", "--batch", "64", "--batches", "2", "--rounds", "1",
           "--cold-batches", "1", "--dir", str(tmp_path / "data"), "--json", str(out)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(os.path.abspath(p) for p in sys.path if p))
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert p.stdout.count("first batch checked") == 6, p.stdout
    data = json.loads(out.read_text())
    rows = {(r["compression"], r["cache"], r["reader"]) for r in data["rows"]}
    assert rows == {("none", "hot", "lsio"), ("none", "hot", "lsio (copy=False views)"), ("none", "hot", "ArrayRecord"),
                    ("none", "hot", "numpy memmap + offsets"), ("none", "cold", "lsio"), ("none", "cold", "ArrayRecord"),
                    ("none", "cold", "numpy memmap + offsets"), ("zstd", "hot", "lsio"), ("zstd", "hot", "ArrayRecord"),
                    ("zstd", "cold", "lsio"), ("zstd", "cold", "ArrayRecord")}
    assert set(data["append_gb_s"]["zstd"]) == {"lsio append (durable)", "lsio append (durable=False)",
                                                "ArrayRecord write"}


def test_gpu_feed_benchmark_runs(tmp_path):
    """benchmarks/python/gpu_feed.py: without CUDA it skips with one line (exit 0); with
    ``--device cpu`` it runs its whole pipeline (lsio double-buffered, lsio.torch DataLoader
    with 2 workers) on the CPU and writes its JSON. No timing is asserted."""
    pytest.importorskip("torch")
    pytest.importorskip("zarr", minversion="3")
    script = ROOT / "benchmarks" / "python" / "gpu_feed.py"
    out = tmp_path / "gpu_feed.json"
    common = ["--quick", "--batch", "8", "--batches", "3", "--modes", "lsio,lsio.torch", "--workers", "2",
              "--threads", "2", "--cache-dir", str(tmp_path / "cache")]
    p = subprocess.run([sys.executable, str(script), "--device", "cpu", *common, "--json", str(out)],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "CPU SMOKE RUN" in p.stdout
    assert "| lsio |" in p.stdout and "| lsio.torch (W=2, pool_batches=4) |" in p.stdout
    assert "check: every mode delivered the same crops (float64 sums): ok" in p.stdout
    doc = json.loads(out.read_text())
    assert doc["cpu_smoke_run"] is True
    rows = {r["mode"]: r for r in doc["results"]}
    for mode in ("model only", "lsio", "lsio.torch"):
        assert rows[mode]["status"] == "ok", rows[mode]
        assert rows[mode]["crops_s"] > 0 and rows[mode]["batches"] == 3
    assert rows["lsio.torch"]["config"]["pool_batches"] == 4
    assert rows["lsio"]["cpu_s_per_GB"] > 0 and rows["lsio.torch"]["cpu_s_per_GB"] > 0

    # --no-model (the DataLoader vs in-process comparison) with fresh tensors per batch.
    p = subprocess.run([sys.executable, str(script), "--device", "cpu", "--no-model", "--pool-batches", "0",
                        *common], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "0 fwd+bwd per step (--no-model)" in p.stdout and "| lsio.torch (W=2, pool_batches=0) |" in p.stdout
    assert "check: every mode delivered the same crops (float64 sums): ok" in p.stdout

    p = subprocess.run([sys.executable, str(script), *common], capture_output=True, text=True, timeout=300,
                       cwd=tmp_path)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    import torch

    if not torch.cuda.is_available():
        assert p.stdout.strip() == "gpu_feed: no CUDA device (torch.cuda.is_available() is False): skipped"


def test_gpu_decode_benchmark_runs(tmp_path):
    """benchmarks/python/gpu_decode.py: without CUDA it skips with one line (exit 0); with
    ``--device cpu`` it runs its cpu mode and, where lsio.gpu imports, its gpu modes through
    the CPU reference executor, which must match the cpu mode bit for bit (else exit 1), and
    writes its JSON. No timing is asserted."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("zarr", minversion="3")
    script = ROOT / "benchmarks" / "python" / "gpu_decode.py"
    out = tmp_path / "gpu_decode.json"
    common = ["--quick", "--batch", "4", "--batches", "2", "--rounds", "1", "--warmup", "1", "--check", "1",
              "--threads", "2", "--cache-dir", str(tmp_path / "cache")]
    p = subprocess.run([sys.executable, str(script), "--device", "cpu", "--gpu-threads", "1", *common,
                        "--json", str(out)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "CPU SMOKE RUN" in p.stdout and "| cpu (read " in p.stdout
    doc = json.loads(out.read_text())
    assert doc["cpu_smoke_run"] is True and doc["checks_ok"] is True
    rows = {r["mode"]: r for r in doc["results"]}
    assert rows["cpu"]["status"] == "ok" and rows["cpu"]["GBps"] > 0 and rows["cpu"]["cpu_s_per_GB"] > 0
    try:
        import lsio.gpu  # noqa: F401
        has_gpu_api = True
    except ImportError:
        has_gpu_api = False
    for mode in ("gpu", "gpu t=1"):
        if has_gpu_api:
            assert rows[mode]["status"] == "ok" and rows[mode]["check"] == "ok", rows[mode]
        else:
            assert rows[mode]["status"].startswith("skipped: lsio.gpu not importable"), rows[mode]

    p = subprocess.run([sys.executable, str(script), *common], capture_output=True, text=True, timeout=300,
                       cwd=tmp_path)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    if not torch.cuda.is_available():
        assert p.stdout.strip() == "gpu_decode: no CUDA device (torch.cuda.is_available() is False): skipped"


def test_percall_benchmark_runs(tmp_path):
    """benchmarks/python/percall.py: writes its tiny store, checks every reader's data, times a
    few calls and writes its JSON. No timing is asserted."""
    pytest.importorskip("zarr", minversion="3")
    script = ROOT / "benchmarks" / "python" / "percall.py"
    out = tmp_path / "percall.json"
    p = subprocess.run([sys.executable, str(script), "--calls", "300", "--reps", "1", "--py-threads", "2",
                        "--json", str(out)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    rows = {r["reader"]: r for r in json.loads(out.read_text())["rows"]}
    for name in ("lsio arr[box]", "lsio read(out=)", "lsio read_crops(1)"):
        assert rows[name]["status"] == "ok" and rows[name]["us_per_call"] > 0 and rows[name]["engine_us"] > 0
    assert rows["lsio read(out=)"]["threaded_calls_s"] > 0


def test_paced_benchmark_runs(tmp_path):
    """benchmarks/python/paced.py --quick: writes its small v2 store, checks each reader's first
    batch against zarr-python, times paced batches and writes its JSON. No timing is asserted."""
    pytest.importorskip("zarr", minversion="3")
    script = ROOT / "benchmarks" / "python" / "paced.py"
    out = tmp_path / "paced.json"
    p = subprocess.run([sys.executable, str(script), "--quick", "--gaps", "0,5", "--json", str(out)],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    rows = json.loads(out.read_text())["rows"]
    lsio_rows = [r for r in rows if r["reader"] == "lsio"]
    assert [r["gap_ms"] for r in lsio_rows] == [0.0, 5.0]
    assert all(r["check"] == "ok" and r["crops_per_s"] > 0 for r in rows)


def test_suite_rewrite_keeps_standalone_sections_and_target_rows():
    """report.keep_standalone: a suite run rewrites RESULTS.md; the hand-written sections of the
    standalone scripts and their Targets rows (W9, W10, ...) survive it, once each."""
    sys.path.insert(0, str(ROOT / "benchmarks" / "python"))
    import report

    existing = "\n".join([
        "# Benchmark results", "", "## Throughput (medians)", "old table", "",
        "## Decoded-chunk cache (W9)", "", "w9 text", "",
        "## Targets", "", "| workload | cache | threads | reader | target | result |", "|---|---|---|---|---|---|",
        "| W1 | hot | 2 | lsio | >= 2x | missed (old) |",
        "| W9 | hot | 2 | lsio cache_bytes | 3x | met (8.8x) |",
        "| DataLoader feed | hot | 2 | lsio.torch | >= 0.9x | met |", "", "## Stores", "stores", ""])
    new = "\n".join([
        "# Benchmark results", "", "## Throughput (medians)", "new table", "",
        "## Targets", "", "| workload | cache | threads | reader | target | result |", "|---|---|---|---|---|---|",
        "| W1 | hot | 2 | lsio | >= 2x | missed (new) |", "", "## Stores", "stores", ""])
    out = report.keep_standalone(existing, new, frozenset({"W1", "W4", "W7"}))
    assert "new table" in out and "old table" not in out
    assert out.count("## Decoded-chunk cache (W9)") == 1 and "w9 text" in out
    assert out.index("## Decoded-chunk cache (W9)") < out.index("## Targets")
    assert "missed (new)" in out and "missed (old)" not in out
    assert out.count("| W9 | hot") == 1 and out.count("| DataLoader feed |") == 1
    rows = out[out.index("## Targets"):out.index("## Stores")]
    assert "| W9 | hot" in rows and "| DataLoader feed |" in rows


def test_w13_pipelines_quick_run(tmp_path):
    """W13 in its quick form: zarr-python's API through zarr's default pipeline, zarrs' (or a
    "not installed" row) and lsio's, every result checked bit for bit against lsio's own API;
    a results section and one target verdict per case. No timing is asserted."""
    pytest.importorskip("zarr", minversion="3")
    cmd = [sys.executable, str(SUITE), "--quick", "--only", "W13", "--rounds", "1", "--no-plot",
           "--out", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache"),
           "--results-md", str(tmp_path / "RESULTS.md")]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    doc = json.loads((tmp_path / "out" / "results.json").read_text())
    assert set(doc["workloads"]) == {"W13"} and doc["checks_passed"] is True
    rows = {(r["case"], r["reader"]): r for r in doc["rows"]}
    have = {m: importlib.util.find_spec(m) is not None for m in ("zarrs", "xarray", "dask")}
    cases = ["crops arr[box]", "chunks oindex"] + (["xarray isel crops"] if have["xarray"] else []) \
        + (["dask mean"] if have["dask"] else [])
    for case in cases:
        for reader in ("zarr default pipeline", "lsio pipeline", "lsio native"):
            r = rows[(case, reader)]
            assert r["status"] == "ok", (case, reader, r["status"])
            assert r["check"] == ("reference" if reader == "lsio native" else "ok"), (case, reader)
            assert len(r["times_s"]) == 1 and r["units_per_s"] > 0
        z = rows[(case, "zarrs pipeline")]
        assert z["status"] == ("ok" if have["zarrs"] else "not installed"), z["status"]
        assert rows[(case, "lsio pipeline")]["config"]["lsio.zarr.stats() delta"]["fallback_reads"] == 0
        assert any(v["workload"] == "W13" and case in v["reader"] for v in doc["targets"])
    assert "## zarr-python's API with each codec pipeline (W13)" in (tmp_path / "out" / "results.md").read_text()

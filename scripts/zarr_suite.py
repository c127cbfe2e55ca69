#!/usr/bin/env python3
"""Runs a sample of zarr-python's own test suite twice, with zarr's default codec pipeline and
with lsio's (ZARR_CODEC_PIPELINE__PATH=lsio.zarr.LsioCodecPipeline, found through the
zarr.codec_pipeline entry point as an installed lsio declares it), and compares outcomes.

    python scripts/zarr_suite.py                       # default sample: 400 tests, seed 0
    python scripts/zarr_suite.py --sample 0            # every test of the chosen files
    python scripts/zarr_suite.py --tests /path/to/zarr-X.Y.Z/tests --files test_indexing.py

The tests come from zarr-python's source distribution for the installed version: ``--tests``,
else a copy cached under ``$XDG_CACHE_HOME/lsio/zarr-suite`` (downloaded once with
``pip download zarr==VERSION --no-binary :all:``). pytest-asyncio must be importable (zarr's
async tests need it); ``--pythonpath`` adds a directory holding it.

Prints, per outcome, how many tests had it under each pipeline, the tests whose outcome
differs, and lsio.zarr.stats() of the lsio run (reads lsio served vs fell back). Exits 1 when
a test that passes with zarr's pipeline does not pass with lsio's.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FILES = ["test_indexing.py", "test_array.py", "test_v2.py", "test_codecs", "test_api.py", "test_config.py",
                 "test_group.py"]
# Tests that cannot apply with another pipeline selected (test id without parameters -> why).
# Their differing outcome is printed but does not fail the run.
CANNOT_APPLY = {
    "tests.test_config::test_config_codec_pipeline_class":
        "asserts zarr's default pipeline is in effect (it sets codec_pipeline.name, not .path, "
        "then expects BatchedCodecPipeline)",
}
PLUGIN = '''
import json, os
def pytest_sessionfinish(session, exitstatus):
    import sys
    if "lsio.zarr" in sys.modules:
        with open(os.environ["LSIO_SUITE_STATS"], "w") as f:
            json.dump(sys.modules["lsio.zarr"].stats(), f)
'''


def zarr_tests(version: str, given: str | None) -> Path:
    if given:
        return Path(given)
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "lsio" / "zarr-suite"
    tests = cache / f"zarr-{version}" / "tests"
    if tests.is_dir():
        return tests
    cache.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", f"zarr=={version}", "--no-deps", "--no-binary",
                    ":all:", "-d", str(cache), "-q"], check=True)
    with tarfile.open(cache / f"zarr-{version}.tar.gz") as t:
        t.extractall(cache, filter="data")
    return tests


def collect(tests: Path, files: list, env: dict) -> list:
    r = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-o", "addopts=",
                        "-p", "no:cacheprovider", *files], cwd=tests.parent, env=env, capture_output=True, text=True)
    return [line for line in r.stdout.splitlines() if "::" in line]


def run(tests: Path, ids: list, env: dict, xml: Path, timeout: int) -> dict:
    args = tests.parent / f".lsio-suite-{os.getpid()}.txt"
    args.write_text("\n".join(ids) + "\n")
    try:
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-o", "addopts=", "-p", "no:cacheprovider",
                            "-p", "lsio_suite_plugin", f"--junitxml={xml}", f"@{args}"],
                           cwd=tests.parent, env=env, capture_output=True, text=True, timeout=timeout)
    finally:
        args.unlink()
    if not xml.exists():  # pytest itself died (a crash): say how
        raise RuntimeError(f"pytest exited with {r.returncode} without a report:\n{(r.stdout + r.stderr)[-3000:]}")
    out = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        kind = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                kind = "failed"
            elif child.tag == "skipped":
                kind = "xfailed" if "xfail" in (child.get("type") or "") else "skipped"
        out[name] = kind
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tests", help="zarr-python's tests/ directory (default: the sdist of the installed version)")
    ap.add_argument("--files", nargs="+", default=DEFAULT_FILES, help="test files or directories under tests/")
    ap.add_argument("--sample", type=int, default=400, help="tests drawn at random (0: all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--pythonpath", action="append", default=[], help="extra sys.path entries (pytest-asyncio)")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per run")
    args = ap.parse_args()

    import zarr

    tests = zarr_tests(zarr.__version__, args.tests)
    work = Path(tempfile.mkdtemp(prefix="lsio-zarr-suite-"))
    dist = work / "ep" / "lsio_zarr_suite-0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: lsio-zarr-suite\nVersion: 0\n")
    (dist / "entry_points.txt").write_text("[zarr.codec_pipeline]\nlsio = lsio.zarr:LsioCodecPipeline\n")
    (work / "plugin").mkdir()
    (work / "plugin" / "lsio_suite_plugin.py").write_text(PLUGIN)
    # The lsio this interpreter imports (the installed package, or a source tree on
    # PYTHONPATH with its built _core), never the repository's python/ on its own: without its
    # extension there it would fail every test in both runs alike and prove nothing.
    import lsio

    lsio_parent = str(Path(lsio.__file__).resolve().parent.parent)
    path = [str(work / "ep"), str(work / "plugin"), *args.pythonpath, lsio_parent,
            *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]]
    base = dict(os.environ, PYTHONPATH=os.pathsep.join(path), LSIO_SUITE_STATS=str(work / "stats.json"))
    base.pop("ZARR_CODEC_PIPELINE__PATH", None)
    ids = collect(tests, [f"tests/{f}" for f in args.files], base)
    if not ids:
        print("no tests collected (is pytest-asyncio importable? --pythonpath)", file=sys.stderr)
        return 2
    if args.sample and args.sample < len(ids):
        ids = sorted(random.Random(args.seed).sample(ids, args.sample))
    print(f"zarr-python {zarr.__version__}: {len(ids)} tests from {', '.join(args.files)}")
    default = run(tests, ids, base, work / "default.xml", args.timeout)
    (work / "stats.json").unlink(missing_ok=True)  # the default run imports lsio.zarr too (entry point)
    lsio_env = dict(base, ZARR_CODEC_PIPELINE__PATH="lsio.zarr.LsioCodecPipeline")
    with_lsio = run(tests, ids, lsio_env, work / "lsio.xml", args.timeout)
    kinds = sorted(set(default.values()) | set(with_lsio.values()))
    for k in kinds:
        print(f"  {k:8s} default {sum(v == k for v in default.values()):5d}   lsio {sum(v == k for v in with_lsio.values()):5d}")
    differ = sorted(n for n in default if with_lsio.get(n) != default[n])
    for n in differ:
        why = CANNOT_APPLY.get(n.split("[")[0])
        label = f"CANNOT APPLY ({why})" if why else "DIFFERS"
        print(f"  {label} {n}: default {default[n]}, lsio {with_lsio.get(n)}")
    stats = json.loads((work / "stats.json").read_text()) if (work / "stats.json").exists() else None
    print(f"  lsio.zarr.stats() of the lsio run: {stats}")
    broken = [n for n in differ if default[n] == "passed" and n.split("[")[0] not in CANNOT_APPLY]
    if not stats or not stats.get("reads"):
        print("  FAILED: lsio served no read in the lsio run (the pipeline was not in effect)", file=sys.stderr)
        return 1
    passed = sum(v == "passed" for v in default.values())
    if passed < len(default) // 2:
        print(f"  FAILED: only {passed} of {len(default)} tests pass with zarr's own pipeline: the "
              "environment cannot run zarr's tests (missing test dependencies?)", file=sys.stderr)
        return 1
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())

"""Documented programs run as pasted: the JAX/Grain training loop of docs/guide/training.md
(spawned mp_prefetch workers, Grain's absl flag, crops by dimension name) against a small
ERA5-like store written by xarray in the current directory; the records guide's first example
and its DataLoader loop (docs/guide/records.md)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def snippet_after(path: str, heading: str) -> str:
    text = open(os.path.join(ROOT, path)).read()
    at = text.index(heading)
    m = re.compile(r"```python\n(.*?)```", re.S).search(text, at)
    assert m is not None, heading
    return m.group(1)


def test_jax_training_loop_runs_as_documented(tmp_path):
    pytest.importorskip("jax")
    pytest.importorskip("grain")
    xr = pytest.importorskip("xarray")
    rng = np.random.default_rng(0)
    shape = (12, 80, 90)
    ds = xr.Dataset({v: (("time", "lat", "lon"), rng.standard_normal(shape).astype("float32")) for v in ("t2m", "tp")})
    ds.to_zarr(str(tmp_path / "era5.zarr"), zarr_format=3, consolidated=False)
    (tmp_path / "train.py").write_text(snippet_after("docs/guide/training.md", "### A JAX training loop"))
    # The child (and the workers it spawns) import what this process imports.
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=os.pathsep.join(os.path.abspath(p) for p in sys.path if p))
    r = subprocess.run([sys.executable, "train.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert "epoch 0: loss" in r.stdout and "epoch 1: loss" in r.stdout, r.stdout


def test_records_guide_examples_run_as_documented(tmp_path):
    pytest.importorskip("torch")
    (tmp_path / "data").mkdir()
    first = snippet_after("docs/guide/records.md", "# Records: variable-length samples")
    loader = snippet_after("docs/guide/records.md", "## Loaders")
    check = """
assert len(r) == 500 and r[1].tolist() == list(range(1000)) and len(batch) == 1024
assert padded.shape[0] == 1024 and lengths.max() == padded.shape[1]
seen = 0
for padded, lengths in dl:
    seen += len(lengths)
assert seen == 500
print("records ok")
"""
    (tmp_path / "run.py").write_text("if __name__ == '__main__':\n" + "\n".join(
        "    " + line for line in (first + loader + check).splitlines()))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(os.path.abspath(p) for p in sys.path if p))
    r = subprocess.run([sys.executable, "run.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert "records ok" in r.stdout

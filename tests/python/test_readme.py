"""The README's Usage example runs as written, on the kind of store users have: a group
written by zarr-python (``data/era5.zarr`` with an array ``t2m``), from the working directory
the example assumes."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import zarr

README = Path(__file__).resolve().parents[2] / "README.md"


def usage_block() -> str:
    text = README.read_text()
    section = text[text.index("## Usage"):]
    m = re.search(r"```python\n(.*?)```", section, re.S)
    assert m, "README's Usage section has no python block"
    return m.group(1)


def test_usage_example_runs_on_a_zarr_python_group(tmp_path, monkeypatch):
    code = usage_block()
    assert 'lsio.open("data/era5.zarr", "t2m")' in code
    g = zarr.open_group(str(tmp_path / "data" / "era5.zarr"), mode="w")
    t2m = np.random.default_rng(0).normal(size=(6, 400, 500)).astype("f4")
    g.create_array("t2m", shape=t2m.shape, chunks=(1, 64, 64), shards=(2, 128, 128), dtype="f4")[...] = t2m
    monkeypatch.chdir(tmp_path)
    env: dict = {}
    exec(compile(code, str(README) + ":Usage", "exec"), env)  # noqa: S102 - the README's own code
    np.testing.assert_array_equal(env["x"], t2m[0:4, 0:256, 0:256])
    starts, shape = env["starts"], env["shape"]
    for i in (0, 31):
        want = t2m[tuple(slice(s, s + n) for s, n in zip(starts[i], shape))]
        np.testing.assert_array_equal(env["batch"][i], want)

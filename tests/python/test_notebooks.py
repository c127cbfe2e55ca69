"""The notebooks in notebooks/ run top to bottom (nbclient) and are stored without outputs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import lsio

NOTEBOOK_DIR = Path(__file__).resolve().parents[2] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
# notebooks that need PyTorch (skipped, naming torch, where it is not installed)
TORCH_NOTEBOOKS = {"02_training_loop"}
# notebooks that need JAX and Grain (skipped, naming the missing one, where it is not installed)
JAX_NOTEBOOKS = {"03_jax_grain"}


def test_notebooks_exist():
    names = [p.name for p in NOTEBOOKS]
    for name in ("01_quickstart", "02_training_loop", "03_jax_grain"):
        assert f"{name}.ipynb" in names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_stored_without_outputs(path):
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{path.name} has stored outputs"
    if path.stem not in TORCH_NOTEBOOKS:
        assert "torch" not in "".join(c.source for c in nb.cells if c.cell_type == "code")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_runs(path, tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    for mod in ("matplotlib", "xarray", "dask", "tqdm", "ipywidgets"):
        pytest.importorskip(mod)
    if path.stem in TORCH_NOTEBOOKS:
        pytest.importorskip("torch")
    if path.stem in JAX_NOTEBOOKS:
        pytest.importorskip("jax")
        pytest.importorskip("grain")
    # the kernel must import the same lsio as this test process
    site = os.path.dirname(os.path.dirname(lsio.__file__))
    monkeypatch.setenv("PYTHONPATH", site + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb, kernel_name="python3", timeout=120, resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    # Nothing a reader would take for a mistake: no stray repr of a value a cell did not mean
    # to show (zarr's consolidate_metadata returns the group), no warning on stderr.
    texts = []
    for c in nb.cells:
        for o in c.outputs if c.cell_type == "code" else []:
            if o.output_type == "stream":
                texts.append((o.name, o.text))
            elif "data" in o and "text/plain" in o.data:
                texts.append(("result", o.data["text/plain"]))
    assert not [t for _, t in texts if "<Group " in t], texts
    assert not [t for n, t in texts if n == "stderr" and ("Warning" in t or "IProgress" in t)], texts
    # the notebook cleans up after itself
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("lsio-")]

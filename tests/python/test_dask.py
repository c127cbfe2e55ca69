"""dask: Array.to_dask() and dask.array.from_array(lsio.Array) equal zarr-python."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest
import zarr

da = pytest.importorskip("dask.array")
import dask  # noqa: E402
from dask.base import tokenize  # noqa: E402

import lsio  # noqa: E402
import lsio.dask  # noqa: E402


@pytest.fixture(scope="module")
def arrays(tmp_path_factory):
    root = tmp_path_factory.mktemp("dask")
    rng = np.random.default_rng(2)
    data = rng.normal(size=(10, 33, 47)).astype("f4")
    z = zarr.create_array(str(root / "sharded"), shape=data.shape, chunks=(2, 8, 8), shards=(4, 16, 24), dtype="f4", fill_value=np.nan)
    z[:, :30] = data[:, :30]  # some chunks missing -> NaN
    u = zarr.create_array(str(root / "plain"), shape=(25, 19), chunks=(7, 5), dtype="i8")
    u[:] = np.arange(25 * 19).reshape(25, 19)
    return root


def _zarr(path):
    return zarr.open_array(str(path), mode="r")[...]


def test_default_chunks_are_shards_or_chunks(arrays):
    s = lsio.open(arrays / "sharded")
    x = s.to_dask()
    assert x.chunksize == (4, 16, 24)
    assert x.chunks[0] == (4, 4, 2)
    assert x.dtype == s.dtype and x.shape == s.shape
    assert x.npartitions == 3 * 3 * 2
    p = lsio.open(arrays / "plain")
    assert p.to_dask().chunksize == (7, 5)
    assert lsio.dask.default_chunks(p) == (7, 5)


@pytest.mark.parametrize("chunks", [None, "auto", (3, 11, 47), -1, {0: 1}])
def test_compute_equals_zarr(arrays, chunks):
    s = lsio.open(arrays / "sharded", threads=1)
    x = s.to_dask(chunks=chunks)
    np.testing.assert_array_equal(x.compute(), _zarr(arrays / "sharded"))
    p = lsio.open(arrays / "plain")
    if isinstance(chunks, tuple):
        chunks = chunks[1:]
    np.testing.assert_array_equal(p.to_dask(chunks=chunks).compute(), _zarr(arrays / "plain"))


def test_slicing_and_reductions(arrays):
    ref = _zarr(arrays / "sharded")
    x = lsio.open(arrays / "sharded").to_dask()
    np.testing.assert_array_equal(x[1:9, ::3, -5:].compute(), ref[1:9, ::3, -5:])
    np.testing.assert_array_equal(x[:, 5, ::-2].compute(), ref[:, 5, ::-2])
    with warnings.catch_warnings():  # all-NaN columns: "Mean of empty slice"
        warnings.simplefilter("ignore", RuntimeWarning)
        np.testing.assert_allclose(da.nanmean(x, axis=0).compute(), np.nanmean(ref, axis=0), rtol=1e-5)
    np.testing.assert_array_equal(x[[0, 3, 7]].compute(), ref[[0, 3, 7]])  # dask slices blocks, lsio reads basic keys


def test_from_array_directly(arrays):
    s = lsio.open(arrays / "sharded")
    x = da.from_array(s, chunks=(5, 10, 10))
    np.testing.assert_array_equal(x.compute(), _zarr(arrays / "sharded"))
    y = da.from_array(s)  # chunks="auto" picks up arr.chunks
    np.testing.assert_array_equal(y.compute(), _zarr(arrays / "sharded"))
    # __array__ reads the whole array in one call (np.asarray); dask still slices per task.
    np.testing.assert_array_equal(np.asarray(s), _zarr(arrays / "sharded"))


def test_tokens_are_deterministic(arrays):
    a1 = lsio.open(arrays / "sharded")
    a2 = lsio.open(arrays / "sharded")
    assert tokenize(a1) == tokenize(a2)
    assert tokenize(a1) != tokenize(lsio.open(arrays / "plain"))
    assert tokenize(a1) != tokenize(lsio.open(arrays / "sharded", threads=1))
    assert a1.to_dask().name == a2.to_dask().name
    assert a1.to_dask().name != a1.to_dask(chunks=(1, 33, 47)).name
    assert a1.to_dask(name="mine").name == "mine"


def test_graph_pickles_and_runs_synchronously(arrays):
    x = lsio.open(arrays / "plain").to_dask()
    y = pickle.loads(pickle.dumps(x))
    with dask.config.set(scheduler="synchronous"):
        np.testing.assert_array_equal(y.compute(), _zarr(arrays / "plain"))


def test_meta_is_empty_numpy(arrays):
    x = lsio.open(arrays / "sharded").to_dask()
    assert isinstance(x._meta, np.ndarray) and x._meta.size == 0 and x._meta.dtype == np.float32


def test_without_dask_the_error_says_what_to_install(arrays):
    # In a fresh interpreter where dask cannot be imported, to_dask names the package and
    # the extra, as lsio's other optional adapters do.
    import subprocess
    import sys

    path = arrays / "plain"
    code = (
        "import sys; sys.modules['dask'] = None; sys.modules['dask.array'] = None\n"
        "import lsio\n"
        f"a = lsio.open({str(path)!r})\n"
        "try:\n    a.to_dask()\nexcept ImportError as e:\n    print('IMPORTERROR', e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "IMPORTERROR" in out.stdout, out.stderr
    assert "pip install 'dask[array]'" in out.stdout and "lsio[dask]" in out.stdout

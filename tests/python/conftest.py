"""Shared pytest fixtures for the lsio Python tests.

* ``stores``: a session-scoped :class:`stores.StoreCache` that writes the
  Zarr v3 stores of ``stores.py`` with zarr-python 3 and TensorStore into a
  session temporary directory, on first use, and keeps them with their
  expected arrays.
* ``store``: parametrized over every store lsio supports (session scope, so
  each store is written once and zarr-python reference reads are cached).
* ``unsupported_store``: parametrized over the stores lsio must refuse.
* ``io_mode`` / ``threads``: the I/O backends ("pread", "uring", "auto") and
  thread counts (1, 2) that parity tests run under.  "uring" is skipped, with
  the reason reported by ``lsio.io_backend_info()``, only when the kernel
  refuses io_uring; "pread" always runs.
* ``require_uring()``: the same skip for individual tests.
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

import pytest
import zarr
import zarr.errors

sys.path.insert(0, os.path.dirname(__file__))

import stores as store_defs  # noqa: E402

import lsio  # noqa: E402

ZARR_WARNINGS = (
    zarr.errors.UnstableSpecificationWarning,
    zarr.errors.ZarrUserWarning,
    zarr.errors.ZarrRuntimeWarning,
)
IO_MODES = ("pread", "uring", "auto")
THREADS = (1, 2)


def pytest_report_header(config):
    info = lsio.io_backend_info()
    return [
        f"lsio: {getattr(lsio, '__file__', '?')}",
        f"lsio io_backend_info: {info}",
    ]


def require_uring() -> None:
    """Skip the calling test when io_uring cannot be used here."""
    info = lsio.io_backend_info()
    if not info["uring_available"]:
        pytest.skip(f"io_uring unavailable: {info['reason']}")


@pytest.fixture(scope="session")
def stores(tmp_path_factory) -> store_defs.StoreCache:
    return store_defs.StoreCache(Path(tmp_path_factory.mktemp("stores")))


@pytest.fixture(scope="session", params=store_defs.all_store_names())
def store(request, stores) -> store_defs.BuiltStore:
    return stores.get(request.param)


@pytest.fixture(scope="session", params=store_defs.unsupported_store_names())
def unsupported_store(request, stores) -> store_defs.BuiltStore:
    return stores.get(request.param)


@pytest.fixture(params=IO_MODES)
def io_mode(request) -> str:
    if request.param == "uring":
        require_uring()
    return request.param


@pytest.fixture(params=THREADS, ids=lambda t: f"threads{t}")
def threads(request) -> int:
    return request.param


@pytest.fixture(autouse=True)
def _quiet_zarr_warnings():
    # zarr-python warns about sharding combined with other codecs and about
    # unstable specifications; neither matters to these tests.
    with warnings.catch_warnings():
        for cat in ZARR_WARNINGS:
            warnings.filterwarnings("ignore", category=cat)
        yield

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

Local servers for the remote-store tests (``remote_servers.py`` has the
classes; a missing server program skips locally but FAILS under ``CI=true``,
where ``scripts/setup.sh`` and the ``test`` extra install them):

* ``moto_s3`` (session): :class:`remote_servers.MotoS3`, moto's S3 server
  in a thread of the test process (HTTP).
* ``moto_s3_tls`` (session): the same in a child process over HTTPS with
  the ``tls_cert`` CA (``moto_s3_tls.tls.ca_file``).
* ``moto_s3_signed``: the same server while it verifies every request's
  SigV4 signature.
* ``tls_cert`` (session): :class:`remote_servers.TlsCert`, a test CA and a
  server certificate for 127.0.0.1 / localhost.
* ``nginx_server`` (session): ``nginx_server(root_dir) -> NginxServer``,
  one nginx per directory for the whole session (HTTP and HTTPS).
* JAX, where a test imports it, runs on the CPU with 8 host devices (``XLA_FLAGS``, set
  here before anything imports jax): the meshes of ``test_safetensors_jax.py``.
* ``fault_server``: a :class:`remote_servers.FaultServer` serving an empty
  directory under ``tmp_path`` (``fault_server.root``), stopped after the
  test; ``make_fault_server(root_dir, latency_ms=0.0, tls=None)`` starts
  more (``tls=tls_cert``: HTTPS).
"""

from __future__ import annotations

import os
import shutil
import sys
import warnings
from pathlib import Path

import pytest
import zarr
import zarr.errors

sys.path.insert(0, os.path.dirname(__file__))

JAX_HOST_DEVICES = 8
if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                               + f" --xla_force_host_platform_device_count={JAX_HOST_DEVICES}").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import remote_servers  # noqa: E402
import stores as store_defs  # noqa: E402

import lsio  # noqa: E402

# zarr-python's warning classes (3.1.0 has fewer: the pipeline tests also run against it).
ZARR_WARNINGS = tuple(getattr(zarr.errors, n) for n in
                      ("UnstableSpecificationWarning", "ZarrUserWarning", "ZarrRuntimeWarning")
                      if hasattr(zarr.errors, n)) or (UserWarning,)
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


# --------------------------------------------------------------------------
# Local servers for the remote-store tests
# --------------------------------------------------------------------------


def require_server_program(ok: bool, what: str, hint: str) -> None:
    """Skip when a server program is missing, or fail under CI=true, where
    the README's test command installs it (a skip there would hide that the
    remote tests stopped running)."""
    if ok:
        return
    message = f"{what} is not available ({hint})"
    if remote_servers.in_ci():
        pytest.fail(f"{message}; CI=true requires it", pytrace=False)
    pytest.skip(message)


def require_moto() -> None:
    try:
        import boto3  # noqa: F401
        import moto.server  # noqa: F401
        ok, hint = True, ""
    except ImportError as e:
        ok, hint = False, f"{e}; pip install 'moto[server]' or '.[test]'"
    require_server_program(ok, "moto[server]", hint)


@pytest.fixture(scope="session")
def moto_s3():
    require_moto()
    server = remote_servers.MotoS3()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def moto_s3_tls(tls_cert):
    require_moto()
    server = remote_servers.MotoS3(mode="process", tls=tls_cert)
    yield server
    server.stop()


@pytest.fixture
def moto_s3_signed(moto_s3):
    with moto_s3.require_signatures():
        yield moto_s3


@pytest.fixture(scope="session")
def tls_cert(tmp_path_factory) -> remote_servers.TlsCert:
    require_server_program(
        shutil.which(remote_servers.OPENSSL) is not None, "the openssl CLI",
        "apt-get install openssl",
    )
    return remote_servers.make_tls_cert(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="session")
def nginx_server(tmp_path_factory, tls_cert):
    require_server_program(
        os.access(remote_servers.NGINX, os.X_OK), remote_servers.NGINX,
        "apt-get install nginx",
    )
    servers: dict = {}

    def start(root_dir) -> remote_servers.NginxServer:
        root = Path(root_dir).resolve()
        if root not in servers:
            servers[root] = remote_servers.NginxServer(
                root, tmp_path_factory.mktemp("nginx"), tls_cert
            )
        return servers[root]

    yield start
    for server in servers.values():
        server.stop()


@pytest.fixture
def fault_server(tmp_path):
    with remote_servers.FaultServer(tmp_path / "fault_root") as server:
        yield server


@pytest.fixture
def make_fault_server():
    servers = []

    def make(root_dir, latency_ms: float = 0.0, tls=None) -> remote_servers.FaultServer:
        server = remote_servers.FaultServer(root_dir, latency_ms=latency_ms, tls=tls).start()
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()

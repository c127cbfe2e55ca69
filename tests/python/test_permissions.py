"""Unreadable shard files raise ``lsio.StorageError`` (EACCES) naming the file.

Root ignores file mode bits, so when the suite runs as root the read happens in a
forked child that first drops to ``nobody`` (uid/gid 65534, no supplementary groups).
A fork rather than a subprocess: the child keeps the already imported interpreter and
lsio package, which ``nobody`` could not load itself when they live under a private
home directory (``/root`` is 0700 here). The store lives in a fresh ``/tmp`` directory
made traversable (0755); only one shard file is mode 000, so the child also checks that
the readable part of the array still reads, before and after the failure.

The test skips, with the reason, only where privileges cannot be dropped (setuid
refused) or the mode-000 file stays readable anyway (capabilities kept).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pytest
import zarr

import lsio
from conftest import ZARR_WARNINGS

NOBODY = 65534


@pytest.fixture
def public_store():
    """(64,) float64, shards of 32 (two shard files), in a directory nobody can traverse."""
    base = Path(tempfile.mkdtemp(prefix="lsio_perm_", dir="/tmp"))
    try:
        path = base / "a.zarr"
        data = np.arange(64, dtype="<f8")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ZARR_WARNINGS)
            a = zarr.create_array(str(path), shape=(64,), dtype="<f8", chunks=(8,),
                                  shards=(32,), compressors=None, fill_value=-1.0)
            a[:] = data
        for root, dirs, files in os.walk(base):
            os.chmod(root, 0o755)
            for f in files:
                os.chmod(os.path.join(root, f), 0o644)
        yield path, data
    finally:
        shutil.rmtree(base, ignore_errors=True)


def read_in_child(store: Path, shard: Path, io: str) -> dict:
    """Forks; the child (as nobody when root) reads and reports what happened as JSON."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never returns into pytest
        os.close(r)
        out: dict = {}
        try:
            if os.geteuid() == 0:
                try:
                    os.setgroups([])
                    os.setgid(NOBODY)
                    os.setuid(NOBODY)
                except OSError as e:
                    out = {"skip": f"cannot drop privileges to uid/gid {NOBODY}: {e}"}
            if not out and os.access(shard, os.R_OK):
                out = {"skip": "a mode-000 file stays readable here (capabilities kept)"}
            if not out:
                arr = lsio.open(str(store), io=io, threads=1)
                out["first_ok"] = bool(np.array_equal(arr[0:32], np.arange(32.0)))
                try:
                    arr[30:40]  # ends in shard 1, the unreadable one
                    out["raised"] = None
                except Exception as e:  # noqa: BLE001 - reported to the parent
                    out["raised"] = type(e).__name__
                    out["is_storage_error"] = isinstance(e, lsio.StorageError)
                    out["is_oserror"] = isinstance(e, OSError)
                    out["errno"] = getattr(e, "errno", None)
                    out["filename"] = getattr(e, "filename", None)
                    out["path"] = getattr(e, "path", None)
                    out["message"] = str(e)
                out["after_ok"] = bool(np.array_equal(arr[0:32], np.arange(32.0)))
        except BaseException as e:  # noqa: BLE001
            out = {"unexpected": repr(e)}
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    chunks = []
    while True:
        b = os.read(r, 65536)
        if not b:
            break
        chunks.append(b)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    return json.loads(b"".join(chunks))


@pytest.mark.parametrize("io", ["pread", "auto"])
def test_unreadable_shard_is_storage_error_naming_the_file(public_store, io):
    store, _ = public_store
    shard = store / "c" / "1"
    assert shard.is_file()
    os.chmod(shard, 0)
    try:
        res = read_in_child(store, shard, io)
    finally:
        os.chmod(shard, 0o644)
    if "skip" in res:
        pytest.skip(res["skip"])
    assert "unexpected" not in res, res
    assert res["first_ok"], res
    assert res["raised"] == "PermissionDeniedError", res  # a StorageError and a PermissionError
    assert res["is_storage_error"] and res["is_oserror"], res
    assert res["errno"] == 13, res  # EACCES
    assert res["filename"] == str(shard), res
    assert res["path"] == str(shard), res
    assert str(shard) in res["message"], res
    assert "Permission denied" in res["message"], res
    assert res["after_ok"], res

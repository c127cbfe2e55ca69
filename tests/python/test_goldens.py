"""Golden corrupt stores (tests/data/make_goldens.py): each case raises its expected
exception class, and the message names the damaged file (for chunk-level faults also the
chunk and its byte range). Stores are written by zarr-python at test time and broken in
one precise way; see make_goldens.py for the list. Reads run on both I/O backends.

Complements test_errors.py (which covers flipped index bytes, entries past EOF, plain
truncation and garbage chunks, checking only that the file is named). A shard or chunk
path that is a FIFO must fail promptly instead of blocking in open() or read().
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import lsio
from conftest import require_uring

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "data"))
import make_goldens  # noqa: E402

FIFO_TIMEOUT_S = 10


@pytest.fixture(scope="session")
def goldens(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("goldens")
    make_goldens.build_all(out)
    return out


@pytest.fixture(params=["pread", "uring"])
def io(request):
    if request.param == "uring":
        require_uring()
    return request.param


def load(goldens: Path, name: str) -> tuple[dict, Path]:
    d = goldens / name
    return json.loads((d / "golden.json").read_text()), d / "store"


def attempt(golden: dict, store: Path, io: str):
    """Opens (and reads, for read cases) the store; returns the exception or the array."""
    try:
        arr = lsio.open(str(store), io=io)
        if golden["at"] == "open":
            return None
        return arr[tuple(slice(a, b) for a, b in golden["select"])]
    except lsio.Error as e:
        return e


def attempt_unblockable(golden: dict, store: Path, io: str):
    """attempt() on a thread; if it is still blocked after FIFO_TIMEOUT_S (an open() or
    read() on a FIFO waiting for a writer), open the FIFO's write end to release it, then fail."""
    result: list = []
    t = threading.Thread(target=lambda: result.append(attempt(golden, store, io)), daemon=True)
    t.start()
    t.join(FIFO_TIMEOUT_S)
    if t.is_alive():
        fd = os.open(store / golden["key"], os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        t.join(FIFO_TIMEOUT_S)
        pytest.fail(f"reading {golden['key']} (a FIFO) blocked for more than {FIFO_TIMEOUT_S} s")
    return result[0]


@pytest.mark.parametrize("name", list(make_goldens.CASES))
def test_golden(goldens, name, io):
    golden, store = load(goldens, name)
    got = attempt_unblockable(golden, store, io)
    if golden["error"] is None:
        assert not isinstance(got, BaseException), f"{name}: unexpected {got!r}"
        np.testing.assert_array_equal(got, make_goldens.expected_data())
        return
    want = getattr(lsio, golden["error"])
    assert isinstance(got, want), f"{name}: expected {want.__name__}, got {got!r}"
    msg = str(got)
    path = store / golden["key"]
    assert str(path) in msg, f"{name}: message does not name {path}: {msg!r}"
    for word in golden["words"]:
        assert word in msg, f"{name}: message does not name {word!r}: {msg!r}"
    if golden["chunk"] is not None:
        coords = r"\W+".join(str(c) for c in golden["chunk"])
        assert re.search(r"chunk\W+" + coords + r"\b", msg), (
            f"{name}: message does not name chunk {golden['chunk']}: {msg!r}")
    if golden["byte_range"] is not None:
        off, nb = golden["byte_range"]
        assert re.search(rf"\b{off}\b\D+\b{off + nb}\b", msg), (
            f"{name}: message does not name bytes [{off}, {off + nb}): {msg!r}")


def test_goldens_are_small(goldens):
    """The corpus stays a few KB per case on disk (they are rebuilt in every test session;
    the 1 TiB cases are sparse files)."""
    for d in goldens.iterdir():
        files = [f for f in (d / "store").rglob("*") if f.is_file()]
        assert sum(f.stat().st_blocks * 512 for f in files) < 64 * 1024, d.name

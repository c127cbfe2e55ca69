"""No response is downloaded without bound (issue 24, defect 3).

An oversized object where lsio expects a small one (a 300 MB ``zarr.json``, a 300 MB object
where a 16-byte chunk should be, a listing page of 300 MB) fails with a typed error before
its body is buffered: from its Content-Length, or, for a body without one (ended by closing
the connection), as soon as it passes the bound. Each read runs in a child process that
reports its peak RSS growth (``VmHWM``): the server runs in this process and holds the file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

zarr = pytest.importorskip("zarr")

BIG = 300 * 10**6
MiB = 1 << 20

CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    import lsio

    def hwm():
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024

    kind, url, so = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    lsio.read_ranges(sys.executable, [(0, 16)])  # the engine and its threads exist before the baseline
    base = hwm()
    try:
        if kind == "open":
            lsio.open(url, storage_options=so)
        elif kind == "read":
            lsio.open(url, storage_options=so)[...]
        elif kind == "members":
            lsio.open_group(url, storage_options=so).array_names
        result = "ok"
    except lsio.Error as e:
        result = type(e).__name__ + ": " + str(e)
    print(json.dumps({"growth": hwm() - base, "result": result}))
""")


def _child(kind, url, so):
    r = subprocess.run([sys.executable, "-c", CHILD, kind, url, json.dumps(so)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def _big_file(path, size=BIG):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.truncate(size)  # sparse: zeros, costs no disk


OPTS = {"timeout": 30, "connect_timeout": 5, "retries": 0}


@pytest.mark.parametrize("framing", ["content-length", "no-length"])
def test_an_oversized_zarr_json_is_refused_unbuffered(fault_server, framing):
    _big_file(fault_server.root / "a.zarr" / "zarr.json")
    if framing == "no-length":
        fault_server.add_fault("no_length", "/a.zarr/zarr.json", times=None)
    got = _child("open", fault_server.url("a.zarr"), OPTS)
    assert got["result"].startswith("FormatError"), got
    assert "larger than" in got["result"] and "zarr.json" in got["result"], got
    if framing == "content-length":
        # Refused from the Content-Length: not a byte of the body is kept.
        assert got["growth"] < 64 * MiB, got
    else:
        # Without a Content-Length the body is taken up to the metadata limit (32 MiB) and no
        # further: never the object's 300 MB.
        assert got["growth"] < 64 * MiB, got


@pytest.mark.parametrize("framing", ["content-length", "no-length"])
def test_an_oversized_chunk_object_is_refused_unbuffered(fault_server, framing):
    z = zarr.create_array(str(fault_server.root / "c.zarr"), shape=(8,), chunks=(4,), dtype="uint32",
                          compressors=None, fill_value=0)
    z[...] = np.arange(8, dtype="uint32")
    _big_file(fault_server.root / "c.zarr" / "c" / "0")  # where a 16-byte chunk should be
    if framing == "no-length":
        fault_server.add_fault("no_length", "/c.zarr/c/0", times=None)
    got = _child("read", fault_server.url("c.zarr"), OPTS)
    assert got["result"].startswith("CorruptDataError"), got
    assert "c/0" in got["result"], got
    assert got["growth"] < 64 * MiB, got


def test_an_oversized_listing_is_refused_unbuffered(fault_server):
    # An S3 bucket (path style on the fault server) whose ListObjectsV2 answer is 300 MB.
    g = fault_server.root / "bkt" / "g.zarr"
    g.mkdir(parents=True)
    (g / "zarr.json").write_text(json.dumps({"zarr_format": 3, "node_type": "group", "attributes": {}}))
    body = b"<?xml version='1.0'?><ListBucketResult>" + b" " * BIG + b"</ListBucketResult>"
    fault_server.add_fault("status", "/bkt", times=None, status=200, body=body,
                           headers={"Content-Type": "application/xml"})
    so = {**OPTS, "endpoint_url": fault_server.base_url, "anon": True}
    got = _child("members", "s3://bkt/g.zarr", so)
    assert got["result"].startswith("CorruptDataError"), got
    assert "listing" in got["result"], got
    assert got["growth"] < 64 * MiB, got


def test_a_listing_that_repeats_its_continuation_token_is_refused(fault_server):
    # A server answering every page with the same continuation token would be listed 100,000
    # times (names collected all along): refused at the repeat.
    g = fault_server.root / "bkt" / "g.zarr"
    g.mkdir(parents=True)
    (g / "zarr.json").write_text(json.dumps({"zarr_format": 3, "node_type": "group", "attributes": {}}))
    body = (b"<?xml version='1.0'?><ListBucketResult><IsTruncated>true</IsTruncated>"
            b"<Contents><Key>g.zarr/a/zarr.json</Key></Contents>"
            b"<NextContinuationToken>again</NextContinuationToken></ListBucketResult>")
    fault_server.add_fault("status", "/bkt", times=None, status=200, body=body,
                           headers={"Content-Type": "application/xml"})
    so = {**OPTS, "endpoint_url": fault_server.base_url, "anon": True}
    got = _child("members", "s3://bkt/g.zarr", so)
    assert got["result"].startswith("CorruptDataError") and "continuation token" in got["result"], got


def test_a_forged_content_length_neither_allocates_it_nor_breaks_the_thread():
    # A server declares a 100 GB body for an object lsio reads whole (bound 1 TiB): lsio used
    # to reserve the declared length up front; the allocation failed inside libcurl's
    # callback, and every later request on that thread failed ("API function called from
    # within callback"). Now the body grows as it comes, the short answer is a typed error,
    # and the next requests succeed. Run in a child (peak RSS measured there).
    code = textwrap.dedent("""
        import socket, sys, threading, time
        import lsio
        from lsio import _core
        from lsio._storage import options

        srv = socket.socket()
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind(("127.0.0.1", 0))
        srv.listen(16)
        port = srv.getsockname()[1]

        def handle(c):
            data = b""
            while b"\\r\\n\\r\\n" not in data:
                d = c.recv(65536)
                if not d:
                    return
                data += d
            if data.split(b" ")[1].endswith(b"/big"):
                c.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Length: 107374182400\\r\\nETag: \\"e\\"\\r\\n\\r\\n" + b"x" * 100000)
            else:
                c.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Length: 5\\r\\nETag: \\"s\\"\\r\\n\\r\\nhello")
            c.close()

        def serve():
            while True:
                c, _ = srv.accept()
                threading.Thread(target=handle, args=(c,), daemon=True).start()

        threading.Thread(target=serve, daemon=True).start()
        store = _core.RemoteStore(options.resolve(f"http://127.0.0.1:{port}/d", {"retries": 0}).to_core())
        try:
            store.get("big", 1 << 40)
            print("NO ERROR")
        except lsio.Error as e:
            print("typed", type(e).__name__)
        for _ in range(3):
            assert bytes(store.get("small", 100)) == b"hello"
        peak = [int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:")][0]
        print("peak_kib", peak)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.split()
    assert "typed" in lines, out.stdout
    assert int(lines[lines.index("peak_kib") + 1]) < 2 << 20, out.stdout  # under 2 GiB: not the declared 100 GB

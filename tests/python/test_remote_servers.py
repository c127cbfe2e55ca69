"""Tests of the local test servers themselves (remote_servers.py, conftest).

They talk to the servers with http.client / ssl only, never through lsio, so
that the fixtures lsio's remote-store tests stand on are known to behave as
documented: moto's S3 (and that it really rejects bad SigV4 signatures when
asked to), nginx over HTTP and HTTPS with the test CA, and every FaultServer
fault.  Every socket has a timeout; no sleep is longer than the behaviour
under test needs.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import threading
import time
import urllib.parse

import pytest

import remote_servers

TIMEOUT = 5.0
DATA = bytes(range(256)) * 40  # 10240 bytes, every offset distinguishable


def request(url: str, method: str = "GET", headers=None, *, conn=None, timeout=TIMEOUT,
            context: ssl.SSLContext | None = None):
    """One request; returns (response, body).  ``conn`` reuses a connection."""
    u = urllib.parse.urlsplit(url)
    own = conn is None
    if own:
        if u.scheme == "https":
            conn = http.client.HTTPSConnection(u.hostname, u.port, timeout=timeout, context=context)
        else:
            conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    try:
        target = u.path + (f"?{u.query}" if u.query else "")
        conn.request(method, target, headers=headers or {})
        resp = conn.getresponse()
        return resp, resp.read()
    finally:
        if own:
            conn.close()


# ==========================================================================
# moto S3
# ==========================================================================


def test_moto_upload_dir_and_ranged_get(moto_s3, tmp_path):
    src = tmp_path / "store"
    (src / "c" / "0").mkdir(parents=True)
    (src / "zarr.json").write_text('{"zarr_format": 3}')
    (src / "c" / "0" / "1").write_bytes(DATA)
    (src / "a b+c.bin").write_bytes(b"odd key")

    keys = moto_s3.upload_dir(src, "lsio-upload", prefix="/stores/x/")
    assert keys == ["stores/x/a b+c.bin", "stores/x/c/0/1", "stores/x/zarr.json"]
    assert moto_s3.endpoint_url.startswith("http://127.0.0.1:")
    assert moto_s3.region == "us-east-1"

    def get(key, **headers):
        url = moto_s3.url("lsio-upload", key)
        return request(url, headers=moto_s3.sign("GET", url, headers))

    # Signature checking is off by default, but any signed request is served.
    resp, body = get("stores/x/c/0/1", Range="bytes=100-199")
    assert resp.status == 206
    assert resp.getheader("Content-Range") == "bytes 100-199/10240"
    assert body == DATA[100:200]
    resp, body = get("stores/x/c/0/1", Range="bytes=-16")
    assert (resp.status, body) == (206, DATA[-16:])
    resp, body = get("stores/x/a b+c.bin")
    assert (resp.status, body) == (200, b"odd key")
    assert resp.getheader("ETag")

    moto_s3.put("lsio-upload", "k", b"v1")
    assert moto_s3.get("lsio-upload", "k") == b"v1"
    moto_s3.delete("lsio-upload", "k")
    resp, body = get("k")
    assert resp.status == 404 and b"NoSuchKey" in body


def test_moto_anonymous_needs_public_bucket(moto_s3):
    """moto answers an unsigned request like S3: 403 unless the bucket's
    policy (or the object's ACL) lets everyone read."""
    moto_s3.put(moto_s3.create_bucket("lsio-private"), "k", b"secret")
    resp, _ = request(moto_s3.url("lsio-private", "k"))
    assert resp.status == 403
    moto_s3.put(moto_s3.create_bucket("lsio-public", public=True), "k", b"open")
    resp, body = request(moto_s3.url("lsio-public", "k"), headers={"Range": "bytes=1-2"})
    assert (resp.status, body) == (206, b"pe")


def test_moto_verifies_sigv4_when_asked(moto_s3):
    bucket = moto_s3.create_bucket("lsio-signed")
    key = "dir/a b+c=d~e.bin"  # characters S3's canonical URI must encode
    moto_s3.put(bucket, key, DATA)
    url = moto_s3.url(bucket, key)
    rng = {"Range": "bytes=10-19"}

    with moto_s3.require_signatures():
        resp, body = request(url, headers=moto_s3.sign("GET", url, rng))
        assert (resp.status, body) == (206, DATA[10:20])

        resp, body = request(url, headers=moto_s3.sign("GET", url, rng, secret_access_key="x" * 40))
        assert resp.status == 403 and b"SignatureDoesNotMatch" in body

        tampered = {**moto_s3.sign("GET", url, rng), "Range": "bytes=10-20"}
        resp, body = request(url, headers=tampered)
        assert resp.status == 403 and b"SignatureDoesNotMatch" in body

        # The canonical URI is the path as sent: the same key spelled
        # otherwise ("~" as "%7E") than it was signed fails.
        assert "~" in url
        other = url.replace("~", "%7E")
        resp, body = request(other, headers=moto_s3.sign("GET", url, rng))
        assert resp.status == 403 and b"SignatureDoesNotMatch" in body
        resp, body = request(other, headers=moto_s3.sign("GET", other, rng))
        assert (resp.status, body) == (206, DATA[10:20])

        resp, _ = request(url, headers=rng)  # unsigned
        assert resp.status == 403

        # Not checked by moto (documented in remote_servers.py): the scope's region.
        resp, _ = request(url, headers=moto_s3.sign("GET", url, rng, region="eu-west-1"))
        assert resp.status == 206

    # Checking is off again: a bad signature is not noticed.
    resp, body = request(url, headers=moto_s3.sign("GET", url, rng, secret_access_key="x" * 40))
    assert (resp.status, body) == (206, DATA[10:20])


def test_moto_s3_signed_fixture(moto_s3_signed):
    moto_s3_signed.create_bucket("lsio-signed-fixture")  # boto3 signs with the IAM key
    moto_s3_signed.put("lsio-signed-fixture", "k", b"abc")
    url = moto_s3_signed.url("lsio-signed-fixture", "k")
    assert request(url)[0].status == 403
    resp, body = request(url, headers=moto_s3_signed.sign("GET", url))
    assert (resp.status, body) == (200, b"abc")


def test_moto_process_over_https(moto_s3_tls):
    """moto_server in a child process, HTTPS with the test CA, signatures checked."""
    srv = moto_s3_tls
    assert srv.endpoint_url.startswith("https://127.0.0.1:")
    srv.put(srv.create_bucket("lsio-tls"), "c/0", DATA)
    url = srv.url("lsio-tls", "c/0")
    ctx = srv.tls.client_context()
    with srv.require_signatures():
        resp, body = request(url, headers=srv.sign("GET", url, {"Range": "bytes=5-9"}), context=ctx)
        assert (resp.status, body) == (206, DATA[5:10])
        resp, _ = request(url, headers=srv.sign("GET", url, secret_access_key="x" * 40), context=ctx)
        assert resp.status == 403
    with pytest.raises(ssl.SSLCertVerificationError):
        request(url, context=ssl.create_default_context())


# ==========================================================================
# nginx
# ==========================================================================


@pytest.fixture
def nginx_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("nginx_root")
    (root / "c").mkdir()
    (root / "c" / "0").write_bytes(DATA)
    (root / "zarr.json").write_text('{"zarr_format": 3}')
    return root


def test_nginx_http_ranges_etag_keepalive(nginx_server, nginx_root):
    srv = nginx_server(nginx_root)
    assert nginx_server(nginx_root) is srv  # one server per directory per session
    assert srv.http_url.startswith("http://127.0.0.1:")

    u = urllib.parse.urlsplit(srv.http_url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=TIMEOUT)
    resp, body = request(srv.url("c/0"), conn=conn)
    assert (resp.status, body) == (200, DATA)
    etag = resp.getheader("ETag")
    assert etag and etag.startswith('"')
    sock = conn.sock

    resp, body = request(srv.url("c/0"), headers={"Range": "bytes=1000-1999"}, conn=conn)
    assert resp.status == 206
    assert resp.getheader("Content-Range") == "bytes 1000-1999/10240"
    assert body == DATA[1000:2000]
    resp, body = request(srv.url("c/0"), headers={"Range": "bytes=-10"}, conn=conn)
    assert (resp.status, body) == (206, DATA[-10:])
    resp, body = request(srv.url("c/0"), headers={"Range": "bytes=20000-"}, conn=conn)
    assert resp.status == 416
    resp, body = request(srv.url("c/0"), headers={"If-Match": etag, "Range": "bytes=0-0"}, conn=conn)
    assert (resp.status, body) == (206, DATA[:1])
    resp, body = request(srv.url("missing"), conn=conn)
    assert resp.status == 404
    assert conn.sock is sock  # every request above reused one connection

    # A failed If-Match is 412.  nginx 1.22 then closes the connection even
    # though the 412 says "Connection: keep-alive": clients must retry an
    # idempotent request on a fresh connection when a reused one is found
    # closed.  (Not asserted: other nginx versions may keep it open.)
    resp, body = request(srv.url("c/0"), headers={"If-Match": '"nope"'}, conn=conn)
    assert resp.status == 412
    conn.close()


def test_nginx_https_with_test_ca(nginx_server, nginx_root, tls_cert):
    srv = nginx_server(nginx_root)
    assert srv.https_url.startswith("https://127.0.0.1:")
    assert srv.cert_file == tls_cert.ca_file

    ctx = ssl.create_default_context(cafile=str(srv.cert_file))
    resp, body = request(srv.url("zarr.json", https=True), context=ctx,
                         headers={"Range": "bytes=0-5"})
    assert (resp.status, body) == (206, b'{"zarr')

    # By name too: the certificate also names localhost.
    u = urllib.parse.urlsplit(srv.https_url)
    with socket.create_connection((u.hostname, u.port), timeout=TIMEOUT) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as tls:
            assert tls.version() in ("TLSv1.2", "TLSv1.3")

    # Without the test CA, verification fails.
    with pytest.raises(ssl.SSLCertVerificationError):
        request(srv.url("zarr.json", https=True), context=ssl.create_default_context())


def test_nginx_stop(nginx_server, tmp_path, tls_cert):
    # nginx_server only for its skip-or-fail check: this test owns its server.
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "f").write_bytes(b"x")
    srv = remote_servers.NginxServer(tmp_path / "root", tmp_path / "work", tls_cert)
    assert request(srv.url("f"))[1] == b"x"
    srv.stop()
    assert srv.proc.returncode is not None
    with pytest.raises(OSError):
        request(srv.url("f"), timeout=1)


# ==========================================================================
# FaultServer: plain semantics
# ==========================================================================


@pytest.fixture
def fs(fault_server):
    (fault_server.root / "c").mkdir()
    (fault_server.root / "c" / "0").write_bytes(DATA)
    (fault_server.root / "zarr.json").write_bytes(b'{"zarr_format": 3}')
    return fault_server


def test_fault_server_ranges(fs):
    url = fs.url("c/0")
    resp, body = request(url)
    assert (resp.status, body) == (200, DATA)
    assert resp.getheader("Accept-Ranges") == "bytes"
    assert resp.getheader("Content-Length") == str(len(DATA))

    for rng, status, want, cr in [
        ("bytes=0-9", 206, DATA[:10], "bytes 0-9/10240"),
        ("bytes=10230-", 206, DATA[10230:], "bytes 10230-10239/10240"),
        ("bytes=10230-99999", 206, DATA[10230:], "bytes 10230-10239/10240"),
        ("bytes=-5", 206, DATA[-5:], "bytes 10235-10239/10240"),
        ("bytes=-99999", 206, DATA, "bytes 0-10239/10240"),
        ("bytes=10240-", 416, b"", "bytes */10240"),
        ("bytes=-0", 416, b"", "bytes */10240"),
        ("bytes=5-1", 200, DATA, None),  # malformed: ignored
        ("bytes=0-1,5-6", 200, DATA, None),  # multi-range: whole object
        ("items=0-1", 200, DATA, None),
    ]:
        resp, body = request(url, headers={"Range": rng})
        assert (resp.status, body, resp.getheader("Content-Range")) == (status, want, cr), rng

    resp, body = request(url, "HEAD", headers={"Range": "bytes=0-9"})
    assert (resp.status, body, resp.getheader("Content-Length")) == (206, b"", "10")
    assert request(fs.url("nope"))[0].status == 404
    assert request(fs.url("c"))[0].status == 404  # a directory
    assert request(fs.base_url + "/c/../zarr.json")[0].status == 404
    assert request(fs.url("zarr.json"), "PUT")[0].status == 405


def test_fault_server_etag_preconditions(fs):
    url = fs.url("c/0")
    resp, _ = request(url)
    etag = resp.getheader("ETag")
    assert etag.startswith('"') and etag.endswith('"')
    assert request(url)[0].getheader("ETag") == etag  # stable

    resp, body = request(url, headers={"If-Match": etag, "Range": "bytes=0-3"})
    assert (resp.status, body) == (206, DATA[:4])
    assert request(url, headers={"If-Match": f'"x", {etag}'})[0].status == 200
    assert request(url, headers={"If-Match": "*"})[0].status == 200
    resp, body = request(url, headers={"If-Match": '"other"', "Range": "bytes=0-3"})
    assert resp.status == 412
    assert request(url, headers={"If-None-Match": etag})[0].status == 304

    # Rewriting the file changes the ETag.
    (fs.root / "c" / "0").write_bytes(DATA[::-1])
    assert request(url)[0].getheader("ETag") != etag


def test_fault_server_records_and_keepalive(fs):
    conn = http.client.HTTPConnection("127.0.0.1", fs.port, timeout=TIMEOUT)
    request(fs.url("c/0"), headers={"Range": "bytes=0-9"}, conn=conn)
    request(fs.url("c/0"), headers={"Range": "bytes=10-19", "If-Match": '"e"'}, conn=conn)
    conn.close()
    request(fs.url("zarr.json"))

    recs = fs.requests
    assert [(r.method, r.path, r.range) for r in recs] == [
        ("GET", "/c/0", "bytes=0-9"), ("GET", "/c/0", "bytes=10-19"), ("GET", "/zarr.json", None),
    ]
    assert recs[1].if_match == '"e"' and recs[1].status == 412
    assert recs[0].conn_id == recs[1].conn_id != recs[2].conn_id
    assert fs.connections_seen == 2
    assert fs.count("/c/*") == 2 and fs.count() == 3 and fs.count(method="HEAD") == 0
    fs.clear_requests()
    assert fs.requests == []


def test_fault_server_concurrent_requests(fs):
    """Thread safety: parallel clients, every request recorded once."""
    errors = []

    def worker(i):
        try:
            conn = http.client.HTTPConnection("127.0.0.1", fs.port, timeout=TIMEOUT)
            for j in range(10):
                start = (i * 10 + j) * 7
                resp, body = request(fs.url("c/0"), headers={"Range": f"bytes={start}-{start + 99}"},
                                     conn=conn)
                assert (resp.status, body) == (206, DATA[start:start + 100])
            conn.close()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not errors
    assert fs.count("/c/0") == 80
    assert len({r.conn_id for r in fs.requests}) == 8


# ==========================================================================
# FaultServer: faults
# ==========================================================================


def test_fault_503_times_then_success(fs):
    fs.add_fault("503", path="/c/*", times=2)
    statuses = [request(fs.url("c/0"))[0].status for _ in range(3)]
    assert statuses == [503, 503, 200]
    assert request(fs.url("zarr.json"))[0].status == 200
    assert [r.fault for r in fs.requests] == ["503", "503", None, None]


def test_fault_429_and_status(fs):
    fs.add_fault("429", path="/zarr.json", retry_after=1)
    fs.add_fault("status", path="/zarr.json", status=500, body=b"oops")
    resp, _ = request(fs.url("zarr.json"))
    assert (resp.status, resp.getheader("Retry-After")) == (429, "1")
    resp, body = request(fs.url("zarr.json"))
    assert (resp.status, body) == (500, b"oops")
    assert request(fs.url("zarr.json"))[0].status == 200


def test_fault_skip_and_unlimited(fs):
    fs.add_fault("503", path="/zarr.json", skip=1, times=None)
    statuses = [request(fs.url("zarr.json"))[0].status for _ in range(4)]
    assert statuses == [200, 503, 503, 503]
    fs.clear_faults()
    assert request(fs.url("zarr.json"))[0].status == 200


def test_fault_method_filter(fs):
    fs.add_fault("503", method="HEAD", times=None)
    assert request(fs.url("zarr.json"), "HEAD")[0].status == 503
    assert request(fs.url("zarr.json"))[0].status == 200


def test_fault_slowdown_xml(fs):
    fs.add_fault("slowdown_xml")
    fs.add_fault("slowdown_xml", status=200)
    for status in (503, 200):
        resp, body = request(fs.url("c/0"), headers={"Range": "bytes=0-9"})
        assert resp.status == status
        assert resp.getheader("Content-Type") == "application/xml"
        assert b"<Code>SlowDown</Code>" in body
    assert request(fs.url("c/0"), headers={"Range": "bytes=0-9"})[1] == DATA[:10]


def test_fault_reset_mid_body(fs):
    fs.add_fault("reset_mid_body", path="/c/0", after_bytes=1000)
    conn = http.client.HTTPConnection("127.0.0.1", fs.port, timeout=TIMEOUT)
    conn.request("GET", "/c/0")
    resp = conn.getresponse()
    assert resp.status == 200 and resp.getheader("Content-Length") == str(len(DATA))
    got = b""
    with pytest.raises((ConnectionResetError, http.client.IncompleteRead)):
        while chunk := resp.read1(65536):
            got += chunk
        resp.read()  # EOF before Content-Length
    assert got == DATA[:len(got)] and len(got) <= 1000
    conn.close()
    assert request(fs.url("c/0"))[1] == DATA  # one time only


def test_fault_reset_sends_rst(fs):
    """The close is an RST, not a FIN: a raw recv sees ECONNRESET."""
    fs.add_fault("reset_mid_body", after_bytes=0, delay_before_reset=0.0)
    with socket.create_connection(("127.0.0.1", fs.port), timeout=TIMEOUT) as s:
        s.sendall(b"GET /c/0 HTTP/1.1\r\nHost: x\r\n\r\n")
        with pytest.raises(ConnectionResetError):
            while s.recv(65536):
                pass


def test_fault_truncated_body(fs):
    fs.add_fault("truncated_body", after_bytes=100)
    resp, _ = None, None
    conn = http.client.HTTPConnection("127.0.0.1", fs.port, timeout=TIMEOUT)
    conn.request("GET", "/c/0", headers={"Range": "bytes=0-4999"})
    resp = conn.getresponse()
    assert resp.status == 206 and resp.getheader("Content-Length") == "5000"
    with pytest.raises(http.client.IncompleteRead) as e:
        resp.read()
    assert e.value.partial == DATA[:100]
    conn.close()


def test_fault_drop(fs):
    fs.add_fault("drop")
    with pytest.raises((http.client.RemoteDisconnected, ConnectionResetError)):
        request(fs.url("zarr.json"))
    assert fs.requests[0].status is None and fs.requests[0].fault == "drop"
    assert request(fs.url("zarr.json"))[0].status == 200


def test_fault_ignore_range(fs):
    fs.add_fault("ignore_range")
    resp, body = request(fs.url("c/0"), headers={"Range": "bytes=100-199"})
    assert (resp.status, body, resp.getheader("Content-Range")) == (200, DATA, None)


def test_fault_wrong_content_range(fs):
    fs.add_fault("wrong_content_range", times=2)
    resp, body = request(fs.url("c/0"), headers={"Range": "bytes=100-199"})
    assert (resp.status, body) == (206, DATA[100:200])
    assert resp.getheader("Content-Range") == "bytes 101-200/10240"
    resp, body = request(fs.url("c/0"))  # no Range asked: a 206 anyway
    assert resp.status == 206 and resp.getheader("Content-Range") == "bytes 1-10240/10240"
    fs.add_fault("wrong_content_range", content_range="bytes 0-99/99999")
    resp, _ = request(fs.url("c/0"), headers={"Range": "bytes=0-99"})
    assert resp.getheader("Content-Range") == "bytes 0-99/99999"


def test_fault_stall_timeout_and_recovery(fs):
    fs.add_fault("stall", seconds=3)
    conn = http.client.HTTPConnection("127.0.0.1", fs.port, timeout=0.3)
    t0 = time.monotonic()
    conn.request("GET", "/c/0")
    resp = conn.getresponse()  # the headers come at once
    assert resp.status == 200
    with pytest.raises(TimeoutError):
        resp.read()
    assert time.monotonic() - t0 < 2
    conn.close()

    fs.add_fault("stall", seconds=0.2)
    t0 = time.monotonic()
    resp, body = request(fs.url("c/0"))
    assert body == DATA and time.monotonic() - t0 >= 0.2


def test_fault_replace_object(fs):
    fs.add_fault("replace_object", path="/c/0", skip=1)
    r1, b1 = request(fs.url("c/0"))
    r2, b2 = request(fs.url("c/0"))
    r3, b3 = request(fs.url("c/0"))
    assert b1 == DATA and b2 == bytes(b ^ 0xFF for b in DATA) and b3 == b2
    e1, e2 = r1.getheader("ETag"), r2.getheader("ETag")
    assert e1 != e2 == r3.getheader("ETag")
    # A reader that pinned the first version now gets 412.
    assert request(fs.url("c/0"), headers={"If-Match": e1, "Range": "bytes=0-9"})[0].status == 412

    fs.add_fault("replace_object", path="/zarr.json", data=b"{}")
    assert request(fs.url("zarr.json"))[1] == b"{}"


def test_latency(fs, make_fault_server):
    slow = make_fault_server(fs.root, latency_ms=150)
    t0 = time.monotonic()
    resp, body = request(slow.url("c/0"), headers={"Range": "bytes=0-0"})
    assert time.monotonic() - t0 >= 0.15 and body == DATA[:1]

    fs.add_fault("latency", path="/zarr.json", ms=120, times=None)
    t0 = time.monotonic()
    request(fs.url("zarr.json"))
    assert time.monotonic() - t0 >= 0.12
    request(fs.url("c/0"))
    assert [f.fired for f in fs.faults] == [1]  # the other path had none


def test_fault_server_https(fs, make_fault_server, tls_cert):
    srv = make_fault_server(fs.root, tls=tls_cert)
    assert srv.base_url.startswith("https://127.0.0.1:")
    ctx = tls_cert.client_context()
    conn = http.client.HTTPSConnection("127.0.0.1", srv.port, timeout=TIMEOUT, context=ctx)
    for rng in ("bytes=0-9", "bytes=-3"):
        resp, body = request(srv.url("c/0"), headers={"Range": rng}, conn=conn)
        assert resp.status == 206 and body == (DATA[:10] if rng == "bytes=0-9" else DATA[-3:])
    conn.close()
    srv.add_fault("reset_mid_body", after_bytes=100)
    with pytest.raises((ConnectionResetError, http.client.IncompleteRead, ssl.SSLError)):
        request(srv.url("c/0"), context=ctx)
    with pytest.raises(ssl.SSLCertVerificationError):
        request(srv.url("c/0"), context=ssl.create_default_context())
    assert request(srv.url("c/0"), context=ctx)[1] == DATA  # survives a failed handshake
    recs = srv.requests
    assert recs[0].conn_id == recs[1].conn_id != recs[2].conn_id
    assert len(recs) == 4  # the failed handshake sent no request


def test_stop_with_a_stalled_request_is_prompt(tmp_path):
    server = remote_servers.FaultServer(tmp_path).start()
    (tmp_path / "f").write_bytes(b"abc")
    server.add_fault("stall", seconds=60)
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=TIMEOUT)
    conn.request("GET", "/f")
    conn.getresponse()
    t0 = time.monotonic()
    server.stop()
    assert time.monotonic() - t0 < 3
    conn.close()


def test_unknown_fault_kind(fs):
    with pytest.raises(ValueError):
        fs.add_fault("explode")

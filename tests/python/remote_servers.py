"""Local servers for testing lsio's remote stores (S3, GCS's XML API, HTTP).

Nothing here imports lsio: these helpers are tested on their own
(``test_remote_servers.py``) with plain ``http.client`` requests, so a failure
in them is told apart from a failure in lsio's remote code.  The fixtures in
``conftest.py`` wrap them; tests normally use those:

* :class:`MotoS3` (fixture ``moto_s3``): moto's S3 server in a thread of the
  test process, with a bucket-creating / uploading boto3 client and real IAM
  credentials, so that SigV4 signatures can be *verified* on demand
  (:meth:`MotoS3.require_signatures`; fixture ``moto_s3_signed``).  Fixture
  ``moto_s3_tls``: the same in a child process, over HTTPS.  Unsigned
  requests get 403 unless the bucket was made with ``public=True``.
* :class:`NginxServer` (fixture factory ``nginx_server(root_dir)``): Debian's
  ``/usr/sbin/nginx`` serving a directory over HTTP and HTTPS on free
  127.0.0.1 ports, with a test CA (:func:`make_tls_cert`) whose certificate
  a client passes as its CA file.
* :class:`FaultServer` (fixtures ``fault_server`` and
  ``make_fault_server(root_dir)``): a threaded HTTP/1.1 keep-alive file
  server with exact Range / ETag / If-Match semantics, programmable faults
  (5xx, 429, S3 SlowDown, resets, truncation, ignored or wrong ranges, stalls,
  objects replaced between requests, latency) and a log of every request;
  over HTTPS too (``tls=``).

Servers in the test process (``moto_s3``, FaultServer) answer only while
the code under test releases the GIL during network waits.

Example::

    def test_retry(fault_server):
        (fault_server.root / "zarr.json").write_text("{}")
        fault_server.add_fault("503", path="/zarr.json", times=2)
        ...  # read fault_server.url("zarr.json") with the code under test
        assert fault_server.count("/zarr.json") == 3

Whether moto checks SigV4 (moto 5.2): only when ``INITIAL_NO_AUTH_ACTION_COUNT``
is finite (default ``inf``), which :meth:`MotoS3.require_signatures` sets to 0
through moto's ``/moto-api/reset-auth`` endpoint.  Then every request must
carry an ``Authorization`` header whose access key exists in moto's IAM (hence
the IAM user made at start) and whose signature botocore's ``S3SigV4Auth``
recomputes identically over the method, the path exactly as sent (no
normalisation, single encoding), the query, the *signed* headers and the
``x-amz-content-sha256`` header's value.  A wrong secret, a tampered signed
header or a path signed in another spelling ("~" vs "%7E") is refused with
403 SignatureDoesNotMatch;
an unsigned request gets a bare 403.  moto does NOT check: the clock skew of
``x-amz-date``, the credential scope's region against the server's, or the
payload hash against the body.  Those need unit tests (lsio's
``lsio_net_test`` has AWS's vectors) or a real S3.
"""

from __future__ import annotations

import contextlib
import dataclasses
import email.utils
import fnmatch
import hashlib
import itertools
import json
import os
import signal
import socket
import stat
import ssl
import struct
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable, Iterator, Optional

# Debian's nginx; LSIO_NGINX points elsewhere (another system, a self-built one).
NGINX = os.environ.get("LSIO_NGINX", "/usr/sbin/nginx")
OPENSSL = "openssl"
LOCALHOST = "127.0.0.1"


def in_ci() -> bool:
    """True on CI (``CI=true``), where a missing server is a failure, not a skip."""
    return os.environ.get("CI", "").lower() == "true"


def server_env() -> dict:
    """The environment for server programs (nginx, openssl, moto's process): this one
    without sanitizer preloads and options, which scripts/sanitize.sh sets for the code
    under test, not for the servers it talks to."""
    env = dict(os.environ)
    for k in ("LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS", "TSAN_OPTIONS"):
        env.pop(k, None)
    return env


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (for servers that
    cannot report the port they bound, like nginx; callers retry on a race)."""
    with socket.socket() as s:
        s.bind((LOCALHOST, 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout: float, alive: Callable[[], bool] = lambda: True) -> None:
    """Wait until something accepts connections on 127.0.0.1:port."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((LOCALHOST, port), timeout=0.5):
                return
        except OSError:
            if not alive():
                raise RuntimeError(f"server for port {port} exited during startup")
            if time.monotonic() > deadline:
                raise TimeoutError(f"nothing listens on {LOCALHOST}:{port} after {timeout} s")
            time.sleep(0.02)


# ==========================================================================
# moto S3
# ==========================================================================


class MotoS3:
    """moto's S3 server on 127.0.0.1, a free port.

    ``mode="thread"`` (fixture ``moto_s3``): ``ThreadedMotoServer`` in a
    thread of the test process; starts in ~0.3 s.  It needs the GIL to
    answer, so code under test must release the GIL while it waits for the
    network (a read that holds it stalls until its own timeout).  The same
    holds for :class:`FaultServer`.

    ``mode="process"`` (fixture ``moto_s3_tls``): the ``moto_server`` CLI in
    a child process (~1-2 s), over HTTPS when ``tls`` is given (moto's
    ``-c/-k``; clients trust ``tls.ca_file``).  Independent of the GIL.

    Attributes: ``endpoint_url`` ("http(s)://127.0.0.1:PORT"), ``host``,
    ``port``, ``region`` ("us-east-1"), ``access_key_id`` and
    ``secret_access_key`` (an IAM user's key allowed everything: dummy, but
    known to moto, so that signatures verify when checking is on), ``client``
    (a boto3 S3 client with those credentials, path-style addressing).

    Buckets are addressed path-style (``{endpoint_url}/{bucket}/{key}``):
    moto also accepts virtual-host style only through DNS names lsio's tests
    cannot resolve.

    In thread mode moto's backends are globals of the test process: one
    such server per process (a session fixture).

    What moto 5.2 answers (checked by hand): single and suffix ranges 206
    with Content-Range, clamped to the size; a range starting at or past
    the end, and ``bytes=-0``, 416 InvalidRange (XML, no Content-Range); a
    multi-range header 200 and the whole object; If-Match mismatch 412
    PreconditionFailed; If-None-Match match 304; the ETag is the quoted
    MD5 of a single-part object; a HEAD on a missing key is a bare 404.
    Connections are kept alive (werkzeug's threaded server, HTTP/1.1).
    """

    region = "us-east-1"

    def __init__(self, mode: str = "thread", tls: Optional["TlsCert"] = None,
                 start_timeout: float = 60.0) -> None:
        import boto3
        from botocore.config import Config

        if mode not in ("thread", "process"):
            raise ValueError(f"mode must be 'thread' or 'process', not {mode!r}")
        if tls is not None and mode != "process":
            raise ValueError("TLS needs mode='process' (moto_server -c/-k)")
        self.mode = mode
        self.tls = tls
        self._server = None
        self._proc: Optional[subprocess.Popen] = None
        if mode == "thread":
            self._start_thread()
        else:
            self._start_process(start_timeout)
        self.endpoint_url = f"{'https' if tls else 'http'}://{self.host}:{self.port}"
        self._ssl = tls.client_context() if tls else None
        verify = str(tls.ca_file) if tls else None
        # Checking starts off; leave it off while the IAM user is made with
        # moto's default (unknown to IAM) credentials.
        self._set_no_auth_count(float("inf"))
        config = Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1})
        iam = boto3.client(
            "iam", endpoint_url=self.endpoint_url, region_name=self.region,
            aws_access_key_id="testing", aws_secret_access_key="testing", config=config,
            verify=verify,
        )
        user = f"lsio-test-{os.getpid()}"
        iam.create_user(UserName=user)
        iam.put_user_policy(
            UserName=user, PolicyName="everything",
            PolicyDocument=json.dumps({
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}],
            }),
        )
        key = iam.create_access_key(UserName=user)["AccessKey"]
        self.access_key_id: str = key["AccessKeyId"]
        self.secret_access_key: str = key["SecretAccessKey"]
        self.client = boto3.client(
            "s3", endpoint_url=self.endpoint_url, region_name=self.region,
            aws_access_key_id=self.access_key_id,
            aws_secret_access_key=self.secret_access_key, config=config, verify=verify,
        )
        self._auth_lock = threading.Lock()

    def _start_thread(self) -> None:
        import logging

        from moto.server import ThreadedMotoServer

        # werkzeug logs every request on stderr; failures are in the responses.
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        self._server = ThreadedMotoServer(ip_address=LOCALHOST, port=0, verbose=False)
        self._server.start()
        self.host, self.port = self._server.get_host_and_port()

    def _start_process(self, timeout: float) -> None:
        import sys

        self.host = LOCALHOST
        tls_args = ["-c", str(self.tls.cert_file), "-k", str(self.tls.key_file)] if self.tls else []
        for _ in range(5):  # the free port may be taken before moto binds it
            self.port = free_port()
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "moto.server", "-H", LOCALHOST, "-p", str(self.port),
                 *tls_args],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                env=server_env(),
            )
            try:
                wait_for_port(self.port, timeout, alive=lambda: self._proc.poll() is None)
                return
            except RuntimeError:
                continue  # exited: most likely the port was taken
        raise RuntimeError("moto_server did not start (see python -m moto.server --help)")

    # -- objects -----------------------------------------------------------

    def create_bucket(self, name: str, public: bool = False) -> str:
        """Create bucket ``name`` (3-63 chars, S3 naming rules); return it.
        Creating an existing bucket of ours is not an error.

        moto answers unsigned requests like S3 does: 403 unless the bucket
        policy (or object ACL) lets everyone read.  ``public=True`` sets a
        policy granting ``s3:GetObject`` and ``s3:ListBucket`` to ``*``,
        for anonymous-access tests.
        """
        try:
            self.client.create_bucket(Bucket=name)
        except self.client.exceptions.BucketAlreadyOwnedByYou:
            pass
        if public:
            self.client.put_bucket_policy(Bucket=name, Policy=json.dumps({
                "Version": "2012-10-17",
                "Statement": [
                    {"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
                     "Resource": f"arn:aws:s3:::{name}/*"},
                    {"Effect": "Allow", "Principal": "*", "Action": "s3:ListBucket",
                     "Resource": f"arn:aws:s3:::{name}"},
                ],
            }))
        return name

    def put(self, bucket: str, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=bucket, Key=key, Body=data)

    def get(self, bucket: str, key: str) -> bytes:
        return self.client.get_object(Bucket=bucket, Key=key)["Body"].read()

    def delete(self, bucket: str, key: str) -> None:
        self.client.delete_object(Bucket=bucket, Key=key)

    def upload_dir(self, local_dir: os.PathLike | str, bucket: str, prefix: str = "") -> list[str]:
        """Upload every file under ``local_dir`` as ``prefix/relative/path``
        (``/``-separated; no leading ``/`` when ``prefix`` is empty).  The
        bucket is created if needed.  Returns the keys, sorted."""
        root = Path(local_dir)
        self.create_bucket(bucket)
        prefix = prefix.strip("/")
        keys = []
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            rel = path.relative_to(root).as_posix()
            key = f"{prefix}/{rel}" if prefix else rel
            self.client.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())
            keys.append(key)
        return keys

    def url(self, bucket: str, key: str = "") -> str:
        """Path-style URL of an object, the key percent-encoded as S3 wants
        (everything but unreserved characters and ``/``)."""
        return f"{self.endpoint_url}/{bucket}/{urllib.parse.quote(key, safe='/~')}"

    # -- signatures --------------------------------------------------------

    def sign(self, method: str, url: str, headers: Optional[dict] = None, *,
             secret_access_key: Optional[str] = None, region: Optional[str] = None,
             payload_sha256: str = "UNSIGNED-PAYLOAD") -> dict:
        """Headers for ``url`` signed with botocore's S3 SigV4 (the reference
        signer): ``headers`` plus ``Authorization``, ``X-Amz-Date`` and
        ``X-Amz-Content-SHA256``.  ``url`` must be encoded exactly as it
        will be sent (its path is signed as is)."""
        from botocore.auth import S3SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials

        req = AWSRequest(method=method, url=url,
                         headers={**(headers or {}), "X-Amz-Content-SHA256": payload_sha256})
        creds = Credentials(self.access_key_id, secret_access_key or self.secret_access_key)
        S3SigV4Auth(creds, "s3", region or self.region).add_auth(req)
        return dict(req.headers.items())

    def _set_no_auth_count(self, count: float) -> float:
        """Set moto's INITIAL_NO_AUTH_ACTION_COUNT (0: check every request;
        inf: never); return the previous value.  Through the HTTP endpoint,
        as for a moto server in another process."""
        req = urllib.request.Request(
            f"{self.endpoint_url}/moto-api/reset-auth", data=str(count).encode(),
            method="POST",
            # Not form-encoded (urllib's default), or werkzeug parses the body
            # as a form and moto reads an empty string.
            headers={"Content-Type": "text/plain"},
        )
        with urllib.request.urlopen(req, timeout=10, context=self._ssl) as resp:
            return float(json.loads(resp.read())["PREVIOUS_INITIAL_NO_AUTH_ACTION_COUNT"])

    @contextlib.contextmanager
    def require_signatures(self) -> Iterator["MotoS3"]:
        """Within the block moto verifies the SigV4 signature of every
        request (see the module docstring for what it checks).  The setting
        is global to the server: do not run tests in other threads of the
        same process meanwhile."""
        with self._auth_lock:
            previous = self._set_no_auth_count(0)
            try:
                yield self
            finally:
                self._set_no_auth_count(previous)

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=10)


# ==========================================================================
# TLS certificates
# ==========================================================================


@dataclasses.dataclass(frozen=True)
class TlsCert:
    """A test CA and a server certificate it signed for 127.0.0.1/localhost.

    ``ca_file`` is what a client trusts (its CA file); ``cert_file`` and
    ``key_file`` are what the server presents.
    """

    ca_file: Path
    cert_file: Path
    key_file: Path

    def client_context(self) -> ssl.SSLContext:
        """An SSL context that verifies servers against this CA only."""
        return ssl.create_default_context(cafile=str(self.ca_file))


def make_tls_cert(directory: os.PathLike | str, days: int = 2) -> TlsCert:
    """Make a CA and a server certificate (subjectAltName IP:127.0.0.1,
    DNS:localhost) with the ``openssl`` CLI into ``directory``.

    A CA plus a leaf, not one self-signed leaf: strict verifiers (Python
    3.13's default VERIFY_X509_STRICT, some curl/OpenSSL builds) refuse a
    self-signed CA:TRUE certificate presented as a server's.  P-256 keys are
    generated in milliseconds, unlike RSA.
    """
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    ca_key, ca_crt = d / "ca.key", d / "ca.pem"
    key, csr, crt, ext = d / "server.key", d / "server.csr", d / "server.pem", d / "server.ext"
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]

    def run(*args: str) -> None:
        subprocess.run([OPENSSL, *args], check=True, capture_output=True, timeout=60, env=server_env())

    run("req", "-x509", *ec, "-keyout", str(ca_key), "-out", str(ca_crt), "-days", str(days),
        "-subj", "/CN=lsio test CA",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    run("req", "-new", *ec, "-keyout", str(key), "-out", str(csr), "-subj", "/CN=localhost")
    ext.write_text(
        "basicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\n"
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
        "authorityKeyIdentifier=keyid,issuer\n"
        "subjectKeyIdentifier=hash\n"
    )
    run("x509", "-req", "-in", str(csr), "-CA", str(ca_crt), "-CAkey", str(ca_key),
        "-CAcreateserial", "-out", str(crt), "-days", str(days), "-extfile", str(ext))
    return TlsCert(ca_file=ca_crt, cert_file=crt, key_file=key)


# ==========================================================================
# nginx
# ==========================================================================


NGINX_CONF = """\
# Generated by tests/python/remote_servers.py: a static file server.
daemon off;
worker_processes 1;
{user}
pid {work}/nginx.pid;
error_log {work}/error.log warn;
events {{ worker_connections 512; }}
http {{
    access_log {work}/access.log;
    # Every compiled-in temp path points under /var/lib/nginx, which an
    # unprivileged user cannot write: move them all.
    client_body_temp_path {work}/tmp/body;
    proxy_temp_path {work}/tmp/proxy;
    fastcgi_temp_path {work}/tmp/fastcgi;
    uwsgi_temp_path {work}/tmp/uwsgi;
    scgi_temp_path {work}/tmp/scgi;
    types {{ application/json json; }}
    default_type application/octet-stream;
    # Ranges (single, suffix, and multipart/byteranges) are on by default for
    # static files; so is the ETag ("mtime-size" in hex).  Spelled out anyway.
    sendfile on;
    tcp_nopush on;
    etag on;
    max_ranges 16;
    keepalive_timeout 60s;
    keepalive_requests 100000;
    server {{
        listen {host}:{http_port};
        listen {host}:{https_port} ssl;
        server_name localhost;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        ssl_protocols TLSv1.2 TLSv1.3;
        root {root};
        location / {{ }}
    }}
}}
"""


class NginxServer:
    """``/usr/sbin/nginx`` serving ``root_dir`` on ``http_url`` and ``https_url``.

    Runs in the foreground (``daemon off``) as a child of the test process,
    with its config, pid file, logs and temp dirs in ``work_dir``; the
    system's /etc/nginx and any nginx service are never touched.  When the
    tests run as root the worker runs as root too (``user root``), because
    nginx's default worker user ``nobody`` cannot read pytest's 0700 tmp
    dirs.

    ``cert_file`` is the CA certificate a client must trust for HTTPS.
    """

    def __init__(self, root_dir: os.PathLike | str, work_dir: os.PathLike | str,
                 tls: TlsCert, nginx: str = NGINX, start_timeout: float = 15.0) -> None:
        self.root_dir = Path(root_dir).resolve()
        self.work_dir = Path(work_dir)
        self.tls = tls
        self.cert_file = tls.ca_file
        self.nginx = nginx
        self.proc: Optional[subprocess.Popen] = None
        (self.work_dir / "tmp").mkdir(parents=True, exist_ok=True)
        last_error = ""
        # Ports are picked before nginx binds them: retry if another process
        # took one meanwhile.
        for _ in range(5):
            self.http_port, self.https_port = free_port(), free_port()
            if self.http_port == self.https_port:
                continue
            try:
                self._start(start_timeout)
                break
            except RuntimeError as e:
                last_error = str(e)
                if "Address already in use" not in last_error:
                    raise
        else:
            raise RuntimeError(f"nginx could not start: {last_error}")
        self.http_url = f"http://{LOCALHOST}:{self.http_port}"
        self.https_url = f"https://{LOCALHOST}:{self.https_port}"

    @property
    def conf_file(self) -> Path:
        return self.work_dir / "nginx.conf"

    def _start(self, timeout: float) -> None:
        self.conf_file.write_text(NGINX_CONF.format(
            user="user root;" if os.geteuid() == 0 else "",
            work=self.work_dir, host=LOCALHOST, http_port=self.http_port,
            https_port=self.https_port, cert=self.tls.cert_file, key=self.tls.key_file,
            root=self.root_dir,
        ))
        log = self.work_dir / "error.log"
        # -e: the error log used before the config is read (the default,
        # /var/log/nginx/error.log, may not be writable).
        self.proc = subprocess.Popen(
            [self.nginx, "-p", str(self.work_dir), "-c", str(self.conf_file), "-e", str(log)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            env=server_env(),
        )
        try:
            for port in (self.http_port, self.https_port):
                wait_for_port(port, timeout, alive=lambda: self.proc.poll() is None)
        except (RuntimeError, TimeoutError) as e:
            self.stop()
            errors = log.read_text(errors="replace") if log.exists() else ""
            raise RuntimeError(f"{e}\n{errors}") from None

    def url(self, path: str = "", https: bool = False) -> str:
        base = self.https_url if https else self.http_url
        return f"{base}/{urllib.parse.quote(path.lstrip('/'))}"

    def stop(self) -> None:
        """Stop nginx (SIGQUIT: graceful; then SIGKILL if it lingers)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGQUIT)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
        if self.proc.stderr:
            self.proc.stderr.close()


# ==========================================================================
# FaultServer
# ==========================================================================

SLOWDOWN_XML = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n'
    b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message>"
    b"<RequestId>LSIOTEST0000</RequestId><HostId>lsio-fault-server</HostId></Error>"
)

# Kinds that produce the response (the first matching one wins) ...
RESPONSE_FAULTS = frozenset({
    "status", "503", "429", "slowdown_xml", "reset_mid_body", "truncated_body",
    "ignore_range", "wrong_content_range", "stall", "drop", "no_length",
})
# ... and kinds that only act before it (all matching ones apply).
SIDE_FAULTS = frozenset({"latency", "replace_object"})


@dataclasses.dataclass
class Fault:
    """One programmed fault; see :meth:`FaultServer.add_fault`."""

    kind: str
    path: str = "*"
    method: Optional[str] = None
    times: Optional[int] = 1
    skip: int = 0
    params: dict = dataclasses.field(default_factory=dict)
    seen: int = 0  # matching requests so far
    fired: int = 0  # of which the fault acted on

    def matches(self, method: str, path: str) -> bool:
        return (self.method is None or self.method == method) and fnmatch.fnmatchcase(path, self.path)

    def take(self) -> bool:
        """Count one matching request; True when the fault acts on it."""
        self.seen += 1
        if self.seen <= self.skip:
            return False
        if self.times is not None and self.fired >= self.times:
            return False
        self.fired += 1
        return True

    @property
    def exhausted(self) -> bool:
        return self.times is not None and self.fired >= self.times


@dataclasses.dataclass
class RequestRecord:
    """One request as the FaultServer saw it."""

    method: str
    path: str  # decoded path, e.g. "/a b/zarr.json"
    raw_path: str  # the request target as sent, query included
    headers: dict  # lower-cased names
    conn_id: int  # same number = same TCP connection (keep-alive reuse)
    time: float  # time.monotonic() when the request line was read
    status: Optional[int] = None  # None until the response started / if none was sent
    fault: Optional[str] = None  # kind of the response fault applied, if any

    @property
    def range(self) -> Optional[str]:
        return self.headers.get("range")

    @property
    def if_match(self) -> Optional[str]:
        return self.headers.get("if-match")


def file_etag(st: os.stat_result) -> str:
    """Quoted strong ETag from (size, mtime_ns, inode): changes whenever the
    file is rewritten or replaced, costs no read."""
    h = hashlib.sha1(f"{st.st_size}:{st.st_mtime_ns}:{st.st_ino}".encode()).hexdigest()
    return f'"{h[:20]}"'


def parse_range(header: Optional[str], size: int):
    """Parse a Range header for an object of ``size`` bytes.

    Returns None (no usable single range: serve 200, as RFC 9110 allows for
    a missing, malformed or multi-range header), "unsatisfiable" (416), or
    (start, end) inclusive.
    """
    if not header:
        return None
    unit, _, spec = header.partition("=")
    if unit.strip().lower() != "bytes" or "," in spec:
        return None
    first, dash, last = spec.strip().partition("-")
    if not dash:
        return None
    try:
        if first == "":  # suffix: the last N bytes
            n = int(last)
            if n < 0:
                return None
            if n == 0 or size == 0:
                return "unsatisfiable"
            return (max(0, size - n), size - 1)
        start = int(first)
        end = int(last) if last else None
    except ValueError:
        return None
    if start < 0 or (end is not None and end < start):
        return None
    if start >= size:
        return "unsatisfiable"
    return (start, size - 1 if end is None else min(end, size - 1))


class _Stopped(Exception):
    """The server is shutting down: abandon the request."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive; every response has a length
    server_version = "lsio-fault-server"
    sys_version = ""
    # An idle keep-alive connection's thread gives up after this long (the
    # server also closes every connection when it stops).
    timeout = 60
    server: "_Server"

    def log_message(self, format, *args):  # noqa: A002 - silence stderr
        pass

    def setup(self):
        self.conn_id = self.server.owner._connection_opened(self.request)
        if isinstance(self.request, ssl.SSLSocket):
            # The TLS handshake runs here, in the connection's thread, not in
            # accept() (a client that never finishes it would block them all).
            self.request.settimeout(self.timeout)
            try:
                self.request.do_handshake()
            except (OSError, ssl.SSLError):
                self.server.owner._connection_closed(self.request)
                raise
        super().setup()

    def finish(self):
        try:
            super().finish()
        finally:
            self.server.owner._connection_closed(self.connection)

    def do_GET(self):
        self._serve(body=True)

    def do_HEAD(self):
        self._serve(body=False)

    def _other(self):
        self._record_and_faults()
        self.close_connection = True  # any request body is left unread
        self._simple(405, b"", {"Allow": "GET, HEAD", "Connection": "close"})

    do_PUT = do_POST = do_DELETE = do_PATCH = _other

    # -- plumbing ----------------------------------------------------------

    def _record_and_faults(self):
        owner = self.server.owner
        path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
        rec = RequestRecord(
            method=self.command, path=path, raw_path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            conn_id=self.conn_id, time=time.monotonic(),
        )
        self.rec = rec
        fault, self.delay = owner._on_request(rec)
        return rec, fault

    def _start(self, status: int, headers: dict):
        self.rec.status = status
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, str(v))
        self.end_headers()
        self.wfile.flush()

    def _simple(self, status: int, body: bytes, headers: Optional[dict] = None):
        self._start(status, {"Content-Length": len(body), **(headers or {})})
        if self.command != "HEAD":
            self.wfile.write(body)

    def _sleep(self, seconds: float):
        if seconds > 0 and self.server.owner._stopping.wait(seconds):
            raise _Stopped()

    def _reset(self):
        """Close the connection with a TCP RST (SO_LINGER 0) instead of a FIN."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.wfile.flush()
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        # The socket's fd is released only when the makefile() wrappers are
        # closed too; closing it all here sends the RST now.
        for f in (self.wfile, self.rfile):
            with contextlib.suppress(Exception):
                f.close()
        with contextlib.suppress(OSError):
            self.connection.close()

    # -- the request -------------------------------------------------------

    def _serve(self, body: bool):
        try:
            self._serve_inner(body)
        except _Stopped:
            self._reset()
        except (BrokenPipeError, ConnectionResetError):
            # The client went away (a timeout in a stall test, say).
            self.close_connection = True

    def _serve_inner(self, body: bool):
        owner = self.server.owner
        rec, fault = self._record_and_faults()
        self._sleep(owner.latency_ms / 1000 + self.delay)
        kind = fault.kind if fault else None
        p = fault.params if fault else {}

        if kind == "drop":
            self._reset()
            return
        if kind in ("status", "503", "429"):
            status = p.get("status", 429 if kind == "429" else 503)
            headers = dict(p.get("headers", {}))
            if "retry_after" in p:
                headers["Retry-After"] = p["retry_after"]
            self._simple(status, p.get("body", b""), headers)
            return
        if kind == "slowdown_xml":
            self._simple(p.get("status", 503), SLOWDOWN_XML, {"Content-Type": "application/xml"})
            return

        data, etag, mtime = owner._read(rec.path)
        if data is None:
            self._simple(404, b"not found\n", {"Content-Type": "text/plain"})
            return

        # The validators this server sends (FaultServer.validators).
        mode = owner.validators
        if mode == "weak":
            etag = f"W/{etag}"
        elif mode in ("last_modified", "none"):
            etag = None
        validator_headers = {}
        if etag is not None:
            validator_headers["ETag"] = etag
        if mode != "none":
            validator_headers["Last-Modified"] = email.utils.formatdate(mtime, usegmt=True)

        # Preconditions first (RFC 9110 13.2.2), then the range. If-Match compares
        # strongly (a weak tag never matches), If-None-Match weakly.
        if_match = rec.headers.get("if-match")
        if if_match is not None and not _etag_in(etag, if_match, strong=True):
            self._simple(412, b"precondition failed\n", validator_headers)
            return
        if_none_match = rec.headers.get("if-none-match")
        if if_none_match is not None and _etag_in(etag, if_none_match, strong=False):
            self._start(304, validator_headers)
            return

        size = len(data)
        headers = {
            "Accept-Ranges": "bytes", "Content-Type": "application/octet-stream", **validator_headers,
        }
        rng = parse_range(rec.headers.get("range"), size)
        if kind == "ignore_range":
            rng = None
        if kind == "wrong_content_range" and not isinstance(rng, tuple):
            rng = (0, size - 1) if size else None
        if rng == "unsatisfiable":
            self._simple(416, b"", {**headers, "Content-Range": f"bytes */{size}"})
            return
        if rng is None:
            status, payload = 200, data
        else:
            start, end = rng
            status, payload = 206, data[start:end + 1]
            cr = f"bytes {start}-{end}/{size}"
            if kind == "wrong_content_range":
                shift = p.get("shift", 1)
                cr = p.get("content_range", f"bytes {start + shift}-{end + shift}/{size}")
            headers["Content-Range"] = cr
        headers["Content-Length"] = len(payload)

        if kind == "stall":
            self._start(status, headers)
            self._sleep(p.get("seconds", 5.0))
            if body:
                self.wfile.write(payload)
            return
        if kind in ("reset_mid_body", "truncated_body"):
            n = p.get("after_bytes", len(payload) // 2)
            self._start(status, headers)
            if body:
                self.wfile.write(payload[:n])
                self.wfile.flush()
            if kind == "reset_mid_body":
                # Give the partial body a moment to reach the client before
                # the RST, so a client can see (and resume after) it.
                self._sleep(p.get("delay_before_reset", 0.05))
                self._reset()
            else:
                self.close_connection = True  # FIN after fewer bytes than promised
            return
        if kind == "no_length":
            # A body delimited by closing the connection (HTTP/1.1 without
            # Content-Length): the client learns its size only by reading it.
            headers.pop("Content-Length")
            headers["Connection"] = "close"
            self.close_connection = True
            self._start(status, headers)
            if body:
                for at in range(0, len(payload), 1 << 20):
                    self.wfile.write(payload[at:at + (1 << 20)])
            return
        self._start(status, headers)
        if body:
            self.wfile.write(payload)


def _etag_in(etag: Optional[str], header: str, strong: bool) -> bool:
    """Whether an If-Match (``strong``) / If-None-Match (weak comparison) list
    names ``etag`` (or is "*"), per RFC 9110 8.8.3.2."""
    tags = [t.strip() for t in header.split(",")]
    if "*" in tags:
        return True
    if etag is None:
        return False
    if strong:
        return not etag.startswith("W/") and etag in tags
    bare = etag[2:] if etag.startswith("W/") else etag
    return any((t[2:] if t.startswith("W/") else t) == bare for t in tags)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128
    owner: "FaultServer"

    def handle_error(self, request, client_address):
        # Failed TLS handshakes and clients vanishing mid-request are part of
        # the tests; the request log tells what happened.
        pass


class FaultServer:
    """A threaded HTTP/1.1 file server with programmable faults.

    Serves GET and HEAD for the files under ``root`` (the URL path, decoded,
    is the file's path relative to ``root``; "..", directories and missing
    files are 404).  Semantics: single ranges ``a-b``, ``a-`` and suffix
    ``-n`` answer 206 with ``Content-Range``; an unsatisfiable range 416
    with ``Content-Range: bytes */size``; a malformed or multi-range header
    is ignored (200, whole object); strong ``ETag`` from (size, mtime_ns,
    inode); ``If-Match`` mismatch 412; ``If-None-Match`` match 304.  Other
    methods get 405.  Connections are kept alive.

    Faults (:meth:`add_fault`) apply to requests whose decoded path matches
    a glob (``fnmatch``, ``*`` also spans ``/``).  Every request is recorded
    (:attr:`requests`) before any fault or latency acts.

    With ``tls`` it speaks HTTPS instead (a reset is then a TCP RST
    without TLS close_notify; a truncation a FIN without close_notify).

    Use as a context manager, or ``start()`` / ``stop()``.
    """

    def __init__(self, root: os.PathLike | str, latency_ms: float = 0.0,
                 tls: Optional[TlsCert] = None) -> None:
        self.root = Path(root)
        #: With a :class:`TlsCert`, HTTPS (clients trust ``tls.ca_file``).
        self.tls = tls
        self.root.mkdir(parents=True, exist_ok=True)
        #: First-byte latency added to every request, in milliseconds.
        self.latency_ms = latency_ms
        #: Validators sent with every answer: "strong" (a strong ETag and
        #: Last-Modified), "weak" (W/ ETag and Last-Modified), "last_modified"
        #: (no ETag) or "none" (neither).
        self.validators = "strong"
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self._requests: list[RequestRecord] = []
        self._conn_ids = itertools.count(1)
        self._open: dict[int, socket.socket] = {}
        self._connections_seen = 0
        self._stopping = threading.Event()
        self._httpd: Optional[_Server] = None
        self._thread: Optional[threading.Thread] = None

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> "FaultServer":
        self._httpd = _Server((LOCALHOST, 0), _Handler)
        self._httpd.owner = self
        self.port = self._httpd.server_address[1]
        scheme = "http"
        if self.tls is not None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(self.tls.cert_file, self.tls.key_file)
            self._httpd.socket = ctx.wrap_socket(
                self._httpd.socket, server_side=True, do_handshake_on_connect=False)
            scheme = "https"
        self.base_url = f"{scheme}://{LOCALHOST}:{self.port}"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
            name=f"FaultServer:{self.port}", daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop accepting, wake stalled handlers and close every connection."""
        if self._httpd is None:
            return
        self._stopping.set()
        self._httpd.shutdown()
        with self._lock:
            conns = list(self._open.values())
        for c in conns:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)
        self._httpd.server_close()
        self._thread.join(timeout=10)
        self._httpd = None

    def __enter__(self) -> "FaultServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def url(self, path: str = "") -> str:
        """URL of ``path`` (relative to ``root``), percent-encoded."""
        return f"{self.base_url}/{urllib.parse.quote(path.lstrip('/'))}"

    # -- faults ------------------------------------------------------------

    def add_fault(self, kind: str, path: str = "*", *, times: Optional[int] = 1,
                  skip: int = 0, method: Optional[str] = None, **params) -> Fault:
        """Program a fault for requests whose decoded path matches ``path``.

        It acts on matching requests number ``skip + 1`` to ``skip + times``
        (``times=None``: all of them from there on).  Kinds and ``params``:

        * ``"503"``, ``"429"``, ``"status"`` (``status=``): that status with
          an empty body (or ``body=``), plus ``retry_after=`` (Retry-After)
          and ``headers=``.
        * ``"slowdown_xml"``: S3's ``SlowDown`` error XML, status 503 (or
          ``status=200``: the "error in a 200 body" variant).
        * ``"reset_mid_body"``: headers and ``after_bytes`` (default half) of
          the body, then a TCP RST (SO_LINGER 0) after ``delay_before_reset``
          seconds (default 0.05).
        * ``"truncated_body"``: the full Content-Length, ``after_bytes``
          (default half) of the body, then a clean close (FIN).
        * ``"ignore_range"``: 200 and the whole object despite a Range.
        * ``"wrong_content_range"``: 206 with the requested bytes but a
          Content-Range shifted by ``shift`` (default 1), or exactly
          ``content_range=``; a request without a Range gets it too.
        * ``"stall"``: headers, then ``seconds`` (default 5) of silence, then
          the body (if the client is still there).  For silence before the
          status line, use ``"latency"``.
        * ``"drop"``: read the request, then RST without any response.
        * ``"no_length"``: the answer without Content-Length, its body ended
          by closing the connection.
        * ``"latency"`` (side fault): ``ms`` more first-byte latency.
        * ``"replace_object"`` (side fault): before serving, rewrite the file
          (new inode, so a new ETag) with ``data=`` (default: its bytes
          XOR 0xFF, same size).  With ``skip=N`` the first N matching
          requests see the old object and the next one the new.

        Response faults are tried in the order added and the first that
        acts decides the response; side faults all act.  A response fault
        counts (for ``skip`` and ``times``) only the matching requests that
        no earlier response fault answered, so faults added one after the
        other act one after the other.
        """
        if kind not in RESPONSE_FAULTS | SIDE_FAULTS:
            raise ValueError(f"unknown fault kind {kind!r}")
        f = Fault(kind=kind, path=path, method=method, times=times, skip=skip, params=params)
        with self._lock:
            self._faults.append(f)
        return f

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    @property
    def faults(self) -> list[Fault]:
        with self._lock:
            return list(self._faults)

    # -- records -----------------------------------------------------------

    @property
    def requests(self) -> list[RequestRecord]:
        """A snapshot of every request so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    def clear_requests(self) -> None:
        with self._lock:
            self._requests.clear()

    def count(self, path: Optional[str] = None, method: Optional[str] = None) -> int:
        """Requests so far whose path matches the glob ``path`` (all if None)."""
        return len([r for r in self.requests
                    if (path is None or fnmatch.fnmatchcase(r.path, path))
                    and (method is None or r.method == method)])

    @property
    def connections_seen(self) -> int:
        """TCP connections accepted so far."""
        with self._lock:
            return self._connections_seen

    # -- used by the handler ----------------------------------------------

    def _connection_opened(self, sock: socket.socket) -> int:
        with self._lock:
            cid = next(self._conn_ids)
            self._open[id(sock)] = sock
            self._connections_seen += 1
            return cid

    def _connection_closed(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.pop(id(sock), None)

    def _on_request(self, rec: RequestRecord) -> tuple[Optional[Fault], float]:
        """Record ``rec``; apply side faults; return the response fault and
        the extra latency (s) of "latency" faults."""
        chosen = None
        replace = []
        delay = 0.0
        with self._lock:
            self._requests.append(rec)
            for f in self._faults:
                if not f.matches(rec.method, rec.path):
                    continue
                if f.kind in SIDE_FAULTS:
                    if f.take():
                        if f.kind == "latency":
                            delay += f.params.get("ms", 0) / 1000
                        else:
                            replace.append(f)
                elif chosen is None and f.take():
                    chosen = f
            for f in replace:
                self._replace(rec.path, f.params.get("data"))
        if chosen is not None:
            rec.fault = chosen.kind
        return chosen, delay

    def _file(self, path: str) -> Optional[Path]:
        rel = path.lstrip("/")
        if not rel or any(part in ("..", "") for part in rel.split("/")):
            return None
        return self.root / rel

    def _read(self, path: str):
        """(bytes, etag, mtime) of the file at URL path ``path``, or (None,) * 3."""
        f = self._file(path)
        if f is None:
            return None, None, None
        # Read and stat one open file, so the ETag belongs to the bytes even
        # if a replace_object swaps the path meanwhile.
        try:
            with open(f, "rb") as fh:
                st = os.fstat(fh.fileno())
                if not stat.S_ISREG(st.st_mode):
                    return None, None, None
                return fh.read(), file_etag(st), st.st_mtime
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError):
            return None, None, None

    def _replace(self, path: str, data: Optional[bytes]) -> None:
        """Swap the file's bytes: write a new file and rename it over the old
        (a new inode, so a new ETag even within one mtime tick)."""
        f = self._file(path)
        if f is None or not f.is_file():
            return
        if data is None:
            data = bytes(b ^ 0xFF for b in f.read_bytes())
        tmp = f.with_name(f".{f.name}.replace-{os.getpid()}-{threading.get_ident()}")
        tmp.write_bytes(data)
        os.replace(tmp, f)

"""An emulated object store on loopback for the W7 benchmark: a Range-capable HTTP/1.1 server.

    python benchmarks/python/object_server.py ROOT [--port 0] [--latency-ms 20] [--rate 100M]

Serves the files under ROOT read-only (GET and HEAD; keep-alive; the body goes out with
sendfile(2) through asyncio) the way S3 answers a range GET:

- ``Range: bytes=a-b``, ``bytes=a-`` and suffix ``bytes=-n`` -> 206 with ``Content-Range``;
  a range that starts past the end -> 416 with ``Content-Range: bytes */size``; several
  ranges in one header -> 200 and the whole object (S3 does not serve multi-range GETs);
  no Range -> 200.
- ``ETag`` (from size and mtime) on every answer; ``If-Match`` that does not match -> 412,
  ``If-None-Match`` that matches -> 304. Missing files (and directories) -> 404.
- ``--latency-ms``: every request waits this long (``asyncio.sleep``, so other requests go
  on meanwhile) before its first byte -- S3's typical time to first byte is ~20 ms
  (docs/design/remote.md section 2). Default 20.
- ``--rate`` (bytes/s, suffixes K/M/G = 10^3.., e.g. ``100M``): a token bucket shared by all
  connections paces the bodies (sent in 64 KiB pieces with plain writes instead of
  sendfile). This is the fallback bandwidth cap for machines where ``tc qdisc ... tbf`` in a
  network namespace is not possible; suite.py's W7 prefers tc (see w7.py).

Counters for the benchmark (the only way to see the requests of readers whose own counters
cannot be read): ``GET /__stats`` returns JSON ``{"requests", "bytes", "status": {code: n},
"in_flight_max", "paths": {path: {"requests", "bytes"}}}`` (bytes = body bytes sent) and
``POST /__reset`` zeroes them. ``/__`` requests are never counted and never delayed.

It is meant to run as its own process (so it does not share a GIL with the readers being
measured); on start it prints one line ``listening on http://HOST:PORT`` to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import re
import sys
import time
from pathlib import Path

from aiohttp import web

_RANGE = re.compile(r"^\s*(\d*)\s*-\s*(\d*)\s*$")
_RATE = re.compile(r"^\s*([\d.]+)\s*([kmg]?)\s*$", re.IGNORECASE)


def parse_rate(text: str) -> float:
    """``"100M"`` -> 1e8 bytes/s (decimal suffixes, as network rates are)."""
    m = _RATE.match(text)
    if not m:
        raise argparse.ArgumentTypeError(f"rate must be bytes/s with an optional K/M/G suffix, got {text!r}")
    return float(m.group(1)) * 1000 ** " kmg".index(m.group(2).lower() or " ")


def parse_range(header: str, size: int):
    """(start, end_exclusive) for a single byte range, "whole" for none/multi/unparseable,
    "unsatisfiable" when it starts past the end (or a suffix of 0 bytes)."""
    if not header:
        return "whole"
    unit, _, spec = header.partition("=")
    if unit.strip().lower() != "bytes" or "," in spec:
        return "whole"  # S3 ignores what it does not serve and answers 200 with the object
    m = _RANGE.match(spec)
    if not m or (m.group(1) == "" and m.group(2) == ""):
        return "whole"
    a, b = m.group(1), m.group(2)
    if a == "":  # suffix: the last n bytes
        n = int(b)
        if n == 0 or size == 0:
            return "unsatisfiable"
        return max(0, size - n), size
    start = int(a)
    end = size - 1 if b == "" else min(int(b), size - 1)
    if b != "" and int(b) < start:
        return "whole"  # invalid range: ignored (RFC 9110 14.2)
    if start >= size:
        return "unsatisfiable"
    return start, end + 1


class TokenBucket:
    """One bucket for the whole server: the cap is a link's, not a connection's."""

    def __init__(self, rate: float, burst: float):
        self.rate, self.burst = rate, burst
        self.tokens = burst
        self.t = time.monotonic()
        self.lock = asyncio.Lock()

    async def take(self, n: int) -> None:
        async with self.lock:  # FIFO: requests share the link in turn
            while True:
                now = time.monotonic()
                self.tokens = min(self.burst, self.tokens + (now - self.t) * self.rate)
                self.t = now
                if self.tokens >= n:
                    self.tokens -= n
                    return
                await asyncio.sleep((n - self.tokens) / self.rate)


class Stats:
    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self.requests = 0
        self.bytes = 0
        self.status: dict[int, int] = {}
        self.paths: dict[str, list[int]] = {}
        self.in_flight = 0
        self.in_flight_max = 0
        self.t0 = time.perf_counter()
        # [start ms, end ms, method, status, path, range] per request since the reset: when each request
        # arrived and was answered, to see a call's round trips.
        self.timeline: list[list] = []

    def begin(self) -> float:
        self.in_flight += 1
        self.in_flight_max = max(self.in_flight_max, self.in_flight)
        return time.perf_counter()

    def end(self, path: str, status: int, nbytes: int, began: float = 0.0, method: str = "GET",
            range_: str = "") -> None:
        self.in_flight = max(0, self.in_flight - 1)
        if began:
            self.timeline.append([round((began - self.t0) * 1e3, 1), round((time.perf_counter() - self.t0) * 1e3, 1),
                                  method, status, path, range_])
        self.requests += 1
        self.bytes += nbytes
        self.status[status] = self.status.get(status, 0) + 1
        p = self.paths.setdefault(path, [0, 0])
        p[0] += 1
        p[1] += nbytes

    def json(self) -> dict:
        return {"requests": self.requests, "bytes": self.bytes,
                "status": {str(k): v for k, v in sorted(self.status.items())},
                "in_flight_max": self.in_flight_max, "timeline": self.timeline,
                "paths": {k: {"requests": v[0], "bytes": v[1]} for k, v in sorted(self.paths.items())}}


def make_app(root: Path, latency_s: float, rate: float | None) -> web.Application:
    root = root.resolve()
    stats = Stats()
    bucket = TokenBucket(rate, max(rate / 100, 256 << 10)) if rate else None

    async def stats_get(_request: web.Request) -> web.Response:
        return web.json_response(stats.json())

    async def stats_reset(_request: web.Request) -> web.Response:
        in_flight = stats.in_flight
        stats.reset()
        stats.in_flight = in_flight
        return web.json_response({"ok": True})

    def etag_of(st: os.stat_result) -> str:
        h = hashlib.blake2b(f"{st.st_size}:{st.st_mtime_ns}:{st.st_ino}".encode(), digest_size=8).hexdigest()
        return f'"{h}"'

    def etag_matches(header: str, etag: str) -> bool:
        tags = [t.strip() for t in header.split(",")]
        return "*" in tags or etag in tags or etag in [t[2:] for t in tags if t.startswith("W/")]

    async def serve(request: web.Request) -> web.StreamResponse:
        rel = request.match_info["path"]
        began = stats.begin()
        status, sent = 500, 0
        try:
            if latency_s > 0:
                await asyncio.sleep(latency_s)  # time to first byte, not blocking other requests
            target = (root / rel).resolve()
            if root not in target.parents or not target.is_file():
                status = 404
                return web.Response(status=404, text="NoSuchKey\n")
            st = target.stat()
            size, etag = st.st_size, etag_of(st)
            base = {"ETag": etag, "Accept-Ranges": "bytes", "Last-Modified":
                    time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(st.st_mtime))}
            im = request.headers.get("If-Match")
            if im is not None and not etag_matches(im, etag):
                status = 412
                return web.Response(status=412, headers=base, text="PreconditionFailed\n")
            inm = request.headers.get("If-None-Match")
            if inm is not None and etag_matches(inm, etag):
                status = 304
                return web.Response(status=304, headers=base)
            r = parse_range(request.headers.get("Range", ""), size)
            if r == "unsatisfiable":
                status = 416
                return web.Response(status=416, headers={**base, "Content-Range": f"bytes */{size}"},
                                    text="InvalidRange\n")
            if r == "whole":
                start, end, status = 0, size, 200
                headers = base
            else:
                start, end = r
                status = 206
                headers = {**base, "Content-Range": f"bytes {start}-{end - 1}/{size}"}
            count = end - start
            resp = web.StreamResponse(status=status, headers=headers)
            resp.content_length = count
            await resp.prepare(request)
            if request.method == "HEAD" or count == 0:
                await resp.write_eof()
                return resp
            with open(target, "rb") as f:
                if bucket is None:
                    transport = request.transport
                    if transport is None:
                        raise ConnectionResetError("connection lost")
                    await asyncio.get_running_loop().sendfile(transport, f, start, count)
                    sent = count
                    await resp.write_eof()
                else:
                    pos = start
                    while pos < end:
                        n = min(64 << 10, end - pos)
                        await bucket.take(n)
                        await resp.write(os.pread(f.fileno(), n, pos))
                        pos += n
                        sent += n
                    await resp.write_eof()
            return resp
        finally:
            stats.end("/" + rel, status, sent, began, request.method, request.headers.get("Range", ""))

    app = web.Application()
    app.router.add_get("/__stats", stats_get)
    app.router.add_post("/__reset", stats_reset)
    app.router.add_get("/{path:.*}", serve)  # and HEAD
    app["stats"] = stats
    return app


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("root", type=Path, help="directory to serve (e.g. a .zarr store's parent)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0: any free port (printed)")
    p.add_argument("--latency-ms", type=float, default=20.0, help="delay before the first byte of every response")
    p.add_argument("--rate", type=parse_rate, default=None,
                   help="bandwidth cap in bytes/s (token bucket in the server; fallback for tc tbf)")
    args = p.parse_args(argv)
    if not args.root.is_dir():
        p.error(f"{args.root} is not a directory")

    async def run() -> None:
        app = make_app(args.root, args.latency_ms / 1000.0, args.rate)
        runner = web.AppRunner(app, access_log=None, keepalive_timeout=75)
        await runner.setup()
        site = web.TCPSite(runner, args.host, args.port, backlog=1024)
        await site.start()
        port = runner.addresses[0][1]
        print(f"listening on http://{args.host}:{port} (latency {args.latency_ms:g} ms, "
              f"rate {'uncapped' if not args.rate else f'{args.rate / 1e6:g} MB/s'})", flush=True)
        await asyncio.Event().wait()

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())

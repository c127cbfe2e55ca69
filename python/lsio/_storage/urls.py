"""Remote store URLs: which strings are remote, local paths and ``file://``, and the parsing,
validation and display form of ``s3://``, ``gs://``/``gcs://`` and ``http(s)://`` URLs and
endpoints.

URLs
----

| URL                               | endpoint and addressing                                                 |
|-----------------------------------|-------------------------------------------------------------------------|
| ``s3://bucket/prefix``            | ``endpoint_url`` option / ``client_kwargs["endpoint_url"]``, else env   |
|                                   | ``AWS_ENDPOINT_URL_S3``, then ``AWS_ENDPOINT_URL``, then the profile's  |
|                                   | ``endpoint_url``; else AWS: ``https://s3.{region}.amazonaws.com``       |
|                                   | (``.amazonaws.com.cn`` for ``cn-*`` regions).                           |
| ``gs://bucket/prefix``, ``gcs://``| ``https://storage.googleapis.com`` (XML API) or the ``endpoint_url``    |
|                                   | option; no environment variable is read.                                |
| ``http(s)://host[:port]/path``    | the URL itself; ``user:password@`` becomes a Basic ``Authorization``    |
|                                   | header.                                                                 |

* The scheme is case-insensitive (``is_remote``); the host is lowercased; trailing slashes
  are stripped.
* Addressing (``addressing_style``: ``"auto"`` (default), ``"path"``, ``"virtual"``): on AWS,
  ``auto`` is virtual-hosted (``bucket.s3.{region}.amazonaws.com``, root ``/prefix``) when the
  bucket is a DNS label without dots (``[a-z0-9][a-z0-9-]{1,61}[a-z0-9]``), else path style
  (root ``/bucket/prefix``). Custom endpoints and GCS use path style under ``auto``;
  ``"virtual"`` puts the bucket in front of the endpoint host and requires a DNS-label bucket
  and a host name (not an IP address).
* s3/gs object keys are taken literally: ``s3://b/a%20b`` names the key ``a%20b`` (as in
  s3fs). http(s) paths are percent-decoded per segment (``/a%20b`` -> root ``/a b``); an
  encoded ``/`` (``%2F``) is refused because the C++ side re-encodes each segment.
* Refused with ``ValueError``: an empty bucket, bucket names with characters outside
  ``[A-Za-z0-9._-]``, ``.``/``..`` segments, empty segments (``a//b``), control characters,
  query strings and fragments (on every scheme: there is no way to carry them to each chunk
  request; use ``headers``), and userinfo on s3/gs URLs.
* An endpoint may carry a path prefix (``https://proxy/s3``); it is prepended to the root.
  It must be ``http://`` or ``https://`` with no userinfo, query or fragment.
"""

from __future__ import annotations

import dataclasses
import os
import re
import urllib.parse
from typing import Any, List, Optional, Tuple

from .validate import CONTROL_CHARS, type_name

REMOTE_SCHEMES = ("s3", "gs", "gcs", "http", "https")
GCS_ENDPOINT = "https://storage.googleapis.com"

_BUCKET = re.compile(r"^[A-Za-z0-9._-]+$")
DNS_BUCKET = re.compile(r"^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$")
_HOSTNAME = re.compile(r"^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$")
IPV4 = re.compile(r"^\d+\.\d+\.\d+\.\d+$")


def local_path(path: Any) -> str:
    """A local store location as an absolute path: ``str`` or ``os.PathLike``, with ``~``
    expanded and ``file://`` URLs (``file:///abs/path``, ``file://localhost/abs/path``,
    percent-encoded) turned into paths, as zarr-python and fsspec take them. Any other
    ``scheme://`` that is not a remote store lsio reads raises ``ValueError`` (it would
    otherwise become a directory named ``scheme:``)."""
    p = os.fspath(path)
    if isinstance(p, bytes):
        p = os.fsdecode(p)
    scheme, sep, _ = p.partition("://")
    if sep and re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", scheme):
        if scheme.lower() != "file":
            raise ValueError(
                f"unsupported URL scheme {scheme!r} in {p!r}: lsio reads local paths, file://, "
                "s3://, gs:// (gcs://) and http(s):// stores")
        parts = urllib.parse.urlsplit(p)
        if parts.netloc not in ("", "localhost"):
            raise ValueError(f"a file:// URL names a local path; {p!r} names host {parts.netloc!r}")
        if parts.query or parts.fragment:
            raise ValueError(f"a file:// URL cannot carry a query or fragment: {p!r}")
        p = urllib.parse.unquote(parts.path)
    p = os.path.expanduser(p)
    if ".." in p.split(os.sep):
        # "link/.." is the parent of the link's target for the OS; abspath would drop the
        # pair as text and name another directory. The directory part is resolved as the OS
        # walks it; the last name stays as given (a symlinked reference file keeps its place).
        head, tail = os.path.split(p.rstrip(os.sep) or os.sep)
        if tail in ("", ".", ".."):
            return os.path.realpath(p)
        return os.path.join(os.path.realpath(head or "."), tail)
    return os.path.abspath(p)


def is_remote(url: Any) -> bool:
    """True for ``s3://``, ``gs://``, ``gcs://``, ``http://`` and ``https://`` strings (any case)."""
    if not isinstance(url, str):
        return False
    scheme, sep, _ = url.partition("://")
    return bool(sep) and scheme.lower() in REMOTE_SCHEMES


@dataclasses.dataclass(frozen=True)
class Endpoint:
    scheme: str
    host: str       # with port and IPv6 brackets
    hostname: str   # without
    prefix: str     # "" or "/seg..." (unencoded)


def _segments(path: str, what: str, *, decode: bool) -> List[str]:
    """The segments of ``path`` (no leading slash handling), validated."""
    path = path.rstrip("/")
    if not path:
        return []
    out = []
    for raw in path.split("/"):
        seg = raw
        if decode:
            try:
                seg = urllib.parse.unquote(raw, errors="strict")
            except UnicodeDecodeError:
                raise ValueError(f"{what}: the path segment {raw!r} is not valid UTF-8 "
                                 f"after percent-decoding") from None
            if "/" in seg:
                raise ValueError(f"{what}: the path segment {raw!r} encodes a '/' (%2F), "
                                 f"which lsio cannot keep inside one segment")
        if seg == "":
            raise ValueError(f"{what}: empty path segment ('//') in the path")
        if seg in (".", ".."):
            raise ValueError(f"{what}: {seg!r} path segments are not allowed")
        if CONTROL_CHARS.search(seg):
            raise ValueError(f"{what}: control characters in the path")
        out.append(seg)
    return out


def join_root(prefix: str, segments: List[str]) -> str:
    return prefix + "".join("/" + s for s in segments)


def parse_http(url: str, what: str) -> Tuple[Endpoint, str, Optional[Tuple[str, str]], str]:
    """(endpoint with prefix = decoded path, encoded path, (user, password) or None, scheme)."""
    if CONTROL_CHARS.search(url) or " " in url.strip() or url != url.strip():
        raise ValueError(f"{what} must not contain whitespace or control characters")
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as e:
        raise ValueError(f"{what} is not a valid URL: {e}") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise ValueError(f"{what} must start with http:// or https://")
    if "?" in url:
        raise ValueError(f"{what} must not have a query string: it cannot be carried to each "
                         f"chunk request (give headers instead)")
    if "#" in url:
        raise ValueError(f"{what} must not have a fragment ('#...')")
    hostname = parts.hostname or ""
    if not hostname:
        raise ValueError(f"{what} has no host")
    if ":" in hostname:
        if not re.match(r"^[0-9a-f:.]+$", hostname):
            raise ValueError(f"{what}: invalid IPv6 host")
        host = f"[{hostname}]"
    else:
        if not _HOSTNAME.match(hostname):
            raise ValueError(f"{what}: invalid host name (letters, digits, '.', '-', '_'; "
                             f"write international names in punycode)")
        host = hostname
    # A scheme's default port is left out: libcurl's Host header leaves it out, and a SigV4
    # signature over "host:443" would not match what the server receives.
    if port is not None and port != {"http": 80, "https": 443}[scheme]:
        host = f"{host}:{port}"
    elif port is None and parts.netloc.endswith(":"):
        raise ValueError(f"{what}: empty port")
    userinfo = None
    if "@" in parts.netloc:
        user = urllib.parse.unquote(parts.username or "")
        password = urllib.parse.unquote(parts.password or "")
        userinfo = (user, password)
    prefix = join_root("", _segments(parts.path.lstrip("/"), what, decode=True)) if parts.path else ""
    return Endpoint(scheme, host, hostname, prefix), parts.path.rstrip("/"), userinfo, scheme


def parse_endpoint(text: Any, source: str) -> Endpoint:
    what = f"endpoint_url from {source}"
    if not isinstance(text, str):
        raise TypeError(f"{what} must be a str, got {type_name(text)}")
    if "://" not in text:
        raise ValueError(f"{what} must start with http:// or https:// (e.g. http://localhost:9000)")
    endpoint, _, userinfo, _ = parse_http(text, what)
    if userinfo is not None:
        raise ValueError(f"{what} must not contain user information ('user:password@')")
    return endpoint


def parse_bucket_url(url: str, scheme: str) -> Tuple[str, List[str]]:
    rest = url[len(scheme) + 3:]
    what = f"{scheme}:// URL {_display_bucket_url(url, scheme)!r}"
    if "?" in rest:
        raise ValueError(f"{what} must not have a query string")
    if "#" in rest:
        raise ValueError(f"{what} must not have a fragment ('#...')")
    bucket, _, path = rest.partition("/")
    if not bucket:
        raise ValueError(f"{what} has an empty bucket name")
    if "@" in bucket:
        raise ValueError(f"{scheme}:// URLs must not contain user information; give credentials "
                         f"in storage_options")
    if not _BUCKET.match(bucket):
        raise ValueError(f"{what}: invalid bucket name (allowed: letters, digits, '.', '-', '_')")
    return bucket, _segments(path, what, decode=False)


def _display_bucket_url(url: str, scheme: str) -> str:
    rest = url[len(scheme) + 3:].split("?", 1)[0].split("#", 1)[0]
    bucket, sep, path = rest.partition("/")
    bucket = bucket.rsplit("@", 1)[-1]
    return f"{scheme}://{bucket}{sep}{path}".rstrip("/")


def check_url(url: str) -> None:
    """Raises what :func:`resolve` raises for ``url`` itself (a query string, a fragment, a
    bad bucket or path segment), in the same words, without reading storage_options, the
    environment or credentials: for callers that take the URL apart before resolving a
    parent of it (``read_ranges``)."""
    if not isinstance(url, str):
        raise TypeError(f"url must be a str, got {type_name(url)}")
    if not is_remote(url):
        raise ValueError("not a remote URL (expected s3://, gs://, gcs://, http:// or https://)")
    url_scheme = url.partition("://")[0].lower()
    url = url_scheme + url[len(url_scheme):]
    if url_scheme in ("http", "https"):
        parse_http(url, "URL")
    else:
        parse_bucket_url(url, url_scheme)

"""Remote stores: a URL, ``storage_options`` and the environment become one engine config.

>>> cfg = resolve("s3://era5-bucket/era5.zarr", {"anon": True})
>>> cfg.to_core()["host"], cfg.to_core()["root"]
('era5-bucket.s3.us-east-1.amazonaws.com', '/era5.zarr')

``resolve(url, storage_options)`` validates everything up front (wrong types raise
``TypeError``, wrong values, unknown keys and conflicting spellings raise ``ValueError``) and
returns a frozen :class:`RemoteConfig`; ``RemoteConfig.to_core()`` is the dict the C++ store
consumes. This module needs only the standard library (not the compiled ``_core``).

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

storage_options
---------------

A key whose value is ``None`` counts as absent (s3fs-style ``{"key": None}`` configs work).

| key                 | type                       | default / environment                        | schemes  |
|---------------------|----------------------------|----------------------------------------------|----------|
| endpoint_url        | str                        | see URLs                                     | s3, gs   |
| region              | str                        | s3: ``AWS_REGION``, ``AWS_DEFAULT_REGION``,  | s3, gs   |
|                     |                            | profile ``region``, ``"us-east-1"``;         |          |
|                     |                            | gs: ``"auto"``                               |          |
| anonymous (anon)    | bool                       | None: sign if credentials are found, else    | all      |
|                     |                            | unsigned; False: credentials are required    |          |
| access_key_id (key) | str                        | see credential order                         | s3, gs   |
| secret_access_key   | str                        | see credential order                         | s3, gs   |
| (secret)            |                            |                                              |          |
| session_token       | str                        | ``AWS_SESSION_TOKEN`` with the env keys      | s3       |
| profile             | str                        | ``AWS_PROFILE``, ``"default"``               | s3       |
| token               | str                        | s3: the session token (s3fs); gs: a bearer   | all      |
|                     |                            | token or ``"anon"`` (gcsfs); http: a bearer  |          |
|                     |                            | token (sent as ``Authorization: Bearer``)    |          |
| headers             | dict[str, str] or pairs    | none                                         | all      |
| verify_ssl          | bool                       | True                                         | all      |
| ca_file (ca_bundle) | str or PathLike            | s3: ``AWS_CA_BUNDLE``; all: ``SSL_CERT_FILE``| all      |
|                     |                            | ; else "" (the TLS library's system store)   |          |
| request_concurrency | int, 1..4096               | ``LSIO_REQUEST_CONCURRENCY``, 32             | all      |
| timeout             | seconds (int/float > 0)    | 30, per attempt                              | all      |
| connect_timeout     | seconds (int/float > 0)    | 5                                            | all      |
| retries             | int >= 0                   | 9 (retries after the first attempt)          | all      |
| credentials         | callable (or a boto3       | none; see below                              | all      |
|                     | ``Credentials`` object)    |                                              |          |
| addressing_style    | "auto" / "path" / "virtual"| "auto"                                       | s3, gs   |
| requester_pays      | bool (s3); bool or project | False; s3 adds ``x-amz-request-payer:        | s3, gs   |
|                     | id str (gs)                | requester``, gs adds ``x-goog-user-project`` |          |
| project             | str                        | the project billed when ``requester_pays``   | gs       |
| use_ssl             | bool                       | True; False selects ``http://`` for the      | s3, gs   |
|                     |                            | default endpoint (an ``endpoint_url``'s own  |          |
|                     |                            | scheme wins, as in botocore)                 |          |
| cache_dir           | str or PathLike            | none: a local directory that keeps fetched   | all      |
|                     |                            | byte ranges across calls, processes and      |          |
|                     |                            | restarts (see ``store/disk_cache.h``)        |          |
| cache_bytes         | int > 0                    | 10 GiB: the disk cache's bound               | all      |
| cache_max_age       | seconds (int/float >= 0)   | 0: the disk cache serves bytes only of an    | all      |
|                     |                            | object version (ETag) the server confirmed   |          |
|                     |                            | within this many seconds; needs cache_dir    |          |
| client_kwargs       | dict                       | s3fs/botocore spellings: ``endpoint_url``,   | all      |
|                     |                            | ``region_name``, ``verify`` (bool ->         |          |
|                     |                            | verify_ssl, str -> ca_file), ``use_ssl``,    |          |
|                     |                            | ``aws_access_key_id``,                       |          |
|                     |                            | ``aws_secret_access_key``,                   |          |
|                     |                            | ``aws_session_token``, ``headers``           |          |

* Aliases (``anon``, ``key``, ``secret``, ``ca_bundle``, ``token`` on s3, ``client_kwargs``
  entries) may be combined with their canonical key only when the values are equal;
  different values raise ``ValueError`` naming both spellings (never secret values).
* fsspec/s3fs/gcsfs caching and listing knobs are accepted and ignored: ``IGNORED_KEYS``.
* Refused with advice (``ValueError``): ``config_kwargs`` (use ``timeout``,
  ``connect_timeout``, ``retries``), ``s3_additional_kwargs``, ``session``,
  ``max_concurrency`` (use ``request_concurrency``), ``version_aware=True``, gcsfs token
  strings ``"google_default"``/``"cloud"``/``"browser"``/``"cache"`` and service-account file
  paths (use ``credentials=GoogleAuthCredentials()``), keys that do not apply to the URL's
  scheme (``profile`` on gs, ``region`` on http, ...). Any other key raises ``ValueError``
  listing the known keys.
* ``headers``: names must be RFC 9110 tokens, values printable ASCII (space and tab allowed,
  no CR/LF/NUL or other controls); names are unique case-insensitively. lsio owns ``Host``,
  ``Range``, ``Content-Length``, ``Transfer-Encoding``, ``Connection``, ``Expect``, ``TE``,
  ``Upgrade``, ``Keep-Alive``; ``Authorization`` is refused when lsio signs (sigv4, bearer,
  URL userinfo), and ``x-amz-date``/``x-amz-content-sha256``/``x-amz-security-token`` under
  sigv4.

Credentials
-----------

S3, first match wins (``anonymous=True`` skips all of it; combining it with keys, a token, a
profile option or a callable is a conflict):

1. ``credentials`` callable (exclusive with the key options and ``profile``),
2. ``access_key_id`` + ``secret_access_key`` [+ ``session_token``] from storage_options,
3. ``AWS_ACCESS_KEY_ID`` + ``AWS_SECRET_ACCESS_KEY`` [+ ``AWS_SESSION_TOKEN``] -- skipped when
   ``profile`` is a storage option, as boto3 skips them for ``Session(profile_name=...)``,
4. the profile (``profile`` option, else ``AWS_PROFILE``, else ``default``): static keys
   from ``AWS_SHARED_CREDENTIALS_FILE`` (``~/.aws/credentials``, section ``[name]``) over
   ``AWS_CONFIG_FILE`` (``~/.aws/config``, ``[profile name]``; ``[default]``). A profile using
   ``role_arn``, ``web_identity_token_file``, ``sso_*`` or ``credential_source`` (or
   ``credential_process`` without static keys) raises ``ValueError`` suggesting
   ``credentials=Boto3Credentials("name")``. A named profile (option or ``AWS_PROFILE``)
   that exists in neither file raises ``ValueError`` when it is consulted (for credentials,
   or for the region / endpoint when no option or variable gives them, as boto3 does); a
   missing ``default`` profile does not.
5. none found: unsigned requests (``anonymous=False`` raises ``ValueError`` instead).
   lsio itself never queries EC2/ECS metadata or SSO: use a ``credentials`` callable.

Partial keys (an id without a secret, a session token alone) raise ``ValueError``.
``RemoteConfig.credential_source`` records ``"storage_options"``, ``"environment"``,
``"profile:NAME"``, ``"credentials callable"``, ``"url"`` (http userinfo) or
``"anonymous"``.

GCS is unsigned unless given HMAC keys (``access_key_id``/``secret_access_key``: SigV4,
service ``s3``, region ``"auto"`` unless ``region`` is given), a bearer ``token``, or a
``credentials`` callable; ``token="anon"`` means unsigned, as in gcsfs. lsio does not read
``GOOGLE_APPLICATION_CREDENTIALS`` itself. http(s) is unsigned unless given a ``token``, a
``credentials`` callable (bearer only), URL userinfo or an ``Authorization`` header.

The credentials callable
~~~~~~~~~~~~~~~~~~~~~~~~

``credentials`` is called with no arguments at ``resolve`` time and again by
``refresh_if_needed`` once the expiry is less than ``REFRESH_MARGIN`` (300 s) away. It may
return:

* a mapping: ``access_key_id``/``aws_access_key_id``/``AccessKeyId``,
  ``secret_access_key``/``aws_secret_access_key``/``SecretAccessKey``,
  ``session_token``/``aws_session_token``/``SessionToken``/``token`` and
  ``expiry``/``expiration``/``expiry_time``/``Expiration`` (key case and underscores do not
  matter, so ``credential_process`` JSON works as is); or ``{"token": str, "expiry": ...}``
  for a bearer token (gs, http). On S3 a mapping without keys is an error;
* a boto3/botocore ``Credentials`` object (``get_frozen_credentials()``); its expiry is read
  from the private ``_expiry_time`` of refreshable credentials (0 when absent);
* an object with ``.token`` and ``.expiry`` (google-auth ``Credentials``): a bearer token;
* a str: a bearer token without expiry.

Expiry: a ``datetime`` (naive means UTC, the google-auth convention), unix seconds, or an
ISO 8601 string; ``None``/absent means "does not expire" (0). Credentials that are already
expired when returned raise ``ValueError``. A ``boto3`` ``Credentials`` object may also be
passed directly instead of a callable.

One-liners::

    import boto3
    lsio.open("s3://bucket/a.zarr", storage_options={"credentials": boto3.Session().get_credentials})

    import google.auth, google.auth.transport.requests
    creds, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/devstorage.read_only"])
    def gcs_token():
        if not creds.valid or creds.expiry is None or \\
                (creds.expiry - datetime.datetime.utcnow()).total_seconds() < 300:
            creds.refresh(google.auth.transport.requests.Request())
        return creds                        # .token and .expiry (naive UTC)
    lsio.open("gs://bucket/a.zarr", storage_options={"credentials": gcs_token})

or the picklable equivalents here, which build the boto3 session / google-auth credentials
lazily in each process: ``{"credentials": Boto3Credentials(profile_name=None)}`` and
``{"credentials": GoogleAuthCredentials()}``.

Refreshing: ``refresh_if_needed(config, now=None)`` returns a new ``RemoteConfig`` with fresh
credentials when ``credentials_expiry`` is set and ``now >= expiry - REFRESH_MARGIN``, else
``None``; ``refresh(config)`` forces a call (e.g. after an ``ExpiredToken`` response). The
clock is the module attribute ``clock`` (``time.time``), replaceable in tests.

Pickling
--------

A ``RemoteConfig`` pickles as its ``resolve`` inputs, ``(url, storage_options)`` as given
(``config.resolve_args``), and unpickling re-resolves: a DataLoader worker reads its own
environment and calls the credentials callable again, so it gets fresh credentials. This
needs every value in storage_options to pickle: a lambda, a local function or a bound
method of ``boto3.Session()`` does not, which breaks ``spawn``/``forkserver`` workers (fork
needs no pickling); use a module-level function or ``Boto3Credentials``/
``GoogleAuthCredentials``.

Redaction
---------

``repr(config)`` shows the display URL, endpoint, root, signing, region, credential source,
header names (never values), and ``access_key_id`` only as its first 4 characters + "…"
(``AKIA…`` / ``ASIA…`` tells long-term from temporary keys); never secrets or tokens.
``redact(text, secrets=())`` removes URL userinfo and query strings, ``Authorization``-like
header values, ``Bearer`` tokens, and AWS key ids (to their first 4 characters), plus every
string in ``secrets``; ``config.redact(text)`` passes the config's own secrets. Error messages
raised here never contain secret values.

to_core()
---------

Exactly these keys:

| key                 | value                                                                    |
|---------------------|--------------------------------------------------------------------------|
| scheme              | "http" or "https" (the transport)                                        |
| host                | "host", "host:port", "[v6addr]" or "[v6addr]:port" (lowercase)           |
| root                | "" or "/seg/seg" (unencoded; no trailing slash); path style s3/gs starts |
|                     | with "/bucket" (after any endpoint path prefix). The C++ side builds     |
|                     | ``scheme://host`` + percent-encode-each-segment(root + "/" + key).      |
| signing             | "none", "sigv4" or "bearer"                                              |
| region              | SigV4 region ("us-east-1" default on s3, "auto" on gs; "" on http)       |
| service             | "s3" (also for GCS HMAC)                                                 |
| access_key_id       | str, "" unless sigv4                                                     |
| secret_access_key   | str, "" unless sigv4                                                     |
| session_token       | str, "" if none (send as ``x-amz-security-token``)                       |
| token               | str, "" unless bearer (send as ``Authorization: Bearer <token>``)        |
| headers             | list of (name, value) str tuples to send with every request; under sigv4 |
|                     | they must all be signed                                                  |
| verify_ssl          | bool                                                                     |
| ca_file             | str, "" = the TLS library's default store                                |
| request_concurrency | int >= 1: requests in flight per read call                               |
| timeout             | float seconds per attempt                                                |
| connect_timeout     | float seconds                                                            |
| retries             | int >= 0 retries after the first attempt                                 |
| display_url         | the URL for messages: normalized, no userinfo, no query                  |
| credentials_expiry  | float unix seconds; 0.0 = none                                           |
| cache_dir           | str, "" = no disk cache; else an absolute directory                      |
| cache_bytes         | int, the disk cache's bound in bytes (0 when there is none)              |
| cache_max_age       | float seconds; only present when non-zero (``OPTIONAL_CORE_KEYS``)       |
"""

from __future__ import annotations

import configparser
import copy
import dataclasses
import datetime as _dt
import math
import operator
import os
import re
import time
import urllib.parse
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

__all__ = [
    "is_remote",
    "check_url",
    "resolve",
    "refresh_if_needed",
    "refresh",
    "redact",
    "RemoteConfig",
    "Boto3Credentials",
    "GoogleAuthCredentials",
    "REFRESH_MARGIN",
    "CORE_KEYS",
]

REMOTE_SCHEMES = ("s3", "gs", "gcs", "http", "https")
REFRESH_MARGIN = 300.0
DEFAULT_REQUEST_CONCURRENCY = 32
MAX_REQUEST_CONCURRENCY = 4096
DEFAULT_TIMEOUT = 30.0
DEFAULT_CONNECT_TIMEOUT = 5.0
DEFAULT_RETRIES = 9
GCS_ENDPOINT = "https://storage.googleapis.com"
GCS_READ_SCOPE = "https://www.googleapis.com/auth/devstorage.read_only"

CORE_KEYS = (
    "scheme", "host", "root", "signing", "region", "service", "access_key_id",
    "secret_access_key", "session_token", "token", "headers", "verify_ssl", "ca_file",
    "request_concurrency", "timeout", "connect_timeout", "retries", "display_url",
    "credentials_expiry", "list_root", "cache_dir", "cache_bytes",
)
# Keys to_core() adds only when they differ from their default (see to_core).
OPTIONAL_CORE_KEYS = ("cache_max_age",)

#: The clock used for credential expiry; tests may replace it.
clock: Callable[[], float] = time.time

# ---------------------------------------------------------------------------------------
# Option tables

KNOWN_KEYS = (
    "endpoint_url", "region", "anonymous", "access_key_id", "secret_access_key",
    "session_token", "profile", "token", "headers", "verify_ssl", "ca_file",
    "request_concurrency", "timeout", "connect_timeout", "retries", "credentials",
    "addressing_style", "requester_pays", "project", "use_ssl", "client_kwargs",
    "cache_dir", "cache_bytes", "cache_max_age",
)
ALIASES = {"anon": "anonymous", "key": "access_key_id", "secret": "secret_access_key",
           "ca_bundle": "ca_file"}
CLIENT_KWARGS = {
    "endpoint_url": "endpoint_url", "region_name": "region", "verify": "verify",
    "use_ssl": "use_ssl", "aws_access_key_id": "access_key_id",
    "aws_secret_access_key": "secret_access_key", "aws_session_token": "session_token",
    "headers": "headers",
}
# fsspec/s3fs/gcsfs knobs about caching, listing and event loops: meaningless here.
IGNORED_KEYS = frozenset({
    "default_block_size", "default_fill_cache", "default_cache_type", "use_listings_cache",
    "listings_expiry_time", "max_paths", "skip_instance_cache", "asynchronous", "loop",
    "cache_regions", "block_size", "cache_type", "cache_options", "simple_links",
    "same_scheme", "size_policy", "encoded", "access", "consistency", "check_connection",
    "cache_timeout",
})
REFUSED_KEYS = {
    "config_kwargs": "botocore Config is not used; give timeout, connect_timeout and retries",
    "s3_additional_kwargs": "extra request parameters are not supported; give headers",
    "session": "sessions are not used; give credentials=Boto3Credentials(...) or a callable",
    "max_concurrency": "give request_concurrency (requests in flight per store)",
}
# Keys per scheme kind ("s3", "gs", "http").
APPLICABLE = {
    "s3": set(KNOWN_KEYS) - {"project"},
    "gs": set(KNOWN_KEYS) - {"session_token", "profile"},
    "http": {"anonymous", "token", "headers", "verify_ssl", "ca_file", "request_concurrency",
             "timeout", "connect_timeout", "retries", "credentials", "client_kwargs",
             "cache_dir", "cache_bytes", "cache_max_age"},
}
_SECRET_OPTIONS = {"secret_access_key", "session_token", "token", "headers", "access_key_id",
                   "credentials"}

_TCHAR = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_HEADER_VALUE = re.compile(r"^[\t\x20-\x7e]*$")
_BUCKET = re.compile(r"^[A-Za-z0-9._-]+$")
_DNS_BUCKET = re.compile(r"^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$")
_REGION = re.compile(r"^[A-Za-z0-9._-]+$")
_HOSTNAME = re.compile(r"^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_IPV4 = re.compile(r"^\d+\.\d+\.\d+\.\d+$")
_OWNED_HEADERS = {"host", "range", "content-length", "transfer-encoding", "connection",
                  "expect", "te", "upgrade", "keep-alive", "proxy-connection"}
_SIGV4_HEADERS = {"authorization", "x-amz-date", "x-amz-content-sha256",
                  "x-amz-security-token"}
_SENSITIVE_HEADER = re.compile(r"auth|token|secret|key|cookie|signature|session|password",
                               re.IGNORECASE)
_GCSFS_TOKENS = ("google_default", "cloud", "browser", "cache")


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
    return os.path.abspath(os.path.expanduser(p))


def is_remote(url: Any) -> bool:
    """True for ``s3://``, ``gs://``, ``gcs://``, ``http://`` and ``https://`` strings (any case)."""
    if not isinstance(url, str):
        return False
    scheme, sep, _ = url.partition("://")
    return bool(sep) and scheme.lower() in REMOTE_SCHEMES


# Types a storage option's value may have, for values that arrive as text (the CLI's
# --storage-option KEY=VALUE): a value JSON parses to another type is kept as the text when
# the option takes a str, so token=12345 stays the token "12345".
_STR_OPTIONS = frozenset({
    "endpoint_url", "region", "access_key_id", "key", "secret_access_key", "secret",
    "session_token", "profile", "token", "ca_file", "ca_bundle", "addressing_style", "project",
    "cache_dir", "requester_pays",
})


def option_from_text(key: str, text: str) -> Any:
    """A storage option's value from command-line text: JSON when it parses to a type the
    option takes (numbers, true/false, {"a": "b"}); the text itself for options that take a
    str, and for text that is no JSON (``resolve`` then says what type was expected)."""
    import json

    try:
        value = json.loads(text)
    except ValueError:
        return text
    if key in _STR_OPTIONS and not isinstance(value, str):
        # requester_pays takes a bool or a project id: only true/false become the bool.
        if not (key == "requester_pays" and isinstance(value, bool)):
            return text
    return value


# ---------------------------------------------------------------------------------------
# Small validators


def _type_name(value: Any) -> str:
    return type(value).__name__


def _as_str(value: Any, name: str, *, empty: bool = False) -> str:
    if not isinstance(value, str):
        raise TypeError(f"storage_options {name} must be a str, got {_type_name(value)}")
    if not empty and not value:
        raise ValueError(f"storage_options {name} must not be empty")
    if _CONTROL.search(value):
        raise ValueError(f"storage_options {name} must not contain control characters")
    return value


def _as_bool(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"storage_options {name} must be a bool, got {_type_name(value)}")
    return value


def _as_int(value: Any, name: str, lo: int, hi: Optional[int] = None) -> int:
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"storage_options {name} must be an integer, got {_type_name(value)}")
    value = operator.index(value)
    if value < lo or (hi is not None and value > hi):
        bounds = f">= {lo}" if hi is None else f"in {lo}..{hi}"
        raise ValueError(f"storage_options {name} must be {bounds}, got {value}")
    return int(value)


def _as_seconds(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"storage_options {name} must be a number of seconds, got {_type_name(value)}")
    value = float(value)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"storage_options {name} must be a finite number of seconds > 0, got {value}")
    return value


def _env(name: str) -> Optional[str]:
    value = os.environ.get(name, "").strip()
    return value or None


# ---------------------------------------------------------------------------------------
# storage_options: spellings -> canonical keys


def _collect(kind: str, storage_options: Optional[Mapping]) -> Dict[str, Tuple[Any, str]]:
    """{canonical key: (value, spelling)}; None values dropped; conflicts and unknowns raise."""
    if storage_options is None:
        return {}
    if not isinstance(storage_options, Mapping):
        raise TypeError(f"storage_options must be a dict or None, got {_type_name(storage_options)}")
    opts: Dict[str, Tuple[Any, str]] = {}

    def put(canon: str, value: Any, spelled: str) -> None:
        if value is None:
            return
        if canon in opts:
            old, old_spelled = opts[canon]
            same = old is value
            if not same:
                try:
                    same = bool(old == value) and type(old) is type(value)
                except Exception:
                    same = False
            if not same:
                shown = "" if canon in _SECRET_OPTIONS else f" ({old!r} and {value!r})"
                raise ValueError(f"storage_options give {canon} twice with different values, "
                                 f"as {old_spelled!r} and {spelled!r}{shown}")
            return
        opts[canon] = (value, spelled)

    for name, value in storage_options.items():
        if not isinstance(name, str):
            raise TypeError(f"storage_options keys must be str, got {_type_name(name)}")
        if value is None or name in IGNORED_KEYS:
            continue
        if name in REFUSED_KEYS:
            raise ValueError(f"storage_options {name!r} is not supported by lsio: {REFUSED_KEYS[name]}")
        if name == "version_aware":
            if value is not False:
                raise ValueError("storage_options version_aware=True is not supported by lsio "
                                 "(object versions are not read)")
            continue
        if name == "client_kwargs":
            if not isinstance(value, Mapping):
                raise TypeError(f"storage_options client_kwargs must be a dict, got {_type_name(value)}")
            for sub, subvalue in value.items():
                if sub not in CLIENT_KWARGS:
                    raise ValueError(f"storage_options client_kwargs[{sub!r}] is not supported; "
                                     f"known: {', '.join(CLIENT_KWARGS)}")
                if subvalue is None:
                    continue
                spelled = f"client_kwargs[{sub!r}]"
                canon = CLIENT_KWARGS[sub]
                if canon == "verify":
                    if isinstance(subvalue, bool):
                        put("verify_ssl", subvalue, spelled)
                    else:
                        if isinstance(subvalue, os.PathLike):
                            subvalue = os.fspath(subvalue)
                        put("ca_file", _as_str(subvalue, spelled), spelled)
                else:
                    put(canon, subvalue, spelled)
            continue
        if name == "token" and kind == "s3":
            canon = "session_token"
        else:
            canon = ALIASES.get(name, name)
        if canon == "ca_file" and isinstance(value, os.PathLike):
            value = os.fspath(value)
        if canon not in KNOWN_KEYS:
            known = sorted(set(KNOWN_KEYS) | set(ALIASES))
            raise ValueError(f"unknown storage_options key {name!r}; known keys: {', '.join(known)}")
        put(canon, value, name)

    for canon, (_, spelled) in opts.items():
        if canon not in APPLICABLE[kind]:
            where = {"s3": "s3://", "gs": "gs:// and gcs://", "http": "http(s)://"}[kind]
            raise ValueError(f"storage_options {spelled!r} does not apply to {where} URLs")
    return opts


# ---------------------------------------------------------------------------------------
# URLs


@dataclasses.dataclass(frozen=True)
class _Endpoint:
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
        if _CONTROL.search(seg):
            raise ValueError(f"{what}: control characters in the path")
        out.append(seg)
    return out


def _root(prefix: str, segments: List[str]) -> str:
    return prefix + "".join("/" + s for s in segments)


def _parse_http(url: str, what: str) -> Tuple[_Endpoint, str, Optional[Tuple[str, str]], str]:
    """(endpoint with prefix = decoded path, encoded path, (user, password) or None, scheme)."""
    if _CONTROL.search(url) or " " in url.strip() or url != url.strip():
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
    if port is not None:
        host = f"{host}:{port}"
    elif parts.netloc.endswith(":"):
        raise ValueError(f"{what}: empty port")
    userinfo = None
    if "@" in parts.netloc:
        user = urllib.parse.unquote(parts.username or "")
        password = urllib.parse.unquote(parts.password or "")
        userinfo = (user, password)
    prefix = _root("", _segments(parts.path.lstrip("/"), what, decode=True)) if parts.path else ""
    return _Endpoint(scheme, host, hostname, prefix), parts.path.rstrip("/"), userinfo, scheme


def _parse_endpoint(text: Any, source: str) -> _Endpoint:
    what = f"endpoint_url from {source}"
    if not isinstance(text, str):
        raise TypeError(f"{what} must be a str, got {_type_name(text)}")
    if "://" not in text:
        raise ValueError(f"{what} must start with http:// or https:// (e.g. http://localhost:9000)")
    endpoint, _, userinfo, _ = _parse_http(text, what)
    if userinfo is not None:
        raise ValueError(f"{what} must not contain user information ('user:password@')")
    return endpoint


def _parse_bucket_url(url: str, scheme: str) -> Tuple[str, List[str]]:
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


# ---------------------------------------------------------------------------------------
# AWS profile files


def _profile_files() -> Tuple[str, str]:
    home = os.path.expanduser("~")
    creds = _env("AWS_SHARED_CREDENTIALS_FILE") or os.path.join(home, ".aws", "credentials")
    config = _env("AWS_CONFIG_FILE") or os.path.join(home, ".aws", "config")
    return os.path.expanduser(creds), os.path.expanduser(config)


def _read_ini(path: str) -> Optional[configparser.ConfigParser]:
    if not os.path.isfile(path):
        return None
    parser = configparser.ConfigParser(interpolation=None, default_section="\x00lsio-none")
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, OSError, UnicodeDecodeError) as e:
        raise ValueError(f"cannot parse the AWS file {path}: {type(e).__name__}") from None
    return parser


def _load_profile(name: str) -> Optional[Dict[str, str]]:
    """The profile's settings (credentials file over config file), or None when absent."""
    creds_path, config_path = _profile_files()
    found = False
    merged: Dict[str, str] = {}
    config = _read_ini(config_path)
    if config is not None:
        sections = (["default", "profile default"] if name == "default" else [f"profile {name}"])
        for section in sections:
            if config.has_section(section):
                found = True
                merged.update({k.lower(): v.strip() for k, v in config.items(section)})
    creds = _read_ini(creds_path)
    if creds is not None and creds.has_section(name):
        found = True
        merged.update({k.lower(): v.strip() for k, v in creds.items(name)})
    return merged if found else None


class _Profile:
    """The profile lookups resolve needs, done lazily (files are read at most once)."""

    def __init__(self, name: str, explicit: str):
        self.name, self.explicit = name, explicit
        self._settings: Optional[Dict[str, str]] = None
        self._loaded = False

    def settings(self) -> Dict[str, str]:
        if not self._loaded:
            self._settings = _load_profile(self.name)
            self._loaded = True
            if self._settings is None and self.explicit:
                creds_path, config_path = _profile_files()
                raise ValueError(f"AWS profile {self.name!r} (from {self.explicit}) is in neither "
                                 f"{creds_path} nor {config_path}")
        return self._settings or {}


# ---------------------------------------------------------------------------------------
# Credentials from a provider


def _expiry_seconds(value: Any, what: str) -> float:
    if value is None:
        return 0.0
    if isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            value = _dt.datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(f"{what}: expiry {value!r} is not an ISO 8601 date") from None
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=_dt.timezone.utc)
        return value.timestamp()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what}: expiry must be a datetime, unix seconds or an ISO 8601 str, "
                        f"got {_type_name(value)}")
    value = float(value)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{what}: expiry must be finite unix seconds >= 0")
    return value


_PROVIDER_KEYS = {
    "accesskeyid": "access_key_id", "awsaccesskeyid": "access_key_id", "accesskey": "access_key_id",
    "secretaccesskey": "secret_access_key", "awssecretaccesskey": "secret_access_key",
    "secretkey": "secret_access_key",
    "sessiontoken": "session_token", "awssessiontoken": "session_token",
    "token": "token",
    "expiry": "expiry", "expiration": "expiry", "expirytime": "expiry",
    "version": None,  # credential_process output carries "Version": 1
}


@dataclasses.dataclass(frozen=True)
class _Secrets:
    signing: str
    access_key_id: str = ""
    secret_access_key: str = ""
    session_token: str = ""
    token: str = ""
    expiry: float = 0.0


def _provider_str(value: Any, field: str) -> str:
    what = "credentials callable"
    if not isinstance(value, str):
        raise TypeError(f"{what}: {field} must be a str, got {_type_name(value)}")
    if _CONTROL.search(value):
        raise ValueError(f"{what}: {field} contains control characters")
    return value


def _call_provider(kind: str, provider: Any, now: float) -> _Secrets:
    what = "credentials callable"
    if hasattr(provider, "get_frozen_credentials") and not callable(provider):
        result = provider
    else:
        result = provider()
    if result is None:
        raise ValueError(f"{what} returned None (boto3 returns None when it finds no "
                         f"credentials); pass anon=True for unsigned requests")
    ak = sk = st = tok = ""
    expiry: Any = None
    if hasattr(result, "get_frozen_credentials"):
        frozen = result.get_frozen_credentials()
        ak = _provider_str(frozen.access_key, "access_key")
        sk = _provider_str(frozen.secret_key, "secret_key")
        st = _provider_str(frozen.token or "", "token")
        expiry = getattr(result, "_expiry_time", None)
    elif isinstance(result, Mapping):
        fields: Dict[str, Any] = {}
        for raw, value in result.items():
            norm = _PROVIDER_KEYS.get(str(raw).replace("_", "").replace("-", "").lower(), "?")
            if norm == "?":
                raise ValueError(f"{what} returned an unknown key {raw!r}; known: access_key_id, "
                                 f"secret_access_key, session_token, token, expiry")
            if norm is None or value is None:
                continue
            if norm in fields:
                raise ValueError(f"{what} returned {norm} twice")
            fields[norm] = value
        ak = _provider_str(fields.get("access_key_id", ""), "access_key_id")
        sk = _provider_str(fields.get("secret_access_key", ""), "secret_access_key")
        st = _provider_str(fields.get("session_token", ""), "session_token")
        tok = _provider_str(fields.get("token", ""), "token")
        expiry = fields.get("expiry")
        if ak or sk:
            if tok and st:
                raise ValueError(f"{what} returned both session_token and token")
            st, tok = st or tok, ""
    elif isinstance(result, str):
        tok = _provider_str(result, "token")
    elif hasattr(result, "token"):
        if result.token is None:
            raise ValueError(f"{what} returned a credentials object without a token: refresh it "
                             f"first (google-auth: creds.refresh(google.auth.transport.requests.Request()))")
        tok = _provider_str(result.token, "token")
        expiry = getattr(result, "expiry", None)
    else:
        raise TypeError(f"{what} returned {_type_name(result)}; expected a mapping, a boto3 "
                        f"Credentials object, an object with .token/.expiry, or a str")
    expiry_s = _expiry_seconds(expiry, what)
    if expiry_s and expiry_s <= now:
        raise ValueError(f"{what} returned credentials that expired already (at "
                         f"{_iso(expiry_s)}, now {_iso(now)})")
    if ak or sk:
        if not (ak and sk):
            raise ValueError(f"{what} returned access_key_id without secret_access_key "
                             f"(or the reverse)")
        if kind == "http":
            raise ValueError(f"{what} returned access keys, but http(s):// URLs take a bearer "
                             f"token only")
        if kind == "gs" and st:
            raise ValueError(f"{what} returned a session token with GCS HMAC keys")
        return _Secrets("sigv4", ak, sk, st, "", expiry_s)
    if st and not tok:
        raise ValueError(f"{what} returned a session token without access keys")
    if not tok:
        raise ValueError(f"{what} returned no credentials")
    if kind == "s3":
        raise ValueError(f"{what} returned a bearer token, but s3:// needs access keys "
                         f"(access_key_id, secret_access_key)")
    return _Secrets("bearer", token=tok, expiry=expiry_s)


def _iso(seconds: float) -> str:
    return _dt.datetime.fromtimestamp(seconds, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---------------------------------------------------------------------------------------
# The config


@dataclasses.dataclass(frozen=True, repr=False)
class RemoteConfig:
    """A resolved remote store; ``to_core()`` is what the C++ store consumes."""

    kind: str                 # "s3", "gs" or "http" (gcs:// is "gs", https:// is "http")
    scheme: str
    host: str
    root: str
    signing: str
    region: str
    service: str
    access_key_id: str
    secret_access_key: str
    session_token: str
    token: str
    headers: Tuple[Tuple[str, str], ...]
    verify_ssl: bool
    ca_file: str
    request_concurrency: int
    timeout: float
    connect_timeout: float
    retries: int
    display_url: str
    credentials_expiry: float
    credential_source: str
    bucket: str = ""
    # s3/gs: the unencoded path of the bucket's listing endpoint ("" with virtual-hosted
    # addressing, "/bucket" with path style, after any endpoint prefix); None: the store
    # cannot be listed (http).
    list_root: Optional[str] = None
    # local disk cache of byte ranges ("" = none) and its bound in bytes
    cache_dir: str = ""
    cache_bytes: int = 0
    # seconds since the server last confirmed an object's ETag within which the disk cache
    # may serve its bytes (0: only a version confirmed by the current call)
    cache_max_age: float = 0.0
    url: str = dataclasses.field(default="", compare=False)
    storage_options: Optional[Mapping] = dataclasses.field(default=None, compare=False)
    credentials: Any = dataclasses.field(default=None, compare=False)

    def to_core(self) -> Dict[str, Any]:
        return {
            "scheme": self.scheme,
            "host": self.host,
            "root": self.root,
            "signing": self.signing,
            "region": self.region,
            "service": self.service,
            "access_key_id": self.access_key_id,
            "secret_access_key": self.secret_access_key,
            "session_token": self.session_token,
            "token": self.token,
            "headers": [tuple(h) for h in self.headers],
            "verify_ssl": self.verify_ssl,
            "ca_file": self.ca_file,
            "request_concurrency": self.request_concurrency,
            "timeout": self.timeout,
            "connect_timeout": self.connect_timeout,
            "retries": self.retries,
            "display_url": self.display_url,
            "credentials_expiry": self.credentials_expiry,
            "list_root": self.list_root,
            "cache_dir": self.cache_dir,
            "cache_bytes": self.cache_bytes,
            # Only when set: the C++ binding rejects keys it does not know, and the version
            # that reads cache_max_age is not in every build yet. 0 is its default there.
            **({"cache_max_age": self.cache_max_age} if self.cache_max_age else {}),
        }

    @property
    def endpoint(self) -> str:
        return f"{self.scheme}://{self.host}"

    @property
    def resolve_args(self) -> Tuple[str, Optional[Mapping]]:
        """``(url, storage_options)`` exactly as given to :func:`resolve`."""
        return self.url, self.storage_options

    def __reduce__(self):
        return (resolve, (self.url, self.storage_options))

    def needs_refresh(self, now: Optional[float] = None) -> bool:
        if not self.credentials_expiry or self.credentials is None:
            return False
        now = clock() if now is None else now
        return now >= self.credentials_expiry - REFRESH_MARGIN

    def refresh_if_needed(self, now: Optional[float] = None) -> Optional["RemoteConfig"]:
        """A config with fresh credentials when they expire within ``REFRESH_MARGIN``, else None."""
        now = clock() if now is None else now
        return self.refresh(now) if self.needs_refresh(now) else None

    def refresh(self, now: Optional[float] = None) -> "RemoteConfig":
        """Call the credentials callable again (a config without one is returned unchanged)."""
        if self.credentials is None:
            return self
        now = clock() if now is None else now
        s = _call_provider(self.kind, self.credentials, now)
        if s.signing != self.signing:
            raise ValueError(f"credentials callable switched from {self.signing} to {s.signing} "
                             f"credentials for {self.display_url}")
        return dataclasses.replace(self, access_key_id=s.access_key_id,
                                   secret_access_key=s.secret_access_key,
                                   session_token=s.session_token, token=s.token,
                                   credentials_expiry=s.expiry)

    def secrets(self) -> Tuple[str, ...]:
        values = [self.secret_access_key, self.session_token, self.token]
        values += [v for n, v in self.headers if _SENSITIVE_HEADER.search(n)]
        return tuple(v for v in values if v)

    def redact(self, text: str) -> str:
        """``redact(text)`` plus this config's own secrets."""
        return redact(text, self.secrets())

    def __repr__(self) -> str:
        parts = [
            f"url={self.display_url!r}",
            f"endpoint={self.endpoint!r}",
            f"root={self.root!r}",
            f"signing={self.signing!r}",
        ]
        if self.region:
            parts.append(f"region={self.region!r}")
        parts.append(f"credentials={self.credential_source!r}")
        if self.access_key_id:
            parts.append(f"access_key_id={self.access_key_id[:4] + '…'!r}")
        if self.credentials_expiry:
            parts.append(f"expires={_iso(self.credentials_expiry)!r}")
        if self.headers:
            parts.append(f"headers={[n for n, _ in self.headers]!r}")
        if not self.verify_ssl:
            parts.append("verify_ssl=False")
        if self.ca_file:
            parts.append(f"ca_file={self.ca_file!r}")
        parts.append(f"request_concurrency={self.request_concurrency}")
        parts.append(f"timeout={self.timeout:g}")
        parts.append(f"connect_timeout={self.connect_timeout:g}")
        parts.append(f"retries={self.retries}")
        return f"RemoteConfig({', '.join(parts)})"

    __str__ = __repr__


def refresh_if_needed(config: RemoteConfig, now: Optional[float] = None) -> Optional[RemoteConfig]:
    """``config.refresh_if_needed(now)``: a refreshed config, or None when still fresh."""
    return config.refresh_if_needed(now)


def refresh(config: RemoteConfig, now: Optional[float] = None) -> RemoteConfig:
    """``config.refresh(now)``: call the credentials callable now (e.g. after ExpiredToken)."""
    return config.refresh(now)


# ---------------------------------------------------------------------------------------
# Redaction

_RE_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@?#]*@")
_RE_QUERY = re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://[^\s?#]*)\?[^\s#\"'<>]*")
_RE_AUTH = re.compile(r"(?i)\b(authorization|proxy-authorization|x-amz-security-token|"
                      r"x-goog-api-key|x-api-key|cookie|set-cookie)(\s*[:=]\s*)[^\r\n]*")
_RE_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}")
_RE_KEY_ID = re.compile(r"\b(?:AKIA|ASIA|AROA|AIDA|GOOG)[A-Z0-9]{12,}\b")
_RE_SECRET_FIELD = re.compile(r"(?i)\b(aws_secret_access_key|secret_access_key|secret_key|"
                              r"aws_session_token|session_token|password)(\s*[:=]\s*['\"]?)"
                              r"[^\s'\",;]+")


def masked_options(storage_options: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """A copy of ``storage_options`` fit to show (``Array.options``, reprs, logs): values of
    secret-bearing keys (keys, tokens, headers, nested ``client_kwargs`` credentials) and
    callables become ``"***"``."""
    out: Dict[str, Any] = {}
    for k, v in (storage_options or {}).items():
        secret = str(k) in _SECRET_OPTIONS or str(k).startswith("aws_") or str(k) in ("key", "secret")
        if v is None or isinstance(v, bool):
            out[k] = v
        elif secret or callable(v):
            out[k] = "***"
        elif isinstance(v, Mapping):
            out[k] = masked_options(v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def redact(text: str, secrets: Any = ()) -> str:
    """``text`` without credentials: URL userinfo and query strings, Authorization-like
    header values, Bearer/Basic tokens, secret-looking ``name=value`` fields, AWS key ids
    (kept to their first 4 characters), and every string of 4 or more characters in
    ``secrets`` (shorter ones would mangle the text and are no real secrets)."""
    text = str(text)
    if isinstance(secrets, str):
        secrets = (secrets,)
    for secret in sorted((s for s in secrets if s and len(s) >= 4), key=len, reverse=True):
        text = text.replace(secret, "***")
    text = _RE_USERINFO.sub(r"\1***@", text)
    text = _RE_QUERY.sub(r"\1?***", text)
    text = _RE_AUTH.sub(r"\1\2***", text)
    text = _RE_BEARER.sub(r"\1 ***", text)
    text = _RE_SECRET_FIELD.sub(r"\1\2***", text)
    text = _RE_KEY_ID.sub(lambda m: m.group(0)[:4] + "…", text)
    return text


# ---------------------------------------------------------------------------------------
# resolve


DEFAULT_DISK_CACHE_BYTES = 10 << 30


def _disk_cache(opt: Callable[[str], Tuple[Any, str]]) -> Tuple[str, int, float]:
    """(cache_dir, cache_bytes, cache_max_age) from storage_options: a directory (str or
    PathLike, ``~`` expanded, created on first write), its bound in bytes (default 10 GiB) and
    how many seconds a server's confirmation of an object's version lets the cache serve it
    (default 0). cache_bytes or cache_max_age without cache_dir is an error."""
    value, spelled = opt("cache_dir")
    size, size_spelled = opt("cache_bytes")
    age, age_spelled = opt("cache_max_age")
    if value is None:
        for given, name in ((size, size_spelled), (age, age_spelled)):
            if given is not None:
                raise ValueError(f"storage_options {name!r} needs cache_dir (the directory to keep blocks in)")
        return "", 0, 0.0
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    directory = os.path.abspath(os.path.expanduser(_as_str(value, spelled)))
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise ValueError(f"storage_options {spelled} {directory!r} exists and is not a directory")
    max_age = 0.0
    if age is not None:
        if isinstance(age, bool) or not isinstance(age, (int, float)):
            raise TypeError(f"storage_options {age_spelled} must be a number of seconds, got {_type_name(age)}")
        max_age = float(age)
        if not math.isfinite(max_age) or max_age < 0:
            raise ValueError(f"storage_options {age_spelled} must be a finite number of seconds >= 0, got {max_age}")
    if size is None:
        return directory, DEFAULT_DISK_CACHE_BYTES, max_age
    return directory, _as_int(size, size_spelled, 1), max_age


def _headers(value: Any, spelled: str) -> List[Tuple[str, str]]:
    if isinstance(value, Mapping):
        items = list(value.items())
    elif isinstance(value, (list, tuple)):
        items = []
        for item in value:
            if not isinstance(item, (list, tuple)) or len(item) != 2:
                raise TypeError(f"storage_options {spelled} must be a dict or a list of "
                                f"(name, value) pairs")
            items.append((item[0], item[1]))
    else:
        raise TypeError(f"storage_options {spelled} must be a dict, got {_type_name(value)}")
    out = []
    for name, val in items:
        if not isinstance(name, str) or not isinstance(val, str):
            raise TypeError(f"storage_options {spelled}: names and values must be str")
        if not _TCHAR.match(name):
            raise ValueError(f"storage_options {spelled}: invalid header name {name!r}")
        if not _HEADER_VALUE.match(val):
            raise ValueError(f"storage_options {spelled}: the value of {name!r} contains CR, LF, "
                             f"NUL, another control character or non-ASCII text")
        out.append((name, val))
    return out


def _check_headers(headers: List[Tuple[str, str]], signing: str, lsio_auth: bool) -> None:
    seen = set()
    for name, _ in headers:
        low = name.lower()
        if low in seen:
            raise ValueError(f"header {name!r} is given twice")
        seen.add(low)
        if low in _OWNED_HEADERS:
            raise ValueError(f"header {name!r} is set by lsio and cannot be given")
        if low == "authorization" and lsio_auth:
            how = "user:password in the URL" if signing == "none" else f"{signing} signing"
            raise ValueError(f"header {name!r} conflicts with the credentials lsio sends "
                             f"({how}); give one or the other")
        if signing == "sigv4" and low in _SIGV4_HEADERS:
            raise ValueError(f"header {name!r} is set by SigV4 signing and cannot be given")


def _take(opts: Dict[str, Tuple[Any, str]], key: str) -> Tuple[Any, str]:
    return opts.get(key, (None, key))


def check_url(url: str) -> None:
    """Raises what :func:`resolve` raises for ``url`` itself (a query string, a fragment, a
    bad bucket or path segment), in the same words, without reading storage_options, the
    environment or credentials: for callers that take the URL apart before resolving a
    parent of it (``read_ranges``)."""
    if not isinstance(url, str):
        raise TypeError(f"url must be a str, got {_type_name(url)}")
    if not is_remote(url):
        raise ValueError("not a remote URL (expected s3://, gs://, gcs://, http:// or https://)")
    url_scheme = url.partition("://")[0].lower()
    url = url_scheme + url[len(url_scheme):]
    if url_scheme in ("http", "https"):
        _parse_http(url, "URL")
    else:
        _parse_bucket_url(url, url_scheme)


def resolve(url: str, storage_options: Optional[Mapping] = None) -> RemoteConfig:
    """The validated config for ``url`` + ``storage_options`` + the environment."""
    if not isinstance(url, str):
        raise TypeError(f"url must be a str, got {_type_name(url)}")
    if not is_remote(url):
        raise ValueError("not a remote URL (expected s3://, gs://, gcs://, http:// or https://)")
    given_url, given_options = url, storage_options
    url_scheme = url.partition("://")[0].lower()
    kind = {"s3": "s3", "gs": "gs", "gcs": "gs", "http": "http", "https": "http"}[url_scheme]
    url = url_scheme + url[len(url_scheme):]
    opts = _collect(kind, storage_options)
    now = clock()

    def opt(key):
        return _take(opts, key)

    # Transport settings shared by every scheme.
    value, spelled = opt("verify_ssl")
    verify_ssl = True if value is None else _as_bool(value, spelled)
    value, spelled = opt("ca_file")
    if value is not None:
        ca_file, ca_source = _as_str(value, spelled), f"storage_options {spelled}"
    else:
        ca_file, ca_source = "", ""
        for name in (("AWS_CA_BUNDLE", "SSL_CERT_FILE") if kind == "s3" else ("SSL_CERT_FILE",)):
            if _env(name):
                ca_file, ca_source = os.path.expanduser(_env(name)), name
                break
    if ca_file and not os.path.isfile(ca_file):
        raise ValueError(f"the CA file {ca_file!r} (from {ca_source}) does not exist")
    cache_dir, cache_bytes, cache_max_age = _disk_cache(opt)
    value, spelled = opt("request_concurrency")
    if value is not None:
        concurrency = _as_int(value, spelled, 1, MAX_REQUEST_CONCURRENCY)
    elif _env("LSIO_REQUEST_CONCURRENCY"):
        env = _env("LSIO_REQUEST_CONCURRENCY")
        try:
            concurrency = int(env)
        except ValueError:
            concurrency = 0
        if not 1 <= concurrency <= MAX_REQUEST_CONCURRENCY:
            raise ValueError(f"LSIO_REQUEST_CONCURRENCY must be an integer in "
                             f"1..{MAX_REQUEST_CONCURRENCY}, got {env!r}")
    else:
        concurrency = DEFAULT_REQUEST_CONCURRENCY
    value, spelled = opt("timeout")
    timeout = DEFAULT_TIMEOUT if value is None else _as_seconds(value, spelled)
    value, spelled = opt("connect_timeout")
    connect_timeout = DEFAULT_CONNECT_TIMEOUT if value is None else _as_seconds(value, spelled)
    value, spelled = opt("retries")
    retries = DEFAULT_RETRIES if value is None else _as_int(value, spelled, 0)
    value, spelled = opt("headers")
    headers = [] if value is None else _headers(value, spelled)
    value, spelled = opt("anonymous")
    anonymous = None if value is None else _as_bool(value, spelled)
    provider, _ = opt("credentials")
    if provider is not None and not callable(provider) and not hasattr(provider, "get_frozen_credentials"):
        raise TypeError(f"storage_options credentials must be callable (or a boto3 Credentials "
                        f"object), got {_type_name(provider)}")
    value, spelled = opt("use_ssl")
    use_ssl = True if value is None else _as_bool(value, spelled)

    def conflict_with_anonymous(names):
        given = [opts[n][1] for n in names if n in opts]
        if anonymous and given:
            raise ValueError(f"storage_options anonymous=True conflicts with {', '.join(given)}")
        if provider is not None:
            others = [opts[n][1] for n in names if n in opts and n != "credentials"]
            if others:
                raise ValueError(f"storage_options credentials (a callable) conflicts with "
                                 f"{', '.join(others)}; give one or the other")

    bucket = ""
    region = ""
    lsio_auth = False
    extra: List[Tuple[str, str]] = []  # headers lsio adds (after the user's are checked)
    secrets = _Secrets("none")
    source = "anonymous"

    if kind == "http":
        endpoint, encoded_path, userinfo, _ = _parse_http(url, "URL")
        display_url = f"{endpoint.scheme}://{endpoint.host}{encoded_path}"
        scheme, host, root = endpoint.scheme, endpoint.host, endpoint.prefix
        value, spelled = opt("token")
        token = None if value is None else _as_str(value, spelled)
        auth_given = ["credentials"] * (provider is not None) + ["token"] * (token is not None)
        if userinfo is not None:
            if anonymous:
                raise ValueError("storage_options anonymous=True conflicts with user information "
                                 "in the URL")
            if auth_given:
                raise ValueError(f"user information in the URL conflicts with storage_options "
                                 f"{auth_given[0]}")
            import base64
            basic = base64.b64encode(f"{userinfo[0]}:{userinfo[1]}".encode()).decode("ascii")
            extra.append(("Authorization", f"Basic {basic}"))
            lsio_auth, source = True, "url"
        conflict_with_anonymous(["token", "credentials"])
        if provider is not None:
            secrets, source = _call_provider(kind, provider, now), "credentials callable"
        elif token is not None:
            secrets, source = _Secrets("bearer", token=token), "storage_options"
        elif source == "anonymous" and any(n.lower() == "authorization" for n, _ in headers):
            source = "storage_options"
        if anonymous is False and source == "anonymous":
            raise ValueError("storage_options anonymous=False, but no token, credentials or "
                             "Authorization header was given")
        lsio_auth = lsio_auth or secrets.signing != "none"
    else:
        bucket, segments = _parse_bucket_url(url, url_scheme)
        display_url = _root(f"{url_scheme}://{bucket}", segments)
        value, spelled = opt("addressing_style")
        style = "auto" if value is None else _as_str(value, spelled)
        if style not in ("auto", "path", "virtual"):
            raise ValueError(f"storage_options {spelled} must be 'auto', 'path' or 'virtual', "
                             f"got {style!r}")
        value, spelled = opt("region")
        region_opt = None if value is None else _as_str(value, spelled)
        if region_opt is not None and not _REGION.match(region_opt):
            raise ValueError(f"storage_options {spelled}: invalid region {region_opt!r}")
        value, spelled = opt("endpoint_url")
        endpoint = None if value is None else _parse_endpoint(value, f"storage_options {spelled}")
        value, spelled = opt("access_key_id")
        key_id = None if value is None else _as_str(value, spelled)
        value, spelled = opt("secret_access_key")
        secret = None if value is None else _as_str(value, spelled)
        value, spelled = opt("requester_pays")
        requester_pays = value

        if kind == "s3":
            value, spelled = opt("profile")
            if value is not None:
                profile = _Profile(_as_str(value, spelled), f"storage_options {spelled}")
            elif _env("AWS_PROFILE"):
                profile = _Profile(_env("AWS_PROFILE"), "AWS_PROFILE")
            else:
                profile = _Profile("default", "")
            value, spelled = opt("session_token")
            session = None if value is None else _as_str(value, spelled)
            conflict_with_anonymous(["access_key_id", "secret_access_key", "session_token",
                                     "profile", "credentials"])
            region = (region_opt or _env("AWS_REGION") or _env("AWS_DEFAULT_REGION")
                      or profile.settings().get("region") or "us-east-1")
            if not _REGION.match(region):
                raise ValueError(f"invalid AWS region {region!r}")
            if endpoint is None:
                ignore = (_env("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS") or "").lower() in ("1", "true")
                for name in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"):
                    if not ignore and _env(name):
                        endpoint = _parse_endpoint(_env(name), name)
                        break
                else:
                    text = None if ignore else profile.settings().get("endpoint_url")
                    if text:
                        endpoint = _parse_endpoint(text, f"AWS profile {profile.name!r}")
            custom = endpoint is not None
            if endpoint is None:
                suffix = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
                hostname = f"s3.{region.lower()}.{suffix}"
                endpoint = _Endpoint("https" if use_ssl else "http", hostname, hostname, "")

            if anonymous:
                pass
            elif provider is not None:
                secrets, source = _call_provider(kind, provider, now), "credentials callable"
            elif key_id is not None or secret is not None or session is not None:
                if key_id is None or secret is None:
                    raise ValueError("storage_options need both access_key_id (key) and "
                                     "secret_access_key (secret) (a session_token needs both too)")
                secrets = _Secrets("sigv4", key_id, secret, session or "")
                source = "storage_options"
            elif "profile" not in opts and (_env("AWS_ACCESS_KEY_ID") or _env("AWS_SECRET_ACCESS_KEY")):
                if not (_env("AWS_ACCESS_KEY_ID") and _env("AWS_SECRET_ACCESS_KEY")):
                    raise ValueError("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set "
                                     "together; only one is set")
                secrets = _Secrets("sigv4", _env("AWS_ACCESS_KEY_ID"), _env("AWS_SECRET_ACCESS_KEY"),
                                   _env("AWS_SESSION_TOKEN") or _env("AWS_SECURITY_TOKEN") or "")
                source = "environment"
            else:
                secrets, source = _profile_secrets(profile)
            if anonymous is False and secrets.signing == "none":
                creds_path, config_path = _profile_files()
                raise ValueError(f"storage_options anonymous=False, but no AWS credentials were "
                                 f"found (storage_options, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, "
                                 f"profile {profile.name!r} in {creds_path} / {config_path})")
            if requester_pays is not None:
                if _as_bool(requester_pays, "requester_pays"):
                    if secrets.signing == "none":
                        raise ValueError("requester_pays=True needs credentials (AWS refuses "
                                         "unsigned requester-pays requests)")
                    extra.append(("x-amz-request-payer", "requester"))
        else:  # gs
            custom = True  # never AWS virtual-host defaults
            region = region_opt or "auto"
            if endpoint is None:
                endpoint = _parse_endpoint(GCS_ENDPOINT, "the GCS default")
                if not use_ssl:
                    endpoint = dataclasses.replace(endpoint, scheme="http")
            value, spelled = opt("token")
            token = None
            if value is not None:
                if not isinstance(value, str):
                    raise TypeError(f"storage_options {spelled} on gs:// must be a str (a bearer "
                                    f"token or 'anon'); for google-auth credentials give "
                                    f"credentials=GoogleAuthCredentials() or a callable")
                token = _as_str(value, spelled)
                if token == "anon":
                    if anonymous is False:
                        raise ValueError("storage_options token='anon' conflicts with anonymous=False")
                    anonymous, token = True, None
                    del opts["token"]
                elif token in _GCSFS_TOKENS or token.endswith(".json") or os.path.exists(token):
                    raise ValueError(f"storage_options {spelled}: gcsfs token modes and service "
                                     f"account files are not read by lsio; give "
                                     f"credentials=GoogleAuthCredentials() (google.auth.default) or "
                                     f"a callable returning {{'token': ..., 'expiry': ...}}")
            conflict_with_anonymous(["access_key_id", "secret_access_key", "token", "credentials"])
            if token is not None and (key_id is not None or secret is not None):
                raise ValueError("storage_options token (bearer) conflicts with HMAC keys "
                                 "(access_key_id/secret_access_key); give one or the other")
            if anonymous:
                pass
            elif provider is not None:
                secrets, source = _call_provider(kind, provider, now), "credentials callable"
            elif key_id is not None or secret is not None:
                if key_id is None or secret is None:
                    raise ValueError("storage_options need both access_key_id (key) and "
                                     "secret_access_key (secret) for GCS HMAC keys; got only one")
                secrets, source = _Secrets("sigv4", key_id, secret), "storage_options"
            elif token is not None:
                secrets, source = _Secrets("bearer", token=token), "storage_options"
            if anonymous is False and secrets.signing == "none":
                raise ValueError("storage_options anonymous=False, but no GCS credentials were "
                                 "given (token, HMAC keys or credentials)")
            value, spelled = opt("project")
            project = None if value is None else _as_str(value, spelled)
            if requester_pays is not None and requester_pays is not False:
                if isinstance(requester_pays, str):
                    billed = _as_str(requester_pays, "requester_pays")
                    if project is not None and project != billed:
                        raise ValueError("storage_options requester_pays and project name "
                                         "different projects")
                elif requester_pays is True:
                    if project is None:
                        raise ValueError("storage_options requester_pays=True on gs:// needs "
                                         "project (the project billed)")
                    billed = project
                else:
                    raise TypeError(f"storage_options requester_pays must be a bool or a "
                                    f"project id str, got {_type_name(requester_pays)}")
                extra.append(("x-goog-user-project", billed))

        virtual = (style == "virtual") or (style == "auto" and not custom
                                           and bool(_DNS_BUCKET.match(bucket)))
        if virtual:
            if not _DNS_BUCKET.match(bucket):
                raise ValueError(f"addressing_style='virtual' needs a bucket name that is a DNS "
                                 f"label without dots ([a-z0-9-], 3-63 characters), got {bucket!r}")
            if ":" in endpoint.hostname or _IPV4.match(endpoint.hostname):
                raise ValueError("addressing_style='virtual' needs an endpoint host name, not an "
                                 "IP address")
            scheme, host = endpoint.scheme, f"{bucket}.{endpoint.host}"
            root = _root(endpoint.prefix, segments)
            list_root = endpoint.prefix
        else:
            scheme, host = endpoint.scheme, endpoint.host
            root = _root(endpoint.prefix, [bucket] + segments)
            list_root = _root(endpoint.prefix, [bucket])
        lsio_auth = secrets.signing != "none"

    if kind == "http":
        region = ""
    _check_headers(headers, secrets.signing, lsio_auth)
    given_names = {n.lower() for n, _ in headers}
    for name, _ in extra:
        if name.lower() in given_names:
            raise ValueError(f"header {name!r} is given in headers and also set by lsio "
                             f"(from the URL or requester_pays); give one or the other")
    headers = headers + extra
    return RemoteConfig(
        kind=kind, scheme=scheme, host=host, root=root, signing=secrets.signing,
        region=region, service="s3",
        access_key_id=secrets.access_key_id, secret_access_key=secrets.secret_access_key,
        session_token=secrets.session_token, token=secrets.token,
        headers=tuple(headers), verify_ssl=verify_ssl, ca_file=ca_file,
        request_concurrency=concurrency, timeout=timeout, connect_timeout=connect_timeout,
        retries=retries, display_url=display_url, credentials_expiry=secrets.expiry,
        credential_source=source, bucket=bucket, url=given_url,
        storage_options=given_options, credentials=provider,
        list_root=list_root if kind in ("s3", "gs") else None,
        cache_dir=cache_dir, cache_bytes=cache_bytes, cache_max_age=cache_max_age,
    )


_ROLE_KEYS = ("role_arn", "web_identity_token_file", "credential_source", "sso_start_url",
              "sso_session", "sso_account_id", "sso_role_name")


def _profile_secrets(profile: _Profile) -> Tuple[_Secrets, str]:
    settings = profile.settings()
    hint = (f"pass storage_options={{'credentials': lsio._storage.Boto3Credentials("
            f"{profile.name!r})}} (or boto3.Session(profile_name={profile.name!r}).get_credentials)")
    dynamic = [k for k in _ROLE_KEYS if settings.get(k)]
    if dynamic:
        raise ValueError(f"AWS profile {profile.name!r} uses {dynamic[0]}, which lsio does not "
                         f"resolve itself; {hint}")
    key_id = settings.get("aws_access_key_id", "")
    secret = settings.get("aws_secret_access_key", "")
    if key_id or secret:
        if not (key_id and secret):
            raise ValueError(f"AWS profile {profile.name!r} has only one of aws_access_key_id "
                             f"and aws_secret_access_key")
        token = settings.get("aws_session_token") or settings.get("aws_security_token") or ""
        return _Secrets("sigv4", key_id, secret, token), f"profile:{profile.name}"
    if settings.get("credential_process"):
        raise ValueError(f"AWS profile {profile.name!r} uses credential_process, which lsio does "
                         f"not run itself; {hint}")
    return _Secrets("none"), "anonymous"


# ---------------------------------------------------------------------------------------
# Picklable providers


class Boto3Credentials:
    """``credentials=Boto3Credentials(profile_name=None)``: boto3's credential chain (env,
    profiles, SSO, assume-role, credential_process, ECS/EC2 metadata), built lazily in each
    process; pickles as its profile name, so it works in spawned DataLoader workers."""

    def __init__(self, profile_name: Optional[str] = None):
        self.profile_name = profile_name
        self._credentials = None

    def __call__(self):
        if self._credentials is None:
            import boto3

            self._credentials = boto3.Session(profile_name=self.profile_name).get_credentials()
        return self._credentials

    def __getstate__(self):
        return {"profile_name": self.profile_name}

    def __setstate__(self, state):
        self.profile_name = state["profile_name"]
        self._credentials = None

    def __eq__(self, other):
        return type(other) is type(self) and other.profile_name == self.profile_name

    def __hash__(self):
        return hash((type(self), self.profile_name))

    def __repr__(self):
        return f"Boto3Credentials(profile_name={self.profile_name!r})"


class GoogleAuthCredentials:
    """``credentials=GoogleAuthCredentials()``: ``google.auth.default`` (ADC,
    GOOGLE_APPLICATION_CREDENTIALS, GCE metadata) with a read-only storage scope, refreshed
    when less than ``REFRESH_MARGIN`` is left; built lazily in each process and picklable."""

    def __init__(self, scopes: Tuple[str, ...] = (GCS_READ_SCOPE,)):
        self.scopes = tuple(scopes)
        self._credentials = None

    def __call__(self):
        import google.auth
        import google.auth.transport.requests

        if self._credentials is None:
            self._credentials, _ = google.auth.default(scopes=list(self.scopes))
        creds = self._credentials
        expiry = _expiry_seconds(getattr(creds, "expiry", None), "google-auth credentials")
        if not creds.token or not expiry or expiry - clock() < REFRESH_MARGIN:
            creds.refresh(google.auth.transport.requests.Request())
        return {"token": creds.token, "expiry": getattr(creds, "expiry", None)}

    def __getstate__(self):
        return {"scopes": self.scopes}

    def __setstate__(self, state):
        self.scopes = tuple(state["scopes"])
        self._credentials = None

    def __eq__(self, other):
        return type(other) is type(self) and other.scopes == self.scopes

    def __hash__(self):
        return hash((type(self), self.scopes))

    def __repr__(self):
        return f"GoogleAuthCredentials(scopes={self.scopes!r})"

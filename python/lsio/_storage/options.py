"""storage_options: the option tables, collecting the accepted spellings into canonical
keys, each option's type and value checks, ``option_from_text`` (the CLI's text values), and
``resolve``, which turns a URL, its storage_options and the environment into a frozen
:class:`RemoteConfig` whose ``to_core()`` is the dict the C++ store consumes.

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
| disk_cache_bytes    | int > 0                    | 10 GiB: the disk cache's bound; needs        | all      |
|                     |                            | cache_dir. The old name ``cache_bytes`` still|          |
|                     |                            | works, with a DeprecationWarning (both: a    |          |
|                     |                            | ValueError)                                  |          |
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

Pickling
--------

A ``RemoteConfig`` pickles as its ``resolve`` inputs, ``(url, storage_options)`` as given
(``config.resolve_args``), and unpickling re-resolves: a DataLoader worker reads its own
environment and calls the credentials callable again, so it gets fresh credentials. This
needs every value in storage_options to pickle: a lambda, a local function or a bound
method of ``boto3.Session()`` does not, which breaks ``spawn``/``forkserver`` workers (fork
needs no pickling); use a module-level function or ``Boto3Credentials``/
``GoogleAuthCredentials``.

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
| provider            | "s3", "gcs" or "http": whose error vocabulary and request-id headers     |
|                     | the C++ store uses (cpp/src/store/providers.h)                           |
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
| cache_bytes         | int, the disk cache's bound in bytes (0 when there is none): the option  |
|                     | ``disk_cache_bytes`` (the binding keeps the key's old name)              |
| cache_max_age       | float seconds; only present when non-zero (``OPTIONAL_CORE_KEYS``)       |
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from .credentials import (REFRESH_MARGIN, Profile, Secrets, call_provider, current_time, iso_utc,
                          profile_files, profile_secrets)
from .redact import SECRET_OPTIONS, SENSITIVE_HEADER, redact
from .urls import (DNS_BUCKET, GCS_ENDPOINT, IPV4, Endpoint, is_remote, join_root,
                   parse_bucket_url, parse_endpoint, parse_http)
from .validate import as_bool, as_int, as_seconds, as_str, getenv, renamed, type_name

DEFAULT_REQUEST_CONCURRENCY = 32
MAX_REQUEST_CONCURRENCY = 4096
DEFAULT_TIMEOUT = 30.0
DEFAULT_CONNECT_TIMEOUT = 5.0
DEFAULT_RETRIES = 9

CORE_KEYS = (
    "scheme", "host", "root", "provider", "signing", "region", "service", "access_key_id",
    "secret_access_key", "session_token", "token", "headers", "verify_ssl", "ca_file",
    "request_concurrency", "timeout", "connect_timeout", "retries", "display_url",
    "credentials_expiry", "list_root", "cache_dir", "cache_bytes",
)
# Keys to_core() adds only when they differ from their default (see to_core).
OPTIONAL_CORE_KEYS = ("cache_max_age",)

# ---------------------------------------------------------------------------------------
# Option tables

KNOWN_KEYS = (
    "endpoint_url", "region", "anonymous", "access_key_id", "secret_access_key",
    "session_token", "profile", "token", "headers", "verify_ssl", "ca_file",
    "request_concurrency", "timeout", "connect_timeout", "retries", "credentials",
    "addressing_style", "requester_pays", "project", "use_ssl", "client_kwargs",
    "cache_dir", "disk_cache_bytes", "cache_max_age",
)
# Old names that still work, with a DeprecationWarning: old -> new (validate.renamed).
# cache_bytes was also lsio.open's decoded-chunk cache, a different cache.
RENAMED = {"cache_bytes": "disk_cache_bytes"}
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
             "cache_dir", "disk_cache_bytes", "cache_max_age"},
}

_TCHAR = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_HEADER_VALUE = re.compile(r"^[\t\x20-\x7e]*$")
_REGION = re.compile(r"^[A-Za-z0-9._-]+$")
_OWNED_HEADERS = {"host", "range", "content-length", "transfer-encoding", "connection",
                  "expect", "te", "upgrade", "keep-alive", "proxy-connection"}
_SIGV4_HEADERS = {"authorization", "x-amz-date", "x-amz-content-sha256",
                  "x-amz-security-token"}
_GCSFS_TOKENS = ("google_default", "cloud", "browser", "cache")


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
# storage_options: spellings -> canonical keys


def _collect(kind: str, storage_options: Optional[Mapping]) -> Dict[str, Tuple[Any, str]]:
    """{canonical key: (value, spelling)}; None values dropped; conflicts and unknowns raise."""
    if storage_options is None:
        return {}
    if not isinstance(storage_options, Mapping):
        raise TypeError(f"storage_options must be a dict or None, got {type_name(storage_options)}")
    opts: Dict[str, Tuple[Any, str]] = {}
    for old, new in RENAMED.items():
        renamed(storage_options.get(old), storage_options.get(new), old, new, "storage_options key")

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
                shown = "" if canon in SECRET_OPTIONS else f" ({old!r} and {value!r})"
                raise ValueError(f"storage_options give {canon} twice with different values, "
                                 f"as {old_spelled!r} and {spelled!r}{shown}")
            return
        opts[canon] = (value, spelled)

    for name, value in storage_options.items():
        if not isinstance(name, str):
            raise TypeError(f"storage_options keys must be str, got {type_name(name)}")
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
                raise TypeError(f"storage_options client_kwargs must be a dict, got {type_name(value)}")
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
                        put("ca_file", as_str(subvalue, spelled), spelled)
                else:
                    put(canon, subvalue, spelled)
            continue
        if name == "token" and kind == "s3":
            canon = "session_token"
        else:
            canon = RENAMED.get(name) or ALIASES.get(name, name)
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
    disk_cache_bytes: int = 0
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
            # whose servers: their error vocabulary and request ids (cpp/src/store/providers.h)
            "provider": {"gs": "gcs"}.get(self.kind, self.kind),
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
            "cache_bytes": self.disk_cache_bytes,  # the binding's key keeps the old name
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
        now = current_time() if now is None else now
        return now >= self.credentials_expiry - REFRESH_MARGIN

    def refresh_if_needed(self, now: Optional[float] = None) -> Optional["RemoteConfig"]:
        """A config with fresh credentials when they expire within ``REFRESH_MARGIN``, else None."""
        now = current_time() if now is None else now
        return self.refresh(now) if self.needs_refresh(now) else None

    def refresh(self, now: Optional[float] = None) -> "RemoteConfig":
        """Call the credentials callable again (a config without one is returned unchanged)."""
        if self.credentials is None:
            return self
        now = current_time() if now is None else now
        s = call_provider(self.kind, self.credentials, now)
        if s.signing != self.signing:
            raise ValueError(f"credentials callable switched from {self.signing} to {s.signing} "
                             f"credentials for {self.display_url}")
        return dataclasses.replace(self, access_key_id=s.access_key_id,
                                   secret_access_key=s.secret_access_key,
                                   session_token=s.session_token, token=s.token,
                                   credentials_expiry=s.expiry)

    def secrets(self) -> Tuple[str, ...]:
        values = [self.secret_access_key, self.session_token, self.token]
        values += [v for n, v in self.headers if SENSITIVE_HEADER.search(n)]
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
            parts.append(f"expires={iso_utc(self.credentials_expiry)!r}")
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
# resolve

DEFAULT_DISK_CACHE_BYTES = 10 << 30


def _disk_cache(opt: Callable[[str], Tuple[Any, str]]) -> Tuple[str, int, float]:
    """(cache_dir, disk_cache_bytes, cache_max_age) from storage_options: a directory (str or
    PathLike, ``~`` expanded, created on first write), its bound in bytes (default 10 GiB) and
    how many seconds a server's confirmation of an object's version lets the cache serve it
    (default 0). disk_cache_bytes or cache_max_age without cache_dir is an error."""
    value, spelled = opt("cache_dir")
    size, size_spelled = opt("disk_cache_bytes")
    age, age_spelled = opt("cache_max_age")
    if value is None:
        for given, name in ((size, size_spelled), (age, age_spelled)):
            if given is not None:
                raise ValueError(f"storage_options {name!r} needs cache_dir (the directory to keep blocks in)")
        return "", 0, 0.0
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    directory = os.path.abspath(os.path.expanduser(as_str(value, spelled)))
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise ValueError(f"storage_options {spelled} {directory!r} exists and is not a directory")
    max_age = 0.0
    if age is not None:
        if isinstance(age, bool) or not isinstance(age, (int, float)):
            raise TypeError(f"storage_options {age_spelled} must be a number of seconds, got {type_name(age)}")
        max_age = float(age)
        if not math.isfinite(max_age) or max_age < 0:
            raise ValueError(f"storage_options {age_spelled} must be a finite number of seconds >= 0, got {max_age}")
    if size is None:
        return directory, DEFAULT_DISK_CACHE_BYTES, max_age
    return directory, as_int(size, size_spelled, 1), max_age


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
        raise TypeError(f"storage_options {spelled} must be a dict, got {type_name(value)}")
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


def resolve(url: str, storage_options: Optional[Mapping] = None) -> RemoteConfig:
    """The validated config for ``url`` + ``storage_options`` + the environment."""
    if not isinstance(url, str):
        raise TypeError(f"url must be a str, got {type_name(url)}")
    if not is_remote(url):
        raise ValueError("not a remote URL (expected s3://, gs://, gcs://, http:// or https://)")
    given_url, given_options = url, storage_options
    url_scheme = url.partition("://")[0].lower()
    kind = {"s3": "s3", "gs": "gs", "gcs": "gs", "http": "http", "https": "http"}[url_scheme]
    url = url_scheme + url[len(url_scheme):]
    opts = _collect(kind, storage_options)
    now = current_time()

    def opt(key):
        return _take(opts, key)

    # Transport settings shared by every scheme.
    value, spelled = opt("verify_ssl")
    verify_ssl = True if value is None else as_bool(value, spelled)
    value, spelled = opt("ca_file")
    if value is not None:
        ca_file, ca_source = as_str(value, spelled), f"storage_options {spelled}"
    else:
        ca_file, ca_source = "", ""
        for name in (("AWS_CA_BUNDLE", "SSL_CERT_FILE") if kind == "s3" else ("SSL_CERT_FILE",)):
            if getenv(name):
                ca_file, ca_source = os.path.expanduser(getenv(name)), name
                break
    if ca_file and not os.path.isfile(ca_file):
        raise ValueError(f"the CA file {ca_file!r} (from {ca_source}) does not exist")
    cache_dir, disk_cache_bytes, cache_max_age = _disk_cache(opt)
    value, spelled = opt("request_concurrency")
    if value is not None:
        concurrency = as_int(value, spelled, 1, MAX_REQUEST_CONCURRENCY)
    elif getenv("LSIO_REQUEST_CONCURRENCY"):
        env = getenv("LSIO_REQUEST_CONCURRENCY")
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
    timeout = DEFAULT_TIMEOUT if value is None else as_seconds(value, spelled)
    value, spelled = opt("connect_timeout")
    connect_timeout = DEFAULT_CONNECT_TIMEOUT if value is None else as_seconds(value, spelled)
    value, spelled = opt("retries")
    retries = DEFAULT_RETRIES if value is None else as_int(value, spelled, 0)
    value, spelled = opt("headers")
    headers = [] if value is None else _headers(value, spelled)
    value, spelled = opt("anonymous")
    anonymous = None if value is None else as_bool(value, spelled)
    provider, _ = opt("credentials")
    if provider is not None and not callable(provider) and not hasattr(provider, "get_frozen_credentials"):
        raise TypeError(f"storage_options credentials must be callable (or a boto3 Credentials "
                        f"object), got {type_name(provider)}")
    value, spelled = opt("use_ssl")
    use_ssl = True if value is None else as_bool(value, spelled)

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
    secrets = Secrets("none")
    source = "anonymous"

    if kind == "http":
        endpoint, encoded_path, userinfo, _ = parse_http(url, "URL")
        display_url = f"{endpoint.scheme}://{endpoint.host}{encoded_path}"
        scheme, host, root = endpoint.scheme, endpoint.host, endpoint.prefix
        value, spelled = opt("token")
        token = None if value is None else as_str(value, spelled)
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
            secrets, source = call_provider(kind, provider, now), "credentials callable"
        elif token is not None:
            secrets, source = Secrets("bearer", token=token), "storage_options"
        elif source == "anonymous" and any(n.lower() == "authorization" for n, _ in headers):
            source = "storage_options"
        if anonymous is False and source == "anonymous":
            raise ValueError("storage_options anonymous=False, but no token, credentials or "
                             "Authorization header was given")
        lsio_auth = lsio_auth or secrets.signing != "none"
    else:
        bucket, segments = parse_bucket_url(url, url_scheme)
        display_url = join_root(f"{url_scheme}://{bucket}", segments)
        value, spelled = opt("addressing_style")
        style = "auto" if value is None else as_str(value, spelled)
        if style not in ("auto", "path", "virtual"):
            raise ValueError(f"storage_options {spelled} must be 'auto', 'path' or 'virtual', "
                             f"got {style!r}")
        value, spelled = opt("region")
        region_opt = None if value is None else as_str(value, spelled)
        if region_opt is not None and not _REGION.match(region_opt):
            raise ValueError(f"storage_options {spelled}: invalid region {region_opt!r}")
        value, spelled = opt("endpoint_url")
        endpoint = None if value is None else parse_endpoint(value, f"storage_options {spelled}")
        value, spelled = opt("access_key_id")
        key_id = None if value is None else as_str(value, spelled)
        value, spelled = opt("secret_access_key")
        secret = None if value is None else as_str(value, spelled)
        value, spelled = opt("requester_pays")
        requester_pays = value

        if kind == "s3":
            value, spelled = opt("profile")
            if value is not None:
                profile = Profile(as_str(value, spelled), f"storage_options {spelled}")
            elif getenv("AWS_PROFILE"):
                profile = Profile(getenv("AWS_PROFILE"), "AWS_PROFILE")
            else:
                profile = Profile("default", "")
            value, spelled = opt("session_token")
            session = None if value is None else as_str(value, spelled)
            conflict_with_anonymous(["access_key_id", "secret_access_key", "session_token",
                                     "profile", "credentials"])
            region = (region_opt or getenv("AWS_REGION") or getenv("AWS_DEFAULT_REGION")
                      or profile.settings().get("region") or "us-east-1")
            if not _REGION.match(region):
                raise ValueError(f"invalid AWS region {region!r}")
            if endpoint is None:
                ignore = (getenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS") or "").lower() in ("1", "true")
                for name in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"):
                    if not ignore and getenv(name):
                        endpoint = parse_endpoint(getenv(name), name)
                        break
                else:
                    text = None if ignore else profile.settings().get("endpoint_url")
                    if text:
                        endpoint = parse_endpoint(text, f"AWS profile {profile.name!r}")
            custom = endpoint is not None
            if endpoint is None:
                suffix = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
                hostname = f"s3.{region.lower()}.{suffix}"
                endpoint = Endpoint("https" if use_ssl else "http", hostname, hostname, "")

            if anonymous:
                pass
            elif provider is not None:
                secrets, source = call_provider(kind, provider, now), "credentials callable"
            elif key_id is not None or secret is not None or session is not None:
                if key_id is None or secret is None:
                    raise ValueError("storage_options need both access_key_id (key) and "
                                     "secret_access_key (secret) (a session_token needs both too)")
                secrets = Secrets("sigv4", key_id, secret, session or "")
                source = "storage_options"
            elif "profile" not in opts and (getenv("AWS_ACCESS_KEY_ID") or getenv("AWS_SECRET_ACCESS_KEY")):
                if not (getenv("AWS_ACCESS_KEY_ID") and getenv("AWS_SECRET_ACCESS_KEY")):
                    raise ValueError("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set "
                                     "together; only one is set")
                secrets = Secrets("sigv4", getenv("AWS_ACCESS_KEY_ID"), getenv("AWS_SECRET_ACCESS_KEY"),
                                   getenv("AWS_SESSION_TOKEN") or getenv("AWS_SECURITY_TOKEN") or "")
                source = "environment"
            else:
                secrets, source = profile_secrets(profile)
            if anonymous is False and secrets.signing == "none":
                creds_path, config_path = profile_files()
                raise ValueError(f"storage_options anonymous=False, but no AWS credentials were "
                                 f"found (storage_options, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, "
                                 f"profile {profile.name!r} in {creds_path} / {config_path})")
            if requester_pays is not None:
                if as_bool(requester_pays, "requester_pays"):
                    if secrets.signing == "none":
                        raise ValueError("requester_pays=True needs credentials (AWS refuses "
                                         "unsigned requester-pays requests)")
                    extra.append(("x-amz-request-payer", "requester"))
        else:  # gs
            custom = True  # never AWS virtual-host defaults
            region = region_opt or "auto"
            if endpoint is None:
                endpoint = parse_endpoint(GCS_ENDPOINT, "the GCS default")
                if not use_ssl:
                    endpoint = dataclasses.replace(endpoint, scheme="http")
            value, spelled = opt("token")
            token = None
            if value is not None:
                if not isinstance(value, str):
                    raise TypeError(f"storage_options {spelled} on gs:// must be a str (a bearer "
                                    f"token or 'anon'); for google-auth credentials give "
                                    f"credentials=GoogleAuthCredentials() or a callable")
                token = as_str(value, spelled)
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
                secrets, source = call_provider(kind, provider, now), "credentials callable"
            elif key_id is not None or secret is not None:
                if key_id is None or secret is None:
                    raise ValueError("storage_options need both access_key_id (key) and "
                                     "secret_access_key (secret) for GCS HMAC keys; got only one")
                secrets, source = Secrets("sigv4", key_id, secret), "storage_options"
            elif token is not None:
                secrets, source = Secrets("bearer", token=token), "storage_options"
            if anonymous is False and secrets.signing == "none":
                raise ValueError("storage_options anonymous=False, but no GCS credentials were "
                                 "given (token, HMAC keys or credentials)")
            value, spelled = opt("project")
            project = None if value is None else as_str(value, spelled)
            if requester_pays is not None and requester_pays is not False:
                if isinstance(requester_pays, str):
                    billed = as_str(requester_pays, "requester_pays")
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
                                    f"project id str, got {type_name(requester_pays)}")
                extra.append(("x-goog-user-project", billed))

        virtual = (style == "virtual") or (style == "auto" and not custom
                                           and bool(DNS_BUCKET.match(bucket)))
        if virtual:
            if not DNS_BUCKET.match(bucket):
                raise ValueError(f"addressing_style='virtual' needs a bucket name that is a DNS "
                                 f"label without dots ([a-z0-9-], 3-63 characters), got {bucket!r}")
            if ":" in endpoint.hostname or IPV4.match(endpoint.hostname):
                raise ValueError("addressing_style='virtual' needs an endpoint host name, not an "
                                 "IP address")
            scheme, host = endpoint.scheme, f"{bucket}.{endpoint.host}"
            root = join_root(endpoint.prefix, segments)
            list_root = endpoint.prefix
        else:
            scheme, host = endpoint.scheme, endpoint.host
            root = join_root(endpoint.prefix, [bucket] + segments)
            list_root = join_root(endpoint.prefix, [bucket])
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
        cache_dir=cache_dir, disk_cache_bytes=disk_cache_bytes, cache_max_age=cache_max_age,
    )

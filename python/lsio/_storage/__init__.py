"""Remote stores: a URL, ``storage_options`` and the environment become one engine config.

>>> cfg = resolve("s3://era5-bucket/era5.zarr", {"anon": True})
>>> cfg.to_core()["host"], cfg.to_core()["root"]
('era5-bucket.s3.us-east-1.amazonaws.com', '/era5.zarr')

``resolve(url, storage_options)`` validates everything up front (wrong types raise
``TypeError``, wrong values, unknown keys and conflicting spellings raise ``ValueError``) and
returns a frozen :class:`RemoteConfig`; ``RemoteConfig.to_core()`` is the dict the C++ store
consumes. This package needs only the standard library (not the compiled ``_core``).

Where things are (each module's docstring is the reference for its part):

* :mod:`.urls` -- which strings are remote (``is_remote``), local paths and ``file://``
  (``local_path``), parsing and validating ``s3://``, ``gs://``/``gcs://`` and ``http(s)://``
  URLs and endpoints (``check_url``), addressing.
* :mod:`.options` -- the storage_options tables (known keys, aliases, ignored and refused
  keys), their types and checks, ``option_from_text`` (the CLI's text values), and
  ``resolve`` / :class:`RemoteConfig` / ``to_core()`` / pickling.
* :mod:`.credentials` -- where credentials come from: AWS profile files, a ``credentials``
  callable and its expiry and refresh, :class:`Boto3Credentials`,
  :class:`GoogleAuthCredentials`.
* :mod:`.redact` -- ``masked_options`` and ``redact``: secrets kept out of what is shown.
* :mod:`.validate` -- the small per-value checks the others share.

Imports go one way: ``validate`` <- ``urls``, ``credentials``, ``redact`` <- ``options`` <-
this package, which re-exports what the rest of lsio uses.
"""

from __future__ import annotations

import time
from typing import Callable

from .credentials import GCS_READ_SCOPE, REFRESH_MARGIN, Boto3Credentials, GoogleAuthCredentials
from .options import (ALIASES, APPLICABLE, CLIENT_KWARGS, CORE_KEYS, DEFAULT_CONNECT_TIMEOUT,
                      DEFAULT_DISK_CACHE_BYTES, DEFAULT_REQUEST_CONCURRENCY, DEFAULT_RETRIES,
                      DEFAULT_TIMEOUT, IGNORED_KEYS, KNOWN_KEYS, MAX_REQUEST_CONCURRENCY,
                      OPTIONAL_CORE_KEYS, REFUSED_KEYS, RemoteConfig, option_from_text, refresh,
                      refresh_if_needed, resolve)
from .redact import masked_options, redact
from .urls import GCS_ENDPOINT, REMOTE_SCHEMES, check_url, is_remote, local_path

__all__ = [
    "is_remote", "local_path", "check_url", "resolve", "refresh_if_needed", "refresh",
    "option_from_text", "redact", "masked_options", "RemoteConfig", "Boto3Credentials",
    "GoogleAuthCredentials", "clock", "REFRESH_MARGIN", "CORE_KEYS", "OPTIONAL_CORE_KEYS",
    "KNOWN_KEYS", "ALIASES", "CLIENT_KWARGS", "IGNORED_KEYS", "REFUSED_KEYS", "APPLICABLE",
    "REMOTE_SCHEMES", "GCS_ENDPOINT", "GCS_READ_SCOPE", "DEFAULT_REQUEST_CONCURRENCY",
    "MAX_REQUEST_CONCURRENCY", "DEFAULT_TIMEOUT", "DEFAULT_CONNECT_TIMEOUT", "DEFAULT_RETRIES",
    "DEFAULT_DISK_CACHE_BYTES",
]

#: The clock used for credential expiry. Every expiry decision in this package reads this
#: attribute when it runs (``credentials.current_time``), so tests replace it here.
clock: Callable[[], float] = time.time

"""Credential sources: the AWS profile files, a ``credentials`` callable (or a boto3
``Credentials`` object) with its expiry, and the picklable providers
:class:`Boto3Credentials` and :class:`GoogleAuthCredentials`. ``resolve``
(:mod:`.options`) decides which source applies; this module reads it.

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
clock is the package attribute ``lsio._storage.clock`` (``time.time``), replaceable in tests.
"""

from __future__ import annotations

import configparser
import dataclasses
import datetime as _dt
import math
import os
import sys
from typing import Any, Dict, Mapping, Optional, Tuple

from .validate import CONTROL_CHARS, getenv, type_name

REFRESH_MARGIN = 300.0
GCS_READ_SCOPE = "https://www.googleapis.com/auth/devstorage.read_only"


def current_time() -> float:
    """The package's ``clock()`` (``lsio._storage.clock``), looked up on every call so that
    replacing that one attribute (tests use a fake clock) moves every expiry decision."""
    return sys.modules[__package__].clock()


# ---------------------------------------------------------------------------------------
# AWS profile files


def profile_files() -> Tuple[str, str]:
    home = os.path.expanduser("~")
    creds = getenv("AWS_SHARED_CREDENTIALS_FILE") or os.path.join(home, ".aws", "credentials")
    config = getenv("AWS_CONFIG_FILE") or os.path.join(home, ".aws", "config")
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
    creds_path, config_path = profile_files()
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


class Profile:
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
                creds_path, config_path = profile_files()
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
                        f"got {type_name(value)}")
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
class Secrets:
    signing: str
    access_key_id: str = ""
    secret_access_key: str = ""
    session_token: str = ""
    token: str = ""
    expiry: float = 0.0


def _provider_str(value: Any, field: str) -> str:
    what = "credentials callable"
    if not isinstance(value, str):
        raise TypeError(f"{what}: {field} must be a str, got {type_name(value)}")
    if CONTROL_CHARS.search(value):
        raise ValueError(f"{what}: {field} contains control characters")
    return value


def call_provider(kind: str, provider: Any, now: float) -> Secrets:
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
        raise TypeError(f"{what} returned {type_name(result)}; expected a mapping, a boto3 "
                        f"Credentials object, an object with .token/.expiry, or a str")
    expiry_s = _expiry_seconds(expiry, what)
    if expiry_s and expiry_s <= now:
        raise ValueError(f"{what} returned credentials that expired already (at "
                         f"{iso_utc(expiry_s)}, now {iso_utc(now)})")
    if ak or sk:
        if not (ak and sk):
            raise ValueError(f"{what} returned access_key_id without secret_access_key "
                             f"(or the reverse)")
        if kind == "http":
            raise ValueError(f"{what} returned access keys, but http(s):// URLs take a bearer "
                             f"token only")
        if kind == "gs" and st:
            raise ValueError(f"{what} returned a session token with GCS HMAC keys")
        return Secrets("sigv4", ak, sk, st, "", expiry_s)
    if st and not tok:
        raise ValueError(f"{what} returned a session token without access keys")
    if not tok:
        raise ValueError(f"{what} returned no credentials")
    if kind == "s3":
        raise ValueError(f"{what} returned a bearer token, but s3:// needs access keys "
                         f"(access_key_id, secret_access_key)")
    return Secrets("bearer", token=tok, expiry=expiry_s)


def iso_utc(seconds: float) -> str:
    return _dt.datetime.fromtimestamp(seconds, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


_ROLE_KEYS = ("role_arn", "web_identity_token_file", "credential_source", "sso_start_url",
              "sso_session", "sso_account_id", "sso_role_name")


def profile_secrets(profile: Profile) -> Tuple[Secrets, str]:
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
        return Secrets("sigv4", key_id, secret, token), f"profile:{profile.name}"
    if settings.get("credential_process"):
        raise ValueError(f"AWS profile {profile.name!r} uses credential_process, which lsio does "
                         f"not run itself; {hint}")
    return Secrets("none"), "anonymous"


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
        if not creds.token or not expiry or expiry - current_time() < REFRESH_MARGIN:
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

"""Keeping secrets out of what lsio shows: ``masked_options`` (storage_options fit for
``Array.options``, reprs and logs) and ``redact`` (credentials removed from any text, such as
an error message or a URL).

``repr(config)`` shows the display URL, endpoint, root, signing, region, credential source,
header names (never values), and ``access_key_id`` only as its first 4 characters + "…"
(``AKIA…`` / ``ASIA…`` tells long-term from temporary keys); never secrets or tokens.
``redact(text, secrets=())`` removes URL userinfo and query strings, ``Authorization``-like
header values, ``Bearer`` tokens, and AWS key ids (to their first 4 characters), plus every
string in ``secrets``; ``config.redact(text)`` passes the config's own secrets. Error messages
raised here never contain secret values.
"""

from __future__ import annotations

import copy
import re
from typing import Any, Dict, Mapping, Optional

# storage_options whose values are secret (or hold secrets): never shown, not even in a
# message about two spellings that disagree.
SECRET_OPTIONS = {"secret_access_key", "session_token", "token", "headers", "access_key_id",
                  "credentials"}
# Header names whose values a config treats as secrets (RemoteConfig.secrets).
SENSITIVE_HEADER = re.compile(r"auth|token|secret|key|cookie|signature|session|password",
                               re.IGNORECASE)

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
        secret = str(k) in SECRET_OPTIONS or str(k).startswith("aws_") or str(k) in ("key", "secret")
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

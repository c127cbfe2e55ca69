"""Remote store configuration (``lsio._storage``): URL forms, storage_options spellings and
conflicts, the AWS environment / profile precedence, GCS and http(s) credentials, the
credentials callable with expiry refresh, redaction and pickling.

The package is pure Python; it is loaded from this checkout by path so the tests run whether
or not the installed ``lsio`` (with its compiled ``_core``) is this checkout.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import pickle
import sys
import types
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "python" / "lsio" / "_storage"
_NAME = "lsio_storage_under_test"
if _NAME not in sys.modules:
    _spec = importlib.util.spec_from_file_location(_NAME, _PATH / "__init__.py",
                                                   submodule_search_locations=[str(_PATH)])
    _module = importlib.util.module_from_spec(_spec)
    sys.modules[_NAME] = _module
    _spec.loader.exec_module(_module)
S = sys.modules[_NAME]

ENV_VARS = (
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
    "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3",
    "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "AWS_PROFILE", "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE", "AWS_CA_BUNDLE", "SSL_CERT_FILE", "LSIO_REQUEST_CONCURRENCY",
)
AKID = "AKIAIOSFODNN7EXAMPLE"
SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
NOW = 1_700_000_000.0


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setattr(S, "clock", lambda: NOW)
    return home


def core(url, options=None):
    return S.resolve(url, options).to_core()


def write_aws(home, credentials=None, config=None):
    aws = home / ".aws"
    aws.mkdir(exist_ok=True)
    if credentials is not None:
        (aws / "credentials").write_text(credentials)
    if config is not None:
        (aws / "config").write_text(config)


# ---------------------------------------------------------------------------------------
# is_remote and to_core's shape


@pytest.mark.parametrize("url,expected", [
    ("s3://b/x", True), ("S3://b/x", True), ("gs://b", True), ("GCS://b/x", True),
    ("http://h/x", True), ("HTTPS://h", True), ("file:///x", False), ("/data/x.zarr", False),
    ("x.zarr", False), ("s3:/b", False), ("ftp://h/x", False), (Path("s3://b"), False), (None, False),
])
def test_is_remote(url, expected):
    assert S.is_remote(url) is expected


def test_to_core_has_exactly_the_documented_keys():
    d = core("s3://bucket/a.zarr", {"anon": True})
    assert tuple(d) == S.CORE_KEYS
    assert set(d) == {
        "scheme", "host", "root", "provider", "signing", "region", "service", "access_key_id",
        "secret_access_key", "session_token", "token", "headers", "verify_ssl", "ca_file",
        "request_concurrency", "timeout", "connect_timeout", "retries", "display_url",
        "credentials_expiry", "list_root", "cache_dir", "cache_bytes",
    }
    assert d == {
        "scheme": "https", "host": "bucket.s3.us-east-1.amazonaws.com", "root": "/a.zarr",
        "provider": "s3", "signing": "none", "region": "us-east-1", "service": "s3", "access_key_id": "",
        "secret_access_key": "", "session_token": "", "token": "", "headers": [],
        "verify_ssl": True, "ca_file": "", "request_concurrency": 32, "timeout": 30.0,
        "connect_timeout": 5.0, "retries": 9, "display_url": "s3://bucket/a.zarr",
        "credentials_expiry": 0.0, "list_root": "", "cache_dir": "", "cache_bytes": 0,
    }


def test_list_root_is_the_bucket_listing_path():
    """Virtual-hosted S3 lists at "/", path style at "/bucket" (after an endpoint prefix);
    plain HTTP cannot list (None)."""
    assert core("s3://bucket/a.zarr", {"anon": True})["list_root"] == ""
    assert core("s3://bucket/a.zarr", {"anon": True, "endpoint_url": "http://127.0.0.1:9000"})["list_root"] == "/bucket"
    assert core("s3://bucket/a/b.zarr", {"anon": True, "endpoint_url": "https://proxy/s3"})["list_root"] == "/s3/bucket"
    assert core("gs://bkt/x.zarr", {})["list_root"] == "/bkt"
    assert core("https://host/data/x.zarr", {})["list_root"] is None


def test_resolve_refuses_non_remote_urls():
    with pytest.raises(ValueError, match="not a remote URL"):
        S.resolve("/data/a.zarr", None)
    with pytest.raises(TypeError, match="url must be a str"):
        S.resolve(Path("s3://b"), None)


# ---------------------------------------------------------------------------------------
# s3 URL forms and addressing


@pytest.mark.parametrize("url,host,root,display", [
    ("s3://bucket", "bucket.s3.us-east-1.amazonaws.com", "", "s3://bucket"),
    ("s3://bucket/", "bucket.s3.us-east-1.amazonaws.com", "", "s3://bucket"),
    ("S3://bucket/era5.zarr/", "bucket.s3.us-east-1.amazonaws.com", "/era5.zarr", "s3://bucket/era5.zarr"),
    ("s3://bucket/a/b/c.zarr///", "bucket.s3.us-east-1.amazonaws.com", "/a/b/c.zarr", "s3://bucket/a/b/c.zarr"),
    ("s3://my.bucket/x", "s3.us-east-1.amazonaws.com", "/my.bucket/x", "s3://my.bucket/x"),
    ("s3://My_Bucket/x", "s3.us-east-1.amazonaws.com", "/My_Bucket/x", "s3://My_Bucket/x"),
    ("s3://ab/x", "s3.us-east-1.amazonaws.com", "/ab/x", "s3://ab/x"),  # too short for DNS
    ("s3://bucket/a%20b/é", "bucket.s3.us-east-1.amazonaws.com", "/a%20b/é", "s3://bucket/a%20b/é"),
])
def test_s3_urls_on_aws(url, host, root, display):
    d = core(url, {"anon": True})
    assert (d["scheme"], d["host"], d["root"], d["display_url"]) == ("https", host, root, display)


def test_s3_region_picks_the_aws_host():
    assert core("s3://bucket/x", {"anon": True, "region": "eu-west-1"})["host"] == \
        "bucket.s3.eu-west-1.amazonaws.com"
    assert core("s3://bucket/x", {"anon": True, "region": "cn-north-1"})["host"] == \
        "bucket.s3.cn-north-1.amazonaws.com.cn"


def test_s3_addressing_style():
    assert core("s3://bucket/x", {"anon": True, "addressing_style": "path"})["root"] == "/bucket/x"
    assert core("s3://bucket/x", {"anon": True, "addressing_style": "auto"})["root"] == "/x"
    d = core("s3://bucket/x", {"anon": True, "endpoint_url": "http://minio.local:9000",
                               "addressing_style": "virtual"})
    assert (d["scheme"], d["host"], d["root"]) == ("http", "bucket.minio.local:9000", "/x")
    with pytest.raises(ValueError, match="DNS label"):
        core("s3://my.bucket/x", {"anon": True, "addressing_style": "virtual"})
    with pytest.raises(ValueError, match="not an IP address"):
        core("s3://bucket/x", {"anon": True, "endpoint_url": "http://127.0.0.1:9000",
                               "addressing_style": "virtual"})
    with pytest.raises(ValueError, match="'auto', 'path' or 'virtual'"):
        core("s3://bucket/x", {"anon": True, "addressing_style": "dns"})


@pytest.mark.parametrize("endpoint,scheme,host,root", [
    ("http://localhost:9000", "http", "localhost:9000", "/bucket/x"),
    ("http://LOCALHOST:9000/", "http", "localhost:9000", "/bucket/x"),
    ("https://minio.example.com", "https", "minio.example.com", "/bucket/x"),
    ("https://proxy.example.com/s3/", "https", "proxy.example.com", "/s3/bucket/x"),
    ("http://[::1]:9000", "http", "[::1]:9000", "/bucket/x"),
    ("http://127.0.0.1:9000", "http", "127.0.0.1:9000", "/bucket/x"),
    # A default port is left out, as libcurl leaves it out of the Host header: a SigV4
    # signature over "host:443" would not match the request the server gets.
    ("https://minio.example.com:443", "https", "minio.example.com", "/bucket/x"),
    ("http://127.0.0.1:80/", "http", "127.0.0.1", "/bucket/x"),
    ("https://minio.example.com:80", "https", "minio.example.com:80", "/bucket/x"),
])
def test_s3_custom_endpoints_use_path_style(endpoint, scheme, host, root):
    d = core("s3://bucket/x", {"anon": True, "endpoint_url": endpoint})
    assert (d["scheme"], d["host"], d["root"]) == (scheme, host, root)


@pytest.mark.parametrize("endpoint,match", [
    ("localhost:9000", "must start with http"),
    ("ftp://h", "must start with http"),
    ("http://user:pw@h", "user information"),
    ("http://h/?x=1", "query string"),
    ("http://h/#f", "fragment"),
    ("http://h:99999", "not a valid URL"),
    ("http://", "no host"),
])
def test_s3_bad_endpoints(endpoint, match):
    with pytest.raises(ValueError, match=match):
        core("s3://bucket/x", {"anon": True, "endpoint_url": endpoint})


def test_s3_endpoint_type():
    with pytest.raises(TypeError, match="endpoint_url"):
        core("s3://bucket/x", {"anon": True, "endpoint_url": 9000})


def test_s3_endpoint_precedence(monkeypatch, clean_env):
    write_aws(clean_env, config="[default]\nendpoint_url = http://profile:1\n")
    assert core("s3://b/x", {"anon": True})["host"] == "profile:1"
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://global:2")
    assert core("s3://b/x", {"anon": True})["host"] == "global:2"
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://s3only:3")
    assert core("s3://b/x", {"anon": True})["host"] == "s3only:3"
    assert core("s3://b/x", {"anon": True, "client_kwargs": {"endpoint_url": "http://ck:4"}})["host"] == "ck:4"
    assert core("s3://b/x", {"anon": True, "endpoint_url": "http://opt:5"})["host"] == "opt:5"
    monkeypatch.setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true")
    assert core("s3://bucket/x", {"anon": True})["host"] == "bucket.s3.us-east-1.amazonaws.com"
    # Endpoints from the environment do not apply to gs:// or http(s)://.
    assert core("gs://b/x")["host"] == "storage.googleapis.com"


def test_use_ssl():
    assert core("s3://bucket/x", {"anon": True, "use_ssl": False})["scheme"] == "http"
    assert core("s3://bucket/x", {"anon": True, "use_ssl": True})["scheme"] == "https"
    # An endpoint's own scheme wins, as in botocore.
    assert core("s3://b/x", {"anon": True, "use_ssl": False,
                             "endpoint_url": "https://h"})["scheme"] == "https"
    assert core("s3://b/x", {"anon": True, "client_kwargs": {"use_ssl": False}})["scheme"] == "http"
    assert core("gs://b/x", {"use_ssl": False})["scheme"] == "http"
    with pytest.raises(TypeError, match="use_ssl must be a bool"):
        core("s3://b/x", {"use_ssl": "no"})


@pytest.mark.parametrize("url,match", [
    ("s3://", "empty bucket"),
    ("s3:///x", "empty bucket"),
    ("gs:///x", "empty bucket"),
    ("s3://b/a/../c", "'..' path segments"),
    ("s3://b/./c", "'.' path segments"),
    ("s3://b/a//c", "empty path segment"),
    ("s3://b/x?versionId=3", "query string"),
    ("gs://b/x?alt=media", "query string"),
    ("s3://b/x#frag", "fragment"),
    ("s3://b/x\nmore", "control characters"),
    ("s3://user:pw@b/x", "user information"),
    ("s3://bu cket/x", "invalid bucket"),
    ("s3://b:9000/x", "invalid bucket"),
])
def test_bad_bucket_urls(url, match):
    with pytest.raises(ValueError, match=match):
        core(url, {"anon": True} if url.startswith("s3") else None)


def test_bad_url_messages_hide_userinfo_and_queries():
    with pytest.raises(ValueError) as e:
        core("s3://b/x?X-Amz-Signature=deadbeef", {"anon": True})
    assert "deadbeef" not in str(e.value)
    with pytest.raises(ValueError) as e:
        core("s3://AKIA:s3cr3t@b/x", {"anon": True})
    assert "s3cr3t" not in str(e.value)
    with pytest.raises(ValueError) as e:
        core("https://u:s3cr3t@h/x?token=deadbeef")
    assert "s3cr3t" not in str(e.value) and "deadbeef" not in str(e.value)


# ---------------------------------------------------------------------------------------
# gs:// and gcs://


@pytest.mark.parametrize("url,root,display", [
    ("gs://bucket", "/bucket", "gs://bucket"),
    ("gs://bucket/era5.zarr/", "/bucket/era5.zarr", "gs://bucket/era5.zarr"),
    ("GCS://bucket/a/b", "/bucket/a/b", "gcs://bucket/a/b"),
    ("gs://my.bucket_1/a", "/my.bucket_1/a", "gs://my.bucket_1/a"),
])
def test_gcs_urls(url, root, display):
    d = core(url)
    assert (d["scheme"], d["host"], d["root"], d["display_url"]) == \
        ("https", "storage.googleapis.com", root, display)
    assert (d["signing"], d["region"], d["service"]) == ("none", "auto", "s3")


def test_gcs_virtual_and_custom_endpoint():
    d = core("gs://bucket/x", {"addressing_style": "virtual"})
    assert (d["host"], d["root"]) == ("bucket.storage.googleapis.com", "/x")
    d = core("gs://bucket/x", {"endpoint_url": "http://localhost:4443"})
    assert (d["scheme"], d["host"], d["root"]) == ("http", "localhost:4443", "/bucket/x")


def test_gcs_credentials():
    cfg = S.resolve("gs://b/x", None)
    assert (cfg.signing, cfg.credential_source) == ("none", "anonymous")
    assert S.resolve("gs://b/x", {"token": "anon"}).signing == "none"
    d = core("gs://b/x", {"token": "ya29.token"})
    assert (d["signing"], d["token"], d["access_key_id"]) == ("bearer", "ya29.token", "")
    d = core("gs://b/x", {"key": "GOOG1EXAMPLE", "secret": "hmacsecret"})
    assert (d["signing"], d["region"], d["service"]) == ("sigv4", "auto", "s3")
    assert (d["access_key_id"], d["secret_access_key"], d["session_token"]) == \
        ("GOOG1EXAMPLE", "hmacsecret", "")
    d = core("gs://b/x", {"access_key_id": "GOOG1E", "secret_access_key": "s", "region": "us-east1"})
    assert d["region"] == "us-east1"


def test_gcs_does_not_read_aws_environment(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", AKID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    d = core("gs://b/x")
    assert (d["signing"], d["region"]) == ("none", "auto")


@pytest.mark.parametrize("options,error,match", [
    ({"token": "google_default"}, ValueError, "GoogleAuthCredentials"),
    ({"token": "cloud"}, ValueError, "gcsfs token modes"),
    ({"token": "/secrets/sa.json"}, ValueError, "service account"),
    ({"token": {"type": "service_account"}}, TypeError, "bearer token or 'anon'"),
    ({"token": "anon", "anonymous": False}, ValueError, "anonymous=False"),
    ({"token": "t", "key": "k", "secret": "s"}, ValueError, "conflicts with HMAC"),
    ({"key": "k"}, ValueError, "both access_key_id"),
    ({"anon": True, "token": "t"}, ValueError, "anonymous=True conflicts with token"),
    ({"anonymous": False}, ValueError, "no GCS credentials"),
    ({"profile": "p"}, ValueError, "does not apply to gs://"),
    ({"session_token": "t"}, ValueError, "does not apply to gs://"),
    ({"client_kwargs": {"aws_session_token": "t"}}, ValueError, "does not apply to gs://"),
])
def test_gcs_invalid(options, error, match):
    with pytest.raises(error, match=match):
        core("gs://b/x", options)


def test_gcs_requester_pays():
    d = core("gs://b/x", {"requester_pays": True, "project": "my-proj", "token": "t"})
    assert d["headers"] == [("x-goog-user-project", "my-proj")]
    assert core("gs://b/x", {"requester_pays": "other"})["headers"] == [("x-goog-user-project", "other")]
    assert core("gs://b/x", {"requester_pays": False, "project": "p"})["headers"] == []
    with pytest.raises(ValueError, match="needs project"):
        core("gs://b/x", {"requester_pays": True})
    with pytest.raises(ValueError, match="different projects"):
        core("gs://b/x", {"requester_pays": "a", "project": "b"})
    with pytest.raises(TypeError, match="requester_pays"):
        core("gs://b/x", {"requester_pays": 1})


# ---------------------------------------------------------------------------------------
# http(s)


@pytest.mark.parametrize("url,scheme,host,root,display", [
    ("https://example.com", "https", "example.com", "", "https://example.com"),
    ("https://example.com/", "https", "example.com", "", "https://example.com"),
    ("HTTP://Example.COM:8080/data/a.zarr/", "http", "example.com:8080", "/data/a.zarr",
     "http://example.com:8080/data/a.zarr"),
    ("https://h/a%20b/%C3%A9/c%2Bd", "https", "h", "/a b/é/c+d", "https://h/a%20b/%C3%A9/c%2Bd"),
    ("http://[2001:db8::1]/x", "http", "[2001:db8::1]", "/x", "http://[2001:db8::1]/x"),
    ("http://[::1]:8080/x", "http", "[::1]:8080", "/x", "http://[::1]:8080/x"),
    ("http://10.0.0.1:80/x", "http", "10.0.0.1", "/x", "http://10.0.0.1/x"),  # a default port is left out
])
def test_http_urls(url, scheme, host, root, display):
    d = core(url)
    assert (d["scheme"], d["host"], d["root"], d["display_url"]) == (scheme, host, root, display)
    assert (d["signing"], d["region"], d["token"], d["headers"]) == ("none", "", "", [])


@pytest.mark.parametrize("url,match", [
    ("https://h/x?sig=abc", "query string"),
    ("https://h/x?", "query string"),
    ("https://h/x#frag", "fragment"),
    ("https://h/a%2Fb", "encodes a '/'"),
    ("https://h/a/%2E%2E/b", "'..' path segments"),
    ("https://h/a/../b", "'..' path segments"),
    ("https://h/a//b", "empty path segment"),
    ("https://h/a%0Ab", "control characters"),
    ("https://h/%FF", "not valid UTF-8"),
    ("https://h:notaport/x", "not a valid URL"),
    ("https:///x", "no host"),
    ("https://h/a b", "whitespace"),
    ("https://bücher.example/x", "punycode"),
    ("https://h%41/x", "invalid host name"),
    ("https://-h/x", "invalid host name"),
])
def test_http_bad_urls(url, match):
    with pytest.raises(ValueError, match=match):
        core(url)


def test_http_headers_and_token():
    d = core("https://h/x", {"headers": {"X-Api-Key": "k1", "User-Agent": "me"}})
    assert d["headers"] == [("X-Api-Key", "k1"), ("User-Agent", "me")]
    assert d["signing"] == "none"
    d = core("https://h/x", {"headers": [("X-A", "1"), ["X-B", "2\tb"]]})
    assert d["headers"] == [("X-A", "1"), ("X-B", "2\tb")]
    d = core("https://h/x", {"token": "abc"})
    assert (d["signing"], d["token"], d["headers"]) == ("bearer", "abc", [])
    cfg = S.resolve("https://h/x", {"headers": {"Authorization": "Bearer abc"}})
    assert (cfg.signing, cfg.credential_source) == ("none", "storage_options")
    # aiohttp-style client_kwargs headers (fsspec HTTPFileSystem)
    assert core("https://h/x", {"client_kwargs": {"headers": {"X-A": "1"}}})["headers"] == [("X-A", "1")]


def test_http_userinfo_becomes_basic_auth():
    cfg = S.resolve("https://al%40ice:p%3Ass@h/x", None)
    assert cfg.headers == (("Authorization", "Basic YWxAaWNlOnA6c3M="),)  # "al@ice:p:ss"
    assert cfg.display_url == "https://h/x"
    assert cfg.credential_source == "url"
    assert "YWxA" not in repr(cfg)
    with pytest.raises(ValueError, match="conflicts with storage_options token"):
        core("https://u:p@h/x", {"token": "t"})
    with pytest.raises(ValueError, match="anonymous=True"):
        core("https://u:p@h/x", {"anon": True})
    with pytest.raises(ValueError, match="'authorization' conflicts .*user:password in the URL"):
        core("https://u:p@h/x", {"headers": {"authorization": "x"}})


@pytest.mark.parametrize("options,error,match", [
    ({"endpoint_url": "http://x"}, ValueError, "does not apply to http"),
    ({"region": "us-east-1"}, ValueError, "does not apply to http"),
    ({"key": "k", "secret": "s"}, ValueError, "does not apply to http"),
    ({"profile": "p"}, ValueError, "does not apply to http"),
    ({"requester_pays": True}, ValueError, "does not apply to http"),
    ({"token": "t", "headers": {"Authorization": "Bearer x"}}, ValueError, "conflicts"),
    ({"token": "t", "anon": True}, ValueError, "anonymous=True conflicts"),
    ({"anonymous": False}, ValueError, "anonymous=False"),
    ({"token": 3}, TypeError, "token must be a str"),
    ({"token": ""}, ValueError, "must not be empty"),
])
def test_http_invalid(options, error, match):
    with pytest.raises(error, match=match):
        core("https://h/x", options)


@pytest.mark.parametrize("headers,error,match", [
    ({"X-A": "a\r\nX-Evil: 1"}, ValueError, "CR, LF, NUL"),
    ({"X-A": "a\nb"}, ValueError, "CR, LF, NUL"),
    ({"X-A": "a\x00b"}, ValueError, "CR, LF, NUL"),
    ({"X-A": "é"}, ValueError, "non-ASCII"),
    ({"X A": "1"}, ValueError, "invalid header name"),
    ({"X-A:": "1"}, ValueError, "invalid header name"),
    ({"": "1"}, ValueError, "invalid header name"),
    ({"X-A\r\n": "1"}, ValueError, "invalid header name"),
    ({"X-A": 1}, TypeError, "must be str"),
    ({b"X-A": "1"}, TypeError, "must be str"),
    ([("X-A", "1"), ("x-a", "2")], ValueError, "given twice"),
    ([("X-A",)], TypeError, "pairs"),
    ("X-A: 1", TypeError, "must be a dict"),
    ({"Host": "evil"}, ValueError, "set by lsio"),
    ({"Range": "bytes=0-1"}, ValueError, "set by lsio"),
    ({"Content-Length": "1"}, ValueError, "set by lsio"),
])
def test_header_validation(headers, error, match):
    with pytest.raises(error, match=match):
        core("https://h/x", {"headers": headers})


def test_headers_reserved_by_signing():
    options = {"key": AKID, "secret": SECRET}
    for name in ("Authorization", "x-amz-date", "X-Amz-Content-SHA256", "x-amz-security-token"):
        with pytest.raises(ValueError, match="SigV4|sigv4 signing"):
            core("s3://b/x", {**options, "headers": {name: "v"}})
    # Unsigned requests may carry an Authorization header of their own.
    assert core("s3://b/x", {"anon": True, "headers": {"Authorization": "x"}})["headers"] == \
        [("Authorization", "x")]
    assert core("s3://b/x", {**options, "headers": {"x-amz-meta-a": "1"}})["headers"] == \
        [("x-amz-meta-a", "1")]


# ---------------------------------------------------------------------------------------
# storage_options: types, aliases, conflicts, unknown keys


def test_storage_options_must_be_a_mapping():
    with pytest.raises(TypeError, match="storage_options must be a dict"):
        core("s3://b/x", [("anon", True)])
    with pytest.raises(TypeError, match="keys must be str"):
        core("s3://b/x", {1: True})


def test_unknown_keys_list_the_known_ones():
    with pytest.raises(ValueError, match="unknown storage_options key 'anonymus'") as e:
        core("s3://b/x", {"anonymus": True})
    for known in ("anon", "anonymous", "endpoint_url", "request_concurrency", "credentials"):
        assert known in str(e.value)
    with pytest.raises(ValueError, match=r"client_kwargs\['region'\] is not supported; known: endpoint_url"):
        core("s3://b/x", {"client_kwargs": {"region": "x"}})
    with pytest.raises(TypeError, match="client_kwargs must be a dict"):
        core("s3://b/x", {"client_kwargs": "x"})


@pytest.mark.parametrize("key,match", [
    ("config_kwargs", "timeout, connect_timeout and retries"),
    ("s3_additional_kwargs", "headers"),
    ("session", "Boto3Credentials"),
    ("max_concurrency", "request_concurrency"),
])
def test_refused_keys(key, match):
    with pytest.raises(ValueError, match=match):
        core("s3://b/x", {key: {}})


def test_ignored_and_none_keys():
    d = core("s3://b/x", {"anon": True, "default_fill_cache": False, "use_listings_cache": False,
                          "skip_instance_cache": True, "default_block_size": 1 << 20,
                          "version_aware": False, "key": None, "secret": None, "token": None,
                          "client_kwargs": {"region_name": None}})
    assert d["signing"] == "none"
    with pytest.raises(ValueError, match="version_aware=True"):
        core("s3://b/x", {"version_aware": True})
    assert core("https://h/x", {"block_size": 0, "simple_links": True, "encoded": True})["host"] == "h"


@pytest.mark.parametrize("options,canon", [
    ({"key": AKID, "access_key_id": "AKIAOTHER0000000000X", "secret": SECRET}, "access_key_id"),
    ({"key": AKID, "secret": SECRET, "secret_access_key": "other"}, "secret_access_key"),
    ({"key": AKID, "secret": SECRET, "token": "t1", "session_token": "t2"}, "session_token"),
    ({"key": AKID, "secret": SECRET, "client_kwargs": {"aws_session_token": "t2"}, "token": "t1"},
     "session_token"),
    ({"anon": True, "anonymous": False}, "anonymous"),
    ({"anon": True, "endpoint_url": "http://a", "client_kwargs": {"endpoint_url": "http://b"}},
     "endpoint_url"),
    ({"anon": True, "region": "a", "client_kwargs": {"region_name": "b"}}, "region"),
    ({"anon": True, "verify_ssl": True, "client_kwargs": {"verify": False}}, "verify_ssl"),
    ({"anon": True, "ca_file": "/a", "ca_bundle": "/b"}, "ca_file"),
])
def test_conflicting_spellings(options, canon):
    with pytest.raises(ValueError, match=f"give {canon} twice with different values") as e:
        core("s3://b/x", options)
    for secret in (SECRET, "other", "t1", "t2", AKID, "AKIAOTHER0000000000X"):
        assert secret not in str(e.value)


def test_equal_spellings_are_fine():
    d = core("s3://b/x", {"key": AKID, "access_key_id": AKID, "secret": SECRET,
                          "client_kwargs": {"aws_secret_access_key": SECRET}})
    assert (d["access_key_id"], d["secret_access_key"]) == (AKID, SECRET)
    assert core("s3://b/x", {"anon": True, "anonymous": True})["signing"] == "none"


@pytest.mark.parametrize("options,error,match", [
    ({"anon": "yes"}, TypeError, "anon must be a bool"),
    ({"anon": 1}, TypeError, "anon must be a bool"),
    ({"verify_ssl": "false"}, TypeError, "verify_ssl must be a bool"),
    ({"region": 1}, TypeError, "region must be a str"),
    ({"region": ""}, ValueError, "must not be empty"),
    ({"region": "us east"}, ValueError, "invalid region"),
    ({"region": "us/east"}, ValueError, "invalid region"),
    ({"profile": 3}, TypeError, "profile must be a str"),
    ({"key": 3, "secret": "s"}, TypeError, "key must be a str"),
    ({"request_concurrency": 0}, ValueError, r"in 1\.\.4096"),
    ({"request_concurrency": 5000}, ValueError, r"in 1\.\.4096"),
    ({"request_concurrency": 2.0}, TypeError, "must be an integer"),
    ({"request_concurrency": True}, TypeError, "must be an integer"),
    ({"retries": -1}, ValueError, ">= 0"),
    ({"retries": "3"}, TypeError, "must be an integer"),
    ({"timeout": 0}, ValueError, "> 0"),
    ({"timeout": float("inf")}, ValueError, "finite"),
    ({"timeout": float("nan")}, ValueError, "finite"),
    ({"timeout": "30"}, TypeError, "number of seconds"),
    ({"connect_timeout": -1}, ValueError, "> 0"),
    ({"connect_timeout": True}, TypeError, "number of seconds"),
    ({"credentials": "boto3"}, TypeError, "must be callable"),
    ({"ca_file": 3}, TypeError, "ca_file must be a str"),
    ({"addressing_style": 1}, TypeError, "addressing_style must be a str"),
    ({"requester_pays": "yes", "key": "k", "secret": "s"}, TypeError, "requester_pays must be a bool"),
])
def test_bad_option_values(options, error, match):
    with pytest.raises(error, match=match):
        core("s3://b/x", {"anon": True, **options} if "key" not in options else options)


def test_transport_options():
    d = core("s3://b/x", {"anon": True, "request_concurrency": 8, "timeout": 2, "connect_timeout": 0.5,
                          "retries": 0, "verify_ssl": False})
    assert (d["request_concurrency"], d["timeout"], d["connect_timeout"], d["retries"],
            d["verify_ssl"]) == (8, 2.0, 0.5, 0, False)
    assert isinstance(d["timeout"], float)
    assert core("s3://b/x", {"anon": True, "client_kwargs": {"verify": False}})["verify_ssl"] is False


def test_request_concurrency_environment(monkeypatch):
    monkeypatch.setenv("LSIO_REQUEST_CONCURRENCY", "64")
    assert core("https://h/x")["request_concurrency"] == 64
    assert core("https://h/x", {"request_concurrency": 4})["request_concurrency"] == 4
    for bad in ("0", "x", "1.5", "99999"):
        monkeypatch.setenv("LSIO_REQUEST_CONCURRENCY", bad)
        with pytest.raises(ValueError, match="LSIO_REQUEST_CONCURRENCY"):
            core("https://h/x")


def test_ca_file(monkeypatch, tmp_path):
    a, b, c = (tmp_path / n for n in ("a.pem", "b.pem", "c.pem"))
    for f in (a, b, c):
        f.write_text("pem")
    assert core("https://h/x")["ca_file"] == ""
    monkeypatch.setenv("SSL_CERT_FILE", str(c))
    assert core("https://h/x")["ca_file"] == str(c)
    assert core("s3://b/x", {"anon": True})["ca_file"] == str(c)
    monkeypatch.setenv("AWS_CA_BUNDLE", str(b))
    assert core("s3://b/x", {"anon": True})["ca_file"] == str(b)
    assert core("gs://b/x")["ca_file"] == str(c)  # AWS_CA_BUNDLE is for s3 only
    assert core("s3://b/x", {"anon": True, "ca_file": a})["ca_file"] == str(a)  # PathLike
    assert core("s3://b/x", {"anon": True, "ca_bundle": str(a)})["ca_file"] == str(a)
    assert core("s3://b/x", {"anon": True, "client_kwargs": {"verify": str(a)}})["ca_file"] == str(a)
    assert core("s3://b/x", {"anon": True, "ca_bundle": a})["ca_file"] == str(a)
    assert core("s3://b/x", {"anon": True, "client_kwargs": {"verify": a}})["ca_file"] == str(a)
    with pytest.raises(ValueError, match=r"from storage_options ca_file\) does not exist"):
        core("s3://b/x", {"anon": True, "ca_file": str(tmp_path / "missing.pem")})
    monkeypatch.setenv("AWS_CA_BUNDLE", str(tmp_path / "missing.pem"))
    with pytest.raises(ValueError, match="from AWS_CA_BUNDLE"):
        core("s3://b/x", {"anon": True})


# ---------------------------------------------------------------------------------------
# S3 credentials: options > environment > profile > anonymous


def test_s3_anonymous_by_default():
    cfg = S.resolve("s3://b/x", None)
    assert (cfg.signing, cfg.credential_source, cfg.region) == ("none", "anonymous", "us-east-1")


def test_s3_keys_from_options_and_aliases():
    for options in (
        {"access_key_id": AKID, "secret_access_key": SECRET, "session_token": "tok"},
        {"key": AKID, "secret": SECRET, "token": "tok"},
        {"client_kwargs": {"aws_access_key_id": AKID, "aws_secret_access_key": SECRET,
                           "aws_session_token": "tok"}},
    ):
        cfg = S.resolve("s3://b/x", options)
        d = cfg.to_core()
        assert (d["signing"], d["access_key_id"], d["secret_access_key"], d["session_token"]) == \
            ("sigv4", AKID, SECRET, "tok")
        assert cfg.credential_source == "storage_options"


@pytest.mark.parametrize("options,match", [
    ({"key": AKID}, "both access_key_id"),
    ({"secret": SECRET}, "both access_key_id"),
    ({"token": "tok"}, "session_token needs both"),
    ({"anon": True, "key": AKID, "secret": SECRET}, "anonymous=True conflicts with key, secret"),
    ({"anon": True, "profile": "p"}, "anonymous=True conflicts with profile"),
    ({"credentials": lambda: {}, "key": AKID}, "credentials .a callable. conflicts with key"),
    ({"credentials": lambda: {}, "profile": "p"}, "conflicts with profile"),
])
def test_s3_credential_conflicts(options, match):
    with pytest.raises(ValueError, match=match):
        core("s3://b/x", options)


def test_s3_environment(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", AKID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_SESSION_TOKEN", "envtok")
    cfg = S.resolve("s3://b/x", None)
    assert (cfg.access_key_id, cfg.secret_access_key, cfg.session_token, cfg.credential_source) == \
        (AKID, SECRET, "envtok", "environment")
    # storage_options beat the environment
    cfg = S.resolve("s3://b/x", {"key": "AKIAOPTIONS000000000", "secret": "optsecret"})
    assert (cfg.access_key_id, cfg.session_token, cfg.credential_source) == \
        ("AKIAOPTIONS000000000", "", "storage_options")
    assert S.resolve("s3://b/x", {"anon": True}).signing == "none"
    monkeypatch.delenv("AWS_SESSION_TOKEN")
    monkeypatch.setenv("AWS_SECURITY_TOKEN", "legacy")
    assert S.resolve("s3://b/x", None).session_token == "legacy"
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(ValueError, match="must be set together"):
        S.resolve("s3://b/x", None)


def test_s3_profile_files(monkeypatch, clean_env, tmp_path):
    write_aws(clean_env,
              credentials="[default]\naws_access_key_id = AKIADEFAULT000000000\n"
                          "aws_secret_access_key = defsecret\n"
                          "[dev]\naws_access_key_id = AKIADEV0000000000000\n"
                          "aws_secret_access_key = devsecret\naws_session_token = devtok\n",
              config="[default]\nregion = eu-central-1\n"
                     "[profile dev]\nregion = ap-south-1\n"
                     "[profile cfgonly]\naws_access_key_id = AKIACFG0000000000000\n"
                     "aws_secret_access_key = cfgsecret\n")
    cfg = S.resolve("s3://bucket/x", None)
    assert (cfg.access_key_id, cfg.region, cfg.credential_source, cfg.host) == \
        ("AKIADEFAULT000000000", "eu-central-1", "profile:default",
         "bucket.s3.eu-central-1.amazonaws.com")
    cfg = S.resolve("s3://b/x", {"profile": "dev"})
    assert (cfg.access_key_id, cfg.secret_access_key, cfg.session_token, cfg.region,
            cfg.credential_source) == ("AKIADEV0000000000000", "devsecret", "devtok", "ap-south-1",
                                       "profile:dev")
    monkeypatch.setenv("AWS_PROFILE", "cfgonly")
    cfg = S.resolve("s3://b/x", None)
    assert (cfg.access_key_id, cfg.credential_source, cfg.region) == \
        ("AKIACFG0000000000000", "profile:cfgonly", "us-east-1")
    # The profile option beats AWS_PROFILE.
    assert S.resolve("s3://b/x", {"profile": "dev"}).credential_source == "profile:dev"
    # Environment keys beat the profile (AWS_PROFILE or default) ...
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", AKID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    assert S.resolve("s3://b/x", None).credential_source == "environment"
    # ... but not a profile named in storage_options (as boto3.Session(profile_name=...)).
    assert S.resolve("s3://b/x", {"profile": "dev"}).credential_source == "profile:dev"
    # Options beat everything.
    assert S.resolve("s3://b/x", {"profile": "dev", "key": "AKIAX", "secret": "s"}).access_key_id == "AKIAX"


def test_s3_profile_file_locations(monkeypatch, tmp_path):
    creds = tmp_path / "elsewhere-credentials"
    config = tmp_path / "elsewhere-config"
    creds.write_text("[p]\naws_access_key_id = AKIAFILE000000000000\naws_secret_access_key = s\n")
    config.write_text("[profile p]\nregion = sa-east-1\naws_access_key_id = AKIACONFIG0000000000\n"
                      "aws_secret_access_key = c\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(creds))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    cfg = S.resolve("s3://b/x", {"profile": "p"})
    # The credentials file beats the config file; the region comes from the config file.
    assert (cfg.access_key_id, cfg.region) == ("AKIAFILE000000000000", "sa-east-1")


def test_s3_missing_profiles(monkeypatch, clean_env):
    # No files and the default profile: anonymous.
    assert S.resolve("s3://b/x", None).credential_source == "anonymous"
    with pytest.raises(ValueError, match="profile 'nope' .from storage_options profile. is in neither"):
        S.resolve("s3://b/x", {"profile": "nope"})
    monkeypatch.setenv("AWS_PROFILE", "nope")
    with pytest.raises(ValueError, match="from AWS_PROFILE"):
        S.resolve("s3://b/x", None)
    # A region from the environment means the profile is only consulted for credentials.
    monkeypatch.setenv("AWS_REGION", "us-west-2")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", AKID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://h")
    assert S.resolve("s3://b/x", None).credential_source == "environment"


@pytest.mark.parametrize("setting", [
    "role_arn = arn:aws:iam::1:role/r\nsource_profile = default",
    "sso_session = corp\nsso_account_id = 1",
    "sso_start_url = https://corp.awsapps.com/start",
    "web_identity_token_file = /var/run/token\nrole_arn = arn:aws:iam::1:role/r",
    "credential_source = Ec2InstanceMetadata",
    "credential_process = /usr/bin/get-creds",
])
def test_s3_dynamic_profiles_point_to_boto3(clean_env, setting):
    write_aws(clean_env, config=f"[profile corp]\nregion = us-west-2\n{setting}\n")
    with pytest.raises(ValueError, match=r"Boto3Credentials\('corp'\).*profile_name='corp'"):
        S.resolve("s3://b/x", {"profile": "corp"})
    # Anonymous access never looks at the profile's credentials.
    cfg = S.resolve("s3://b/x", {"profile": None, "anon": True})
    assert cfg.signing == "none"


def test_s3_static_keys_beat_credential_process(clean_env):
    write_aws(clean_env, credentials="[p]\naws_access_key_id = AKIASTATIC0000000000\n"
                                     "aws_secret_access_key = s\n",
              config="[profile p]\ncredential_process = /bin/false\n")
    assert S.resolve("s3://b/x", {"profile": "p"}).access_key_id == "AKIASTATIC0000000000"


def test_s3_partial_or_broken_profile(clean_env):
    write_aws(clean_env, credentials="[default]\naws_access_key_id = AKIAONLY000000000000\n")
    with pytest.raises(ValueError, match="only one of aws_access_key_id"):
        S.resolve("s3://b/x", None)
    write_aws(clean_env, credentials="this is not an ini file\n")
    with pytest.raises(ValueError, match="cannot parse the AWS file"):
        S.resolve("s3://b/x", None)


def test_s3_anonymous_false_requires_credentials(monkeypatch):
    with pytest.raises(ValueError, match="anonymous=False, but no AWS credentials"):
        S.resolve("s3://b/x", {"anon": False})
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", AKID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    assert S.resolve("s3://b/x", {"anon": False}).signing == "sigv4"


def test_s3_region_order(monkeypatch, clean_env):
    write_aws(clean_env, config="[default]\nregion = ap-northeast-1\n")
    assert core("s3://b/x")["region"] == "ap-northeast-1"
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-3")
    assert core("s3://b/x")["region"] == "eu-west-3"
    monkeypatch.setenv("AWS_REGION", "eu-west-2")
    assert core("s3://b/x")["region"] == "eu-west-2"
    assert core("s3://b/x", {"client_kwargs": {"region_name": "us-west-1"}})["region"] == "us-west-1"
    assert core("s3://b/x", {"region": "us-east-2"})["region"] == "us-east-2"
    monkeypatch.setenv("AWS_REGION", "bad region")
    with pytest.raises(ValueError, match="invalid AWS region"):
        core("s3://b/x")


def test_s3_requester_pays(monkeypatch):
    d = core("s3://b/x", {"key": AKID, "secret": SECRET, "requester_pays": True})
    assert d["headers"] == [("x-amz-request-payer", "requester")]
    assert core("s3://b/x", {"key": AKID, "secret": SECRET, "requester_pays": False})["headers"] == []
    with pytest.raises(ValueError, match="needs credentials"):
        core("s3://b/x", {"anon": True, "requester_pays": True})
    with pytest.raises(ValueError, match="also set by lsio"):
        core("s3://b/x", {"key": AKID, "secret": SECRET, "requester_pays": True,
                          "headers": {"X-Amz-Request-Payer": "requester"}})


# ---------------------------------------------------------------------------------------
# The credentials callable


class Clock:
    def __init__(self, now):
        self.now = now

    def __call__(self):
        return self.now


def counting(results):
    """A provider returning results[0], results[1], ... and counting its calls."""
    def provider():
        provider.calls += 1
        return results[min(provider.calls - 1, len(results) - 1)]
    provider.calls = 0
    return provider


def test_callable_mapping_with_expiry_refresh(monkeypatch):
    clock = Clock(NOW)
    monkeypatch.setattr(S, "clock", clock)
    provider = counting([
        {"aws_access_key_id": "ASIAONE0000000000000", "aws_secret_access_key": "s1",
         "token": "t1", "expiry": NOW + 3600},
        {"access_key_id": "ASIATWO0000000000000", "secret_access_key": "s2",
         "session_token": "t2", "expiry": dt.datetime.fromtimestamp(NOW + 7200, dt.timezone.utc)},
    ])
    cfg = S.resolve("s3://b/x", {"credentials": provider})
    assert provider.calls == 1
    assert (cfg.signing, cfg.access_key_id, cfg.session_token, cfg.credentials_expiry,
            cfg.credential_source) == ("sigv4", "ASIAONE0000000000000", "t1", NOW + 3600,
                                       "credentials callable")
    assert S.refresh_if_needed(cfg) is None
    clock.now = NOW + 3600 - S.REFRESH_MARGIN - 1
    assert cfg.refresh_if_needed() is None
    assert provider.calls == 1
    clock.now = NOW + 3600 - S.REFRESH_MARGIN
    new = S.refresh_if_needed(cfg)
    assert provider.calls == 2
    assert (new.access_key_id, new.secret_access_key, new.session_token, new.credentials_expiry) == \
        ("ASIATWO0000000000000", "s2", "t2", NOW + 7200)
    assert new.to_core()["host"] == cfg.to_core()["host"]
    assert S.refresh_if_needed(new, now=NOW + 7200 - 301) is None
    assert S.refresh_if_needed(new, now=NOW + 7200 - 299) is not None
    assert provider.calls == 3
    # Forced refresh (after an ExpiredToken response).
    assert S.refresh(new).access_key_id == "ASIATWO0000000000000"
    assert provider.calls == 4


def test_callable_without_expiry_is_never_refreshed():
    provider = counting([{"access_key_id": "AKIA", "secret_access_key": "s"}])
    cfg = S.resolve("s3://b/x", {"credentials": provider})
    assert cfg.credentials_expiry == 0.0
    assert S.refresh_if_needed(cfg, now=NOW + 1e9) is None
    assert provider.calls == 1
    static = S.resolve("s3://b/x", {"key": AKID, "secret": SECRET})
    assert static.refresh_if_needed() is None and static.refresh() is static


@pytest.mark.parametrize("expiry,seconds", [
    (NOW + 60, NOW + 60),
    (int(NOW) + 60, NOW + 60),
    (dt.datetime.fromtimestamp(NOW + 60, dt.timezone.utc), NOW + 60),
    (dt.datetime.fromtimestamp(NOW + 60, dt.timezone(dt.timedelta(hours=5))), NOW + 60),
    (dt.datetime.fromtimestamp(NOW + 60, dt.timezone.utc).replace(tzinfo=None), NOW + 60),  # naive = UTC
    (dt.datetime.fromtimestamp(NOW + 60, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), NOW + 60),
    (dt.datetime.fromtimestamp(NOW + 60, dt.timezone.utc).isoformat(), NOW + 60),
    (None, 0.0),
])
def test_expiry_forms(expiry, seconds):
    cfg = S.resolve("gs://b/x", {"credentials": lambda: {"token": "t", "expiry": expiry}})
    assert cfg.credentials_expiry == pytest.approx(seconds)


def test_credential_process_json_shape():
    out = {"Version": 1, "AccessKeyId": "ASIAPROC000000000000", "SecretAccessKey": "s",
           "SessionToken": "t", "Expiration": "2030-01-01T00:00:00Z"}
    cfg = S.resolve("s3://b/x", {"credentials": lambda: out})
    assert (cfg.access_key_id, cfg.session_token) == ("ASIAPROC000000000000", "t")
    assert cfg.credentials_expiry == dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc).timestamp()


def test_callable_boto3_credentials():
    import botocore.credentials as bc

    static = bc.Credentials(AKID, SECRET, "tok")
    cfg = S.resolve("s3://b/x", {"credentials": lambda: static})
    assert (cfg.access_key_id, cfg.secret_access_key, cfg.session_token, cfg.credentials_expiry) == \
        (AKID, SECRET, "tok", 0.0)
    # A Credentials object may be given directly, too.
    assert S.resolve("s3://b/x", {"credentials": static}).access_key_id == AKID

    expiry = dt.datetime.fromtimestamp(NOW + 3600, dt.timezone.utc)
    refreshable = bc.RefreshableCredentials(
        "ASIAREFRESH000000000", "s", "t", expiry,
        refresh_using=lambda: {"access_key": "x", "secret_key": "y", "token": "z",
                               "expiry_time": expiry.isoformat()},
        method="test", time_fetcher=lambda: dt.datetime.fromtimestamp(NOW, dt.timezone.utc))
    cfg = S.resolve("s3://b/x", {"credentials": lambda: refreshable})
    assert cfg.access_key_id == "ASIAREFRESH000000000"
    assert cfg.credentials_expiry == NOW + 3600


class GoogleStyle:
    def __init__(self, token, expiry):
        self.token, self.expiry = token, expiry


def test_callable_google_auth_style():
    expiry = dt.datetime.fromtimestamp(NOW + 3600, dt.timezone.utc).replace(tzinfo=None)
    cfg = S.resolve("gs://b/x", {"credentials": lambda: GoogleStyle("ya29.x", expiry)})
    d = cfg.to_core()
    assert (d["signing"], d["token"], d["credentials_expiry"]) == ("bearer", "ya29.x", NOW + 3600)
    with pytest.raises(ValueError, match="without a token: refresh it first"):
        S.resolve("gs://b/x", {"credentials": lambda: GoogleStyle(None, None)})
    # http(s) takes bearer tokens from the callable as well; a plain str works.
    cfg = S.resolve("https://h/x", {"credentials": lambda: "tok"})
    assert (cfg.signing, cfg.token, cfg.credential_source) == ("bearer", "tok", "credentials callable")


def test_callable_gcs_hmac():
    cfg = S.resolve("gs://b/x", {"credentials": lambda: {"access_key_id": "GOOG1",
                                                         "secret_access_key": "s"}})
    assert (cfg.signing, cfg.region) == ("sigv4", "auto")


@pytest.mark.parametrize("url,result,error,match", [
    ("s3://b/x", None, ValueError, "returned None"),
    ("s3://b/x", {"token": "t"}, ValueError, "s3:// needs access keys"),
    ("s3://b/x", {"access_key_id": "a"}, ValueError, "without secret_access_key"),
    ("s3://b/x", {"access_key_id": "a", "secret_access_key": "s", "expiry": NOW - 1}, ValueError,
     "expired already"),
    ("s3://b/x", {"access_key_id": "a", "secret_access_key": "s", "session_token": "x", "token": "y"},
     ValueError, "both session_token and token"),
    ("s3://b/x", {"access_key_id": "a", "secret_access_key": "s", "colour": "x"}, ValueError,
     "unknown key 'colour'"),
    ("s3://b/x", {"access_key_id": 1, "secret_access_key": "s"}, TypeError, "access_key_id must be a str"),
    ("s3://b/x", {"access_key_id": "a", "secret_access_key": "s", "expiry": "soon"}, ValueError,
     "not an ISO 8601"),
    ("s3://b/x", {"access_key_id": "a", "secret_access_key": "s", "expiry": [1]}, TypeError,
     "expiry must be"),
    ("s3://b/x", 42, TypeError, "returned int"),
    ("gs://b/x", {}, ValueError, "returned no credentials"),
    ("gs://b/x", {"session_token": "t"}, ValueError, "session token without access keys"),
    ("gs://b/x", {"access_key_id": "a", "secret_access_key": "s", "session_token": "t"}, ValueError,
     "session token with GCS HMAC"),
    ("https://h/x", {"access_key_id": "a", "secret_access_key": "s"}, ValueError, "bearer token only"),
])
def test_callable_bad_results(url, result, error, match):
    with pytest.raises(error, match=match):
        S.resolve(url, {"credentials": lambda: result})


def test_callable_must_not_switch_kinds():
    provider = counting([{"token": "t", "expiry": NOW + 100},
                         {"access_key_id": "a", "secret_access_key": "s"}])
    cfg = S.resolve("gs://b/x", {"credentials": provider})
    with pytest.raises(ValueError, match="switched from bearer to sigv4"):
        cfg.refresh_if_needed()


def test_callable_conflicts():
    with pytest.raises(ValueError, match="anonymous=True conflicts with credentials"):
        S.resolve("s3://b/x", {"anon": True, "credentials": lambda: {}})
    with pytest.raises(ValueError, match="conflicts with token"):
        S.resolve("gs://b/x", {"token": "t", "credentials": lambda: {}})
    with pytest.raises(ValueError, match="conflicts with token"):
        S.resolve("https://h/x", {"token": "t", "credentials": lambda: "x"})


def test_boto3_helper_uses_boto3(monkeypatch):
    import botocore.credentials as bc

    made = []

    class Session:
        def __init__(self, profile_name=None):
            made.append(profile_name)

        def get_credentials(self):
            return bc.Credentials("AKIAHELPER0000000000", "s")

    monkeypatch.setitem(sys.modules, "boto3", types.SimpleNamespace(Session=Session))
    helper = S.Boto3Credentials("dev")
    cfg = S.resolve("s3://b/x", {"credentials": helper})
    assert cfg.access_key_id == "AKIAHELPER0000000000" and made == ["dev"]
    S.refresh(cfg)
    assert made == ["dev"]  # the session is made once per process
    clone = pickle.loads(pickle.dumps(helper))
    assert clone == helper and clone._credentials is None


def test_google_helper_refreshes_near_expiry(monkeypatch):
    clock = Clock(NOW)
    monkeypatch.setattr(S, "clock", clock)

    class Creds:
        token, expiry, refreshes = None, None, 0

        def refresh(self, request):
            Creds.refreshes += 1
            self.token = f"tok{Creds.refreshes}"
            self.expiry = dt.datetime.fromtimestamp(clock.now + 3600, dt.timezone.utc).replace(tzinfo=None)

    scopes_seen = []

    def default(scopes):
        scopes_seen.append(scopes)
        return Creds(), "project"

    google = types.ModuleType("google")
    auth = types.ModuleType("google.auth")
    transport = types.ModuleType("google.auth.transport")
    requests_mod = types.ModuleType("google.auth.transport.requests")
    auth.default = default
    requests_mod.Request = object
    google.auth, auth.transport, transport.requests = auth, transport, requests_mod
    for name, mod in [("google", google), ("google.auth", auth), ("google.auth.transport", transport),
                      ("google.auth.transport.requests", requests_mod)]:
        monkeypatch.setitem(sys.modules, name, mod)

    cfg = S.resolve("gs://b/x", {"credentials": S.GoogleAuthCredentials()})
    assert (cfg.token, cfg.credentials_expiry) == ("tok1", pytest.approx(NOW + 3600))
    assert scopes_seen == [[S.GCS_READ_SCOPE]]
    clock.now = NOW + 3600 - 200
    new = cfg.refresh_if_needed()
    assert new.token == "tok2" and Creds.refreshes == 2
    assert pickle.loads(pickle.dumps(S.GoogleAuthCredentials())) == S.GoogleAuthCredentials()


# ---------------------------------------------------------------------------------------
# Redaction and repr


def test_repr_never_shows_secrets():
    cfg = S.resolve("s3://b/x", {"key": AKID, "secret": SECRET, "token": "sessiontok",
                                 "headers": {"X-Custom-Auth": "hdrsecret"}})
    text = repr(cfg)
    for secret in (SECRET, "sessiontok", "hdrsecret", AKID):
        assert secret not in text
    assert "access_key_id='AKIA…'" in text and "X-Custom-Auth" in text
    assert "credentials='storage_options'" in text and str(cfg) == text
    cfg = S.resolve("gs://b/x", {"credentials": lambda: {"token": "ya29.secret", "expiry": NOW + 60}})
    text = repr(cfg)
    assert "ya29" not in text and "expires='2023-11-14T22:14:20Z'" in text
    assert "ya29" not in repr(cfg.refresh())


def test_redact():
    text = ("GET https://user:pw@h.example/x?X-Amz-Signature=abc&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE "
            "failed; Authorization: AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20240101\n"
            "retry with Bearer ya29.a0Af-token_x and aws_secret_access_key = topsecret")
    out = S.redact(text)
    for secret in ("user:pw", "X-Amz-Signature=abc", "AKIAIOSFODNN7EXAMPLE", "ya29", "topsecret"):
        assert secret not in out
    assert "https://***@h.example/x?***" in out and "Authorization: ***" in out
    assert "Bearer ***" in out and "h.example" in out
    assert S.redact("key id ASIAIOSFODNN7EXAMPLE used") == "key id ASIA… used"
    assert S.redact("basic usage of a Bearer token") == "basic usage of a Bearer token"
    assert S.redact("abc long-secret", "long-secret") == "abc ***"  # a str, not its characters
    assert S.redact("a b s3://bucket", ["s", "b"]) == "a b s3://bucket"
    assert S.redact("s3://b/x failed: opaque-secret-value", ["opaque-secret-value"]) == \
        "s3://b/x failed: ***"
    cfg = S.resolve("https://h/x", {"token": "opaque-token-123"})
    assert cfg.redact("sent opaque-token-123 to s3://b/x") == "sent *** to s3://b/x"
    cfg = S.resolve("s3://b/x", {"key": AKID, "secret": SECRET})
    assert SECRET not in cfg.redact(f"signature used {SECRET}")


def test_messages_never_contain_secrets():
    cases = [
        ("s3://b/x", {"key": AKID, "secret": SECRET, "headers": {"x-amz-date": SECRET}}),
        ("s3://b/x", {"key": AKID, "secret": SECRET, "secret_access_key": "other-" + SECRET}),
        ("gs://b/x", {"token": SECRET, "key": AKID, "secret": SECRET}),
        ("https://h/x", {"token": SECRET, "headers": {"Authorization": SECRET}}),
        ("https://h/x", {"headers": {"X-A": SECRET + "\r\n"}}),
        ("s3://b/x", {"credentials": lambda: {"access_key_id": AKID, "secret_access_key": SECRET,
                                              "expiry": NOW - 5}}),
    ]
    for url, options in cases:
        with pytest.raises((ValueError, TypeError)) as e:
            S.resolve(url, options)
        assert SECRET not in str(e.value) and AKID not in str(e.value), str(e.value)


# ---------------------------------------------------------------------------------------
# Pickling


def module_provider():
    return {"access_key_id": "ASIAPICKLE0000000000", "secret_access_key": "s", "expiry": NOW + 3600}


def test_pickle_re_resolves_from_the_given_inputs(monkeypatch):
    options = {"key": AKID, "secret": SECRET, "endpoint_url": "http://localhost:9000"}
    cfg = S.resolve("S3://b/x/", options)
    assert cfg.resolve_args == ("S3://b/x/", options)
    clone = pickle.loads(pickle.dumps(cfg))
    assert clone == cfg and clone.to_core() == cfg.to_core()
    # Unpickling re-reads the environment of the process that loads it.
    cfg = S.resolve("s3://b/x", None)
    data = pickle.dumps(cfg)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", AKID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    assert pickle.loads(data).credential_source == "environment"


def test_pickle_with_a_callable():
    cfg = S.resolve("s3://b/x", {"credentials": module_provider})
    clone = pickle.loads(pickle.dumps(cfg))
    assert clone.access_key_id == "ASIAPICKLE0000000000" and clone.credentials is module_provider
    cfg = S.resolve("s3://b/x", {"credentials": lambda: module_provider()})
    with pytest.raises((pickle.PicklingError, AttributeError, TypeError)):
        pickle.dumps(cfg)


def test_config_is_frozen():
    cfg = S.resolve("s3://b/x", None)
    with pytest.raises(Exception):
        cfg.root = "/other"


def test_masked_options_hide_every_secret_but_keep_the_rest():
    so = {
        "key": "AKIAEXAMPLE", "secret": "s3cr3t-value", "token": "tok-value",
        "endpoint_url": "http://127.0.0.1:9000", "anon": False, "request_concurrency": 8,
        "client_kwargs": {"aws_secret_access_key": "nested-secret", "region_name": "eu-west-1"},
        "headers": {"X-Api-Key": "header-secret"}, "credentials": lambda: {},
    }
    shown = S.masked_options(so)
    text = repr(shown)
    for secret in ("AKIAEXAMPLE", "s3cr3t-value", "tok-value", "nested-secret", "header-secret"):
        assert secret not in text
    assert shown["endpoint_url"] == "http://127.0.0.1:9000"
    assert shown["client_kwargs"]["region_name"] == "eu-west-1"
    assert shown["request_concurrency"] == 8 and shown["anon"] is False
    assert shown["credentials"] == "***" and shown["headers"] == "***"
    assert so["key"] == "AKIAEXAMPLE", "the caller's dict is not modified"


# --------------------------------------------------------------------------------------
# cache_max_age (the disk cache's freshness bound)


def test_cache_max_age_parsed_and_kept(tmp_path):
    cache = str(tmp_path / "cache")
    cfg = S.resolve("https://h/x.zarr", {"cache_dir": cache})
    assert cfg.cache_max_age == 0.0
    assert "cache_max_age" not in cfg.to_core(), "absent at 0: the binding rejects keys it does not know"
    for given, want in ((60, 60.0), (0.5, 0.5), (0, 0.0)):
        cfg = S.resolve("s3://b/x", {"anon": True, "cache_dir": cache, "cache_max_age": given})
        assert cfg.cache_max_age == want and type(cfg.cache_max_age) is float
        d = cfg.to_core()
        if want:
            assert d["cache_max_age"] == want and type(d["cache_max_age"]) is float
            assert tuple(d) == S.CORE_KEYS + S.OPTIONAL_CORE_KEYS
        else:
            assert tuple(d) == S.CORE_KEYS
    # None counts as absent, like every other option.
    assert S.resolve("gs://b/x", {"cache_dir": cache, "cache_max_age": None}).cache_max_age == 0.0


@pytest.mark.parametrize("value,exc,match", [
    (-1, ValueError, ">= 0"),
    (float("inf"), ValueError, "finite"),
    (float("nan"), ValueError, "finite"),
    ("60", TypeError, "number of seconds, got str"),
    (True, TypeError, "number of seconds, got bool"),
])
def test_cache_max_age_bad_values(tmp_path, value, exc, match):
    with pytest.raises(exc, match=match):
        S.resolve("https://h/x.zarr", {"cache_dir": str(tmp_path), "cache_max_age": value})


def test_cache_max_age_needs_cache_dir():
    with pytest.raises(ValueError, match="'cache_max_age' needs cache_dir"):
        S.resolve("https://h/x.zarr", {"cache_max_age": 60})


# ---------------------------------------------------------------------------------------
# disk_cache_bytes (the disk cache's bound), formerly cache_bytes


def test_disk_cache_bytes_and_its_old_name(tmp_path):
    import warnings

    url, cache = "https://h/x.zarr", str(tmp_path / "cache")
    assert S.resolve(url, {"cache_dir": cache}).to_core()["cache_bytes"] == 10 << 30
    new = S.resolve(url, {"cache_dir": cache, "disk_cache_bytes": 1 << 20})
    # the binding's key keeps its name
    assert new.to_core()["cache_bytes"] == 1 << 20 and new.disk_cache_bytes == 1 << 20
    with pytest.warns(DeprecationWarning,
                      match="storage_options key 'cache_bytes' is deprecated: it is now called 'disk_cache_bytes'"):
        old = S.resolve(url, {"cache_dir": cache, "cache_bytes": 1 << 20})
    assert old.to_core() == new.to_core()
    for both in ({"cache_bytes": 1 << 20, "disk_cache_bytes": 1 << 20},
                 {"cache_bytes": 1 << 20, "disk_cache_bytes": 2 << 20}):
        with pytest.raises(ValueError, match="give only 'disk_cache_bytes'"):
            S.resolve(url, {"cache_dir": cache, **both})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # None is absent (s3fs style): no warning, no conflict
        assert S.resolve(url, {"cache_dir": cache, "cache_bytes": None,
                               "disk_cache_bytes": 5}).to_core()["cache_bytes"] == 5
    for spelled in ("disk_cache_bytes", "cache_bytes"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            with pytest.raises(ValueError, match=f"'{spelled}' needs cache_dir"):
                S.resolve(url, {spelled: 10})
    with pytest.raises(TypeError, match="disk_cache_bytes must be an integer"):
        S.resolve(url, {"cache_dir": cache, "disk_cache_bytes": "10G"})
    with pytest.raises(ValueError, match="unknown storage_options key 'disk_cache'"):
        S.resolve(url, {"disk_cache": 1})

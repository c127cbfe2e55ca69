"""lsio on S3 (moto's S3 server on 127.0.0.1): parity, credentials, errors, workers, groups.

* Parity: every supported store of ``stores.py`` (both writers, every dtype, both index
  locations, every chunk key encoding, missing chunks and shards) is uploaded once and read
  through ``s3://`` with signed requests: a full read, seeded random basic selections, a
  ``read_crops`` batch and an ``oindex`` read equal the writer's expected array bit for bit
  and zarr-python's reads (same helpers as ``test_parity.py``). A subset is read again while
  moto *verifies* SigV4 signatures, so lsio's signatures are proven acceptable.
* Credentials: storage_options spellings, environment variables, a shared-credentials
  profile, a ``credentials`` callable refreshed near expiry (keys rotated: the old key is
  deleted in IAM before the refresh), STS session tokens; anonymous access to public and
  private buckets.
* Errors: no ``zarr.json``, missing chunk objects (fill), shards deleted or overwritten after
  their index was read (ESTALE, never wrong data), permission revoked mid-way (EACCES, never
  fill), wrong secrets (EACCES, no secret in any message).
* DataLoader workers (fork, forkserver, spawn) over an array opened on moto, pickling.
* Groups (consolidated and not), the xarray backend, the CLI, ``Array.stats()`` and that
  ``options`` / ``repr`` never show the secret key.

moto runs in a thread of this process (fixture ``moto_s3``), so it answers only while lsio
releases the GIL; every store is opened with short timeouts and few retries so a stall fails
within seconds instead of hanging.
"""

from __future__ import annotations

import errno
import os
import json
import pickle
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import zarr

import lsio
import lsio._storage
import lsio.cli
from selections import crop_slices, random_crops, random_keys
from stores import NUMERIC, assert_same_bits, expected_chunks_and_shards
from test_parity import check_against_zarr, seed_of, zarr_reference

MATRIX_BUCKET = "lsio-matrix"
PUBLIC_BUCKET = "lsio-public"
N_KEYS = 3  # plus the last element and a reversed read (moto answers ~300 requests/s)
N_CROPS = 7
# Bounded: a request that stalls fails after ~5 s per attempt, 1 retry.
LIMITS = {"timeout": 5, "connect_timeout": 5, "retries": 1}


def signed(moto, **extra) -> dict:
    """s3fs spellings of the moto IAM user's key."""
    return {
        "endpoint_url": moto.endpoint_url, "key": moto.access_key_id,
        "secret": moto.secret_access_key, "region": moto.region, **LIMITS, **extra,
    }


def anonymous(moto) -> dict:
    return {"anon": True, "endpoint_url": moto.endpoint_url, **LIMITS}


def matrix_url(name: str) -> str:
    return f"s3://{MATRIX_BUCKET}/stores/{name}.zarr"


def secret_free(text: str, *secrets: str) -> None:
    for s in secrets:
        assert s not in text, "a secret leaked into: " + text.replace(s, "<SECRET>")


@pytest.fixture(autouse=True)
def _no_ambient_aws(monkeypatch, tmp_path):
    """Tests see only the credentials they set: no AWS_* variable, no ~/.aws files."""
    for var in list(os.environ):
        if var.startswith("AWS_") or var == "LSIO_REQUEST_CONCURRENCY":
            monkeypatch.delenv(var)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))


# --------------------------------------------------------------------------------------
# Uploads (once per session)
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def s3_matrix(moto_s3, stores):
    """Every supported store under s3://lsio-matrix/stores/NAME.zarr; returns the names."""
    from stores import all_store_names

    names = all_store_names()
    built = [stores.get(n) for n in names]  # StoreCache is not thread-safe: build here
    moto_s3.create_bucket(MATRIX_BUCKET)
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(lambda b: moto_s3.upload_dir(b.path, MATRIX_BUCKET, f"stores/{b.name}.zarr"),
                      built))
    return names


@pytest.fixture(scope="session")
def s3_public(moto_s3, stores):
    """s3://lsio-public/sparse.zarr (z_shard_sparse) in a bucket everyone may read."""
    moto_s3.create_bucket(PUBLIC_BUCKET, public=True)
    b = stores.get("z_shard_sparse")
    moto_s3.upload_dir(b.path, PUBLIC_BUCKET, "sparse.zarr")
    return f"s3://{PUBLIC_BUCKET}/sparse.zarr", b


_mutable_count = [0]


@pytest.fixture
def mutable_copy(moto_s3, stores):
    """``copy(name) -> (url, key prefix, BuiltStore)``: a private copy of a store under a
    fresh prefix of bucket lsio-mutable, for tests that delete or overwrite objects."""
    bucket = moto_s3.create_bucket("lsio-mutable")

    def copy(name: str):
        _mutable_count[0] += 1
        prefix = f"copy{_mutable_count[0]}/{name}.zarr"
        b = stores.get(name)
        moto_s3.upload_dir(b.path, bucket, prefix)
        return f"s3://{bucket}/{prefix}", prefix, b

    return copy


# --------------------------------------------------------------------------------------
# 1. Parity with zarr-python over the whole store matrix
# --------------------------------------------------------------------------------------


def test_matrix_covers_the_features(s3_matrix, stores, moto_s3):
    """The uploaded matrix really has both key encodings (and separators), both index
    locations, missing shards and every dtype (guards the parity test's claims)."""
    encodings, locations, dtypes = set(), set(), set()
    for name in s3_matrix:
        meta = stores.get(name).metadata()
        cke = meta["chunk_key_encoding"]
        encodings.add((cke["name"], (cke.get("configuration") or {}).get("separator")))
        dt = meta["data_type"]  # a name, or an object (strings, records)
        dtypes.add(dt if isinstance(dt, str) else json.dumps(dt, sort_keys=True))
        for c in meta["codecs"]:
            if isinstance(c, dict) and c["name"] == "sharding_indexed":
                locations.add(c["configuration"].get("index_location", "end"))
    assert {e[0] for e in encodings} == {"default", "v2"}
    assert {e[1] for e in encodings} >= {"/", "."} | {None}
    assert locations == {"start", "end"}
    assert set(NUMERIC) <= dtypes
    # z_shard_sparse: 3 of its 4 shard objects are absent on the server.
    keys = moto_s3.client.list_objects_v2(Bucket=MATRIX_BUCKET, Prefix="stores/z_shard_sparse.zarr/")
    shard_keys = sorted(o["Key"].rsplit(".zarr/", 1)[1] for o in keys["Contents"])
    assert shard_keys == ["c/0/1", "zarr.json"]


def _oindex_key(rng, shape):
    """A mixed outer-indexing key (unsorted arrays with repeats and negatives, slices) and
    the positions it selects on each axis."""
    key, positions = [], []
    for d, n in enumerate(shape):
        if n == 0:
            key.append(slice(None))
            positions.append(np.arange(0))
        elif d == 0 or rng.random() < 0.5:
            idx = rng.integers(-n, n, size=min(n, 5) + 1)
            idx[-1] = idx[0]  # a repeat
            key.append(idx)
            positions.append(np.where(idx < 0, idx + n, idx))
        else:
            lo = int(rng.integers(0, n))
            hi = int(rng.integers(lo + 1, n + 1))
            step = int(rng.integers(1, 4))
            key.append(slice(lo, hi, step))
            positions.append(np.arange(lo, hi, step))
    return tuple(key), positions


def test_matrix_parity(store, s3_matrix, moto_s3):
    """A store of the matrix read through s3:// equals the writer's array and zarr-python."""
    name = store.name
    expected = store.expected
    arr = lsio.open(matrix_url(name), threads=2, storage_options=signed(moto_s3))
    assert arr.shape == expected.shape and arr.dtype == expected.dtype
    assert arr.io_backend == "http"
    inner, shards = expected_chunks_and_shards(store.metadata())
    assert arr.chunks == inner and arr.shards == shards

    got = arr[...]
    assert_same_bits(got, expected, f"s3 {name}[...]")
    if store.zarr_readable:
        check_against_zarr(store, got, store.zarr_full(), f"s3 {name} vs zarr")

    keys = random_keys(seed_of(name), expected.shape, N_KEYS)
    # The appended Ellipsis and full-slice keys repeat the full read above: skip them.
    keys = keys[:N_KEYS] + keys[N_KEYS + 2:]
    for key in keys:
        context = f"s3 {name}[{key!r}]"
        sel = arr[key]
        assert_same_bits(sel, expected[key], context)
        ref = zarr_reference(store, key)
        if ref is not None:
            check_against_zarr(store, sel, ref, context)

    starts, crop = random_crops(seed_of(name), expected.shape, arr.chunks, count=N_CROPS)
    crops = arr.read_crops(starts, crop)
    assert crops.shape == (len(starts),) + tuple(crop)
    want = np.stack([expected[crop_slices(s, crop)] for s in starts])
    assert_same_bits(crops, want, f"s3 {name} crops {crop} at {starts.tolist()}")
    if store.zarr_readable:
        ref = np.stack([store.zarr_read(crop_slices(s, crop)) for s in starts])
        check_against_zarr(store, crops, ref, f"s3 {name} crops vs zarr")

    if expected.ndim:
        rng = np.random.default_rng(seed_of(name) + 11)
        key, positions = _oindex_key(rng, expected.shape)
        sel = arr.oindex[key]
        context = f"s3 {name}.oindex[{key!r}]"
        assert_same_bits(sel, expected[np.ix_(*positions)], context)
        if store.zarr_readable:
            check_against_zarr(store, sel, store.zarr_full()[np.ix_(*positions)], context)

    st = arr.stats()
    assert st["requests"] >= 1 and st["errors"] == 0, st
    assert st["bytes_fetched"] >= st["bytes_used"] > 0, st


SIGNED_STORES = [
    "z_plain",                      # default "/" keys, unsharded
    "z_gzip_v2dot",                 # v2 "." keys
    "ts_v2keys_slash_shard",        # v2 "/" keys, sharded
    "z_crc_defaultdot",             # default "." keys
    "z_shard_zstd_end",             # index at the end
    "ts_shard_index_be_crc_start",  # index at the start, big-endian
    "z_shard_sparse_start_nan",     # missing shards: 404s under verification
    "z_4d_shard",
    "z_dtype_complex128_shard",
    "ts_0d",
]


@pytest.mark.parametrize("name", SIGNED_STORES)
def test_matrix_sigv4_verified(name, stores, s3_matrix, moto_s3_signed):
    """moto verifies every request's SigV4 signature: lsio's are accepted (client_kwargs
    spellings of the key here)."""
    store = stores.get(name)
    m = moto_s3_signed
    so = {"client_kwargs": {"endpoint_url": m.endpoint_url, "region_name": m.region,
                            "aws_access_key_id": m.access_key_id,
                            "aws_secret_access_key": m.secret_access_key}, **LIMITS}
    arr = lsio.open(matrix_url(name), threads=2, storage_options=so)
    assert_same_bits(arr[...], store.expected, name)
    starts, crop = random_crops(seed_of(name) + 1, store.expected.shape, arr.chunks)
    want = np.stack([store.expected[crop_slices(s, crop)] for s in starts])
    assert_same_bits(arr.read_crops(starts, crop), want, f"{name} crops")
    assert arr.stats()["errors"] == 0


@pytest.mark.parametrize("where", ["open", "read"])
def test_wrong_secret_is_eacces_without_the_secret(s3_matrix, moto_s3, where):
    """A wrong secret: HTTP 403 SignatureDoesNotMatch becomes StorageError(EACCES) naming
    the object, at open (zarr.json) or on a data read (shard index / chunks), and no
    message holds the secret."""
    m = moto_s3
    wrong = "WrongSecretKeyValue0123456789abcdefghij"
    url = matrix_url("z_shard_zstd_end")
    if where == "open":
        with m.require_signatures(), pytest.raises(lsio.StorageError) as ei:
            lsio.open(url, storage_options=signed(m, secret=wrong))
        obj = "zarr.json"
    else:
        arr = lsio.open(url, storage_options=signed(m, secret=wrong))  # moto not checking yet
        with m.require_signatures(), pytest.raises(lsio.StorageError) as ei:
            arr[60:70, 0:10]
        obj = "c/1/0"
        assert arr.stats()["errors"] >= 1
    e = ei.value
    assert e.errno == errno.EACCES
    assert "403" in str(e)
    assert "SignatureDoesNotMatch" in str(e)
    assert f"{MATRIX_BUCKET}/stores/z_shard_zstd_end.zarr/{obj}" in str(e)
    secret_free(f"{e} {e!r} {e.path} {e.filename}", wrong, m.secret_access_key)


def test_http_errors_name_the_s3_url(s3_matrix, moto_s3_signed):
    """An HTTP error (here 403) names the object by the URL the user opened, as the other
    errors do (no zarr.json, object changed / disappeared): s3://bucket/key, not the
    endpoint's http://127.0.0.1:PORT/bucket/key."""
    m = moto_s3_signed
    url = matrix_url("z_shard_zstd_end")
    with pytest.raises(lsio.StorageError) as ei:
        lsio.open(url, storage_options=signed(m, secret="WrongSecretKeyValue0123456789abcdefghij"))
    assert ei.value.path == f"{url}/zarr.json", ei.value.path
    assert f"{url}/zarr.json" in str(ei.value)
    assert m.endpoint_url not in str(ei.value)


# --------------------------------------------------------------------------------------
# 2. Credentials
# --------------------------------------------------------------------------------------


def _iam(moto):
    import boto3

    return boto3.client("iam", endpoint_url=moto.endpoint_url, region_name=moto.region,
                        aws_access_key_id=moto.access_key_id,
                        aws_secret_access_key=moto.secret_access_key)


def _allow_all_user(moto, name: str, n_keys: int):
    iam = _iam(moto)
    try:
        iam.create_user(UserName=name)
    except iam.exceptions.EntityAlreadyExistsException:
        pass
    iam.put_user_policy(UserName=name, PolicyName="everything", PolicyDocument=json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}],
    }))
    return iam, [iam.create_access_key(UserName=name)["AccessKey"] for _ in range(n_keys)]


def test_canonical_storage_option_names(s3_matrix, stores, moto_s3_signed):
    m = moto_s3_signed
    so = {"endpoint_url": m.endpoint_url, "access_key_id": m.access_key_id,
          "secret_access_key": m.secret_access_key, "region": m.region, **LIMITS}
    arr = lsio.open(matrix_url("z_shard_zstd_start"), storage_options=so)
    assert_same_bits(arr[...], stores.get("z_shard_zstd_start").expected)
    assert arr._remote.credential_source == "storage_options"


def test_environment_credentials(s3_matrix, stores, moto_s3_signed, monkeypatch):
    m = moto_s3_signed
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", m.access_key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", m.secret_access_key)
    monkeypatch.setenv("AWS_ENDPOINT_URL", m.endpoint_url)
    monkeypatch.setenv("AWS_REGION", m.region)
    url = matrix_url("z_shard_sparse")
    arr = lsio.open(url)  # everything from the environment
    assert arr._remote.credential_source == "environment"
    assert_same_bits(arr[...], stores.get("z_shard_sparse").expected)
    # The variables are what signs: a wrong secret there is refused.
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "WrongSecretKeyValue0123456789abcdefghij")
    with pytest.raises(lsio.StorageError) as ei:
        lsio.open(url)
    assert ei.value.errno == errno.EACCES


def test_profile_credentials(s3_matrix, stores, moto_s3_signed, monkeypatch, tmp_path):
    m = moto_s3_signed
    wrong = "WrongSecretKeyValue0123456789abcdefghij"
    creds = tmp_path / "credentials"
    creds.write_text(
        f"[default]\naws_access_key_id = {m.access_key_id}\naws_secret_access_key = {wrong}\n\n"
        f"[lsio-test]\naws_access_key_id = {m.access_key_id}\n"
        f"aws_secret_access_key = {m.secret_access_key}\n"
    )
    config = tmp_path / "config"
    config.write_text(f"[profile lsio-test]\nregion = {m.region}\nendpoint_url = {m.endpoint_url}\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(creds))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    url = matrix_url("z_4d_shard")
    expected = stores.get("z_4d_shard").expected

    # AWS_PROFILE names it; key, secret, region and endpoint all come from the files.
    monkeypatch.setenv("AWS_PROFILE", "lsio-test")
    arr = lsio.open(url, storage_options=dict(LIMITS))
    assert arr._remote.credential_source == "profile:lsio-test"
    assert_same_bits(arr[...], expected)
    monkeypatch.delenv("AWS_PROFILE")

    # The profile option wins over (wrong) environment keys, as boto3's profile_name does.
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", m.access_key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", wrong)
    arr = lsio.open(url, storage_options={"profile": "lsio-test", **LIMITS})
    assert_same_bits(arr[1:3, ::2], expected[1:3, ::2])
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")

    # Without a profile name, [default] (wrong secret) is used: refused.
    with pytest.raises(lsio.StorageError) as ei:
        lsio.open(url, storage_options={"endpoint_url": m.endpoint_url, **LIMITS})
    assert ei.value.errno == errno.EACCES
    secret_free(str(ei.value), wrong)


def test_credentials_callable_refreshed_near_expiry(s3_matrix, stores, moto_s3, monkeypatch):
    """The callable is called at open, not again while the keys are fresh, and again once
    the expiry is within REFRESH_MARGIN; the new keys sign (the old key no longer exists)."""
    iam, (k1, k2) = _allow_all_user(moto_s3, "lsio-rotating", 2)
    now = [1_900_000_000.0]
    monkeypatch.setattr(lsio._storage, "clock", lambda: now[0])
    calls = []

    def provider():
        k = k1 if not calls else k2
        calls.append(now[0])
        return {"AccessKeyId": k["AccessKeyId"], "SecretAccessKey": k["SecretAccessKey"],
                "Expiration": now[0] + 3600}

    store = stores.get("z_shard_zstd_end")
    so = {"credentials": provider, "endpoint_url": moto_s3.endpoint_url, **LIMITS}
    with moto_s3.require_signatures():
        arr = lsio.open(matrix_url(store.name), storage_options=so)
        assert len(calls) == 1
        assert arr._remote.credential_source == "credentials callable"
        assert_same_bits(arr[...], store.expected)
        now[0] += 3600 - lsio._storage.REFRESH_MARGIN - 60  # still fresh
        assert_same_bits(arr[10:20], store.expected[10:20])
        assert len(calls) == 1
        iam.delete_access_key(UserName="lsio-rotating", AccessKeyId=k1["AccessKeyId"])
        with pytest.raises(lsio.StorageError) as ei:  # the first key is gone now
            lsio.open(matrix_url(store.name), storage_options={
                "endpoint_url": moto_s3.endpoint_url, "key": k1["AccessKeyId"],
                "secret": k1["SecretAccessKey"], **LIMITS})
        assert ei.value.errno == errno.EACCES
        now[0] += 120  # within the margin: refreshed on the next read
        starts, crop = random_crops(5, store.expected.shape, arr.chunks)
        want = np.stack([store.expected[crop_slices(s, crop)] for s in starts])
        assert_same_bits(arr.read_crops(starts, crop), want)  # same handle, new keys
        assert len(calls) == 2
        assert_same_bits(arr.oindex[[5, 1, 99], 3:9], store.expected[[5, 1, 99], 3:9])
        assert len(calls) == 2


def test_session_token(s3_matrix, stores, moto_s3):
    """STS AssumeRole credentials (ASIA... key + session token) sign with the token; a
    wrong token is refused."""
    import boto3

    kw = dict(endpoint_url=moto_s3.endpoint_url, region_name=moto_s3.region,
              aws_access_key_id=moto_s3.access_key_id, aws_secret_access_key=moto_s3.secret_access_key)
    iam, sts = boto3.client("iam", **kw), boto3.client("sts", **kw)
    try:
        role = iam.create_role(RoleName="lsio-reader", AssumeRolePolicyDocument=json.dumps({
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}],
        }))["Role"]
    except iam.exceptions.EntityAlreadyExistsException:
        role = iam.get_role(RoleName="lsio-reader")["Role"]
    iam.put_role_policy(RoleName="lsio-reader", PolicyName="all", PolicyDocument=json.dumps({
        "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}],
    }))
    c = sts.assume_role(RoleArn=role["Arn"], RoleSessionName="lsio-test")["Credentials"]
    assert c["AccessKeyId"].startswith("ASIA")
    store = stores.get("z_3d_shard_start")
    base = {"endpoint_url": moto_s3.endpoint_url, "key": c["AccessKeyId"],
            "secret": c["SecretAccessKey"], **LIMITS}
    with moto_s3.require_signatures():
        arr = lsio.open(matrix_url(store.name), storage_options={**base, "token": c["SessionToken"]})
        assert_same_bits(arr[...], store.expected)
        arr = lsio.open(matrix_url(store.name),
                        storage_options={**base, "session_token": c["SessionToken"]})
        assert_same_bits(arr[2:5], store.expected[2:5])
        with pytest.raises(lsio.StorageError) as ei:
            lsio.open(matrix_url(store.name), storage_options={**base, "token": "not-a-valid-token"})
        assert "InvalidToken" in str(ei.value)
        secret_free(str(ei.value), c["SecretAccessKey"], "not-a-valid-token")
        with pytest.raises(lsio.StorageError) as ei:
            lsio.open(matrix_url(store.name), storage_options=base)  # token missing
        assert ei.value.errno == errno.EACCES


def test_https_endpoint_with_a_ca_file(moto_s3_tls, stores):
    """moto over HTTPS: the test CA given as ca_file verifies; without it, TLS fails."""
    m = moto_s3_tls
    b = stores.get("z_shard_index_be_nocrc_start")
    m.upload_dir(b.path, "lsio-tls", "a.zarr")
    url = "s3://lsio-tls/a.zarr"
    so = signed(m, ca_file=str(m.tls.ca_file))
    arr = lsio.open(url, storage_options=so)
    assert_same_bits(arr[...], b.expected)
    with pytest.raises(lsio.StorageError) as ei:
        lsio.open(url, storage_options=signed(m))
    assert "certificate" in str(ei.value).lower() or "ssl" in str(ei.value).lower(), str(ei.value)
    secret_free(str(ei.value), m.secret_access_key)


# --------------------------------------------------------------------------------------
# 3. Anonymous access
# --------------------------------------------------------------------------------------


def test_anonymous_public_bucket(s3_public, moto_s3):
    url, b = s3_public
    arr = lsio.open(url, storage_options=anonymous(moto_s3))
    assert arr._remote.credential_source == "anonymous"
    assert_same_bits(arr[...], b.expected)
    starts, crop = random_crops(3, b.expected.shape, arr.chunks)
    want = np.stack([b.expected[crop_slices(s, crop)] for s in starts])
    assert_same_bits(arr.read_crops(starts, crop), want)


def test_anonymous_private_bucket_is_refused(s3_matrix, moto_s3):
    url = matrix_url("z_plain")
    with pytest.raises(lsio.StorageError) as ei:
        lsio.open(url, storage_options=anonymous(moto_s3))
    assert ei.value.errno == errno.EACCES
    assert "403" in str(ei.value)
    assert f"{MATRIX_BUCKET}/stores/z_plain.zarr/zarr.json" in str(ei.value)


def test_permission_revoked_midway_is_an_error_not_fill(moto_s3, stores):
    """Chunk requests answered 403 raise EACCES; they never read as missing (fill)."""
    bucket = moto_s3.create_bucket("lsio-revoked", public=True)
    b = stores.get("z_plain")
    moto_s3.upload_dir(b.path, bucket, "p.zarr")
    arr = lsio.open(f"s3://{bucket}/p.zarr", storage_options=anonymous(moto_s3))
    assert_same_bits(arr[:32, :32], b.expected[:32, :32])
    moto_s3.client.delete_bucket_policy(Bucket=bucket)
    with pytest.raises(lsio.StorageError) as ei:
        arr[40:70, 40:70]
    assert ei.value.errno == errno.EACCES
    assert "403" in str(ei.value)
    assert arr.stats()["errors"] >= 1


# --------------------------------------------------------------------------------------
# 4. Errors
# --------------------------------------------------------------------------------------


def test_no_zarr_json_is_not_found(s3_matrix, moto_s3):
    """As locally: no metadata there is a NotFoundError (a FileNotFoundError), whatever the
    store."""
    moto_s3.put(MATRIX_BUCKET, "junk/readme.txt", b"not zarr")
    for url in (f"s3://{MATRIX_BUCKET}/junk", f"s3://{MATRIX_BUCKET}/nothing-here.zarr"):
        with pytest.raises(FileNotFoundError) as ei:
            lsio.open(url, storage_options=signed(moto_s3))
        assert "not a Zarr" in str(ei.value)
        assert url in str(ei.value)


def test_missing_chunk_object_reads_as_fill(mutable_copy, moto_s3):
    url, prefix, b = mutable_copy("z_plain")  # 100x100 uint16, chunks 32x32, fill 0
    moto_s3.delete("lsio-mutable", f"{prefix}/c/1/2")
    moto_s3.delete("lsio-mutable", f"{prefix}/c/3/3")  # a padded border chunk
    want = b.expected.copy()
    want[32:64, 64:96] = 0
    want[96:, 96:] = 0
    arr = lsio.open(url, storage_options=signed(moto_s3))
    assert_same_bits(arr[...], want)
    assert_same_bits(arr[30:70, 60:99:3], want[30:70, 60:99:3])
    assert arr.stats()["errors"] == 0


def test_shard_deleted_after_its_index_was_read(mutable_copy, moto_s3):
    url, prefix, b = mutable_copy("z_shard_zstd_end")  # shards 50x50 of 10x10 chunks
    arr = lsio.open(url, storage_options=signed(moto_s3))
    assert_same_bits(arr[0:10, 0:10], b.expected[0:10, 0:10])  # caches shard (0, 0)'s index
    moto_s3.delete("lsio-mutable", f"{prefix}/c/0/0")
    with pytest.raises(lsio.StorageError) as ei:
        arr[20:30, 20:30]
    msg = str(ei.value)
    assert "disappeared since its index was read" in msg
    assert ei.value.errno == errno.ESTALE
    assert f"{url}/c/0/0" in msg
    # Other shards still read.
    assert_same_bits(arr[60:, 60:], b.expected[60:, 60:])


@pytest.mark.parametrize("api", ["getitem", "read_crops", "oindex"])
def test_shard_overwritten_after_its_index_was_read(mutable_copy, moto_s3, api):
    """If-Match on the cached index's ETag: a changed shard is an error, never other data."""
    url, prefix, b = mutable_copy("z_shard_zstd_end")
    arr = lsio.open(url, storage_options=signed(moto_s3))
    assert_same_bits(arr[0:10, 0:10], b.expected[0:10, 0:10])
    # Same size and layout, different values: shard (1, 1) written over shard (0, 0).
    other = moto_s3.get("lsio-mutable", f"{prefix}/c/1/1")
    assert other != moto_s3.get("lsio-mutable", f"{prefix}/c/0/0")
    moto_s3.put("lsio-mutable", f"{prefix}/c/0/0", other)
    with pytest.raises(lsio.StorageError) as ei:
        if api == "getitem":
            arr[20:30, 20:30]
        elif api == "read_crops":
            arr.read_crops(np.array([[60, 60], [20, 20]]), (10, 10))
        else:
            arr.oindex[[25, 3], :]
    msg = str(ei.value)
    assert "changed since its index was read" in msg and "412" in msg
    assert ei.value.errno == errno.ESTALE
    assert f"{url}/c/0/0" in msg
    # A fresh handle reads the new content (the index is read again).
    fresh = lsio.open(url, storage_options=signed(moto_s3))
    assert_same_bits(fresh[0:50, 0:50], b.expected[50:100, 50:100])


# --------------------------------------------------------------------------------------
# 5. Workers and pickling
# --------------------------------------------------------------------------------------

CROP = (10, 17)


def _loader_batches(ds, sampler, method, **kw):
    from torch.utils.data import DataLoader

    from lsio.torch import collate

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork of a threaded process
        loader = DataLoader(ds, sampler=sampler, batch_size=4, collate_fn=collate, num_workers=2,
                            multiprocessing_context=method, timeout=60, **kw)
        it = iter(loader)
        try:
            return [batch.numpy().copy() for batch in it]
        finally:
            # Now, also after a worker's error (else whenever the traceback is collected).
            it._shutdown_workers()


def _crop_dataset(moto, stores, **kw):
    """(CropDataset over an Array on moto that the parent has read, its sampler, the
    expected batches from zarr-python's read of the local copy)."""
    from lsio.torch import CropDataset, CropSampler

    store = stores.get("z_shard_zstd_end")
    ref = store.zarr_full()
    arr = lsio.open(matrix_url(store.name), threads=2, storage_options=signed(moto))
    assert_same_bits(arr[...], ref)  # the parent reads first: index cache, store, pool
    ds = CropDataset(arr, CROP, length=16, seed=7, **kw)
    sampler = CropSampler(ds, num_replicas=1, rank=0, seed=3)
    keys = list(sampler)
    want = []
    for i in range(0, len(keys), 4):
        (st,) = ds.source.starts(keys[i:i + 4])
        want.append(np.stack([ref[crop_slices(s, CROP)] for s in st]))
    return arr, ref, ds, sampler, want


@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_dataloader_workers(s3_matrix, stores, moto_s3, method):
    """Workers get the Array itself (forked, or pickled for spawn/forkserver) and read
    through their own connections."""
    pytest.importorskip("torch")
    arr, ref, ds, sampler, want = _crop_dataset(moto_s3, stores, worker_threads=None)
    got = _loader_batches(ds, sampler, method)
    assert len(got) == len(want) == 4
    for g, w in zip(got, want):
        assert_same_bits(g, w, method)
    assert_same_bits(arr[5:45, 7:8], ref[5:45, 7:8])  # the parent still reads


def test_dataloader_workers_with_worker_threads(s3_matrix, stores, moto_s3):
    """lsio.torch's defaults: workers reopen the array with worker_threads=1
    (lsio.grain.with_options) and worker_init_fn."""
    pytest.importorskip("torch")
    from lsio.torch import worker_init_fn

    arr, ref, ds, sampler, want = _crop_dataset(moto_s3, stores)
    got = _loader_batches(ds, sampler, "fork", worker_init_fn=worker_init_fn)
    assert len(got) == len(want) == 4
    for g, w in zip(got, want):
        assert_same_bits(g, w, "fork, worker_threads=1")


def test_with_options_keeps_the_remote_store(s3_matrix, stores, moto_s3):
    """lsio.grain.with_options (used by CropDataset/CropSource in workers) on a remote
    Array gives a handle on the same s3:// array."""
    from lsio.grain import with_options

    store = stores.get("z_shard_zstd_end")
    arr = lsio.open(matrix_url(store.name), threads=2, storage_options=signed(moto_s3))
    one = with_options(arr, threads=1)
    assert one.options["threads"] == 1
    assert_same_bits(one[...], store.expected)


def test_pickle_round_trip(s3_matrix, stores, moto_s3):
    store = stores.get("ts_shard_zstd_start")
    arr = lsio.open(matrix_url(store.name), storage_options=signed(moto_s3))
    assert_same_bits(arr[3:9], store.expected[3:9])
    clone = pickle.loads(pickle.dumps(arr))
    assert clone.path == arr.path == matrix_url(store.name)
    assert clone.shape == arr.shape and clone.chunks == arr.chunks
    assert_same_bits(clone[...], store.expected)
    assert clone.stats()["requests"] >= 1


# --------------------------------------------------------------------------------------
# 6. Groups and xarray
# --------------------------------------------------------------------------------------


def _write_group(path, consolidated: bool):
    rng = np.random.default_rng(5)
    root = zarr.open_group(str(path), mode="w", attributes={"title": "s3 group"})
    a = root.create_array("a", shape=(20, 30), chunks=(5, 10), shards=(10, 30), dtype="f4",
                          dimension_names=["y", "x"], attributes={"units": "K"})
    a[:10] = rng.standard_normal((10, 30)).astype("f4")  # second shard row missing
    b = root.create_array("b", shape=(7,), chunks=(3,), dtype="i2", fill_value=-1)
    b[:] = np.arange(7, dtype="i2")
    sub = root.create_group("sub", attributes={"kind": "child"})
    c = sub.create_array("c", shape=(4, 4), chunks=(2, 2), dtype="u8")
    c[:] = np.arange(16, dtype="u8").reshape(4, 4) * (2**60)
    if consolidated:
        zarr.consolidate_metadata(str(path))
    return {"a": np.asarray(zarr.open_array(str(path / "a"))[...]),
            "b": np.asarray(zarr.open_array(str(path / "b"))[...]),
            "sub/c": np.asarray(zarr.open_array(str(path / "sub" / "c"))[...])}


@pytest.fixture(scope="module")
def s3_groups(moto_s3, tmp_path_factory):
    root = tmp_path_factory.mktemp("s3groups")
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, cons in (("cons", True), ("plain", False)):
            data = _write_group(root / f"{name}.zarr", cons)
            moto_s3.upload_dir(root / f"{name}.zarr", "lsio-groups", f"{name}.zarr")
            out[name] = (f"s3://lsio-groups/{name}.zarr", data)
    return out


def test_consolidated_group(s3_groups, moto_s3):
    url, data = s3_groups["cons"]
    g = lsio.open_group(url, storage_options=signed(moto_s3))
    assert g.consolidated
    assert g.array_names == ("a", "b")
    assert g.group_names == ("sub",)
    assert sorted(p for p, _ in g.walk_arrays()) == ["a", "b", "sub/c"]
    assert g.attrs == {"title": "s3 group"}
    assert g["sub"].attrs == {"kind": "child"}
    for name, want in data.items():
        got = g[name][...]
        assert_same_bits(got, want, name)
    assert g["a"].dimension_names == ("y", "x") and g["a"].attrs == {"units": "K"}
    assert_same_bits(lsio.open(url, "sub/c", storage_options=signed(moto_s3))[1:], data["sub/c"][1:])


def test_opening_a_group_as_an_array_names_its_arrays(s3_groups, moto_s3, monkeypatch):
    """``lsio.open(group_url)`` raises FormatError naming the group's arrays, as locally.

    AWS_ENDPOINT_URL points at moto only so that a lookup made without the caller's
    storage_options fails in milliseconds (else it goes to the real AWS endpoint)."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_s3.endpoint_url)
    url, _ = s3_groups["cons"]
    with pytest.raises(lsio.FormatError, match="is a Zarr group") as ei:
        lsio.open(url, storage_options=signed(moto_s3))
    assert "arrays: 'a', 'b', 'sub/c'" in str(ei.value), str(ei.value)


def test_group_without_consolidated_metadata(s3_groups, moto_s3):
    """Listed from the bucket (ListObjectsV2), also on a gs:// URL and with moto checking
    the listing request's signature (its query is signed too)."""
    url, data = s3_groups["plain"]
    g = lsio.open_group(url, storage_options=signed(moto_s3))
    assert not g.consolidated
    for name, want in data.items():
        assert_same_bits(g[name][...], want, name)
    assert "a" in g and "sub/c" in g and "nope" not in g
    with pytest.raises(KeyError):
        g["nope"]
    # Listed with ListObjectsV2 (delimiter '/'), as zarr-python lists it.
    assert g.array_names == ("a", "b")
    assert g.group_names == ("sub",)
    assert sorted(p for p, _ in g.walk_arrays()) == ["a", "b", "sub/c"]
    assert g["sub"].array_names == ("c",)
    assert list(g) == ["a", "b", "sub"]
    with pytest.raises(lsio.FormatError, match="consolidated metadata"):
        lsio.open_group(url, consolidated=True, storage_options=signed(moto_s3))


def test_xarray_open_dataset(moto_s3, tmp_path):
    xr = pytest.importorskip("xarray")
    import pandas as pd

    rng = np.random.default_rng(8)
    ds = xr.Dataset(
        {
            "t2m": (("time", "lat", "lon"), rng.normal(280, 5, (4, 10, 12)).astype("f4"),
                    {"units": "K"}),
            "precip": (("time", "lat", "lon"), rng.integers(0, 100, (4, 10, 12)).astype("i2")),
            "mask": (("lat", "lon"), rng.random((10, 12)) > 0.5),
        },
        coords={"time": pd.date_range("2000-01-01", periods=4),
                "lat": np.linspace(-45, 45, 10), "lon": np.linspace(0, 330, 12).astype("f4")},
        attrs={"title": "s3 dataset"},
    )
    local = tmp_path / "ds.zarr"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds.to_zarr(local, zarr_format=3, consolidated=True,
                   encoding={"t2m": {"chunks": (2, 5, 6)}})
    moto_s3.upload_dir(local, "lsio-xarray", "ds.zarr")
    url = "s3://lsio-xarray/ds.zarr"
    got = xr.open_dataset(url, engine="lsio", storage_options=signed(moto_s3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = xr.open_zarr(local)
        xr.testing.assert_identical(got.load(), ref.load())
    sel = dict(time=slice(1, 3), lat=slice(2, 9, 3))
    again = xr.open_dataset(url, engine="lsio", storage_options=signed(moto_s3))
    xr.testing.assert_identical(again.isel(sel).load(), ref.isel(sel).load())
    # dask: one task per chunk, run on dask's threads.
    lazy = xr.open_dataset(url, engine="lsio", storage_options=signed(moto_s3), chunks={})
    assert lazy["t2m"].data.chunksize == (2, 5, 6)
    xr.testing.assert_identical(lazy.compute(), ref.compute())


# --------------------------------------------------------------------------------------
# 7. CLI
# --------------------------------------------------------------------------------------


def _cli_options(moto):
    return ["--storage-option", f"endpoint_url={moto.endpoint_url}",
            "--storage-option", f"key={moto.access_key_id}",
            "--storage-option", f"secret={moto.secret_access_key}",
            "--storage-option", f"region={moto.region}",
            "--storage-option", "timeout=5", "--storage-option", "retries=1"]


def test_cli_info(s3_matrix, moto_s3, capsys):
    url = matrix_url("z_shard_zstd_end")
    assert lsio.cli.main(["info", url, *_cli_options(moto_s3)]) == 0
    out, err = capsys.readouterr()
    assert url in out
    assert "(100, 100)" in out and "uint16" in out
    assert "chunks         (10, 10)   shards (50, 50)" in out
    assert "4 of 4 stored" in out  # shards
    secret_free(out + err, moto_s3.secret_access_key)

    assert lsio.cli.main(["info", url, "--json", *_cli_options(moto_s3)]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert doc["store"] == url and doc["kind"] == "array"
    (info,) = doc["arrays"]
    assert info["shape"] == [100, 100] and info["chunks"] == [10, 10] and info["shards"] == [50, 50]
    assert info["files"] is None and info["bytes_on_disk"] is None
    assert info["chunks_present"] == info["chunks_total"] == 100
    secret_free(out + err, moto_s3.secret_access_key)


def test_cli_info_anonymous_group(s3_public, s3_groups, moto_s3, capsys):
    url, b = s3_public
    assert lsio.cli.main(["info", url, "--anon", "--storage-option",
                          f"endpoint_url={moto_s3.endpoint_url}", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["arrays"][0]["shape"] == list(b.expected.shape)
    assert doc["arrays"][0]["shards_present"] == 1

    gurl, _ = s3_groups["cons"]
    assert lsio.cli.main(["info", gurl, *_cli_options(moto_s3)]) == 0
    out = capsys.readouterr().out
    assert f"group {gurl}: 3 arrays (consolidated metadata)" in out


def test_cli_bench(s3_matrix, moto_s3, capsys):
    url = matrix_url("z_shard_zstd_end")
    args = ["bench", url, "--rounds", "2", "--batch", "4", "--crop", "10,10", "--threads", "2",
            *_cli_options(moto_s3)]
    assert lsio.cli.main(args) == 0
    out, err = capsys.readouterr()
    assert "crop (10, 10) x batch 4, 2 batches, io=http" in out
    assert "requests (" in out and "per batch, warm-up included)" in out
    secret_free(out + err, moto_s3.secret_access_key)

    assert lsio.cli.main([*args, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["batches"] == 2 and doc["io"] == "http" and doc["path"] == url
    st = doc["store_stats"]
    assert st["requests"] > 0 and st["errors"] == 0
    assert st["bytes_fetched"] >= st["bytes_used"] > 0


@pytest.fixture(scope="module")
def s3_bench_store(moto_s3, tmp_path_factory):
    """A sharded float32 array whose inner chunks (1, 32, 32) a (2, 40, 40) crop takes a few
    of, scattered through each (4, 128, 128) shard: the coalescing planner merges the gaps."""
    from zarr.codecs import ZstdCodec

    path = tmp_path_factory.mktemp("bench") / "w.zarr"
    z = zarr.create_array(str(path), shape=(8, 256, 256), chunks=(1, 32, 32), shards=(4, 128, 128), dtype="f4",
                          compressors=[ZstdCodec(level=3)])
    z[:] = np.random.default_rng(0).standard_normal((8, 256, 256)).astype("f4")
    moto_s3.create_bucket("lsio-bench")
    moto_s3.upload_dir(path, "lsio-bench", "w.zarr")
    return path, "s3://lsio-bench/w.zarr"


def _bench_used_bytes(local, crop, batch, rounds, seed=0):
    """Bytes the timed batches of `lsio bench` need, from the stored chunk sizes: the chunks
    each batch touches (once per batch) and the index of each shard first touched then."""
    import itertools

    arr = lsio.open(str(local))
    sizes = np.asarray(arr._native().stored_chunk_nbytes())
    per = tuple(s // c for s, c in zip(arr.shards, arr.chunks))
    index_bytes = int(np.prod(per)) * 16 + 4  # (offset, nbytes) per chunk + crc32c
    c = np.asarray(arr.chunks)

    def chunks(starts):
        out = set()
        for st in starts:
            lo, hi = st // c, (st + np.asarray(crop) - 1) // c
            out.update(itertools.product(*(range(a, b + 1) for a, b in zip(lo, hi))))
        return out

    rng = np.random.default_rng(seed)  # the draws of cmd_bench: the warm-up batch, then each round
    hi = np.subtract(arr.shape, crop) + 1
    shards = {tuple(np.asarray(k) // per) for k in chunks(rng.integers(0, hi, size=(batch, arr.ndim)))}
    used = 0
    for _ in range(rounds):
        touched = chunks(rng.integers(0, hi, size=(batch, arr.ndim)))
        used += sum(int(sizes[k]) for k in touched)
        new = {tuple(np.asarray(k) // per) for k in touched} - shards
        used += index_bytes * len(new)
        shards |= new
    return used


def test_cli_bench_reports_bytes_fetched_per_byte_used_and_why(s3_bench_store, moto_s3, capsys):
    # A bench on S3 fetched 2.5x the bytes it used. The reads need exactly the chunks and
    # indexes the crops touch (bytes_used, checked here against the stored chunk sizes); the
    # excess is the planner merging byte ranges less than max_gap apart into one request.
    # bench reports the timed batches' ratio, says where the excess comes from, and takes
    # --max-gap to trade requests for bytes (0: only used bytes are fetched).
    local, url = s3_bench_store
    args = ["bench", url, "--crop", "2,40,40", "--batch", "6", "--rounds", "3", "--threads", "2",
            *_cli_options(moto_s3)]
    want = _bench_used_bytes(local, (2, 40, 40), 6, 3)
    assert lsio.cli.main([*args, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    tm, co = doc["timed_store_stats"], doc["coalescing"]
    assert tm["bytes_used"] == want
    assert doc["fetched_per_used"] == tm["bytes_fetched"] / tm["bytes_used"] > 1.2  # gaps of a shard merged
    assert co["adaptive"] is True and co["max_gap"] > 0
    assert doc["store_stats"]["bytes_fetched"] > tm["bytes_fetched"]  # totals: open and warm-up too
    assert lsio.cli.main([*args, "--max-gap", "0", "--json"]) == 0
    exact = json.loads(capsys.readouterr().out)
    assert exact["timed_store_stats"]["bytes_used"] == want
    assert exact["timed_store_stats"]["bytes_fetched"] == want and exact["fetched_per_used"] == 1.0
    assert exact["coalescing"] == {"max_gap": 0, "max_request": exact["coalescing"]["max_request"], "adaptive": False}
    assert exact["timed_store_stats"]["requests"] > tm["requests"]
    assert lsio.cli.main(args) == 0
    out = capsys.readouterr().out
    assert "timed batches: " in out and "fetched beyond use is gap filling" in out and "--max-gap 0" in out
    assert lsio.cli.main([*args, "--max-gap", "0"]) == 0
    out = capsys.readouterr().out
    assert "(1.00x)" in out and "beyond use" not in out
    assert lsio.cli.main([*args, "--max-gap", "lots"]) == 2
    assert "--max-gap" in capsys.readouterr().err


def test_cli_verify_a_deleted_shard_beside_a_corrupt_index(s3_bench_store, moto_s3, capsys):
    # As on a local store (test_cli.py): the object of a deleted shard is looked up, so its
    # chunks count as missing, not as read, when another shard's index breaks the survey.
    local, _ = s3_bench_store
    moto_s3.upload_dir(local, "lsio-bench", "broken.zarr")
    moto_s3.delete("lsio-bench", "broken.zarr/c/0/0/1")
    raw = bytearray(moto_s3.get("lsio-bench", "broken.zarr/c/1/1/0"))
    raw[-2] ^= 0x5A  # inside the index's crc32c
    moto_s3.put("lsio-bench", "broken.zarr/c/1/1/0", bytes(raw))
    assert lsio.cli.main(["verify", "s3://lsio-bench/broken.zarr", "--json", *_cli_options(moto_s3)]) == 1
    (r,) = json.loads(capsys.readouterr().out)["arrays"]
    assert "survey_error" in r and r["missing_by_shard"]
    per_shard = 4 * 4 * 4
    assert r["missing_count"] == per_shard and r["corrupt_count"] == per_shard
    assert r["chunks_checked"] == 8 * 8 * 8 - 2 * per_shard


def test_cli_verify_names_the_url(s3_matrix, moto_s3, capsys):
    url = matrix_url("z_shard_sparse")
    assert lsio.cli.main(["verify", url, "--json", *_cli_options(moto_s3)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is True and doc["corrupt_chunks"] == 0
    assert doc["arrays"][0]["chunks_present"] == 2
    assert doc["store"] == url, doc["store"]


# --------------------------------------------------------------------------------------
# 8. Statistics and secrets in what an Array shows
# --------------------------------------------------------------------------------------


def test_stats_count_requests_and_bytes(s3_matrix, moto_s3):
    arr = lsio.open(matrix_url("z_large_shard"), storage_options=signed(moto_s3))
    first = arr.stats()
    assert first["requests"] >= 1 and first["bytes_used"] > 0  # zarr.json
    arr[0:10, 0:10]
    st = arr.stats()
    assert st["requests"] > first["requests"]
    assert st["bytes_fetched"] >= st["bytes_used"] > first["bytes_used"]
    assert st["retries"] == 0 and st["errors"] == 0
    # Reads cached shard indexes only once: a repeat costs fewer requests.
    before = arr.stats()["requests"]
    arr[0:10, 0:10]
    assert 0 < arr.stats()["requests"] - before < st["requests"] - first["requests"]


@pytest.mark.parametrize("spelling", ["s3fs", "canonical", "client_kwargs"])
def test_options_and_repr_hide_the_secret(s3_matrix, moto_s3, spelling):
    m = moto_s3
    so = {
        "s3fs": signed(m),
        "canonical": {"endpoint_url": m.endpoint_url, "access_key_id": m.access_key_id,
                      "secret_access_key": m.secret_access_key},
        "client_kwargs": {"client_kwargs": {"endpoint_url": m.endpoint_url,
                                            "aws_access_key_id": m.access_key_id,
                                            "aws_secret_access_key": m.secret_access_key}},
    }[spelling]
    arr = lsio.open(matrix_url("z_plain"), storage_options=so)
    arr[:3, :3]
    secret_free(repr(arr), m.secret_access_key)
    secret_free(str(arr.options), m.secret_access_key)
    secret_free(arr._repr_html_(), m.secret_access_key)


# --------------------------------------------------------------------------------------
# gs:// through GCS's S3-compatible XML API (here: moto standing in for
# storage.googleapis.com via endpoint_url)
# --------------------------------------------------------------------------------------


def test_gs_url_with_hmac_keys_is_signed_and_reads_exactly(s3_matrix, stores, moto_s3_signed):
    """gs:// with HMAC keys signs SigV4 (service s3, region "auto") over path-style URLs;
    moto verifies every signature here."""
    moto = moto_s3_signed
    b = stores.get("z_shard_sparse")
    url = f"gs://{MATRIX_BUCKET}/stores/z_shard_sparse.zarr"
    arr = lsio.open(url, storage_options={"endpoint_url": moto.endpoint_url, "access_key_id": moto.access_key_id,
                                          "secret_access_key": moto.secret_access_key, **LIMITS})
    assert arr.path == url
    assert arr._remote.to_core()["signing"] == "sigv4"
    assert arr._remote.to_core()["region"] == "auto"
    assert_same_bits(arr[...], b.expected)
    with pytest.raises(lsio.StorageError) as ei:
        lsio.open(url, storage_options={"endpoint_url": moto.endpoint_url, "access_key_id": moto.access_key_id,
                                        "secret_access_key": "wrong-secret-value", **LIMITS})
    assert ei.value.errno == errno.EACCES
    assert ei.value.path.startswith("gs://")
    secret_free(str(ei.value), "wrong-secret-value")


def test_gs_url_anonymous_reads_a_public_bucket(s3_public, moto_s3):
    _, b = s3_public
    url = f"gs://{PUBLIC_BUCKET}/sparse.zarr"
    arr = lsio.open(url, storage_options={"endpoint_url": moto_s3.endpoint_url, "token": "anon", **LIMITS})
    assert arr._remote.to_core()["signing"] == "none"
    assert_same_bits(arr[...], b.expected)


def test_listing_is_signed_and_paginated(s3_groups, moto_s3_signed, moto_s3):
    """A group with more children than one ListObjectsV2 page (moto pages at 1000 keys):
    every child is found, and moto verified the signature of each listing request."""
    import warnings as _w

    base = "lsio-groups/wide.zarr"
    moto = moto_s3_signed
    moto.put("lsio-groups", "wide.zarr/zarr.json", b'{"zarr_format": 3, "node_type": "group", "attributes": {}}')
    names = [f"g{i:04d}" for i in range(1005)]
    from concurrent.futures import ThreadPoolExecutor as _Pool

    with _Pool(8) as pool:
        list(pool.map(lambda n: moto.put("lsio-groups", f"wide.zarr/{n}/zarr.json",
                                         b'{"zarr_format": 3, "node_type": "group", "attributes": {}}'), names))
    with _w.catch_warnings():
        _w.simplefilter("ignore")
        g = lsio.open_group(f"s3://{base}", storage_options=signed(moto))
        assert g.group_names == tuple(names)
    gs = lsio.open_group(f"gs://{base}", storage_options={"endpoint_url": moto.endpoint_url,
                                                           "access_key_id": moto.access_key_id,
                                                           "secret_access_key": moto.secret_access_key, **LIMITS})
    assert gs.group_names[:3] == ("g0000", "g0001", "g0002") and len(gs.group_names) == 1005


def test_a_missing_bucket_says_bucket(moto_s3):
    """NoSuchBucket is not a missing object: the open fails naming the bucket (a
    FileNotFoundError), rather than "no zarr.json" or chunks read as the fill value."""
    with pytest.raises(lsio.NotFoundError, match="bucket does not exist") as ei:
        lsio.open("s3://lsio-no-such-bucket/a.zarr", storage_options=signed(moto_s3))
    assert "NoSuchBucket" in str(ei.value) and "lsio-no-such-bucket" in str(ei.value)

"""Icechunk repositories read by lsio (lsio.open_icechunk, lsio/_icechunk.py), compared bit for
bit with zarr-python reading the same snapshots through the ``icechunk`` package.

Spec version 1 repositories are written by icechunk 1.x in this interpreter (pip gives 1.1 on
Python 3.11); spec version 2 ones by icechunk 2.x, which needs Python >= 3.12: scripts/test.sh
makes a venv of its own for it and names its interpreter in LSIO_ICECHUNK2_PYTHON. Both run
tests/python/icechunk_writer.py, which also records what zarr-python reads. Icechunk's own
old-format repositories are in tests/data/icechunk (SOURCE.md says from where).
"""

from __future__ import annotations

import errno
import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import lsio
from hdf5_matrix import assert_reads_in_worker_processes, assert_reads_like

icechunk = pytest.importorskip("icechunk")
zarr = pytest.importorskip("zarr")

HERE = Path(__file__).resolve().parent
WRITER = HERE / "icechunk_writer.py"
FIXTURES = HERE.parent / "data" / "icechunk"


def _icechunk2_python() -> str:
    py = os.environ.get("LSIO_ICECHUNK2_PYTHON")
    if not py:
        pytest.skip("no interpreter with icechunk 2.x (scripts/test.sh sets LSIO_ICECHUNK2_PYTHON when a CPython "
                    ">= 3.12 exists on the machine; icechunk 2.x needs it)")
    return py


def _run(python: str, *args: str) -> None:
    r = subprocess.run([python, str(WRITER), *map(str, args)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]


def _written(tmp_path_factory, python: str, split: bool) -> Path:
    out = tmp_path_factory.mktemp("icechunk")
    _run(python, "history", out, *(["split"] if split else []))
    return out


@pytest.fixture(scope="module", params=["v1", "v1-split", "v2", "v2-split"])
def history(request, tmp_path_factory):
    version, _, split = request.param.partition("-")
    python = sys.executable if version == "v1" else _icechunk2_python()
    if version == "v1" and int(icechunk.__version__.split(".")[0]) >= 2:
        pytest.skip("this interpreter's icechunk writes spec version 2")
    out = _written(tmp_path_factory, python, bool(split))
    return out, json.loads((out / "expected" / "expected.json").read_text())


def _open(repo, ref: str, **kw):
    kind, _, name = ref.partition(":")
    return lsio.open_icechunk(repo, **{kind: name}, **kw)


def _check_all(repo, expected: dict, out: Path, rng) -> None:
    for ref, e in expected.items():
        g = _open(repo, ref)
        assert g.snapshot_id == e["snapshot"], ref
        for path, f in e["arrays"].items():
            want = np.load(out / f)
            a = g[path]
            if want.ndim == 0:
                assert a[...].tobytes() == want.tobytes() and a.dtype == want.dtype.newbyteorder("="), (ref, path)
                continue
            assert_reads_like(a, want, rng, f"{ref} {path}")


def test_history_reads_like_zarr_python_through_icechunk(history):
    out, expected = history
    _check_all(out / "repo", expected, out / "expected", np.random.default_rng(0))
    # The spec version lsio read is the one written.
    head = next((out / "repo" / "snapshots").iterdir()).read_bytes()
    assert head[:12] == "ICE🧊CHUNK".encode()


def test_branches_tags_and_deleted_things(history):
    out, expected = history
    repo = out / "repo"
    main, dev, v1 = (_open(repo, r) for r in ("branch:main", "branch:dev", "tag:v1"))
    assert "tiny" not in main.array_names and "new" in main.array_names  # deleted, created
    assert "tiny" in v1.array_names and "new" not in v1.array_names
    assert main.attrs == {"title": "lsio icechunk history"}
    assert main["sub"]["deep"].attrs == {"level": 2}
    assert lsio.open_icechunk(repo).snapshot_id == main.snapshot_id  # default: branch main
    assert dev.snapshot_id != main.snapshot_id
    with pytest.raises(lsio.NotFoundError, match="no tag 'gone'"):
        lsio.open_icechunk(repo, tag="gone")
    with pytest.raises(lsio.NotFoundError, match="no branch 'nope'"):
        lsio.open_icechunk(repo, branch="nope")
    with pytest.raises(ValueError, match="at most one"):
        lsio.open_icechunk(repo, branch="main", tag="v1")
    with pytest.raises(ValueError, match="snapshot id"):
        lsio.open_icechunk(repo, snapshot="not-an-id")
    with pytest.raises(ValueError, match="not an Icechunk branch name"):
        lsio.open_icechunk(repo, branch="../main")
    with pytest.raises(lsio.NotFoundError, match="no snapshot 1CECHNKREP0F1RSTCMT1|snapshots/1CECHNKREP0F1RSTCMT1"):
        lsio.open_icechunk(repo, snapshot="1CECHNKREP0F1RSTCMT1")
    # Crockford base 32 is read as icechunk reads it: any case, I/L for 1, O for 0.
    assert lsio.open_icechunk(repo, snapshot=v1.snapshot_id.lower()).snapshot_id == v1.snapshot_id
    with pytest.raises(KeyError):
        main["tiny"]
    # Open by snapshot id: the same data as the tag.
    by_id = lsio.open_icechunk(repo, snapshot=v1.snapshot_id)
    np.testing.assert_array_equal(by_id["t2m"][...], v1["t2m"][...])
    # lsio.open takes an array of a local repository's branch main.
    np.testing.assert_array_equal(lsio.open(repo, "sub/deep/x")[...], main["sub/deep/x"][...])
    with pytest.raises(lsio.FormatError, match="is a group"):
        lsio.open(repo, "sub")
    # open_group finds a local repository by itself.
    assert lsio.open_group(repo).snapshot_id == main.snapshot_id
    assert lsio.open_group(str(repo))["t2m"].shape == (20, 30, 40)


def test_pickled_arrays_read_the_snapshot_they_were_opened_at(tmp_path):
    if int(icechunk.__version__.split(".")[0]) >= 2:
        pytest.skip("this interpreter's icechunk writes spec version 2 (covered by the other tests)")
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(tmp_path / "r")))
    s = repo.writable_session("main")
    zarr.create_array(s.store, name="x", shape=(8, 8), chunks=(4, 4), dtype="i4")[...] = 1
    s.commit("one")
    a = lsio.open_icechunk(tmp_path / "r")["x"]
    blob = pickle.dumps(a)
    s = repo.writable_session("main")
    zarr.open_array(s.store, path="x", mode="r+")[...] = 2
    s.commit("two")
    assert (pickle.loads(blob)[...] == 1).all()  # the snapshot it was opened at
    assert (a[...] == 1).all()
    assert (lsio.open_icechunk(tmp_path / "r")["x"][...] == 2).all()  # the branch, read fresh
    assert_reads_in_worker_processes(a)


def test_icechunks_own_old_repositories(tmp_path):
    """test-repo-v1, test-repo-v2 and split-repo-v2 from Icechunk's repository: every array
    icechunk reads (without access to virtual chunk containers) reads the same in lsio."""
    cases = [("test-repo-v1", sys.executable)]
    if int(icechunk.__version__.split(".")[0]) >= 2:
        cases = []
    py2 = os.environ.get("LSIO_ICECHUNK2_PYTHON")
    cases += [(n, py2) for n in ("test-repo-v1", "test-repo-v2", "split-repo-v2") if py2]
    if not cases:
        pytest.skip("no icechunk to compare with")
    rng = np.random.default_rng(1)
    for name, py in cases:
        repo = tmp_path / f"{name}-{len(os.listdir(tmp_path))}"
        shutil.copytree(FIXTURES / name, repo)  # icechunk may write beside what it reads
        out = tmp_path / f"{repo.name}-expected"
        _run(py, "expect", repo, out)
        expected = json.loads((out / "expected.json").read_text())
        assert any(e["arrays"] for e in expected.values()), name
        _check_all(repo, {r: e for r, e in expected.items()}, out, rng)
        # Arrays with a virtual chunk in the fixtures' container (s3://testbucket on a server
        # they name, not running here) that icechunk does not read unauthorized: neither
        # does lsio, with a clear error.
        for ref, e in expected.items():
            for path in e["errors"]:
                with pytest.raises(lsio.UnsupportedError, match="not authorized"):
                    _open(repo, ref)[path][...]


def test_remote_repository_on_s3_and_http(history, moto_s3, nginx_server):
    out, expected = history
    bucket = moto_s3.create_bucket(f"lsio-icechunk-{abs(hash(str(out))) % 10**8}")
    moto_s3.upload_dir(out / "repo", bucket, "data/repo")
    so = {"endpoint_url": moto_s3.endpoint_url, "key": moto_s3.access_key_id, "secret": moto_s3.secret_access_key,
          "region": moto_s3.region, "timeout": 10, "retries": 1}
    url = f"s3://{bucket}/data/repo"
    rng = np.random.default_rng(2)
    for ref in ("branch:main", "tag:v1"):
        e = expected[ref]
        g = _open(url, ref, storage_options=so)
        assert g.snapshot_id == e["snapshot"]
        for path in ("t2m", "u", "sharded"):
            assert_reads_like(g[path], np.load(out / "expected" / e["arrays"][path]), rng, f"s3 {ref} {path}")
    main_t2m = np.load(out / "expected" / expected["branch:main"]["arrays"]["t2m"])
    a = lsio.open_icechunk(url, storage_options=so)["t2m"]
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(a))[3], main_t2m[3])
    # lsio.open_group finds the repository at a URL by itself (when there is no zarr.json).
    g = lsio.open_group(url, storage_options=so)
    assert g.snapshot_id == expected["branch:main"]["snapshot"]
    np.testing.assert_array_equal(g["t2m"][1:3], main_t2m[1:3])
    # Read-only static hosting over HTTP (nginx): the same files, no listing needed.
    server = nginx_server(out)
    h = lsio.open_icechunk(server.http_url + "/repo", tag="v1")
    assert h.snapshot_id == expected["tag:v1"]["snapshot"]
    v1 = expected["tag:v1"]["arrays"]
    for path in ("t2m", "u", "tiny", "sub/deep/x"):
        np.testing.assert_array_equal(h[path][...], np.load(out / "expected" / v1[path]))
    # dask, through pickled arrays (one task per shard or chunk).
    pytest.importorskip("dask")
    np.testing.assert_allclose(float(h["t2m"].to_dask().sum().compute()),
                               float(np.load(out / "expected" / v1["t2m"]).astype("f8").sum()), rtol=1e-6)


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_virtual_chunks_written_by_each_version(version, tmp_path):
    """Virtual references to a local file (percent-encoded name, last-modified checksums,
    missing chunks); version 2 adds container-relative locations (vcc://) and locations
    compressed with the manifest's zstd dictionary. Compared with zarr-python through icechunk."""
    python = sys.executable if version == "v1" else _icechunk2_python()
    if version == "v1" and int(icechunk.__version__.split(".")[0]) >= 2:
        pytest.skip("this interpreter's icechunk writes spec version 2")
    _run(python, "virtual", tmp_path)
    prefix = (tmp_path / "prefix.txt").read_text()
    expected = json.loads((tmp_path / "expected" / "expected.json").read_text())["branch:main"]
    g = lsio.open_icechunk(tmp_path / "repo", virtual_chunk_containers={prefix: {}})
    assert g.snapshot_id == expected["snapshot"]
    for path, f in expected["arrays"].items():
        assert_reads_like(g[path], np.load(tmp_path / "expected" / f), np.random.default_rng(4), f"{version} {path}")


def _virtual_repo(tmp_path, data_dir: Path, etag_target=None):
    """A spec-version-1 repository whose array `v` (8 x 8 int32, chunks 4 x 4, no compression)
    has its chunks in data_dir/chunks.bin (file://), with last-modified checksums."""
    import datetime

    raw = np.arange(64, dtype="<i4").reshape(8, 8)
    blob = b"".join(np.ascontiguousarray(raw[i:i + 4, j:j + 4]).tobytes() for i in (0, 4) for j in (0, 4))
    target = data_dir / "chunks.bin"
    target.write_bytes(blob)
    config = icechunk.RepositoryConfig.default()
    prefix = f"file://{data_dir}/"
    config.set_virtual_chunk_container(icechunk.VirtualChunkContainer(prefix, icechunk.local_filesystem_store(str(data_dir))))
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(tmp_path / "vrepo")), config,
                                      authorize_virtual_chunk_access={prefix: None})
    s = repo.writable_session("main")
    zarr.create_array(s.store, name="v", shape=(8, 8), chunks=(4, 4), dtype="<i4", compressors=None, fill_value=0)
    when = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=2)
    for n, (i, j) in enumerate(((0, 0), (0, 1), (1, 0), (1, 1))):
        s.store.set_virtual_ref(f"v/c/{i}/{j}", f"{prefix}chunks.bin", offset=n * 64, length=64, checksum=when)
    s.commit("virtual")
    return tmp_path / "vrepo", raw, target, prefix


def test_virtual_chunks_in_local_files(tmp_path):
    if int(icechunk.__version__.split(".")[0]) >= 2:
        pytest.skip("written with icechunk 1.x's API")
    data = tmp_path / "data"
    data.mkdir()
    repo, raw, target, prefix = _virtual_repo(tmp_path, data)
    # The repository's container is read only once authorized (as icechunk asks too).
    with pytest.raises(lsio.UnsupportedError, match="not authorized"):
        lsio.open_icechunk(repo)["v"][...]
    a = lsio.open_icechunk(repo, virtual_chunk_containers={prefix: {}})["v"]
    np.testing.assert_array_equal(a[...], raw)
    np.testing.assert_array_equal(a[1:7, 2:5], raw[1:7, 2:5])
    # Locations are kept percent-encoded ("my%20file.bin"): decoded before the file is named.
    (data / "my file.bin").write_bytes(raw.tobytes())
    config = icechunk.RepositoryConfig.default()
    config.set_virtual_chunk_container(icechunk.VirtualChunkContainer(prefix, icechunk.local_filesystem_store(str(data))))
    r2 = icechunk.Repository.create(icechunk.local_filesystem_storage(str(tmp_path / "spaces")), config,
                                    authorize_virtual_chunk_access={prefix: None})
    s = r2.writable_session("main")
    zarr.create_array(s.store, name="w", shape=(64,), chunks=(64,), dtype="<i4", compressors=None)
    s.store.set_virtual_ref("w/c/0", f"{prefix}my file.bin", offset=0, length=256)
    s.commit("a name with a space")
    np.testing.assert_array_equal(lsio.open_icechunk(tmp_path / "spaces", virtual_chunk_containers={prefix: {}})["w"][...],
                                  raw.ravel())
    # Rewritten after the references were: the last-modified check refuses it, typed, naming it.
    os.utime(target, (os.stat(target).st_atime, os.stat(target).st_mtime + 3600))
    with pytest.raises(lsio.StorageError, match="chunks.bin.*modified after") as e:
        lsio.open_icechunk(repo, virtual_chunk_containers={prefix: {}})["v"][...]
    assert e.value.errno == errno.ESTALE


def test_virtual_chunks_in_s3_objects_with_etags(tmp_path, moto_s3):
    if int(icechunk.__version__.split(".")[0]) >= 2:
        pytest.skip("written with icechunk 1.x's API")
    bucket = moto_s3.create_bucket("lsio-icechunk-virtual")
    raw = np.arange(64, dtype="<i4").reshape(8, 8)
    blob = b"".join(np.ascontiguousarray(raw[i:i + 4, j:j + 4]).tobytes() for i in (0, 4) for j in (0, 4))
    moto_s3.put(bucket, "src/chunks.bin", blob)
    etag = moto_s3.client.head_object(Bucket=bucket, Key="src/chunks.bin")["ETag"]
    prefix = f"s3://{bucket}/src/"
    config = icechunk.RepositoryConfig.default()
    config.set_virtual_chunk_container(icechunk.VirtualChunkContainer(
        prefix, icechunk.s3_store(region=moto_s3.region, endpoint_url=moto_s3.endpoint_url, allow_http=True,
                                  s3_compatible=True)))
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(tmp_path / "vrepo")), config)
    s = repo.writable_session("main")
    zarr.create_array(s.store, name="v", shape=(8, 8), chunks=(4, 4), dtype="<i4", compressors=None, fill_value=0)
    for n, (i, j) in enumerate(((0, 0), (0, 1), (1, 0), (1, 1))):
        s.store.set_virtual_ref(f"v/c/{i}/{j}", f"{prefix}chunks.bin", offset=n * 64, length=64, checksum=etag)
    s.commit("virtual")
    creds = {"key": moto_s3.access_key_id, "secret": moto_s3.secret_access_key, "timeout": 10, "retries": 1}
    a = lsio.open_icechunk(tmp_path / "vrepo", virtual_chunk_containers={prefix: creds})["v"]
    np.testing.assert_array_equal(a[...], raw)
    np.testing.assert_array_equal(a.read_crops([[0, 0], [3, 3]], (4, 5)), np.stack([raw[0:4, 0:5], raw[3:7, 3:8]]))
    # The object rewritten (same size): its ETag no longer matches, and no read returns its bytes.
    moto_s3.put(bucket, "src/chunks.bin", blob[::-1])
    with pytest.raises(lsio.StorageError) as e:
        lsio.open_icechunk(tmp_path / "vrepo", virtual_chunk_containers={prefix: creds})["v"][...]
    assert e.value.errno == errno.ESTALE and "chunks.bin" in str(e.value)
    with pytest.raises(lsio.StorageError):
        a[...]
    # Last-modified checksums: a HEAD at open compares the object's Last-Modified with them.
    import datetime

    moto_s3.put(bucket, "src/chunks.bin", blob)
    for name, when, ok in (("later", datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1), True),
                           ("earlier", datetime.datetime(2001, 1, 1, tzinfo=datetime.timezone.utc), False)):
        r = icechunk.Repository.create(icechunk.local_filesystem_storage(str(tmp_path / name)), config)
        s = r.writable_session("main")
        zarr.create_array(s.store, name="v", shape=(8, 8), chunks=(4, 4), dtype="<i4", compressors=None,
                          fill_value=0)
        for n, (i, j) in enumerate(((0, 0), (0, 1), (1, 0), (1, 1))):
            s.store.set_virtual_ref(f"v/c/{i}/{j}", f"{prefix}chunks.bin", offset=n * 64, length=64, checksum=when)
        s.commit("last-modified")
        g = lsio.open_icechunk(tmp_path / name, virtual_chunk_containers={prefix: creds})
        if ok:
            np.testing.assert_array_equal(g["v"][...], raw)
        else:
            with pytest.raises(lsio.StorageError, match="modified after") as e:
                g["v"]
            assert e.value.errno == errno.ESTALE
    # Without the container's options: the repository's own container (its endpoint) with
    # the process's credentials; with no container at all: a clear error.
    repo2 = icechunk.Repository.create(icechunk.local_filesystem_storage(str(tmp_path / "nocontainer")))
    s = repo2.writable_session("main")
    zarr.create_array(s.store, name="v", shape=(4,), chunks=(4,), dtype="<i4", compressors=None)
    s.store.set_virtual_ref("v/c/0", f"s3://{bucket}/src/chunks.bin", offset=0, length=16,
                            validate_container=False)
    s.commit("no container")
    with pytest.raises(lsio.UnsupportedError, match="no virtual chunk container"):
        lsio.open_icechunk(tmp_path / "nocontainer")["v"][...]


def test_arrays_with_chunks_in_several_places(tmp_path, moto_s3):
    """Native chunks in the repository, virtual ones in a local file and in an S3 object, all
    in one array (icechunk's own old repositories have such arrays): read like zarr-python
    through icechunk, with io_uring/pread for the local share and range requests for the rest."""
    if int(icechunk.__version__.split(".")[0]) >= 2:
        pytest.skip("written with icechunk 1.x's API")
    bucket = moto_s3.create_bucket("lsio-icechunk-mixed")
    rng = np.random.default_rng(5)
    raw = rng.integers(0, 1 << 30, (12, 12), dtype="<i4")
    blocks = {(i, j): np.ascontiguousarray(raw[4 * i:4 * i + 4, 4 * j:4 * j + 4]).tobytes()
              for i in range(3) for j in range(3)}
    data = tmp_path / "data"
    data.mkdir()
    (data / "local.bin").write_bytes(blocks[(0, 0)] + blocks[(0, 1)])
    moto_s3.put(bucket, "src/remote.bin", blocks[(1, 1)] + blocks[(2, 2)])
    etag = moto_s3.client.head_object(Bucket=bucket, Key="src/remote.bin")["ETag"]
    local_prefix, s3_prefix = f"file://{data}/", f"s3://{bucket}/src/"
    config = icechunk.RepositoryConfig.default()
    config.inline_chunk_threshold_bytes = 0
    config.set_virtual_chunk_container(icechunk.VirtualChunkContainer(local_prefix,
                                                                      icechunk.local_filesystem_store(str(data))))
    config.set_virtual_chunk_container(icechunk.VirtualChunkContainer(
        s3_prefix, icechunk.s3_store(region=moto_s3.region, endpoint_url=moto_s3.endpoint_url, allow_http=True,
                                     s3_compatible=True)))
    creds = icechunk.containers_credentials({s3_prefix: icechunk.s3_credentials(
        access_key_id=moto_s3.access_key_id, secret_access_key=moto_s3.secret_access_key), local_prefix: None})
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(tmp_path / "r")), config,
                                      authorize_virtual_chunk_access=creds)
    s = repo.writable_session("main")
    z = zarr.create_array(s.store, name="m", shape=(12, 12), chunks=(4, 4), dtype="<i4", compressors=None,
                          fill_value=-1)
    z[...] = raw  # every chunk native first
    s.store.set_virtual_ref("m/c/0/0", f"{local_prefix}local.bin", offset=0, length=64)
    s.store.set_virtual_ref("m/c/0/1", f"{local_prefix}local.bin", offset=64, length=64)
    s.store.set_virtual_ref("m/c/1/1", f"{s3_prefix}remote.bin", offset=0, length=64, checksum=etag)
    s.store.set_virtual_ref("m/c/2/2", f"{s3_prefix}remote.bin", offset=64, length=64, checksum=etag)
    s.commit("mixed")
    want = zarr.open_array(repo.readonly_session(branch="main").store, path="m", mode="r")[...]
    np.testing.assert_array_equal(want, raw)
    so = {"key": moto_s3.access_key_id, "secret": moto_s3.secret_access_key, "timeout": 10, "retries": 1}
    g = lsio.open_icechunk(tmp_path / "r", virtual_chunk_containers={local_prefix: {}, s3_prefix: so})
    a = g["m"]
    assert_reads_like(a, want, rng, "mixed")
    np.testing.assert_array_equal(a.oindex[[0, 5, 11], [1, 6, 10]], want[np.ix_([0, 5, 11], [1, 6, 10])])
    assert_reads_in_worker_processes(a)
    st = a.stats()  # the S3 target's requests, the chunks every target served
    assert st["requests"] > 0 and st["bytes_used"] >= 4 * 64, st
    # The S3 object rewritten: its ETag no longer matches; the local share alone still reads.
    moto_s3.put(bucket, "src/remote.bin", blocks[(2, 2)] + blocks[(1, 1)])
    with pytest.raises(lsio.StorageError) as e:
        a[...]
    assert e.value.errno == errno.ESTALE
    np.testing.assert_array_equal(a[0:4, 0:8], raw[0:4, 0:8])


def test_malformed_repositories_are_typed_errors(tmp_path):
    if int(icechunk.__version__.split(".")[0]) >= 2:
        pytest.skip("written with icechunk 1.x's API")
    base = tmp_path / "good"
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(base)),
                                      icechunk.RepositoryConfig(inline_chunk_threshold_bytes=0))
    s = repo.writable_session("main")
    zarr.create_array(s.store, name="x", shape=(100,), chunks=(10,), dtype="f8")[...] = np.arange(100.0)
    sid = s.commit("one")

    def broken(name):
        dst = tmp_path / name
        shutil.copytree(base, dst)
        return dst

    r = broken("truncated")
    snap = r / "snapshots" / sid
    snap.write_bytes(snap.read_bytes()[:60])
    with pytest.raises(lsio.FormatError, match=sid):
        lsio.open_icechunk(r)
    r = broken("header")
    snap = r / "snapshots" / sid
    snap.write_bytes(b"NOTICECHUNK!" + snap.read_bytes()[12:])
    with pytest.raises(lsio.FormatError, match="no Icechunk header"):
        lsio.open_icechunk(r)
    r = broken("manifest")
    for m in (r / "manifests").iterdir():
        m.unlink()
    g = lsio.open_icechunk(r)
    with pytest.raises(lsio.NotFoundError, match="manifest"):
        g["x"]
    r = broken("garbled-manifest")
    for m in (r / "manifests").iterdir():
        m.write_bytes(m.read_bytes()[:39] + os.urandom(200))
    with pytest.raises(lsio.FormatError, match="manifests"):
        lsio.open_icechunk(r)["x"]
    r = broken("chunk")
    for c in (r / "chunks").iterdir():
        c.unlink()
    with pytest.raises(lsio.StorageError, match="chunks/"):
        lsio.open_icechunk(r)["x"][...]
    with pytest.raises(lsio.NotFoundError, match="not an Icechunk repository|no zarr.json"):
        lsio.open_icechunk(tmp_path / "missing-dir")


def test_xarray_opens_a_repository_like_zarr_python_through_icechunk(tmp_path):
    xr = pytest.importorskip("xarray")
    pd = pytest.importorskip("pandas")
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(tmp_path / "r")))
    rng = np.random.default_rng(3)
    ds = xr.Dataset(
        {"t2m": (("time", "lat", "lon"), rng.standard_normal((6, 10, 12)).astype("f4"), {"units": "K"}),
         "sst": (("time", "lat", "lon"), rng.uniform(270, 300, (6, 10, 12)), {"units": "K"})},
        coords={"time": pd.date_range("2020-01-01", periods=6, freq="6h"), "lat": np.linspace(-45, 45, 10),
                "lon": np.arange(12.0)},
        attrs={"title": "icechunk via lsio"})
    s = repo.writable_session("main")
    ds.to_zarr(s.store, zarr_format=3, consolidated=False,
               encoding={"t2m": {"chunks": (2, 5, 6)},
                         "sst": {"dtype": "i2", "scale_factor": 0.01, "add_offset": 270.0, "_FillValue": -1}})
    first = s.commit("first")
    s = repo.writable_session("main")
    ds[["t2m"]].assign(t2m=ds.t2m + 1).to_zarr(s.store, zarr_format=3, consolidated=False, mode="a")
    s.commit("second")
    s = repo.writable_session("main")
    ds.to_zarr(s.store, group="sub", zarr_format=3, consolidated=False)
    s.commit("a group")
    for kw in ({}, {"snapshot": first}):
        session = repo.readonly_session(**({"snapshot_id": first} if kw else {"branch": "main"}))
        want = xr.open_zarr(session.store, consolidated=False).load()
        got = xr.open_dataset(tmp_path / "r", engine="lsio", backend_kwargs={"icechunk": kw})
        assert got.identical(want), kw
    got = xr.open_dataset(tmp_path / "r", engine="lsio", group="sub")
    assert got.identical(xr.open_zarr(repo.readonly_session(branch="main").store, group="sub",
                                      consolidated=False).load())
    np.testing.assert_array_equal(got.t2m.values, ds.t2m.values)
    with pytest.raises(ValueError, match="icechunk= takes"):
        xr.open_dataset(tmp_path / "r", engine="lsio", backend_kwargs={"icechunk": {"brunch": "main"}})


def test_cli_info_and_bench_on_a_repository(history):
    out, expected = history
    repo = out / "repo"
    env = dict(os.environ)

    def cli(*args):
        r = subprocess.run([sys.executable, "-m", "lsio", *map(str, args)], capture_output=True, text=True,
                           timeout=300, env=env)
        assert r.returncode == 0, r.stdout + r.stderr
        return r.stdout

    doc = json.loads(cli("info", repo, "--json"))
    assert doc["icechunk_snapshot"] == expected["branch:main"]["snapshot"]
    assert sorted(a["name"] for a in doc["arrays"]) == sorted(expected["branch:main"]["arrays"])
    doc = json.loads(cli("info", repo, "tiny", "--icechunk", "tag:v1", "--json"))
    assert doc["arrays"][0]["shape"] == [3]
    assert "crops/s" in cli("bench", repo, "t2m", "--rounds", "2", "--icechunk", "branch:dev")
    r = subprocess.run([sys.executable, "-m", "lsio", "info", str(repo), "--icechunk", "main"], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode != 0 and "branch:NAME" in r.stderr

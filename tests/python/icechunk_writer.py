"""Writes Icechunk test repositories with the ``icechunk`` package, and what zarr-python reads
from them through icechunk: run by tests/python/test_icechunk.py in its own interpreter
(icechunk 1.x on the test's Python writes spec version 1; icechunk 2.x needs Python >= 3.12 and
writes spec version 2), so it imports nothing of lsio.

    python icechunk_writer.py history OUT_DIR     # the repository OUT_DIR/repo, its history
    python icechunk_writer.py virtual OUT_DIR     # OUT_DIR/repo with virtual chunks in OUT_DIR/data
    python icechunk_writer.py expect REPO OUT_DIR [virtual prefix]  # zarr-python's reads of a repo

Both write OUT_DIR/expected.json: {ref name: {"snapshot": id, "arrays": {path: npy file}}}
with one .npy file per array and ref ("branch:main", "tag:v1", "snapshot:<id>").
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import icechunk
import zarr


def _config(split: bool, inline: int = 16) -> "icechunk.RepositoryConfig":
    config = icechunk.RepositoryConfig.default()
    config.inline_chunk_threshold_bytes = inline
    if split:
        # t2m's references in manifests of 2 chunks along axis 0 each (split manifests).
        splitting = icechunk.ManifestSplittingConfig.from_dict(
            {icechunk.ManifestSplitCondition.name_matches("t2m"): {icechunk.ManifestSplitDimCondition.Axis(0): 2}})
        config.manifest = icechunk.ManifestConfig(splitting=splitting)
    return config


def history(out: str, split: bool) -> dict:
    """Several commits, a branch, tags (one deleted), overwritten, deleted and new arrays,
    sharded and unsharded arrays with zstd and blosc, chunks never written, inline chunks."""
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(os.path.join(out, "repo")), _config(split))
    rng = np.random.default_rng(7)
    s = repo.writable_session("main")
    root = zarr.group(store=s.store, attributes={"title": "lsio icechunk history"})
    t2m = root.create_array("t2m", shape=(20, 30, 40), chunks=(4, 8, 16), dtype="f4",
                            compressors=zarr.codecs.ZstdCodec(level=3), fill_value=np.nan,
                            dimension_names=("time", "lat", "lon"))
    t2m[...] = rng.standard_normal((20, 30, 40)).astype("f4")
    u = root.create_array("u", shape=(50, 60), chunks=(7, 9), dtype="i2",
                          compressors=zarr.codecs.BloscCodec(cname="lz4", clevel=5, shuffle="shuffle"),
                          fill_value=-9)
    u[10:40, 5:33] = rng.integers(-1000, 1000, (30, 28), dtype="i2")  # other chunks never written
    sh = root.create_array("sharded", shape=(16, 70), shards=(8, 32), chunks=(4, 8), dtype="u2",
                           compressors=zarr.codecs.ZstdCodec())
    sh[...] = rng.integers(0, 60000, (16, 70), dtype="u2")
    root.create_array("tiny", shape=(3,), chunks=(3,), dtype="i1")[...] = [1, 2, 3]  # inline
    deep = root.create_group("sub").create_group("deep", attributes={"level": 2})
    deep.create_array("x", shape=(10,), chunks=(4,), dtype=">f8")[...] = np.linspace(0, 1, 10)
    root.create_array("scalar", shape=(), dtype="i4", fill_value=0)[...] = 42
    first = s.commit("first")
    repo.create_tag("v1", first)

    s = repo.writable_session("main")
    root = zarr.open_group(store=s.store, mode="r+")
    root["t2m"][3:9, 10:20, :] = -1.5
    del root["tiny"]
    root.create_array("new", shape=(6, 6), chunks=(3, 3), dtype="u1")[...] = np.arange(36, dtype="u1").reshape(6, 6)
    second = s.commit("second")

    repo.create_branch("dev", first)
    s = repo.writable_session("dev")
    root = zarr.open_group(store=s.store, mode="r+")
    root["u"][0:7, 0:9] = 5
    dev = s.commit("on dev")

    repo.create_tag("gone", second)
    repo.delete_tag("gone")
    return {"first": first, "second": second, "dev": dev}


def virtual(out: str) -> str:
    """Virtual chunks in a local file (file:// container), with last-modified checksums;
    with icechunk 2.x also container-relative locations (vcc://) and zstd-compressed
    locations (a manifest of >= 10 virtual references). Returns the container's prefix."""
    import datetime

    data = os.path.join(out, "data")
    os.makedirs(data, exist_ok=True)
    raw = np.arange(256, dtype="<i4")
    with open(os.path.join(data, "raw file.bin"), "wb") as f:  # a space: percent-encoded location
        f.write(raw.tobytes())
    prefix = f"file://{data}/"
    config = icechunk.RepositoryConfig.default()
    config.inline_chunk_threshold_bytes = 0
    v2 = int(icechunk.__version__.split(".")[0]) >= 2
    kw = {"name": "local"} if v2 else {}
    if v2:
        config.manifest = icechunk.ManifestConfig(
            virtual_chunk_location_compression=icechunk.ManifestVirtualChunkLocationCompressionConfig(
                min_num_chunks=10))
    config.set_virtual_chunk_container(icechunk.VirtualChunkContainer(prefix, icechunk.local_filesystem_store(data),
                                                                      **kw))
    access = getattr(getattr(icechunk, "credentials", None), "LocalFileSystemAccess", None)
    creds = icechunk.containers_credentials({prefix: access})
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(os.path.join(out, "repo")), config,
                                      authorize_virtual_chunk_access=creds)
    s = repo.writable_session("main")
    g = zarr.group(store=s.store)
    g.create_array("virt", shape=(256,), chunks=(8,), dtype="<i4", fill_value=-1, compressors=None)
    g.create_array("native", shape=(10,), chunks=(5,), dtype="<i4", fill_value=0)[...] = np.arange(10)
    when = datetime.datetime(2100, 1, 1, tzinfo=datetime.timezone.utc)
    for i in range(30):  # chunks 30, 31 stay missing: the fill value
        loc = "vcc://local/raw%20file.bin" if v2 and i % 3 == 0 else f"{prefix}raw%20file.bin"
        s.store.set_virtual_ref(f"virt/c/{i}", loc, offset=32 * i, length=32, checksum=when if i % 2 else None)
    s.commit("virtual")
    return prefix


def _sessions(repo: "icechunk.Repository", snapshots: list) -> dict:
    refs = {}
    for b in sorted(repo.list_branches()):
        refs[f"branch:{b}"] = repo.readonly_session(branch=b)
    for t in sorted(repo.list_tags()):
        refs[f"tag:{t}"] = repo.readonly_session(tag=t)
    for sid in snapshots:
        refs[f"snapshot:{sid}"] = repo.readonly_session(snapshot_id=sid)
    return refs


def _arrays(group: "zarr.Group", prefix: str = ""):
    for name, member in sorted(group.members()):
        path = f"{prefix}{name}"
        if isinstance(member, zarr.Group):
            yield from _arrays(member, path + "/")
        else:
            yield path, member


def expect(repo_dir: str, out: str, snapshots: list, virtual: dict) -> None:
    os.makedirs(out, exist_ok=True)
    kwargs = {}
    if virtual:
        access = getattr(getattr(icechunk, "credentials", None), "LocalFileSystemAccess", None)
        kwargs["authorize_virtual_chunk_access"] = icechunk.containers_credentials({p: access for p in virtual})
    repo = icechunk.Repository.open(icechunk.local_filesystem_storage(repo_dir), **kwargs)
    result = {}
    n = 0
    for ref, session in _sessions(repo, snapshots).items():
        entry = {"snapshot": session.snapshot_id, "arrays": {}, "errors": {}}
        for path, arr in _arrays(zarr.open_group(store=session.store, mode="r")):
            try:
                data = arr[...]
            except Exception as e:  # noqa: BLE001 - what icechunk refuses is recorded, not fatal
                entry["errors"][path] = f"{type(e).__name__}: {e}"[:300]
                continue
            name = f"a{n}.npy"
            n += 1
            np.save(os.path.join(out, name), data)
            entry["arrays"][path] = name
        result[ref] = entry
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(result, f, indent=1)


def main() -> None:
    cmd = sys.argv[1]
    if cmd == "history":
        out = sys.argv[2]
        split = len(sys.argv) > 3 and sys.argv[3] == "split"
        ids = history(out, split)
        with open(os.path.join(out, "ids.json"), "w") as f:
            json.dump(ids, f)
        expect(os.path.join(out, "repo"), os.path.join(out, "expected"), [ids["first"], ids["second"]], {})
    elif cmd == "virtual":
        out = sys.argv[2]
        prefix = virtual(out)
        with open(os.path.join(out, "prefix.txt"), "w") as f:
            f.write(prefix)
        expect(os.path.join(out, "repo"), os.path.join(out, "expected"), [], {prefix: ""})
    elif cmd == "expect":
        prefixes = dict(p.split("=", 1) for p in sys.argv[4:]) if len(sys.argv) > 4 else {}
        expect(sys.argv[2], sys.argv[3], [], prefixes)
    else:
        raise SystemExit(f"unknown command {cmd!r}")


if __name__ == "__main__":
    main()

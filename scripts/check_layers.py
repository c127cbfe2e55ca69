#!/usr/bin/env python3
"""Checks the engine's one-way layering rule (architecture.md §2) by reading #includes.

Layers, bottom up: util < {io, net} < {store, codec} < zarr < source < read < facade
(cpp/src/array.cc) < bindings. A file may include only its own layer, lower layers and the public headers
(cpp/include/lsio); io and net must not include each other (net is L1 beside io: HTTP
transfers and request signing, over util only); store (L2) includes io, net and util only, and
codec util only, so store and codec never include each other; zarr may not include io, net or
store (it is pure: the facade reads zarr.json through the store and hands zarr the bytes);
only cpp/bindings/ may include pybind11 or Python.h; source (chunk sources: shard indexes)
sits between zarr and read, and read/ may not include the shard-index parser itself
(FORBIDDEN). The read layer runs prepared codec
chains and shard layouts: neither it nor anything it includes, directly or not, may include
the headers that parse codec configurations from JSON (JSON_CODEC_HEADERS). Exits 1 listing
every violation.
"""

from __future__ import annotations

import fnmatch
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
ALLOWED = {
    "util": {"util"},
    "io": {"util", "io"},
    "net": {"util", "net"},
    "store": {"util", "io", "net", "store"},
    "codec": {"util", "codec"},
    "zarr": {"util", "codec", "zarr"},
    "source": {"util", "io", "store", "codec", "zarr", "source"},
    "read": {"util", "io", "store", "codec", "zarr", "source", "read"},
    "facade": {"util", "io", "store", "codec", "zarr", "source", "read"},
    "bindings": set(),  # public headers only
}
# Named exceptions: file -> extra layers it may include, each with its reason.
EXCEPTIONS = {
    # lsio._core._limits measures the machine's read limit with the engine's own I/O
    # backends (benchmarks only; not part of the API).
    "cpp/bindings/limits.cc": {"io"},
}
# Headers that parse codec configurations (JSON); the read layer must not reach them.
JSON_CODEC_HEADERS = {"codec/registry.h", "zarr/sharding_config.h"}
# Named includes a file must not have (directly): file glob -> {header: reason}.
FORBIDDEN = {
    # The executor plans, reads and decodes; shard indexes are the chunk source's
    # (source/sharded.h), which alone parses them.
    "cpp/src/read/*": {"zarr/shard_index.h": "parses shard indexes: that is source/sharded's job"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)


def layer_of(path: pathlib.Path) -> str | None:
    rel = path.relative_to(ROOT).as_posix()
    if rel.startswith("cpp/bindings/"):
        return "bindings"
    if rel in ("cpp/src/array.cc", "cpp/src/strings.cc"):
        return "facade"
    m = re.match(r"cpp/src/([a-z_]+)/", rel)
    return m.group(1) if m else None


def transitive_includes(path: pathlib.Path, seen: set[str]) -> set[str]:
    """Project headers `path` includes, directly or through other project headers."""
    for inc in INCLUDE.findall(path.read_text()):
        for base in (ROOT / "cpp" / "src", ROOT / "cpp" / "include"):
            target = base / inc
            if target.is_file() and inc not in seen:
                seen.add(inc)
                transitive_includes(target, seen)
    return seen


def main() -> int:
    bad = []
    for path in sorted((ROOT / "cpp").rglob("*")):
        if path.suffix not in {".h", ".cc", ".cpp"}:
            continue
        layer = layer_of(path)
        rel = path.relative_to(ROOT).as_posix()
        for inc in INCLUDE.findall(path.read_text()):
            if inc.startswith(("pybind11/", "Python.h")) and layer != "bindings":
                bad.append(f"{rel}: includes {inc} outside cpp/bindings/")
            if layer is None:
                continue
            top = inc.split("/")[0]
            if top in EXCEPTIONS.get(rel, ()):
                continue
            if top in ALLOWED and top not in ALLOWED[layer] and not (layer == "bindings" and top == "lsio"):
                bad.append(f"{rel} ({layer}) includes {inc} ({top}): upward or sideways")
        for pattern, headers in FORBIDDEN.items():
            if fnmatch.fnmatch(rel, pattern):
                for inc in INCLUDE.findall(path.read_text()):
                    if inc in headers:
                        bad.append(f"{rel} includes {inc}, which {headers[inc]}")
        if layer == "read":
            for inc in sorted(transitive_includes(path, set()) & JSON_CODEC_HEADERS):
                bad.append(f"{rel} (read) reaches {inc}, which parses codec configurations from JSON")
    for line in bad:
        print(line)
    print(f"layering: {len(bad)} violation(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

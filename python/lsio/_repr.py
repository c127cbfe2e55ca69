"""Storage statistics and the Jupyter HTML reprs of :class:`lsio.Array` and :class:`lsio.Group`.

:func:`chunk_stats` asks the engine for the stored size of every read chunk
(``_native().stored_chunk_nbytes()``: an int64 array shaped like the chunk grid, ``-1`` where
a chunk is not stored) and summarises it; the CLI's ``info`` uses the same numbers. Shard
indexes are read (and cached) by the engine; no chunk data is read.
"""

from __future__ import annotations

import html
import json
import math
from typing import Any, Dict, List, Optional

import numpy as np

__all__ = ["chunk_stats", "array_html", "group_html", "format_bytes"]

# Groups with more arrays than this show metadata only (no per-array storage survey).
_GROUP_SURVEY_LIMIT = 64
# A notebook display surveys an array's storage only when that touches at most this many
# objects (shard indexes, or chunk files when unsharded): local files / remote requests.
# Beyond it the survey costs seconds and hundreds of MB (1M chunks: 2.7 s, 200 MB), on every
# display of the cell; `lsio info` and chunk_stats() still compute it on demand.
_DISPLAY_SURVEY_LIMIT = 4096
_DISPLAY_SURVEY_LIMIT_REMOTE = 64


def survey_objects(arr: Any) -> int:
    """How many objects a storage survey of ``arr`` reads: shards (their indexes) when
    sharded, else chunk files / objects."""
    block = arr.shards if arr.shards is not None else arr.chunks
    return math.prod(-(-int(s) // int(b)) if b else 1 for s, b in zip(arr.shape, block)) if arr.ndim else 1


def _display_survey(arr: Any) -> bool:
    from . import _storage

    limit = _DISPLAY_SURVEY_LIMIT_REMOTE if _storage.is_remote(arr.path) else _DISPLAY_SURVEY_LIMIT
    return survey_objects(arr) <= limit


def format_bytes(n: Optional[float]) -> str:
    if n is None:
        return "?"
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{int(n)} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PiB"  # pragma: no cover


def chunk_stats(arr: Any) -> Dict[str, Any]:
    """Storage statistics of an :class:`lsio.Array` from its stored chunk sizes.

    Keys: ``chunk_grid`` (read-chunk grid shape), ``chunks_total``, ``chunks_present``,
    ``chunks_missing``, ``present_fraction``, ``stored_bytes`` (bytes of stored chunk data,
    shard indexes not included), ``stored_chunk_bytes_min/mean/max`` (over present chunks),
    ``uncompressed_bytes`` (present chunks, decoded, at full chunk size),
    ``compression_ratio`` (``uncompressed_bytes / stored_bytes``; None if nothing is
    stored), and for sharded arrays ``shard_grid``, ``shards_total``, ``shards_present``,
    ``shard_bytes_min/mean/max`` (chunk data per present shard).
    """
    sizes = np.asarray(arr._native().stored_chunk_nbytes(), dtype=np.int64)
    present = sizes >= 0
    n_total = int(sizes.size)
    n_present = int(present.sum())
    stored = int(sizes[present].sum()) if n_present else 0
    chunk_elems = math.prod(arr.chunks)
    uncompressed = n_present * chunk_elems * arr.dtype.itemsize
    out: Dict[str, Any] = {
        "chunk_grid": tuple(int(s) for s in sizes.shape),
        "chunks_total": n_total,
        "chunks_present": n_present,
        "chunks_missing": n_total - n_present,
        "present_fraction": (n_present / n_total) if n_total else 1.0,
        "stored_bytes": stored,
        "stored_chunk_bytes_min": int(sizes[present].min()) if n_present else None,
        "stored_chunk_bytes_mean": (stored / n_present) if n_present else None,
        "stored_chunk_bytes_max": int(sizes[present].max()) if n_present else None,
        "uncompressed_bytes": uncompressed,
        "compression_ratio": (uncompressed / stored) if stored else None,
    }
    shards = arr.shards
    if shards is not None and sizes.ndim:
        per = tuple(max(1, s // c) for s, c in zip(shards, arr.chunks))
        grid = tuple(-(-g // p) for g, p in zip(sizes.shape, per))
        pad = [(0, g * p - n) for g, p, n in zip(grid, per, sizes.shape)]
        padded = np.pad(sizes, pad, constant_values=-1)
        blocks = padded.reshape([x for g, p in zip(grid, per) for x in (g, p)])
        axes = tuple(range(1, 2 * len(grid), 2))
        any_present = (blocks >= 0).any(axis=axes)
        shard_bytes = np.where(blocks >= 0, blocks, 0).sum(axis=axes)[any_present]
        out.update(
            {
                "shard_grid": grid,
                "shards_total": int(any_present.size),
                "shards_present": int(any_present.sum()),
                "shard_bytes_min": int(shard_bytes.min()) if shard_bytes.size else None,
                "shard_bytes_mean": float(shard_bytes.mean()) if shard_bytes.size else None,
                "shard_bytes_max": int(shard_bytes.max()) if shard_bytes.size else None,
            }
        )
    return out


_STYLE = (
    "<style>.lsio-repr table{border-collapse:collapse;font-size:12px}"
    ".lsio-repr th{text-align:left;padding:1px 10px 1px 0;font-weight:600;vertical-align:top}"
    ".lsio-repr td{text-align:left;padding:1px 10px 1px 0;font-family:monospace}"
    ".lsio-bar{display:inline-block;width:80px;height:8px;border:1px solid #888;margin-right:6px}"
    ".lsio-bar>span{display:block;height:100%;background:#4a8}</style>"
)


def _esc(x: Any) -> str:
    return html.escape(str(x))


def _shape(t: Any) -> str:
    return "None" if t is None else "(" + ", ".join(str(int(v)) for v in t) + ("," if len(t) == 1 else "") + ")"


def _bar(frac: float) -> str:
    pct = max(0.0, min(1.0, frac)) * 100
    return f'<span class="lsio-bar"><span style="width:{pct:.0f}%"></span></span>'


def _storage_rows(arr: Any) -> List[tuple]:
    if not _display_survey(arr):
        n = survey_objects(arr)
        what = "shard indexes" if arr.shards is not None else "chunk files"
        return [("storage", f"not surveyed for display ({n:,} {what} to read); lsio info or "
                            "lsio._repr.chunk_stats(arr) computes it")]
    try:
        st = chunk_stats(arr)
    except Exception as e:  # noqa: BLE001 - a repr must not raise
        return [("storage", f"unavailable ({type(e).__name__}: {e})")]
    rows = [
        ("bytes on disk", f"{format_bytes(st['stored_bytes'])} ({st['stored_bytes']:,} B of chunk data)"),
        (
            "chunks present",
            _bar(st["present_fraction"])
            + _esc(f"{st['chunks_present']:,} / {st['chunks_total']:,} ({st['present_fraction']:.1%})"),
        ),
    ]
    if st.get("shards_total") is not None:
        rows.append(("shards present", _esc(f"{st['shards_present']:,} / {st['shards_total']:,}")))
    if st["compression_ratio"] is not None:
        rows.append(("compression ratio", _esc(f"{st['compression_ratio']:.2f}x")))
    return [(k, v, True) for k, v in rows]


def _table(rows: List[tuple]) -> str:
    body = []
    for row in rows:
        k, v = row[0], row[1]
        raw = len(row) > 2 and row[2]
        body.append(f"<tr><th>{_esc(k)}</th><td>{v if raw else _esc(v)}</td></tr>")
    return "<table>" + "".join(body) + "</table>"


def _attrs_text(attrs: dict, limit: int = 300) -> str:
    text = json.dumps(attrs, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def array_html(arr: Any) -> str:
    rows: List[tuple] = [
        ("path", arr.path),
        ("shape", _shape(arr.shape)),
        ("dtype", str(arr.dtype)),
        ("chunks", _shape(arr.chunks)),
        ("shards", _shape(arr.shards)),
        ("codecs", arr.codecs),
        ("fill value", repr(arr.fill_value.item()) if hasattr(arr.fill_value, "item") else repr(arr.fill_value)),
    ]
    if arr.dimension_names is not None:
        rows.append(("dimensions", ", ".join(str(n) for n in arr.dimension_names)))
    rows.append(("size", f"{format_bytes(arr.nbytes)} uncompressed"))
    rows.extend(_storage_rows(arr))
    attrs = arr.attrs
    if attrs:
        rows.append(("attributes", _attrs_text(attrs)))
    return (
        f'<div class="lsio-repr">{_STYLE}<b>lsio.Array</b> '
        f"<code>{_esc(arr.path.rsplit('/', 1)[-1])}</code>{_table(rows)}</div>"
    )


def group_html(group: Any) -> str:
    members = list(group.walk_arrays())
    survey = len(members) <= _GROUP_SURVEY_LIMIT
    head = ["array", "shape", "dtype", "chunks", "shards", "codecs"]
    if survey:
        head += ["bytes on disk", "chunks present", "ratio"]
    rows = []
    total_stored = 0
    for rel, meta in members:
        cells: List[str]
        try:
            a = group[rel]
        except Exception as e:  # noqa: BLE001 - unsupported arrays are still listed
            cells = [
                _esc(rel),
                _esc(_shape(meta.get("shape", ()))),
                _esc(meta.get("data_type")),
                "",
                "",
                _esc(f"not readable by lsio: {type(e).__name__}"),
            ]
            if survey:
                cells += ["", "", ""]
        else:
            cells = [_esc(x) for x in (rel, _shape(a.shape), a.dtype, _shape(a.chunks), _shape(a.shards), a.codecs)]
            if survey and not _display_survey(a):
                cells += [_esc("not surveyed (large)"), "", ""]
            elif survey:
                try:
                    st = chunk_stats(a)
                except Exception as e:  # noqa: BLE001
                    cells += [_esc(f"unavailable ({type(e).__name__})"), "", ""]
                else:
                    total_stored += st["stored_bytes"]
                    ratio = st["compression_ratio"]
                    cells += [
                        _esc(format_bytes(st["stored_bytes"])),
                        _bar(st["present_fraction"]) + _esc(f"{st['present_fraction']:.0%}"),
                        _esc("" if ratio is None else f"{ratio:.2f}x"),
                    ]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    info: List[tuple] = [
        ("path", group.path),
        ("arrays", f"{len(members)} ({'consolidated metadata' if group.consolidated else 'listed from directory'})"),
    ]
    if group.group_names:
        info.append(("subgroups", ", ".join(group.group_names)))
    if survey and members:
        info.append(("bytes on disk", f"{format_bytes(total_stored)} of chunk data"))
    if group.attrs:
        info.append(("attributes", _attrs_text(group.attrs)))
    table = (
        "<table><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>" + "".join(rows) + "</table>"
        if members
        else ""
    )
    return (
        f'<div class="lsio-repr">{_STYLE}<b>lsio.Group</b> <code>{_esc(group.name)}</code>'
        f"{_table(info)}{table}</div>"
    )

"""NetCDF4 and HDF5 files read directly: the file's own chunk index becomes a manifest.

``lsio.open("era5.nc", "t2m")``, ``lsio.open_group("era5.nc")`` and
``xr.open_dataset("era5.nc", engine="lsio")`` read an HDF5 file (NetCDF4 is HDF5) through
the engine. h5py reads the file's metadata once per process and file version: each dataset
becomes a Zarr v3 array node whose chunks are byte ranges of the file itself, and the whole
file one set of references (``_core.References.from_entries``, cpp/src/store/manifest.h), read
like kerchunk references (lsio/_kerchunk.py does the rest: views, groups, pickling), so chunk
reads are the engine's (coalesced, io_uring or range requests, decoded in place).

How a dataset translates (what h5py reports -> Zarr v3):
- layout: chunked -> the chunk grid, one reference per allocated chunk (``chunk_iter``);
  contiguous -> one extent cut into row blocks of whole leading-axis slices (each block is a
  "chunk" of uncompressed bytes, so a crop reads only its rows); compact -> the bytes inline.
  Unallocated chunks and datasets read as the HDF5 fill value, as h5py returns them.
- filters, in the file's pipeline order after the ``bytes`` codec (endianness from the
  dtype): deflate -> ``numcodecs.zlib``, shuffle -> ``numcodecs.shuffle``, or after another
  filter ``lsio.hdf5.shuffle`` (the bytes after the last whole element stay in place, as
  HDF5's filter leaves them: netCDF-C runs fletcher32 first), fletcher32 ->
  ``lsio.hdf5.fletcher32`` (numcodecs' fletcher32, verified on every read, also accepting
  the byte-swapped form HDF5 1.6.2 and earlier wrote, as HDF5 does), the hdf5plugin filters zstd (32015) ->
  ``zstd``, blosc (32001) -> ``blosc``, lz4 (32004) -> ``lsio.hdf5.lz4`` (the filter's own
  block framing, cpp/src/codec/hdf5_lz4.cc) and bitshuffle (32008, alone or with LZ4 or zstd
  blocks) -> ``lsio.hdf5.bitshuffle`` (cpp/src/codec/hdf5_bitshuffle.cc). Any other filter
  (szip, nbit, scaleoffset, ...) makes that dataset's codec ``hdf5.filter.<id>``, which raises
  UnsupportedError naming the filter when the array is opened (the rest of the file reads).
- datasets created with H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS store their partial edge chunks
  without filters, with nothing in the chunk index saying so: lsio asks the creation property
  list (H5Pget_chunk_opts of the libhdf5 h5py loaded, which h5py does not wrap) and treats
  those chunks as below.
- a chunk whose stored bytes skipped an optional filter (HDF5 stores a chunk that deflate
  could not shrink as it is, noting it in the chunk's filter mask) is read through h5py once
  and re-encoded with the dataset's pipeline (numcodecs), inline; without numcodecs that is
  an UnsupportedError naming the chunk.
- attributes -> ``attributes`` (numpy values as JSON, their numpy types under ATTR_TYPES so
  Array.attrs gives them back typed; NetCDF4's and HDF5's bookkeeping attributes hidden, as
  h5netcdf hides them); dimension scales -> ``dimension_names`` (a NetCDF4 dimension
  without a coordinate variable is not a variable, as in netCDF4-python); a variable shorter
  than its unlimited dimension -> the dimension's length, padded with the fill value.
- every hard and soft link is a node (not only each object once, as visititems sees them).
- dtypes: booleans, integers, floats and complex numbers of either byte order; enums read as
  their integer values (as h5py gives them); fixed-length NUL-padded strings (NetCDF char
  variables) as ``null_terminated_bytes``; compounds as record dtypes equal to h5py's (members at
  their offsets, padding kept, nested compounds, array members, either byte order) where every
  member is such a type. Space-padded strings, reference and variable-length types (and
  compounds holding them) raise UnsupportedError when opened; virtual datasets and external
  storage too.

Remote files (``s3://``, ``gs://``, ``http(s)://``) are opened by h5py through a file object
whose reads are lsio range requests (64 KiB blocks, kept while the file is opened, each
pinned to the ETag the file had when it was opened; the nodes of chunk indexes fetched a
tree level at a time, see _RangeFile); the chunk reads that follow are the engine's, pinned
to the same ETag (references_and_version).
"""

from __future__ import annotations

import base64
import collections
import io
import json
import math
import os
import threading
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np

from . import _core, _dtypes, _storage
from .errors import Error, FormatError, UnsupportedError

__all__ = ["is_hdf5", "is_netcdf3", "netcdf3_error", "references"]

SIGNATURE = b"\x89HDF\r\n\x1a\n"
# NetCDF4's and HDF5's bookkeeping attributes (dimension scales, netCDF's own ids): not user
# attributes; h5netcdf hides the same ones.
_HIDDEN = {"CLASS", "DIMENSION_LIST", "NAME", "REFERENCE_LIST", "_Netcdf4Dimid", "_Netcdf4Coordinates",
           "_nc3_strict", "_NCProperties", "_Netcdf4Order"}
_PHONY = b"This is a netCDF dimension but not a netCDF variable"
# netCDF-C stores a variable that has a dimension's name but is not its coordinate under this
# prefix; h5netcdf and netCDF4-python show it without.
_NON_COORD = "_nc4_non_coord_"
# Contiguous datasets are cut into blocks of whole leading-axis slices of about this size.
_BLOCK_BYTES = 4 << 20


def is_hdf5(path: str) -> bool:
    """Whether the local file at ``path`` is an HDF5 file: its signature at offset 0 or at a
    user-block boundary (512, 1024, ... bytes)."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            at = 0
            while at + 8 <= size and at <= 1 << 20:
                f.seek(at)
                if f.read(8) == SIGNATURE:
                    return True
                at = 512 if at == 0 else at * 2
    except OSError:
        return False
    return False


_NETCDF3 = (b"CDF\x01", b"CDF\x02", b"CDF\x05")  # classic, 64-bit offset, CDF-5


def is_netcdf3(path: str) -> bool:
    """NetCDF3 classic, 64-bit offset or CDF-5 (not HDF5)."""
    try:
        with open(path, "rb") as f:
            return f.read(4) in _NETCDF3
    except OSError:
        return False


def netcdf3_error(path: str) -> UnsupportedError:
    return UnsupportedError(f"{path!r} is a NetCDF3 (classic, 64-bit offset or CDF-5) file; lsio reads NetCDF4/HDF5 "
                            "files and kerchunk references (kerchunk.netCDF3.NetCDF3ToZarr makes references lsio "
                            "reads)")


# ----------------------------------------------------------------------------- remote files


class _RangeFile(io.RawIOBase):
    """A read-only file over a remote object, for h5py's "fileobj" driver: each read is a
    range request through the store (``_core.RemoteStore``), rounded out to 64 KiB blocks
    that are kept (h5py reads the metadata in many small pieces, mostly near each other).

    HDF5 walks a chunk index (a version 1 B-tree) one node at a time, and the nodes of a
    NetCDF4 file lie between its chunks, so each is a round trip of its own: 150 sequential
    requests for 8,192 chunks. So an index node h5py reads has its children fetched at once,
    in parallel, and theirs in turn down to the leaves: the walk waits for about one round
    trip per tree level instead of one per node. ``misses`` counts the reads h5py waited for.

    The node layout (HDF5 file format spec, "Version 1 B-trees"): "TREE", type (1: chunks),
    level (0: leaves), entries used (u16), two sibling addresses, then keys and child
    addresses alternating; a key is the chunk's size (u32), filter mask (u32) and one u64
    offset per dimension plus a last one that is 0 (in the last key, the bound past the last
    child, it is not). HDF5 reads a whole node at once, and its size, 8 + 2 * address size +
    (2K + 1) * key + 2K * address size, gives the key's size (the rank): a rank is only taken
    where the keys before the children end in 0 and every child lies inside the file, else
    nothing is prefetched and h5py reads as before."""

    _BLOCK = 64 << 10
    _MAX_NODE_BYTES = 64 << 20  # prefetched nodes held at once

    def __init__(self, store: Any, key: str, size: int, version: str) -> None:
        super().__init__()
        self._store, self._key, self._size, self._version = store, key, size, version
        self._pos = 0
        self._blocks: Dict[int, bytes] = {}
        self._addr_size = 8
        self._base = 0
        self._walked: set = set()  # index nodes whose subtrees were prefetched
        self._nodes: Dict[int, bytes] = {}  # prefetched index nodes by address, until h5py reads them
        self._node_bytes = 0
        self.misses = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        self._pos = offset if whence == 0 else self._pos + offset if whence == 1 else self._size + offset
        return self._pos

    def tell(self) -> int:
        return self._pos

    def set_layout(self, addr_size: int, base: int) -> None:
        """The file's address size and base address (the superblock's; h5py reports them)."""
        self._addr_size, self._base = addr_size, base

    def _block(self, i: int) -> bytes:
        b = self._blocks.get(i)
        if b is None:
            self.misses += 1
            start = i * self._BLOCK
            n = min(self._BLOCK, self._size - start)
            b = self._blocks[i] = bytes(self._store.read_range(self._key, start, n, self._version, self._size))
        return b

    def readinto(self, buf: Any) -> int:
        view = memoryview(buf).cast("B")
        n = max(0, min(len(view), self._size - self._pos))
        at = self._pos
        node = self._nodes.pop(at, None)
        if node is not None:
            self._node_bytes -= len(node)
        if node is not None and len(node) >= n:
            view[:n] = node[:n]
        else:
            done = 0
            while done < n:
                b = self._block((at + done) // self._BLOCK)
                off = (at + done) % self._BLOCK
                k = min(len(b) - off, n - done)
                view[done:done + k] = b[off:off + k]
                done += k
        self._pos += n
        if n >= 8 and view[:5] == b"TREE\x01" and view[5] > 0:
            self._prefetch_below(at, bytes(view[:n]))
        return n

    # -- chunk index prefetch ---------------------------------------------------------------

    def _children(self, node: bytes, key: int) -> Optional[Tuple[int, List[int]]]:
        """(level, child addresses) of the chunk-index node ``node`` with keys of ``key``
        bytes, or None where ``node`` does not read as one."""
        a = self._addr_size
        if len(node) < 8 + 2 * a or node[:5] != b"TREE\x01":
            return None
        level, used = node[5], int.from_bytes(node[6:8], "little")
        at = 8 + 2 * a  # key 0
        if at + used * (key + a) + key > len(node):
            return None
        out = []
        for _ in range(used):
            if any(node[at + key - 8:at + key]):
                return None
            at += key
            child = int.from_bytes(node[at:at + a], "little")
            if not 0 < child < self._size - self._base:
                return None
            out.append(child + self._base)
            at += a
        return level, out

    def _key_size(self, node: bytes) -> int:
        """The key size of a whole chunk-index node, 0 where no rank fits."""
        a, n = self._addr_size, len(node)
        for rank in range(1, 33):
            key = 8 + 8 * (rank + 1)
            rest = n - 8 - 2 * a - key  # 2K * (key + a)
            if rest > 0 and rest % (2 * (key + a)) == 0 and self._children(node, key) is not None:
                return key
        return 0

    def _prefetch_below(self, at: int, node: bytes) -> None:
        """Fetches the subtree below the index node ``node`` (read at ``at``) level by level,
        each level's nodes in parallel."""
        if at in self._walked:
            return
        key = self._key_size(node)
        if not key:
            return
        self._walked.add(at)
        level, children = self._children(node, key)  # type: ignore[misc]
        size = len(node)  # the nodes of a tree are all of one size
        while children and level > 0:
            children = [c for c in children if c not in self._walked]
            self._fetch_nodes(children, size)
            children = [c for c in children if c in self._nodes]  # the rest: h5py's own reads
            self._walked.update(children)
            if level == 1:
                return  # those were the leaves: their children are chunks
            below: List[int] = []
            for c in children:
                got = self._children(self._nodes.get(c, b""), key)
                if got is None or got[0] != level - 1:
                    return
                below.extend(got[1])
            level, children = level - 1, below

    def _fetch_nodes(self, addresses: List[int], size: int) -> None:
        """Reads the ``size`` bytes at each address into ``_nodes``, all in one batch of
        concurrent range requests made by the store in C++ (lsio starts no Python thread for
        them: one could free an h5py object while h5py holds its lock, a deadlock). Best
        effort: a batch that fails, or nodes past _MAX_NODE_BYTES, are left to h5py's own
        reads (which raise the error, if it is one)."""
        room = max(0, (self._MAX_NODE_BYTES - self._node_bytes) // max(1, size))
        todo = [c for c in addresses if c not in self._nodes][:room]
        if not todo:
            return
        try:
            got = self._store.read_ranges(self._key, [(c, min(size, self._size - c)) for c in todo],
                                          self._version, self._size)
        except Exception:  # noqa: BLE001 - best effort, see above
            return
        for c, node in zip(todo, got):
            self._nodes[c] = bytes(node)
            self._node_bytes += len(node)


# ----------------------------------------------------------------------------- translation


def _json_value(v: Any) -> Any:
    """An attribute as JSON (numpy scalars and arrays as Python values; NaN and infinities
    as the bare tokens zarr-python writes in attributes, which lsio reads back as floats)."""
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, np.ndarray):
        return _json_value(v[()] if v.ndim == 0 else v.tolist())
    if isinstance(v, (np.bool_, bool)):
        return bool(v)
    if isinstance(v, (np.integer, int)):
        return int(v)
    if isinstance(v, (np.floating, float)):
        return float(v)
    if isinstance(v, (np.complexfloating, complex)):
        return [_json_value(v.real), _json_value(v.imag)]
    if isinstance(v, (list, tuple)):
        return [_json_value(x) for x in v]
    return str(v)


def _fill_json(v: Any) -> Any:
    """A fill value as Zarr v3 spells it ("Infinity", "-Infinity"; a NaN as its bits in hex,
    "0x7fc00000", so a negative or payload NaN reads back bit for bit; complex as pairs)."""
    if isinstance(v, (np.complexfloating, complex)):
        return [_fill_json(v.real), _fill_json(v.imag)]
    if isinstance(v, (np.floating, float)) and not math.isfinite(float(v)):
        f = float(v)
        if math.isnan(f):
            a = np.asarray(v)
            return "0x" + a.astype(a.dtype.newbyteorder(">")).tobytes().hex()
        return "Infinity" if f > 0 else "-Infinity"
    return _json_value(v)


def _attrs(obj: Any) -> Dict[str, Any]:
    """An object's attributes as JSON, with the numpy type of each numeric one (and of a
    byte-string ``_FillValue``) under ATTR_TYPES, so they read back as h5py and h5netcdf give
    them (:func:`typed_attrs`): xarray takes the type of ``scale_factor`` for the decoded
    data, and a float64 for a float32 would double it."""
    import h5py

    out: Dict[str, Any] = {}
    types: Dict[str, List[str]] = {}
    for k in obj.attrs.keys():
        if k in _HIDDEN:
            continue
        try:
            v = obj.attrs[k]
        except (OSError, TypeError, ValueError):
            continue  # a type h5py cannot read (references, ...): not carried
        if isinstance(v, h5py.Empty):  # no values: an empty array (h5netcdf), b"" for a string type
            t = np.dtype(v.dtype)
            out[k] = "" if t.kind == "S" else []
            types[k] = ["s" if t.kind == "S" else "a", t.str]
            continue
        if isinstance(v, np.ndarray) and v.ndim == 1 and v.size == 1:
            v = v[0]  # NetCDF stores every attribute as an array: one value reads as a scalar, as in xarray
        t = getattr(v, "dtype", None)
        if t is not None and t.kind == "S" and k == "_FillValue" and not isinstance(v, np.ndarray):
            out[k] = bytes(v).decode("latin-1")  # a char variable's fill: bytes, as h5netcdf gives it
            types[k] = ["s", t.str]
            continue
        if t is not None and t.names is not None:  # a compound value (a compound variable's _FillValue)
            try:
                fmt = _compound_format(t)
            except ValueError:
                continue  # members lsio does not carry: not carried
            out[k] = base64.b64encode(np.asarray(v, dtype=t).tobytes()).decode()
            types[k] = ["r" if isinstance(v, np.ndarray) else "rs", json.dumps(fmt),
                        list(np.shape(v))]  # type: ignore[list-item]
            continue
        out[k] = _json_value(v)
        if t is not None and t.kind in "biufc":
            types[k] = ["a" if isinstance(v, np.ndarray) else "s", t.str]
    if types:
        out[ATTR_TYPES] = types
    return out


# The attribute that carries the numpy types of an HDF5 object's other attributes (_attrs).
ATTR_TYPES = "_lsio_hdf5_types"


def typed_attrs(attrs: Dict[str, Any]) -> Dict[str, Any]:
    """``attrs`` (a copy) with the numpy types ATTR_TYPES records restored and that entry
    dropped: numeric attributes as numpy scalars and arrays, a byte-string ``_FillValue`` as
    ``np.bytes_``."""
    out = dict(attrs)
    types = out.pop(ATTR_TYPES, None)
    if not isinstance(types, dict):
        return out
    for k, spec in types.items():
        if k in out and isinstance(spec, list) and len(spec) == 3 and spec[0] in ("r", "rs"):
            try:  # a compound value: its bytes (base64) and numpy's dict form of its type
                rec = np.frombuffer(base64.b64decode(out[k]), dtype=_dtypes.record_dtype(json.loads(spec[1])))
                out[k] = rec[0] if spec[0] == "rs" else rec.reshape(spec[2]).copy()
            except (TypeError, ValueError):
                pass
            continue
        if k not in out or not isinstance(spec, list) or len(spec) != 2:
            continue
        try:
            dt = np.dtype(spec[1])
            v = out[k]
            if dt.kind == "S":
                v = np.array(str(v).encode("latin-1"), dtype=dt)[()]
            elif dt.kind == "c":  # complex values as [re, im] pairs (_json_value), any shape
                pairs = np.asarray(v, dtype=np.float64)
                c = (pairs[..., 0] + 1j * pairs[..., 1]).astype(dt)
                v = c if spec[0] == "a" else c[()]
            else:
                v = np.asarray(v, dtype=dt) if spec[0] == "a" else dt.type(v)
        except (TypeError, ValueError, OverflowError, IndexError):
            continue
        out[k] = v
    return out


def _stored_as(dset: Any, dt: np.dtype) -> bool:
    """Whether the dataset's stored HDF5 type is exactly numpy's ``dt`` (H5Tequal with the type
    h5py makes for it), so its bytes can be read as ``dt`` without HDF5's conversion."""
    import h5py

    try:
        stored = dset.id.get_type()
        if dt.names is not None:
            stored = _nullpad_chars(stored)
        return bool(stored == h5py.h5t.py_create(dt, logical=True))
    except (TypeError, ValueError):
        return False


# The member types lsio copies as stored inside compounds (those of cpp/src/zarr/dtype.cc's leaves).
_COMPOUND_LEAVES = {"b1", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8", "c8", "c16"}


def _compound_format(dt: np.dtype, depth: int = 1) -> Any:
    """h5py's numpy dtype of an HDF5 compound in numpy's dict form, as the engine reads it
    (``lsio.hdf5.compound``, cpp/src/zarr/dtype.h): members at their offsets, padding kept,
    nested compounds and array members. ValueError naming what lsio does not read
    (variable-length, reference or opaque members, long doubles, nesting past 16 levels)."""
    if depth > 16:
        raise ValueError("compound nested deeper than 16 levels")
    if dt.subdtype is not None:
        base, shape = dt.subdtype
        return {"subarray": _compound_format(base, depth + 1), "shape": [int(n) for n in shape]}
    if dt.names is not None:
        return {"names": list(dt.names), "formats": [_compound_format(dt.fields[n][0], depth + 1) for n in dt.names],
                "offsets": [int(dt.fields[n][1]) for n in dt.names], "itemsize": dt.itemsize}
    if dt.kind == "S" or dt.kind + str(dt.itemsize) in _COMPOUND_LEAVES:
        return dt.str
    what = "variable-length, reference or object" if dt.kind == "O" else "opaque" if dt.kind == "V" else str(dt)
    raise ValueError(f"compound with {what} members")


def _nullpad_chars(tid: Any) -> Any:
    """The HDF5 type ``tid`` with its 1-byte NUL-terminated strings (netCDF-C's NC_CHAR, as in
    NetCDF4 compound members) NUL-padded, as h5py's types for numpy ``S1`` are: HDF5 converts
    one such byte to itself, so lsio reads them as stored."""
    import h5py

    if isinstance(tid, h5py.h5t.TypeStringID):
        if not tid.is_variable_str() and tid.get_size() == 1 and tid.get_strpad() == h5py.h5t.STR_NULLTERM:
            t = tid.copy()
            t.set_strpad(h5py.h5t.STR_NULLPAD)
            return t
        return tid
    if isinstance(tid, h5py.h5t.TypeCompoundID):
        t = h5py.h5t.create(h5py.h5t.COMPOUND, tid.get_size())
        for i in range(tid.get_nmembers()):
            t.insert(tid.get_member_name(i), tid.get_member_offset(i), _nullpad_chars(tid.get_member_type(i)))
        return t
    if isinstance(tid, h5py.h5t.TypeArrayID):
        return h5py.h5t.array_create(_nullpad_chars(tid.get_super()), tid.get_array_dims())
    return tid


def _data_type(dt: np.dtype) -> Optional[str]:
    if dt.kind == "b":
        return "bool"
    if dt.kind in "iuf" and dt.itemsize in (1, 2, 4, 8) and not (dt.kind == "f" and dt.itemsize == 1):
        return {"i": "int", "u": "uint", "f": "float"}[dt.kind] + str(8 * dt.itemsize)
    if dt.kind == "c" and dt.itemsize in (8, 16):
        return f"complex{8 * dt.itemsize}"
    return None


_BLOSC_CNAMES = {0: "blosclz", 1: "lz4", 2: "lz4hc", 3: "snappy", 4: "zlib", 5: "zstd"}
_BLOSC_SHUFFLE = {0: "noshuffle", 1: "shuffle", 2: "bitshuffle"}


def _codec(code: int, values: Tuple[int, ...], name: bytes, itemsize: int, first: bool = True) -> Dict[str, Any]:
    """One HDF5 filter as a Zarr v3 bytes-to-bytes codec (an unknown name if lsio has none);
    ``first``: no filter runs before it."""
    if code == 1:
        return {"name": "numcodecs.zlib", "configuration": {"level": int(values[0]) if values else 6}}
    if code == 2:
        # After another filter (netCDF-C runs fletcher32 first) the bytes may end in a part of
        # an element, which HDF5's shuffle leaves in place and numcodecs' refuses:
        # lsio.hdf5.shuffle. First, it is numcodecs' (which zarr-python and xarray know).
        size = int(values[0]) if values else itemsize
        return {"name": "numcodecs.shuffle" if first else "lsio.hdf5.shuffle", "configuration": {"elementsize": size}}
    if code == 3:  # numcodecs' check, plus the byte-swapped form HDF5 <= 1.6.2 wrote (HDF5 accepts both)
        return {"name": "lsio.hdf5.fletcher32", "configuration": {}}
    if code == 32015:
        return {"name": "zstd", "configuration": {"level": int(values[0]) if values else 0, "checksum": False}}
    if code == 32004:
        return {"name": "lsio.hdf5.lz4", "configuration": {"blocksize": int(values[0]) if values else 0}}
    if code == 32008:
        # cd_values: filter version, bitshuffle version, element size, block size (elements;
        # 0 = default), block compression (0 none, 2 lz4, 3 zstd), zstd level.
        v = list(values) + [0] * 5
        # The filter treats any other compression value as none, as here.
        compression = {2: "lz4", 3: "zstd"}.get(int(v[4]), "none")
        return {"name": "lsio.hdf5.bitshuffle", "configuration": {
            "elementsize": int(v[2]) or itemsize, "blocksize": int(v[3]), "compression": compression}}
    if code == 32001:
        v = list(values) + [0] * 7
        return {"name": "blosc", "configuration": {
            "cname": _BLOSC_CNAMES.get(int(v[6]), "blosclz"), "clevel": int(v[4]) if len(values) > 4 else 5,
            "shuffle": _BLOSC_SHUFFLE.get(int(v[5]), "noshuffle"), "typesize": int(v[2]) or itemsize,
            "blocksize": 0}}
    label = name.decode("ascii", "replace") if isinstance(name, bytes) else str(name)
    return {"name": f"hdf5.filter.{code}", "configuration": {"filter": label}}


def _unsupported_node(shape: Tuple[int, ...], why: str, attrs: Dict[str, Any]) -> Dict[str, Any]:
    """An array node lsio refuses to read, saying why (its codec name carries the reason)."""
    return {"zarr_format": 3, "node_type": "array", "shape": list(shape) or [1], "data_type": "uint8",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [max(1, s) for s in shape] or [1]}},
            "chunk_key_encoding": {"name": "v2", "configuration": {"separator": "."}}, "fill_value": 0,
            "codecs": [{"name": "bytes"}, {"name": f"hdf5.unsupported: {why}"}], "attributes": attrs}


class _Builder:
    """The references of one file: inline documents and bytes, and (key, offset, length)
    entries into the file itself (url id 0)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.inline: Dict[str, bytes] = {}
        self.keys: List[str] = []
        self.offsets: List[int] = []
        self.lengths: List[int] = []

    def doc(self, key: str, value: Dict[str, Any]) -> None:
        # allow_nan: non-finite attributes as bare tokens (fill values are strings already).
        self.inline[key] = json.dumps(value, allow_nan=True).encode()

    def extent(self, key: str, offset: int, length: int) -> None:
        self.keys.append(key)
        self.offsets.append(int(offset))
        self.lengths.append(int(length))

    def build(self, name: str) -> Any:
        return _core.References.from_entries(self.inline, self.keys, [self.url], [0] * len(self.keys),
                                             self.offsets, self.lengths, name)


def _null_padded(dset: Any) -> bool:
    """A fixed-length string type padded (or terminated) with NULs, not spaces."""
    import h5py

    try:
        tid = dset.id.get_type()
        return isinstance(tid, h5py.h5t.TypeStringID) and not tid.is_variable_str() and \
            tid.get_strpad() in (h5py.h5t.STR_NULLTERM, h5py.h5t.STR_NULLPAD)
    except (AttributeError, ValueError, TypeError):
        return False


def _scales(dset: Any, dimids: Optional[Dict[int, str]] = None) -> Optional[List[str]]:
    """The HDF5 path of each axis's dimension scale, or None where an axis has none. An axis
    without an attached scale may still name its dimension: a dimension scale dataset's first
    axis is its own dimension (a coordinate variable), and netCDF-C writes no dimension list
    on a coordinate variable of several dimensions (a char coordinate ``station(station,
    strlen)``) but the ids of its dimensions (``_Netcdf4Coordinates``), which ``dimids`` (the
    file's ``_Netcdf4Dimid`` -> scale path) resolves."""
    import h5py

    if dset.shape is None:
        return None
    own = h5py.h5ds.is_scale(dset.id)
    coords: Any = None
    out: List[str] = []
    for i, dim in enumerate(dset.dims):
        try:
            scales = list(dim.values())
        except Exception:  # noqa: BLE001 - h5py raises several kinds for odd dimension lists
            scales = []
        if scales:
            out.append(scales[0].name)
            continue
        if i == 0 and own:
            out.append(dset.name)
            continue
        if coords is None:
            try:
                coords = [int(x) for x in np.asarray(dset.attrs.get("_Netcdf4Coordinates", [])).ravel()]
            except (OSError, TypeError, ValueError):
                coords = []
        path = (dimids or {}).get(coords[i]) if i < len(coords) else None
        if path is None:
            return None
        out.append(path)
    return out


def _dimension_ids(datasets: List[Any]) -> Dict[int, str]:
    """netCDF-C's dimension ids (``_Netcdf4Dimid`` of each dimension scale) -> scale path."""
    import h5py

    out: Dict[int, str] = {}
    for dset in datasets:
        try:
            if dset.shape is not None and h5py.h5ds.is_scale(dset.id) and "_Netcdf4Dimid" in dset.attrs:
                out[int(np.asarray(dset.attrs["_Netcdf4Dimid"]).ravel()[0])] = dset.name
        except (OSError, TypeError, ValueError, IndexError):
            continue
    return out


def _dimension_names(dset: Any, dimids: Optional[Dict[int, str]] = None) -> Optional[List[str]]:
    scales = _scales(dset, dimids)
    return None if scales is None else [p.rsplit("/", 1)[-1] for p in scales]


def _dimension_lengths(datasets: List[Any], dimids: Dict[int, str]) -> Dict[str, int]:
    """The current length of each unlimited dimension (by its scale's path): the longest
    extent along it of any dataset, as netCDF4-python and h5netcdf take it; variables that
    are shorter read as padded with their fill value."""
    lengths: Dict[str, int] = {}
    for dset in datasets:
        if dset.shape is None or dset.maxshape is None:
            continue
        scales = _scales(dset, dimids) or []
        for i, scale in enumerate(scales):
            if dset.maxshape[i] is None:
                lengths[scale] = max(lengths.get(scale, 0), int(dset.shape[i]))
    return lengths


def _is_phony_dimension(dset: Any) -> bool:
    """A NetCDF4 dimension without a coordinate variable: a dimension scale whose NAME says so."""
    try:
        name = dset.attrs.get("NAME")
    except (OSError, TypeError, ValueError):
        return False
    return isinstance(name, (bytes, np.bytes_)) and bytes(name).startswith(_PHONY)


def _dataset(b: _Builder, key: str, dset: Any, encoders: Callable[[List[Dict[str, Any]]], Any],
             lengths: Optional[Dict[str, int]] = None, dimids: Optional[Dict[int, str]] = None) -> None:
    import h5py

    attrs = _attrs(dset)
    if dset.shape is None:  # a null dataspace (h5py.Empty): no elements, not even a scalar
        b.doc(f"{key}/zarr.json", _unsupported_node((), "HDF5 dataset with a null dataspace (no elements)", attrs))
        return
    extent = tuple(int(s) for s in dset.shape)
    # Along an unlimited dimension a variable may hold fewer records than the dimension:
    # it is as long as the dimension, the rest its fill value (netCDF4-python, h5netcdf).
    shape = extent
    scales = _scales(dset, dimids) if lengths and dset.maxshape is not None else None
    if scales is not None:
        shape = tuple(max(n, lengths.get(sc, 0)) if dset.maxshape[i] is None else n  # type: ignore[union-attr]
                      for i, (n, sc) in enumerate(zip(extent, scales)))
    try:
        dt = dset.dtype
        dcpl = dset.id.get_create_plist()
        layout = dcpl.get_layout()
    except (TypeError, ValueError, KeyError) as e:  # a type h5py has no numpy dtype for (a 3-byte int, ...)
        b.doc(f"{key}/zarr.json", _unsupported_node(shape, f"HDF5 dataset of a type h5py cannot map ({e})", attrs))
        return
    data_type: Any = _data_type(dt) if dt.names is None and h5py.check_dtype(vlen=dt) is None else None
    if dt.names is not None:
        try:
            data_type = {"name": "lsio.hdf5.compound", "configuration": _compound_format(dt)}
        except ValueError as e:
            b.doc(f"{key}/zarr.json", _unsupported_node(shape, f"HDF5 {e} ({dt})", attrs))
            return
    if data_type is not None and not _stored_as(dset, dt):
        # h5py shows the type HDF5 converts to, not the stored one (a complex compound with
        # padding, a bool enum over int32, a 12-bit integer, a non-IEEE float): the stored
        # bytes are not that dtype's.
        b.doc(f"{key}/zarr.json", _unsupported_node(
            shape, f"HDF5 dataset whose stored type is not numpy's {dt} (HDF5 converts it when h5py reads it)", attrs))
        return
    info = h5py.check_string_dtype(dt)
    if data_type is None and info is not None and info.length is None:
        _vlen_strings(b, key, dset, shape, attrs, dimids)
        return
    if data_type is None and dt.kind == "S" and _null_padded(dset):
        # Fixed-length byte strings (NetCDF char variables, HDF5 strings padded with NULs): the
        # bytes as stored, which numpy shows as h5py does (trailing NULs dropped).
        data_type = {"name": "null_terminated_bytes", "configuration": {"length_bytes": dt.itemsize}}
    if data_type is None:
        b.doc(f"{key}/zarr.json", _unsupported_node(shape, f"HDF5 dataset of dtype {dt}", attrs))
        return
    if layout == h5py.h5d.VIRTUAL or (layout == h5py.h5d.CONTIGUOUS and dcpl.get_external_count() > 0):
        kind = "virtual" if layout == h5py.h5d.VIRTUAL else "external-storage"
        b.doc(f"{key}/zarr.json", _unsupported_node(shape, f"HDF5 {kind} dataset", attrs))
        return
    endian = "big" if dt.byteorder == ">" or (dt.byteorder == "=" and np.little_endian is False) else "little"
    codecs: List[Dict[str, Any]] = [{"name": "bytes", "configuration": {"endian": endian}}
                                    if dt.itemsize > 1 and dt.kind not in "SV" else {"name": "bytes"}]
    ndim = len(shape)
    if layout == h5py.h5d.CHUNKED:
        chunks = tuple(int(c) for c in dset.chunks)
        for i in range(dcpl.get_nfilters()):
            code, _flags, values, name = dcpl.get_filter(i)
            codecs.append(_codec(int(code), tuple(values), name, dt.itemsize, first=i == 0))
    elif layout == h5py.h5d.COMPACT or ndim == 0:
        chunks = shape
    elif dset.id.get_offset() is None:  # contiguous, never written: every element reads as the fill value
        chunks = tuple(max(1, n) for n in shape)
    else:  # contiguous: whole leading-axis slices, cut where the leading extent divides evenly
        row = dt.itemsize * int(np.prod(shape[1:], dtype=np.int64)) if ndim > 1 else dt.itemsize
        k = shape[0] if shape[0] * row <= 4 * _BLOCK_BYTES else _rows_per_block(shape[0], row)
        chunks = (max(1, k),) + shape[1:]
    fill = dset.fillvalue
    if dcpl.get_fill_time() == h5py.h5d.FILL_TIME_NEVER:
        fill = np.zeros((), dt)[()]  # no fill written: HDF5 reads what was never written as zeros
    node: Dict[str, Any] = {
        "zarr_format": 3, "node_type": "array", "shape": list(shape), "data_type": data_type,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [max(1, c) for c in chunks]}},
        "chunk_key_encoding": {"name": "v2", "configuration": {"separator": "."}},
        "fill_value": (base64.b64encode(np.asarray(fill, dtype=dt).tobytes()).decode() if dt.kind in "SV"
                       else _fill_json(np.asarray(fill, dtype=dt)[()]) if fill is not None else 0),
        "codecs": codecs, "attributes": attrs,
    }
    dims = _dimension_names(dset, dimids) if ndim else None
    if dims is not None and len(dims) == ndim:
        node["dimension_names"] = dims
    b.doc(f"{key}/zarr.json", node)
    unsupported = [c["name"] for c in codecs if c["name"].startswith("hdf5.")]
    if layout == h5py.h5d.CHUNKED:
        grid_chunks = [max(1, c) for c in chunks]
        # Partial edge chunks stored unfiltered (see _dont_filter_partial_chunks) are read
        # through h5py and re-encoded like filter-skipping chunks. Where the option cannot be
        # asked, the edge chunks whose stored size is exactly the raw chunk's are (a filtered
        # chunk rarely has that size; one stored unfiltered always has), if they can be.
        partial_opt = _dont_filter_partial_chunks(dcpl) if len(codecs) > 1 else False
        raw_chunk = int(np.prod(grid_chunks, dtype=np.int64)) * dt.itemsize
        infos: List[Any] = []
        try:
            dset.id.chunk_iter(infos.append)  # one pass over the chunk index (HDF5 >= 1.12.3)
        except (AttributeError, NotImplementedError):
            infos = [dset.id.get_chunk_info(i) for i in range(dset.id.get_num_chunks())]
        for info in infos:
            coords = [o // c for o, c in zip(info.chunk_offset, grid_chunks)]
            ckey = f"{key}/" + ".".join(str(c) for c in coords)
            if info.byte_offset is None or info.size == 0:
                continue
            edge = partial_opt is not False and any(o + c > n for o, c, n in zip(info.chunk_offset, grid_chunks, shape))
            if edge and partial_opt is None:
                edge = info.size == raw_chunk
            # A chunk across the end of a variable shorter than its dimension: what it holds
            # past the variable's extent is not data (h5py's read pads with the fill value).
            straddles = any(o < e < o + c for o, c, e, n in zip(info.chunk_offset, grid_chunks, extent, shape) if n != e)
            if straddles and unsupported:
                continue  # unreadable anyway (the codec names why)
            if (info.filter_mask or edge or straddles) and not unsupported:
                try:
                    b.inline[ckey] = _reencode(dset, info.chunk_offset, grid_chunks, codecs, encoders, ckey)
                except UnsupportedError as e:
                    if info.filter_mask or partial_opt or straddles:  # this dataset cannot be read; the rest can
                        b.doc(f"{key}/zarr.json", _unsupported_node(shape, str(e), attrs))
                        return
                    b.extent(ckey, info.byte_offset, info.size)  # only suspected: read as stored
                continue
            b.extent(ckey, info.byte_offset, info.size)
    elif layout == h5py.h5d.COMPACT or ndim == 0:
        data = np.ascontiguousarray(dset[()], dtype=dt)
        b.inline[f"{key}/" + ".".join("0" for _ in range(max(1, ndim)))] = data.tobytes()
    else:
        offset = dset.id.get_offset()
        if offset is None:
            return  # never written: every element reads as the fill value
        block = dt.itemsize * int(np.prod(chunks, dtype=np.int64))
        n = -(-shape[0] // chunks[0]) if ndim else 1
        for i in range(n):
            b.extent(f"{key}/" + ".".join([str(i)] + ["0"] * (ndim - 1)), offset + i * block, block)


_MAX_STRING_BYTES = 64 << 20  # variable-length strings one dataset may hold (they are copied)

_H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS = 0x0002
_h5_lib: Any = None
_h5_lib_lock = threading.Lock()


def _find_h5py_libhdf5() -> Any:
    """The libhdf5 h5py itself uses (see _hdf5_function), or False."""
    import ctypes

    import h5py

    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            paths = {line.split(None, 5)[-1].strip() for line in f if "libhdf5" in line}
    except OSError:
        return False
    paths = {p for p in paths if os.path.basename(p).startswith("libhdf5") and
             not os.path.basename(p).startswith("libhdf5_hl") and os.path.exists(p)}
    # Another copy may be loaded too (a system libhdf5 under GDAL or netCDF4): h5py's ids mean
    # nothing to it. Prefer the copy bundled beside h5py, else the one whose version is
    # h5py's; more than one candidate left is no answer.
    here = os.path.dirname(os.path.dirname(os.path.abspath(h5py.__file__)))
    bundled = [p for p in paths if os.path.abspath(p).startswith(here + os.sep) and "h5py" in p]
    candidates = bundled or sorted(paths)
    found = []
    for path in candidates:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        if not bundled:
            major, minor, rel = ctypes.c_uint(), ctypes.c_uint(), ctypes.c_uint()
            fn = getattr(lib, "H5get_libversion", None)
            if fn is None or fn(ctypes.byref(major), ctypes.byref(minor), ctypes.byref(rel)) < 0:
                continue
            if (major.value, minor.value, rel.value) != tuple(h5py.version.hdf5_version_tuple[:3]):
                continue
        found.append(lib)
    return found[0] if len(found) == 1 else False


def _hdf5_function(name: str) -> Any:
    """A function of the libhdf5 that h5py loaded into this process (h5py exposes no wrapper
    for it), or None. Found through /proc/self/maps: h5py's wheels bundle their own copy and
    load it privately, so its symbols are not in the global namespace; dlopen of the same
    path returns the loaded library, whose property lists h5py's ids name."""
    global _h5_lib
    if _h5_lib is None:
        with _h5_lib_lock:
            if _h5_lib is None:
                _h5_lib = _find_h5py_libhdf5()
    return getattr(_h5_lib, name, None) if _h5_lib else None


def _dont_filter_partial_chunks(dcpl: Any) -> Optional[bool]:
    """Whether the dataset stores its partial edge chunks without filters (HDF5's
    H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS: such chunks keep a filter mask of 0, so only the
    creation property list tells); None when it cannot be asked."""
    import ctypes

    from h5py import _objects

    fn = _hdf5_function("H5Pget_chunk_opts")
    if fn is None:
        return None
    opts = ctypes.c_uint(0)
    with _objects.phil:  # h5py's lock around every HDF5 call (libhdf5 is not thread-safe)
        if fn(ctypes.c_int64(dcpl.id), ctypes.byref(opts)) < 0:
            return None
    return bool(opts.value & _H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS)


def _vlen_strings(b: _Builder, key: str, dset: Any, shape: Tuple[int, ...], attrs: Dict[str, Any],
                  dimids: Optional[Dict[int, str]] = None) -> None:
    """A variable-length string dataset: its strings live in the file's global heap, not in
    its chunks, so they are read here once (h5py) and kept as one inline chunk in Zarr's
    ``vlen-utf8`` encoding (a count, then a length and the UTF-8 bytes of each item): the
    array reads like a Zarr string array (lsio._strings.StringArray). Datasets of strings
    larger than _MAX_STRING_BYTES are refused (UnsupportedError when opened)."""
    ndim = len(shape)
    count = math.prod(shape)
    row = math.prod(shape[1:]) if ndim else 1
    too_big = None
    if 4 * count > _MAX_STRING_BYTES:  # each item costs at least its 4-byte length: refused before reading
        too_big = f"at least {4 * count} bytes"
    elif row > _STRING_BLOCK_ITEMS:
        too_big = f"{row} items per index of the first dimension"
    if too_big is not None:
        b.doc(f"{key}/zarr.json", _unsupported_node(
            shape, f"HDF5 variable-length strings of {too_big} (lsio copies at most {_MAX_STRING_BYTES} bytes, "
                   f"{_STRING_BLOCK_ITEMS} items a row)", attrs))
        return
    try:
        payload = _vlen_payload(dset, shape, count)
    except (UnicodeDecodeError, OSError, ValueError, TypeError) as e:
        b.doc(f"{key}/zarr.json", _unsupported_node(shape, f"HDF5 variable-length strings lsio cannot read ({e})",
                                                    attrs))
        return
    if payload is None:
        b.doc(f"{key}/zarr.json", _unsupported_node(
            shape, f"HDF5 variable-length strings of more than {_MAX_STRING_BYTES} bytes (lsio copies at most "
                   f"{_MAX_STRING_BYTES})", attrs))
        return
    node: Dict[str, Any] = {
        "zarr_format": 3, "node_type": "array", "shape": list(shape), "data_type": "string",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [max(1, s) for s in shape]}},
        "chunk_key_encoding": {"name": "v2", "configuration": {"separator": "."}}, "fill_value": "",
        "codecs": [{"name": "vlen-utf8"}], "attributes": attrs,
    }
    dims = _dimension_names(dset, dimids) if ndim else None
    if dims is not None and len(dims) == ndim:
        node["dimension_names"] = dims
    b.doc(f"{key}/zarr.json", node)
    if count:
        b.inline[f"{key}/" + ".".join("0" for _ in range(max(1, ndim)))] = payload


_STRING_BLOCK_ITEMS = 1 << 16  # strings read from h5py at a time (Python objects: ~100 bytes each)


def _vlen_payload(dset: Any, shape: Tuple[int, ...], count: int) -> Optional[bytes]:
    """The dataset's strings in vlen-utf8 encoding, read a block of rows at a time so memory
    stays near the encoded size; None once that passes _MAX_STRING_BYTES. Past the dataset's
    own extent (a variable shorter than its unlimited dimension) items are ""."""
    out = bytearray(count.to_bytes(4, "little"))
    if not shape:
        blocks: Iterator[Any] = iter([[dset.asstr()[()]]])
    else:
        have = tuple(int(n) for n in dset.shape)
        rows = max(1, _STRING_BLOCK_ITEMS // max(1, math.prod(shape[1:])))

        def gen() -> Iterator[Any]:
            for a in range(0, shape[0], rows):
                stop = min(shape[0], a + rows)
                block = np.full((stop - a,) + tuple(shape[1:]), "", dtype=object)
                if a < have[0] and all(have[1:]):
                    part = dset.asstr()[(slice(a, min(stop, have[0])),) + tuple(slice(0, n) for n in have[1:])]
                    block[(slice(0, part.shape[0]),) + tuple(slice(0, n) for n in have[1:])] = part
                yield block.ravel()
        blocks = gen()
    for block in blocks:
        for v in block:
            x = str(v).encode("utf-8")
            out += len(x).to_bytes(4, "little")
            out += x
        if len(out) > _MAX_STRING_BYTES + 4:
            return None
    return bytes(out)


def _rows_per_block(rows: int, row_bytes: int) -> int:
    """The largest divisor of ``rows`` whose block is at most _BLOCK_BYTES (at least one row):
    blocks must hold whole chunks of uncompressed bytes, so the last one cannot be short."""
    best = 1
    limit = max(1, _BLOCK_BYTES // max(1, row_bytes))
    for d in range(1, int(math.isqrt(rows)) + 1):
        if rows % d == 0:
            for q in (d, rows // d):
                if q <= limit and q > best:
                    best = q
    if best * row_bytes < (64 << 10) and (rows * row_bytes <= (256 << 20) or rows // best > (1 << 20)):
        # No useful divisor (a prime length): one block, as the file lays it out, rather than
        # millions of tiny references (a crop of it reads it whole).
        return rows
    return best


def _reencode(dset: Any, origin: Tuple[int, ...], chunks: List[int], codecs: List[Dict[str, Any]],
              encoders: Callable[[List[Dict[str, Any]]], Any], key: str) -> bytes:
    """A chunk stored without some of its filters (its filter mask), as the full pipeline
    would have stored it: read through h5py, padded to the chunk shape with the fill value."""
    pipeline = encoders(codecs[1:])
    if pipeline is None:
        raise UnsupportedError(f"HDF5 chunk {key} was stored skipping a filter; lsio re-encodes such chunks with "
                               "numcodecs: pip install numcodecs")
    sel = tuple(slice(o, min(o + c, s)) for o, c, s in zip(origin, chunks, dset.shape))
    part = dset[sel]
    full = np.full(chunks, dset.fillvalue if dset.fillvalue is not None else 0, dtype=dset.dtype)
    full[tuple(slice(0, x) for x in part.shape)] = part
    data: Any = np.ascontiguousarray(full).tobytes()
    for codec in pipeline:
        data = codec.encode(data)
    return bytes(data)


class _Hdf5Shuffle:
    """HDF5's shuffle filter, encode side (for _reencode): byte planes of the whole elements,
    then the bytes after the last one as they are."""

    def __init__(self, elementsize: int) -> None:
        self.e = elementsize

    def encode(self, buf: Any) -> bytes:
        b = np.frombuffer(memoryview(buf).cast("B"), np.uint8)
        if self.e <= 1:
            return b.tobytes()
        n = b.size // self.e
        return b[:n * self.e].reshape(n, self.e).T.tobytes() + b[n * self.e:].tobytes()


def _numcodecs_encoders(codecs: List[Dict[str, Any]]) -> Any:
    try:
        import numcodecs
    except ImportError:
        return None
    out = []
    for c in codecs:
        name, cfg = c["name"], dict(c.get("configuration") or {})
        if name.startswith("numcodecs."):
            out.append(numcodecs.get_codec({"id": name[len("numcodecs."):], **cfg}))
        elif name == "lsio.hdf5.shuffle":
            out.append(_Hdf5Shuffle(int(cfg["elementsize"])))
        elif name == "lsio.hdf5.fletcher32":  # re-encoded in the standard byte order
            out.append(numcodecs.Fletcher32())
        elif name == "zstd":
            out.append(numcodecs.Zstd(level=cfg.get("level", 0)))
        elif name == "blosc":
            shuffle = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}[cfg["shuffle"]]
            out.append(numcodecs.Blosc(cname=cfg["cname"], clevel=cfg["clevel"], shuffle=shuffle))
        else:
            return None
    return out


def build(f: Any, url: str, name: str, remote: Optional[_RangeFile] = None) -> Any:
    """The references of the open h5py file ``f``, every chunk a byte range of ``url``;
    ``remote``: the file object through which ``f`` reads a remote file."""
    if remote is not None:
        remote.set_layout(f.id.get_create_plist().get_sizes()[0], int(f.userblock_size))

    b = _Builder(url)
    b.doc("zarr.json", {"zarr_format": 3, "node_type": "group", "attributes": _attrs(f)})

    datasets: List[Tuple[str, Any]] = []
    _walk_links(b, f["/"], "", datasets, {f["/"].id})
    dimids = _dimension_ids([d for _, d in datasets])
    lengths = _dimension_lengths([d for _, d in datasets], dimids)
    for path, obj in datasets:
        if _is_phony_dimension(obj):
            continue
        head, _, leaf = path.rpartition("/")
        if leaf.startswith(_NON_COORD):  # netCDF-C's name for a variable named like a dimension
            path = f"{head}/{leaf[len(_NON_COORD):]}" if head else leaf[len(_NON_COORD):]
        _dataset(b, path, obj, _numcodecs_encoders, lengths, dimids)
    obj = None
    datasets.clear()  # h5py's objects freed here, on this thread (not later by the collector)
    return b.build(name)


def _walk_links(b: _Builder, group: Any, prefix: str, datasets: List[Tuple[str, Any]], entered: set) -> None:
    """Every link below ``group``, as h5py's keys and h5netcdf list them (visititems would
    visit an object once and follow no soft link): groups become group nodes, datasets are
    collected; a dataset linked twice is two arrays; external and dangling soft links are
    left out; a group reached again (a link to itself, an ancestor or a group seen before)
    is listed, not entered again, so the walk is once per group. (A module function, not a
    closure calling itself: that cycle would keep h5py objects for the garbage collector,
    which may free them on another thread while this one holds h5py's lock.)"""
    import h5py

    for name in group:
        link = group.get(name, getlink=True)
        if not isinstance(link, (h5py.HardLink, h5py.SoftLink)):
            continue
        try:
            obj = group[name]
        except (KeyError, OSError, ValueError):
            continue
        path = f"{prefix}{name}"
        if isinstance(obj, h5py.Group):
            b.doc(f"{path}/zarr.json", {"zarr_format": 3, "node_type": "group", "attributes": _attrs(obj)})
            if obj.id not in entered:
                entered.add(obj.id)
                _walk_links(b, obj, f"{path}/", datasets, entered)
        elif isinstance(obj, h5py.Dataset):
            datasets.append((path, obj))


_lock = threading.Lock()
# path -> (pid, version, references), least recently used first; at most _CACHED entries, so
# open_mfdataset over thousands of files does not keep every one's translation.
_cache: "collections.OrderedDict[str, Tuple[int, Tuple[Any, ...], Any]]" = collections.OrderedDict()
_CACHED = 1024


def references(spec: Dict[str, Any], open_remote: Callable[[str], Tuple[Any, str, int, str]]) -> Any:
    """The references of the HDF5 file of ``spec`` (see lsio/_kerchunk.py's spec_for); a local
    file is translated once per process and version (size, mtime, inode), a remote one per
    (size, ETag).
    ``open_remote(url) -> (store, key, size, version)`` opens a remote file's object."""
    return references_and_version(spec, open_remote)[0]


def references_and_version(spec: Dict[str, Any],
                           open_remote: Callable[[str], Tuple[Any, str, int, str]]) -> Tuple[Any, str]:
    """(references, the ETag of the remote file they were translated from, "" for a local file
    or a server without ETags): chunk reads pinned to that ETag fail rather than read bytes
    of a file rewritten since its chunk index was read."""
    try:
        import h5py
    except ImportError as e:
        raise UnsupportedError(f"reading NetCDF4/HDF5 files needs h5py: pip install 'lsio[hdf5]' ({e})") from None
    path = spec["refs"]
    remote: Optional[_RangeFile] = None
    if _storage.is_remote(path):
        store, key, size, etag = open_remote(path)
        # A remote file's translation is kept for the version its server names (no ETag or
        # date: translated at every open).
        version: Optional[Tuple[Any, ...]] = (size, etag) if etag else None
        pin = etag
    else:
        st = os.stat(path)
        version = (st.st_size, st.st_mtime_ns, st.st_ino)
        pin = ""
    if version is not None:
        with _lock:
            hit = _cache.get(path)
            if hit is not None:
                _cache.move_to_end(path)
        if hit is not None and hit[0] == os.getpid() and hit[1] == version:
            return hit[2], pin
    handle: Any = path
    if _storage.is_remote(path):
        handle = remote = _RangeFile(store, key, size, etag)
        if handle.read(4) in _NETCDF3:
            raise netcdf3_error(path)
        handle.seek(0)
    try:
        with h5py.File(handle, "r") as f:
            refs = build(f, path, path, remote)
    except Error:
        raise  # lsio's own (a remote read's StorageError, ...): already typed and named
    except (OSError, ValueError, KeyError, RuntimeError, TypeError) as e:
        if isinstance(e, OSError) and getattr(e, "errno", None) is not None and not isinstance(e, FileNotFoundError):
            raise
        raise FormatError(f"{path!r} cannot be read as an HDF5 file: {type(e).__name__}: {e}") from None
    finally:
        if remote is not None:
            remote.close()

    if version is not None:
        with _lock:
            _cache[path] = (os.getpid(), version, refs)
            _cache.move_to_end(path)
            while len(_cache) > _CACHED:
                _cache.popitem(last=False)
    return refs, pin

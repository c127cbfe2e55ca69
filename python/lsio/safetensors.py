"""Load safetensors checkpoints through lsio's byte-range engine (``lsio.read_ranges``).

>>> import lsio.safetensors
>>> tensors = lsio.safetensors.load("model.safetensors")               # {name: numpy array}
>>> some = lsio.safetensors.load("ckpt/", names=["lm_head.weight"])    # sharded: the index
>>> ts = lsio.safetensors.load_torch("s3://bucket/ckpt/", device="cuda")

A load reads each file's 8-byte header length, then its JSON header, then every chosen tensor
in **one** ``read_ranges`` call whose output buffers are the result arrays themselves, so the
bytes land where they stay: no intermediate buffer, no copy. A sharded checkpoint costs three
calls in all (every shard's length prefix, every shard's header, every tensor), whatever the
number of shards. ``load_torch`` to a CUDA device reads in groups of about 64 MiB into two
pinned staging buffers and copies each group to the device asynchronously while the next
group is read.

What ``path`` may name (local path, ``~``, ``file://``, or ``s3://``, ``gs://``,
``http(s)://`` URL; remote ones take ``storage_options`` as :func:`lsio.open` does):

* a ``.safetensors`` file (any local file that is not a directory or a ``.json`` file);
* an index file (a name ending in ``.json``, e.g. ``model.safetensors.index.json``) as
  ``transformers`` / ``huggingface_hub`` write it: ``{"metadata": {...}, "weight_map":
  {tensor name: shard file name}}``, shard names relative to the index's directory;
* a directory (or a URL prefix that names neither a ``.json`` nor a ``.safetensors``
  object) holding ``model.safetensors.index.json`` (preferred) or ``model.safetensors``.

Headers are checked as strictly as the safetensors crate checks them (``read_metadata``):
length prefix present, header at most 100,000,000 bytes and inside the file, UTF-8 JSON
object, ``__metadata__`` a string-to-string map, every tensor a known dtype with a shape and
two offsets (non-negative 64-bit integers), offsets contiguous from 0 without holes or
overlap, each tensor's byte count equal to ``prod(shape) * bits / 8``, and the data ending
exactly at the end of the file. Violations raise :class:`lsio.FormatError` (not a valid
header), :class:`lsio.UnsupportedError` (a dtype this loader or the result type cannot
represent; a subclass of FormatError) or :class:`lsio.CorruptDataError` (a header whose
offsets, sizes or file length do not agree: a truncated or damaged file); missing files
raise :class:`lsio.StorageError`. Each names the file, sets ``path`` and, where it applies,
``byte_range``. Remote objects' sizes are not known before they are read: a truncated
remote file is caught (the data end is always read), extra bytes after the data are not.

dtypes: F64 F32 F16 I64 I32 I16 I8 U64 U32 U16 U8 BOOL C64 map to numpy's own types; BF16
and the 8-bit floats (F8_E4M3, F8_E5M2, F8_E8M0, F8_E4M3FNUZ, F8_E5M2FNUZ) to ``ml_dtypes``
types for numpy (an UnsupportedError saying to install ml_dtypes or use :func:`load_torch`
when it is missing) and to torch's native dtypes. F4 (two values a byte) loads only with
:func:`load_torch`, as ``torch.float4_e2m1fn_x2`` with the last dimension halved (as
safetensors' torch loader does); F6_E2M3 / F6_E3M2 have no numpy or torch type and raise
UnsupportedError. safetensors stores little-endian data; on a big-endian host the bytes are
swapped into native order after reading.

:func:`load_jax` puts tensors on a JAX mesh with their shardings, each process reading only
the byte ranges of the shards its devices hold; :func:`chunk_plan` / :func:`load_chunk` are
the whole-chunk scheme of Levanter's loader (chunks never split tensors, owner = chunk index
% process count).

Importing this module imports numpy only; :func:`load_torch` imports torch and
:func:`load_jax` jax when called.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from . import _safetensors_shards
from ._safetensors_format import (  # noqa: F401 - TensorInfo, MAX_HEADER_SIZE, INDEX_NAME are public
    _DTYPES, INDEX_NAME, MAX_HEADER_SIZE, TensorInfo, _Checkpoint, _error, _File, _locate, _display,
    _names_list, _numpy_dtype, _open, _parse_index, _probes, _read_headers, _read_pieces, _swap, import_for,
)
from ._safetensors_shards import Chunk
from .errors import UnsupportedError

__all__ = ["load", "load_torch", "load_jax", "chunk_plan", "load_chunk", "Chunk", "info", "metadata",
           "TensorInfo", "MAX_HEADER_SIZE", "INDEX_NAME"]

# load_torch to CUDA: bytes read (and copied to the device) per group.
_GROUP_BYTES = 64 << 20


def load(path: Any, names: Optional[Iterable[str]] = None, *,
         storage_options: Optional[Mapping[str, Any]] = None,
         threads: Optional[int] = None) -> Dict[str, np.ndarray]:
    """Load tensors of a safetensors checkpoint into numpy arrays.

    Parameters
    ----------
    path:
        A ``.safetensors`` file, a sharded checkpoint's index (``*.json``), or a directory
        or URL prefix holding ``model.safetensors.index.json`` or ``model.safetensors``;
        local (``~`` and ``file://`` work), ``s3://``, ``gs://`` or ``http(s)://``.
    names:
        The tensors to load: a name or an iterable of names; ``None`` loads all.
    storage_options:
        Options of remote stores, as for :func:`lsio.open`.
    threads:
        Engine threads for the reads (``None``: lsio's default).

    Returns
    -------
    ``{name: array}`` in the order of ``names``, else in the file's header order (for a
    sharded checkpoint, the index's ``weight_map`` order). Each array owns its memory and
    has the header's shape and the dtype's numpy type (``ml_dtypes`` types for BF16 and FP8).

    Raises
    ------
    KeyError
        A name the checkpoint does not hold (the message lists some it does).
    lsio.FormatError
        A file or index that is not valid safetensors.
    lsio.UnsupportedError
        A dtype numpy cannot hold (F4, F6), or BF16/FP8 without ``ml_dtypes``.
    lsio.CorruptDataError
        A header whose offsets, sizes or file length disagree (e.g. a truncated file).
    lsio.StorageError
        A missing file or shard, or an I/O error.

    Everything but I/O errors and truncated remote files is raised before any tensor data
    is read.
    """
    ck = _open(path, names, storage_options, threads)
    dtypes = [_numpy_dtype(t) for _, t in ck.chosen]
    arrays = [np.empty(t.shape, dt) for (_, t), dt in zip(ck.chosen, dtypes)]
    pieces = [(i, t.offset, t.nbytes, a.reshape(-1).view(np.uint8))
              for (i, t), a in zip(ck.chosen, arrays) if t.nbytes]
    _read_pieces(ck, pieces, storage_options, threads, _probes(ck))
    for (_, t), a in zip(ck.chosen, arrays):
        _swap(a.reshape(-1).view(np.uint8), _DTYPES[t.dtype][4])
    return {t.name: a for (_, t), a in zip(ck.chosen, arrays)}


# ---------------------------------------------------------------------------------------
# torch


def _torch_layout(torch: Any, t: TensorInfo) -> Tuple[Any, Tuple[int, ...]]:
    """(torch dtype, storage shape) of a tensor; F4 halves the last dimension."""
    name = _DTYPES[t.dtype][3]
    dt = getattr(torch, name, None) if name else None
    if dt is None:
        why = ("torch has no such dtype" if name is None
               else f"this torch ({torch.__version__}) has no torch.{name}")
        raise _error(UnsupportedError, t.file, f"tensor {t.name!r} has dtype {t.dtype}: {why}")
    shape = t.shape
    if t.dtype == "F4":
        if not shape or shape[-1] % 2:
            raise _error(UnsupportedError, t.file, f"tensor {t.name!r}: F4 packs two values a "
                         "byte, so torch.float4_e2m1fn_x2 needs an even last dimension, got "
                         f"shape {list(shape)}")
        shape = shape[:-1] + (shape[-1] // 2,)
    return dt, shape


def load_torch(path: Any, names: Optional[Iterable[str]] = None, *, device: Any = "cpu",
               storage_options: Optional[Mapping[str, Any]] = None,
               threads: Optional[int] = None, pin_memory: Optional[bool] = None) -> Dict[str, Any]:
    """Load tensors of a safetensors checkpoint into torch tensors on ``device``.

    ``path``, ``names``, ``storage_options``, ``threads``, the result order and the errors
    are as for :func:`load`. Every dtype maps to torch's native one (bfloat16, the float8
    kinds, uint16/32/64, complex64; F4 to ``float4_e2m1fn_x2`` with the last dimension
    halved, as safetensors' torch loader does). Imports torch (``ImportError`` naming
    ``pip install torch`` when it is missing).

    Parameters
    ----------
    device:
        ``"cpu"`` (default): each tensor is its own CPU tensor, filled by one engine read of
        all chosen tensors, with no copy. A CUDA device: the results are allocated on the
        device; the data is read in groups of about 64 MiB into two pinned staging buffers
        and each group is copied with ``non_blocking=True`` while the next group is read;
        the call returns once every copy has finished. Any other device: read to CPU, then
        ``.to(device)``.
    pin_memory:
        Allocate the CPU buffers (the results on CPU, the staging buffers for CUDA) in
        pinned memory. ``None`` (default): only for CUDA.
    """
    torch = import_for("torch", "load_torch", "PyTorch", "torch")
    dev = torch.device(device)
    ck = _open(path, names, storage_options, threads)
    layouts = [_torch_layout(torch, t) for _, t in ck.chosen]
    pin = (dev.type == "cuda") if pin_memory is None else bool(pin_memory)
    if dev.type == "cuda":
        return _load_torch_grouped(torch, ck, layouts, dev, pin, storage_options, threads)
    tensors = []
    pieces = []
    for (i, t), (dt, shape) in zip(ck.chosen, layouts):
        if t.nbytes == 0:
            tensors.append(torch.empty(shape, dtype=dt, pin_memory=pin))
            continue
        buf = torch.empty(t.nbytes, dtype=torch.uint8, pin_memory=pin)
        pieces.append((i, t.offset, t.nbytes, buf.numpy()))
        tensors.append(buf.view(dt).reshape(shape))
    _read_pieces(ck, pieces, storage_options, threads, _probes(ck))
    for (_, _, _, b), unit in zip(pieces, [_DTYPES[t.dtype][4] for _, t in ck.chosen if t.nbytes]):
        _swap(b, unit)
    if dev.type != "cpu":
        tensors = [x.to(dev) for x in tensors]
    return {t.name: x for (_, t), x in zip(ck.chosen, tensors)}


def _load_torch_grouped(torch: Any, ck: _Checkpoint, layouts: Sequence[Tuple[Any, Tuple[int, ...]]],
                        dev: Any, pin: bool, storage_options: Optional[Mapping[str, Any]],
                        threads: Optional[int], group_bytes: Optional[int] = None) -> Dict[str, Any]:
    """Read in groups into (pinned) staging buffers; copy each group to ``dev`` while the next
    is read. Works for any device (the tests run it on CPU); only CUDA overlaps."""
    group = max(8, (group_bytes or _GROUP_BYTES) // 8 * 8)  # pieces stay element-aligned
    cuda = dev.type == "cuda"
    results = [torch.empty(shape, dtype=dt, device=dev) for dt, shape in layouts]
    flats = [r.reshape(-1).view(torch.uint8) if t.nbytes else None
             for (_, t), r in zip(ck.chosen, results)]
    # Pieces of at most `group` bytes, packed into groups of at most `group` bytes.
    groups: List[List[Tuple[int, int, int]]] = [[]]
    fill = 0
    for k, (_, t) in enumerate(ck.chosen):
        for a in range(0, t.nbytes, group):
            n = min(group, t.nbytes - a)
            if fill + n > group:
                groups.append([])
                fill = 0
            groups[-1].append((k, a, n))
            fill += n
    groups = [g for g in groups if g]
    total = sum(t.nbytes for _, t in ck.chosen)
    stage = min(group, total)
    staging = [torch.empty(stage, dtype=torch.uint8, pin_memory=pin)
               for _ in range(min(2, len(groups)))]
    events: List[Any] = [None] * len(staging)
    probes = _probes(ck)
    if not groups:
        _read_pieces(ck, [], storage_options, threads, probes)  # nothing to copy; still checked
    ctx = torch.cuda.device(dev) if cuda else _NullContext()
    with ctx:
        for g, pieces in enumerate(groups):
            slot = g % len(staging)
            if events[slot] is not None:
                events[slot].synchronize()   # its previous group's copies are done
            buf = staging[slot]
            np_buf = buf.numpy()
            reads, pos = [], 0
            for k, a, n in pieces:
                i, t = ck.chosen[k]
                reads.append((i, t.offset + a, n, np_buf[pos:pos + n]))
                pos += n
            _read_pieces(ck, reads, storage_options, threads, probes if g == 0 else ())
            pos = 0
            for k, a, n in pieces:
                _swap(np_buf[pos:pos + n], _DTYPES[ck.chosen[k][1].dtype][4])
                flats[k][a:a + n].copy_(buf[pos:pos + n], non_blocking=cuda)  # type: ignore[index]
                pos += n
            if cuda:
                ev = torch.cuda.Event()
                ev.record()
                events[slot] = ev
    for ev in events:
        if ev is not None:
            ev.synchronize()
    return {t.name: r for (_, t), r in zip(ck.chosen, results)}


class _NullContext:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


# ---------------------------------------------------------------------------------------
# Headers only


def info(path: Any, *, storage_options: Optional[Mapping[str, Any]] = None,
         threads: Optional[int] = None) -> Dict[str, TensorInfo]:
    """``{name: TensorInfo}`` of every tensor (sharded: every shard's header), reading headers
    only (two small engine calls). Same ``path`` rules and header checks as :func:`load`."""
    ck = _open(path, None, storage_options, threads)
    return {t.name: t for _, t in ck.chosen}


def metadata(path: Any, *, storage_options: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """A file's ``__metadata__`` (``{}`` when it has none); for a sharded checkpoint (an index
    or a directory holding one) the index's ``"metadata"`` object (e.g. ``total_size``)."""
    location, remote, index_raw = _locate(path, storage_options)
    where = _display(location)
    if index_raw is not None:
        return dict(_parse_index(index_raw, where)[1])
    f = _File(location, where, remote)
    _read_headers([f], storage_options, None)
    return dict(f.meta or {})


# ---------------------------------------------------------------------------------------
# JAX (lsio/_safetensors_shards.py)


def load_jax(path: Any, shardings: Any, *, names: Optional[Iterable[str]] = None, dtype: Any = None,
             storage_options: Optional[Mapping[str, Any]] = None, threads: Optional[int] = None,
             group_bytes: Optional[int] = None, max_gap: Optional[int] = None,
             stats: Optional[Dict[str, int]] = None) -> Dict[str, Any]:
    """Load tensors onto JAX devices with the given shardings, reading only this process's shards.

    ``path``, ``names``, ``storage_options``, ``threads``, the result order and the errors are
    as for :func:`load`. Imports jax (``ImportError`` naming ``pip install jax`` without it).

    For each tensor, the sharding's ``addressable_devices_indices_map`` says which index box
    each of this process's devices holds. Each distinct box is read once (replicas: once per
    process, then put on every device holding it) as byte ranges of the file: one range when
    the sharding splits only the first axis, one per row of the box when it splits a later
    axis (the engine merges neighbours closer than ``max_gap``). Tensors are read in groups
    of about ``group_bytes`` (whole tensors, taken in the files' byte order, so no byte is
    read twice), one engine call per group into one 64-byte-aligned host buffer, and each
    tensor is placed with one ``jax.make_array_from_callback``; a group's transfers run
    while the next group is read, and the reads wait for the transfers of the group before
    that, so at most two groups are in host memory (a group is at least one tensor's share:
    this process's boxes of it). ``dtype`` conversions are copies beside the group. On CPU
    devices jax keeps aligned host memory as the device buffer itself (no copy): the group
    buffers then are the results. No process reads bytes of shards only other processes
    hold (beyond merged gaps), and nothing is exchanged between processes.

    Parameters
    ----------
    shardings:
        A ``jax.sharding.Sharding`` for every tensor; a dict ``name -> Sharding`` (every
        loaded tensor needs an entry: ``KeyError`` otherwise); or a callable
        ``(name, shape, dtype) -> Sharding`` (``dtype``: the stored numpy dtype), e.g. a
        wrapper of Levanter's ``best_effort_sharding``. A sharding that does not fit the
        tensor's shape raises ``ValueError`` naming the tensor and jax's reason.
    dtype:
        ``None``: the stored dtype. A dtype (e.g. ``jnp.bfloat16``): floating-point tensors
        are converted to it on the host before the transfer; integer and bool tensors keep
        theirs. A dict ``name -> dtype`` (others keep theirs), or a callable
        ``(name, shape, stored dtype) -> dtype or None``. Results are in jax's canonical
        dtype: without ``jax_enable_x64``, 64-bit tensors arrive as 32-bit ones, as
        ``jax.device_put`` would make them.
    group_bytes:
        Bytes read per engine call and held per group (``None``: ``LSIO_JAX_GROUP_BYTES``,
        else 256 MiB). A box larger than this is read as a group of its own.
    max_gap:
        Coalescing gap of the reads (``None``: ``LSIO_MERGE_GAP``, else 16 KiB for local
        files and 64 KiB for remote ones: gaps are mostly other processes' shards, read for
        nothing, so the engine's 1 MiB remote default is not used). ``0`` reads exactly the
        shards' bytes (one request per run of a strided box).
    stats:
        A dict, or ``None``: counts are added to it: ``tensors``, ``shards_read`` (distinct
        boxes read), ``device_puts``, ``bytes_needed`` (the boxes' bytes), ``groups`` and,
        from the engine, ``ranges``, ``requests`` and ``bytes_read`` (what was read,
        merged gaps included).

    Returns
    -------
    ``{name: jax.Array}`` with those shardings (global shapes; each process holds its
    addressable shards). F4 and F6 tensors raise :class:`lsio.UnsupportedError`.
    """
    return _safetensors_shards.load_jax(path, shardings, names=_names_list(names), dtype=dtype,
                                        storage_options=storage_options, threads=threads,
                                        group_bytes=group_bytes, max_gap=max_gap, stats=stats)


def chunk_plan(path: Any, *, chunk_bytes: Optional[int] = None, process_count: Optional[int] = None,
               names: Optional[Iterable[str]] = None, storage_options: Optional[Mapping[str, Any]] = None,
               threads: Optional[int] = None) -> List["Chunk"]:
    """The deterministic whole-chunk plan of a checkpoint (Levanter's scheme), headers only.

    Tensors are taken in file order (sharded checkpoints: shard by shard, in the order the
    index, or ``names`` when given, first names them) and packed into chunks: a chunk grows while its byte span stays
    within ``chunk_bytes`` and its tensors are in one file; a tensor is never split (one
    larger than ``chunk_bytes`` is a chunk of its own). Chunk ``i`` is owned by process
    ``i % process_count``; chunks are numbered across all the checkpoint's files (Levanter
    plans file by file, so there every file's chunk 0 is process 0's). Every process computes the same plan from the same headers.

    ``chunk_bytes``: ``None`` reads ``LSIO_SAFETENSORS_CHUNK_BYTES`` (sizes such as ``1G``),
    else 2 GiB. ``process_count``: ``None`` is ``jax.process_count()`` once
    ``jax.distributed`` is initialized, else 1 (asking jax earlier would start its backends
    and stop a later ``jax.distributed.initialize()``). ``names`` restricts the plan to those tensors (a chunk's byte span may
    then include tensors between them). Returns a list of :class:`Chunk`; read one with
    :func:`load_chunk`.
    """
    return _safetensors_shards.chunk_plan(path, chunk_bytes=chunk_bytes, process_count=process_count,
                                          names=_names_list(names), storage_options=storage_options,
                                          threads=threads)


def load_chunk(chunk: "Chunk", *, dtype: Any = None, storage_options: Optional[Mapping[str, Any]] = None,
               threads: Optional[int] = None) -> Dict[str, np.ndarray]:
    """Read one chunk of :func:`chunk_plan` with one engine call: ``{name: numpy array}`` of
    its tensors, views into the chunk's buffer (converted copies where ``dtype`` asks for
    another type; ``dtype`` as for :func:`load_jax`, without jax's canonicalisation).
    The file's header is read again in the same call and must be the one the plan was made
    from (else :class:`lsio.StorageError` with errno ESTALE: make the plan again).
    ``storage_options`` as the plan was made with."""
    return _safetensors_shards.load_chunk(chunk, dtype=dtype, storage_options=storage_options,
                                          threads=threads)

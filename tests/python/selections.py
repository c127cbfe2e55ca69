"""Seeded generators of numpy basic-indexing keys and crop batches.

Used by the parity tests: keys mix integers (negative too), slices with any
step (negative and larger than the chunk), bounds past either end, Ellipsis
and implicit trailing dimensions; crop batches include crops on the array's
edges and crops that repeat or share chunks.
"""

from __future__ import annotations

import numpy as np


def random_slice(rng: np.random.Generator, n: int) -> slice:
    """A slice over a dimension of length ``n``; mostly non-empty."""
    step = [None, 1, 1, 1, 2, 3, 7, -1, -1, -2, -3, -5][rng.integers(0, 12)]
    lo, hi = sorted(int(x) for x in rng.integers(0, n + 1, size=2))
    if rng.random() < 0.1:
        lo, hi = hi, lo  # empty (or reversed) on purpose
    if step is not None and step < 0:
        start, stop = hi - 1, lo - 1
    else:
        start, stop = lo, hi

    def spell(x, is_stop):
        r = rng.random()
        if x < 0:  # "before the start" for a negative-step stop
            return None if r < 0.6 else -n - 1 - int(rng.integers(0, 3))
        if r < 0.15:
            return x - n if x < n else (None if is_stop else x)  # negative
        if r < 0.25 and x >= n:
            return x + int(rng.integers(1, 5))  # past the end: clamped
        return x

    start, stop = spell(start, False), spell(stop, True)
    if step in (None, 1) or step > 0:
        if start == 0 and rng.random() < 0.5:
            start = None
        if stop == n and rng.random() < 0.5:
            stop = None
    return slice(start, stop, step)


def random_key(rng: np.random.Generator, shape: tuple):
    """A random basic-indexing key for an array of ``shape``."""
    ndim = len(shape)
    if ndim == 0:
        return [(), Ellipsis, (Ellipsis,)][rng.integers(0, 3)]
    parts: list = []
    for n in shape:
        if n > 0 and rng.random() < 0.25:
            i = int(rng.integers(0, n))
            parts.append(i - n if rng.random() < 0.4 else i)
        else:
            parts.append(random_slice(rng, n))
    r = rng.random()
    if r < 0.15:
        k = int(rng.integers(0, ndim + 1))  # dims covered by the Ellipsis
        pos = int(rng.integers(0, ndim - k + 1))
        parts = parts[:pos] + [Ellipsis] + parts[pos + k:]
    elif r < 0.25:
        parts = parts[: int(rng.integers(1, ndim + 1))]
    if len(parts) == 1 and rng.random() < 0.5:
        return parts[0]
    return tuple(parts)


def random_keys(seed: int, shape: tuple, count: int) -> list:
    rng = np.random.default_rng(seed)
    keys = [random_key(rng, shape) for _ in range(count)]
    keys.append(Ellipsis)
    if shape:
        keys.append(tuple(slice(None) for _ in shape))
        if min(shape) > 0:
            keys.append(tuple(-1 for _ in shape))  # last element
        keys.append(tuple(slice(None, None, -1) for _ in shape))
    return keys


def has_negative_step(key) -> bool:
    parts = key if isinstance(key, tuple) else (key,)
    return any(
        isinstance(p, slice) and p.step is not None and p.step < 0
        for p in parts
    )


def crop_slices(start, crop_shape) -> tuple:
    return tuple(
        slice(int(s), int(s) + int(c)) for s, c in zip(start, crop_shape)
    )


def random_crops(seed: int, shape: tuple, chunks: tuple, count: int = 12):
    """(starts (count, ndim) int64, crop shape) for ``read_crops``.

    The batch holds a crop at the origin, one touching the far corner, an
    exact repeat, a crop overlapping its neighbour inside the same chunk and
    chunk-aligned crops; the rest are uniform.
    """
    rng = np.random.default_rng(seed)
    ndim = len(shape)
    if ndim == 0:
        return np.zeros((count, 0), np.int64), ()
    crop = tuple(
        int(rng.integers(1, min(n, 2 * c + 3) + 1)) if n else 0
        for n, c in zip(shape, chunks)
    )
    hi = np.array([n - c for n, c in zip(shape, crop)])
    starts = np.stack(
        [rng.integers(0, h, endpoint=True, size=count) for h in hi], axis=1
    ).astype(np.int64)
    starts[0] = 0
    starts[1] = hi
    if count > 4:
        starts[3] = starts[2]
        starts[4] = np.minimum(starts[2] + 1, hi)
    if count > 6:
        for j in (5, 6):
            aligned = [
                (int(rng.integers(0, h + 1)) // c) * c
                for h, c in zip(hi, chunks)
            ]
            starts[j] = np.minimum(aligned, hi)
    return starts, crop

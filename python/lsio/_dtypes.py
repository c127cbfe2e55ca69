"""Record (structured) dtypes from the engine's JSON of them (cpp/src/zarr/dtype.h): numpy's
descr as nested lists ([name, format(, shape)]), or numpy's dict form for HDF5 compounds
({"names", "formats", "offsets", "itemsize"}, subarray formats as {"subarray", "shape"})."""

from __future__ import annotations

from typing import Any

import numpy as np


def descr_format(fmt: Any) -> Any:
    """The engine's JSON of a record format -> what ``np.dtype`` takes (JSON made numpy's
    descr tuples lists)."""
    if isinstance(fmt, str):
        return fmt
    if isinstance(fmt, dict):
        if "subarray" in fmt:
            return (descr_format(fmt["subarray"]), tuple(fmt["shape"]))
        return {"names": fmt["names"], "formats": [descr_format(f) for f in fmt["formats"]],
                "offsets": fmt["offsets"], "itemsize": fmt["itemsize"]}
    return [(e[0], descr_format(e[1])) + ((tuple(e[2]),) if len(e) > 2 else ()) for e in fmt]


def record_dtype(fmt: Any) -> np.dtype:
    return np.dtype(descr_format(fmt))

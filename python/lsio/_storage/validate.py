"""Checks for one storage option's value, shared by URL parsing, credential sources and
``resolve``: each returns the value in its canonical type or raises ``TypeError`` (wrong type)
or ``ValueError`` (wrong value) naming the option as the caller spelled it."""

from __future__ import annotations

import math
import operator
import os
import re
from typing import Any, Optional

CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f]")


def type_name(value: Any) -> str:
    return type(value).__name__


def as_str(value: Any, name: str, *, empty: bool = False) -> str:
    if not isinstance(value, str):
        raise TypeError(f"storage_options {name} must be a str, got {type_name(value)}")
    if not empty and not value:
        raise ValueError(f"storage_options {name} must not be empty")
    if CONTROL_CHARS.search(value):
        raise ValueError(f"storage_options {name} must not contain control characters")
    return value


def as_bool(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"storage_options {name} must be a bool, got {type_name(value)}")
    return value


def as_int(value: Any, name: str, lo: int, hi: Optional[int] = None) -> int:
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"storage_options {name} must be an integer, got {type_name(value)}")
    value = operator.index(value)
    if value < lo or (hi is not None and value > hi):
        bounds = f">= {lo}" if hi is None else f"in {lo}..{hi}"
        raise ValueError(f"storage_options {name} must be {bounds}, got {value}")
    return int(value)


def as_seconds(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"storage_options {name} must be a number of seconds, got {type_name(value)}")
    value = float(value)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"storage_options {name} must be a finite number of seconds > 0, got {value}")
    return value


def getenv(name: str) -> Optional[str]:
    value = os.environ.get(name, "").strip()
    return value or None

"""Checks for one option's value, shared by URL parsing, credential sources and ``resolve``
(and by :mod:`lsio._options` for ``lsio.open``'s arguments): each returns the value in its
canonical type or raises ``TypeError`` (wrong type) or ``ValueError`` (wrong value) naming
the option as the caller spelled it. ``renamed`` takes an option given under its old name."""

from __future__ import annotations

import math
import operator
import os
import re
import sys
import warnings
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


# The lsio package directory: deprecation warnings are attributed to the first caller outside
# it, so that Python's default filters (which show DeprecationWarning for code in __main__)
# and pytest point at the user's line, however deep inside lsio the option was read.
_LSIO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _user_stacklevel() -> int:
    """``stacklevel`` for a ``warnings.warn`` made by this function's caller: 2 (that
    caller's caller) or more, up to the first frame outside lsio."""
    level, frame = 2, sys._getframe(2)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_LSIO_DIR):
        level, frame = level + 1, frame.f_back
    return level


def renamed(old_value: Any, new_value: Any, old: str, new: str, what: str, hint: str = "") -> Any:
    """The value of an option renamed from ``old`` to ``new`` (``None``: not given).
    The old name still works, with a ``DeprecationWarning`` naming the new one; both at once
    is a ``ValueError`` even when the values agree, since a caller updating only one of them
    would otherwise be read silently. ``what`` says where the option is given
    ("lsio.open() argument", "storage_options key")."""
    if old_value is None:
        return new_value
    if new_value is not None:
        raise ValueError(f"{what}s {old!r} and {new!r} are one option under its old and new "
                         f"name; give only {new!r}")
    warnings.warn(f"{what} {old!r} is deprecated: it is now called {new!r}{hint}",
                  DeprecationWarning, stacklevel=_user_stacklevel())
    return old_value

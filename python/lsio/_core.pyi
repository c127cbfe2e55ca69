"""Type stubs of the native engine module (internal; use the lsio package)."""

from typing import Any, Optional

import numpy as np

class Array:
    def info(self) -> dict[str, Any]: ...
    def close(self) -> None: ...
    def backend_name(self) -> str: ...
    def stats(self) -> dict[str, int]: ...
    def stored_chunk_nbytes(self) -> np.ndarray: ...
    def read_into(
        self, starts: list[int], counts: list[int], steps: list[int], out: np.ndarray,
        transform: Optional[ElementTransform] = None,
    ) -> None: ...
    def read_simple(self, key: Any, out: Optional[np.ndarray], dtype: np.dtype) -> Optional[np.ndarray]: ...
    def read_outer_into(
        self, runs: list[np.ndarray], out: np.ndarray, transform: Optional[ElementTransform] = None
    ) -> None: ...
    def read_crops_into(
        self, starts: np.ndarray, shape: list[int], out: np.ndarray,
        transform: Optional[ElementTransform] = None,
    ) -> None: ...

def open(
    path: str,
    threads: int = 0,
    io: str = "auto",
    queue_depth: int = 64,
    max_gap: int = 16384,
    max_request: int = 1048576,
    index_cache_bytes: int = 67108864,
    memory_limit: int = 0,
    direct: bool = False,
    cache_bytes: int = 0,
) -> Array: ...
class RemoteStore:
    def __init__(self, options: dict[str, Any]) -> None: ...
    def sub(self, path: str) -> RemoteStore: ...
    def get(self, key: str, max_bytes: int = 67108864) -> Optional[bytes]: ...
    def exists(self, key: str) -> bool: ...
    def set_credentials(
        self, access_key_id: str, secret_access_key: str, session_token: str, token: str
    ) -> None: ...
    def counters(self) -> dict[str, int]: ...
    def location(self, key: str = "") -> str: ...

def open_remote(
    store: RemoteStore,
    threads: int = 0,
    max_gap: int = 1048576,
    max_request: int = 16777216,
    index_cache_bytes: int = 67108864,
    memory_limit: int = 0,
    adaptive_coalescing: bool = False,
) -> Array: ...
def decode_vlen_utf8(codecs_json: str, stored: bytes, items: int) -> list[str]:
    """One variable-length string chunk: bytes -> bytes codecs (JSON list) undone, then the
    vlen-utf8 items in storage order (lsio/strings.h)."""
    ...

def check_out(
    out: object, array: Array, shape: list[int], transform: Optional[ElementTransform] = None
) -> None: ...

class ElementTransform:
    out_type: str
    scale: float
    offset: float
    def __init__(self, out_type: str, scale: float = 1.0, offset: float = 0.0) -> None: ...
def io_backend_info() -> dict[str, Any]: ...
def cache_info() -> dict[str, int]: ...
def cache_clear() -> None: ...
def _last_call_profile() -> dict[str, int]: ...
def read_ranges(
    sources: list[Any],
    source_index: np.ndarray,
    offsets: np.ndarray,
    lengths: np.ndarray,
    out: Any,
    out_offsets: Optional[np.ndarray] = None,
    threads: int = 0,
    io: str = "auto",
    queue_depth: int = 64,
    max_gap: int = 0,
    max_request: int = 0,
) -> None:
    """Byte ranges into buffers (lsio/ranges.h); python/lsio/_ranges.py normalises the arguments."""
    ...

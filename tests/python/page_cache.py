"""Dropping a test's files from the page cache, so its next reads go to the device (the cold
paths: io_uring's queued reads, decoding as reads land)."""

from __future__ import annotations

import os

import lsio


def drop_page_cache(root) -> None:
    """Ask the kernel to evict the (clean) pages of every file under `root` from the page
    cache. lsio's open files go first: pages their mappings touched (hot reads in place)
    cannot be evicted while mapped. Nothing is evicted on tmpfs."""
    lsio.close_files()
    for dirpath, _, files in os.walk(root):
        for f in files:
            fd = os.open(os.path.join(dirpath, f), os.O_RDONLY)
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)

"""Hand the memory a song used back to the system (glibc's allocator; elsewhere nothing).

Writing a take decodes it, measures its tempo and key and encodes it, in worker threads.
glibc keeps what those threads freed in per-thread arenas, so an idle node after a dozen
songs held ~50 MiB more than a fresh one. Fewer arenas, big blocks mapped on their own and a
trim after each song give most of it back; what stays is the audio libraries themselves
(numpy, libsndfile, soxr)."""

from __future__ import annotations

import ctypes
import gc
import sys
from functools import lru_cache

M_ARENA_MAX = -8  # mallopt's parameter numbers in glibc's malloc.h
M_MMAP_THRESHOLD = -3
NODE_ARENAS = 2
NODE_MMAP_THRESHOLD = 1 << 20  # bytes: a block this big or bigger is mapped on its own


@lru_cache(maxsize=1)
def _glibc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)  # this process's own C library, whichever it is
    except OSError:
        return None
    # glibc only (musl has no malloc_trim)
    if not all(hasattr(libc, f) for f in ("gnu_get_libc_version", "malloc_trim", "mallopt")):
        return None
    return libc


def configure_allocator(
    arenas: int = NODE_ARENAS, mmap_threshold: int = NODE_MMAP_THRESHOLD
) -> bool:
    """Cap glibc's malloc arenas and fix its mmap threshold; True when both are set. Call
    it before the worker threads start.

    With the threshold fixed, a block of 1 MiB or more (a song's audio, its decoded frames)
    is mapped on its own and unmapped when it is freed. By default glibc raises the
    threshold to the size of each big block freed, up to 32 MiB; after that, such buffers
    come from the heap, among small objects that live on, and the trim after a song cannot
    give their pages back. Over 200 songs the node's RSS then rose 14 MiB and swung by up
    to 33; with the threshold fixed it rose 2 (bench/soak.py)."""
    libc = _glibc()
    if libc is None:
        return False
    capped = libc.mallopt(M_ARENA_MAX, arenas) == 1
    fixed = libc.mallopt(M_MMAP_THRESHOLD, mmap_threshold) == 1
    return capped and fixed


def give_back() -> bool:
    """Collect the garbage a song left in reference cycles, then return freed heap pages to
    the system; True when some were. Blocking (a few ms): call it off the event loop.

    A song's big buffers can sit in cycles that only the cyclic collector frees: an httpx
    Response and its stream refer to each other (https://github.com/encode/httpx/pull/3733),
    and a Response holds its Request, whose body is an edit's source audio. Until the next
    collection, which an idle node may not reach for a long time, those stay resident."""
    gc.collect()
    libc = _glibc()
    return bool(libc is not None and libc.malloc_trim(0) == 1)

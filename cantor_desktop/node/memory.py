"""Hand the memory a song used back to the system (glibc's allocator; elsewhere nothing).

Writing a take decodes it, measures its tempo and key and encodes it, in worker threads.
glibc keeps what those threads freed in per-thread arenas, so an idle node after a dozen
songs held ~50 MiB more than a fresh one. Fewer arenas and a trim after each song give most
of it back; what stays is the audio libraries themselves (numpy, libsndfile, soxr)."""

from __future__ import annotations

import ctypes
import gc
import sys
from functools import lru_cache

M_ARENA_MAX = -8  # mallopt's parameter number in glibc's malloc.h
NODE_ARENAS = 2


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


def limit_arenas(count: int = NODE_ARENAS) -> bool:
    """Cap glibc's malloc arenas (call before the worker threads start); True when set."""
    libc = _glibc()
    return bool(libc is not None and libc.mallopt(M_ARENA_MAX, count) == 1)


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

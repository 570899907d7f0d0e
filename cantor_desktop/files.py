"""Writing files so that no reader ever sees a part of one: the one way Cantor writes its
settings, state, songs, caches and secrets' files.

- :func:`write_atomic` — a temp file beside the target, fsynced, renamed over it (the
  folder fsynced too where the OS allows);
- :func:`write_private_file` — the same for a secret: readable by the user only;
- :func:`replace_file` — ``os.replace`` that waits out a Windows reader holding the target;
- :func:`write_stream` — a file that arrives in chunks (an upload), written a block at a time
  off the event loop and fsynced before it is used.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import AsyncIterable, Callable

REPLACE_WAITS = (0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.8)
"""Pauses between tries of :func:`replace_file` (about 2 s in all)."""
STREAM_BLOCK = 1 << 20
""":func:`write_stream` gathers chunks into blocks of at least this many bytes, one worker
thread call each (an upload arrives in chunks of a few KiB)."""


def replace_file(src: str | os.PathLike, dst: str | os.PathLike) -> None:
    """``os.replace``, tried again for a while when Windows refuses because another process
    (the app reading node.toml, a virus scanner, an indexer) has ``dst`` open: that is
    PermissionError (WinError 5 or 32) there, and it passes in milliseconds."""
    for wait in REPLACE_WAITS:
        try:
            os.replace(src, dst)
            return
        except PermissionError as exc:
            if not _held_open(exc):
                raise
            time.sleep(wait)
    os.replace(src, dst)


def _held_open(exc: PermissionError) -> bool:
    """Windows says "access denied" or "sharing violation" for a file held open; on POSIX
    a PermissionError from rename is a real permission problem, not worth waiting for."""
    return getattr(exc, "winerror", None) in (5, 32) or sys.platform == "win32"


def write_atomic(path: Path, data: bytes) -> None:
    """Write data to path so readers see the old or the new file, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if path.exists():
            try:
                os.chmod(tmp, path.stat().st_mode & 0o777)
            except OSError:
                pass
        replace_file(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    if hasattr(os, "O_DIRECTORY"):
        try:
            dfd = os.open(path.parent, os.O_DIRECTORY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        except OSError:
            pass


def write_private_file(path: Path, text: str) -> None:
    """Create a secret's file readable and writable by the user only (never a partial file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_BINARY", 0)
    fd = os.open(tmp, flags, 0o600)
    try:
        os.write(fd, text.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
    if sys.platform != "win32":
        os.chmod(tmp, 0o600)  # whatever the umask made of it
    replace_file(tmp, path)


async def write_stream(
    path: Path,
    chunks: AsyncIterable[bytes],
    check: Callable[[int, bytes], None] | None = None,
    digest=None,
) -> int:
    """Write ``chunks`` into a new file at ``path`` and fsync it; the number of bytes written.

    The writes (and the fsync) run in a worker thread, :data:`STREAM_BLOCK` at a time, so the
    event loop never waits for the disk. ``check(total, chunk)`` sees each chunk, with the
    total that has arrived with it, before the chunk is kept: it raises to refuse the rest.
    ``digest`` (a ``hashlib`` object) is updated with every byte written. On an exception
    the file stays as it is: the caller removes it."""
    total = 0
    with open(path, "wb") as out:
        pending: list[bytes] = []
        size = 0

        def write(parts: list[bytes]) -> None:
            data = b"".join(parts)
            if digest is not None:
                digest.update(data)
            out.write(data)

        async for chunk in chunks:
            total += len(chunk)
            if check is not None:
                check(total, chunk)
            pending.append(chunk)
            size += len(chunk)
            if size >= STREAM_BLOCK:
                parts, pending, size = pending, [], 0
                await asyncio.to_thread(write, parts)

        def finish() -> None:
            write(pending)
            out.flush()
            os.fsync(out.fileno())

        await asyncio.to_thread(finish)
    return total

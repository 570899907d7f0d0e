"""Writing files so that no reader ever sees a part of one: the one way Cantor writes its
settings, state, songs, caches and secrets' files.

- :func:`write_atomic` — a temp file beside the target, fsynced, renamed over it (the
  folder fsynced too where the OS allows);
- :func:`write_private_file` — the same for a secret: readable by the user only;
- :func:`replace_file` — ``os.replace`` that waits out a Windows reader holding the target.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

REPLACE_WAITS = (0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.8)
"""Pauses between tries of :func:`replace_file` (about 2 s in all)."""


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

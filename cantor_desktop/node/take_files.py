"""Where a take's files may be, and opening them without following a link out.

A song record names its takes' files by path, and in a pool the records come from Redis,
which anyone who can write there can change. So a path from a record is used — served,
read as an edit's source, deleted — only when it names a plain file directly inside a
songs folder of this node: the folder in ``songs.dir`` now (in a pool with shared songs,
the share), or one it wrote takes into before (kept in ``state/song-folders.json`` by
:func:`remember_folder`, so songs made before ``songs.dir`` changed still play). The file
itself must not be a link, and it is opened relative to its folder without following one
(POSIX ``O_NOFOLLOW`` under the folder's descriptor), so a link put in its place between
the check and the open is refused too.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import sys
from pathlib import Path
from collections.abc import Iterable
from typing import BinaryIO

from ..config import current
from ..files import write_atomic
from ..system.paths import paths

FOLDERS_FILE = "song-folders.json"
MOST_FOLDERS = 64


class OutsideSongs(ValueError):
    """A path from a song record that is not a take file of this node's songs folders."""


def _folders_file() -> Path:
    return paths().state_dir / FOLDERS_FILE


def _remembered() -> list[str]:
    try:
        found = json.loads(_folders_file().read_text("utf-8"))
    except (OSError, ValueError):
        return []
    return [f for f in found if isinstance(f, str)] if isinstance(found, list) else []


def remember_folder(folder: Path) -> None:
    """``folder`` holds takes this node wrote (called before it writes one there)."""
    real = os.path.realpath(folder)
    known = _remembered()
    if real in known:
        return
    known = [real, *known][:MOST_FOLDERS]
    write_atomic(_folders_file(), json.dumps(known, indent=1).encode("utf-8"))


def adopt_folders(audio_paths: Iterable[str]) -> None:
    """Once per home (while ``song-folders.json`` is not there): the folders of the takes
    this node's own queue file names, so songs made before a change of ``songs.dir`` stay
    playable. The queue file is the node's own state; records from a pool never come here."""
    if _folders_file().exists():
        return
    folders = {os.path.realpath(Path(p).parent) for p in audio_paths if Path(p).is_absolute()}
    now = os.path.realpath(current()[0].songs_dir())
    found = sorted(folders - {now})[: MOST_FOLDERS - 1]
    write_atomic(_folders_file(), json.dumps([now, *found], indent=1).encode("utf-8"))


def song_folders() -> list[str]:
    """Every songs folder of this node, resolved: ``songs.dir`` first."""
    cfg, _err = current()
    now = os.path.realpath(cfg.songs_dir())
    return [now, *(f for f in _remembered() if f != now)]


def _device(path: Path) -> bool:
    """A Windows device name (``CON``, ``NUL``, ``COM1`` …), which opens the device."""
    stem = path.name.split(".", 1)[0].upper().rstrip(" ")
    return stem in ("CON", "PRN", "AUX", "NUL") or (
        len(stem) == 4 and stem[:3] in ("COM", "LPT") and stem[3].isdigit()
    )


def checked(path: str | Path) -> Path:
    """``path`` when it names a file directly inside one of :func:`song_folders` and is not
    a link (it need not exist); :class:`OutsideSongs` naming the path otherwise."""
    text = str(path)
    given = Path(text)
    if not text or not given.is_absolute() or given.name in ("", ".", "..") or _device(given):
        raise OutsideSongs(f"{text[:200]!r} is not a take file of this node")
    folder = os.path.realpath(given.parent)
    if folder not in song_folders():
        raise OutsideSongs(f"{text[:200]!r} is not in this node's songs folder")
    found = Path(folder) / given.name
    try:
        if stat.S_ISLNK(os.lstat(found).st_mode):
            raise OutsideSongs(f"{text[:200]!r} is a link, not a take file")
    except FileNotFoundError:
        pass
    return found


def open_take(path: str | Path) -> BinaryIO:
    """The take file at ``path`` (:func:`checked`), open for reading: a regular file, never
    reached through a link. FileNotFoundError when it is gone."""
    found = checked(path)
    if sys.platform == "win32":
        before = os.lstat(found)
        fh = open(found, "rb")  # noqa: SIM115 - returned to the caller, who closes it
        after = os.fstat(fh.fileno())
        if (before.st_ino, before.st_dev) != (after.st_ino, after.st_dev) or before.st_reparse_tag:
            fh.close()
            raise OutsideSongs(f"{str(path)[:200]!r} changed while it was opened")
    else:
        folder = os.open(found.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            try:
                # O_NONBLOCK: a FIFO put in a take's place never blocks the open
                flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
                fd = os.open(found.name, flags, dir_fd=folder)
            except OSError as exc:
                if exc.errno == errno.ELOOP:  # the name is a link now
                    raise OutsideSongs(f"{str(path)[:200]!r} is a link, not a take file") from None
                raise
        finally:
            os.close(folder)
        fh = os.fdopen(fd, "rb")
    if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
        fh.close()
        raise OutsideSongs(f"{str(path)[:200]!r} is not a regular file")
    return fh

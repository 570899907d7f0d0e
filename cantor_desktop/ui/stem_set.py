"""Stems as a set a musician takes into a DAW at once: which songs are the stems of a take
(:func:`stems_of`), and their files named ``{title}_{track}`` for the drag
(:class:`StemNames`) — the node names files by date and caption, the same for every stem of
a song, which a DAW's track list cannot tell apart.

A named file is a hard link to the take's own file in the cache (no copy, nothing new on
disk) or, across file systems, a copy made once; the song's own file is never touched.
With exported drags (``export.drag``) the exported file is handed out instead, named by the
export pattern, whose ``{title}`` is the stem's ``{title}_{track}``.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import Iterable

from ..song.naming import safe_name
from ..system.paths import paths
from ..song.record import Song, SongState, Take
from ..song.request import TRACKS
from ..views.song_records import parent_of

log = logging.getLogger(__name__)


def is_stem(song: Song) -> bool:
    return song.request.get("task") == "extract"


def stems_of(songs: Iterable[Song], song: Song) -> list[Song]:
    """The finished stems made from ``song`` — or, for a stem, it and its siblings (made from
    the same take) — in the engine's order of tracks, newest first for a track made twice."""
    songs = list(songs)
    if is_stem(song):
        parent = parent_of(song)
        take = (song.request.get("source") or {}).get("take", 1)
        found = [
            s
            for s in songs
            if is_stem(s)
            and parent_of(s) == parent
            and (s.request.get("source") or {}).get("take", 1) == take
        ]
    else:
        found = [s for s in songs if is_stem(s) and parent_of(s) == song.id]
    found = [s for s in found if s.state == SongState.DONE and s.takes]

    def order(s: Song):
        track = str(s.request.get("track") or "")
        return (TRACKS.index(track) if track in TRACKS else len(TRACKS), -s.created)

    return sorted(found, key=order)


def stem_file_name(song: Song, take: Take, source: str) -> str:
    """``{title}_{track}.ext`` (the stem's title, which Cantor sets so), ``_takeN`` added
    for a stem of several takes."""
    title = song.title or f"{song.caption}_{song.request.get('track')}"
    n = f"_take{take.n}" if len(song.takes) > 1 else ""
    return safe_name(title + n, fallback=f"stem_{song.request.get('track')}") + Path(source).suffix


class StemNames:
    """Each stem's file under its DAW name, made when a drag asks (hard links are
    instant; the drag handler is synchronous)."""

    def folder(self, song: Song, take: Take) -> Path:
        return paths().stems_dir / f"{song.id}_take{take.n}"

    def named(self, song: Song, take: Take, source: str) -> str:
        """The named file for ``source`` (the take's file on this machine); ``source``
        itself for a song that is no stem, or when no named file can be made."""
        if not is_stem(song):
            return source
        dest = self.folder(song, take) / stem_file_name(song, take, source)
        try:
            src = os.stat(source)
            try:
                have = os.stat(dest)
                if (have.st_ino == src.st_ino and have.st_dev == src.st_dev) or (
                    have.st_size == src.st_size and have.st_mtime_ns >= src.st_mtime_ns
                ):
                    return str(dest)
            except FileNotFoundError:
                pass
            dest.parent.mkdir(parents=True, exist_ok=True)
            for old in dest.parent.iterdir():  # a renamed stem: its old name goes
                old.unlink(missing_ok=True)
            try:
                os.link(source, dest)
            except OSError:  # another file system: copy it once
                part = dest.with_name(dest.name + ".part")
                shutil.copyfile(source, part)
                part.replace(dest)
            return str(dest)
        except OSError as exc:
            log.warning("could not name the stem %s: %s", source, exc)
            return source

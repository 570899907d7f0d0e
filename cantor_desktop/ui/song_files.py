"""Where a song's audio is on this machine.

A local node writes songs where the app can read them. A node on another machine (or one
whose path does not exist here) does not: its audio is fetched once with
``NodeClient.audio`` into ``paths().remote_songs_dir`` (named like the node's file) as an
asyncio task on the Qt loop, and the cached copy is used to play, draw and drag.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from PySide6.QtCore import QFile, QObject, QUrl, Signal
from PySide6.QtGui import QDesktopServices

from ..system.paths import paths
from ..song.record import Song, SongState, Take, check_song_id, safe_file_name


def node_file_name(song: Song, take: Take | None = None) -> str:
    """The node's file name of a take (its path may be another OS's), else one made of the
    song id (checked when the record was made: never a path)."""
    take = take or (song.takes[0] if song.takes else None)
    n = take.n if take is not None else 1
    return safe_file_name(
        take.audio if take is not None else "", f"{check_song_id(song.id)}_take{n}.wav"
    )


class SongFiles(QObject):
    fetched = Signal(str)  # song id: a take's audio is now in the cache
    failed = Signal(str, str)  # song id, the reason in words

    TTL = 5.0  # seconds an existence check is trusted (painting asks often)

    def __init__(self, link, parent: QObject | None = None):
        super().__init__(parent)
        self.link = link
        self._seen: dict[str, tuple[bool, float]] = {}
        self._fetching: set[tuple[str, int]] = set()
        self._failed: dict[tuple[str, int], str] = {}
        self._remote: tuple[bool, float] | None = None
        self._names: dict[tuple[str, int, str], str] = {}
        self._cache_dir: Path | None = None  # paths() resolves the home: once, not per row

    def _exists(self, path: str) -> bool:
        now = time.monotonic()
        known = self._seen.get(path)
        if known is None or now - known[1] > self.TTL:
            known = (os.path.exists(path), now)
            self._seen[path] = known
        return known[0]

    def cached_path(self, song: Song, take: Take) -> Path:
        if self._cache_dir is None:
            self._cache_dir = paths().remote_songs_dir
        return self._cache_dir / node_file_name(song, take)

    def _cached_name(self, song: Song, take: Take) -> str:
        """:meth:`cached_path` as text, worked out once per take (painting asks often)."""
        key = (song.id, take.n, take.audio)
        found = self._names.get(key)
        if found is None:
            found = self._names[key] = str(self.cached_path(song, take))
        return found

    def is_remote(self, song: Song, take: Take | None) -> bool:
        """The node's file is not on this machine: a remote node, or a path not here."""
        if take is None:
            return False
        return self._link_remote() or not self._exists(take.audio)

    def _link_remote(self) -> bool:
        """``link.remote`` may read node.toml: asked once per TTL, not once per painted row."""
        now = time.monotonic()
        if self._remote is None or now - self._remote[1] > self.TTL:
            self._remote = (self.link.connection.remote, now)
        return self._remote[0]

    def local(self, song: Song | None, take: Take | None = None) -> str | None:
        """The file of ``take`` (take 1 when not given) to play, draw and drag, if it is on
        this machine now."""
        if song is None or song.state != SongState.DONE or not song.takes:
            return None
        take = take or song.takes[0]
        if not self.is_remote(song, take):
            return take.audio
        cached = self._cached_name(song, take)
        return cached if self._exists(cached) else None

    def fetching(self, song: Song, take: Take | None = None) -> bool:
        return (song.id, take.n if take else 1) in self._fetching

    def problem(self, song: Song, take: Take | None = None) -> str | None:
        return self._failed.get((song.id, take.n if take else 1))

    def ensure(self, song: Song | None, take: Take | None = None) -> str | None:
        """The local file, or None after starting its fetch (once) when the node has it."""
        found = self.local(song, take)
        if found is not None or song is None or song.state != SongState.DONE or not song.takes:
            return found
        take = take or song.takes[0]
        key = (song.id, take.n)
        if key in self._fetching or key in self._failed or not self.link.songs.running:
            return None
        self._fetching.add(key)
        dest = self.cached_path(song, take)

        def done(path) -> None:
            self._fetching.discard(key)
            self._seen.pop(str(dest), None)
            self.fetched.emit(song.id)

        def failed(text: str) -> None:
            self._fetching.discard(key)
            self._failed[key] = text
            self.failed.emit(song.id, text)

        self.link.songs.fetch_audio(song, take, dest, on_done=done, on_error=failed)
        return None

    def drop_cached(self, song: Song) -> None:
        """Delete the cached copies of a remote song's takes (it was moved to the trash)."""
        for take in song.takes:
            self.link.songs.stop_fetch(song, take)
            self._fetching.discard((song.id, take.n))
            path = self.cached_path(song, take)
            for p in (path, path.with_name(path.name + ".part")):
                try:
                    p.unlink()
                except FileNotFoundError:
                    pass


def reveal_in_file_manager(path: str) -> bool:
    """Show ``path`` selected in the platform's file manager (its folder where the file
    manager cannot select); False when none answers."""
    try:
        if sys.platform == "darwin":
            subprocess.Popen(["open", "-R", path])
            return True
        if sys.platform == "win32":
            subprocess.Popen(["explorer", "/select,", path])
            return True
        return QDesktopServices.openUrl(QUrl.fromLocalFile(os.path.dirname(path)))
    except OSError:
        return False


def trash_take(take: Take) -> list[str]:
    """Move a take's audio and sidecar to the trash; the paths that could not be moved."""
    problems = []
    sidecar = take.sidecar or os.path.splitext(take.audio)[0] + ".json"
    for path in (take.audio, sidecar):
        if os.path.exists(path) and not _trash(path):
            problems.append(path)
    return problems


def _trash(path: str) -> bool:
    result = QFile.moveToTrash(path)
    return result[0] if isinstance(result, tuple) else bool(result)

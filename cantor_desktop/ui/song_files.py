"""Where a song's audio is on this machine.

A local node writes songs where the app can read them. A node on another machine (or one
whose path does not exist here) does not: its audio is fetched once with
``NodeClient.audio`` into ``paths().remote_songs_dir`` (named like the node's file) as an
asyncio task on the Qt loop, and the cached copy is used to play, draw and drag.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from ..nodeclient import check_song_id, safe_file_name
from ..paths import paths
from .song_records import SongRecord


def node_file_name(rec: SongRecord) -> str:
    """The node's file name (its path may be another OS's), else the song id (checked when
    the record was made: never a path)."""
    return safe_file_name(rec.path or "", f"{check_song_id(rec.id)}.wav")


class SongFiles(QObject):
    fetched = Signal(str)        # song id: its audio is now in the cache
    failed = Signal(str, str)    # song id, the reason in words

    TTL = 5.0  # seconds an existence check is trusted (painting asks often)

    def __init__(self, link, parent: QObject | None = None):
        super().__init__(parent)
        self.link = link
        self._seen: dict[str, tuple[bool, float]] = {}
        self._fetching: set[str] = set()
        self._failed: dict[str, str] = {}
        self._remote: tuple[bool, float] | None = None

    def _exists(self, path: str) -> bool:
        now = time.monotonic()
        known = self._seen.get(path)
        if known is None or now - known[1] > self.TTL:
            known = (os.path.exists(path), now)
            self._seen[path] = known
        return known[0]

    def cached_path(self, rec: SongRecord) -> Path:
        return paths().remote_songs_dir / node_file_name(rec)

    def is_remote(self, rec: SongRecord) -> bool:
        """The node's file is not on this machine: a remote node, or a path not here."""
        if not rec.path:
            return False
        return self._link_remote() or not self._exists(rec.path)

    def _link_remote(self) -> bool:
        """``link.remote`` reads node.toml: asked once per TTL, not once per painted row."""
        now = time.monotonic()
        if self._remote is None or now - self._remote[1] > self.TTL:
            self._remote = (bool(getattr(self.link, "remote", False)), now)
        return self._remote[0]

    def local(self, rec: SongRecord | None) -> str | None:
        """The file to play, draw and drag, if it is on this machine now."""
        if rec is None or not rec.path or rec.state != "done":
            return None
        if not self.is_remote(rec):
            return rec.path
        cached = str(self.cached_path(rec))
        return cached if self._exists(cached) else None

    def fetching(self, song_id: str) -> bool:
        return song_id in self._fetching

    def problem(self, song_id: str) -> str | None:
        return self._failed.get(song_id)

    def ensure(self, rec: SongRecord | None) -> str | None:
        """The local file, or None after starting its fetch (once) when the node has it."""
        found = self.local(rec)
        if found is not None or rec is None or not rec.path or rec.state != "done":
            return found
        if (rec.id in self._fetching or rec.id in self._failed
                or getattr(self.link, "client", None) is None):
            return None
        self._fetching.add(rec.id)
        dest = self.cached_path(rec)

        async def fetch():
            return await self.link.client.audio(rec.id, dest, take=1)

        def done(path) -> None:
            self._fetching.discard(rec.id)
            self._seen.pop(str(dest), None)
            self.fetched.emit(rec.id)

        def failed(text: str) -> None:
            self._fetching.discard(rec.id)
            self._failed[rec.id] = text
            self.failed.emit(rec.id, text)

        self.link.tasks.start(f"audio:{rec.id}", fetch(), on_error=failed, on_done=done)
        return None

    def drop_cached(self, rec: SongRecord) -> None:
        """Delete the cached copy of a remote song (it was moved to the trash)."""
        self.link.tasks.cancel(f"audio:{rec.id}")
        self._fetching.discard(rec.id)
        path = self.cached_path(rec)
        for p in (path, path.with_name(path.name + ".part")):
            try:
                p.unlink()
            except FileNotFoundError:
                pass
        self._seen.pop(str(path), None)

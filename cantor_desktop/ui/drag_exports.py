"""The files a drag hands out when the musician asked for exported ones (node.toml
``export.drag``): each selected take exported with the remembered choices into the cache,
prepared in the background as soon as it is selected, so the drag itself (a synchronous
mouse handler) only picks the finished file. Until it is ready the drag hands out the file
as made and the page says why."""

from __future__ import annotations

import asyncio
import hashlib
import os
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from .. import config
from ..system.paths import paths
from ..song.record import Song, Take
from .tasks import Tasks


class DragExports(QObject):
    ready = Signal(str)  # the exported path of a take

    def __init__(self, files, parent: QObject | None = None):
        super().__init__(parent)
        self.files = files  # SongFiles: the take's file on this machine
        self.tasks = Tasks()
        self._done: dict[str, str] = {}

    @staticmethod
    def wanted() -> bool:
        return bool(config.current()[0].get("export.drag"))

    def _options(self):
        from .. import export

        return export.ExportOptions.from_config(config.current()[0])

    def _key(self, source: str, options) -> str:
        try:
            stamp = os.stat(source).st_mtime_ns
        except OSError:
            stamp = 0
        text = f"{source}|{stamp}|{options}"
        return hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]

    def path(self, song: Song, take: Take) -> str | None:
        """The exported file for the drag, if it is ready (else None, and it is made)."""
        source = self.files.ensure(song, take)
        if source is None:
            return None
        options = self._options()
        key = self._key(source, options)
        found = self._done.get(key)
        if found and os.path.exists(found):
            return found
        self.prepare(song, take)
        return None

    def prepare(self, song: Song, take: Take) -> None:
        """Export the take in the background (once per file and choices)."""
        source = self.files.ensure(song, take)
        if source is None:
            return
        options = self._options()
        key = self._key(source, options)
        if key in self._done or self.tasks.running(key):
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        from .export_dialog import export_takes, song_meta

        folder = paths().drag_exports_dir / key
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.iterdir():  # a stale attempt of the same choices
            old.unlink(missing_ok=True)
        meta = song_meta(song, take)

        def done(results) -> None:
            self._done[key] = str(results[0].path)
            self.ready.emit(self._done[key])

        self.tasks.start(
            key,
            asyncio.to_thread(
                export_takes,
                [(source, meta)],
                Path(folder),
                options,
                lambda *_: None,
                lambda: False,
            ),
            on_done=done,
        )

    def shutdown(self) -> None:
        self.tasks.cancel_all()

"""The app's one link to its node: a set of services, each owning its state and its signals,
on one task runner (:mod:`.tasks`: every network or process step is an asyncio task on the
Qt loop, so every signal comes on the GUI thread).

- ``link.connection`` (:mod:`.services.connection`): which node, its client, the child node
  we start, the link's state (``state_changed``);
- ``link.songs`` (:mod:`.services.songs`): every song, from the node's event stream
  (``loaded``, ``updated``, ``finished``, ``removed``); submit, change, forget, retry, cancel;
- ``link.models`` (:mod:`.services.models`): the library and catalogue (``loaded``), removal,
  import, the Hugging Face token;
- ``link.pulls`` (:mod:`.services.pulls`): downloads and their events (``changed``);
- ``link.adapters`` (:mod:`.services.adapters`): the LoRA adapters (``changed``);
- ``link.pool`` (:mod:`.services.pool`): the node's pool (``changed``);
- ``link.backends`` (:mod:`.services.backends`): the machine and its engines
  (``system_loaded``, ``action_event``);
- ``link.settings`` (:mod:`.services.settings`): the node's settings (``loaded``);
- ``link.styles`` (:mod:`.services.styles`): the node's styles (``changed``).

The link itself says one line about all of it (``status_changed``, for the status bar and
the tray) and any failure nobody else was told about (``error``). Pages talk to the services;
none asks the node's client itself.
"""

from __future__ import annotations

import asyncio

from PySide6.QtCore import QObject, Signal

from .services.adapters import AdaptersService
from .services.backends import BackendsService
from .services.connection import REMOTE_TOKEN, ConnectionService
from .services.models import ModelsService
from .services.pool import PoolService
from .services.pulls import PullsService
from .services.settings import SettingsService
from .services.songs import SongsService
from .services.styles import StylesService
from .tasks import Tasks, describe_error

__all__ = ["REMOTE_TOKEN", "NodeLink"]


class NodeLink(QObject):
    status_changed = Signal(str)  # one line: the node's state, backend, model, song, pool
    error = Signal(str)  # something the user should read, that no page was told

    def __init__(
        self, parent: QObject | None = None, *, url: str | None = None, start_child: bool = True
    ) -> None:
        super().__init__(parent)
        self.tasks = Tasks(on_error=lambda _key, text: self.error.emit(text))
        self.connection = ConnectionService(self.tasks, self, url=url, start_child=start_child)
        parts = (self.connection, self.error.emit, self)
        self.pool = PoolService(*parts)
        self.songs = SongsService(*parts, pool=self.pool)
        self.models = ModelsService(*parts)
        self.pulls = PullsService(*parts, models=self.models)
        self.adapters = AdaptersService(*parts, models=self.models)
        self.backends = BackendsService(*parts, pool=self.pool)
        self.settings = SettingsService(*parts, backends=self.backends)
        self.styles = StylesService(*parts)
        self._status = ""

        connection = self.connection
        connection.busy = lambda: self.songs.busy
        connection.read_all = self.refresh
        connection.follow = self._follow_songs
        connection.let_go = self._let_go
        for signal in (self.songs.loaded, self.songs.updated, self.songs.removed):
            signal.connect(self._songs_moved)
        connection.state_changed.connect(self._restate)
        self.backends.system_loaded.connect(self._restate)
        self.pool.changed.connect(self._restate)

    def status_line(self) -> str:
        from ..views.status import status_line

        c = self.connection
        return status_line(
            c.state, c.detail, self.backends.system, self.songs.by_id.values(), self.pool.view
        )

    def _restate(self, *_: object) -> None:
        line = self.status_line()
        if line != self._status:
            self._status = line
            self.status_changed.emit(line)

    def _songs_moved(self, *_: object) -> None:
        self.connection.songs_moved()
        self._restate()

    def _follow_songs(self) -> None:
        self.tasks.start("events", self.songs.follow())

    def _let_go(self) -> None:
        self.tasks.cancel("events")
        self.pool.forget()

    async def refresh(self) -> None:
        """Read everything the pages show afresh; a failed read is said on ``error``."""
        results = await asyncio.gather(
            self.songs.refresh(),
            self.backends.refresh(),
            self.models.refresh(),
            self.settings.read(),
            return_exceptions=True,
        )
        self.styles.refresh()  # a node without styles (an older one) is only logged
        for result in results:
            if isinstance(result, Exception):
                self.error.emit(describe_error(result))

    async def shutdown(self) -> None:
        """Quit: stop the node we started (and only that), close the client."""
        await self.tasks.cancel_and_wait()
        await self.connection.close()

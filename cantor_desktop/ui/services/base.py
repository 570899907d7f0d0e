"""What the link's services share: the link's one task runner, the connection whose client
they ask, and the one way to say that there is no node to ask."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from PySide6.QtCore import QObject

from ...client.link_state import LinkState
from ...errors import CantorError
from ...views.messages import NOT_RUNNING
from ..tasks import Tasks
from .connection import ConnectionService

if TYPE_CHECKING:
    from ...client.nodeclient import NodeClient

OnDone = Callable[[Any], None]
OnError = Callable[[str], None]
T = TypeVar("T")


@contextlib.asynccontextmanager
async def opened(stream: AsyncIterator[T]) -> AsyncIterator[AsyncIterator[T]]:
    """One of the node's streams (song events, a pull, a backend action), closed by the task
    that opened it however its reading ends (its HTTP response with it)."""
    try:
        yield stream
    finally:
        close = getattr(stream, "aclose", None)
        if close is not None:
            await close()


class NodeNotRunning(CantorError):
    def __init__(self) -> None:
        super().__init__(NOT_RUNNING)


class Service(QObject):
    """One part of the link: its own state and signals, its work on the link's tasks."""

    def __init__(
        self, connection: ConnectionService, report: OnError, parent: QObject | None = None
    ) -> None:
        super().__init__(parent)
        self.connection = connection
        self.report = report  # where a failure nobody asked about is said (link.error)

    @property
    def tasks(self) -> Tasks:
        return self.connection.tasks

    @property
    def running(self) -> bool:
        """There is a node to ask (started, not stopped)."""
        return self.connection.client is not None

    @property
    def client(self) -> NodeClient:
        """The node's client; :class:`NodeNotRunning` when there is none."""
        client = self.connection.client
        if client is None:
            raise NodeNotRunning()
        return client

    def run(
        self,
        key: str,
        coro: Coroutine[Any, Any, Any],
        on_done: OnDone | None = None,
        on_error: OnError | None = None,
    ) -> None:
        """``coro`` as the task ``key``; without a node, ``on_error`` (else the link's
        error line) hears so at once and ``coro`` never runs."""
        if not self.running:
            coro.close()
            (on_error or self.report)(NOT_RUNNING)
            return
        if self.connection.state is LinkState.STARTING:
            coro = self._once_started(coro)
        self.tasks.start(key, coro, on_done=on_done, on_error=on_error)

    async def _once_started(self, coro: Coroutine[Any, Any, T]) -> T:
        """``coro`` once the node that is starting answers (or the start ends otherwise): a
        song asked for in the first seconds after launch is queued, not refused."""
        try:
            await self.connection.settled()
        except BaseException:
            coro.close()
            raise
        return await coro

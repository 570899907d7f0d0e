"""This node's changes to the pool's records, on their way to Redis: one at a time, in the
order they were made. A change that must not be lost (a song finished, renamed, retried)
waits out Redis's absence and goes when it is back; a progress event is dropped instead (it
is stale by then). While a change of a song is in the outbox, :meth:`Outbox.holds` says so:
the mirror folds in no record of that song read from Redis meanwhile (Redis's is older than
the change), and when the song's last change has landed, ``landed`` reads it back once."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from ...pool.link import PoolLink

log = logging.getLogger(__name__)

Call = Callable[[], Awaitable[Any]]


class Outbox:
    """The ordered changes, written by :meth:`run` (one task per node)."""

    def __init__(self, link: PoolLink, io: asyncio.Lock, landed: Callable[[str], Awaitable[None]]):
        self.link = link
        self._io = io  # held by each change as it is made (see PoolQueue._io)
        self._landed = landed
        self._ops: deque[tuple[str, Call, bool, str]] = deque()
        self._pending: dict[str, int] = {}  # song id → its changes in the outbox
        self._ready = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()

    def send(self, what: str, call: Call, *, droppable: bool = False, song_id: str = "") -> None:
        """Queue one change (``what`` names it in the log); ``song_id``: the song it changes."""
        self._ops.append((what, call, droppable, song_id))
        if song_id:
            self._pending[song_id] = self._pending.get(song_id, 0) + 1
        self._idle.clear()
        self._ready.set()

    def holds(self, song_id: str) -> bool:
        """A change of this song made here has not landed yet."""
        return song_id in self._pending

    async def run(self) -> None:
        """The outbox, in order, for good."""
        while True:
            if not self._ops:
                self._idle.set()
                self._ready.clear()
                await self._ready.wait()
                continue
            what, call, droppable, song_id = self._ops[0]
            try:
                if droppable:
                    if self.link.up.is_set():
                        async with self._io:
                            await self.link.now(call)
                else:
                    await self.link.attempt(self._exclusive(call), what)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not droppable:
                    log.exception("pool: %s failed: %s", what, exc)
            self._ops.popleft()
            if song_id:
                left = self._pending.pop(song_id, 1) - 1
                if left:
                    self._pending[song_id] = left
                else:
                    await self._landed(song_id)

    async def flush(self) -> None:
        """Wait until every change so far is in Redis, or Redis is away (the changes then
        wait here, in order, and go when it is back)."""
        while not self._idle.is_set() and self.link.up.is_set():
            waiter = asyncio.ensure_future(self._idle.wait())
            gone = asyncio.ensure_future(self._link_lost())
            done, pending = await asyncio.wait({waiter, gone}, return_when=asyncio.FIRST_COMPLETED)
            for task in pending:
                task.cancel()

    async def _link_lost(self) -> None:
        while self.link.up.is_set():
            await asyncio.sleep(0.05)

    def _exclusive(self, call: Call) -> Call:
        async def locked():
            async with self._io:
                return await call()

        return locked

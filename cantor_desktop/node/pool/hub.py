"""A pool member's song events: its own subscribers (the SSE streams) hear every event at
once, and the stage and progress of each song this node makes go to every member through
the events stream (progress at most every :data:`PROGRESS_EVERY_S`; dropped, not kept,
while Redis is away). Record changes travel with the scripts that make them, not here."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from ...pool import redis_keys
from ...pool.link import PoolLink
from ...song.record import SongEvent
from ..queue import EventHub
from .outbox import Outbox

PROGRESS_EVERY_S = 0.1
"""Progress events of one song go to the pool at most this often (a stage change always)."""


class PoolHub(EventHub):
    """The local subscribers, plus stage and progress of the songs ``makes`` names sent to
    the pool."""

    def __init__(self, link: PoolLink, node_id: str, outbox: Outbox, makes: Callable[[str], bool]):
        super().__init__()
        self.link, self.node_id, self.outbox, self._makes = link, node_id, outbox, makes
        self._sent: dict[str, float] = {}  # song id → when its last event went

    def publish(self, event: SongEvent) -> None:
        super().publish(event)
        if event.kind in ("stage", "progress") and self._makes(event.song_id):
            self._to_pool(event)

    def deliver(self, event: SongEvent) -> None:
        """An event from another member: to the subscribers here only."""
        super().publish(event)

    def _to_pool(self, event: SongEvent) -> None:
        now = time.monotonic()
        if event.kind == "progress":
            if now - self._sent.get(event.song_id, 0.0) < PROGRESS_EVERY_S:
                return
        self._sent[event.song_id] = now
        kind, data = event.to_sse()
        body = json.dumps(data, separators=(",", ":"))
        r = self.link.redis

        async def send():
            await r.xadd(
                redis_keys.EVENTS,
                {"k": kind, "o": self.node_id, "d": body},
                maxlen=redis_keys.EVENTS_MAXLEN,
                approximate=True,
            )

        self.outbox.send(f"{kind} of {event.song_id}", send, droppable=True)

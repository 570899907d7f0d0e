"""The node's pool, when it is a member of one.

Its state (``GET /v1/pool?brief=true``, which the node answers without asking Redis) is
read every few seconds for the status line and the tray, which say when the pool is
unreachable; while a page that shows the members is open, its members and lanes
(``GET /v1/pool?songs=false``) as often as that page asks, and soon after a song moves.
One :class:`~cantor_desktop.client.pool_view.PoolView` goes out on ``changed``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from typing import Any

from PySide6.QtCore import Signal

from ...client.pool_view import PoolView
from .base import Service

log = logging.getLogger(__name__)

POOL_EVERY = 3.0  # the pool's state for the status line and the tray (no Redis asked)
POOL_SETTLE_S = 0.3  # after a song moved: its members' queues, read once it settled
POOL_MOVES = ("queued", "stage", "done", "failed", "cancelled", "removed")
"""Song events that change a member's queue."""


class PoolService(Service):
    changed = Signal(object)  # PoolView, or None: the node is in no pool

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.view: PoolView | None = None
        self._viewers: dict[str, float] = {}  # page → how often it wants the members
        self._nudge = asyncio.Event()

    def from_system(self, block: Any) -> None:
        """``/v1/system``'s pool block: whether the node is in a pool (then the pool is
        followed) and its reachability now; the members stay as last read."""
        found = PoolView.from_json(block)
        if found is None:
            self.forget()
            return
        self._set(self._merged(found))
        if not self.tasks.running("pool"):
            self.tasks.start("pool", self._follow())

    def forget(self) -> None:
        """No pool (the node left it, or the link stopped): no longer followed."""
        self.tasks.cancel("pool")
        self._set(None)

    def _merged(self, brief: PoolView) -> PoolView:
        """The pool's state from a brief answer, its members as last read."""
        if self.view is not None and self.view.members and not brief.members:
            return dataclasses.replace(self.view, state=brief.state, error=brief.error)
        return brief

    def _set(self, view: PoolView | None) -> None:
        if view != self.view:
            self.view = view
            self.changed.emit(view)

    async def read(self, brief: bool = False) -> PoolView | None:
        """``GET /v1/pool`` now (``brief``: its state only, the members kept as last read);
        None (and no longer followed) when the node is in none."""
        from ...client.nodeclient import NodeError

        try:
            data = await self.client.pool(brief=brief, songs=False)  # members and lanes
        except NodeError as exc:
            if exc.status != 404:
                raise
            self._set(None)
            return None
        view = PoolView.from_json(data)
        if view is not None:
            view = self._merged(view)
        self._set(view)
        return view

    async def _follow(self) -> None:
        """The pool for as long as the node is in one: its state every few seconds, its
        members first and then as often as the open pages that show them ask, and soon
        after a nudge (a page opened, a song moved). A failed read is the node's absence,
        which the health check shows: tried again next time."""
        last_full: float | None = None
        nudged = False
        while True:
            self._nudge.clear()
            full_every = min(self._viewers.values(), default=None)
            now = time.monotonic()
            full = last_full is None or (
                full_every is not None and (nudged or now - last_full >= full_every)
            )
            try:  # the members only when wanted: reading them costs the node's Redis
                if await self.read(brief=not full) is None:
                    return
                if full:
                    last_full = now
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.debug("the pool was not read: %s", exc)
            try:
                await asyncio.wait_for(self._nudge.wait(), min(POOL_EVERY, full_every or 1e9))
                await asyncio.sleep(POOL_SETTLE_S)  # a burst of events: one read
                nudged = True
            except TimeoutError:
                nudged = False

    def show(self, viewer: str, every: float | None) -> None:
        """A page that shows the pool's members opened (``every``: how often it wants
        them, in seconds; read now) or closed (None)."""
        if every is not None:
            self._viewers[viewer] = every
            self._nudge.set()
        else:
            self._viewers.pop(viewer, None)

    def song_moved(self, kind: str) -> None:
        """A song event: one that changes a member's queue is shown soon where it is shown."""
        if self.view is not None and self._viewers and kind in POOL_MOVES:
            self._nudge.set()

"""Connections shared by the downloads of one pull, the earlier file first.

A pull fetches a model's files at once, but ``downloads.connections`` stays the number of
connections the whole pull opens: each request of each file holds one slot while it runs.
A waiting request of an earlier file (a lower ``rank``) gets the next free slot before
one of a later file, so the files still finish in order, and the next file's first
requests start as soon as the one before it has asked for its last range, instead of
after its last byte. Without that, each file's head (resolve, the CDN's first
byte) and tail (its last ranges, fewer than the connections) left connections idle.

Pure asyncio: one pull's downloads share one event loop.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class ConnectionSlots:
    """At most ``size`` slots held at once; waiters served by rank, then in arrival order."""

    def __init__(self, size: int):
        if size < 1:
            raise ValueError(f"connection slots: {size} is not a positive number")
        self.size = size
        self.free = size
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self._arrival = itertools.count()

    @property
    def held(self) -> int:
        return self.size - self.free

    async def acquire(self, rank: int) -> None:
        if self.free > 0 and not self._waiters:
            self.free -= 1
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (rank, next(self._arrival), fut))
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release()  # handed a slot just as it was cancelled: pass it on
            raise

    def release(self) -> None:
        while self._waiters:
            _rank, _n, fut = heapq.heappop(self._waiters)
            if not fut.done():  # a cancelled waiter is skipped
                fut.set_result(None)
                return
        self.free += 1
        if self.free > self.size:
            raise RuntimeError("connection slots: released more than were taken")

    def turn(self, rank: int) -> Turn:
        """The handle a download holds its requests with (``rank``: its place in the pull)."""
        return Turn(self, rank)


class Turn:
    """One download's share of a pull's `ConnectionSlots`.

    ``asked_all`` is set once the download has asked for every byte it will fetch (its one
    stream asked for, or its last range taken by a connection), and when it is done: the pull
    starts the next file then, so a later file never takes a connection the earlier one
    was about to use, and never waits for the earlier one's last byte either.
    """

    def __init__(self, slots: ConnectionSlots, rank: int):
        self.slots = slots
        self.rank = rank
        self.asked_all = asyncio.Event()

    @asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        await self.slots.acquire(self.rank)
        try:
            yield
        finally:
            self.slots.release()

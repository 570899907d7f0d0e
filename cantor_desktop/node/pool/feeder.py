"""Taking songs from a pool's lanes: one consumer of one group, a lease per song.

A node reads only the lanes of models it can make (and its own lane), and only for an
engine that is free: a song waits in its lane for a node that can start it now rather than
behind another song on a busy node. In each pass the lanes are tried in the order of their
oldest waiting song (as the mirror knows it), each with ``XAUTOCLAIM`` first — an entry
idle longer than the lease belongs to a node that died (or lost the pool) mid-song — then
``XREADGROUP >`` for a new one; what is read is claimed by a script that raises the song's
attempt number (:meth:`.pool_queue.PoolQueue.claim`).

While a song runs here its entry's idle time is kept near 0 (:meth:`PoolQueue.refresh`,
every third of the lease); a node that stops refreshing (kill -9, a power cut, a frozen
machine) leaves it to the first free member after the lease. When this node comes back it
takes its own pending entries first (``XREADGROUP … 0``).

After Redis comes back from an absence (a restart, the network) every entry taken before
looks idle longer than the lease, its holder alive or not: a member that reconnects takes
over no one's song for a lease and the longest reconnection back-off, while the holders,
reconnecting too, keep their leases again and send what they finished meanwhile. (At a
node's first connection there is no such wait: a dead member's song is taken at once.)
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from ...pool import redis_keys
from ...pool.link import BACKOFF_MAX
from ..queue import QUEUED, RUNNING

if TYPE_CHECKING:
    from .queue import PoolQueue

log = logging.getLogger(__name__)

TICK_S = 0.5  # a pass at least this often (leases and dead members' songs)


class Feeder:
    """Fills the queue's inbox with songs this node can start now."""

    def __init__(self, queue: PoolQueue, lease_s: float, engine_of):
        self.queue = queue
        self.link = queue.link
        self.lease_s = lease_s
        self.engine_of = engine_of  # model name → engine key (cheap, cached by the caller)
        self.lanes: dict[str, str | None] = {redis_keys.node_lane(queue.node_id): None}
        """Lanes this node reads → their models' engine key (None: its own lane, any)."""
        self.wake = asyncio.Event()
        self._groups_made: set[str] = set()
        self._resume = True
        self._last_refresh = 0.0
        self._connections = 0
        self._takeover_after = 0.0  # monotonic time before which no entry is taken over
        self._task: asyncio.Task | None = None
        queue.on_change = self.wake.set
        self.link.on_up.append(self._connected)

    def _connected(self) -> None:
        self._resume = True
        self._groups_made.clear()
        self._last_refresh = 0.0  # this node's leases first
        self._connections += 1
        if self._connections > 1:  # back after an absence: the holders are coming back too
            self._takeover_after = time.monotonic() + self.lease_s + BACKOFF_MAX
        self.wake.set()

    def serve(self, models: dict[str, str]) -> None:
        """The models this node can make now (name → engine key): the lanes it reads."""
        lanes: dict[str, str | None] = {redis_keys.model_lane(m): key for m, key in models.items()}
        lanes[redis_keys.node_lane(self.queue.node_id)] = None
        if lanes != self.lanes:
            log.info(
                "pool: this node takes songs for %s",
                ", ".join(sorted(redis_keys.lane_label(lane) for lane in lanes)),
            )
            self.lanes = lanes
            self.wake.set()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="pool-feeder")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            await self.link.up.wait()
            self.wake.clear()
            lanes = dict(self.lanes)  # one pass reads the lanes its groups were made for
            try:
                await self._ensure_groups(lanes)
                if self._resume:
                    self._resume = False
                    await self._take_back_mine(lanes)
                if time.monotonic() - self._last_refresh >= self.lease_s / 3:
                    self._last_refresh = time.monotonic()
                    await self.queue.refresh()
                await self._pass(lanes)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not self.link.down_if_lost(exc):
                    log.exception("pool: taking songs")
                    await asyncio.sleep(1.0)
                continue
            try:
                await asyncio.wait_for(self.wake.wait(), min(TICK_S, self.lease_s / 3))
            except TimeoutError:
                pass

    async def _ensure_groups(self, lanes: dict[str, str | None]) -> None:
        r = self.link.redis
        for lane in lanes:
            if lane in self._groups_made:
                continue
            try:
                await r.xgroup_create(lane, redis_keys.GROUP, id="0", mkstream=True)
            except Exception as exc:
                if "BUSYGROUP" not in str(exc):
                    raise
            await r.sadd(redis_keys.LANES, lane)
            self._groups_made.add(lane)

    async def _take_back_mine(self, lanes: dict[str, str | None]) -> None:
        """Entries still pending for this node from before (it died or lost the pool with
        them): its own songs first, each claimed again in a new attempt."""
        r = self.link.redis
        for lane in lanes:
            got = await r.xreadgroup(redis_keys.GROUP, self.queue.node_id, {lane: "0"}, count=100)
            for _stream, entries in got or ():
                for entry_id, data in entries:
                    song_id = (data or {}).get("song")
                    if song_id in self.queue.held:
                        continue
                    await self.queue.claim(lane, entry_id, song_id)
        if self.queue.inbox and self.queue.runner is not None:
            self.queue.runner.wake()

    def _busy(self) -> set[str]:
        runner = self.queue.runner
        busy = set(runner.busy) if runner is not None else set()
        for song in self.queue.inbox:
            key = self._key(song.model)
            if key:
                busy.add(key)
        return busy

    def _key(self, model: str) -> str | None:
        try:
            return self.engine_of(model)
        except Exception:
            return None

    def _order(self, lanes: dict[str, str | None]) -> list[str]:
        """The lanes this node reads, the one with the oldest waiting song first."""
        oldest: dict[str, float] = {}
        for song in self.queue.songs.values():
            if song.state == QUEUED:
                lane = self.queue.lanes.get(song.id)
                if lane in lanes and song.seq < oldest.get(lane, float("inf")):
                    oldest[lane] = song.seq
        return sorted(lanes, key=lambda lane: oldest.get(lane, float("inf")))

    def _head(self, lane: str) -> str | None:
        """The engine key of the oldest song waiting in ``lane`` (as the mirror knows)."""
        best = None
        for song in self.queue.songs.values():
            if song.state == QUEUED and self.queue.lanes.get(song.id) == lane:
                if best is None or song.seq < best.seq:
                    best = song
        return None if best is None else self._key(best.model)

    async def _pass(self, lanes: dict[str, str | None]) -> None:
        runner = self.queue.runner
        if runner is None or runner.starts_nothing:
            return
        busy = self._busy()
        r = self.link.redis
        me = self.queue.node_id
        for lane in self._order(lanes):
            key = lanes.get(lane)
            if key is None:  # this node's own lane: only when its next song can start
                key = self._head(lane)
                if key is None or key in busy:
                    continue
            elif key in busy:
                continue
            song = None
            if (
                key is not None
                and lane != redis_keys.node_lane(me)
                and time.monotonic() >= self._takeover_after
            ):
                _next, claimed, *_ = await r.xautoclaim(
                    lane, redis_keys.GROUP, me, int(self.lease_s * 1000), "0-0", count=1
                )
                for entry_id, data in claimed or ():
                    if data:
                        log.info(
                            "pool: %s: song %s was left by a node that stopped; taking it",
                            redis_keys.lane_label(lane),
                            str(data.get("song"))[:40],
                        )
                        song = await self.queue.claim(lane, entry_id, data.get("song"))
            if song is None:
                got = await r.xreadgroup(redis_keys.GROUP, me, {lane: ">"}, count=1)
                for _stream, entries in got or ():
                    for entry_id, data in entries:
                        if data:
                            song = await self.queue.claim(lane, entry_id, data.get("song"))
            if song is not None and song.state == RUNNING:
                busy.add(self._key(song.model) or key or "")
                runner.wake()

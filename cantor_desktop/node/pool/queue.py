"""The song queue of a pool: :class:`~.queue.SongQueue`'s interface, kept in Redis.

The routes and the runner use a :class:`PoolQueue` exactly as they use the embedded queue.
What differs is where the truth is:

- every record lives in Redis (:mod:`cantor_desktop.pool.redis_keys`); each node keeps a mirror of
  all of them in memory (``songs``), loaded when it connects and kept current by the pool's
  event stream, so reads (``GET /v1/songs``, positions, edits' sources) never wait for Redis;
- every change is one script that checks its guard, changes the record and tells every
  member in one step (:mod:`cantor_desktop.pool.scripts`). The runner's changes of the song
  it holds are fenced: they count only while this node still holds the song in that
  attempt. They go through an ordered outbox that waits out an absent Redis (a finished
  song is never dropped: :mod:`.outbox`); a change refused by its fence is undone here from
  Redis's record (and the takes that attempt wrote are deleted);
- the runner starts what :meth:`runnable` gives: songs this node took from the pool's lanes
  (:mod:`.feeder`), not every queued song of the pool.

Own events reach this node's subscribers at once; every other member's come from the
stream. A node's own events come back through the stream too: their records are folded in
quietly (a subscriber hears only of a difference), so the mirror ends where Redis's record
ends. While a change of this node's own to a song is still in the outbox, no record of
that song read from Redis (an event, a full load) is folded in: Redis's is older than the
change; when the change lands, the song's record is read back once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from ...pool import redis_keys, records
from ...pool.link import PoolLink
from ...pool.scripts import CLAIM, REFRESH, SUBMIT, UPDATE
from ...song.record import Song, SongEvent, check_song_id
from ..queue import QUEUED, RUNNING, SongQueue, _brief, new_id
from .hub import PoolHub
from .outbox import Outbox

if TYPE_CHECKING:
    from ..runner import Runner

log = logging.getLogger(__name__)

MOST_ATTEMPTS = 5
"""A song started this often without finishing (its nodes died each time) fails."""
READ_BLOCK_MS = 2000
RECORD_FIELDS = tuple(f.name for f in fields(Song) if f.name not in ("seq", "position", "waiting"))
DONE_FIELDS = ("state", "stage", "progress", "eta", "error", "takes", "finished", "engine")


@dataclass
class Held:
    """A song this node took from the pool: the attempt it holds, in which lane entry."""

    attempt: int
    lane: str
    entry: str
    finishing: bool = False  # its last change is on its way: the lease is no longer kept


def encode_fields(song: Song, names: tuple[str, ...]) -> list[str]:
    """``[field, json, field, json, …]`` of a song, for a script's ``HSET``."""
    data = song.to_json(private=True)
    out: list[str] = []
    for name in names:
        out += [name, json.dumps(data.get(name), ensure_ascii=False, separators=(",", ":"))]
    return out


def encode_failure(error: str) -> list[str]:
    """The fields that end a song failed with ``error``, for a script's ``HSET``."""
    return [
        "state",
        '"failed"',
        "error",
        json.dumps(error, ensure_ascii=False),
        "finished",
        json.dumps(time.time()),
        "stage",
        "null",
        "eta",
        "null",
    ]


class PoolQueue(SongQueue):
    """All songs of the pool (a mirror of Redis's records) and this node's part in them."""

    def __init__(self, link: PoolLink, me: dict[str, Any]):
        super().__init__(path=None)  # type: ignore[arg-type]
        self.link = link
        self.me = me  # {"id", "name", "shared"}
        self.node_id: str = me["id"]
        self.lanes: dict[str, str] = {}  # song id → its lane
        self.held: dict[str, Held] = {}
        self.lost: set[str] = set()  # songs this node held and lost (fenced out)
        self.refusals = records.Refusals()  # what this node would not take from Redis
        self.inbox: list[Song] = []  # taken from the pool, not started yet
        self.runner: Runner | None = None
        self.on_change: Callable[[], None] = lambda: None  # the feeder's wake
        self.waiting_reason: Callable[[Song], str | None] = lambda song: None
        self._last_event = "0-0"
        self._stale = True  # the mirror needs a full load (first connection, an absence)
        self._tasks: list[asyncio.Task] = []
        self._loaded = asyncio.Event()
        self._io = asyncio.Lock()
        """Held by a full load of the mirror and by each change of a record this node makes
        (a write, a claim, a lease kept): a load never folds in a record read before one of
        this node's own changes landed (its own events are not read back)."""
        self.outbox = Outbox(link, self._io, self._read_back)
        self.hub: PoolHub = PoolHub(link, self.node_id, self.outbox, self.held.__contains__)
        r = link.redis
        self._submit = r.register_script(SUBMIT)
        self._claim = r.register_script(CLAIM)
        self._update = r.register_script(UPDATE)
        self._refresh = r.register_script(REFRESH)
        link.on_up.append(self._connected)

    # -- life ------------------------------------------------------------------------------

    def open(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._read_events(), name="pool-events"),
            loop.create_task(self.outbox.run(), name="pool-outbox"),
        ]

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def attach(self, runner: Runner) -> None:
        self.runner = runner

    def _connected(self) -> None:
        self._stale = True

    async def loaded(self, timeout: float) -> bool:
        try:
            await asyncio.wait_for(self._loaded.wait(), timeout)
        except TimeoutError:
            return False
        return True

    # -- persistence: Redis is the store ---------------------------------------------------

    def load(self) -> list[Song]:
        return []  # the mirror loads when the pool answers (_reload)

    def save(self) -> None:
        pass  # every change is its own script (see the transitions)

    def save_now(self) -> None:
        pass

    async def flush(self) -> None:
        """Wait until every change so far is in Redis, or Redis is away (they wait in the
        outbox then, in order, and go when it is back)."""
        await self.outbox.flush()

    async def _read_back(self, song_id: str) -> None:
        """The record of a song whose changes from here have all landed, into the mirror:
        what other members changed of it meanwhile was not folded in (see the module)."""
        if song_id in self.held or not self.link.up.is_set():
            return  # Redis away: the full load when it is back reads the song
        try:
            async with self._io:
                found = await self.link.redis.hgetall(redis_keys.song(song_id))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if self.link.is_connection_error(exc):
                self.link.down(exc)  # the load when it is back reads the song
            else:
                log.warning("pool: reading song %s back failed: %s", song_id, exc)
            return
        mine = song_id in self.held or self.outbox.holds(song_id)
        if found and song_id in self.songs and not mine:
            self._fold(song_id, found)

    def _record(self, song_id: str, found: dict[str, str]) -> tuple[Song, str, str] | None:
        """A song's record from Redis, checked (:mod:`cantor_desktop.pool.records`); None,
        counted and logged once, when it is refused."""
        try:
            return records.song_record(found, song_id)
        except records.Refused as exc:
            self.refuse("song", song_id, str(exc))
            return None

    def refuse(self, kind: str, key: str, reason: str) -> None:
        """An entry read from Redis is not used: counted, and logged the first time."""
        if self.refusals.add(kind, key, reason):
            log.warning("pool: %s %s read from Redis was refused: %s", kind, key[:80], reason)

    def _fold(self, song_id: str, found: dict[str, str]) -> None:
        """Redis's record of a song into the mirror; a refused one leaves the mirror."""
        record = self._record(song_id, found) if found else None
        if record is not None:
            self._merge(record[0], "changed")
        elif self.songs.pop(song_id, None) is not None:
            self.lanes.pop(song_id, None)
            self.hub.deliver(SongEvent("removed", song_id))

    # -- the mirror ------------------------------------------------------------------------

    async def _reload(self) -> None:
        """Every record from Redis; what changed meanwhile is told to the subscribers.

        A song with a change of this node's own still in the outbox (finished while Redis
        was away, renamed, retried, forgotten) keeps what this node made of it: Redis's
        record is older than that change, the change lands after this load, and this node
        never reads its own events back — folding the record in would leave the mirror
        at the older state for good. A change refused when it lands folds in Redis's
        record then (:meth:`_change`)."""
        r = self.link.redis
        last = await r.xrevrange(redis_keys.EVENTS, count=1)
        ids = await r.zrange(redis_keys.ORDER, 0, -1)
        pipe = r.pipeline(transaction=False)
        for song_id in ids:
            pipe.hgetall(redis_keys.song(song_id))
        found = await pipe.execute()
        fresh: dict[str, tuple[Song, str, str]] = {}
        for song_id, record in zip(ids, found):
            if record:
                checked = self._record(song_id, record)
                if checked is not None:
                    fresh[song_id] = checked
        self._last_event = last[0][0] if last else "0-0"
        for song_id in list(self.songs):
            if song_id not in fresh and song_id not in self.held and not self.outbox.holds(song_id):
                del self.songs[song_id]
                self.hub.deliver(SongEvent("removed", song_id))
        for song_id, (song, lane, owner) in fresh.items():
            self.lanes[song_id] = lane
            held = self.held.get(song_id)
            if held is not None and not held.finishing:
                if not (
                    song.state == RUNNING
                    and owner == self.node_id
                    and song.attempts == held.attempt
                ):
                    self._lose(song_id, song)
                continue
            if self.outbox.holds(song_id):
                continue  # this node's own change of it lands after this load (see above)
            self._merge(song, "changed")
        if fresh:
            self._seq = max(self._seq, max(s.seq for s, _l, _o in fresh.values()))
        self._loaded.set()
        self._announce_positions()
        self.on_change()

    def _merge(self, record: Song, kind: str) -> Song:
        """Fold a record from Redis into the mirror (the same object stays: the runner and
        the streams hold it) and tell the subscribers when it changed."""
        song = self.songs.get(record.id)
        if song is None:
            self.songs[record.id] = record
            self.hub.deliver(SongEvent("added", record.id, song=record))
            return record
        before = song.to_json(private=True)
        stage, progress, eta = song.stage, song.progress, song.eta
        for f in fields(Song):
            setattr(song, f.name, getattr(record, f.name))
        if song.state == RUNNING and record.stage is None:  # progress lives in events only
            song.stage, song.progress, song.eta = stage, progress, eta
        if song.to_json(private=True) != before or kind != "changed":
            if kind in ("done", "failed", "cancelled") and not song.is_finished:
                kind = "changed"
            self.hub.deliver(SongEvent(kind, song.id, error=song.error, song=song))
        return song

    async def _read_events(self) -> None:
        r = self.link.redis
        while True:
            await self.link.up.wait()
            try:
                if self._stale:
                    self._stale = False
                    async with self._io:
                        await self._reload()
                got = await r.xread(
                    {redis_keys.EVENTS: self._last_event}, count=500, block=READ_BLOCK_MS
                )
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if self.link.is_connection_error(exc):
                    self._stale = True
                    self.link.down(exc)
                else:
                    log.exception("pool: reading the events")
                    await asyncio.sleep(1.0)
                continue
            for _stream, entries in got or ():
                for entry_id, data in entries:
                    self._last_event = entry_id
                    self._take_event(entry_id, data)

    def _take_event(self, entry_id: str, data: Any) -> None:
        """One entry of the events stream, on its own: a refused or failing one is counted
        and logged, and the reader goes on with the next."""
        try:
            found = records.event(entry_id, data)
        except records.Refused as exc:
            self.refuse("event", str(entry_id), str(exc))
            return
        try:
            if found.origin == self.node_id:
                self._apply_own(found)
            else:
                self._apply_remote(found)
        except Exception as exc:  # noqa: BLE001 - one event never stops the reader
            log.exception("pool: event %s could not be applied", entry_id)
            self.refuse("event", str(entry_id), f"could not be applied: {exc}")

    def _apply_own(self, event: records.Event) -> None:
        """One of this node's own events, back from the stream: its subscribers heard of it
        already; its record is folded in quietly (the mirror ends where Redis's ends)."""
        song_id = event.song_id
        if event.song is None or song_id in self.held or self.outbox.holds(song_id):
            return  # progress, a song running here, or a change of it still on its way
        if song_id not in self.songs:
            return  # forgotten here (its removal follows), or not loaded yet (the load has it)
        if event.lane:
            self.lanes[song_id] = event.lane
        self._merge(event.song, "changed")

    def _apply_remote(self, found: records.Event) -> None:
        kind, data = found.kind, found.data
        event = SongEvent.from_sse(kind, {**data, "song": None}, found.song_id)
        if found.song is not None:
            event = dataclasses.replace(event, song=found.song)
        song_id = event.song_id
        if self.outbox.holds(song_id) and event.song is not None:
            return  # this node's own change of it lands later; its record is read back then
        if kind == "removed":
            if self.songs.pop(song_id, None) is not None:
                self.hub.deliver(event)
            self.lanes.pop(song_id, None)
            self._announce_positions()
            return
        if event.song is not None:
            if found.lane:
                self.lanes[song_id] = found.lane
            held = self.held.get(song_id)
            if held is not None:
                record = event.song
                if record.state != RUNNING or record.attempts != held.attempt:
                    self._lose(song_id, record)  # cancelled, or another node took it
                else:
                    mine = self.songs[song_id]
                    mine.title, mine.favourite = record.title, record.favourite
                    self.hub.deliver(SongEvent("changed", song_id, song=mine))
            else:
                self._merge(event.song, kind)
            self._announce_positions()
            self.on_change()
            return
        song = self.songs.get(song_id)
        if song is None or song_id in self.held:
            return
        if kind in ("stage", "progress"):
            song.state, song.position = RUNNING, None
            if event.stage is not None:
                song.stage = event.stage
            if event.progress is not None:
                song.progress = max(song.progress, event.progress)
            song.eta = event.eta if kind == "progress" else song.eta
        self.hub.deliver(event)

    # -- what the runner asks --------------------------------------------------------------

    def runnable(self) -> list[Song]:
        """Songs this node took from the pool and has not started, first taken first."""
        return [s for s in self.inbox if s.state == RUNNING]

    def public(self, song: Song) -> dict[str, Any]:
        song.waiting = self.waiting_reason(song) if song.state == QUEUED else None
        return super().public(song)

    # -- taking songs (the feeder calls these) ---------------------------------------------

    async def claim(self, lane: str, entry: str, song_id: Any) -> Song | None:
        """Take ``song_id`` (read from ``lane`` as ``entry``): the attempt goes up and this
        node holds it. None when the song no longer wants making (the entry is dropped),
        and when the entry names no song id (it is dropped too, and counted)."""
        try:
            check_song_id(song_id)
        except ValueError as exc:
            self.refuse("entry", f"{lane[:60]} {entry}", str(exc))
            await self.link.redis.xack(lane, redis_keys.GROUP, entry)
            await self.link.redis.xdel(lane, entry)
            return None
        async with self._io:
            return await self._claim_song(lane, entry, song_id)

    async def _claim_song(self, lane: str, entry: str, song_id: str) -> Song | None:
        node = json.dumps(
            {"id": self.node_id, "name": self.me["name"], "shared": self.me["shared"]}
        )
        now = json.dumps(time.time())
        failure = json.dumps(
            f"the song was started {MOST_ATTEMPTS} times and never finished (each time its "
            f"node stopped or lost the pool)"
        )
        result = await self._claim(
            keys=[redis_keys.song(song_id), redis_keys.EVENTS, lane],
            args=[
                self.node_id,
                redis_keys.EVENTS_MAXLEN,
                entry,
                song_id,
                node,
                now,
                MOST_ATTEMPTS,
                failure,
            ],
        )
        attempt, why = int(result[0]), result[1]
        found = await self.link.redis.hgetall(redis_keys.song(song_id))
        if not attempt:
            log.info("pool: song %s not taken (%s)", song_id, why)
            if found:
                self._fold(song_id, found)
            return None
        checked = self._record(song_id, found)
        if checked is None:
            await self._refuse_claimed(song_id, lane, entry, attempt)
            return None
        record, lane, _owner = checked
        self.lanes[song_id] = lane
        self.lost.discard(song_id)
        self.held[song_id] = Held(attempt, lane, entry)
        song = self._merge(record, "changed")
        log.info("pool: song %s taken (attempt %d): %s", song_id, attempt, _brief(song))
        self.inbox.append(song)
        return song

    async def _refuse_claimed(self, song_id: str, lane: str, entry: str, attempt: int) -> None:
        """A song just taken whose record is refused: it fails, with the reason, and its
        lane entry is done with (no member reads it again); the mirror drops it."""
        reason = self.refusals.reason("song", song_id) or "its record was refused"
        await self._update(
            keys=[redis_keys.song(song_id), redis_keys.EVENTS, redis_keys.ORDER, redis_keys.SEQ],
            args=[
                self.node_id,
                redis_keys.EVENTS_MAXLEN,
                "failed",
                song_id,
                "owner",
                str(attempt),
                "ack",
                0,
                *encode_failure(f"{self.me['name']} refused the song's record: {reason}"),
            ],
        )
        await self.link.redis.xack(lane, redis_keys.GROUP, entry)
        self._fold(song_id, {})  # a refused record leaves the mirror

    async def refresh(self) -> None:
        """Keep the lease of every song held here (lost ones are given up)."""
        for song_id, held in list(self.held.items()):
            async with self._io:
                if held.finishing or self.held.get(song_id) is not held:
                    continue
                kept = await self._refresh(
                    keys=[redis_keys.song(song_id), held.lane],
                    args=[self.node_id, str(held.attempt), held.entry],
                )
                if not kept and self.held.get(song_id) is held and not held.finishing:
                    found = await self.link.redis.hgetall(redis_keys.song(song_id))
                    checked = self._record(song_id, found) if found else None
                    self._lose(song_id, checked[0] if checked else None)

    def _out_of_inbox(self, song_id: str) -> None:
        """The song is started, finished or gone: it waits in the inbox no more."""
        self.inbox = [s for s in self.inbox if s.id != song_id]

    def _lose(self, song_id: str, record: Song | None) -> None:
        """Another node holds this song now (or it was cancelled): stop making it here."""
        held = self.held.pop(song_id, None)
        if held is None:
            return
        log.warning(
            "pool: song %s was lost (attempt %d): another node has it now", song_id, held.attempt
        )
        self.lost.add(song_id)
        self._out_of_inbox(song_id)
        task = self.runner.tasks.get(song_id) if self.runner is not None else None
        if task is not None:
            task.cancel()
        if record is not None:
            self._merge(record, "changed")
        elif song_id in self.songs:
            del self.songs[song_id]
            self.hub.deliver(SongEvent("removed", song_id))

    # -- submitting ------------------------------------------------------------------------

    async def submit(self, request: dict[str, Any], lane: str | None = None) -> Song:
        """A new song in the pool, in ``lane`` (its model's unless named); in Redis before
        this returns. PoolUnavailable when Redis is away."""
        if lane is None:
            lane = redis_keys.model_lane(request.get("model") or "")
        song = Song(id=new_id(), request=request)
        while song.id in self.songs:
            song.id = new_id()
        args = [
            self.node_id,
            redis_keys.EVENTS_MAXLEN,
            song.id,
            *encode_fields(song, RECORD_FIELDS),
        ]

        async def call():
            return await self._submit(
                keys=[
                    redis_keys.song(song.id),
                    redis_keys.ORDER,
                    lane,
                    redis_keys.EVENTS,
                    redis_keys.SEQ,
                    redis_keys.LANES,
                ],
                args=args,
            )

        async with self._io:
            song.seq = int(await self.link.now(call))
            self.songs[song.id] = song
            self.lanes[song.id] = lane
        song.position = self.position(song)
        log.info(
            "song %s queued in the pool (%s, #%d): %s",
            song.id,
            redis_keys.lane_label(lane),
            song.position + 1,
            _brief(song),
        )
        self.hub.deliver(SongEvent("added", song.id, song=song))
        self.hub.deliver(self._queued_event(song))
        self.on_change()
        return song

    # -- transitions -----------------------------------------------------------------------

    def _change(
        self,
        song: Song,
        kind: str,
        names: tuple[str, ...],
        *,
        guard: str,
        then: str = "",
        on_refused: Callable[[], None] | None = None,
        on_done: Callable[[list], None] | None = None,
    ) -> None:
        """Send one change of ``song`` to the pool (in order, waiting out Redis's absence)."""
        held = self.held.get(song.id)
        attempt = str(held.attempt) if held is not None else ""
        lease_ms = 3_600_000
        args = [
            self.node_id,
            redis_keys.EVENTS_MAXLEN,
            kind,
            song.id,
            guard,
            attempt,
            then,
            lease_ms,
            *encode_fields(song, names),
        ]

        async def call():
            result = await self._update(
                keys=[
                    redis_keys.song(song.id),
                    redis_keys.EVENTS,
                    redis_keys.ORDER,
                    redis_keys.SEQ,
                ],
                args=args,
            )
            if int(result[0]):
                if on_done is not None:
                    on_done(result)
                return
            found = await self.link.redis.hgetall(redis_keys.song(song.id))
            if found and guard == "owner" and self._already_mine(song.id, found, kind, attempt):
                # this very change ran before, its answer lost with the connection
                log.info("pool: %s of song %s was made already", kind, song.id)
                if on_done is not None:
                    on_done(result)
                return
            log.warning(
                "pool: %s of song %s refused (guard %s; it is %s, held by %r, attempt %s)",
                kind,
                song.id,
                guard,
                result[1],
                result[2] if len(result) > 2 else "",
                result[3] if len(result) > 3 else "",
            )
            if on_refused is not None:
                on_refused()
            self._fold(song.id, found)

        self.outbox.send(f"{kind} of song {song.id}", call, song_id=song.id)

    def _already_mine(self, song_id: str, found: dict[str, str], kind: str, attempt: str) -> bool:
        """The record ended as this node's attempt ``attempt`` ends it with ``kind``."""
        checked = self._record(song_id, found)
        if checked is None:
            return False
        record = checked[0]
        return (
            kind in ("done", "failed", "cancelled")
            and str(record.state) == kind
            and str(record.attempts) == attempt
            and (record.node or {}).get("id") == self.node_id
        )

    def _fenced(self, song: Song) -> bool:
        """A song this node lost: whatever the runner does with it now counts for nothing."""
        return song.id in self.lost

    def _settled(self, song_id: str) -> Callable[..., None]:
        def done(*_a) -> None:
            held = self.held.get(song_id)
            if held is not None and held.finishing:
                del self.held[song_id]

        return done

    def _finish(self, song: Song, kind: str, on_refused=None) -> None:
        held = self.held.get(song.id)
        self._out_of_inbox(song.id)
        if held is not None:
            held.finishing = True
            settled = self._settled(song.id)

            def refused() -> None:
                settled()
                if on_refused is not None:
                    on_refused()

            self._change(
                song,
                kind,
                DONE_FIELDS,
                guard="owner",
                then="ack",
                on_refused=refused,
                on_done=settled,
            )
        else:
            self._change(song, kind, DONE_FIELDS, guard="live", then="ack")

    def start(self, song: Song, engine: dict[str, Any] | None = None) -> None:
        """The runner starts a song this node took (the claim made it running in the pool)."""
        self._out_of_inbox(song.id)
        log.info("song %s running (attempt %d): %s", song.id, song.attempts, _brief(song))
        song.state, song.stage, song.progress, song.eta = RUNNING, None, 0.0, None
        song.error, song.finished, song.position = None, None, None
        song.started = song.started or time.time()
        song.engine = engine
        self._announce_positions()

    def finish_done(self, song: Song, files: list[dict[str, Any]]) -> None:
        if self._fenced(song):
            self._discard(song.id, files)
            return
        super().finish_done(song, files)
        self._finish(song, "done", on_refused=lambda: self._discard(song.id, files))

    def finish_failed(self, song: Song, error: str) -> None:
        if self._fenced(song):
            return
        super().finish_failed(song, error)
        self._finish(song, "failed")

    def finish_cancelled(self, song: Song) -> None:
        if self._fenced(song):
            return
        super().finish_cancelled(song)
        self._finish(song, "cancelled")

    def abandon(self, song: Song) -> None:
        """This node stops with ``song`` unfinished: handed back to the pool at once, in
        its place, for another member (or this one when it is back)."""
        if self._fenced(song) or song.id not in self.held:
            return
        log.info("song %s handed back to the pool (this node stops)", song.id)
        song.state, song.stage, song.progress, song.eta = QUEUED, None, 0.0, None
        song.started, song.node = None, None
        self._out_of_inbox(song.id)
        self.held[song.id].finishing = True
        settled = self._settled(song.id)
        self._change(
            song,
            "changed",
            ("state", "stage", "progress", "eta", "started", "node"),
            guard="owner",
            then="release",
            on_done=settled,
            on_refused=settled,
        )
        self.hub.deliver(SongEvent("changed", song.id, song=song))

    def retry(self, song: Song) -> None:
        song.state, song.stage, song.progress, song.eta = QUEUED, None, 0.0, None
        song.error, song.started, song.finished, song.takes = None, None, None, []
        song.node = None
        self._seq += 1
        song.seq = self._seq  # the pool's number comes back with the change

        def numbered(result: list) -> None:
            if len(result) > 1:
                song.seq = int(result[1])

        self._change(
            song,
            "changed",
            ("state", "stage", "progress", "eta", "error", "started", "finished", "takes", "node"),
            guard="finished",
            then="requeue",
            on_done=numbered,
        )
        song.position = self.position(song)
        self.hub.deliver(SongEvent("changed", song.id, song=song))
        self.hub.deliver(self._queued_event(song))
        self.on_change()

    def change(
        self, song: Song, *, title: str | None = None, favourite: bool | None = None
    ) -> None:
        super().change(song, title=title, favourite=favourite)
        self._change(song, "changed", ("title", "favourite"), guard="any")

    def forget(self, song: Song) -> None:
        super().forget(song)
        self.lanes.pop(song.id, None)
        self._change(song, "removed", (), guard="finished", then="drop")

    @staticmethod
    def _discard(song_id: str, files: list[dict[str, Any]]) -> None:
        """The takes an attempt that lost its song wrote: deleted (the record never named
        them; the attempt that holds the song writes its own)."""
        from ...song.record import Take
        from ..song_files import delete_takes

        takes = [Take.from_json(f, i + 1) for i, f in enumerate(files)]
        removed = delete_takes(song_id, takes)
        if removed["deleted"]:
            log.warning(
                "pool: song %s: this node's late takes deleted: %s", song_id, removed["deleted"]
            )

"""The song queue and its job records, persisted under state/ so they survive a restart.

Every record lives in one JSON file (``paths().queue_file``) rewritten atomically on each
state change (queued → running → done | failed | cancelled). Stage and progress are kept in
memory only: they change many times a second and are worthless after a restart. A song that
was ``running`` when the node died is loaded back as ``failed`` with the reason "node
stopped"; :meth:`SongQueue.retry` puts it back in the queue in one call.

Live events for subscribers (SSE) go through :class:`EventHub`; all of this runs on the
node's one asyncio loop, so no locks are needed.

The routes and the runner see one interface, which a pool of nodes implements too
(:class:`.pool_queue.PoolQueue`, the records in Redis): reads (``songs``, :meth:`get`,
:meth:`newest_first`, :meth:`public`, :meth:`snapshot_events`, ``hub``), the API's changes
(:meth:`submit`, :meth:`change`, :meth:`forget`, :meth:`retry`, then :meth:`flush`), and the
runner's (:meth:`runnable`, :meth:`start`, the ``set_*`` and ``finish_*`` methods, and
:meth:`abandon` when the node stops mid-song).
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from pathlib import Path
from typing import Any, Iterator

from ..files import write_atomic
from ..song.record import NODE_STOPPED, Song, SongEvent, SongState, Stage, Take
from . import take_files

log = logging.getLogger(__name__)

QUEUED, RUNNING, DONE, FAILED, CANCELLED = (
    SongState.QUEUED,
    SongState.RUNNING,
    SongState.DONE,
    SongState.FAILED,
    SongState.CANCELLED,
)
KEEP_FINISHED = 2000  # history kept on disk; the oldest finished songs drop off
FILE_VERSION = 2  # 1: takes were called "files"


def _brief(song: Song) -> str:
    """A song request in one log line: model, length, caption (cut)."""
    req = song.request
    bits = [str(req.get("model") or "?")]
    if req.get("duration"):
        bits.append(f"{req['duration']:g} s")
    if req.get("batch", 1) != 1:
        bits.append(f"{req['batch']} takes")
    caption = song.caption if len(song.caption) <= 60 else song.caption[:57] + "…"
    return f"{', '.join(bits)}, “{caption}”"


def _record(song: Song) -> dict[str, Any]:
    return song.to_json(private=True)


def new_id() -> str:
    return secrets.token_hex(8)


ALL = "*"
"""Subscribe to this key for every song's events (the node-wide stream)."""


class EventHub:
    """Subscribers per song (or :data:`ALL`): each gets an asyncio.Queue of SongEvents."""

    def __init__(self) -> None:
        self._subs: dict[str, set[asyncio.Queue]] = {}

    def subscribe(self, song_id: str) -> asyncio.Queue:
        q: asyncio.Queue = asyncio.Queue()
        self._subs.setdefault(song_id, set()).add(q)
        return q

    def unsubscribe(self, song_id: str, q: asyncio.Queue) -> None:
        subs = self._subs.get(song_id)
        if subs is not None:
            subs.discard(q)
            if not subs:
                self._subs.pop(song_id, None)

    def publish(self, event: SongEvent) -> None:
        for key in (event.song_id, ALL):
            for q in list(self._subs.get(key, ())):
                q.put_nowait(event)

    def subscriber_count(self, song_id: str) -> int:
        return len(self._subs.get(song_id, ())) + len(self._subs.get(ALL, ()))


class SongQueue:
    """All songs the node knows, in submission order, saved to ``path`` on each change."""

    def __init__(self, path: Path):
        self.path = path
        self.songs: dict[str, Song] = {}
        self.hub = EventHub()
        self._seq = 0
        self._dirty = False
        self._saver: asyncio.Task | None = None

    # -- persistence ---------------------------------------------------------------------

    def load(self) -> list[Song]:
        """Read the file; songs running at the node's death become failed ("node stopped").

        Returns those songs. A damaged file is kept aside (``.damaged``) and the node starts
        with an empty queue rather than refusing to run.
        """
        self.songs.clear()
        if not self.path.exists():
            return []
        try:
            data = json.loads(self.path.read_text("utf-8"))
            records = data["songs"] if isinstance(data, dict) else data
            songs = []
            for record in records:
                try:
                    songs.append(Song.from_json(record))
                except (ValueError, TypeError) as exc:  # one bad record costs only itself
                    log.error("queue file %s: a record was skipped: %s", self.path, exc)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            aside = self.path.with_suffix(".damaged")
            log.error("queue file %s unreadable (%s); kept as %s", self.path, exc, aside)
            try:
                self.path.replace(aside)
            except OSError:
                pass
            return []
        stopped = []
        for song in sorted(songs, key=lambda s: s.seq):
            if song.state == RUNNING:
                song.state = FAILED
                song.error = NODE_STOPPED
                song.finished = time.time()
                stopped.append(song)
            self.songs[song.id] = song
            self._seq = max(self._seq, song.seq)
        if stopped:
            self.save_now()
        take_files.adopt_folders(t.audio for s in self.songs.values() for t in s.takes)
        return stopped

    def _snapshot(self) -> list[dict[str, Any]]:
        """Shallow copies of the records, in order, taken on the loop. Their nested values
        (request, files, engine) are replaced, never changed in place, so a worker thread
        can encode the snapshot while the loop goes on."""
        self._trim()
        return [_record(s) for s in sorted(self.songs.values(), key=lambda s: s.seq)]

    @staticmethod
    def _encode(records: list[dict[str, Any]]) -> bytes:
        """Compact JSON (the C encoder), one song per line."""
        head = json.dumps({"version": FILE_VERSION, "count": len(records)}, separators=(",", ":"))[
            :-1
        ]
        body = ",\n".join(json.dumps(r, separators=(",", ":"), ensure_ascii=False) for r in records)
        return f'{head},"songs":[\n{body}\n]}}\n'.encode("utf-8")

    def _payload(self) -> bytes:
        return self._encode(self._snapshot())

    def save_now(self) -> None:
        write_atomic(self.path, self._payload())

    def save(self) -> None:
        """Persist the current records. On the node's loop the write (temp file, fsync,
        rename) runs in a worker thread, coalesced and in order; :meth:`flush` awaits it.
        Without a running loop it writes at once."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.save_now()
            return
        self._dirty = True
        if self._saver is None or self._saver.done():
            self._saver = loop.create_task(self._save_loop(), name="queue-save")

    async def _save_loop(self) -> None:
        while self._dirty:
            self._dirty = False
            records = self._snapshot()  # a consistent snapshot, taken on the loop
            try:
                await asyncio.to_thread(self._write, records)
            except OSError:
                log.exception("saving the queue to %s", self.path)

    def _write(self, records) -> None:
        write_atomic(self.path, self._encode(records))

    async def flush(self) -> None:
        """Wait until every change so far is on disk."""
        while self._saver is not None and not self._saver.done():
            await asyncio.shield(self._saver)

    def _trim(self) -> None:
        finished = [s for s in self.songs.values() if s.is_finished]
        if len(finished) > KEEP_FINISHED:
            finished.sort(key=lambda s: s.seq)
            for song in finished[: len(finished) - KEEP_FINISHED]:
                del self.songs[song.id]

    # -- records -------------------------------------------------------------------------

    def add(self, request: dict[str, Any]) -> Song:
        self._seq += 1
        song = Song(id=new_id(), request=request, seq=self._seq)
        while song.id in self.songs:
            song.id = new_id()
        self.songs[song.id] = song
        self.save()
        song.position = self.position(song)
        log.info("song %s queued (#%d): %s", song.id, song.position + 1, _brief(song))
        self.hub.publish(SongEvent("added", song.id, song=song))
        self.hub.publish(self._queued_event(song))
        return song

    async def submit(self, request: dict[str, Any], lane: str | None = None) -> Song:
        """Queue a song and wait until it is saved (it survives a crash from here on).
        ``lane`` is a pool's; one node's queue has one line."""
        song = self.add(request)
        await self.flush()
        return song

    def get(self, song_id: str) -> Song | None:
        return self.songs.get(song_id)

    def newest_first(self) -> list[Song]:
        return sorted(self.songs.values(), key=lambda s: s.seq, reverse=True)

    def queued(self) -> Iterator[Song]:
        """Queued songs, first submitted first."""
        return iter(
            sorted((s for s in self.songs.values() if s.state == QUEUED), key=lambda s: s.seq)
        )

    def runnable(self) -> list[Song]:
        """What the runner may start, first first: here every queued song."""
        return list(self.queued())

    def attach(self, runner: Any) -> None:
        """The runner that starts this queue's songs (a pool's queue wakes it)."""

    def running(self) -> list[Song]:
        return [s for s in self.songs.values() if s.state == RUNNING]

    def waiting_count(self) -> int:
        """Songs queued or running."""
        return sum(1 for s in self.songs.values() if not s.is_finished)

    def position(self, song: Song) -> int:
        """0 = next to run."""
        return sum(1 for s in self.songs.values() if s.state == QUEUED and s.seq < song.seq)

    def public(self, song: Song) -> dict[str, Any]:
        """The song as the API sends it (with its place in the queue while it waits)."""
        song.position = self.position(song) if song.state == QUEUED else None
        return song.to_json()

    # -- transitions (each persisted and published) --------------------------------------

    def _queued_event(self, song: Song) -> SongEvent:
        return SongEvent("queued", song.id, position=self.position(song))

    def start(self, song: Song, engine: dict[str, Any] | None = None) -> None:
        log.info("song %s running (attempt %d): %s", song.id, song.attempts + 1, _brief(song))
        song.state, song.stage, song.progress, song.eta = RUNNING, None, 0.0, None
        song.error, song.started, song.finished, song.position = None, time.time(), None, None
        song.attempts += 1
        song.engine = engine
        self.save()
        self._announce_positions()

    def _announce_positions(self) -> None:
        """Songs still waiting moved up: tell their subscribers where they stand now."""
        for waiting in self.queued():
            if self.hub.subscriber_count(waiting.id):
                self.hub.publish(self._queued_event(waiting))

    def set_engine(self, song: Song, engine: dict[str, Any]) -> None:
        """In memory; saved with the song's next state change."""
        song.engine = engine

    def set_stage(self, song: Song, stage: str, progress: float) -> None:
        """In memory (a running song comes back as failed after a crash anyway)."""
        song.stage, song.eta = Stage(stage), None
        song.progress = max(song.progress, progress)
        self.hub.publish(SongEvent("stage", song.id, stage=song.stage, progress=song.progress))
        self.hub.publish(self.progress_event(song))

    def set_progress(self, song: Song, progress: float, eta: float | None) -> None:
        """In memory only; progress never goes backwards."""
        progress = min(1.0, max(song.progress, progress))
        if progress == song.progress and eta == song.eta:
            return
        song.progress, song.eta = progress, eta
        self.hub.publish(self.progress_event(song))

    @staticmethod
    def progress_event(song: Song) -> SongEvent:
        return SongEvent(
            "progress", song.id, stage=song.stage, progress=song.progress, eta=song.eta
        )

    def finish_done(self, song: Song, files: list[dict[str, Any]]) -> None:
        if song.progress < 1.0:
            song.progress, song.eta = 1.0, 0.0
            self.hub.publish(self.progress_event(song))
        song.takes = [Take.from_json(f, i + 1) for i, f in enumerate(files)]
        song.state, song.finished, song.eta = DONE, time.time(), None
        log.info(
            "song %s done in %.1f s: %s",
            song.id,
            song.finished - (song.started or song.finished),
            ", ".join(t.file_name for t in song.takes),
        )
        self.save()
        self.hub.publish(self.final_event(song))

    def finish_failed(self, song: Song, error: str) -> None:
        log.warning("song %s failed: %s", song.id, error)
        song.state, song.error, song.finished, song.eta = FAILED, error, time.time(), None
        self.save()
        self.hub.publish(self.final_event(song))

    def abandon(self, song: Song) -> None:
        """The node stops with ``song`` running: it ends failed ("node stopped"), and one
        retry queues it again."""
        self.finish_failed(song, NODE_STOPPED)

    def finish_cancelled(self, song: Song) -> None:
        log.info("song %s cancelled", song.id)
        song.state, song.finished, song.eta = CANCELLED, time.time(), None
        self.save()
        self.hub.publish(self.final_event(song))

    def retry(self, song: Song) -> None:
        """A failed or cancelled song goes back to the end of the queue, same id."""
        self._seq += 1
        song.state, song.stage, song.progress, song.eta = QUEUED, None, 0.0, None
        song.error, song.started, song.finished, song.takes = None, None, None, []
        song.seq = self._seq
        song.position = self.position(song)
        self.save()
        self.hub.publish(SongEvent("changed", song.id, song=song))
        self.hub.publish(self._queued_event(song))

    def change(
        self, song: Song, *, title: str | None = None, favourite: bool | None = None
    ) -> None:
        """The musician renamed a song or marked it (saved and published)."""
        if title is not None:
            song.title = title
        if favourite is not None:
            song.favourite = favourite
        self.save()
        self.hub.publish(SongEvent("changed", song.id, song=song))

    def forget(self, song: Song) -> None:
        """Drop a finished song from the history (saved like every other change). Only
        done, failed or cancelled songs can be forgotten: cancel a live one first."""
        if not song.is_finished:
            raise ValueError(f"song {song.id} is {song.state}; cancel it first")
        self.songs.pop(song.id, None)
        self.save()
        self.hub.publish(SongEvent("removed", song.id))

    @staticmethod
    def final_event(song: Song) -> SongEvent:
        """``done``, ``failed`` or ``cancelled``, carrying the song as it ended."""
        return SongEvent(str(song.state), song.id, error=song.error, song=song)

    def snapshot_events(self, song: Song) -> list[SongEvent]:
        """What a late subscriber gets first: the song's current state as events."""
        if song.state == QUEUED:
            return [self._queued_event(song)]
        if song.state == RUNNING:
            events: list[SongEvent] = []
            if song.stage:
                events.append(SongEvent("stage", song.id, stage=song.stage, progress=song.progress))
            events.append(self.progress_event(song))
            return events
        return [self.final_event(song)]

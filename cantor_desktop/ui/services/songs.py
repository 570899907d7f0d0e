"""Every song the node has, and what can be asked about them.

One node-wide event stream (``GET /v1/events``) keeps :attr:`SongsService.by_id` current —
songs made by this app, the CLI, another app or the API alike, their progress, their ends,
renames and deletions — without polling; it is read again from the start after a drop.
The language model's help and the reading of a dropped file are asked here too: both fill a
song's request.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any

from PySide6.QtCore import QTimer, Signal

from ...song.record import Song, SongEvent, SongState, Take
from ...system import gc_settle
from .base import opened, OnDone, OnError, Service
from .pool import PoolService

log = logging.getLogger(__name__)

STREAM_RETRY_S = 1.0
SETTLE_AT = 1000  # songs in one list read: then the collector is settled again


class SongsService(Service):
    loaded = Signal(list)  # [Song] newest first: the node's whole list, read again
    updated = Signal(object)  # Song: new, or changed
    finished = Signal(object)  # Song that just reached done
    failed = Signal(object)  # Song that just failed
    removed = Signal(str)  # song id: forgotten by the node (whoever asked)

    def __init__(self, *args: Any, pool: PoolService, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pool = pool
        self.by_id: dict[str, Song] = {}
        self.settle_gc = False  # the app's own link: settle the collector after list reads
        self._settled = False  # the collector settled after a song list was read

    def get(self, song_id: str) -> Song | None:
        return self.by_id.get(song_id)

    @property
    def busy(self) -> bool:
        """A song is running."""
        return any(s.state == SongState.RUNNING for s in self.by_id.values())

    # -- the list and the stream ----------------------------------------------------------
    async def refresh(self) -> None:
        self.take(await self.client.songs())

    def take(self, items: list[dict[str, Any]]) -> None:
        """The node's whole song list (its JSON), read and handed to the pages. The first
        list read, and any of :data:`SETTLE_AT` songs or more, is followed (once the pages
        have it) by a settle of the garbage collector when :attr:`settle_gc` is set (the
        app sets it; tests and embedders that make many links do not): what start-up and
        the songs made is then out of its sight, and a keystroke never pays for a walk
        over all of it (:mod:`cantor_desktop.system.gc_settle`)."""
        records = []
        for data in items:
            try:
                records.append(Song.from_json(data))
            except ValueError as exc:  # not one of the node's songs: never a path
                log.warning("skipping a song the node listed: %s", exc)
        self.by_id = {r.id: r for r in records}
        self.loaded.emit(sorted(records, key=lambda r: r.created, reverse=True))
        if self.settle_gc and (not self._settled or len(records) >= SETTLE_AT):
            self._settled = True
            QTimer.singleShot(0, gc_settle.settle)

    async def follow(self) -> None:
        """Follow every song the node has for as long as we are connected. After a drop the
        list is read afresh (what happened meanwhile), then the stream again."""
        first = True
        while True:
            try:
                if not first:
                    await self.refresh()
                first = False
                async with opened(self.client.all_events()) as events:
                    async for kind, data in events:
                        if kind == "hello":
                            continue
                        try:
                            event = SongEvent.from_sse(kind, data)
                        except ValueError as exc:
                            log.warning("an event the app does not know: %s", exc)
                            continue
                        self.apply(event)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.debug("the song stream dropped: %s", exc)
            await asyncio.sleep(STREAM_RETRY_S)

    def apply(self, event: SongEvent) -> None:
        """One event of any song into :attr:`by_id`, and out as signals."""
        if event.kind == "removed":
            if self.by_id.pop(event.song_id, None) is not None:
                self.removed.emit(event.song_id)
            self.pool.song_moved(event.kind)
            return
        song = self.by_id.get(event.song_id)
        if song is None:
            if event.song is None:
                return  # progress of a song we have not seen added: the list has it
            song = self.by_id[event.song_id] = event.song
        else:
            song.apply(event)
        self.updated.emit(song)
        if event.kind == "done":
            self.finished.emit(song)
        elif event.kind == "failed":
            self.failed.emit(song)
        self.pool.song_moved(event.kind)

    # -- asking the node ------------------------------------------------------------------
    async def submit(self, body: dict[str, Any], node: str | None = None) -> Song:
        """Queue a song; in a pool ``node`` sends it to that member (None: any)."""
        song_id = await self.client.submit_song(body, node)
        song = self.by_id.get(song_id)  # the stream may have told us already
        if song is None:
            song = self.by_id[song_id] = Song(id=song_id, request=dict(body), created=time.time())
            self.updated.emit(song)
        return song

    def queue(
        self,
        key: str,
        body: dict[str, Any],
        node: str | None = None,
        on_done: OnDone | None = None,
        on_error: OnError | None = None,
    ) -> None:
        """:meth:`submit` as the task ``key``: ``on_done(song)``, or ``on_error(why)``."""
        self.run(key, self.submit(body, node), on_done, on_error)

    def change(
        self,
        song_id: str,
        *,
        title: str | None = None,
        favourite: bool | None = None,
        on_error: OnError | None = None,
    ) -> None:
        """Rename a song or mark it a favourite, on the node (the stream brings it back)."""

        async def change() -> None:
            data = await self.client.change_song(song_id, title=title, favourite=favourite)
            self.apply(SongEvent("changed", song_id, song=Song.from_json(data)))

        self.run(f"change:{song_id}", change(), on_error=on_error)

    def forget(
        self, song_id: str, on_error: OnError | None = None, delete_files: bool = False
    ) -> None:
        """The song's file went to the trash: the node forgets it too, so it stays gone
        (``delete_files``: the node deletes its files too — a song made on another machine)."""
        self.by_id.pop(song_id, None)
        if not self.running:
            return

        async def forget() -> None:
            await self.client.delete_song(song_id, delete_files=delete_files)

        self.run(f"forget:{song_id}", forget(), on_error=on_error)

    def retry(self, song_id: str) -> None:
        async def retry() -> None:
            await self.client.retry(song_id)

        self.run(f"retry:{song_id}", retry())

    def cancel(self, song_id: str) -> None:
        async def cancel() -> None:
            await self.client.cancel(song_id)

        self.run(f"cancel:{song_id}", cancel())

    def ask_lm(
        self,
        mode: str,
        body: dict[str, Any],
        on_done: OnDone | None = None,
        on_error: OnError | None = None,
    ) -> None:
        """The language model's help with a request: ``inspire`` (a short idea → caption
        and lyrics) or ``format`` (tidy them); ``on_done(answer)``."""

        async def ask() -> dict[str, Any]:
            return await self.client.lm(mode=mode, **body)

        self.run(f"lm:{mode}", ask(), on_done, on_error)

    def understand(
        self, path: str, on_done: OnDone | None = None, on_error: OnError | None = None
    ) -> None:
        """Send an audio file to the node and let its model read it (caption, lyrics, tempo,
        key, time signature, length, language); ``on_done((upload, heard))``."""

        async def understand() -> tuple[dict[str, Any], dict[str, Any]]:
            upload = await self.client.upload(path)
            heard = await self.client.understand({"upload": upload["id"]})
            return upload, heard

        self.run("understand", understand(), on_done, on_error)

    def fetch_audio(
        self,
        song: Song,
        take: Take,
        dest: Path,
        on_done: OnDone | None = None,
        on_error: OnError | None = None,
    ) -> None:
        """A take's audio from the node into ``dest`` (a copy here of a remote song)."""

        async def fetch() -> Path:
            return await self.client.audio(song.id, dest, take=take.n)

        self.run(f"audio:{song.id}:{take.n}", fetch(), on_done, on_error)

    def stop_fetch(self, song: Song, take: Take) -> None:
        self.tasks.cancel(f"audio:{song.id}:{take.n}")

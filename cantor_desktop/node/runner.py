"""Running queued songs on engines: one song at a time per engine, first queued first.

The runner takes each song the queue gives it (:meth:`.SongQueue.runnable`) whose engine is
free, marks it running and runs it as a :class:`.song_job.SongJob` in a task of its own:
plan → engine → sources → sing → save. The engine is free once a song is saving: the next
song starts on it while the takes before it are written. Cancel, a restart's drain and the node's stop go
through the runner; the engines themselves are :class:`.engines.Engines`'. The language
model's help and reading audio back (``/v1/lm``, ``/v1/understand``) run on the same
engines, in turn with the songs.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from typing import Any

from .. import config
from ..song.record import FINISHED, Song
from . import song_files
from .engine_plan import engine_key, model_name
from .engine_plan import sketch_models_dir  # noqa: F401 - tests/test_paths.py reads it here
from .engines import Engines
from .queue import QUEUED, SongQueue
from .song_job import SongJob

log = logging.getLogger(__name__)


class Runner:
    """Takes queued songs and runs them; cancel, retry and graceful stop go through it."""

    def __init__(self, queue: SongQueue):
        self.queue = queue
        self.engines = Engines()
        self.tasks: dict[str, asyncio.Task] = {}  # song id → its task
        self.busy: dict[str, str] = {}  # engine key → song id running on it
        self.saving: dict[str, str] = {}  # engine key → the song of it writing its takes
        self.draining = False  # a restart was asked: start nothing new
        self.idle = asyncio.Event()
        self.idle.set()
        self._wake = asyncio.Event()
        self._loop_task: asyncio.Task | None = None
        self._stopping = False

    # -- life ----------------------------------------------------------------------------

    @property
    def starts_nothing(self) -> bool:
        """A restart was asked or the node stops: no new song starts here."""
        return self.draining or self._stopping

    def start(self) -> None:
        self.queue.attach(self)
        self.engines.settle_staged()
        self._loop_task = asyncio.get_running_loop().create_task(self._loop(), name="runner")

    def wake(self) -> None:
        self._wake.set()

    async def stop(self) -> None:
        """Node shutting down: running songs end failed ("node stopped"), engines stop."""
        self._stopping = True
        if self._loop_task:
            self._loop_task.cancel()
        self.engines.stop_settling()
        for task in list(self.tasks.values()):
            task.cancel()
        if self.tasks:
            await asyncio.wait(list(self.tasks.values()), timeout=5)
        await self.engines.close()
        try:
            await asyncio.wait_for(self.queue.flush(), 5)
        except asyncio.TimeoutError:
            log.error("the queue could not be saved in time")
        self.engines.forget_running()

    async def _loop(self) -> None:
        while True:
            self._wake.clear()
            try:
                self._dispatch()
            except Exception:
                log.exception("dispatching songs")
            await self._wake.wait()

    def _dispatch(self) -> None:
        if self.starts_nothing:
            return
        cfg = current_config()[0]
        keys: dict[str, str | Exception] = {}  # model → engine key, once per pass
        for song in self.queue.runnable():
            try:
                self._dispatch_one(song, cfg, keys)
            except Exception as exc:  # one song's fault never holds up the others
                log.exception("song %s could not be started", song.id)
                if song.id not in self.tasks:
                    self.queue.finish_failed(song, f"it could not be started: {exc}")

    def _dispatch_one(
        self, song: Song, cfg: config.Config, keys: dict[str, str | Exception]
    ) -> None:
        name = model_name(song.request, cfg)
        if not isinstance(name, str):
            raise TypeError(f"its model is {type(name).__name__}, not a name")
        if name not in keys:
            try:
                keys[name] = engine_key(name)
            except Exception as exc:
                keys[name] = exc
        key = keys[name]
        if isinstance(key, Exception):
            self.queue.finish_failed(song, f"model {name!r} cannot be used: {key}")
            return
        if key in self.busy:
            return
        self.busy[key] = song.id
        self.idle.clear()
        # mark running at once so a second dispatch cannot pick it again
        self.queue.start(song)
        job = SongJob(
            song,
            self.queue,
            self.engines,
            on_engine_free=functools.partial(self._engine_free, key, song.id),
        )
        task = asyncio.get_running_loop().create_task(job.run(), name=f"song-{song.id}")
        self.tasks[song.id] = task
        task.add_done_callback(functools.partial(self._song_ended, job, key))

    def _engine_free(self, key: str, song_id: str) -> None:
        """A song's engine jobs are over: the next song may start on its engine while this
        one's takes are written (durably: seconds of fsync on a slow disk). One song of an
        engine writes at a time: while another still does, this one keeps the engine until
        it is done (takes never pile up in memory behind a slow disk)."""
        if self.busy.get(key) == song_id and key not in self.saving:
            del self.busy[key]
            self.saving[key] = song_id
            self.wake()

    def _song_ended(self, job: SongJob, key: str, task: asyncio.Task) -> None:
        """A song's task ended, however it ended: its engine is free for the next song. A
        done callback and not a ``finally``: a task cancelled before its first step never
        enters its coroutine, and the song must not stay "running" on an engine no other
        song could then use."""
        if task.cancelled():
            job.task_cancelled(node_stops=self._stopping)
        song_id = job.song.id
        self.tasks.pop(song_id, None)
        if self.busy.get(key) == song_id:
            del self.busy[key]
        if self.saving.get(key) == song_id:
            del self.saving[key]
        if not self.tasks:
            self.idle.set()
        self.wake()

    # -- requests from the API -----------------------------------------------------------

    def cancel(self, song: Song) -> bool:
        """Cancel a queued or running song; False when it had already finished."""
        if song.state in FINISHED:
            return False
        if song.state == QUEUED:
            self.queue.finish_cancelled(song)
            return True
        task = self.tasks.get(song.id)
        if task is not None:
            task.cancel()
        else:
            self.queue.finish_cancelled(song)
        return True

    def loaded(self) -> list[dict[str, Any]]:
        """What each engine has running, for /v1/system."""
        return self.engines.loaded(self.busy)

    async def lm(self, mode: str, caption: str, lyrics: str, model: str) -> dict[str, Any]:
        """The language model's help: ``inspire`` (a short idea → caption and lyrics) or
        ``format`` (tidy the user's caption and lyrics); the first request it writes, in
        the song request's names."""
        plan, client = await self.engines.for_model(model)
        body: dict[str, Any] = {"caption": caption, "lyrics": lyrics, "lm_mode": mode}
        if plan.files.get("lm"):
            body["lm_model"] = plan.files["lm"]
        found = await client.lm(body)
        return understood_fields(found[0] if found else {})

    async def understand(self, ref: dict[str, Any], model: str) -> dict[str, Any]:
        """What the engine of ``model`` hears in a take or an upload: caption, lyrics, bpm,
        key, time signature, duration and language (the engine's /understand)."""
        from . import sources as song_sources

        plan, client = await self.engines.for_model(model)
        source = await asyncio.to_thread(
            song_sources.resolve, "source", ref, self.queue.songs, plan.key
        )
        parts = await asyncio.to_thread(source.parts, "audio", "src_latents")
        heard, latent = await client.understand(parts)
        if latent is not None and source.latent is None and "upload" in ref:
            await asyncio.to_thread(
                song_sources.keep_latent,
                song_sources.upload_latent_file(ref["upload"], plan.key),
                latent,
            )
        return understood_fields(heard)


def understood_fields(heard: dict[str, Any]) -> dict[str, Any]:
    """The engine's heard request in the song request's names (None where it heard none)."""
    meta = song_files.lm_metadata(heard)
    lyrics = str(heard.get("lyrics") or "").strip() or None
    return {
        "caption": str(heard.get("caption") or "").strip() or None,
        "lyrics": lyrics,
        "bpm": meta["bpm"],
        "key": meta["key"],
        "time_signature": meta["time_signature"],
        "duration": meta["duration"],
        "language": meta["language"],
    }


def current_config() -> tuple[config.Config, config.ConfigError | None]:
    """node.toml as it is now (:func:`config.current`: re-read only when it changed)."""
    return config.current()

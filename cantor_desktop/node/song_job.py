"""One song's run on the node, as a job of explicit steps: plan → engine → sources → sing →
save, driven over the state machine of :mod:`.job_state`.

Each step is a method that does its part and returns the state that follows; the driver
(:meth:`SongJob.run`) applies it, and the job's end — done, failed with the engine's own
words, or cancelled — is told to the queue in one place (:meth:`SongJob._move`). An engine
found dead when the song's first job was sent (it died between songs, before its supervisor
saw it) is started again by the same engine step and the song sent once more by the same
sing step: nothing of it had reached the engine.

A job whose task is cancelled (a cancel, a pool that gave the song to another member, the
node stopping) ends through :meth:`SongJob.task_cancelled`, called by the runner when the
task is done: a task cancelled before its first step never runs its coroutine.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .. import config
from ..song.record import Song, SongState
from ..song.request import SongRequest
from ..install import speeds
from . import memory, song_files
from .engine_plan import SKETCH, EnginePlan, PlanError
from .job_state import JobMachine, JobState
from .queue import SongQueue
from .song_progress import SAVING_FROM, ProgressWatcher

if TYPE_CHECKING:
    from ..engine.client import Track
    from ..engine.supervisor import EngineSupervisor
    from ..models.adapters import Adapter
    from .engines import Engines
    from .sources import Source

log = logging.getLogger(__name__)

KEEPS_TEMPO = ("repaint", "extend", "extract", "lego", "complete")
"""Tasks whose result has its source's tempo, key and metre (a cover may not)."""


class SongJob:
    """A song taken from the queue, run step by step on its engine."""

    def __init__(
        self,
        song: Song,
        queue: SongQueue,
        engines: Engines,
        on_engine_free: Callable[[], None] | None = None,
    ):
        """``on_engine_free`` is told once the engine's jobs are over (the takes are then
        written while the engine makes the next song)."""
        self.song, self.queue, self.engines = song, queue, engines
        self.on_engine_free = on_engine_free
        self.machine = JobMachine()
        self.steps = {
            JobState.PLAN: self._plan,
            JobState.ENGINE: self._engine,
            JobState.SOURCES: self._sources,
            JobState.SING: self._sing,
            JobState.SAVE: self._save,
        }
        self.reason = ""  # why it failed, for the song's record
        # what the steps find, for the steps after them
        self.cfg: config.Config | None = None
        self.plan: EnginePlan | None = None
        self.request: SongRequest | None = None
        self.format = ""  # the song's file format
        self.keep_loaded = False
        self.adapter: Adapter | None = None
        self.timings: dict[str, float] = {}
        self.sup: EngineSupervisor | None = None
        self.sources: dict[str, Source] = {}
        self.engine_request: dict[str, Any] = {}
        self.watcher: ProgressWatcher | None = None
        self.version: str | None = None
        self.tracks: list[Track] = []
        self.files: list[dict[str, Any]] = []

    # -- the driver ----------------------------------------------------------------------

    async def run(self) -> None:
        """Each step in turn until the job ends. A fault outside what the steps expect ends
        the song failed with it (and is logged whole)."""
        try:
            while not self.machine.state.finished:
                self._move(await self.steps[self.machine.state]())
        except Exception as exc:
            log.exception("song %s failed", self.song.id)
            if self.song.state == SongState.RUNNING and not self.machine.state.finished:
                self.reason = str(exc) or type(exc).__name__
                self._move(JobState.FAILED)

    def _move(self, to: JobState) -> None:
        """Apply a change of state (the table refuses one it does not allow); the job's end
        is told to the queue: done with its takes, failed with the reason, cancelled."""
        was = self.machine.state
        self.machine.move(to)
        if was is JobState.SING and to is JobState.SAVE and self.on_engine_free is not None:
            self.on_engine_free()
        if to is JobState.DONE:
            self.queue.finish_done(self.song, self.files)
            if self.queue.waiting_count() == 0:
                # the last song for now: its buffers back to the system, off the loop and
                # after the engine is free (a trim between songs of a burst cost ~20 ms each)
                asyncio.get_running_loop().run_in_executor(None, memory.give_back)
        elif to is JobState.FAILED:
            self.queue.finish_failed(self.song, self.reason)
        elif to is JobState.CANCELLED:
            self.queue.finish_cancelled(self.song)

    def task_cancelled(self, node_stops: bool) -> None:
        """The job's task was cancelled, in a step or before the first: a song still running
        ends cancelled, or, when the node stops, is given back (:meth:`SongQueue.abandon`)."""
        if not self.machine.state.finished:
            self.machine.move(JobState.CANCELLED)
        if self.song.state == SongState.RUNNING:
            if node_stops:
                self.queue.abandon(self.song)
            else:
                self.queue.finish_cancelled(self.song)

    def _failed(self, reason: str) -> JobState:
        self.reason = reason
        return JobState.FAILED

    # -- the steps -----------------------------------------------------------------------

    async def _plan(self) -> JobState:
        """The model, the engine build that runs it and its files; the song's request as
        the engine will get it; the adapter it names, when it is still there."""
        cfg = self.cfg = config.current()[0]
        try:
            plan = self.plan = await self.engines.plan(self.song.request, cfg)
        except PlanError as exc:
            return self._failed(str(exc))
        self.request = SongRequest(**self.song.request)
        self.format = self.request.format or cfg.get("songs.format")
        self.queue.set_engine(self.song, plan.describe())
        self.keep_loaded = bool(cfg.get("node.keep_loaded"))
        self.timings = {"queued_at": self.song.created, "started_at": time.time()}
        if self.request.adapter:
            from ..models import adapters

            try:
                self.adapter = await asyncio.to_thread(adapters.store().get, self.request.adapter)
            except adapters.AdapterError as exc:
                return self._failed(str(exc))
        return JobState.ENGINE

    async def _engine(self) -> JobState:
        """The song's engine running: started, or started again (see :meth:`.Engines.up`).
        A start that fails ends the song with the engine's own first words. Then the
        sources, or, for an engine started again mid-song, the singing once more."""
        assert self.plan is not None
        try:
            self.sup = await self.engines.up(
                self.plan, self.keep_loaded, adapters=self.adapter is not None
            )
        except Exception as exc:
            sup = self.engines.supervisor(self.plan)
            return self._failed(f"the engine did not start: {_first_line(sup, exc)}")
        return JobState.SING if self.machine.visits(JobState.SING) else JobState.SOURCES

    async def _sources(self) -> JobState:
        """An edit's source, reference and codes, checked again now (a file may have gone
        since the song was queued), and the request in the engine's words."""
        from ..engine.client import engine_request
        from . import continuation
        from . import sources as song_sources

        assert self.plan is not None and self.request is not None
        plan, request = self.plan, self.request
        try:
            found = self.sources = await asyncio.to_thread(
                song_sources.resolve_request, request, self.queue.songs, plan.key
            )
        except song_sources.SourceError as exc:
            return self._failed(str(exc))
        source = found.get("source")
        sings = not request.instrumental or continuation.wanted(request.extend)
        self.engine_request = engine_request(
            request,
            synth_model=plan.files.get("dit"),
            lm_model=plan.files.get("lm") if sings else None,
            output_format=self.format,
            source_duration=source.duration if source else None,
            audio_codes=found["codes_from"].codes if "codes_from" in found else None,
        )
        if self.adapter is not None:
            self.engine_request["adapter"] = self.adapter.engine_name  # its engine name
        first_stage = "lm" if sings else "synth"
        self.queue.set_stage(self.song, first_stage, self.song.progress)
        return JobState.SING

    async def _sing(self) -> JobState:
        """The engine's jobs (with lyrics the LM, then the synth), their progress read from
        its log. An engine that refused the song's first job is started again, once."""
        from ..engine.client import EngineUnreachable, JobCancelled, JobFailed
        from . import continuation
        from .sources import engine_parts

        assert self.plan is not None and self.sup is not None and self.request is not None
        plan, sup = self.plan, self.sup
        watcher = self.watcher = ProgressWatcher(self.queue, self.song, asyncio.get_running_loop())
        unsubscribe = sup.subscribe(watcher.on_event)
        sup.expect_duration(self.request.duration)
        try:
            client = self.engines.client(plan.key)
            self.version = await self.engines.version(plan.key)
            if self.version and self.version != plan.version:
                plan.version = self.version
                self.queue.set_engine(self.song, plan.describe())
            if continuation.wanted(self.request.extend):
                sent: dict[str, Any] = {}
                self.tracks = await continuation.sing(
                    client,
                    self.engine_request,
                    self.sources["source"],
                    self.request.extend or {},
                    on_stage=watcher.on_stage,
                    on_span=watcher.span,
                    wake=watcher.wake,
                    sent=sent,
                )
                if sent.get("joins"):  # the sidecar: each job's request, the join's first
                    self.engine_request = {**sent["joins"][0], "continuation": sent}
            else:
                self.tracks = await client.song(
                    self.engine_request,
                    on_stage=watcher.on_stage,
                    on_lm_result=watcher.keep_lm_result,
                    wake=watcher.wake,
                    parts=await engine_parts(client, self.sources, watcher.wake, plan.key),
                )
        except JobCancelled:
            return JobState.CANCELLED
        except continuation.ContinuationError as exc:  # this node's, not the engine's
            return self._failed(str(exc))
        except JobFailed as exc:
            return self._failed(exc.reason or _engine_reason(sup, exc))
        except EngineUnreachable as exc:
            if self.machine.visits(JobState.SING) > 1:
                return self._failed(f"the engine is not reachable: {exc}")
            # it died between songs and its supervisor had not seen it yet: nothing of the
            # song was sent, so it is started again and the song sent once more
            log.warning("the %s engine was unreachable (%s); restarting it", plan.key, exc)
            await asyncio.sleep(0.2)
            return JobState.ENGINE
        except Exception as exc:
            return self._failed(_engine_reason(sup, exc))
        finally:
            unsubscribe()
        if not self.tracks:
            return self._failed("the engine returned no audio")
        return JobState.SAVE

    async def _save(self) -> JobState:
        """The takes and their sidecars (every parameter, the seed, the timings), and each
        take's latent beside them for its edits."""
        from .sources import keep_take_latents

        assert self.plan is not None and self.request is not None and self.watcher is not None
        assert self.cfg is not None
        song, plan, request, tracks = self.song, self.plan, self.request, self.tracks
        self.queue.set_stage(song, "saving", SAVING_FROM)
        seeds = self.watcher.seeds_for(len(tracks), request.seed)
        # the latents are written beside the takes (each write waits for its own fsync)
        keeping = asyncio.ensure_future(
            asyncio.to_thread(keep_take_latents, song.id, tracks, plan.key)
        )
        self.timings["engine_start_s"] = round(
            self.machine.seconds(JobState.ENGINE, JobState.SOURCES), 3
        )
        self.timings["engine_s"] = round(self.machine.seconds(JobState.SING, JobState.SAVE), 3)
        per_step = self.watcher.seconds_per_step()
        if per_step is not None:
            self.timings["seconds_per_step"] = round(per_step, 4)
            song.engine = {**(song.engine or {}), "seconds_per_step": round(per_step, 4)}
        source = self.sources.get("source")
        meta = {
            "parent": dict(source.ref) if source is not None and "song" in source.ref else None,
            "model": {"name": plan.model, "family": plan.family, "files": plan.files},
            "backend": plan.backend,
            "engine_version": self.version or plan.version,
            "engine_request": self.engine_request,
            "keep_loaded": self.keep_loaded,
            "timings": self.timings,
        }
        # an edit that keeps its source's tempo and key takes them from the source's take
        kept = source.facts if source is not None and request.task in KEEPS_TEMPO else None
        try:
            self.files = await asyncio.to_thread(
                song_files.write_takes,
                self.cfg.songs_dir(),
                song_id=song.id,
                request=song.request,
                fmt=self.format,
                audios=[t.audio for t in tracks],
                seeds=seeds,
                meta=meta,
                lm_metadata=song_files.lm_metadata_per_take(self.watcher.lm_result, len(tracks)),
                source_facts=kept,
            )
        finally:
            await keeping
        if per_step is not None and plan.family != SKETCH and self.files:
            audio_seconds = float(self.files[0].get("duration") or 0.0)
            await asyncio.to_thread(
                speeds.record, plan.family, plan.backend, plan.model, per_step, audio_seconds
            )
        return JobState.DONE


def _first_line(sup: EngineSupervisor, exc: Exception) -> str:
    """Why an engine did not start: the error's first line, else the engine's last error."""
    text = str(exc).strip()
    if text:
        return text.splitlines()[0]
    return _last_error(sup) or type(exc).__name__


def _last_error(sup: EngineSupervisor) -> str | None:
    try:
        return sup.last_error_line()
    except Exception:
        return None


def _engine_reason(sup: EngineSupervisor, exc: Exception) -> str:
    """Why the engine failed this song: its own error lines for the job (and how it ended,
    if it died), else what the client saw."""
    try:
        reason = sup.failure_reason()
    except Exception:
        reason = None
    if reason:
        return reason
    text = str(exc).strip()
    return text or _last_error(sup) or type(exc).__name__

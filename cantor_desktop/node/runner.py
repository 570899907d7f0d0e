"""Running queued songs on engines: one song at a time per engine, FIFO.

For each song: pick the model (the request's, else node.toml's ``models.default``), plan its
engine (the built-in sketch engine, or the family's ace-server build on the pinned or
automatically chosen backend), make sure that engine runs (``keep_loaded`` read from node.toml
for every song), send the request naming the exact DiT and LM files, turn the engine's log
events into song progress, and write the audio and its sidecar.

The node keeps the engine build it started with until it restarts: one supervisor per engine
key ("sketch" or a family), created at that key's first song. Which build that is comes from
:func:`backends.engine_for`: builds ``--update`` staged are trial-loaded when the node starts,
before they take over, and a build never tried on its backend here is tried before its first
song. Every engine job goes through :class:`EngineClient` (the one engine protocol), woken by
the engine's own "Job … done" line.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import config
from ..errors import CantorError
from ..system.paths import paths
from ..song.record import FINISHED, Song
from ..song.request import SongRequest
from . import memory
from . import song_files
from .queue import QUEUED, RUNNING, SongQueue

if TYPE_CHECKING:
    from ..engine.supervisor import EngineSupervisor

log = logging.getLogger(__name__)

SKETCH = "sketch"
SAVING_FROM = 0.95  # engine work fills 0..0.95 of a song's progress, saving the rest
KEEPS_TEMPO = ("repaint", "extend", "extract", "lego", "complete")
"""Tasks whose result has its source's tempo, key and metre (a cover may not)."""
_SEED_RE = re.compile(r"^\[Resolve-T\] seed=(-?\d+)")


class PlanError(CantorError):
    """The song cannot be run as asked (model gone, no engine installed, …)."""


@dataclass
class EnginePlan:
    """Everything needed to run one song's engine, decided before the engine starts."""

    key: str  # "sketch" or a family: one engine process per key
    family: str
    model: str
    argv: list[str]
    env: dict[str, str]
    models_dir: Path
    backend: str
    version: str
    files: dict[str, str | None] = field(default_factory=dict)  # kind → file name

    def describe(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "family": self.family,
            "model": self.model,
            "backend": self.backend,
            "version": self.version,
            "files": self.files,
            "models_dir": str(self.models_dir),
        }


def model_name(request: dict[str, Any], cfg: config.Config) -> str:
    return request.get("model") or cfg.get("models.default")


def engine_key(name: str) -> str:
    """Which engine a model runs on, cheaply (no engine is touched)."""
    if name == SKETCH:
        return SKETCH
    from ..models.library import resolve

    return resolve(name).family


def sketch_models_dir() -> Path:
    return paths().sketch_models_dir


def plan_sketch() -> EnginePlan:
    from ..install.backends import sketch_build
    from ..sketch import ensure_sketch_models

    folder = sketch_models_dir()
    files = ensure_sketch_models(folder)
    build = sketch_build()
    return EnginePlan(
        key=SKETCH,
        family=SKETCH,
        model=SKETCH,
        argv=list(build.argv),
        env=dict(build.env),
        models_dir=folder,
        backend=SKETCH,
        version=build.version,
        files=dict(files),
    )


def plan_model(name: str, cfg: config.Config, build=None) -> EnginePlan:
    """An installed model on its family's engine. ``build`` is the engine build to run it on
    (:func:`backends.engine_for` chooses it, trying what needs a trial); without one, the
    installed build of the pinned or automatically chosen backend, as it is. Never switches
    a pinned backend: a pinned backend that is not installed is an error."""
    from ..install import backends, engine_store
    from ..models.library import resolve

    try:
        files = resolve(name)
    except Exception as exc:
        raise PlanError(f"model {name!r} cannot be used: {exc}") from None
    family = files.family
    if build is None:
        pinned = cfg.pinned_backend(family)
        chosen = pinned or backends.default_backend(family)
        if not chosen:
            raise PlanError(
                f"no {family} engine has a build for this machine; only the "
                f"sketch engine can run here"
            )
        build = engine_store.installed(family, chosen)
        if build is None:
            how = "pinned in node.toml" if pinned else "chosen automatically"
            raise PlanError(
                f"the {chosen} engine ({how}) is not installed for {family}; "
                f"run `cantor backends --install`"
            )
    return EnginePlan(
        key=family,
        family=family,
        model=files.name,
        argv=list(build.argv),
        env=dict(build.env),
        models_dir=Path(files.models_dir),
        backend=build.backend,
        version=str(build.version),
        files={
            "dit": _fname(files.dit),
            "lm": _fname(files.lm),
            "text_enc": _fname(files.text_enc),
            "vae": _fname(files.vae),
        },
    )


def _fname(value) -> str | None:
    return None if value is None else Path(value).name


class Runner:
    """Takes queued songs and runs them; cancel, retry and graceful stop go through it."""

    def __init__(self, queue: SongQueue):
        self.queue = queue
        self.supervisors: dict[str, EngineSupervisor] = {}
        self.plans: dict[str, EnginePlan] = {}  # engine key → the plan it started with
        self.tasks: dict[str, asyncio.Task] = {}  # song id → its task
        self.busy: dict[str, str] = {}  # engine key → song id running on it
        self.draining = False  # a restart was asked: start nothing new
        self.idle = asyncio.Event()
        self.idle.set()
        self._wake = asyncio.Event()
        self._loop_task: asyncio.Task | None = None
        self._stopping = False
        self._versions: dict[int, tuple[int | None, str | None]] = {}
        self._recorded: dict[str, dict] | None = None
        self._clients: dict[str, tuple[int | None, Any]] = {}
        self._builds: dict[str, Any] = {}  # family → the build chosen this run
        self._choosing = asyncio.Lock()
        self._settling: asyncio.Task | None = None
        # key → (engine pid, the adapters and the model files it started with)
        self._engine_saw: dict[str, tuple[int | None, tuple, frozenset[str]]] = {}

    # -- life ----------------------------------------------------------------------------

    @property
    def starts_nothing(self) -> bool:
        """A restart was asked or the node stops: no new song starts here."""
        return self.draining or self._stopping

    def start(self) -> None:
        self.queue.attach(self)
        loop = asyncio.get_running_loop()
        self._settling = loop.create_task(self._settle_staged(), name="settle-staged")
        self._loop_task = loop.create_task(self._loop(), name="runner")

    async def _settle_staged(self) -> None:
        """At start, before any engine of this run: trial-load the builds ``--update``
        staged; each takes over only if it works (the user hears of a rejection in the
        node's log and in the backends' status)."""
        from ..install import backends

        def tell(event) -> None:
            if event.kind in ("rejected", "updated"):
                (log.warning if event.kind == "rejected" else log.info)("%s", event.message)

        for family in config.FAMILIES:
            try:
                await backends.settle_staged(family, on_event=tell)
            except Exception:
                log.exception("trying the staged %s builds", family)

    def wake(self) -> None:
        self._wake.set()

    async def stop(self) -> None:
        """Node shutting down: running songs end failed ("node stopped"), engines stop."""
        self._stopping = True
        if self._loop_task:
            self._loop_task.cancel()
        if self._settling is not None and not self._settling.done():
            self._settling.cancel()
        for task in list(self.tasks.values()):
            task.cancel()
        if self.tasks:
            await asyncio.wait(list(self.tasks.values()), timeout=5)
        for _port, client in list(self._clients.values()):
            try:
                await client.aclose()
            except Exception:
                pass
        for sup in list(self.supervisors.values()):
            try:
                await sup.aclose(3.0)
            except Exception:
                log.exception("stopping an engine")
        try:
            await asyncio.wait_for(self.queue.flush(), 5)
        except asyncio.TimeoutError:
            log.error("the queue could not be saved in time")
        if self.supervisors:
            from . import leftovers

            try:
                leftovers.record({})
            except OSError:
                pass

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
        cfg = _config()
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
        task = asyncio.get_running_loop().create_task(self._run(song), name=f"song-{song.id}")
        self.tasks[song.id] = task
        task.add_done_callback(functools.partial(self._ran, song, key))

    # -- one song ------------------------------------------------------------------------

    async def _run(self, song: Song) -> None:
        try:
            await self._run_song(song)
        except Exception as exc:
            log.exception("song %s failed", song.id)
            if song.state == RUNNING:
                self.queue.finish_failed(song, str(exc) or type(exc).__name__)

    def _ran(self, song: Song, key: str, task: asyncio.Task) -> None:
        """A song's task ended, however it ended. A done callback and not a ``finally``: a
        task cancelled before its first step never enters its coroutine, and the song must
        not stay "running" on an engine no other song could then use."""
        if task.cancelled() and song.state == RUNNING:
            if self._stopping:
                self.queue.abandon(song)
            else:
                self.queue.finish_cancelled(song)
        self.tasks.pop(song.id, None)
        if self.busy.get(key) == song.id:
            del self.busy[key]
        if not self.tasks:
            self.idle.set()
        self.wake()

    async def _run_song(self, song: Song) -> None:
        cfg = _config()
        try:
            plan = await self._plan(song.request, cfg)
        except PlanError as exc:
            self.queue.finish_failed(song, str(exc))
            return
        request = SongRequest(**song.request)
        fmt = request.format or cfg.get("songs.format")
        self.queue.set_engine(song, plan.describe())
        keep_loaded = bool(cfg.get("node.keep_loaded"))
        timings: dict[str, float] = {"queued_at": song.created, "started_at": time.time()}

        adapter = None
        if request.adapter:
            from ..models import adapters

            try:
                adapter = await asyncio.to_thread(adapters.store().get, request.adapter)
            except adapters.AdapterError as exc:
                self.queue.finish_failed(song, str(exc))
                return
        sup = self._supervisor(plan)
        t0 = time.monotonic()
        if not await self._engine_up(
            song,
            plan.key,
            sup,
            keep_loaded,
            adapters=adapter is not None,
            needs=tuple(plan.files.values()),
        ):
            return
        timings["engine_start_s"] = round(time.monotonic() - t0, 3)
        used = self.plans[plan.key]
        if used is not plan:  # the node keeps the build it started with
            plan = _with_files(used, plan)
            self.queue.set_engine(song, plan.describe())

        from ..engine.client import (
            EngineUnreachable,
            JobCancelled,
            JobFailed,
            engine_request,
        )
        from . import sources as song_sources

        try:
            found = await asyncio.to_thread(self._sources, request, plan.key)
        except song_sources.SourceError as exc:
            self.queue.finish_failed(song, str(exc))
            return
        source = found.get("source")
        codes = found["codes_from"].codes if "codes_from" in found else None
        engine_req = engine_request(
            request,
            synth_model=plan.files.get("dit"),
            lm_model=None if request.instrumental else plan.files.get("lm"),
            output_format=fmt,
            source_duration=source.duration if source else None,
            audio_codes=codes,
        )
        if adapter is not None:
            engine_req["adapter"] = adapter.engine_name  # its name in the engine's folder
        watcher = _ProgressWatcher(self.queue, song, asyncio.get_running_loop())
        unsubscribe = sup.subscribe(watcher.on_event)
        sup.expect_duration(request.duration)
        first_stage = "synth" if request.instrumental else "lm"
        self.queue.set_stage(song, first_stage, song.progress)
        t1 = time.monotonic()
        client = self._client(plan.key, sup)

        async def sing(client):
            parts = await self._parts(client, found, watcher.wake, plan.key)
            return await client.song(
                engine_req,
                on_stage=watcher.on_stage,
                on_lm_result=watcher.keep_lm_result,
                wake=watcher.wake,
                parts=parts,
            )

        try:
            version = await self._engine_version(sup, client)
            if version and version != plan.version:
                plan.version = version
                self.queue.set_engine(song, plan.describe())
            try:
                tracks = await sing(client)
            except EngineUnreachable as exc:
                # the engine died between songs and its supervisor had not seen it yet:
                # start it again and send the song once more (nothing of it was sent)
                log.warning("the %s engine was unreachable (%s); restarting it", plan.key, exc)
                await asyncio.sleep(0.2)
                if not await self._engine_up(
                    song,
                    plan.key,
                    sup,
                    keep_loaded,
                    adapters=adapter is not None,
                    needs=tuple(plan.files.values()),
                ):
                    return
                client = self._client(plan.key, sup)
                tracks = await sing(client)
        except JobCancelled:
            self.queue.finish_cancelled(song)
            return
        except JobFailed as exc:
            self.queue.finish_failed(song, exc.reason or _engine_reason(sup, exc))
            return
        except asyncio.CancelledError:
            raise
        except EngineUnreachable as exc:
            self.queue.finish_failed(song, f"the engine is not reachable: {exc}")
            return
        except Exception as exc:
            self.queue.finish_failed(song, _engine_reason(sup, exc))
            return
        finally:
            if callable(unsubscribe):
                unsubscribe()
        timings["engine_s"] = round(time.monotonic() - t1, 3)
        if not tracks:
            self.queue.finish_failed(song, "the engine returned no audio")
            return

        self.queue.set_stage(song, "saving", SAVING_FROM)
        t2 = time.monotonic()
        seeds = watcher.seeds_for(len(tracks), request.seed)
        # the latents are written beside the takes (each write waits for its own fsync)
        keeping = asyncio.ensure_future(
            asyncio.to_thread(self._keep_latents, song.id, tracks, plan.key)
        )
        meta = {
            "parent": dict(source.ref) if source is not None and "song" in source.ref else None,
            "model": {"name": plan.model, "family": plan.family, "files": plan.files},
            "backend": plan.backend,
            "engine_version": version or plan.version,
            "engine_request": engine_req,
            "keep_loaded": keep_loaded,
            "timings": timings,
        }
        # an edit that keeps its source's tempo and key takes them from the source's take
        kept = source.facts if source is not None and request.task in KEEPS_TEMPO else None
        try:
            files = await asyncio.to_thread(
                song_files.write_takes,
                cfg.songs_dir(),
                song_id=song.id,
                request=song.request,
                fmt=fmt,
                audios=[t.audio for t in tracks],
                seeds=seeds,
                meta=meta,
                lm_metadata=song_files.lm_metadata_per_take(watcher.lm_result, len(tracks)),
                source_facts=kept,
            )
        finally:
            await keeping
        timings["saving_s"] = round(time.monotonic() - t2, 3)
        self.queue.finish_done(song, files)
        if self.queue.waiting_count() == 0:
            # the last song for now: its buffers back to the system, off the loop and after
            # the engine is free (a trim between songs of a burst cost them ~20 ms each)
            asyncio.get_running_loop().run_in_executor(None, memory.give_back)

    async def _engine_up(
        self,
        song: Song,
        key: str,
        sup: EngineSupervisor,
        keep_loaded: bool,
        *,
        adapters: bool = False,
        needs: tuple[str | None, ...] = (),
    ) -> bool:
        """Start the song's engine if it is not running (again, when the adapters or model
        files it needs came after it started); a start that fails ends the song with the
        engine's own first words."""
        try:
            await self._ensure_engine(key, sup, keep_loaded, adapters=adapters, needs=needs)
        except Exception as exc:
            self.queue.finish_failed(song, f"the engine did not start: {_first_line(sup, exc)}")
            return False
        self._record_engines()
        return True

    def _sources(self, request: SongRequest, engine: str) -> dict[str, Any]:
        """The request's source, reference and codes, checked again now (a file may have
        gone since the song was queued)."""
        from . import sources as song_sources

        found = {}
        for name in ("source", "reference", "codes_from"):
            ref = getattr(request, name)
            if ref:
                found[name] = song_sources.resolve(name, ref, self.queue.songs, engine)
        return found

    async def _parts(self, client, found: dict[str, Any], wake, engine: str) -> dict | None:
        """The multipart parts of an edit: the source's latent when kept (a Cantor take, or
        an upload encoded once before), else its audio; likewise the reference."""
        from ..engine.client import EngineError
        from . import sources as song_sources

        parts: dict = {}
        for name, audio_name, latent_name in (
            ("source", "audio", "src_latents"),
            ("reference", "ref_audio", "ref_latents"),
        ):
            src = found.get(name)
            if src is None:
                continue
            if src.latent is None and "upload" in src.ref:
                # encode an upload once: every later edit of it sends the latent
                audio = await asyncio.to_thread(song_sources.engine_audio, src.audio_path)
                try:
                    src.latent = await client.encode(audio, wake=wake)
                    await asyncio.to_thread(
                        song_sources.keep_latent,
                        song_sources.upload_latent_file(src.ref["upload"], engine),
                        src.latent,
                    )
                except EngineError as exc:  # an engine without /vae: the audio, then
                    log.info("%s could not be encoded once (%s); sending its audio", src.name, exc)
            parts.update(await asyncio.to_thread(src.parts, audio_name, latent_name))
        return parts or None

    async def _engine_for(self, model: str):
        """A running engine for ``model`` and its client (for jobs outside the song queue:
        the engine runs them in turn with the songs)."""
        cfg = _config()
        plan = await self._plan({"model": model}, cfg)
        sup = self._supervisor(plan)
        await self._ensure_engine(
            plan.key, sup, bool(cfg.get("node.keep_loaded")), needs=tuple(plan.files.values())
        )
        self._record_engines()
        return plan, self._client(plan.key, sup)

    async def _ensure_engine(
        self,
        key: str,
        sup: EngineSupervisor,
        keep_loaded: bool,
        *,
        adapters: bool = False,
        needs: tuple[str | None, ...] = (),
    ) -> None:
        """Make sure ``key``'s engine runs. ace-server scans ``--models`` and ``--adapters``
        only when it starts: an engine started before a model file it now ``needs`` was
        pulled (a base model for stems, say), or before the adapters changed for a song that
        names one (``adapters``), is restarted first. A song calls this before its first job
        and runs alone on its engine, so no song is ever cut by the restart."""
        from ..models.adapters import store

        seen = await asyncio.to_thread(store().fingerprint)
        started = self._engine_saw.get(key)
        if started is not None and not (sup.running and started[0] == sup.pid):
            started = None  # what another process of it saw: it is not running now
        if started is not None and adapters and started[1] != seen:
            log.info("the adapters changed since the %s engine started: restarting it", key)
            await sup.stop()
        elif started is not None and any(name not in started[2] for name in needs if name):
            log.info(
                "the %s engine started before %s was there: restarting it",
                key,
                ", ".join(n for n in needs if n and n not in started[2]),
            )
            await sup.stop()
        await sup.ensure_running(keep_loaded)
        pid = sup.pid
        if started is None or started[0] != pid:  # (re)started now: it saw these
            files = await asyncio.to_thread(_listing, sup.models_dir)
            self._engine_saw[key] = (pid, seen, files)

    async def lm(self, mode: str, caption: str, lyrics: str, model: str) -> dict[str, Any]:
        """The language model's help: ``inspire`` (a short idea → caption and lyrics) or
        ``format`` (tidy the user's caption and lyrics); the first request it writes, in
        the song request's names."""
        plan, client = await self._engine_for(model)
        body = {"caption": caption, "lyrics": lyrics, "lm_mode": mode}
        if plan.files.get("lm"):
            body["lm_model"] = plan.files["lm"]
        found = await client.lm(body)
        return understood_fields(found[0] if found else {})

    async def understand(self, ref: dict[str, Any], model: str) -> dict[str, Any]:
        """What the engine of ``model`` hears in a take or an upload: caption, lyrics, bpm,
        key, time signature, duration and language (the engine's /understand)."""
        from . import sources as song_sources

        plan, client = await self._engine_for(model)
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

    @staticmethod
    def _keep_latents(song_id: str, tracks, engine: str) -> None:
        from . import sources as song_sources

        for n, track in enumerate(tracks, start=1):
            song_sources.keep_latent(
                song_sources.take_latent_file(song_id, n, engine), track.latent
            )

    async def _plan(self, request: dict[str, Any], cfg: config.Config) -> EnginePlan:
        """The song's plan. A family's build is chosen once per node run (the node keeps the
        build it started with), after the staged builds were settled, trial-loading what
        needs it; a model family without a build says why."""
        name = model_name(request, cfg)
        if name == SKETCH:
            return await asyncio.to_thread(plan_sketch)
        family = await asyncio.to_thread(engine_key, name)
        if self._settling is not None:
            await asyncio.shield(self._settling)
        async with self._choosing:
            build = self._builds.get(family)
            if build is None:
                from ..install import backends

                try:
                    build = await backends.engine_for(family)
                except backends.BackendError as exc:
                    raise PlanError(str(exc)) from None
                self._builds[family] = build
        return await asyncio.to_thread(plan_model, name, cfg, build)

    def _client(self, key: str, sup: EngineSupervisor):
        """One engine client per engine process (an httpx client costs ~30 ms to make)."""
        port = sup.port
        held = self._clients.get(key)
        if held is not None and held[0] == port:
            return held[1]
        if held is not None:
            asyncio.get_running_loop().create_task(held[1].aclose())
        client = sup.client()
        self._clients[key] = (port, client)
        return client

    def _record_engines(self) -> None:
        """Remember running engines so a node started after a crash can end them."""
        from . import leftovers

        running = {}
        for key, sup in self.supervisors.items():
            pid = sup.pid
            if pid and sup.running:
                running[key] = {"pid": pid, "models_dir": str(self.plans[key].models_dir)}
        if running != self._recorded:
            try:
                leftovers.record(running)
                self._recorded = running
            except OSError:
                log.exception("recording engine pids")

    async def _engine_version(self, sup: EngineSupervisor, client) -> str | None:
        """The running engine's own version (``/props``), asked once per process."""
        pid = sup.pid
        cached = self._versions.get(id(sup))
        if cached and cached[0] == pid:
            return cached[1]
        try:
            props = await asyncio.wait_for(client.props(), 5.0)
            version = str(props.get("version") or "") or None
        except Exception:
            version = None
        self._versions[id(sup)] = (pid, version)
        return version

    def _supervisor(self, plan: EnginePlan):
        sup = self.supervisors.get(plan.key)
        if sup is None:
            from ..engine.supervisor import EngineSupervisor

            from ..models import adapters

            sup = EngineSupervisor(
                plan.family,
                plan.argv,
                plan.env,
                plan.models_dir,
                log_path=paths().engine_log(plan.key),
                adapters_dir=adapters.store().ensure(),
            )
            self.supervisors[plan.key] = sup
            self.plans[plan.key] = plan
        return sup

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
        out = []
        for key, sup in self.supervisors.items():
            plan = self.plans[key]
            running = bool(sup.running)
            out.append(
                {
                    "engine": key,
                    "family": plan.family,
                    "backend": plan.backend,
                    "version": (self._versions.get(id(sup)) or (None, None))[1] or plan.version,
                    "model": plan.model,
                    "files": plan.files,
                    "running": running,
                    "pid": sup.pid if running else None,
                    "url": sup.base_url if running else None,
                    "keep_loaded": sup.keep_loaded,
                    "song": self.busy.get(key),
                }
            )
        return out


_JOB_DONE_RE = re.compile(r"^\[Server\] Job (\S+) done")


class _ProgressWatcher:
    """Supervisor events (maybe from a reader thread) → song stage and progress."""

    def __init__(self, queue: SongQueue, song: Song, loop: asyncio.AbstractEventLoop):
        self.queue, self.song, self.loop = queue, song, loop
        self.seeds: list[int] = []
        self.lm_result: list[dict] | None = None  # the /lm array (two-stage songs)
        self.wake = asyncio.Event()  # set when the engine says a job is done

    def on_event(self, event) -> None:
        if self.loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop() is self.loop
        except RuntimeError:
            running = False
        if running:
            self._apply(event)
        else:
            self.loop.call_soon_threadsafe(self._apply, event)

    def on_stage(self, stage: str, *_: Any) -> None:
        self.on_event(("stage", stage))

    def keep_lm_result(self, enriched: list[dict]) -> None:
        self.lm_result = enriched

    def _apply(self, event) -> None:
        song = self.song
        line = getattr(event, "line", "") or ""
        found = _JOB_DONE_RE.match(line)
        if found:
            self.wake.set()
        if song.state != RUNNING:
            return
        if isinstance(event, tuple):
            stage = "lm" if event[1] == "lm" else "synth"
            if stage != song.stage:
                self.queue.set_stage(song, stage, song.progress)
            return
        found = _SEED_RE.match(line)
        if found:
            self.seeds.append(int(found.group(1)))
        stage = "lm" if getattr(event, "stage", "") == "lm" else "synth"
        if stage != song.stage and not (song.stage == "synth" and stage == "lm"):
            self.queue.set_stage(song, stage, song.progress)
        fraction = getattr(event, "fraction", None)
        if fraction is not None:
            self.queue.set_progress(
                song, min(float(fraction), 1.0) * SAVING_FROM, getattr(event, "eta_seconds", None)
            )

    def seeds_for(self, takes: int, asked: int) -> list[int | None]:
        if self.seeds:
            seeds: list[int | None] = (
                list(self.seeds[-takes:])
                if len(self.seeds) >= takes
                else list(self.seeds) + [None] * (takes - len(self.seeds))
            )
            return seeds
        return [asked if asked >= 0 else None] * takes


def _listing(folder: Path | None) -> frozenset[str]:
    """The model files an engine sees in its ``--models`` folder."""
    try:
        return frozenset(p.name for p in Path(folder).iterdir()) if folder else frozenset()
    except OSError:
        return frozenset()


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


def _with_files(used: EnginePlan, asked: EnginePlan) -> EnginePlan:
    """The engine that runs (its build) with the model files this song asked for."""
    return EnginePlan(
        key=used.key,
        family=used.family,
        model=asked.model,
        argv=used.argv,
        env=used.env,
        models_dir=used.models_dir,
        backend=used.backend,
        version=used.version,
        files=asked.files,
    )


def current_config() -> tuple[config.Config, config.ConfigError | None]:
    """node.toml as it is now (:func:`config.current`: re-read only when it changed)."""
    return config.current()


def _config() -> config.Config:
    return current_config()[0]


def _first_line(sup, exc: Exception) -> str:
    text = str(exc).strip()
    if text:
        return text.splitlines()[0]
    line = _last_error(sup)
    return line or type(exc).__name__


def _last_error(sup) -> str | None:
    try:
        return sup.last_error_line()
    except Exception:
        return None


def _engine_reason(sup, exc: Exception) -> str:
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

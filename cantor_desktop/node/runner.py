"""Running queued songs on engines: one song at a time per engine, FIFO.

For each song: pick the model (the request's, else node.toml's ``models.default``), plan its
engine (the built-in sketch engine, or the family's ace-server build on the pinned or
automatically chosen backend), make sure that engine runs (``keep_loaded`` read from node.toml
for every song), send the request naming the exact DiT and LM files, turn the engine's log
events into song progress, and write the audio and its sidecar.

The node keeps the engine build it started with until it restarts: one supervisor per engine
key ("sketch" or a family), created at that key's first song.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import config
from ..paths import paths
from ..song_request import SongRequest
from . import songs as song_files
from .queue import FINISHED, NODE_STOPPED, QUEUED, RUNNING, Song, SongQueue

log = logging.getLogger(__name__)

SKETCH = "sketch"
SAVING_FROM = 0.95          # engine work fills 0..0.95 of a song's progress, saving the rest
_SEED_RE = re.compile(r"^\[Resolve-T\] seed=(-?\d+)")


class PlanError(Exception):
    """The song cannot be run as asked (model gone, no engine installed, …)."""


@dataclass
class EnginePlan:
    """Everything needed to run one song's engine, decided before the engine starts."""

    key: str                       # "sketch" or a family: one engine process per key
    family: str
    model: str
    argv: list[str]
    env: dict[str, str]
    models_dir: Path
    backend: str
    version: str
    files: dict[str, str | None] = field(default_factory=dict)  # kind → file name

    def describe(self) -> dict[str, Any]:
        return {"key": self.key, "family": self.family, "model": self.model,
                "backend": self.backend, "version": self.version, "files": self.files,
                "models_dir": str(self.models_dir)}


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
    from ..backends import sketch_build
    from ..sketch import ensure_sketch_models

    folder = sketch_models_dir()
    files = ensure_sketch_models(folder)
    build = sketch_build()
    return EnginePlan(key=SKETCH, family=SKETCH, model=SKETCH, argv=list(build.argv),
                      env=dict(build.env), models_dir=folder, backend=SKETCH,
                      version=build.version, files=dict(files))


def plan_model(name: str, cfg: config.Config) -> EnginePlan:
    """An installed model on its family's engine, on the pinned or the automatically chosen
    backend. Never switches backends: a pinned backend that is not installed is an error."""
    from .. import backends, engine_store
    from ..models.library import resolve

    try:
        files = resolve(name)
    except Exception as exc:
        raise PlanError(f"model {name!r} cannot be used: {exc}") from None
    family = files.family
    pinned = cfg.pinned_backend(family)
    chosen = pinned or backends.default_backend(family)
    if not chosen:
        raise PlanError(f"no {family} engine has a build for this machine; only the sketch "
                        f"engine can run here")
    build = engine_store.installed(family, chosen)
    if build is None:
        how = "pinned in node.toml" if pinned else "chosen automatically"
        raise PlanError(f"the {chosen} engine ({how}) is not installed for {family}; "
                        f"run `cantor backends --install`")
    return EnginePlan(key=family, family=family, model=files.name, argv=list(build.argv),
                      env=dict(build.env), models_dir=Path(files.models_dir),
                      backend=build.backend, version=str(build.version),
                      files={"dit": _fname(files.dit), "lm": _fname(files.lm),
                             "text_enc": _fname(files.text_enc), "vae": _fname(files.vae)})


def _fname(value) -> str | None:
    return None if value is None else Path(value).name


def plan_for(request: dict[str, Any], cfg: config.Config) -> EnginePlan:
    name = model_name(request, cfg)
    return plan_sketch() if name == SKETCH else plan_model(name, cfg)


class Runner:
    """Takes queued songs and runs them; cancel, retry and graceful stop go through it."""

    def __init__(self, queue: SongQueue):
        self.queue = queue
        self.supervisors: dict[str, Any] = {}      # engine key → EngineSupervisor
        self.plans: dict[str, EnginePlan] = {}     # engine key → the plan it started with
        self.tasks: dict[str, asyncio.Task] = {}   # song id → its task
        self.busy: dict[str, str] = {}             # engine key → song id running on it
        self.draining = False                      # a restart was asked: start nothing new
        self.idle = asyncio.Event()
        self.idle.set()
        self._wake = asyncio.Event()
        self._loop_task: asyncio.Task | None = None
        self._stopping = False
        self._versions: dict[int, tuple[int | None, str | None]] = {}
        self._recorded: dict[str, dict] | None = None
        self._clients: dict[str, tuple[int | None, Any]] = {}

    # -- life ----------------------------------------------------------------------------

    def start(self) -> None:
        self._loop_task = asyncio.get_running_loop().create_task(self._loop(), name="runner")

    def wake(self) -> None:
        self._wake.set()

    async def stop(self) -> None:
        """Node shutting down: running songs end failed ("node stopped"), engines stop."""
        self._stopping = True
        if self._loop_task:
            self._loop_task.cancel()
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
        if self.draining or self._stopping:
            return
        cfg = _config()
        keys: dict[str, str | Exception] = {}      # model → engine key, once per pass
        for song in list(self.queue.queued()):
            name = model_name(song.request, cfg)
            if name not in keys:
                try:
                    keys[name] = engine_key(name)
                except Exception as exc:
                    keys[name] = exc
            key = keys[name]
            if isinstance(key, Exception):
                self.queue.finish_failed(song, f"model {name!r} cannot be used: {key}")
                continue
            if key in self.busy:
                continue
            self.busy[key] = song.id
            self.idle.clear()
            # mark running at once so a second dispatch cannot pick it again
            self.queue.start(song)
            task = asyncio.get_running_loop().create_task(self._run(song, key),
                                                          name=f"song-{song.id}")
            self.tasks[song.id] = task

    # -- one song ------------------------------------------------------------------------

    async def _run(self, song: Song, key: str) -> None:
        try:
            await self._run_song(song)
        except asyncio.CancelledError:
            if self._stopping:
                self.queue.finish_failed(song, NODE_STOPPED)
            elif song.state == RUNNING:
                self.queue.finish_cancelled(song)
        except Exception as exc:
            log.exception("song %s failed", song.id)
            if song.state == RUNNING:
                self.queue.finish_failed(song, str(exc) or type(exc).__name__)
        finally:
            self.tasks.pop(song.id, None)
            if self.busy.get(key) == song.id:
                del self.busy[key]
            if not self.tasks:
                self.idle.set()
            self.wake()

    async def _run_song(self, song: Song) -> None:
        cfg = _config()
        try:
            plan = await asyncio.to_thread(plan_for, song.request, cfg)
        except PlanError as exc:
            self.queue.finish_failed(song, str(exc))
            return
        request = SongRequest(**song.request)
        fmt = request.format or cfg.get("songs.format")
        self.queue.set_engine(song, plan.describe())
        keep_loaded = bool(cfg.get("node.keep_loaded"))
        timings: dict[str, float] = {"queued_at": song.created, "started_at": time.time()}

        sup = self._supervisor(plan)
        t0 = time.monotonic()
        try:
            await sup.ensure_running(keep_loaded)
        except Exception as exc:
            reason = _first_line(sup, exc)
            self.queue.finish_failed(song, f"the engine did not start: {reason}")
            return
        timings["engine_start_s"] = round(time.monotonic() - t0, 3)
        self._record_engines()
        used = self.plans[plan.key]
        if used is not plan:       # the node keeps the build it started with
            plan = _with_files(used, plan)
            self.queue.set_engine(song, plan.describe())

        from ..engine.client import JobCancelled, JobFailed, engine_request

        engine_req = engine_request(request, synth_model=plan.files.get("dit"),
                                    lm_model=None if request.instrumental else plan.files.get("lm"),
                                    output_format=song_files.engine_format(fmt))
        if request.steps:
            engine_req["inference_steps"] = request.steps
        watcher = _ProgressWatcher(self.queue, song, asyncio.get_running_loop())
        unsubscribe = sup.subscribe(watcher.on_event)
        expect = getattr(sup, "expect_duration", None)
        if callable(expect):
            expect(request.duration)
        first_stage = "synth" if request.instrumental else "lm"
        self.queue.set_stage(song, first_stage, song.progress)
        t1 = time.monotonic()
        client = self._client(plan.key, sup)
        try:
            version = await self._engine_version(sup, client)
            if version and version != plan.version:
                plan.version = version
                self.queue.set_engine(song, plan.describe())
            try:
                tracks = await run_song(client, sup, engine_req, watcher)
            except EngineUnreachable as exc:
                # the engine died between songs and its supervisor had not seen it yet:
                # start it again and send the song once more
                log.warning("the %s engine was unreachable (%s); restarting it", plan.key, exc)
                await asyncio.sleep(0.2)
                try:
                    await sup.ensure_running(keep_loaded)
                except Exception as start_exc:
                    reason = _first_line(sup, start_exc)
                    self.queue.finish_failed(song, f"the engine did not start: {reason}")
                    return
                self._record_engines()
                client = self._client(plan.key, sup)
                tracks = await run_song(client, sup, engine_req, watcher)
        except JobCancelled:
            self.queue.finish_cancelled(song)
            return
        except JobFailed as exc:
            self.queue.finish_failed(song, exc.reason or _engine_reason(sup, exc))
            return
        except asyncio.CancelledError:
            raise
        except EngineUnreachable as exc:
            self.queue.finish_failed(song, _engine_reason(sup, exc) or
                                     f"the engine is not reachable: {exc}")
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
        meta = {
            "model": {"name": plan.model, "family": plan.family, "files": plan.files},
            "backend": plan.backend,
            "engine_version": version or plan.version,
            "engine_request": engine_req,
            "keep_loaded": keep_loaded,
            "timings": timings,
        }
        files = await asyncio.to_thread(
            song_files.write_takes, cfg.songs_dir(), song_id=song.id, request=song.request,
            fmt=fmt, audios=[t.audio for t in tracks], seeds=seeds, meta=meta,
            lm_metadata=song_files.lm_metadata_per_take(watcher.lm_result, len(tracks)))
        timings["saving_s"] = round(time.monotonic() - t2, 3)
        self.queue.finish_done(song, files)

    def _client(self, key: str, sup):
        """One engine client per engine process (an httpx client costs ~30 ms to make)."""
        port = getattr(sup, "port", None)
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
            pid = getattr(sup, "pid", None)
            if pid and getattr(sup, "running", False):
                running[key] = {"pid": pid, "models_dir": str(self.plans[key].models_dir)}
        if running != self._recorded:
            try:
                leftovers.record(running)
                self._recorded = running
            except OSError:
                log.exception("recording engine pids")

    async def _engine_version(self, sup, client) -> str | None:
        """The running engine's own version (``/props``), asked once per process."""
        pid = getattr(sup, "pid", None)
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

            sup = EngineSupervisor(plan.family, plan.argv, plan.env, plan.models_dir,
                                   log_path=paths().engine_log(plan.key))
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
            running = bool(getattr(sup, "running", False))
            out.append({"engine": key, "family": plan.family, "backend": plan.backend,
                        "version": (self._versions.get(id(sup)) or (None, None))[1] or plan.version,
                        "model": plan.model, "files": plan.files, "running": running,
                        "pid": getattr(sup, "pid", None) if running else None,
                        "url": getattr(sup, "base_url", None) if running else None,
                        "keep_loaded": getattr(sup, "keep_loaded", None),
                        "song": self.busy.get(key)})
        return out


# -- engine jobs, woken by the engine's own "done" line ----------------------------------------

_JOB_DONE_RE = re.compile(r"^\[Server\] Job (\S+) done")


async def run_song(client, sup, body: dict[str, Any], watcher: "_ProgressWatcher") -> list:
    """The two-stage song (``/lm`` then its array to ``/synth`` unchanged) or ``/synth``
    alone for an instrumental — the same protocol as EngineClient.song, but each wait ends
    the moment the engine prints "Job ID done" (the node reads its stderr) instead of at the
    next poll; polling stays as the fallback and for failures."""
    from ..engine.client import EngineError, Track
    from ..song_request import INSTRUMENTAL, is_instrumental

    if is_instrumental(body.get("lyrics")):
        watcher.on_stage("synth")
        return await run_job(client, sup, "/synth", {**body, "lyrics": INSTRUMENTAL}, watcher)
    watcher.on_stage("lm")
    enriched = await run_job(client, sup, "/lm", {**body, "lm_mode": "generate"}, watcher)
    if not isinstance(enriched, list) or not all(isinstance(r, dict) for r in enriched):
        raise EngineError("the engine's /lm result is not an array of requests")
    watcher.lm_result = enriched
    watcher.on_stage("synth")
    tracks = await run_job(client, sup, "/synth", enriched, watcher)
    if not isinstance(tracks, list) or not all(isinstance(t, Track) for t in tracks):
        raise EngineError("the engine's /synth result is not audio")
    return tracks


class EngineUnreachable(Exception):
    """The engine refused the connection when a job was sent: it is not running."""


async def run_job(client, sup, path: str, body, watcher: "_ProgressWatcher"):
    import httpx

    from ..engine.client import JobFailed

    try:
        job_id = await client.submit(path, body)
    except httpx.TransportError as exc:
        raise EngineUnreachable(f"{type(exc).__name__}: {exc}") from None
    try:
        await client.wait(job_id, wake=watcher.wake)
        return await client.result(job_id)
    except httpx.TransportError as exc:
        # the engine went away while the result was read: say how, in its own words
        reason = await _reason_soon(sup, 2.0) or f"{type(exc).__name__}: {exc}"
        raise JobFailed(f"engine stopped: {reason}") from None
    except asyncio.CancelledError:
        try:
            await asyncio.shield(asyncio.wait_for(client.cancel(job_id), 3.0))
        except BaseException:  # noqa: BLE001 - best effort; the song is cancelled anyway
            pass
        raise


async def _reason_soon(sup, wait: float = 0.5) -> str | None:
    """The engine's reason; its stderr is read a moment behind, so allow it to catch up."""
    deadline = asyncio.get_running_loop().time() + wait
    while True:
        try:
            reason = sup.failure_reason()
        except Exception:
            reason = None
        if reason or asyncio.get_running_loop().time() >= deadline:
            return reason
        await asyncio.sleep(0.05)


class _ProgressWatcher:
    """Supervisor events (maybe from a reader thread) → song stage and progress."""

    def __init__(self, queue: SongQueue, song: Song, loop: asyncio.AbstractEventLoop):
        self.queue, self.song, self.loop = queue, song, loop
        self.seeds: list[int] = []
        self.lm_result: list[dict] | None = None   # the /lm array (two-stage songs)
        self.wake = asyncio.Event()          # set when the engine says a job is done

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
            self.queue.set_progress(song, min(float(fraction), 1.0) * SAVING_FROM,
                                    getattr(event, "eta_seconds", None))

    def seeds_for(self, takes: int, asked: int) -> list[int | None]:
        if self.seeds:
            seeds: list[int | None] = list(self.seeds[-takes:]) if len(self.seeds) >= takes \
                else list(self.seeds) + [None] * (takes - len(self.seeds))
            return seeds
        return [asked if asked >= 0 else None] * takes


def _with_files(used: EnginePlan, asked: EnginePlan) -> EnginePlan:
    """The engine that runs (its build) with the model files this song asked for."""
    return EnginePlan(key=used.key, family=used.family, model=asked.model, argv=used.argv,
                      env=used.env, models_dir=used.models_dir, backend=used.backend,
                      version=used.version, files=asked.files)




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


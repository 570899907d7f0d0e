"""The node's engines: one supervisor per engine key ("sketch" or a family), made at that
key's first song and kept for the node's run with the engine build it started with, and
one engine client per engine process (an httpx client costs ~30 ms to make).

Which build a family runs is chosen once per run, after the builds ``--update`` staged were
trial-loaded (each takes over only if it works) and trying a build never tried on its
backend here (:func:`cantor_desktop.install.backends.engine_for`). ace-server scans
``--models`` and ``--adapters`` only when it starts: an engine started before a model file a
song needs was pulled, or before the adapters changed for a song that names one, is started
again first. Running engines are recorded (:mod:`.leftovers`) so a node started after a
crash can end them.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from .. import config
from ..system.paths import paths
from .engine_plan import (
    SKETCH,
    EnginePlan,
    PlanError,
    engine_key,
    model_name,
    plan_model,
    plan_sketch,
)

if TYPE_CHECKING:
    from ..engine.client import EngineClient
    from ..engine.supervisor import EngineSupervisor

log = logging.getLogger(__name__)


class Started(NamedTuple):
    """An engine process as it started: what ace-server scanned then."""

    pid: int | None
    adapters: tuple  # the adapters folder's fingerprint
    files: frozenset[str]  # the model files in its --models folder

    def missing(self, plan: EnginePlan) -> str:
        """The files ``plan`` names that were not there then ("" when none)."""
        return ", ".join(name for name in plan.files.values() if name and name not in self.files)


class Engines:
    """The engines of this node's run, by engine key."""

    def __init__(self) -> None:
        self.supervisors: dict[str, EngineSupervisor] = {}
        self.plans: dict[str, EnginePlan] = {}  # engine key → the plan it started with
        self._started: dict[str, Started] = {}
        self._clients: dict[str, tuple[int | None, EngineClient]] = {}  # key → (port, client)
        self._versions: dict[str, tuple[int | None, str | None]] = {}  # key → (pid, version)
        self._recorded: dict[str, dict] | None = None
        self._builds: dict[str, Any] = {}  # family → the build chosen this run
        self._choosing = asyncio.Lock()
        self._settling: asyncio.Task | None = None

    # -- builds and plans ----------------------------------------------------------------

    def settle_staged(self) -> None:
        """At start, before any engine of this run: trial-load the builds ``--update``
        staged; each takes over only if it works (the user hears of a rejection in the
        node's log and in the backends' status)."""
        from ..install import backends

        def tell(event) -> None:
            if event.kind in ("rejected", "updated"):
                (log.warning if event.kind == "rejected" else log.info)("%s", event.message)

        async def settle() -> None:
            for family in config.FAMILIES:
                try:
                    await backends.settle_staged(family, on_event=tell)
                except Exception:
                    log.exception("trying the staged %s builds", family)

        self._settling = asyncio.get_running_loop().create_task(settle(), name="settle-staged")

    async def plan(self, request: dict[str, Any], cfg: config.Config) -> EnginePlan:
        """The plan of a song (or of a helper job) asking for ``request``'s model, on the
        build its engine runs. A family's build is chosen once per node run, after the
        staged builds were settled, trial-loading what needs it; a model family without a
        build says why (:class:`PlanError`)."""
        name = model_name(request, cfg)
        if name == SKETCH:
            plan = await asyncio.to_thread(plan_sketch)
        else:
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
            plan = await asyncio.to_thread(plan_model, name, cfg, build)
        started = self.plans.get(plan.key)
        return plan if started is None else started.with_files_of(plan)

    # -- processes -----------------------------------------------------------------------

    def supervisor(self, plan: EnginePlan) -> EngineSupervisor:
        """The supervisor of ``plan``'s engine (made, with ``plan`` as the one its engine
        starts with, at the key's first song)."""
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

    async def up(
        self, plan: EnginePlan, keep_loaded: bool, *, adapters: bool = False
    ) -> EngineSupervisor:
        """Make sure ``plan``'s engine runs, with ``keep_loaded`` as node.toml says now. It
        is started again first when it started before a model file the plan names was there
        (a base model pulled for stems, say), or before the adapters changed when the song
        names one (``adapters``). A song calls this before its first job and runs alone on
        its engine, so no song is ever cut by the restart. Returns its supervisor; raises
        what stopped the start."""
        from ..models.adapters import store

        key, sup = plan.key, self.supervisor(plan)
        seen = await asyncio.to_thread(store().fingerprint)
        started = self._started.get(key)
        if started is not None and started.pid != sup.running_pid:
            started = None  # what another process of it saw: it is not running now
        if started is not None and adapters and started.adapters != seen:
            log.info("the adapters changed since the %s engine started: restarting it", key)
            await sup.stop()
        elif started is not None and (missing := started.missing(plan)):
            log.info("the %s engine started before %s was there: restarting it", key, missing)
            await sup.stop()
        pid = await sup.ensure_running(keep_loaded)
        if started is None or started.pid != pid:  # (re)started now: it saw these
            self._started[key] = Started(
                pid, seen, await asyncio.to_thread(_listing, sup.models_dir)
            )
        self.record()
        return sup

    def client(self, key: str) -> EngineClient:
        """The client of ``key``'s engine process (a new one for a new process)."""
        sup = self.supervisors[key]
        port = sup.port
        held = self._clients.get(key)
        if held is not None and held[0] == port:
            return held[1]
        if held is not None:
            asyncio.get_running_loop().create_task(held[1].aclose())
        client = sup.client()
        self._clients[key] = (port, client)
        return client

    async def version(self, key: str) -> str | None:
        """The running engine's own version (``/props``), asked once per process."""
        pid = self._started[key].pid
        cached = self._versions.get(key)
        if cached and cached[0] == pid:
            return cached[1]
        try:
            props = await asyncio.wait_for(self.client(key).props(), 5.0)
            version = str(props.get("version") or "") or None
        except Exception:
            version = None
        self._versions[key] = (pid, version)
        return version

    async def for_model(self, model: str) -> tuple[EnginePlan, EngineClient]:
        """A running engine for ``model`` and its client, for jobs outside the song queue
        (the engine runs them in turn with the songs)."""
        cfg = config.current()[0]
        plan = await self.plan({"model": model}, cfg)
        await self.up(plan, bool(cfg.get("node.keep_loaded")))
        return plan, self.client(plan.key)

    def record(self) -> None:
        """Remember running engines so a node started after a crash can end them."""
        from . import leftovers

        running = {}
        for key, sup in self.supervisors.items():
            pid = sup.running_pid
            if pid:
                running[key] = {"pid": pid, "models_dir": str(self.plans[key].models_dir)}
        if running != self._recorded:
            try:
                leftovers.record(running)
                self._recorded = running
            except OSError:
                log.exception("recording engine pids")

    def loaded(self, busy: dict[str, str]) -> list[dict[str, Any]]:
        """What each engine has running, for /v1/system (``busy``: key → its song)."""
        out = []
        for key, sup in self.supervisors.items():
            plan = self.plans[key]
            pid = sup.running_pid
            out.append(
                {
                    "engine": key,
                    "family": plan.family,
                    "backend": plan.backend,
                    "version": (self._versions.get(key) or (None, None))[1] or plan.version,
                    "model": plan.model,
                    "files": plan.files,
                    "running": pid is not None,
                    "pid": pid,
                    "url": sup.base_url if pid is not None else None,
                    "keep_loaded": sup.keep_loaded,
                    "song": busy.get(key),
                }
            )
        return out

    # -- the node stops ------------------------------------------------------------------

    def stop_settling(self) -> None:
        if self._settling is not None and not self._settling.done():
            self._settling.cancel()

    async def close(self) -> None:
        """Close every client and stop every engine (3 s each before a kill)."""
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

    def forget_running(self) -> None:
        """After :meth:`close`: no engine of this node is left to end."""
        if self.supervisors:
            from . import leftovers

            try:
                leftovers.record({})
            except OSError:
                pass


def _listing(folder: Path | None) -> frozenset[str]:
    """The model files an engine sees in its ``--models`` folder."""
    try:
        return frozenset(p.name for p in Path(folder).iterdir()) if folder else frozenset()
    except OSError:
        return frozenset()

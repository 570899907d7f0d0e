"""A pool's members: each node says every few seconds that it is there, what it can make
and what it is doing, and reads the same of the others.

A member is alive while its key ``cantor:alive:<id>`` exists: the heartbeat sets it with a
time to live of three beats, so a node that dies drops out by itself. Its last report stays
in the members hash (so ``cantor pool status`` can name a member that went away, and a take
made on it can say where it is). What a node can make is the models it has whose engine
has a build it can run (the built-in Sketch always), looked at again every few beats and
when the library changes.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ... import config
from ...pool import redis_keys, records
from ..engine_plan import SKETCH

if TYPE_CHECKING:
    from .queue import PoolQueue

log = logging.getLogger(__name__)

CAPABILITIES_EVERY = 5  # beats between two looks at the library
PROOF_AGAIN_S = 30.0  # a member that proved itself is asked again this often
RETRY_PROOF_S = 10.0  # one that did not, or did not answer


def capabilities(cfg: config.Config) -> tuple[dict[str, str], dict[str, str]]:
    """The models this node can make now → their engine key (sketch always), and each
    engine key → the backend its build runs on (what the app shows of a member)."""
    from ...models.library import READY, list_models
    from ..engine_plan import plan_model

    found = {SKETCH: SKETCH}
    backends = {SKETCH: SKETCH}
    for name in [m.name for m in list_models() if m.state == READY and m.name != SKETCH]:
        try:
            plan = plan_model(name, cfg)
        except Exception as exc:
            log.debug("pool: %s cannot be made here: %s", name, exc)
            continue
        found[plan.model] = plan.key
        backends[plan.key] = plan.backend
    return found, backends


class Membership:
    """This node's heartbeat, and the pool's members as the last beats told them."""

    def __init__(
        self,
        queue: PoolQueue,
        info: Callable[[], dict[str, Any]],
        *,
        period_s: float,
        on_capabilities: Callable[[dict[str, str]], None],
    ):
        self.queue = queue
        self.link = queue.link
        self.node_id = queue.node_id
        self.info = info
        self.period_s = period_s
        self.on_capabilities = on_capabilities
        self.models: dict[str, str] = {SKETCH: SKETCH}
        self.backends: dict[str, str] = {SKETCH: SKETCH}  # engine key → its backend
        self.members: dict[str, dict[str, Any]] = {}  # every member ever seen → last report
        self.alive: set[str] = set()
        self._read_at = 0.0  # when the read that ``members`` and ``alive`` come from began
        self.proofs: dict[str, tuple[str, str | None, float]] = {}
        """Member id → (the address checked, why it is not proven or None, when)."""
        self._proving: asyncio.Task | None = None
        self._look = asyncio.Event()
        self._look.set()
        self._task: asyncio.Task | None = None

    @property
    def ttl_ms(self) -> int:
        return int(self.period_s * 3 * 1000)

    def look_again(self) -> None:
        """The library or the backends changed: what this node can make is looked at again."""
        self._look.set()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="pool-heartbeat")

    async def stop(self) -> None:
        """Leave at once (the others see this node gone now, not after the time to live)."""
        for task in (self._task, self._proving):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if self.link.up.is_set():
            try:
                await asyncio.wait_for(self.link.redis.delete(redis_keys.alive(self.node_id)), 2.0)
            except Exception:
                pass

    async def _run(self) -> None:
        beats = 0
        while True:
            if self._look.is_set() or beats % CAPABILITIES_EVERY == 0:
                self._look.clear()
                cfg, _err = config.current()
                try:
                    models, self.backends = await asyncio.to_thread(capabilities, cfg)
                except Exception:
                    log.exception("pool: what this node can make")
                    models = self.models
                if models != self.models:
                    log.info("pool: this node can make %s", ", ".join(sorted(models)))
                self.models = models
                self.on_capabilities(models)
            beats += 1
            if self.link.up.is_set():
                try:
                    await self.beat()
                    self._prove_soon()
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    if not self.link.down_if_lost(exc):
                        log.exception("pool: heartbeat")
            try:
                await asyncio.wait_for(self._look.wait(), self.period_s)
            except TimeoutError:
                pass

    async def beat(self) -> None:
        report = {
            **self.info(),
            "models": sorted(self.models),
            "backends": dict(self.backends),
            "seen": time.time(),
        }
        r = self.link.redis
        read_at = time.monotonic()
        pipe = r.pipeline(transaction=False)
        pipe.set(redis_keys.alive(self.node_id), "1", px=self.ttl_ms)
        pipe.hset(redis_keys.MEMBERS, self.node_id, json.dumps(report, separators=(",", ":")))
        pipe.hgetall(redis_keys.MEMBERS)
        found = (await pipe.execute())[-1]
        members = {}
        for node_id, text in found.items():
            try:
                members[node_id] = records.member_report(node_id, text)
            except records.Refused as exc:
                self.queue.refuse("member", str(node_id), str(exc))
        ids = list(members)
        flags = await r.mget([redis_keys.alive(i) for i in ids]) if ids else []
        self.learn(
            [{**m, "id": i, "alive": bool(f)} for (i, m), f in zip(members.items(), flags)],
            read_at,
        )

    def learn(self, listed: list[dict[str, Any]], read_at: float) -> None:
        """What a read of the members hash begun at ``read_at`` (``time.monotonic()``) found
        (``GET /v1/pool``'s), unless a read begun later was learnt already: so the brief
        view never counts fewer members than the full one has just listed."""
        if read_at < self._read_at:
            return
        self._read_at = read_at
        self.members = {
            m["id"]: {k: v for k, v in m.items() if k not in ("id", "alive")} for m in listed
        }
        self.alive = {m["id"] for m in listed if m.get("alive")}

    # -- who the members are -----------------------------------------------------------------

    def proven(self, node_id: str) -> bool | None:
        """Whether the member at its advertised address proved it is that member (this
        node always is); None while it has not been asked yet."""
        if node_id == self.node_id:
            return True
        found = self.proofs.get(node_id)
        url = (self.members.get(node_id) or {}).get("url")
        if found is None or found[0] != url:
            return None
        return found[1] is None

    def proof_problem(self, node_id: str) -> str | None:
        found = self.proofs.get(node_id)
        return found[1] if found is not None and self.proven(node_id) is False else None

    async def prove(self, node_id: str) -> bool:
        """Ask ``node_id`` for its proof now (:func:`.pool_peers.check_member`)."""
        from .peers import check_member

        if node_id == self.node_id:
            return True
        member = self.member(node_id)
        if member is None:
            return False
        problem = await check_member(member)
        before = self.proofs.get(node_id)
        self.proofs[node_id] = (member["url"], problem, time.monotonic())
        if problem is not None and (before is None or before[1] != problem):
            log.warning("pool: member %s is not trusted: %s", member.get("name"), problem)
        return problem is None

    def _prove_soon(self) -> None:
        """The live members not proven lately are asked, beside the heartbeat (one that
        does not answer must not hold the next beat up)."""
        if self._proving is not None and not self._proving.done():
            return
        now = time.monotonic()
        due = []
        for node_id in sorted(self.alive - {self.node_id}):
            found = self.proofs.get(node_id)
            url = (self.members.get(node_id) or {}).get("url")
            again = PROOF_AGAIN_S if found is not None and found[1] is None else RETRY_PROOF_S
            if found is None or found[0] != url or now - found[2] >= again:
                due.append(node_id)
        if due:
            self._proving = asyncio.get_running_loop().create_task(
                self._prove_all(due), name="pool-proofs"
            )

    async def _prove_all(self, node_ids: list[str]) -> None:
        results = await asyncio.gather(*(self.prove(i) for i in node_ids), return_exceptions=True)
        for node_id, result in zip(node_ids, results):
            if isinstance(result, Exception):
                log.warning("pool: asking member %s for its proof failed: %s", node_id, result)

    def clashes(self) -> dict[str, list[str]]:
        """Names that more than one live member gives itself → their ids."""
        names: dict[str, list[str]] = {}
        for node_id in sorted(self.alive | {self.node_id}):
            name = (self.members.get(node_id) or {}).get("name")
            if name:
                names.setdefault(name, []).append(node_id)
        return {name: ids for name, ids in names.items() if len(ids) > 1}

    # -- what the pool can make ------------------------------------------------------------

    def makers(self, model: str) -> list[str]:
        """Names of the live members that can make ``model``."""
        return [
            m.get("name") or i
            for i, m in self.members.items()
            if i in self.alive and model in (m.get("models") or ())
        ]

    def pool_models(self) -> dict[str, list[str]]:
        """Every model a live member can make → the names of those members."""
        out: dict[str, list[str]] = {}
        for node_id in sorted(self.alive):
            member = self.members.get(node_id) or {}
            for model in member.get("models") or ():
                out.setdefault(model, []).append(member.get("name") or node_id)
        for model in self.models:  # this node, even before its first beat came back
            names = out.setdefault(model, [])
            me = (self.members.get(self.node_id) or {}).get("name") or self.node_id
            if me not in names:
                names.append(me)
        return out

    def member(self, node_id: str) -> dict[str, Any] | None:
        """A member's last report, with its id (what :mod:`.pool_peers` asks it by)."""
        found = self.members.get(node_id)
        return None if found is None else {**found, "id": node_id}

    def is_alive(self, node_id: str) -> bool:
        return node_id in self.alive or node_id == self.node_id

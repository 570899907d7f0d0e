"""A node in a pool: the one object the node's state holds when it was started with a pool
URL (``cantor node --pool URL`` or ``[pool] url``). It joins (the pool's token checked),
runs the queue's mirror (:mod:`.pool_queue`), the feeder (:mod:`.pool_feeder`) and the
heartbeat (:mod:`.pool_members`), decides which lane a new song waits in, and says what the
pool is doing (``GET /v1/system``'s ``pool``, ``GET /v1/pool``).

Which lane a song waits in:

- sent to one member (``POST /v1/songs?node=ID``): that member's lane;
- an edit of a take, or a song with an upload or an adapter: the lane of the member that
  holds those files (a take on the shared folder counts as everyone's) — a submission that
  names another member's take is handed to that member;
- anything else: its model's lane, read by every member that can make that model.

A song that no live member can make is refused when it is submitted (a 4xx naming the
model and who has what); one whose makers all left after it was queued waits, and its
record says why (``waiting``), until one comes back.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from typing import TYPE_CHECKING, Any

from ... import __version__, config
from ...auth import access
from ...errors import CantorError
from ...system.net import WILDCARDS, http_url
from ...pool import address as pool_address
from ...pool import credentials, redis_keys
from ...pool.address import INSECURE_ENV, POOL_ENV
from ...pool.link import PoolLink, PoolUnavailable
from ...models.catalogue import canonical_model
from ...song.record import Song
from .feeder import Feeder
from .members import Membership
from .queue import PoolQueue
from ..engine_plan import SKETCH

if TYPE_CHECKING:
    from ..runner import Runner

log = logging.getLogger(__name__)

JOIN_WAIT_S = 3.0
HEARTBEAT_S = 2.0

__all__ = ["POOL_ENV", "MemberRefused", "Pool", "PoolRefused", "PoolUnavailable", "pool_url"]


class PoolRefused(CantorError):
    """This node may not join the pool (its token is not the pool's)."""


class MemberRefused(CantorError):
    """A song may not be sent to that member (it did not prove itself, or its name is
    another's too)."""


def pool_url(cfg: config.Config) -> str:
    return os.environ.get(POOL_ENV, "").strip() or (cfg.get("pool.url") or "")


def advertised_url(cfg: config.Config, host: str, port: int, redis_host: str) -> str:
    """Where the other members reach this node: ``[pool] advertise``, else the address it
    listens on, else (listening on every address) the one that routes to Redis."""
    given = cfg.get("pool.advertise")
    if given:
        return given.rstrip("/")
    if host not in WILDCARDS:
        return http_url(host, port)
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((redis_host, 9))  # no packet is sent: the route picks the address
            return http_url(s.getsockname()[0], port)
    except OSError:
        return http_url(socket.gethostname(), port)


class Pool:
    """This node's membership of a pool and everything it runs for it."""

    def __init__(self, url: str, cfg: config.Config, listen: tuple[str, int]):
        found = pool_address.parse(url)
        self.address = found.without_password()
        password = credentials.password(found)
        exposed = pool_address.exposure(found, password is not None)
        if exposed and not (cfg.get("pool.allow_insecure") or os.environ.get(INSECURE_ENV)):
            raise PoolRefused(
                f"the pool at {self.address.shown()} is open to its network: {exposed} "
                f"`cantor pool join {self.address.shown()}` asks whether to join it anyway "
                "(or `cantor config set pool.allow_insecure true`)"
            )
        if exposed:
            log.warning("pool %s: %s", self.address.shown(), exposed)
        self.link = PoolLink(found, password, cfg.get("pool.ca") or None)
        host, port = listen
        self.me: dict[str, Any] = {
            "id": credentials.node_id(),
            "name": cfg.get("pool.name") or socket.gethostname(),
            "url": advertised_url(cfg, host, port, found.host),
            "shared": bool(cfg.get("pool.shared_songs")),
        }
        if pool_address.is_loopback(host) and not pool_address.is_loopback(found.host):
            log.warning(
                "pool: this node listens on %s only: the other members cannot fetch its takes "
                "(listen on the studio's network: `cantor config set node.host 0.0.0.0`)",
                host,
            )
        self.lease_s = float(cfg.get("pool.lease"))
        self.queue = PoolQueue(self.link, self.me)
        self.members = Membership(
            self.queue,
            self._report,
            period_s=min(HEARTBEAT_S, self.lease_s / 3),
            on_capabilities=self._serve,
        )
        self.feeder = Feeder(self.queue, self.lease_s, self.engine_of)
        self.queue.waiting_reason = self.waiting_reason
        self.refused: str | None = None
        self.runner: Runner | None = None
        self.started = time.time()
        self._checks: asyncio.Task | None = None
        self._check_on_connect = False  # open() checks the first connection itself
        self.link.on_up.append(self._check_token_later)

    # -- joining ---------------------------------------------------------------------------

    async def open(self) -> None:
        """Start everything; when Redis answers now, the token is checked before the node
        listens (a refusal stops the node with the reason)."""
        self.link.start()
        up = await self.link.wait_up(JOIN_WAIT_S)
        self._check_on_connect = True  # every later connection is checked when it comes
        if up:
            await self._check_token()
            await self.queue.loaded(JOIN_WAIT_S)
        else:
            log.warning(
                "pool %s does not answer yet (%s); the node starts and joins when it does",
                self.address.shown(),
                self.link.error,
            )
        self.queue.open()
        self.feeder.start()
        self.members.start()

    def bind(self, runner: Runner) -> None:
        self.runner = runner

    async def _check_token(self) -> None:
        token = access.node_token(create=True) or ""
        r = self.link.redis
        found = await r.get(redis_keys.TOKEN_CHECK)
        if found is None:
            await r.set(redis_keys.TOKEN_CHECK, credentials.token_check(token), nx=True)
            found = await r.get(redis_keys.TOKEN_CHECK)
            log.info("pool %s: this node's token is the pool's token now", self.address.shown())
        if not credentials.token_matches(token, found or ""):
            self.refused = (
                f"this node's token is not the token of the pool at {self.address.shown()}: run "
                f"`cantor pool join {self.address.shown()}` here with the pool's token "
                f"(`cantor node token` on a member prints it)"
            )
            raise PoolRefused(self.refused)
        self.refused = None

    def _check_token_later(self) -> None:
        if not self._check_on_connect:
            return

        async def check():
            try:
                await self._check_token()
            except PoolRefused as exc:
                log.error("pool: %s", exc)
                await self._stop_work()
            except Exception as exc:
                self.link.down_if_lost(exc)

        self._checks = asyncio.get_running_loop().create_task(check(), name="pool-token")

    async def _stop_work(self) -> None:
        await self.feeder.stop()
        await self.members.stop()
        await self.queue.close()
        await self.link.close()

    async def close(self) -> None:
        """Leave: the heartbeat's key goes (the others see this node gone at once)."""
        await self.members.stop()
        await self.feeder.stop()
        await self.queue.close()
        await self.link.close()

    # -- what runs where -------------------------------------------------------------------

    def _serve(self, models: dict[str, str]) -> None:
        self.feeder.serve(models)

    def engine_of(self, model: str) -> str:
        if model == SKETCH:
            return SKETCH
        return self.members.models.get(model) or config.FAMILIES[0]

    def _report(self) -> dict[str, Any]:
        runner = self.runner
        engines = []
        if runner is not None:
            for item in runner.loaded():
                engines.append(
                    {
                        k: item.get(k)
                        for k in ("engine", "backend", "version", "model", "running", "song")
                    }
                )
        return {
            **self.me,
            "version": __version__,
            "engines": engines,
            "running": sorted(self.queue.held),
            "lease": self.lease_s,
            "started": self.started,
        }

    async def member_named(self, wanted: str) -> str | None:
        """A live member's id from its id or its name, when that member proved, at its
        address, that it is that member (asked now when it was not yet); None when no live
        member is called so. :class:`MemberRefused` when the only ones so called did not
        prove it, or when two that did share the name."""
        me = self.me["id"]
        live = sorted(self.members.alive | {me})
        found = [i for i in live if i == wanted] or [
            i
            for i in live
            if wanted == ((self.members.member(i) or (self.me if i == me else {})).get("name"))
        ]
        if not found:
            return None
        unasked = [i for i in found if self.members.proven(i) is None]
        await asyncio.gather(*(self.members.prove(i) for i in unasked))
        trusted = [i for i in found if self.members.proven(i)]
        if not trusted:
            why = self.members.proof_problem(found[0]) or "it did not prove it"
            raise MemberRefused(
                f"node: the member called {wanted!r} has not proved it is a member of the "
                f"pool ({why}); nothing is sent to it"
            )
        if len(trusted) > 1:
            raise MemberRefused(
                f"node: {len(trusted)} members are called {wanted!r} ({', '.join(trusted)}): "
                "send the song to one by its id, or give one another name "
                "(`cantor config set pool.name NAME` on it)"
            )
        return trusted[0]

    def holder_of(self, data: dict[str, Any]) -> str | None:
        """The member that holds what an edit names (a take not on the shared folder), or
        None when any member can make the song."""
        for field in ("source", "reference", "codes_from"):
            ref = data.get(field) or {}
            if "upload" in ref:
                return self.me["id"]
            if "song" in ref:
                song = self.queue.get(ref["song"])
                if song is None or not song.node:
                    return self.me["id"]
                if not song.node.get("shared"):
                    return song.node.get("id") or self.me["id"]
        if data.get("adapter"):
            return self.me["id"]
        return None

    def lane_for(self, data: dict[str, Any], target: str | None) -> str:
        if target:
            return redis_keys.node_lane(target)
        holder = self.holder_of(data)
        if holder is not None:
            return redis_keys.node_lane(holder)
        data["model"] = canonical_model(data.get("model") or "")
        return redis_keys.model_lane(data["model"])

    def waiting_reason(self, song: Song) -> str | None:
        lane = self.queue.lanes.get(song.id, "")
        if lane.startswith(redis_keys.LANE_MODEL):
            model = lane[len(redis_keys.LANE_MODEL) :]
            if not self.members.makers(model):
                return f"no member of the pool can make {model} now: it waits for one that can"
        elif lane.startswith(redis_keys.LANE_NODE):
            node_id = lane[len(redis_keys.LANE_NODE) :]
            if not self.members.is_alive(node_id):
                name = (self.members.member(node_id) or {}).get("name") or node_id
                return f"it waits for {name}, which is not in the pool now"
        return None

    # -- what the pool is doing ------------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        """For ``GET /v1/system``: the pool as this node sees it, without asking Redis."""
        state = "refused" if self.refused else self.link.state
        return {
            **self.link.describe(),
            "state": state,
            "error": self.refused or self.link.describe()["error"],
            "node": dict(self.me),
            "lease": self.lease_s,
            "members": len(self.members.alive),
            "refused_entries": self.queue.refusals.describe(),
        }

    async def status(self, songs: bool = True) -> dict[str, Any]:
        """For ``GET /v1/pool``: every member, its models and its queue, and every lane."""
        from ...pool.status import gather

        out = self.describe()
        if self.link.up.is_set() and not self.refused:
            read_at = time.monotonic()
            found = await self.link.now(lambda: gather(self.link.redis, songs, self.queue.refusals))
            self.members.learn(found["members"], read_at)
            clashes = {i for ids in self.members.clashes().values() for i in ids}
            for member in found["members"]:
                member["proven"] = self.members.proven(member["id"])
                member["proof_problem"] = self.members.proof_problem(member["id"])
                member["name_clash"] = member["id"] in clashes
            out.update(found)
        else:
            out.update(
                {
                    "members": [
                        {**m, "alive": False, "id": i}
                        for i, m in sorted(self.members.members.items())
                    ],
                    "lanes": [],
                }
            )
        return out

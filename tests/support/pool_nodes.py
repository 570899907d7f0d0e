"""A pool of real nodes on 127.0.0.1 behind a real redis-server (the pool's tests, faults
and bench): each node a process with its own CANTOR_HOME, Sketch engines whose synth jobs
take a fixed time (``sketch-server --test-synth-seconds``), one pool token, a short lease.

``acestep=True`` gives a node an ACE-Step model too: header-only model files and the Sketch
behind ace-server's command line as its engine, so "turbo" songs render there and only there.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import httpx

from cantor_desktop.auth.access import bearer

from .edit_nodes import sketch_as_acestep
from .node import Node, write_config
from .redis_server import RedisServer
from .scripted_engine import make_models

TOKEN = "pool-token-for-tests-0123456789abcdef"
START_TIMEOUT = 90.0  # a node's first start imports FastAPI: slow on a busy 2-core machine
TURBO = "acestep-v15-turbo-Q8_0"


class PoolNode:
    """One member: a :class:`support.node.Node` with its pool settings."""

    def __init__(
        self,
        redis: RedisServer,
        home: Path,
        name: str,
        *,
        lease: int = 2,
        synth_seconds: float = 0.5,
        acestep: bool = False,
        shared_songs: Path | None = None,
        token: str = TOKEN,
        ca: Path | None = None,
    ):
        self.redis, self.home, self.name, self.token = redis, home, name, token
        home.mkdir(parents=True, exist_ok=True)
        if acestep:
            sketch_as_acestep(home, home)
            make_models(home / "models" / "acestep")
            # the Sketch default model, so songs that name none stay Sketch songs
            text = (
                (home / "node.toml")
                .read_text()
                .replace('default = "acestep-v15-turbo"', 'default = "sketch"')
            )
            (home / "node.toml").write_text(text)
        else:
            write_config(home)
        songs = shared_songs or (home / "songs")
        text = (home / "node.toml").read_text().replace(str(home / "songs"), str(songs))
        text += f'\n[pool]\nname = "{name}"\nlease = {lease}\n'
        if shared_songs is not None:
            text += "shared_songs = true\n"
        if ca is not None:
            text += f"ca = {json.dumps(str(ca))}\n"
        (home / "node.toml").write_text(text)
        self.songs_dir = songs
        self.env = {
            "CANTOR_POOL_URL": redis.url,
            "CANTOR_POOL_PASSWORD": redis.password,
            "CANTOR_TEST_SKETCH_SYNTH_S": str(synth_seconds),
        }
        self.node = Node(home, token=token, env=self.env)
        self.port = self.node.proc.port

    async def start(self) -> PoolNode:
        await self.node.proc.start(timeout=START_TIMEOUT)
        return self

    async def restart(self) -> PoolNode:
        self.node = Node(self.home, port=self.port, token=self.token, env=self.env)
        return await self.start()

    @property
    def url(self) -> str:
        return self.node.url

    @property
    def pid(self) -> int | None:
        return self.node.proc.pid

    def http(self, **kw) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.url, headers=bearer(self.token), trust_env=False, timeout=60, **kw
        )

    def kill9(self) -> None:
        os.kill(self.node.proc.pid, signal.SIGKILL)
        self.node.proc.proc.wait()

    def engine_pids(self) -> list[int]:
        import psutil

        try:
            return [c.pid for c in psutil.Process(self.pid).children(recursive=True)]
        except psutil.Error:
            return []

    async def stop(self) -> None:
        await self.node.stop()

    async def node_id(self) -> str:
        async with self.http() as h:
            return (await h.get("/v1/system")).json()["pool"]["node"]["id"]


async def post(member: PoolNode, body: dict[str, Any], **params) -> str:
    async with member.http() as h:
        r = await h.post("/v1/songs", json=body, params=params)
    assert r.status_code == 202, r.text
    return r.json()["id"]


async def song(member: PoolNode, song_id: str) -> dict[str, Any]:
    async with member.http() as h:
        r = await h.get(f"/v1/songs/{song_id}")
    assert r.status_code == 200, r.text
    return r.json()


async def all_finished(member: PoolNode, ids: list[str], timeout: float = 240.0) -> dict:
    """Every song of ``ids`` as ``member`` lists it, once all have ended."""
    deadline = time.monotonic() + timeout
    wanted = set(ids)
    while True:
        async with member.http() as h:
            r = await h.get("/v1/songs", params={"limit": 100000})
        found = {s["id"]: s for s in r.json()["songs"] if s["id"] in wanted}
        if len(found) == len(wanted) and all(
            s["state"] in ("done", "failed", "cancelled") for s in found.values()
        ):
            return found
        if time.monotonic() > deadline:
            left = {i: (found.get(i) or {}).get("state") for i in wanted}
            left = {i: s for i, s in left.items() if s not in ("done", "failed", "cancelled")}
            raise AssertionError(f"songs not finished in time: {left}")
        await asyncio.sleep(0.2)


async def audio_digest(member: PoolNode, song_id: str, take: int = 1) -> tuple[int, str]:
    """(status, sha256) of a take's audio as ``member`` serves it."""
    digest = hashlib.sha256()
    path = f"/v1/songs/{song_id}/audio"
    async with member.http() as h, h.stream("GET", path, params={"take": take}) as r:
        async for chunk in r.aiter_bytes():
            digest.update(chunk)
        return r.status_code, digest.hexdigest()


def sidecars(folder: Path) -> list[dict[str, Any]]:
    """Every take's sidecar in a songs folder (each names its song and take)."""
    out = []
    for path in sorted(Path(folder).glob("*.json")):
        try:
            data = json.loads(path.read_text("utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("cantor_song"):
            out.append(data)
    return out


async def start_all(members: list[PoolNode]) -> None:
    """Start members at once (each waits for its imports and for Redis: together they
    overlap)."""
    await asyncio.gather(*(m.start() for m in members))


async def wait_pool_state(member: PoolNode, state: str, timeout: float = 30.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        async with member.http() as h:
            r = await h.get("/v1/system")
        pool = r.json().get("pool") or {}
        if pool.get("state") == state:
            return pool
        if time.monotonic() > deadline:
            raise AssertionError(f"pool state stayed {pool.get('state')!r}, not {state!r}")
        await asyncio.sleep(0.1)


async def wait_members(member: PoolNode, count: int, timeout: float = 30.0) -> list[dict]:
    deadline = time.monotonic() + timeout
    while True:
        async with member.http() as h:
            r = await h.get("/v1/pool")
        alive = [m for m in r.json().get("members", []) if m.get("alive")]
        if len(alive) >= count:
            return alive
        if time.monotonic() > deadline:
            raise AssertionError(f"{len(alive)} members alive, not {count}")
        await asyncio.sleep(0.1)


class ThreeNodePool:
    """Redis and three members on ``base``: alpha and bravo make Sketch songs, charlie
    also ACE-Step turbo ones (a model the others have not). A context manager."""

    def __init__(self, base: Path):
        self.redis = RedisServer(base / "redis")
        self.members = [
            PoolNode(self.redis, base / "a", "alpha"),
            PoolNode(self.redis, base / "b", "bravo"),
            PoolNode(self.redis, base / "c", "charlie", acestep=True),
        ]

    def __enter__(self) -> tuple[RedisServer, list[PoolNode]]:
        self.redis.start()
        try:
            asyncio.run(start_all(self.members))
            asyncio.run(wait_members(self.members[0], 3))
        except BaseException:
            self.__exit__()
            raise
        return self.redis, self.members

    def __exit__(self, *_exc) -> None:
        async def stop():
            for m in self.members:
                if m.node.proc.proc is not None:
                    await m.stop()

        try:
            asyncio.run(stop())
        finally:
            self.redis.stop()

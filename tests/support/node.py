"""A real node process on 127.0.0.1 with its own CANTOR_HOME, its default model set to the
built-in sketch engine, and the waits the node tests share."""

from __future__ import annotations

import asyncio
import inspect
import os
import signal
import time
from pathlib import Path

import httpx

from cantor_desktop.auth.access import bearer
from cantor_desktop.client.node_process import NodeProcess
from cantor_desktop.client.nodeclient import NodeClient

from .procs import free_port


def write_config(home: Path, **extra: str) -> None:
    lines = [
        "[models]",
        'default = "sketch"',
        "",
        "[songs]",
        f'dir = "{home / "songs"}"',
        'format = "wav16"',
    ]
    for key, value in extra.items():
        lines.append(f"{key} = {value}")
    (home / "node.toml").write_text("\n".join(lines) + "\n", "utf-8")


class Node:
    """A node child running on ``home``; use :meth:`client` for a NodeClient."""

    def __init__(
        self,
        home: Path,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        token: str | None = None,
        env: dict[str, str] | None = None,
    ):
        self.home = home
        env = {"CANTOR_HOME": str(home), **(env or {})}
        self.proc = NodeProcess(
            host,
            port or free_port(),
            token=token,
            env=env,
            log_path=home / "logs" / "node-child.log",
        )

    async def start(self) -> "Node":
        await self.proc.start()
        return self

    @property
    def url(self) -> str:
        return self.proc.url

    def client(self, token: str | None = None) -> NodeClient:
        return NodeClient(self.url, token=token or self.proc.token)

    def http(self, **kw) -> httpx.AsyncClient:
        """A raw HTTP client of this node carrying its token (for tests of the wire)."""
        return httpx.AsyncClient(
            base_url=self.url, headers=bearer(self.proc.token), trust_env=False, **kw
        )

    async def stop(self) -> None:
        await self.proc.stop()

    def kill9(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.proc.wait()


async def wait_for(predicate, timeout: float = 20.0, every: float = 0.02, what: str = ""):
    """Await ``predicate`` (async, or a plain function) until it returns something truthy,
    and return that. ``timeout`` only stops a test that would otherwise hang."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout:g} s waiting" + (f" for {what}" if what else "")
            )
        await asyncio.sleep(every)


async def collect(
    client: NodeClient, song_id: str, timeout: float = 60.0
) -> list[tuple[str, dict]]:
    async def read():
        return [item async for item in client.events(song_id)]

    return await asyncio.wait_for(read(), timeout)


async def until_state(client: NodeClient, song_id: str, states, timeout: float = 60.0) -> dict:
    async def check():
        song = await client.song(song_id)
        return song if song["state"] in states else None

    return await wait_for(check, timeout)


async def engine_pid(client: NodeClient, key: str = "sketch") -> int | None:
    system = await client.system()
    for item in system["loaded"]:
        if item["engine"] == key and item.get("running"):
            return item["pid"]
    return None


LONG = {"caption": "slow ambient drone", "duration": 600, "model": "sketch"}
SHORT = {"caption": "lofi piano rain", "duration": 10, "model": "sketch"}

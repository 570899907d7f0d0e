"""A Cantor home set up as a user would for the real ace-server and the fabricated models
(fabricated.py): the engine named in node.toml (``engines.acestep.path``: a build the user
supplies), the model folder imported (``cantor models import``: adopted where it is), and
what the tests read of the engine while it works: its log lines and its CPU time."""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path

import psutil

from cantor_desktop.system.net import free_port

from real_engine.fabricated import BASE_MODEL, TURBO_MODEL, ModelSet


def configure(
    home: Path,
    engine: Path,
    *,
    port: int | None = None,
    model: str = TURBO_MODEL,
    lm: str = "0.6B",
    keep_loaded: bool = False,
    fmt: str = "wav16",
) -> int:
    """node.toml for the real engine, and the node's port (a free one unless given: the CLI
    finds the running node there, and a test never takes the default port). Returns it."""
    port = port or free_port()
    (home / "node.toml").write_text(
        f"[node]\nport = {port}\nkeep_loaded = {'true' if keep_loaded else 'false'}\n\n"
        f'[engines.acestep]\npath = "{engine}"\n\n'
        f'[models]\ndefault = "{model}"\nlm = "{lm}"\n\n'
        f'[songs]\ndir = "{home / "songs"}"\nformat = "{fmt}"\n',
        "utf-8",
    )
    return port


def import_models(models: ModelSet) -> None:
    """The product's own ``cantor models import FOLDER`` (in this process: CANTOR_HOME is
    the test's)."""
    from cantor_desktop.models import library

    results = library.import_path(models.folder)
    taken = [r for r in results if r.kind]
    assert len(taken) == len(models.files), results


def set_up(home: Path, engine: Path, models: ModelSet, **kw) -> int:
    """node.toml and the imported models; returns the node's port."""
    port = configure(home, engine, **kw)
    import_models(models)
    return port


BASE = BASE_MODEL
TURBO = TURBO_MODEL


_PREFIX = re.compile(r"^\S+ \S+ INFO cantor\.engine\.\w+: ", re.MULTILINE)


class EngineLog:
    """The node's log of the engine's lines (``logs/engine-acestep.log``), read from where
    it was when this was made."""

    def __init__(self, home: Path):
        self.path = home / "logs" / "engine-acestep.log"
        self.start = self.path.stat().st_size if self.path.exists() else 0

    def text(self) -> str:
        """The engine's own lines since then (the log's time and logger prefix removed)."""
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.start)
                raw = fh.read().decode("utf-8", "replace")
        except OSError:
            return ""
        return _PREFIX.sub("", raw)

    def lines(self) -> list[str]:
        return self.text().splitlines()

    async def wait_for(self, pattern: str, timeout: float = 120.0) -> re.Match:
        found = re.compile(pattern, re.M)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            match = found.search(self.text())
            if match:
                return match
            await asyncio.sleep(0.01)
        raise AssertionError(
            f"no line matching {pattern!r} within {timeout:g} s; log:\n{self.text()[-3000:]}"
        )


def sing(home: Path, port: int, request: dict) -> dict:
    """One song through a real node on ``home`` (started and stopped here), followed to its
    end: the node's record of it."""
    from support.node import Node

    async def one_song() -> dict:
        node = await Node(home, port=port).start()
        try:
            async with node.client() as c:
                song_id = await c.submit_song(request)
                async for _kind, _data in c.events(song_id):
                    pass
                return await c.song(song_id)
        finally:
            await node.stop()

    return asyncio.run(one_song())


def engine_pid(home: Path) -> int | None:
    """The running engine's pid, as the node records it (state/engines.json)."""
    try:
        doc = json.loads((home / "state" / "engines.json").read_text())
    except (OSError, ValueError):
        return None
    entry = doc.get("acestep") or {}
    return entry.get("pid")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


async def cpu_after(pid: int, seconds: float) -> float:
    """The CPU time a process spends over the next ``seconds`` (0 when it is gone)."""
    try:
        before = cpu_seconds(pid)
    except psutil.NoSuchProcess:
        return 0.0
    await asyncio.sleep(seconds)
    try:
        return cpu_seconds(pid) - before
    except psutil.NoSuchProcess:
        return 0.0

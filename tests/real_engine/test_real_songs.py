"""Songs on the real ace-server through a real node, with header-only models (every song
fails at load time: the reasons are what is checked). The engine is a user's own build
unpacked from a release-style archive (its libraries beside it, no RUNPATH)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from real_engine.conftest import figure
from real_engine.real_build import needs_real_engine, unpack_beside
from support.hub import ModelHub
from support.node import Node, until_state
from support.procs import free_port

from cantor_desktop.system.selfexec import self_argv

pytestmark = needs_real_engine
LM_FATAL = "[GGUF] FATAL: tensor 'model.embed_tokens.weight' not found"
DIT_FATAL = "[Load] FATAL: invalid DiT config in "
BARE = re.compile(r"(engine stopped: )?(exit code -?\d+|killed by signal \d+ \(\w+\))\.?")


def names_more_than_an_exit_code(reason: str) -> bool:
    return bool(reason) and not BARE.fullmatch(reason.strip())


@pytest.fixture
def hub():
    with ModelHub() as h:
        h.add_set()
        yield h


def configure(home: Path, engine: Path) -> None:
    """node.toml with the engine, and a free port of the node's own: `cantor sing` finds the
    test's node there (on the default port it would start a node of its own, and meet any
    other program on that port)."""
    (home / "node.toml").write_text(
        f"[node]\nport = {free_port()}\n\n"
        f'[engines.acestep]\npath = "{engine}"\n\n'
        f'[models]\ndefault = "acestep-v15-turbo"\nlm = "0.6B"\n\n'
        f'[songs]\ndir = "{home / "songs"}"\nformat = "wav16"\n'
    )


async def started(home: Path, hub: ModelHub) -> Node:
    """The node of ``home``, on node.toml's port, with the turbo model pulled."""
    import tomllib

    port = tomllib.loads((home / "node.toml").read_text())["node"]["port"]
    node = await Node(home, port=port, env={"HF_ENDPOINT": hub.base_url}).start()
    async with node.client() as c:
        pulled = [item async for item in c.pull("acestep-v15-turbo")]
    assert pulled[-1].type == "done", pulled
    return node


def sing(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    return subprocess.run(
        self_argv("cli") + ["sing", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "CANTOR_HOME": str(home)},
    )


def expected_fatal(vocal: bool) -> str:
    return LM_FATAL if vocal else DIT_FATAL


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_100_failing_songs_of_cantor_sing_name_their_reason(
    cantor_home, tmp_path, hub, monkeypatch
):
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)
    configure(cantor_home, unpack_beside(tmp_path / "my-ace"))
    results = []

    async def main():
        node = await started(cantor_home, hub)
        try:
            for i in range(100):
                vocal = i % 2 == 0
                words = ["--lyrics", "la la la"] if vocal else ["--instrumental"]
                done = await asyncio.to_thread(
                    sing, cantor_home, f"song {i}", *words, "--duration", "10"
                )
                results.append((vocal, done))
        finally:
            await node.stop()

    asyncio.run(main())
    reasons = []
    for vocal, done in results:
        assert done.returncode == 1, done.stderr
        assert "another Cantor home" not in done.stderr  # the running node was used
        line = next(
            (
                ln
                for ln in done.stderr.splitlines()
                if ln.startswith("cantor sing: the song failed: ")
            ),
            None,
        )
        assert line is not None, done.stderr
        reasons.append((vocal, line.split("the song failed: ", 1)[1]))
    more = [r for _, r in reasons if names_more_than_an_exit_code(r)]
    cause = [r for vocal, r in reasons if expected_fatal(vocal) in r]
    figure(
        "failing songs whose reason names more than an exit code",
        len(more),
        len(reasons),
        f"{len(cause)} name the first FATAL line (the rest lost it: the engine dropped its "
        f"last lines; they name the stage, the model file and the last line that arrived)",
    )
    for _vocal, reason in reasons:
        if expected_fatal(_vocal) not in reason:
            assert "during the" in reason and "last line" in reason or "printed nothing" in reason
    assert len(more) >= 95
    # the cause comes first and whole, never after the symptom
    for vocal, reason in reasons:
        if not vocal and DIT_FATAL in reason:
            assert (
                reason.index(DIT_FATAL) < reason.find("synth load failed")
                or "synth load failed" not in reason
            )


def engine_log_offset(home: Path) -> int:
    path = home / "logs" / "engine-acestep.log"
    return path.stat().st_size if path.exists() else 0


async def kill_when_created(home: Path, offset: int, timeout: float = 20.0) -> str:
    """Kill -9 the engine the moment its log shows a job created after ``offset``."""
    path = home / "logs" / "engine-acestep.log"
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with open(path, "rb") as fh:
                fh.seek(offset)
                text = fh.read().decode("utf-8", "replace")
        except OSError:
            text = ""
        if re.search(r"\[Server\] Job \w+ created", text):
            pid = json.loads((home / "state" / "engines.json").read_text())["acestep"]["pid"]
            try:
                os.kill(pid, signal.SIGKILL)
                return "killed"
            except ProcessLookupError:
                return "gone"
        await asyncio.sleep(0.001)
    return "never"


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_kill_9_of_the_real_engine_mid_job(cantor_home, tmp_path, hub, monkeypatch):
    """Every other song, the engine is killed -9 the moment its job is created. Each song
    ends failed with a reason of its own: SIGKILL only where the kill landed, the engine's
    FATAL (or what is known) otherwise; the engine comes back for the next song."""
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)
    configure(cantor_home, unpack_beside(tmp_path / "my-ace"))
    outcomes = []

    async def main():
        node = await started(cantor_home, hub)
        try:
            async with node.client() as c:
                for i in range(20):
                    vocal = i % 4 < 2
                    offset = engine_log_offset(cantor_home)
                    sid = await c.submit_song(
                        {
                            "caption": f"kill {i}",
                            "duration": 10,
                            "lyrics": "la la" if vocal else "[Instrumental]",
                        }
                    )
                    kill = i % 2 == 0
                    how = await kill_when_created(cantor_home, offset) if kill else "no kill"
                    song = await until_state(c, sid, ("done", "failed", "cancelled"), 60)
                    outcomes.append((vocal, how, song["state"], song.get("error") or ""))
        finally:
            await node.stop()

    asyncio.run(main())
    for outcome in outcomes:
        print(outcome)
    landed = [o for o in outcomes if o[1] == "killed" and "SIGKILL" in o[3]]
    figure(
        "kill -9 mid-job: songs ending failed with a reason of their own",
        sum(1 for o in outcomes if o[2] == "failed" and names_more_than_an_exit_code(o[3])),
        len(outcomes),
        f"the kill landed mid-job in {len(landed)} of 10 tries",
    )
    for vocal, how, state, reason in outcomes:
        assert state == "failed" and names_more_than_an_exit_code(reason), (how, reason)
        assert "lost job" not in reason, reason  # a dying engine's "Job not found"
        if how == "no kill":
            assert "SIGKILL" not in reason, reason  # never an earlier song's
        if "SIGKILL" in reason:  # its own FATAL line arrived first, or what is known
            assert expected_fatal(vocal) in reason or (
                "during the" in reason and ("LM" if vocal else "synth") in reason
            ), reason
    assert landed, outcomes

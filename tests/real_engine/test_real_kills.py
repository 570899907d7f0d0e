"""kill -9 of the real ace-server mid-song, and of the node mid-song: the song ends with a
reason of its own, nothing is left running (no engine working for a song nobody will
receive), and the next song works."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from real_engine.conftest import figure
from real_engine.fabricated import SHORT_SEEDS, TURBO_MODEL
from real_engine.real_build import needs_real_engine
from real_engine.real_node import EngineLog, set_up
from support.node import Node, until_state
from support.procs import alive, gone

pytestmark = needs_real_engine
SONG = {
    "caption": "dreamy synthwave",
    "lyrics": "la la la",
    "bpm": 96,
    "key": "A minor",
    "time_signature": 4,
    "duration": 10,
    "seed": SHORT_SEEDS[0],
    "model": TURBO_MODEL,
}
# a 10-s instrumental: seconds of VAE work to be killed in
LONG = {"caption": "lofi piano", "duration": 10, "seed": 3, "model": TURBO_MODEL}


async def running_engine(client) -> int:
    system = await client.system()
    return next(e["pid"] for e in system["loaded"] if e["engine"] == "acestep" and e["pid"])


async def gone_within(pid: int, seconds: float) -> float | None:
    """Seconds until the process is gone, or None when it still runs after ``seconds``."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        if gone(pid):
            return time.monotonic() - t0
        await asyncio.sleep(0.02)
    return None


@pytest.mark.timeout(1800)
def test_kill_9_of_the_engine_mid_song(cantor_home, fabricated, real_engine):
    port = set_up(cantor_home, real_engine, fabricated)
    out: dict = {}

    async def main():
        node = await Node(cantor_home, port=port).start()
        try:
            async with node.client() as c:
                log = EngineLog(cantor_home)
                sid = await c.submit_song(LONG)
                await log.wait_for(r"^\[DiT\] Step 1/8", timeout=300)
                pid = await running_engine(c)
                os.kill(pid, signal.SIGKILL)
                song = await until_state(c, sid, ("done", "failed", "cancelled"), 60)
                out["song"] = song
                out["old_gone"] = gone(pid)
                nxt = await c.submit_song(SONG)
                out["next"] = await until_state(c, nxt, ("done", "failed"), 900)
                out["new_pid"] = await running_engine(c) if out["next"]["state"] == "done" else None
                out["old_pid"] = pid
        finally:
            await node.stop()

    asyncio.run(main())
    song = out["song"]
    figure(
        "kill -9 of the real engine mid-song: the song fails with its own reason, the next works",
        int(song["state"] == "failed" and out["next"]["state"] == "done"),
        1,
        f"reason: {song['error']}",
    )
    assert song["state"] == "failed", song
    assert "SIGKILL" in song["error"] and "synth" in song["error"], song["error"]
    assert out["old_gone"]
    assert out["next"]["state"] == "done", out["next"]
    assert out["new_pid"] and out["new_pid"] != out["old_pid"]


@pytest.mark.timeout(1800)
def test_kill_9_of_the_node_mid_song(cantor_home, fabricated, real_engine):
    """The node dies in the VAE stage of a song: its engine must not go on decoding a song
    nobody will receive (ace-server finishes its running job on SIGTERM). The next node
    says why the song ended, and sings."""
    port = set_up(cantor_home, real_engine, fabricated)
    out: dict = {}

    async def main():
        node = await Node(cantor_home, port=port).start()
        async with node.client() as c:
            log = EngineLog(cantor_home)
            sid = await c.submit_song(LONG)
            await log.wait_for(r"^\[VAE\] Graph", timeout=300)
            pid = await running_engine(c)
        node.kill9()
        out["engine_gone_after"] = await gone_within(pid, 5.0)
        out["engine_alive"] = alive(pid)
        node = await Node(cantor_home, port=port).start()
        try:
            async with node.client() as c:
                out["song"] = await c.song(sid)
                nxt = await c.submit_song(SONG)
                out["next"] = await until_state(c, nxt, ("done", "failed"), 900)
        finally:
            await node.stop()
        if alive(pid):
            os.kill(pid, signal.SIGKILL)  # the test's own leftover, never the product's

    asyncio.run(main())
    gone_after = out["engine_gone_after"]
    figure(
        "kill -9 of the node mid-song: its engine gone within 5 s, the song ends with a "
        "reason, the next works",
        int(
            gone_after is not None
            and out["song"]["state"] == "failed"
            and out["next"]["state"] == "done"
        ),
        1,
        f"engine gone after {gone_after:.2f} s"
        if gone_after is not None
        else "engine still running",
    )
    assert gone_after is not None, "the engine went on working after its node died"
    assert out["song"]["state"] == "failed" and out["song"]["error"] == "node stopped", out["song"]
    assert out["next"]["state"] == "done", out["next"]

"""Fault injection on the node (slow; run with `-m slow`).

- kill -9 the engine at random moments of songs until 20 kills have landed mid-song (the
  engine was working on that song, per the node, when the signal was sent, and the process
  ended of it); every such song must end — failed with the engine's reason, or done with a
  whole file when the engine had already handed it over — and the next song must be done.
  Kills that did not land (the song ended first, no engine yet) are not counted, and are
  reported; fewer than 20 landed kills fail the test.
- kill -9 the node 10 times with songs queued: after a restart no song is lost — the queued
  ones run, the running one is failed "node stopped".

Each prints tried / survived / lost.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import time

import pytest
import soundfile as sf

from support.node import Node, until_state, write_config
from support.procs import free_port, gone

pytestmark = pytest.mark.slow

FINAL = ("done", "failed", "cancelled")
LANDED_KILLS = 20  # the figure: kills that landed mid-song
MAX_ATTEMPTS = 40  # more than this many tries to get them fails the test


def _request(rng: random.Random) -> dict:
    req = {
        "caption": "fault test groove",
        "model": "sketch",
        "duration": rng.choice([60, 240, 600]),
        "seed": rng.randrange(1000),
    }
    if rng.random() < 0.5:
        req["lyrics"] = "[Verse]\nla la la la\nhold on hold on"
    return req


async def _engine_on(c, sid: str) -> int | None:
    """The pid of the engine the node says is working on this song right now."""
    for item in (await c.system())["loaded"]:
        if item.get("song") == sid and item.get("running") and item.get("pid"):
            return int(item["pid"])
    return None


def _whole_file(song: dict) -> str | None:
    """Why a done song's audio is not the whole song it asked for (None: it is)."""
    take = (song.get("takes") or [{}])[0]
    try:
        info = sf.info(take["audio"])
    except (KeyError, RuntimeError, OSError) as exc:
        return f"no readable audio: {exc}"
    if abs(info.duration - song["request"]["duration"]) > 0.5:
        return f"{info.duration:.1f} s of a {song['request']['duration']} s song"
    return None


def test_engine_killed_mid_song_twenty_times(cantor_home, tally):
    write_config(cantor_home)
    rng = random.Random(int(os.environ.get("CANTOR_FAULT_SEED", "1234")))
    t = tally("engine kill -9 mid-song")
    missed: list[str] = []  # kills that did not land: not counted
    outcomes = {"failed": 0, "done": 0}

    async def trial(c) -> None:
        sid = await c.submit_song(_request(rng))
        await until_state(c, sid, ("running",) + FINAL, 60)
        await asyncio.sleep(rng.uniform(0.0, 1.0))
        pid = await _engine_on(c, sid)
        if pid is None:
            missed.append("no engine was working on the song")
            await until_state(c, sid, FINAL, 120)
            return
        sent = time.time()
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            missed.append("the engine had already ended")
            await until_state(c, sid, FINAL, 120)
            return
        try:
            song = await until_state(c, sid, FINAL, 60)
        except AssertionError:
            t.fail(f"song {sid} stuck in {(await c.song(sid))['state']} after the kill")
            return
        # landed: the node had the song running (started before, ended after the signal)
        # and the process did end
        if not (song["started"] and song["started"] < sent < (song["finished"] or 0)):
            missed.append(f"the song ended before the signal ({song['state']})")
            return
        if not gone(pid):
            missed.append("the engine survived SIGKILL")  # cannot happen; never counted
            return
        if song["state"] == "failed":
            outcomes["failed"] += 1
            if "SIGKILL" not in song["error"] and "signal 9" not in song["error"]:
                t.fail(f"failed without the engine's reason: {song['error']!r}")
                return
        elif song["state"] == "done":
            outcomes["done"] += 1  # the engine had handed the audio over already
            problem = _whole_file(song)
            if problem:
                t.fail(f"done after the kill, but {problem}")
                return
        else:
            t.fail(f"song {song['state']} after the kill")
            return
        nxt = await c.submit_song({"caption": "after", "model": "sketch", "duration": 10})
        after = await until_state(c, nxt, FINAL, 60)
        if after["state"] == "done":
            t.ok()
        else:
            t.fail(f"the next song {after['state']}: {after.get('error')}")

    async def main():
        node = await Node(cantor_home).start()
        try:
            async with node.client() as c:
                attempts = 0
                while t.tried < LANDED_KILLS and attempts < MAX_ATTEMPTS:
                    attempts += 1
                    await trial(c)
        finally:
            await node.stop()

    asyncio.run(main())
    note = (
        f"{t.tried + len(missed)} songs tried, {len(missed)} not counted (no kill "
        f"landed mid-song: {', '.join(sorted(set(missed))) or 'none'}); after a landed "
        f"kill {outcomes['failed']} failed with the signal, {outcomes['done']} were done "
        f"with a whole file"
    )
    t.note(note)
    assert t.tried >= LANDED_KILLS, f"only {t.tried} kills landed mid-song: {note}"
    assert not t.lost, t.lost


def test_node_killed_ten_times_with_a_queue(cantor_home, tally):
    write_config(cantor_home)
    rng = random.Random(int(os.environ.get("CANTOR_FAULT_SEED", "4321")))
    port = free_port()
    t = tally("node kill -9 with a queue")
    submitted = 0

    async def round_() -> None:
        nonlocal submitted
        node = await Node(cantor_home, port=port).start()
        async with node.client() as c:
            batch = [await c.submit_song(_request(rng)) for _ in range(3)]
            submitted += len(batch)
            await asyncio.sleep(rng.uniform(0.0, 1.5))
            waiting = [s["state"] for s in await c.songs() if s["id"] in batch]
        node.kill9()
        if not any(state in ("queued", "running") for state in waiting):
            t.fail(
                f"no song of the batch was queued or running when the node was killed ({waiting})"
            )
            return
        again = await Node(cantor_home, port=port).start()
        try:
            async with again.client() as c:
                known = {s["id"] for s in await c.songs()}
                missing = [sid for sid in batch if sid not in known]
                if missing:
                    t.fail(f"{len(missing)} of {len(batch)} songs forgotten")
                    return
                for sid in batch:
                    song = await until_state(c, sid, FINAL, 120)
                    if song["state"] == "failed":
                        if song["error"] != "node stopped":
                            t.fail(f"failed with {song['error']!r}, not 'node stopped'")
                            return
                        await c.retry(sid)
                        song = await until_state(c, sid, FINAL, 120)
                    if song["state"] != "done":
                        t.fail(f"song {song['state']} after the restart: {song.get('error')}")
                        return
                t.ok()
        finally:
            await again.stop()

    async def main():
        for _ in range(10):
            await round_()

    asyncio.run(main())
    t.note(f"{submitted} songs submitted")
    assert t.tried == 10 and not t.lost, t.lost

"""Fault injection on the node (slow; run with `-m slow`).

- kill -9 the engine 20 times at random moments of songs: every song must end (failed with
  the engine's reason, or done when it finished first) and the next song must be done;
- kill -9 the node 10 times with songs queued: after a restart no song is lost — the queued
  ones run, the running one is failed "node stopped".

Each prints tried / survived / lost.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from support.procs import free_port
from support.node import Node, engine_pid, until_state, write_config  # noqa: E402

pytestmark = pytest.mark.slow

FINAL = ("done", "failed", "cancelled")


def _request(rng: random.Random) -> dict:
    req = {"caption": "fault test groove", "model": "sketch",
           "duration": rng.choice([60, 240, 600]), "seed": rng.randrange(1000)}
    if rng.random() < 0.5:
        req["lyrics"] = "[Verse]\nla la la la\nhold on hold on"
    return req


def test_engine_killed_twenty_times_at_random_moments(cantor_home):
    write_config(cantor_home)
    rng = random.Random(int(os.environ.get("CANTOR_FAULT_SEED", "1234")))
    tried = survived = lost = 0
    reasons: list[str] = []
    problems: list = []

    async def main():
        nonlocal tried, survived, lost
        node = await Node(cantor_home).start()
        try:
            async with node.client() as c:
                for _ in range(20):
                    tried += 1
                    sid = await c.submit_song(_request(rng))
                    await until_state(c, sid, ("running",) + FINAL, 30)
                    await asyncio.sleep(rng.uniform(0.0, 1.0))
                    pid = await engine_pid(c)
                    if pid:
                        try:
                            os.kill(pid, signal.SIGKILL)
                        except ProcessLookupError:
                            pass
                    try:
                        song = await until_state(c, sid, FINAL, 60)
                    except AssertionError:
                        lost += 1
                        problems.append(("stuck", await c.song(sid)))
                        continue
                    if song["state"] == "failed":
                        reasons.append(song["error"])
                    # the queue goes on: the next short song is done
                    nxt = await c.submit_song({"caption": "after", "model": "sketch",
                                               "duration": 10})
                    after = await until_state(c, nxt, FINAL, 60)
                    if after["state"] == "done":
                        survived += 1
                    else:
                        lost += 1
                        problems.append(("next song", after))
        finally:
            await node.stop()

    asyncio.run(main())
    print(f"\nengine kill -9: tried {tried}, survived {survived}, lost {lost}; "
          f"{len(reasons)} songs failed; reasons: {sorted(set(reasons))}")
    for what, song in problems:
        print(what, song["state"], song["stage"], song["error"])
    assert lost == 0 and survived == tried
    # every failure carries how the engine ended, not a bare transport error
    assert all("SIGKILL" in r or "signal 9" in r for r in reasons), reasons


def test_node_killed_ten_times_with_a_queue(cantor_home):
    write_config(cantor_home)
    rng = random.Random(int(os.environ.get("CANTOR_FAULT_SEED", "4321")))
    port = free_port()
    tried = survived = lost = 0
    submitted: list[str] = []

    async def main():
        nonlocal tried, survived, lost
        for _ in range(10):
            tried += 1
            node = await Node(cantor_home, port=port).start()
            async with node.client() as c:
                batch = [await c.submit_song(_request(rng)) for _ in range(3)]
                submitted.extend(batch)
                await asyncio.sleep(rng.uniform(0.0, 1.5))
            node.kill9()
            again = await Node(cantor_home, port=port).start()
            try:
                async with again.client() as c:
                    known = {s["id"]: s for s in await c.songs()}
                    missing = [sid for sid in batch if sid not in known]
                    ok = not missing
                    for sid in batch:
                        if sid in missing:
                            continue
                        song = await until_state(c, sid, FINAL, 120)
                        if song["state"] == "failed" and song["error"] != "node stopped":
                            ok = False
                        if song["state"] == "failed":
                            await c.retry(sid)
                            song = await until_state(c, sid, FINAL, 120)
                        ok = ok and song["state"] == "done"
                    lost += len(missing)
                    survived += 1 if ok else 0
            finally:
                await again.stop()

    asyncio.run(main())
    print(f"\nnode kill -9 with a queue: tried {tried}, survived {survived}, "
          f"lost {lost} of {len(submitted)} songs")
    assert lost == 0 and survived == tried

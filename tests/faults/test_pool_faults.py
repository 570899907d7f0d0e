"""Fault injection on a pool of three real nodes behind a real redis-server (slow; run with
`-m slow`): 60 songs posted to every member; 20 kill -9 trials, each counted only when the
kill landed mid-song; a member's own song across its kill and restart."""

from __future__ import annotations

import asyncio
import time

import pytest
from support.pool_nodes import (
    PoolNode,
    ThreeNodePool,
    all_finished,
    audio_digest,
    post,
    sidecars,
    song,
)
from support.redis_server import require

pytestmark = pytest.mark.slow

SKETCH_SONG = {"caption": "lofi piano rain", "duration": 10, "model": "sketch"}


def run(coro):
    return asyncio.run(coro)


@pytest.fixture(scope="module")
def pool3(tmp_path_factory):
    require()
    with ThreeNodePool(tmp_path_factory.mktemp("pool3")) as (redis, members):
        yield redis, members


def _made(members: list[PoolNode], song_id: str) -> list[str]:
    return [m.name for m in members for s in sidecars(m.songs_dir) if s["id"] == song_id]


def test_sixty_songs_posted_to_three_members_are_each_made_once(pool3, tally):
    _redis, members = pool3
    t = tally("pool: 60 songs posted to 3 members, each made once and heard from each")

    async def go():
        ids = [
            await post(members[k % 3], {**SKETCH_SONG, "caption": f"sixty {k}", "seed": k})
            for k in range(60)
        ]
        found = await all_finished(members[1], ids, timeout=600)
        for song_id in ids:
            digests = {await audio_digest(m, song_id) for m in members}
            made = _made(members, song_id)
            s = found[song_id]
            if s["state"] != "done" or len(s["takes"]) != 1 or len(digests) != 1:
                t.fail(f"{song_id}: {s['state']}, {len(s['takes'])} takes, {digests}")
            elif made != [s["node"]["name"]]:
                t.fail(f"{song_id}: take files on {made}, record says {s['node']['name']}")
            else:
                t.ok()
        t.note("makers: " + ", ".join(sorted({s["node"]["name"] for s in found.values()})))

    run(go())
    assert t.tried == 60 and not t.lost


@pytest.mark.timeout(900)  # 20 trials, each with the killed member's restart
def test_twenty_kills_mid_song_each_song_made_once_elsewhere(pool3, tally):
    _redis, members = pool3
    t = tally("pool: kill -9 of the member making a song (counted when mid-song)")

    async def trial(k: int) -> None:
        song_id = await post(members[k % 3], {**SKETCH_SONG, "caption": f"kill {k}"})
        deadline = time.monotonic() + 60
        while True:
            s = await song(members[k % 3], song_id)
            if s["state"] == "running" and s.get("node") and s["progress"] > 0:
                break
            if s["state"] == "done" or time.monotonic() > deadline:
                t.note(f"trial {k} not counted: {s['state']} before the kill")
                return
            await asyncio.sleep(0.02)
        victim = next(m for m in members if m.name == s["node"]["name"])
        victim.kill9()
        other = next(m for m in members if m is not victim)
        done = (await all_finished(other, [song_id]))[song_id]
        await victim.restart()
        made = _made(members, song_id)
        if done["state"] != "done" or len(done["takes"]) != 1 or made != [done["node"]["name"]]:
            t.fail(f"{song_id}: {done['state']}, takes {len(done['takes'])}, files on {made}")
        elif done["node"]["name"] == victim.name:
            t.fail(f"{song_id}: made by the killed member {victim.name}")
        else:
            t.ok()

    async def go():
        for k in range(20):
            await trial(k)

    run(go())
    assert t.tried >= 15 and not t.lost


def test_a_members_own_song_waits_for_it_across_kill_and_restart(pool3):
    _redis, (a, b, _c) = pool3

    async def go():
        song_id = await post(a, {**SKETCH_SONG, "caption": "killed mid song"}, node="bravo")
        deadline = time.monotonic() + 60
        while True:
            s = await song(b, song_id)
            if s["state"] == "running" and s["progress"] > 0:
                break
            assert time.monotonic() < deadline, s
            await asyncio.sleep(0.05)
        b.kill9()
        meanwhile = await song(a, song_id)
        await b.restart()
        found = await all_finished(a, [song_id])
        return song_id, meanwhile, found[song_id]

    song_id, meanwhile, done = run(go())
    assert meanwhile["state"] == "running"  # the record still held by the dead member
    assert done["state"] == "done" and done["node"]["name"] == "bravo"
    assert done["attempts"] == 2 and len(done["takes"]) == 1
    assert _made(pool3[1], song_id) == ["bravo"]

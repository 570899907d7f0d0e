"""A pool of three real nodes behind a real redis-server (password, append-only file): the
queue, the records and the events shared; a node that dies or freezes mid-song; Redis
killed and restarted; a node without a model. The long runs (20 kills, counted only when
the kill landed mid-song) are in tests/faults/test_pool_faults.py."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time

import pytest

from support.pool_nodes import (
    TOKEN,
    TURBO,
    PoolNode,
    all_finished,
    audio_digest,
    post,
    sidecars,
    song,
    start_all,
    wait_members,
    wait_pool_state,
)
from support.redis_server import RedisServer, require

SKETCH_SONG = {"caption": "lofi piano rain", "duration": 10, "model": "sketch"}


def run(coro):
    return asyncio.run(coro)


@pytest.fixture(scope="module")
def pool3(tmp_path_factory):
    """Redis and three members: A and B make Sketch songs, C also ACE-Step turbo ones."""
    require()
    base = tmp_path_factory.mktemp("pool3")
    redis = RedisServer(base / "redis").start()
    a = PoolNode(redis, base / "a", "alpha")
    b = PoolNode(redis, base / "b", "bravo")
    c = PoolNode(redis, base / "c", "charlie", acestep=True)
    members = [a, b, c]
    try:
        t0 = time.monotonic()
        run(start_all(members))
        run(wait_members(a, 3))
        print("started in", time.monotonic() - t0)
        yield redis, members
    finally:

        async def stop():
            for m in members:
                await m.stop()

        run(stop())
        redis.stop()


async def _events(member: PoolNode, into: list, ready: asyncio.Event) -> None:
    """Every event ``member`` streams on /v1/events (an app connected to it)."""
    async with member.http() as h:
        async with h.stream("GET", "/v1/events", timeout=None) as r:
            kind = None
            async for line in r.aiter_lines():
                if line.startswith("event: "):
                    kind = line[7:]
                    if kind == "hello":
                        ready.set()
                elif line.startswith("data: ") and kind:
                    into.append((kind, json.loads(line[6:])))


def test_sixty_songs_posted_to_three_nodes_are_each_made_once_and_heard_from_every_node(pool3):
    redis, members = pool3

    async def go():
        seen: list = []
        ready = asyncio.Event()
        listener = asyncio.ensure_future(_events(members[0], seen, ready))
        await asyncio.wait_for(ready.wait(), 30)
        ids = []
        for k in range(60):
            body = {**SKETCH_SONG, "caption": f"lofi piano rain {k}", "seed": k}
            ids.append(await post(members[k % 3], body))
        found = await all_finished(members[1], ids)
        await asyncio.sleep(0.5)
        listener.cancel()
        digests = {}
        for song_id in ids:
            for m in members:
                digests.setdefault(song_id, set()).add(await audio_digest(m, song_id))
        return ids, found, seen, digests

    t0 = time.monotonic()
    ids, found, seen, digests = run(go())
    print("sixty:", time.monotonic() - t0, [s["attempts"] for s in found.values() if s["attempts"] != 1])
    assert {s["state"] for s in found.values()} == {"done"}
    assert all(len(s["takes"]) == 1 for s in found.values())
    makers = {s["node"]["name"] for s in found.values()}
    assert makers == {"alpha", "bravo", "charlie"}  # every member took songs
    # each song made once: one take file in the whole pool, on the node its record names
    written = [
        (m.name, side["id"]) for m in members for side in sidecars(m.songs_dir) if side["id"] in ids
    ]
    assert sorted(i for _n, i in written) == sorted(ids)
    assert all(found[i]["node"]["name"] == n for n, i in written)
    # the same bytes from every member (two of them fetch it from its maker)
    assert all(len(d) == 1 and next(iter(d))[0] == 200 for d in digests.values())
    # an app connected to alpha saw every song end, whoever made it
    done = {data["id"] for kind, data in seen if kind == "done"}
    assert set(ids) <= done
    # every member lists the whole pool
    for m in members:

        async def listed(m=m):
            async with m.http() as h:
                return {s["id"] for s in (await h.get("/v1/songs")).json()["songs"]}

        assert set(ids) <= run(listed())


def test_a_node_without_the_model_never_takes_its_songs(pool3):
    redis, (a, b, c) = pool3

    async def go():
        turbo = {"caption": "indie rock", "duration": 10, "model": "acestep-v15-turbo"}
        ids = [await post(a if k % 2 else b, {**turbo, "seed": k}) for k in range(4)]
        found = await all_finished(a, ids)
        async with a.http() as h:
            nobody = await h.post("/v1/songs", json={**SKETCH_SONG, "model": "acestep-v15-xl-sft"})
        return found, nobody

    found, nobody = run(go())
    assert {s["state"] for s in found.values()} == {"done"}, found
    assert {s["node"]["name"] for s in found.values()} == {"charlie"}
    assert all(s["request"]["model"] == TURBO for s in found.values())
    # a model no member has is refused when it is submitted, naming it and who has what
    assert nobody.status_code == 404
    message = nobody.json()["error"]["message"]
    assert "acestep-v15-xl-sft" in message and "no node of the pool has it" in message
    assert "charlie" in message and TURBO in message


def test_a_song_sent_to_one_node_is_made_there(pool3):
    redis, (a, b, c) = pool3

    async def go():
        ids = [await post(a, {**SKETCH_SONG, "seed": k}, node="bravo") for k in range(3)]
        return await all_finished(c, ids)

    found = run(go())
    assert {s["node"]["name"] for s in found.values()} == {"bravo"}

    async def unknown():
        async with a.http() as h:
            return await h.post("/v1/songs", json=SKETCH_SONG, params={"node": "zulu"})

    r = run(unknown())
    assert r.status_code == 422 and r.json()["error"]["field"] == "node"


def test_the_pools_settings_are_local_only(pool3):
    redis, (a, _b, _c) = pool3

    async def go():
        async with a.http() as h:
            return [
                await h.patch("/v1/config", json={key: value})
                for key, value in (
                    ("pool.url", "redis://evil.example:6379/0"),
                    ("pool.advertise", "http://evil.example:7823"),
                    ("pool.shared_songs", True),
                )
            ]

    for r in run(go()):
        assert r.status_code == 403 and r.json()["error"]["type"] == "local_only_setting"


async def _running_on(member: PoolNode, song_id: str, timeout: float = 60.0) -> dict:
    """The song once ``member`` runs it and its engine has made progress."""
    deadline = time.monotonic() + timeout
    while True:
        s = await song(member, song_id)
        if s["state"] == "running" and (s.get("node") or {}).get("name") == member.name:
            if s["progress"] > 0:
                return s
        if s["state"] in ("done", "failed", "cancelled") or time.monotonic() > deadline:
            raise AssertionError(f"song {song_id} never ran on {member.name}: {s}")
        await asyncio.sleep(0.05)


def test_a_node_killed_mid_song_leaves_it_to_another_that_makes_it_once(pool3):
    redis, (a, b, c) = pool3

    async def go():
        song_id = await post(a, {**SKETCH_SONG, "caption": "killed mid song"}, node="bravo")
        # sent to bravo's lane: bravo takes it; once it runs there, kill -9 bravo
        await _running_on(b, song_id)
        b.kill9()
        # bravo's own lane is bravo's: the song waits, saying why, until bravo is back
        s = await song(a, song_id)
        await b.restart()
        found = await all_finished(a, [song_id])
        return song_id, s, found[song_id]

    song_id, meanwhile, done = run(go())
    assert done["state"] == "done" and done["node"]["name"] == "bravo"
    assert done["attempts"] == 2 and len(done["takes"]) == 1
    assert [s["id"] for s in sidecars(b.songs_dir)].count(song_id) == 1
    assert meanwhile["state"] == "running"  # the record still held by the dead node


def test_a_song_held_by_a_dead_node_is_taken_over_after_the_lease(pool3):
    redis, (a, b, c) = pool3

    async def go():
        # a model lane that every member reads: whoever runs it is killed; another takes it
        song_id = await post(a, {**SKETCH_SONG, "caption": "taken over", "duration": 20})
        deadline = time.monotonic() + 60
        while True:
            s = await song(a, song_id)
            if s["state"] == "running" and s.get("node") and s["progress"] > 0:
                break
            assert time.monotonic() < deadline, s
            await asyncio.sleep(0.05)
        victim = next(m for m in (a, b, c) if m.name == s["node"]["name"])
        others = [m for m in (a, b, c) if m is not victim]
        victim.kill9()
        found = await all_finished(others[0], [song_id])
        await victim.restart()
        return song_id, victim, found[song_id]

    song_id, victim, done = run(go())
    assert done["state"] == "done" and done["node"]["name"] != victim.name
    assert done["attempts"] == 2 and len(done["takes"]) == 1
    made = [(m.name, s["id"]) for m in pool3[1] for s in sidecars(m.songs_dir)]
    assert [n for n, i in made if i == song_id] == [done["node"]["name"]]


def test_a_frozen_node_that_comes_back_late_adds_no_second_take(pool3):
    """SIGSTOP the node making a song for longer than the lease: another member takes the
    song over and makes it; when the frozen node wakes, its late result is refused by the
    fence (the attempt is no longer its own) and it keeps no file of it."""
    redis, members = pool3

    async def go():
        song_id = await post(members[0], {**SKETCH_SONG, "caption": "frozen node"})
        deadline = time.monotonic() + 60
        while True:
            s = await song(members[0], song_id)
            if s["state"] == "running" and s.get("node") and s["progress"] > 0:
                break
            assert time.monotonic() < deadline, s
            await asyncio.sleep(0.05)
        frozen = next(m for m in members if m.name == s["node"]["name"])
        other = next(m for m in members if m is not frozen)
        os.kill(frozen.pid, signal.SIGSTOP)
        try:
            found = await all_finished(other, [song_id])
        finally:
            os.kill(frozen.pid, signal.SIGCONT)
        await asyncio.sleep(3.0)  # the woken node's lease check and late result
        return song_id, frozen, found[song_id], await song(frozen, song_id)

    song_id, frozen, done, seen_by_frozen = run(go())
    assert done["state"] == "done" and done["node"]["name"] != frozen.name
    assert done["attempts"] == 2 and len(done["takes"]) == 1
    assert [x for x in sidecars(frozen.songs_dir) if x["id"] == song_id] == []
    assert seen_by_frozen["node"]["name"] == done["node"]["name"]
    assert len(seen_by_frozen["takes"]) == 1

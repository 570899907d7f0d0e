"""A pool of three real nodes behind a real redis-server (password, append-only file), each
with its own CANTOR_HOME and Sketch engines: the queue, the records and the events shared;
the pool's token and Redis's password; a node frozen or killed mid-song; Redis killed and
restarted. The long runs (60 songs, a node's own song across its restart) are in
tests/faults/test_pool_faults.py; figures in bench/pool.py."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from support.pool_nodes import (
    TURBO,
    PoolNode,
    ThreeNodePool,
    all_finished,
    audio_digest,
    post,
    sidecars,
    song,
    wait_pool_state,
)
from support.redis_server import require

from cantor_desktop.cli.pool_cmd import render
from cantor_desktop.client.node_process import NodeStartError

SKETCH_SONG = {"caption": "lofi piano rain", "duration": 10, "model": "sketch"}
FINISHED = ("done", "failed", "cancelled")


def run(coro):
    return asyncio.run(coro)


# the tests share one pool (pool3) and build on its songs: one xdist worker runs them all
pytestmark = pytest.mark.xdist_group("test_pool")


@pytest.fixture(scope="module")
def pool3(tmp_path_factory):
    """Redis and three members: alpha and bravo make Sketch songs, charlie ACE-Step too."""
    require()
    with ThreeNodePool(tmp_path_factory.mktemp("pool3")) as (redis, members):
        yield redis, members


async def _events(member: PoolNode, into: list, ready: asyncio.Event) -> None:
    """Every event ``member`` streams on /v1/events (an app connected to it)."""
    async with member.http() as h, h.stream("GET", "/v1/events", timeout=None) as r:
        kind = None
        async for line in r.aiter_lines():
            if line.startswith("event: "):
                kind = line[7:]
                if kind == "hello":
                    ready.set()
            elif line.startswith("data: ") and kind:
                into.append((kind, json.loads(line[6:])))


async def _listed(member: PoolNode) -> dict[str, dict]:
    async with member.http() as h:
        r = await h.get("/v1/songs", params={"limit": 100000})
    assert r.status_code == 200, r.text
    return {s["id"]: s for s in r.json()["songs"]}


def _made_where(members: list[PoolNode], ids) -> list[tuple[str, str]]:
    """(member name, song id) of every take file of ``ids`` in the whole pool."""
    return [(m.name, s["id"]) for m in members for s in sidecars(m.songs_dir) if s["id"] in ids]


def test_songs_posted_to_every_member_are_each_made_once_and_heard_from_every_member(pool3):
    _redis, members = pool3

    async def go():
        seen: list = []
        ready = asyncio.Event()
        listener = asyncio.ensure_future(_events(members[0], seen, ready))
        await asyncio.wait_for(ready.wait(), 30)
        ids = []
        for k in range(9):
            body = {**SKETCH_SONG, "caption": f"lofi piano rain {k}", "seed": k}
            ids.append(await post(members[k % 3], body))
        found = await all_finished(members[1], ids)
        while not set(ids) <= {d["id"] for kind, d in seen if kind == "done"}:
            await asyncio.sleep(0.1)  # the last "done" may still be on its way to alpha
        listener.cancel()
        digests = {}
        for song_id in ids:
            for m in members:
                digests.setdefault(song_id, set()).add(await audio_digest(m, song_id))
        listed = [await _listed(m) for m in members]
        return ids, found, seen, digests, listed

    ids, found, seen, digests, listed = run(go())
    assert {s["state"] for s in found.values()} == {"done"}
    assert all(len(s["takes"]) == 1 and s["attempts"] == 1 for s in found.values())
    assert {s["node"]["name"] for s in found.values()} == {"alpha", "bravo", "charlie"}
    # each song made once: one take file in the whole pool, on the member its record names
    written = _made_where(members, ids)
    assert sorted(i for _n, i in written) == sorted(ids)
    assert all(found[i]["node"]["name"] == n for n, i in written)
    # the same bytes from every member (two of the three fetch it from its maker)
    assert all(len(d) == 1 and next(iter(d))[0] == 200 for d in digests.values())
    # every member lists every song of the pool, with the member that made each take
    for songs in listed:
        assert set(ids) <= set(songs)
        assert all(songs[i]["node"]["name"] == found[i]["node"]["name"] for i in ids)
    # an app connected to alpha saw every song end, whoever made it
    assert set(ids) <= {d["id"] for kind, d in seen if kind == "done"}


def test_a_member_without_the_model_never_takes_its_songs(pool3):
    _redis, (a, b, _c) = pool3

    async def go():
        turbo = {"caption": "indie rock", "duration": 10, "model": "acestep-v15-turbo"}
        ids = [await post(a if k % 2 else b, {**turbo, "seed": k}) for k in range(2)]
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


def test_a_song_sent_to_one_member_is_made_there(pool3):
    _redis, (a, _b, c) = pool3

    async def go():
        ids = [await post(a, {**SKETCH_SONG, "seed": k}, node="bravo") for k in range(2)]
        found = await all_finished(c, ids)
        async with a.http() as h:
            unknown = await h.post("/v1/songs", json=SKETCH_SONG, params={"node": "zulu"})
        return found, unknown

    found, unknown = run(go())
    assert {s["node"]["name"] for s in found.values()} == {"bravo"}
    assert unknown.status_code == 422 and unknown.json()["error"]["field"] == "node"


def test_the_pools_settings_are_local_only(pool3):
    _redis, (a, _b, _c) = pool3

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


def _pool_status(home, redis, password: str, *extra: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "CANTOR_HOME": str(home),
        "CANTOR_POOL_URL": redis.url,
        "CANTOR_POOL_PASSWORD": password,
    }
    return subprocess.run(
        [sys.executable, "-m", "cantor_desktop", "pool", "status", *extra],
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_pool_status_shows_every_member_and_needs_redis_password(pool3, tmp_path):
    redis, _members = pool3
    ok = _pool_status(tmp_path, redis, redis.password, "--json")
    assert ok.returncode == 0, ok.stderr
    status = json.loads(ok.stdout)
    alive = {m["name"] for m in status["members"] if m["alive"]}
    assert alive == {"alpha", "bravo", "charlie"}
    charlie = next(m for m in status["members"] if m["name"] == "charlie")
    assert TURBO in charlie["models"] and "sketch" in charlie["models"]
    assert isinstance(status["songs"], dict) and isinstance(status["lanes"], list)
    text = render(status)  # what `cantor pool status` prints without --json
    assert "members (3 alive)" in text
    assert all(f"  {name} [" in text for name in ("alpha", "bravo", "charlie"))
    # Redis's password is needed, and a wrong one is said so (never echoed)
    wrong = _pool_status(tmp_path, redis, "not-the-password")
    assert wrong.returncode == 1
    assert "pool unreachable" in wrong.stderr and "Redis refused" in wrong.stderr
    assert "not-the-password" not in wrong.stderr + wrong.stdout


def test_a_node_without_the_pools_token_is_refused(pool3, tmp_path):
    redis, members = pool3
    stranger = PoolNode(redis, tmp_path / "x", "xray", token="a-token-of-its-own-0123456789")

    with pytest.raises(NodeStartError) as refused:
        run(stranger.start())
    assert "not the token of the pool" in str(refused.value)
    assert stranger.node.proc.proc.poll() is not None  # it exited: it never took a song

    async def go():
        song_id = await post(
            members[0], {**SKETCH_SONG, "seed": 212}
        )  # its own: xdist may run it first
        await all_finished(members[0], [song_id])
        async with stranger.http() as h:  # its token opens no member's door
            return [(await h.get(f"{m.url}/v1/songs/{song_id}/audio")).status_code for m in members]

    async def pool_members():
        async with members[0].http() as h:
            return {m["name"] for m in (await h.get("/v1/pool")).json()["members"]}

    assert run(go()) == [401, 401, 401]
    assert "xray" not in run(pool_members())


async def _running_somewhere(member: PoolNode, song_id: str, timeout: float = 60.0) -> dict:
    """The song once a member runs it and its engine has made progress."""
    deadline = time.monotonic() + timeout
    while True:
        s = await song(member, song_id)
        if s["state"] == "running" and s.get("node") and s["progress"] > 0:
            return s
        assert s["state"] not in FINISHED and time.monotonic() < deadline, s
        await asyncio.sleep(0.05)


async def _one_running(member: PoolNode, ids: list[str], timeout: float = 60.0) -> None:
    """Once one of ``ids`` runs somewhere (and some are not done yet)."""
    deadline = time.monotonic() + timeout
    while True:
        songs = await _listed(member)
        states = [songs[i]["state"] for i in ids]
        if "running" in states:
            return
        assert any(s not in FINISHED for s in states) and time.monotonic() < deadline, states
        await asyncio.sleep(0.02)


def test_a_frozen_member_that_comes_back_late_adds_no_second_take(pool3):
    """SIGSTOP the member making a song for longer than the lease: another takes the song
    over and makes it; when the frozen one wakes, its late result is refused by the fence
    (the attempt is no longer its own) and it keeps no file of it."""
    _redis, members = pool3

    async def go():
        song_id = await post(members[0], {**SKETCH_SONG, "caption": "frozen node"})
        s = await _running_somewhere(members[0], song_id)
        frozen = next(m for m in members if m.name == s["node"]["name"])
        other = next(m for m in members if m is not frozen)
        os.kill(frozen.pid, signal.SIGSTOP)
        try:
            found = await all_finished(other, [song_id])
        finally:
            os.kill(frozen.pid, signal.SIGCONT)
        # the woken member finishes its engine's job and is refused: wait until it has
        # given the song up (its record mirrors the pool's again)
        deadline = time.monotonic() + 30
        while True:
            mine = await song(frozen, song_id)
            if mine["state"] == "done" and mine["node"]["name"] == found[song_id]["node"]["name"]:
                break
            assert time.monotonic() < deadline, mine
            await asyncio.sleep(0.1)
        return song_id, frozen, found[song_id], mine

    song_id, frozen, done, seen_by_frozen = run(go())
    assert done["state"] == "done" and done["node"]["name"] != frozen.name
    assert done["attempts"] == 2 and len(done["takes"]) == 1
    assert len(seen_by_frozen["takes"]) == 1
    assert _made_where(members, {song_id}) == [(done["node"]["name"], song_id)]


async def _finished_while_away(members: list[PoolNode], ids, timeout: float = 60.0) -> str:
    """A song of ``ids`` that its maker finished while Redis is away: done in the maker's
    own list, not in the others' (they cannot learn it before Redis is back)."""
    deadline = time.monotonic() + timeout
    while True:
        listed = {m.name: await _listed(m) for m in members}
        for song_id in ids:
            done_on = [n for n, songs in listed.items() if songs[song_id]["state"] == "done"]
            if len(done_on) == 1 and listed[done_on[0]][song_id]["node"]["name"] == done_on[0]:
                return song_id
        assert time.monotonic() < deadline, "no song finished while Redis was away"
        await asyncio.sleep(0.05)


def _view(songs: dict[str, dict]) -> dict[str, tuple]:
    return {
        i: (s["state"], (s.get("node") or {}).get("name"), s["title"]) for i, s in songs.items()
    }


async def _agreed(members: list[PoolNode], ids, timeout: float = 60.0) -> list[dict]:
    """Every member's finished songs ``ids`` once all members show them alike (a change that
    landed on Redis reaches the others through the event stream, a moment later), or what
    they show at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        mirrors = [await all_finished(m, ids) for m in members]
        if all(_view(m) == _view(mirrors[0]) for m in mirrors) or time.monotonic() > deadline:
            return mirrors
        await asyncio.sleep(0.1)


def test_redis_killed_and_restarted_loses_no_song_and_members_reconnect(pool3):
    """Redis killed -9 while songs run and restarted from its append-only file: a song
    finished meanwhile is written when Redis is back (not made again), and every member's
    list shows every song finished, its maker's included (a member that reloaded the
    records before its own "done" landed once kept the older "running" record for good)."""
    redis, members = pool3

    async def go():
        ids = [
            await post(members[k % 3], {**SKETCH_SONG, "caption": f"outage {k}", "seed": 100 + k})
            for k in range(6)
        ]
        await _one_running(members[0], ids)
        redis.kill9()
        for m in members:
            away = await wait_pool_state(m, "unreachable")
            assert away["error"]
        # meanwhile: every member still lists the pool's songs (its mirror) and says why a
        # new song cannot be queued now
        listed = [set(ids) <= set(await _listed(m)) for m in members]
        async with members[1].http() as h:
            refused = await h.post("/v1/songs", json=SKETCH_SONG)
            renamed = await h.patch(f"/v1/songs/{ids[0]}", json={"title": "renamed offline"})
        assert renamed.status_code == 200, renamed.text  # kept, sent when Redis is back
        await _finished_while_away(members, ids)
        redis.start()  # the same folder and port: the append-only file comes back
        for m in members:
            await wait_pool_state(m, "connected")
        found = await all_finished(members[2], ids)
        mirrors = await _agreed(members, ids)
        return ids, listed, refused, found, mirrors

    ids, listed, refused, found, mirrors = run(go())
    assert listed == [True, True, True]
    assert refused.status_code == 503
    assert refused.json()["error"]["type"] == "pool_unreachable"
    assert "pool unreachable" in refused.json()["error"]["message"]
    assert {s["state"] for s in found.values()} == {"done"}, found
    assert all(len(s["takes"]) == 1 for s in found.values())
    written = _made_where(members, set(ids))
    assert sorted(i for _n, i in written) == sorted(ids)  # each made once, none lost
    # no member's work was taken from it by the outage: a song finished while Redis was
    # away is written when it is back, not made again elsewhere
    assert all(s["attempts"] == 1 for s in found.values()), found
    # and every member's view of the pool is the same again (its own songs and its own
    # changes made while Redis was away included)
    for mirror in mirrors:
        assert _view(mirror) == _view(mirrors[0])
    assert {i: v[:2] for i, v in _view(mirrors[0]).items()} == {
        i: v[:2] for i, v in _view(found).items()
    }
    assert all(m[ids[0]]["title"] == "renamed offline" for m in mirrors)


def test_a_member_killed_mid_song_leaves_it_to_another_after_the_lease(pool3):
    """kill -9 of the member making a song (its engine dies with it): after the lease the
    song is claimed by another member and made there, once."""
    _redis, members = pool3

    async def go():
        song_id = await post(members[0], {**SKETCH_SONG, "caption": "taken over"})
        s = await _running_somewhere(members[0], song_id)
        victim = next(m for m in members if m.name == s["node"]["name"])
        others = [m for m in members if m is not victim]
        victim.kill9()
        found = await all_finished(others[0], [song_id])
        return song_id, victim, found[song_id], await song(others[1], song_id)

    song_id, victim, done, seen_elsewhere = run(go())
    assert done["state"] == "done" and done["node"]["name"] != victim.name
    assert done["attempts"] == 2 and len(done["takes"]) == 1
    assert seen_elsewhere["node"] == done["node"]
    assert _made_where(members, {song_id}) == [(done["node"]["name"], song_id)]

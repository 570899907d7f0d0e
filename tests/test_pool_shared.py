"""A pool whose members write their takes to one shared songs folder (``songs.dir`` on a
share, ``pool.shared_songs = true``): three real nodes on one real redis-server, all with
the same ``songs.dir``. Each song is made once, into that folder; its record says so; every
member serves every take from the folder, even with the maker gone; no member's take is
overwritten by another's (the same caption and seed, finished in the same minute by
several members) or deleted with another song."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import pytest
from support.pool_nodes import (
    PoolNode,
    all_finished,
    audio_digest,
    post,
    sidecars,
    start_all,
    wait_members,
)
from support.redis_server import RedisServer, require

# on the worker of test_pool's pool: one pool of nodes starts its engines at a time
pytestmark = pytest.mark.xdist_group("test_pool")

# the same caption and seed for every song: the same file name, minute after minute
SAME = {"caption": "shared folder hymn", "duration": 10, "model": "sketch", "seed": 7}


@pytest.fixture(scope="module")
def shared_pool(tmp_path_factory):
    """Redis and three members (echo, foxtrot, golf) sharing one songs folder."""
    require()
    base = tmp_path_factory.mktemp("shared")
    folder = base / "share" / "songs"
    redis = RedisServer(base / "redis").start()
    members = [
        PoolNode(redis, base / name, name, shared_songs=folder)
        for name in ("echo", "foxtrot", "golf")
    ]
    try:
        asyncio.run(start_all(members))
        asyncio.run(wait_members(members[0], 3))
        yield redis, members, folder
    finally:

        async def stop():
            for m in members:
                if m.node.proc.proc is not None and m.node.proc.proc.poll() is None:
                    await m.stop()

        try:
            asyncio.run(stop())
        finally:
            redis.stop()


def _files(folder: Path) -> dict[str, list[dict]]:
    """Song id → the sidecars of its takes found in the folder."""
    out: dict[str, list[dict]] = {}
    for meta in sidecars(folder):
        out.setdefault(meta["id"], []).append(meta)
    return out


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_members_write_every_take_once_into_the_shared_folder(shared_pool):
    _redis, members, folder = shared_pool

    async def go():
        ids = [await post(members[k % 3], SAME) for k in range(9)]  # three at once on each
        found = await all_finished(members[0], ids)
        heard = {i: {await audio_digest(m, i) for m in members} for i in ids}
        return ids, found, heard

    ids, found, heard = run(go())
    assert {s["state"] for s in found.values()} == {"done"}, found
    assert {s["node"]["name"] for s in found.values()} == {"echo", "foxtrot", "golf"}
    on_disk = _files(folder)
    for song_id, s in found.items():
        # the record says where: made by which member, into the shared folder
        assert s["node"]["shared"] is True
        assert len(s["takes"]) == 1 and s["attempts"] == 1
        audio = Path(s["takes"][0]["audio"])
        assert audio.parent == folder and audio.is_file()
        # its files: one take in the folder, its sidecar naming this song, beside its audio
        assert [m["audio"]["file"] for m in on_disk[song_id]] == [audio.name]
        # every member serves the same bytes, the file's
        assert heard[song_id] == {(200, _sha(audio))}
    # nine songs, nine audio files: no member overwrote another's take of the same name
    paths = [s["takes"][0]["audio"] for s in found.values()]
    assert len(set(paths)) == len(ids) == len(set(ids) & set(on_disk))
    assert not any(p.name.endswith(".tmp") for p in folder.iterdir())


def test_a_take_on_the_shared_folder_is_heard_with_its_maker_gone_and_deleted_alone(
    shared_pool,
):
    _redis, members, folder = shared_pool
    maker = members[2]

    async def go():
        mine = await post(maker, SAME, node=maker.name)
        other = await post(members[0], SAME, node=members[0].name)
        found = await all_finished(members[0], [mine, other])
        await maker.stop()  # the member that made it leaves the pool
        try:
            heard = await audio_digest(members[1], mine)
            async with members[1].http() as h:
                deleted = await h.delete(f"/v1/songs/{mine}", params={"delete_files": "true"})
        finally:
            await maker.restart()
            await wait_members(members[0], 3)
        return mine, other, found, heard, deleted.json()

    mine, other, found, heard, deleted = run(go())
    audio = Path(found[mine]["takes"][0]["audio"])
    assert found[mine]["node"]["name"] == maker.name and audio.parent == folder
    assert heard[0] == 200  # served from the folder by a member that did not make it
    # deleted by another member: its files, and nothing of any other song
    assert deleted["forgotten"] is True and str(audio) in deleted["files_deleted"]
    assert not audio.exists() and mine not in _files(folder)
    assert Path(found[other]["takes"][0]["audio"]).is_file() and other in _files(folder)


def run(coro):
    return asyncio.run(coro)

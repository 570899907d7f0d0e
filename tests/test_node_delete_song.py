"""DELETE /v1/songs/{id} against a real node and the sketch engine: forget a finished song,
optionally with its files; 409 while queued or running; the queue file follows."""

from __future__ import annotations

from cantor_desktop.song.record import Take

import asyncio
import json
from pathlib import Path

import pytest

from cantor_desktop.node.queue import SongQueue
from cantor_desktop.client.nodeclient import NodeError

from support.node import LONG, SHORT, Node, collect, until_state, write_config


def on_disk(home: Path) -> set[str]:
    return {s["id"] for s in json.loads((home / "state" / "queue.json").read_text())["songs"]}


def test_delete_finished_songs_with_and_without_files_and_refuse_live_ones(cantor_home):
    write_config(cantor_home)

    async def main():
        node = await Node(cantor_home).start()
        try:
            async with node.client() as c:
                keep = await c.submit_song({**SHORT, "seed": 1})
                wipe = await c.submit_song({**SHORT, "seed": 2, "batch": 2})
                await collect(c, keep)
                await collect(c, wipe)
                keep_song, wipe_song = await c.song(keep), await c.song(wipe)

                running = await c.submit_song(LONG)
                queued = await c.submit_song(SHORT)
                await until_state(c, running, ("running",), 20)
                refused = []
                for sid in (running, queued):
                    with pytest.raises(NodeError) as err:
                        await c.delete_song(sid, delete_files=True)
                    refused.append(err.value)
                with pytest.raises(NodeError) as unknown:
                    await c.delete_song("0123456789abcdef")

                kept = await c.delete_song(keep)
                wiped = await c.delete_song(wipe, delete_files=True)
                after_delete = on_disk(cantor_home)
                with pytest.raises(NodeError) as again:
                    await c.song(keep)

                await c.cancel(queued)
                await c.cancel(running)
                await until_state(c, running, ("cancelled",), 20)
                cancelled = await c.delete_song(running, delete_files=True)
                history = [s["id"] for s in await c.songs()]
        finally:
            await node.stop()
        restarted = await Node(cantor_home).start()  # the deletion survives a restart
        try:
            async with restarted.client() as c:
                history_after_restart = [s["id"] for s in await c.songs()]
        finally:
            await restarted.stop()
        return (
            keep,
            wipe,
            running,
            queued,
            keep_song,
            wipe_song,
            refused,
            unknown.value,
            kept,
            wiped,
            after_delete,
            again.value,
            cancelled,
            history,
            history_after_restart,
        )

    (
        keep,
        wipe,
        running,
        queued,
        keep_song,
        wipe_song,
        refused,
        unknown,
        kept,
        wiped,
        after_delete,
        again,
        cancelled,
        history,
        history_after_restart,
    ) = asyncio.run(main())

    assert [e.status for e in refused] == [409, 409]
    assert "cancel it first" in refused[0].message and refused[0].field == "id"
    assert unknown.status == 404

    assert kept == {"id": keep, "forgotten": True, "files_deleted": [], "files_kept": []}
    for take in keep_song["takes"]:  # without delete_files: still there
        assert Path(take["audio"]).is_file() and Path(take["sidecar"]).is_file()

    assert len(wipe_song["takes"]) == 2
    expected = {p for take in wipe_song["takes"] for p in (take["audio"], take["sidecar"])}
    assert set(wiped["files_deleted"]) == expected and wiped["files_kept"] == []
    assert not any(Path(p).exists() for p in expected)

    assert keep not in after_delete and wipe not in after_delete
    assert running in after_delete
    assert again.status == 404
    assert cancelled["forgotten"] is True and cancelled["files_deleted"] == []
    assert history == [queued]
    assert history_after_restart == [queued]


def test_files_now_belonging_to_another_song_are_kept(cantor_home):
    """The user deleted a song's files and a newer song took the same name: deleting the old
    record's files must not delete the new song's."""
    from cantor_desktop.node.song_files import delete_takes

    (cantor_home / "songs").mkdir()
    audio = cantor_home / "songs" / "2026-11-30_1200_song_seed1.wav"
    sidecar = audio.with_suffix(".json")
    audio.write_bytes(b"RIFF new song")
    sidecar.write_text(json.dumps({"id": "newer", "take": 1, "audio": {"file": audio.name}}))
    old = [Take(n=1, audio=str(audio), sidecar=str(sidecar))]
    assert delete_takes("older", old) == {"deleted": [], "kept": [str(audio), str(sidecar)]}
    assert audio.exists() and sidecar.exists()
    assert delete_takes("newer", old) == {"deleted": [str(audio), str(sidecar)], "kept": []}
    assert not audio.exists() and not sidecar.exists()


def test_forget_only_finished_songs_and_save(tmp_path):
    path = tmp_path / "queue.json"
    q = SongQueue(path)
    a, b = q.add({"caption": "a"}), q.add({"caption": "b"})
    with pytest.raises(ValueError):
        q.forget(a)
    q.start(a)
    q.finish_failed(a, "boom")
    q.forget(a)
    assert q.get(a.id) is None
    again = SongQueue(path)
    again.load()
    assert [s.id for s in again.newest_first()] == [b.id]


def test_a_deleted_song_leaves_the_list_only_once_its_files_are_gone(cantor_home):
    """Whoever sees the song gone (the list, the answer) finds its files gone too."""
    write_config(cantor_home)

    async def main():
        node = await Node(cantor_home).start()
        seen_with_files = []
        try:
            async with node.client() as c:
                for seed in range(5):
                    sid = await c.submit_song({**SHORT, "seed": seed, "batch": 4})
                    await collect(c, sid)
                    files = [
                        p
                        for take in (await c.song(sid))["takes"]
                        for p in (take["audio"], take["sidecar"])
                    ]

                    async def watch():
                        while True:
                            if not any(s["id"] == sid for s in await c.songs()):
                                return [f for f in files if Path(f).exists()]

                    watcher = asyncio.create_task(watch())
                    await asyncio.sleep(0)
                    answer = await c.delete_song(sid, delete_files=True)
                    seen_with_files.append(await asyncio.wait_for(watcher, 10))
                    assert sorted(answer["files_deleted"]) == sorted(files)
                    assert not any(Path(f).exists() for f in files)
        finally:
            await node.stop()
        return seen_with_files

    assert asyncio.run(main()) == [[]] * 5

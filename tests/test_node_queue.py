"""The song queue's records on disk: order, persistence, "node stopped", retry, SSE parsing."""

from __future__ import annotations

import asyncio
import json

from cantor_desktop.node.queue import (
    CANCELLED,
    DONE,
    FAILED,
    NODE_STOPPED,
    QUEUED,
    RUNNING,
    SongQueue,
)
from cantor_desktop.node.song_files import base_name, encode, slug, wav_header
from cantor_desktop.client.nodeclient import parse_sse


def test_songs_survive_a_reload_and_running_becomes_node_stopped(tmp_path):
    path = tmp_path / "queue.json"
    q = SongQueue(path)
    a = q.add({"caption": "a"})
    b = q.add({"caption": "b"})
    c = q.add({"caption": "c"})
    q.start(a)
    q.finish_done(a, [{"audio": "x.wav"}])
    q.start(b)
    assert [s.id for s in q.queued()] == [c.id]

    again = SongQueue(path)
    stopped = again.load()
    assert [s.id for s in stopped] == [b.id]
    assert again.get(a.id).state == DONE
    assert again.get(b.id).state == FAILED and again.get(b.id).error == NODE_STOPPED
    assert again.get(c.id).state == QUEUED
    assert [s.id for s in again.newest_first()] == [c.id, b.id, a.id]
    # the file on disk already says failed: a second crash does not resurrect it
    on_disk = {s["id"]: s["state"] for s in json.loads(path.read_text())["songs"]}
    assert on_disk[b.id] == FAILED

    again.retry(again.get(b.id))
    assert [s.id for s in again.queued()] == [c.id, b.id]  # back of the queue, same id
    assert again.get(b.id).error is None


def test_a_damaged_queue_file_is_kept_aside_not_fatal(tmp_path):
    path = tmp_path / "queue.json"
    path.write_text("{not json")
    q = SongQueue(path)
    assert q.load() == []
    assert (tmp_path / "queue.damaged").exists()
    q.add({"caption": "after"})
    fresh = SongQueue(path)
    fresh.load()
    assert [s.request["caption"] for s in fresh.songs.values()] == ["after"]


def test_late_subscriber_snapshot_and_live_events(tmp_path):
    async def main():
        q = SongQueue(tmp_path / "q.json")
        song = q.add({"caption": "x"})
        assert [e.to_sse() for e in q.snapshot_events(song)] == [
            ("queued", {"id": song.id, "position": 0})
        ]
        sub = q.hub.subscribe(song.id)
        q.start(song)
        q.set_stage(song, "synth", 0.0)
        q.set_progress(song, 0.5, 3.0)
        q.set_progress(song, 0.4, 3.0)  # never backwards: no event
        snap = q.snapshot_events(song)
        assert (snap[0].kind, snap[0].stage) == ("stage", "synth")
        assert snap[1].to_sse()[1]["progress"] == 0.5
        q.finish_cancelled(song)
        events = []
        while not sub.empty():
            events.append(sub.get_nowait())
        assert [e.kind for e in events] == ["stage", "progress", "progress", CANCELLED]
        final = q.snapshot_events(song)
        assert [e.kind for e in final] == [CANCELLED] and final[0].song is song
        assert song.state not in (QUEUED, RUNNING)

    asyncio.run(main())


def test_sse_parser_handles_comments_multiline_and_plain_text():
    async def lines():
        for line in [
            ": keep-alive",
            "",
            "event: progress",
            'data: {"progress":',
            "data: 0.5}",
            "",
            "data: hello",
            "",
            "event: done",
            'data: {"id":"1"}',
            "",
        ]:
            yield line

    async def main():
        return [item async for item in parse_sse(lines())]

    assert asyncio.run(main()) == [
        ("progress", {"progress": 0.5}),
        ("message", "hello"),
        ("done", {"id": "1"}),
    ]


def test_file_names_are_readable():
    assert slug("Warm Lo-Fi piano, rain & vinyl crackle at night") == "warm-lo-fi-piano-rain-vinyl"
    assert slug("Ça été très ÉLÉGANT") == "ca-ete-tres-elegant"
    assert slug("!!!") == "song"
    assert len(slug("0" * 5000)) == 60 and len(slug("ab " * 3000)) <= 60
    name = base_name("Lofi piano", 42, 0.0, take=2)
    assert name.endswith("_lofi-piano_seed42_take2") and name[:4].isdigit()


def test_encode_converts_wav_to_flac_and_mp3():
    import io

    import numpy as np
    import soundfile as sf

    tone = np.sin(np.linspace(0, 2000, 48000, dtype=np.float32))[:, None].repeat(2, 1) * 0.5
    buf = io.BytesIO()
    sf.write(buf, tone, 48000, format="WAV", subtype="PCM_24")
    wav = buf.getvalue()
    assert encode(wav, "wav24") is wav  # as the engine gave it
    for fmt, subtype in (("wav16", "PCM_16"), ("wav24", "PCM_24"), ("wav32", "FLOAT")):
        out = io.BytesIO()
        sf.write(out, tone, 48000, format="WAV", subtype=subtype)
        data = out.getvalue()
        head = wav_header(data)
        assert (head["bits"], head["sample_rate"], head["channels"], head["duration"]) == (
            int(fmt[3:]),
            48000,
            2,
            1.0,
        )
        assert encode(data, fmt) is data  # no conversion when it already fits
    assert wav_header(b"RIFF\0\0\0\0WAVEjunk") is None
    assert sf.info(io.BytesIO(encode(wav, "wav16"))).subtype == "PCM_16"
    flac = encode(wav, "flac")
    assert flac[:4] == b"fLaC" and sf.info(io.BytesIO(flac)).frames == 48000
    mp3 = encode(wav, "mp3")
    assert sf.info(io.BytesIO(mp3)).format == "MP3"


def test_history_is_trimmed_oldest_finished_first_never_a_queued_song(tmp_path, monkeypatch):
    import cantor_desktop.node.queue as queue_mod

    monkeypatch.setattr(queue_mod, "KEEP_FINISHED", 3)
    q = SongQueue(tmp_path / "q.json")
    waiting = q.add({"caption": "waiting"})
    done = []
    for i in range(5):
        s = q.add({"caption": f"s{i}"})
        q.start(s)
        q.finish_done(s, [])
        done.append(s.id)
    again = SongQueue(tmp_path / "q.json")
    again.load()
    assert set(again.songs) == {waiting.id, *done[-3:]}
    assert again.get(waiting.id).state == QUEUED


def test_waiting_subscribers_hear_their_new_position(tmp_path):
    async def main():
        q = SongQueue(tmp_path / "q.json")
        first, second, third = (q.add({"caption": c}) for c in "abc")
        sub = q.hub.subscribe(third.id)
        q.start(first)
        q.finish_done(first, [])
        q.start(second)
        await q.flush()
        got = []
        while not sub.empty():
            got.append(sub.get_nowait().to_sse())
        return got, third.id

    got, third_id = asyncio.run(main())
    assert got == [
        ("queued", {"id": third_id, "position": 1}),
        ("queued", {"id": third_id, "position": 0}),
    ]

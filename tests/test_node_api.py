"""The node's API against a real node process and the real sketch engine, on 127.0.0.1."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from pathlib import Path

import pytest
import soundfile as sf

from cantor_desktop.client.nodeclient import NodeError

from support.node import LONG, SHORT, Node, collect, until_state, write_config


@pytest.fixture
def home(cantor_home) -> Path:
    write_config(cantor_home)
    return cantor_home


def run(coro):
    return asyncio.run(coro)


def _check_progress(events):
    """Progress never goes down, ends at 1 before ``done``, and eta is a number or None."""
    values = [d["progress"] for e, d in events if e == "progress"]
    assert values == sorted(values)
    assert values[-1] == 1.0
    names = [e for e, _ in events]
    assert names[-1] == "done"
    assert names.index("done") > max(
        i for i, (e, d) in enumerate(events) if e == "progress" and d["progress"] == 1.0
    )


def test_lyrics_take_two_stages_instrumental_one_and_files_are_written(home):
    async def main():
        node = await Node(home).start()
        try:
            async with node.client() as c:
                vocal = await c.submit_song(
                    {
                        **SHORT,
                        "lyrics": "[Verse]\nla la la\nhello night",
                        "seed": 7,
                        "bpm": 96,
                        "key": "a minor",
                    }
                )
                vocal_events = await collect(c, vocal)
                inst = await c.submit_song(
                    {**SHORT, "lyrics": " [INSTRUMENTAL] ", "format": "flac", "batch": 2}
                )
                inst_events = await collect(c, inst)
                return (
                    vocal_events,
                    await c.song(vocal),
                    inst_events,
                    await c.song(inst),
                    await c.songs(),
                )
        finally:
            await node.stop()

    vocal_events, vocal, inst_events, inst, history = run(main())
    stages = [d["stage"] for e, d in vocal_events if e == "stage"]
    assert stages == ["lm", "synth", "saving"]
    _check_progress(vocal_events)
    inst_stages = [d["stage"] for e, d in inst_events if e == "stage"]
    assert inst_stages == ["synth", "saving"]
    _check_progress(inst_events)

    assert vocal["state"] == "done" and len(vocal["takes"]) == 1
    audio = Path(vocal["takes"][0]["audio"])
    assert audio.parent == home / "songs" and audio.suffix == ".wav"
    assert "lofi-piano-rain" in audio.name and "seed7" in audio.name
    assert sf.info(str(audio)).subtype == "PCM_16" and sf.info(str(audio)).samplerate == 48000
    sidecar = json.loads(Path(vocal["takes"][0]["sidecar"]).read_text())
    assert sidecar["seed"] == 7 and sidecar["request"]["key"] == "A minor"
    assert sidecar["engine_request"]["lm_model"] == "sketch-lm.gguf"
    assert sidecar["engine_request"]["synth_model"] == "sketch-dit.gguf"
    assert sidecar["backend"] == "sketch" and sidecar["engine_version"].startswith("sketch-")
    assert sidecar["timings"]["engine_s"] > 0

    assert len(inst["takes"]) == 2  # batch 2 → two takes
    for take in inst["takes"]:
        assert (
            Path(take["audio"]).suffix == ".flac"
            and Path(take["audio"]).read_bytes()[:4] == b"fLaC"
        )
        meta = json.loads(Path(take["sidecar"]).read_text())
        assert meta["engine_request"]["lyrics"] == "[Instrumental]"
        assert "lm_model" not in meta["engine_request"]
    assert [s["id"] for s in history][:2] == [inst["id"], vocal["id"]]  # newest first


def test_late_subscriber_gets_the_current_state_first_and_audio_downloads(home, tmp_path):
    async def main():
        node = await Node(home).start()
        try:
            async with node.client() as c:
                sid = await c.submit_song(SHORT)
                await until_state(c, sid, ("done",))
                late = await collect(c, sid)
                dest = await c.audio(sid, tmp_path)
                return late, dest
        finally:
            await node.stop()

    late, dest = run(main())
    assert [e for e, _ in late] == ["done"]
    assert dest.parent == tmp_path and dest.read_bytes()[:4] == b"RIFF"


def test_cancel_queued_and_running_then_the_queue_goes_on(home):
    async def main():
        node = await Node(home).start()
        try:
            async with node.client() as c:
                running = await c.submit_song(LONG)
                queued = await c.submit_song(SHORT)
                after = await c.submit_song(SHORT)
                assert (await c.cancel(queued))["state"] == "cancelled"

                async def first_progress():
                    async with contextlib.aclosing(c.events(running)) as events:
                        async for event, data in events:
                            if (
                                event == "progress"
                                and data["stage"] == "synth"
                                and data["progress"] > 0.05
                            ):
                                return

                await asyncio.wait_for(first_progress(), 30)
                await c.cancel(running)
                r = await until_state(c, running, ("cancelled", "done", "failed"), 10)
                a = await until_state(c, after, ("done", "failed"), 30)
                with pytest.raises(NodeError) as err:
                    await c.cancel(after)
                return r, await c.song(queued), a, err.value
        finally:
            await node.stop()

    running, queued, after, err = run(main())
    assert running["state"] == "cancelled"
    assert queued["state"] == "cancelled" and queued["started"] is None
    assert after["state"] == "done"
    assert err.status == 409


BAD = [
    ({"caption": ""}, "caption"),
    ({}, "caption"),
    ({"caption": "x", "duration": 9}, "duration"),
    ({"caption": "x", "duration": 601}, "duration"),
    ({"caption": "x", "bpm": 29}, "bpm"),
    ({"caption": "x", "bpm": 301}, "bpm"),
    ({"caption": "x", "key": "H major"}, "key"),
    ({"caption": "x", "time_signature": 5}, "time_signature"),
    ({"caption": "x", "batch": 0}, "batch"),
    ({"caption": "x", "batch": 5}, "batch"),
    ({"caption": "x", "format": "ogg"}, "format"),
    ({"caption": "x", "nope": 1}, "nope"),
    ({"caption": "x", "seed": "abc"}, "seed"),
    ({"caption": "x", "language": "xx"}, "language"),
]


def test_every_bad_input_is_a_4xx_naming_the_field_and_no_engine_runs(home):
    async def main():
        node = await Node(home).start()
        try:
            answers = []
            async with node.http() as http:
                for body, _ in BAD:
                    r = await http.post("/v1/songs", json=body)
                    answers.append((r.status_code, r.json()))
                r = await http.post(
                    "/v1/songs", content=b"{nope", headers={"Content-Type": "application/json"}
                )
                not_json = (r.status_code, r.json())
                r = await http.post("/v1/songs", json={"caption": "x", "model": "acestep-v15-nope"})
                unknown = (r.status_code, r.json())
                r = await http.post("/v1/songs", json=["caption"])
                array = (r.status_code, r.json())
                r = await http.get("/v1/songs/0123456789abcdef")
                missing = (r.status_code, r.json())
                r = await http.patch("/v1/config", json={"node.max_queue": 0})
                bad_config = (r.status_code, r.json())
                r = await http.post("/v1/backends/use", json={"backend": "gpu9"})
                bad_backend = (r.status_code, r.json())
                system = (await http.get("/v1/system")).json()
                songs = (await http.get("/v1/songs")).json()["songs"]
                # a whole number in digits only: "+0.0" and "1e1" read as numbers by a lax
                # parser are not what the document's integer allows
                for query in ({"limit": "+0.0"}, {"limit": "1e1"}, {"limit": "-1"}):
                    r = await http.get("/v1/songs", params=query)
                    answers.append((r.status_code, r.json()))
                r = await http.get("/v1/songs/0123456789abcdef/audio", params={"take": "1.0"})
                answers.append((r.status_code, r.json()))
            return (
                answers,
                not_json,
                unknown,
                array,
                missing,
                bad_config,
                bad_backend,
                system,
                songs,
            )
        finally:
            await node.stop()

    answers, not_json, unknown, array, missing, bad_config, bad_backend, system, songs = run(main())
    queries = answers[len(BAD) :]
    assert [(status, p["error"]["field"]) for status, p in queries] == [
        (422, "limit"),
        (422, "limit"),
        (422, "limit"),
        (422, "take"),
    ], queries
    for (body, field), (status, payload) in zip(BAD, answers):
        assert 400 <= status < 500, body
        assert payload["error"]["field"] == field, (body, payload)
        assert payload["error"]["type"] == "invalid_request"
        assert field in payload["error"]["message"]
    assert not_json[0] == 400 and not_json[1]["error"]["field"] == "body"
    assert unknown[0] == 404 and unknown[1]["error"]["field"] == "model"
    assert (
        "sketch" in unknown[1]["error"]["installed"] and "sketch" in unknown[1]["error"]["message"]
    )
    assert array[0] == 422 and array[1]["error"]["field"] == "body"
    assert missing[0] == 404 and missing[1]["error"]["type"] == "not_found"
    assert bad_config[0] == 422 and bad_config[1]["error"]["field"] == "node.max_queue"
    assert bad_backend[0] == 422 and bad_backend[1]["error"]["field"] == "backend"
    assert system["loaded"] == [] and songs == []  # nothing reached an engine


def test_audio_generations_gives_bytes_or_a_json_error(home):
    async def main():
        node = await Node(home).start()
        try:
            async with node.http(timeout=60) as http:
                ok = await http.post(
                    "/v1/audio/generations",
                    json={
                        "model": "sketch",
                        "prompt": "chiptune march",
                        "lyrics": "[Instrumental]",
                        "duration": 10,
                        "steps": 8,
                        "seed": 3,
                        "response_format": "wav",
                    },
                )
                bad = await http.post(
                    "/v1/audio/generations", json={"model": "sketch", "prompt": "x", "duration": 3}
                )
                no_model = await http.post(
                    "/v1/audio/generations", json={"model": "nope", "prompt": "x"}
                )
                unknown = await http.post(
                    "/v1/audio/generations", json={"prompt": "x", "voice": "a"}
                )
            return ok, bad, no_model, unknown
        finally:
            await node.stop()

    ok, bad, no_model, unknown = run(main())
    assert ok.status_code == 200 and ok.headers["content-type"] == "audio/wav"
    sidecar = json.loads(next((home / "songs").glob("*seed3.json")).read_text())
    assert sidecar["id"] == ok.headers["x-cantor-song"]
    assert sidecar["engine_request"]["inference_steps"] == 8  # Lemonade's "steps"
    assert sidecar["request"]["caption"] == "chiptune march"
    info = sf.info(io.BytesIO(ok.content))
    assert info.subtype == "PCM_16" and abs(info.duration - 10) < 0.1
    song_file = home / "songs" / sidecar["audio"]["file"]  # the file, streamed whole
    assert ok.content == song_file.read_bytes()
    assert int(ok.headers["content-length"]) == song_file.stat().st_size
    for r, field in ((bad, "duration"), (no_model, "model"), (unknown, "voice")):
        assert r.status_code >= 400 and r.headers["content-type"] == "application/json"
        assert r.json()["error"]["field"] == field


def test_config_system_models_and_restart_through_the_api(home):
    async def main():
        node = await Node(home).start()
        pid = node.proc.pid
        try:
            async with node.client() as c:
                patched = await c.patch_config({"node.keep_loaded": True})
                models = await c.models()
                sid = await c.submit_song(SHORT)
                await until_state(c, sid, ("done",))
                system = await c.system()
                # keep-loaded off again: the next song runs on a restarted engine without it
                await c.patch_config({"node.keep_loaded": False})
                sid2 = await c.submit_song(SHORT)
                await until_state(c, sid2, ("done",))
                system2 = await c.system()
                restart = await c.restart()

                async def back():  # the old process says "restarting" until it ends
                    try:
                        return (await c.system())["restarting"] is False
                    except NodeError:
                        return False

                from support.node import wait_for

                await wait_for(back, 60, 0.1)
                again = await c.songs()
                return (
                    patched,
                    models,
                    system,
                    system2,
                    restart,
                    again,
                    node.proc.pid == pid,
                    node.proc.running,
                )
        finally:
            await node.stop()

    patched, models, system, system2, restart, again, same_pid, running = run(main())
    assert patched["values"]["node.keep_loaded"] is True
    assert "keep_loaded = false" in (home / "node.toml").read_text()  # the last PATCH
    assert models["models"][0]["name"] == "sketch"
    assert system["keep_loaded"] is True
    fam = system["families"]["acestep"]
    assert [b["name"] for b in fam["backends"]] == ["cuda12", "metal", "vulkan", "cpu"]
    assert fam["pinned"] is None and "default" in fam and system["hardware"]["os"]
    (loaded,) = system["loaded"]
    assert loaded["engine"] == "sketch" and loaded["keep_loaded"] is True and loaded["running"]
    starts = [
        line
        for line in (home / "logs" / "engine-sketch.log").read_text().splitlines()
        if "---- starting" in line
    ]
    assert len(starts) == 2 and "--keep-loaded" in starts[0] and "--keep-loaded" not in starts[1]
    (loaded2,) = system2["loaded"]
    assert loaded2["keep_loaded"] is False and loaded2["pid"] != loaded["pid"]
    assert restart["status"] == "restarting"
    assert same_pid and running  # re-executed in place, history kept
    assert again[0]["state"] == "done"


def test_audio_generations_failure_is_a_json_error_never_audio(cantor_home):
    blocker = cantor_home / "blocked"
    blocker.write_text("a file where the songs folder should be")
    (cantor_home / "node.toml").write_text(
        f'[models]\ndefault = "sketch"\n[songs]\ndir = "{blocker / "songs"}"\n'
    )

    async def main():
        node = await Node(cantor_home).start()
        try:
            async with node.http(timeout=60) as http:
                return await http.post(
                    "/v1/audio/generations", json={"prompt": "doomed", "duration": 10}
                )
        finally:
            await node.stop()

    r = run(main())
    assert r.status_code == 500 and r.headers["content-type"] == "application/json"
    assert r.json()["error"]["type"] == "generation_failed"
    assert "blocked" in r.json()["error"]["message"]


def test_sidecar_records_what_the_lm_filled_in(home):
    """Two-stage song: the sidecar keeps the request as sent and, next to it, the metadata
    the sketch LM read from the caption; an instrumental has no LM stage (null)."""

    async def main():
        node = await Node(home).start()
        try:
            async with node.client() as c:
                vocal = await c.submit_song(
                    {
                        "caption": "a dreamy waltz in F# minor at 140 bpm",
                        "lyrics": "[Verse]\nhello night\nstay a while",
                        "duration": 10,
                        "model": "sketch",
                        "batch": 2,
                    }
                )
                await collect(c, vocal)
                inst = await c.submit_song(
                    {
                        "caption": "a dreamy waltz in F# minor at 140 bpm",
                        "duration": 10,
                        "model": "sketch",
                    }
                )
                await collect(c, inst)
                return await c.song(vocal), await c.song(inst)
        finally:
            await node.stop()

    vocal, inst = run(main())
    assert vocal["state"] == "done" and len(vocal["takes"]) == 2
    for take in vocal["takes"]:
        sidecar = json.loads(Path(take["sidecar"]).read_text())
        assert sidecar["request"]["bpm"] is None and sidecar["request"]["key"] is None
        assert sidecar["request"]["duration"] == 10
        lm = sidecar["lm_metadata"]
        assert lm["bpm"] == 140 and lm["key"] == "F# minor" and lm["time_signature"] == 3
        assert lm["duration"] == 10.0 and lm["language"] == "en"
        assert lm["caption"]
    sidecar = json.loads(Path(inst["takes"][0]["sidecar"]).read_text())
    assert "lm_metadata" in sidecar and sidecar["lm_metadata"] is None


def test_a_song_is_renamed_or_marked_and_null_is_refused_not_taken_for_no_change(home):
    """PATCH /v1/songs/{id} as its schema says: a string title, a boolean favourite; a
    field left out is left as it is, and null is a 422 naming the field (the fuzz found the
    node taking null for "unchanged" while its document said string and boolean)."""

    async def main():
        node = await Node(home).start()
        try:
            async with node.client() as c:
                song_id = await c.submit_song(SHORT)
                await until_state(c, song_id, ("done",))
            async with node.http() as http:
                path = f"/v1/songs/{song_id}"
                nulls = [(await http.patch(path, json={k: None})) for k in ("title", "favourite")]
                renamed = await http.patch(path, json={"title": "  Night drive  "})
                marked = await http.patch(path, json={"favourite": True})
            return (
                [(r.status_code, r.json()["error"]["field"]) for r in nulls],
                renamed.json(),
                marked.json(),
            )
        finally:
            await node.stop()

    nulls, renamed, marked = run(main())
    assert nulls == [(422, "title"), (422, "favourite")]
    assert renamed["title"] == "Night drive" and not renamed["favourite"]
    assert marked["title"] == "Night drive" and marked["favourite"] is True

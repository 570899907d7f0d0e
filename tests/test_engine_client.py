"""The ace-server client against a real engine process on a real port (the scripted stand-in,
which prints and answers like ace-server and can be steered; see tests/support)."""

from __future__ import annotations

import asyncio
import json
import re
import struct

import pytest

from support.procs import free_port, wait_until
from support.scripted_engine import RunningEngine, make_models

from cantor_desktop.engine.client import (
    EngineClient,
    EngineError,
    JobCancelled,
    JobFailed,
    Track,
    engine_request,
    parse_multipart,
    tracks_from_response,
)
from cantor_desktop.song.request import validate


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 30))


@pytest.fixture
def models(tmp_path):
    return make_models(tmp_path / "models")


def recorded(path):
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def is_wav(track: Track) -> bool:
    return (
        track.content_type == "audio/wav"
        and track.audio[:4] == b"RIFF"
        and track.audio[8:12] == b"WAVE"
    )


def test_vocals_take_two_stages_and_the_lm_array_reaches_synth_unchanged(models, tmp_path):
    record = tmp_path / "record.jsonl"
    # what the LM answers, with fields and an order /synth must receive untouched
    lm_result = [
        {
            "caption": "rewritten by the LM",
            "lyrics": "[verse]\nhello",
            "bpm": 97,
            "duration": 42.5,
            "keyscale": "F# minor",
            "timesignature": "3",
            "vocal_language": "en",
            "audio_codes": "1,2,3,4,5",
            "seed": 7,
            "output_format": "wav16",
            "zz_unknown_field": {"kept": [1, 2.5, None]},
        }
    ]
    script = {"record": str(record), "lm_result": lm_result}
    stages = []

    async def go():
        async with EngineClient(url) as client:
            return await client.song(
                {
                    "caption": "folk",
                    "lyrics": "[verse]\nhello",
                    "output_format": "wav16",
                    "seed": 7,
                },
                on_stage=stages.append,
            )

    with RunningEngine(models, free_port(), script) as engine:
        url = engine.url
        tracks = run(go())
    assert stages == ["lm", "synth"]
    calls = recorded(record)
    assert [c["path"] for c in calls] == ["/lm", "/synth"]
    assert calls[0]["body"]["lm_mode"] == "generate"
    assert calls[0]["body"]["lyrics"] == "[verse]\nhello"
    assert calls[1]["body"] == lm_result
    assert list(calls[1]["body"][0]) == list(lm_result[0])  # same order too
    assert len(tracks) == 1 and is_wav(tracks[0]) and tracks[0].latent is not None


SENTINELS = [
    None,
    "",
    "   ",
    "[Instrumental]",
    "[instrumental]",
    "[INSTRUMENTAL]",
    "  [InStRuMeNtAl]\n",
    "\t[instrumental] ",
]


def test_every_spelling_of_the_sentinel_takes_the_instrumental_path(models, tmp_path):
    record = tmp_path / "record.jsonl"

    async def go():
        async with EngineClient(url) as client:
            for lyrics in SENTINELS + ["absent"]:
                request = {"caption": "ambient pads", "output_format": "wav24"}
                if lyrics != "absent":
                    request["lyrics"] = lyrics
                stages = []
                tracks = await client.song(request, on_stage=stages.append)
                assert stages == ["synth"], lyrics
                assert len(tracks) == 1 and is_wav(tracks[0])

    with RunningEngine(models, free_port(), {"record": str(record)}) as engine:
        url = engine.url
        run(go())
    calls = recorded(record)
    assert [c["path"] for c in calls] == ["/synth"] * (len(SENTINELS) + 1)
    assert all(c["body"]["lyrics"] == "[Instrumental]" for c in calls)


def test_multipart_with_another_boundary_gives_one_track_per_audio_part(models):
    async def go():
        async with EngineClient(url) as client:
            return await client.synth(
                {
                    "caption": "two takes",
                    "lyrics": "[Instrumental]",
                    "synth_batch_size": 3,
                    "output_format": "wav32",
                }
            )

    with RunningEngine(models, free_port(), {"boundary": "zz--Other_Boundary.42"}) as engine:
        url = engine.url
        tracks = run(go())
    assert len(tracks) == 3
    assert all(is_wav(t) for t in tracks)
    assert all(t.latent is not None and len(t.latent) == 64 * 4 * 4 for t in tracks)
    assert struct.unpack_from("<H", tracks[0].audio, 20)[0] == 3  # float32 WAV
    assert len({t.audio for t in tracks}) == 3  # distinct takes, in order


def test_old_servers_raw_body_and_latent_less_batch_both_parse(models):
    async def go():
        async with EngineClient(url) as client:
            return await client.synth({"caption": "old", "output_format": "wav16"})

    with RunningEngine(models, free_port(), {"synth_body": "raw"}) as engine:
        url = engine.url
        raw = run(go())
    assert len(raw) == 1 and is_wav(raw[0]) and raw[0].latent is None
    with RunningEngine(models, free_port(), {"synth_body": "multipart-no-latent"}) as engine:
        url = engine.url
        batch = run(go())
    assert len(batch) == 1 and is_wav(batch[0]) and batch[0].latent is None


def test_multipart_parsing_follows_the_header_not_a_fixed_boundary():
    body = (
        b"preamble\r\n--b0und\r\nContent-Type: audio/mpeg\r\n\r\nMP3DATA\r\n--b0und\r\n"
        b"Content-Type: application/octet-stream\r\nContent-Disposition: form-data; "
        b'name="latent"\r\n\r\n\x00\x01\r\n--ace-batch-boundary\r\n\r\n--b0und\r\n'
        b"Content-Type: audio/wav\r\n\r\nRIFF\r\n--b0und--\r\n"
    )
    tracks = tracks_from_response("multipart/mixed", {"boundary": "b0und"}, body)
    assert [(t.content_type, t.audio, t.latent) for t in tracks] == [
        ("audio/mpeg", b"MP3DATA", b"\x00\x01\r\n--ace-batch-boundary\r\n"),
        ("audio/wav", b"RIFF", None),
    ]
    with pytest.raises(EngineError, match="truncated"):
        parse_multipart(body[:-12], "b0und")
    with pytest.raises(EngineError, match="unexpected result type"):
        tracks_from_response("text/html", {}, b"<html>")


def test_an_error_body_surfaces_the_engines_words(models, tmp_path):
    async def go():
        async with EngineClient(url) as client:
            with pytest.raises(EngineError) as empty:
                await client.song({"caption": "", "output_format": "wav16"})
            with pytest.raises(EngineError) as bad_format:
                await client.synth({"caption": "x", "output_format": "wav"})
            return empty.value, bad_format.value

    with RunningEngine(models, free_port()) as engine:
        url = engine.url
        empty, bad_format = run(go())
    assert (empty.status, empty.message) == (400, "Caption is required")
    assert bad_format.status == 400
    assert bad_format.message == "Invalid output_format (use: mp3, wav16, wav24, wav32)"

    lm_only = make_models(tmp_path / "lm-only", kinds=("lm",))
    with RunningEngine(lm_only, free_port()) as engine:
        url = engine.url

        async def synth():
            async with EngineClient(url) as client:
                await client.synth({"caption": "x"})

        with pytest.raises(EngineError) as missing:
            run(synth())
    assert missing.value.status == 501
    assert "No synth models in registry" in missing.value.message


def test_a_failed_job_carries_the_reason_from_the_engines_log(models):
    lines = ["[Server] DiT not found: nope.gguf", "[Server] FATAL: synth load failed"]

    async def go():
        async with EngineClient(url) as client:
            with pytest.raises(JobFailed) as failed:
                await client.synth(
                    {"caption": "x", "synth_model": "nope.gguf", "output_format": "wav16"}
                )
            return failed.value

    with RunningEngine(models, free_port(), {"fail": {"/synth": lines}}) as engine:
        url = engine.url
        failed = run(go())
        assert engine.proc.poll() is None  # the server keeps running
    assert failed.reason == "; ".join(lines)
    assert "DiT not found: nope.gguf" in str(failed)


def test_cancelling_the_awaiting_task_cancels_the_job_mid_render(models, tmp_path):
    err = tmp_path / "engine.err"
    script = {"dit_steps": 200, "step_delay": 0.02}

    async def go():
        async with EngineClient(url) as client:
            task = asyncio.create_task(client.synth({"caption": "long", "output_format": "wav16"}))
            while "[DiT] Step 3/200" not in engine.stderr_text():
                await asyncio.sleep(0.02)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # the engine stops rendering, and its one worker is free for the next job
            job = await client.submit("/synth", {"caption": "next", "output_format": "wav16"})
            await client.cancel(job)
            with pytest.raises(JobCancelled):
                await client.wait(job)
            return job

    with RunningEngine(models, free_port(), script, stderr_path=err) as engine:
        url = engine.url
        nxt = run(go())
        log = engine.stderr_text()
    assert "[Server] Cancel requested for job" in log
    stopped = re.search(r"\[DiT\] Cancelled at step (\d+)/200", log)
    assert stopped and int(stopped.group(1)) < 200, log[-2000:]
    assert "[DiT] Step 200/200" not in log  # never rendered to its end
    # the cancel went out when the task was cancelled, before the next job was sent (the
    # engine logs "created" at submission, so the render may end just after: a busy machine)
    assert log.index("[Server] Cancel requested for job") < log.index(f"[Server] Job {nxt} created")


def test_cancelling_while_the_post_is_in_flight_still_cancels_the_queued_job(models, tmp_path):
    err = tmp_path / "engine.err"
    script = {"submit_delay": 0.4, "dit_steps": 300, "step_delay": 0.01}

    async def go():
        async with EngineClient(url) as client:
            task = asyncio.create_task(client.synth({"caption": "x", "output_format": "wav16"}))
            while "created" not in engine.stderr_text():
                await asyncio.sleep(0.01)
            task.cancel()  # the POST has not been answered yet
            with pytest.raises(asyncio.CancelledError):
                await task

    with RunningEngine(models, free_port(), script, stderr_path=err) as engine:
        url = engine.url
        run(go())
        log = engine.stderr_text()
    assert "[Server] Cancel requested for job" in log


def test_wait_polls_fast_at_first(models):
    """A job of a few tenths of a second is polled several times while it runs (50 ms, then
    75, 110, …), where a one-second poll would look once, after it ended. Counted in polls
    the engine answered, not in wall-clock time."""
    proxy = None

    async def go():
        nonlocal proxy
        async with EngineClient((proxy := RecordingProxy(url)).url) as client:
            job = await client.submit("/synth", {"caption": "quick", "output_format": "wav16"})
            await client.wait(job)
            return job

    with RunningEngine(models, free_port(), {"dit_steps": 20, "step_delay": 0.02}) as engine:
        url = engine.url
        job = run(go())
    proxy.close()
    answers = [
        json.loads(x["answer"])["status"]
        for x in proxy.exchanges
        if x["method"] == "GET" and x["path"] == f"/job?id={job}"
    ]
    assert answers[-1] == "done" and answers.count("done") == 1
    assert answers.count("running") >= 2, answers  # looked again while it ran


def test_a_stage_that_runs_too_long_is_cancelled_and_fails(models, tmp_path):
    err = tmp_path / "engine.err"

    async def go():
        async with EngineClient(url, stage_timeout=0.4) as client:
            with pytest.raises(JobFailed, match="did not finish within"):
                await client.synth({"caption": "slow", "output_format": "wav16"})

    with RunningEngine(
        models, free_port(), {"dit_steps": 500, "step_delay": 0.01}, stderr_path=err
    ) as engine:
        url = engine.url
        run(go())
        # the cancel is sent before the client gives up; the engine's line follows it
        wait_until(
            lambda: "[Server] Cancel requested for job" in engine.stderr_text(),
            "the engine to log the cancel",
            timeout=30,
        )


def test_engine_request_maps_a_song_to_engine_fields():
    song = validate(
        {
            "caption": "jazz",
            "lyrics": "la la",
            "duration": 45,
            "bpm": 96,
            "key": "f# minor",
            "time_signature": "3/4",
            "language": "fr",
            "seed": 9,
            "batch": 2,
        }
    )
    body = engine_request(
        song,
        synth_model="acestep-v15-turbo-Q8_0.gguf",
        lm_model="acestep-5Hz-lm-0.6B-Q8_0.gguf",
        output_format="flac",
    )
    assert body == {
        "caption": "jazz",
        "lyrics": "la la",
        "seed": 9,
        "output_format": "wav24",
        "synth_batch_size": 2,
        "duration": 45.0,
        "bpm": 96,
        "keyscale": "F# minor",
        "timesignature": "3",
        "vocal_language": "fr",
        "lm_seed": 9,  # the LM's codes follow the seed too: the same seed, the same song
        "synth_model": "acestep-v15-turbo-Q8_0.gguf",
        "lm_model": "acestep-5Hz-lm-0.6B-Q8_0.gguf",
    }
    plain = engine_request(
        validate({"caption": "drone", "lyrics": " [instrumental] "}),
        synth_model=None,
        lm_model="lm.gguf",
        output_format="wav32",
    )
    assert plain == {
        "caption": "drone",
        "lyrics": "[Instrumental]",
        "seed": -1,
        "output_format": "wav32",
        "synth_batch_size": 1,
    }
    for fmt, expected in (("wav16", "wav16"), ("mp3", "wav24")):
        assert (
            engine_request(song, synth_model=None, lm_model=None, output_format=fmt)[
                "output_format"
            ]
            == expected
        )
    with pytest.raises(ValueError):
        engine_request(song, synth_model=None, lm_model=None, output_format="ogg")


# -- the built-in sketch engine (real process, started the way the node starts it) -------------

import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cantor_desktop.system import selfexec
from cantor_desktop.engine.supervisor import EngineSupervisor
from cantor_desktop.sketch import ensure_sketch_models


class RecordingProxy:
    """A real HTTP proxy on 127.0.0.1 in front of an engine; it keeps every exchange, so a
    test can compare what /lm answered with what /synth received, byte for byte."""

    def __init__(self, target: str):
        self.exchanges: list[dict] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _forward(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                request = urllib.request.Request(target + self.path, data=body, method=self.command)
                if self.headers.get("Content-Type"):
                    request.add_header("Content-Type", self.headers["Content-Type"])
                try:
                    with urllib.request.urlopen(request, timeout=30) as answer:
                        status, headers, data = answer.status, answer.headers, answer.read()
                except urllib.error.HTTPError as err:
                    status, headers, data = err.code, err.headers, err.read()
                proxy.exchanges.append(
                    {
                        "method": self.command,
                        "path": self.path,
                        "body": body,
                        "status": status,
                        "answer": data,
                        "type": headers.get("Content-Type", ""),
                    }
                )
                self.send_response(status)
                self.send_header("Content-Type", headers.get("Content-Type", ""))
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _forward

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def posts(self, path: str) -> list[dict]:
        return [x for x in self.exchanges if x["method"] == "POST" and x["path"] == path]

    def result_of(self, job_id: str) -> dict:
        return next(
            x
            for x in self.exchanges
            if x["path"] == f"/job?id={job_id}&result=1" and x["status"] == 200
        )

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def sketch_models(tmp_path):
    models = tmp_path / "sketch-models"
    ensure_sketch_models(models)
    return models


def engine_log() -> str:
    """What the sketch engine printed (the supervisor's log of it)."""
    from cantor_desktop.system.paths import paths

    path = paths().engine_log("sketch")
    return path.read_text("utf-8", "replace") if path.exists() else ""


class running_sketch:
    """``async with running_sketch(models) as sup``: the sketch engine under the supervisor,
    started the way the node starts it (the supervisor belongs to the test's event loop)."""

    def __init__(self, models):
        self.sup = EngineSupervisor("sketch", selfexec.self_argv("sketch-server"), {}, models)

    async def __aenter__(self) -> EngineSupervisor:
        await self.sup.start()
        return self.sup

    async def __aexit__(self, *exc) -> None:
        await self.sup.aclose()


def test_sketch_vocals_take_two_stages_and_the_lm_array_reaches_synth_unchanged(sketch_models):
    stages = []
    proxy = None

    async def go():
        nonlocal proxy
        async with (
            running_sketch(sketch_models) as sketch,
            EngineClient((proxy := RecordingProxy(sketch.base_url)).url) as client,
        ):
            return await client.song(
                {
                    "caption": "upbeat pop, 128 bpm, A minor",
                    "lyrics": "[verse]\nwe sing along tonight",
                    "duration": 10,
                    "output_format": "wav16",
                    "seed": 3,
                },
                on_stage=stages.append,
            )

    tracks = run(go())
    proxy.close()
    assert stages == ["lm", "synth"]
    (lm_post,), (synth_post,) = proxy.posts("/lm"), proxy.posts("/synth")
    assert json.loads(lm_post["body"])["lm_mode"] == "generate"
    lm_id = json.loads(lm_post["answer"])["id"]
    lm_answer = proxy.result_of(lm_id)["answer"]
    enriched = json.loads(lm_answer)
    assert isinstance(enriched, list) and enriched[0]["bpm"] == 128
    assert json.loads(synth_post["body"]) == enriched  # the array, unchanged
    assert len(tracks) == 1 and is_wav(tracks[0]) and tracks[0].latent
    rate, channels = (
        struct.unpack_from("<I", tracks[0].audio, 24)[0],
        struct.unpack_from("<H", tracks[0].audio, 22)[0],
    )
    assert (rate, channels) == (48000, 2)


def test_sketch_sentinel_spellings_take_the_instrumental_path(sketch_models):
    spellings = [None, "  ", "[instrumental]", " [INSTRUMENTAL]\n"]
    proxy = None

    async def go():
        nonlocal proxy
        async with (
            running_sketch(sketch_models) as sketch,
            EngineClient((proxy := RecordingProxy(sketch.base_url)).url) as client,
        ):
            for lyrics in spellings:
                tracks = await client.song(
                    {
                        "caption": "calm piano",
                        "lyrics": lyrics,
                        "duration": 3,
                        "output_format": "wav16",
                    }
                )
                assert len(tracks) == 1 and is_wav(tracks[0])

    run(go())
    proxy.close()
    assert proxy.posts("/lm") == []
    synth = [json.loads(x["body"]) for x in proxy.posts("/synth")]
    assert [s["lyrics"] for s in synth] == ["[Instrumental]"] * len(spellings)


def test_sketch_error_body_and_failed_job_surface_the_engines_words(sketch_models):
    async def go():
        async with running_sketch(sketch_models) as sketch, sketch.client() as client:
            with pytest.raises(EngineError) as empty:
                await client.synth({"caption": "  ", "output_format": "wav16"})
            with pytest.raises(JobFailed) as failed:
                await client.synth(
                    {"caption": "x", "synth_model": "nope.gguf", "output_format": "wav16"}
                )
            # and without a supervisor the reason comes from the engine's /logs replay
            async with EngineClient(sketch.base_url) as plain:
                with pytest.raises(JobFailed) as failed_plain:
                    await plain.synth(
                        {"caption": "x", "synth_model": "other.gguf", "output_format": "wav16"}
                    )
            assert sketch.running
            return empty.value, failed.value, failed_plain.value

    empty, failed, failed_plain = run(go())
    assert (empty.status, empty.message) == (400, "Caption is required")
    assert "DiT not found: nope.gguf" in failed.reason
    assert "DiT not found: other.gguf" in failed_plain.reason
    assert "nope.gguf" not in failed_plain.reason


def test_sketch_cancel_works_mid_render(sketch_models):
    async def go():
        async with running_sketch(sketch_models) as sketch, sketch.client() as client:
            task = asyncio.create_task(
                client.synth(
                    {
                        "caption": "a long one",
                        "duration": 600,
                        "inference_steps": 100,
                        "output_format": "wav16",
                    }
                )
            )
            while "[DiT] Step 2/" not in engine_log():
                await asyncio.sleep(0.02)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            tracks = await client.synth(
                {"caption": "short", "duration": 10, "output_format": "wav16"}
            )
            return tracks, engine_log().splitlines()

    tracks, lines = run(go())
    assert any("[Server] Cancel requested for job" in line for line in lines)
    stopped = [line for line in lines if "[DiT] Cancelled at step" in line]
    assert stopped and int(re.search(r"Cancelled at step (\d+)/", stopped[0]).group(1)) < 100
    assert len(tracks) == 1 and is_wav(tracks[0])  # the next song, on the same engine


def test_a_songs_audio_is_freed_when_the_caller_drops_it_without_the_cyclic_gc(sketch_models):
    """The result's body is read off the stream, not kept on httpx's Response (which lives
    until the cyclic GC runs: https://github.com/encode/httpx/pull/3733); a node that kept
    the last song's audio for minutes held 30+ MiB more after a long song."""
    import gc
    import tracemalloc

    async def go():
        async with (
            running_sketch(sketch_models) as sketch,
            EngineClient(sketch.base_url) as client,
        ):
            gc.disable()
            tracemalloc.start()
            try:
                tracks = await client.song(
                    {
                        "caption": "steady funk groove",
                        "lyrics": "[Instrumental]",
                        "duration": 60,
                        "output_format": "wav16",
                        "seed": 5,
                    }
                )
                size = sum(len(t.audio) + len(t.latent or b"") for t in tracks)
                del tracks
                left = tracemalloc.get_traced_memory()[0]
            finally:
                tracemalloc.stop()
                gc.enable()
            return size, left

    size, left = run(go())
    assert size > 10_000_000  # a minute of 48 kHz stereo
    assert left < size / 4, f"{left / 2**20:.1f} MiB still held after a {size / 2**20:.1f} MiB song"

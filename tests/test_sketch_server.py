"""The sketch engine as a real process on a real port: ace-server's protocol, end to end."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys

import httpx
import numpy as np
import pytest

from support.procs import free_port, wait_until
from test_sketch_support import (
    EngineProcess,
    assert_on_the_beat,
    parse_multipart,
    read_wav,
    started_engine,
)

from cantor_desktop.models import gguf
from cantor_desktop.sketch import ensure_sketch_models

# one Sketch engine for the whole module: its tests stay on one xdist worker (./run-tests)
pytestmark = pytest.mark.xdist_group("test_sketch_server")

LYRICS = (
    "[Verse]\nHello darling, can you hear me\nSinging softly through the night\n"
    "[Chorus]\nHold on, hold on to the light"
)


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    e = started_engine(tmp_path_factory.mktemp("sketch"))
    yield e
    e.stop()


def _run(argv, timeout=10, env=None):
    return subprocess.run(
        [sys.executable, "-m", "cantor_desktop.sketch", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


# ---------------------------------------------------------------- command line, start-up


def test_command_line_errors(tmp_path):
    r = _run(["--models", str(tmp_path), "--x"])
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.startswith("Unknown option: --x\nUsage:")
    r = _run([])
    assert r.returncode == 1 and "[Server] ERROR: --models is required" in r.stderr
    r = _run(["--help"])
    assert r.returncode == 0 and "--models DIR" in r.stderr and r.stdout == ""
    r = _run(["--models", str(tmp_path)])
    assert r.returncode == 1
    assert f"[Server] ERROR: no GGUF models found in {tmp_path}" in r.stderr


def test_cli_command_hands_arguments_to_the_engine(tmp_path, capsys):
    from cantor_desktop.cli.main import main as cli_main

    assert cli_main(["sketch-server", "--models", str(tmp_path), "--bogus"]) == 1
    assert "Unknown option: --bogus" in capsys.readouterr().err
    assert cli_main(["sketch-server", "--models", str(tmp_path)]) == 1  # no models
    assert "[Server] ERROR: no GGUF models found in" in capsys.readouterr().err

    from cantor_desktop.system.selfexec import self_argv

    argv = self_argv("sketch-server")
    assert argv == [sys.executable, "-m", "cantor_desktop", "sketch-server"]
    r = subprocess.run(
        argv + ["--models", str(tmp_path), "--bogus"], capture_output=True, text=True, timeout=20
    )
    assert r.returncode == 1 and "Unknown option: --bogus" in r.stderr
    r = subprocess.run(argv + ["--help"], capture_output=True, text=True, timeout=20)
    assert r.returncode == 0 and "Usage: sketch-server" in r.stderr


def test_classifies_models_and_skips_others(tmp_path):
    models = tmp_path / "m"
    names = ensure_sketch_models(models)
    assert names == {
        "lm": "sketch-lm.gguf",
        "dit": "sketch-dit.gguf",
        "text-enc": "sketch-text-enc.gguf",
        "vae": "sketch-vae.gguf",
    }
    gguf.write_header_only(models / "other.gguf", "llama")
    (models / "broken.gguf").write_bytes(b"nope")
    (models / "sub").mkdir()
    gguf.write_header_only(models / "sub" / "deep.gguf", gguf.ARCH_LM)
    port = free_port()
    e = EngineProcess(models, port, tmp_path / "log", via_cli=True)
    try:
        e.wait_ready()
        log = e.log()
        for line in (
            "[Server] Scanning models in",
            "[Registry] sketch-dit.gguf -> DiT",
            "[Registry] sketch-lm.gguf -> LM",
            "[Registry] sketch-vae.gguf -> VAE",
            "[Registry] sketch-text-enc.gguf -> Text-Enc",
            f"[Server] Listening on 127.0.0.1:{port}",
            "[Server] Models: 1 LM, 1 Text-Enc, 1 DiT, 1 VAE, 0 Adapter",
        ):
            assert line in log
        assert "deep.gguf" not in log and "other.gguf" in log and "broken.gguf" in log
        props = e.client.get("/props").json()
        assert re.fullmatch(r"sketch-\d+\.\d+\.\d+ \(\d{4}-\d\d-\d\d\)", props["version"])
        assert props["models"] == {
            "lm": ["sketch-lm.gguf"],
            "embedding": ["sketch-text-enc.gguf"],
            "dit": ["sketch-dit.gguf"],
            "vae": ["sketch-vae.gguf"],
        }
        assert props["cli"] == {"max_batch": 1}
        assert props["default"]["output_format"] == "mp3"
        assert props["presets"]["turbo"]["inference_steps"] == 8
    finally:
        assert e.stop() == 0
    log = e.log()
    assert log.rstrip().endswith("[Server] Shutting down...\n[Server] Done")


def test_bind_failure_exits_zero_like_ace_server(tmp_path):
    ensure_sketch_models(tmp_path)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = _run(["--models", str(tmp_path), "--port", str(port)])
    assert r.returncode == 0
    lines = r.stderr.splitlines()
    assert f"[Server] Listening on 127.0.0.1:{port}" in lines
    assert lines[-3:] == [
        f"[Server] FATAL: cannot bind 127.0.0.1:{port}",
        "[Server] Shutting down...",
        "[Server] Done",
    ]


def test_lm_only_folder_answers_501_for_synth(tmp_path):
    gguf.write_header_only(tmp_path / "probe-lm.gguf", gguf.ARCH_LM)
    e = EngineProcess(tmp_path, free_port(), tmp_path / "log")
    try:
        e.wait_ready()
        r = e.client.post("/synth", content=b"{}")  # checked before the fields
        assert r.status_code == 501
        assert r.json() == {"error": "No synth models in registry (need dit + text-encoder + vae)"}
        job = e.submit("/lm", {"caption": "probe", "lm_mode": "generate"})
        assert e.wait_job(job) == "done"
        assert "[Load] LM backend: CPU (CPU threads: 1)" in e.log()
    finally:
        e.stop()


def test_foreign_gpu_backend_is_fatal_at_the_first_job(tmp_path):
    gguf.write_header_only(tmp_path / "probe-lm.gguf", gguf.ARCH_LM)
    e = EngineProcess(tmp_path, free_port(), tmp_path / "log", env={"GGML_BACKEND": "CUDA0"})
    try:
        e.wait_ready()  # read only when a job starts
        assert e.client.post("/lm", json={"caption": "probe"}).status_code == 200
        assert e.proc.wait(10) == 1
        log = e.log()
        assert "[Load] FATAL: GGML_BACKEND=CUDA0 not found. Available: CPU" in log
        assert "[Load] LM backend" not in log
    finally:
        e.stop()


# ---------------------------------------------------------------- protocol


def test_health_and_errors(engine):
    c = engine.client
    assert c.get("/health").json() == {"status": "ok"}
    cases = [
        ("/lm", b'{"lyrics":"x"}', 400, "Caption is required"),
        ("/lm", b'{"caption":"  "}', 400, "Caption is required"),
        ("/lm", b"{bad", 400, "Invalid JSON"),
        ("/synth", b"[]", 400, "Invalid JSON"),
        ("/synth", b'"text"', 400, "Invalid JSON"),
        (
            "/lm",
            b'{"caption":"x","lm_mode":"dream"}',
            400,
            "Invalid lm_mode (use: generate, inspire, format)",
        ),
        (
            "/synth",
            b'{"caption":"x","output_format":"wav"}',
            400,
            "Invalid output_format (use: mp3, wav16, wav24, wav32)",
        ),
        ("/synth", b'{"caption":"x","bpm":"fast"}', 400, "Invalid bpm"),
    ]
    for path, body, status, message in cases:
        r = c.post(path, content=body)
        assert (r.status_code, r.json()) == (status, {"error": message}), (path, body)
    assert c.get("/job").json() == {"error": "Missing id parameter"}
    r = c.get("/job", params={"id": "0123456789abcdef"})
    assert (r.status_code, r.json()) == (404, {"error": "Job not found"})
    job = engine.submit("/lm", {"caption": "x", "lm_mode": "format"})
    assert engine.wait_job(job) == "done"
    r = c.post("/job", params={"id": job})
    assert (r.status_code, r.json()) == (400, {"error": "Unknown action"})
    assert c.post("/job", params={"id": job, "cancel": 1}).json() == {"status": "done"}


def test_lm_enriches_like_the_language_model(engine):
    req = {"caption": "waltz in A minor at 90 bpm", "lyrics": LYRICS, "seed": 11, "lm_seed": 5}
    job = engine.submit("/lm", req)
    r = engine.result(job)
    assert r.headers["content-type"] == "application/json"
    [out] = r.json()
    assert (out["bpm"], out["keyscale"], out["timesignature"]) == (90, "A minor", "3")
    assert out["lyrics"] == LYRICS and out["seed"] == 11 and out["vocal_language"] == "en"
    assert 10 <= out["duration"] <= 600
    assert re.fullmatch(r"(<\|audio_code_\d+\|>)+", out["audio_codes"])
    assert out["audio_codes"].count("<|") == round(out["duration"] * 5)
    # sparse: defaults left out, except the ones always kept
    assert "lm_temperature" not in out and "synth_model" not in out
    for key in ("caption", "seed", "solver", "lm_mode", "output_format", "task_type"):
        assert key in out
    # deterministic for an lm seed
    again = engine.result(engine.submit("/lm", req)).json()
    assert again == [out]
    other = engine.result(engine.submit("/lm", dict(req, lm_seed=6))).json()[0]
    assert other["audio_codes"] != out["audio_codes"]
    log = engine.wait_log(f"[Server] Job {job} done (LM, 1 results)")
    assert f"[Server] Job {job} created (LM, mode=0)" in log


def test_lm_genres_and_explicit_values(engine):
    cases = [
        ({"caption": "lofi beat"}, {"bpm": 80, "timesignature": "4"}),
        ({"caption": "deep house groove"}, {"bpm": 124}),
        ({"caption": "liquid drum and bass"}, {"bpm": 174}),
        (
            {"caption": "a ballad", "bpm": 64, "keyscale": "F# minor"},
            {"bpm": 64, "keyscale": "F# minor"},
        ),
        (
            {"caption": "song in Bb major, 6/8", "duration": 42},
            {"keyscale": "Bb major", "timesignature": "6", "duration": 42.0},
        ),
    ]
    for req, expected in cases:
        out = engine.result(engine.submit("/lm", dict(req, lyrics="[Instrumental]"))).json()[0]
        for k, v in expected.items():
            assert out[k] == v, (req, k, out[k])
        assert "vocal_language" not in out


def test_lm_modes_and_nulls(engine):
    out = engine.result(
        engine.submit(
            "/lm",
            {
                "caption": "summer road trip",
                "lyrics": "",
                "lm_mode": "inspire",
                "seed": 3,
                "bpm": None,
                "duration": None,
            },
        )
    ).json()[0]
    assert "[Verse 1]" in out["lyrics"] and "[Chorus]" in out["lyrics"]
    assert out["lm_mode"] == "inspire" and out["caption"] != "summer road trip"
    # like ace-server's inspire mode: metadata and lyrics, no audio codes
    assert "audio_codes" not in out and out["vocal_language"] == "en"
    out = engine.result(
        engine.submit("/lm", {"caption": "x at 128 bpm", "lyrics": "la la", "lm_mode": "format"})
    ).json()[0]
    assert out["bpm"] == 128 and "audio_codes" not in out
    assert "(LM, mode=1)" in engine.log() and "(LM, mode=2)" in engine.log()
    two = engine.result(
        engine.submit("/lm", {"caption": "x", "lyrics": "la la", "lm_batch_size": 2, "lm_seed": 1})
    ).json()
    assert len(two) == 2 and two[0]["audio_codes"] != two[1]["audio_codes"]


def _synth(engine, **req) -> list[tuple[dict, np.ndarray, np.ndarray]]:
    body = {
        "caption": "pop song",
        "lyrics": "[Instrumental]",
        "output_format": "wav16",
        "duration": 12,
        **req,
    }
    r = engine.result(engine.submit("/synth", body))
    assert r.headers["content-type"] == "multipart/mixed; boundary=ace-batch-boundary"
    parts = parse_multipart(r.headers["content-type"], r.content)
    tracks = []
    for (audio_h, audio), (lat_h, lat) in zip(parts[::2], parts[1::2]):
        assert audio_h.get("content-type") in ("audio/wav", "audio/mpeg")
        assert "content-disposition" not in audio_h
        assert lat_h == {
            "content-type": "application/octet-stream",
            "content-disposition": 'form-data; name="latent"',
        }
        latent = np.frombuffer(lat, "<f4").reshape(-1, 64)
        info, x = read_wav(audio) if audio_h["content-type"] == "audio/wav" else ({}, audio)
        tracks.append((info | {"ctype": audio_h["content-type"]}, x, latent))
    assert len(parts) == 2 * len(tracks)
    return tracks


def test_synth_result_is_a_real_song(engine):
    [(info, x, latent)] = _synth(
        engine, bpm=100, timesignature="4", keyscale="C major", seed=3, duration=12
    )
    assert info == {"tag": 1, "channels": 2, "rate": 48000, "bits": 16, "ctype": "audio/wav"}
    assert x.shape == (12 * 48000, 2)
    assert latent.shape == (300, 64) and np.isfinite(latent).all()
    peak = np.abs(x).max()
    assert 0.85 < peak <= 10 ** (-1 / 20) + 1e-4  # normalised to -1 dBFS, no clipping
    assert_on_the_beat(x, 48000, 100)
    assert not np.allclose(x[:, 0], x[:, 1])  # stereo, not two copies
    log = engine.log()
    assert "[Resolve-T] seed=3, steps=8, guidance=1.0, shift=3.0, duration=12.0s" in log
    assert "[DiT] Step 8/8" in log
    # a song this short is decoded in one piece, as the real engine does (no tiles)
    assert "[VAE] Decoded: T_latent=300 -> T_audio=576000 (12.00s @ 48kHz)" in log
    assert "[VAE] Tiled decode" not in log


def test_tempo_follows_bpm(engine):
    for bpm, ts in ((84, "4"), (140, "4"), (96, "3")):
        [(_, x, _)] = _synth(engine, bpm=bpm, timesignature=ts, seed=9, duration=14, lyrics=LYRICS)
        assert_on_the_beat(x, 48000, bpm)


def test_deterministic_for_a_seed(engine):
    a = _synth(engine, seed=42, lyrics=LYRICS)[0][1]
    b = _synth(engine, seed=42, lyrics=LYRICS)[0][1]
    c = _synth(engine, seed=43, lyrics=LYRICS)[0][1]
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)
    d = _synth(engine, seed=-1)[0][1]
    used = re.findall(r"\[Resolve-T\] seed=(\d+)", engine.log())[-1]
    assert np.array_equal(d, _synth(engine, seed=int(used))[0][1])


def test_formats_and_batches(engine):
    [(i24, x24, _)] = _synth(engine, output_format="wav24", seed=1)
    assert (i24["bits"], i24["tag"]) == (24, 1) and np.abs(x24).max() <= 1.0
    [(i32, x32, _)] = _synth(engine, output_format="wav32", seed=1)
    assert (i32["bits"], i32["tag"]) == (32, 3) and np.abs(x32).max() <= 1.0
    assert np.allclose(x24 / np.abs(x24).max(), x32 / np.abs(x32).max(), atol=1e-3)
    [(imp3, mp3, latent)] = _synth(engine, output_format="mp3", seed=1)
    assert imp3["ctype"] == "audio/mpeg" and len(mp3) > 10000 and latent.shape == (300, 64)
    two = _synth(engine, seed=5, synth_batch_size=2, duration=10)
    assert len(two) == 2 and not np.array_equal(two[0][1], two[1][1])
    assert np.array_equal(two[0][1], _synth(engine, seed=5, duration=10)[0][1])
    body = [
        {
            "caption": "a",
            "lyrics": "[Instrumental]",
            "output_format": "wav16",
            "duration": 10,
            "seed": 1,
        },
        {
            "caption": "b",
            "lyrics": "[Instrumental]",
            "output_format": "wav16",
            "duration": 11,
            "seed": 2,
        },
    ]
    job = engine.submit("/synth", body)
    r = engine.result(job)
    parts = parse_multipart(r.headers["content-type"], r.content)
    assert [len(read_wav(p)[1]) for h, p in parts[::2]] == [480000, 528000]
    assert f"[Server] Job {job} created (2 requests)" in engine.log()
    assert f"[Server] Job {job} done (2 tracks)" in engine.wait_log(f"Job {job} done")


def test_multipart_form_request(engine):
    req = {
        "caption": "x",
        "lyrics": "[Instrumental]",
        "output_format": "wav16",
        "duration": 10,
        "seed": 8,
    }
    job = engine.client.post(
        "/synth", files={"request": (None, json.dumps(req), "application/json")}
    ).json()["id"]
    assert engine.wait_job(job) == "done"
    # an audio part is decoded as ace-server decodes it (tests/test_sketch_edits.py has more)
    r = engine.client.post(
        "/synth",
        files={
            "request": (None, json.dumps(req), "application/json"),
            "audio": ("ref.wav", b"RIFF....", "audio/wav"),
        },
    )
    assert (r.status_code, r.json()) == (400, {"error": "Failed to decode audio"})


def test_chunked_and_oversized_bodies(engine):
    def gen():
        yield b'{"caption": "chunked", '
        yield b'"lm_mode": "format"}'

    r = engine.client.post("/lm", content=gen())
    assert r.status_code == 200 and engine.wait_job(r.json()["id"]) == "done"
    port = int(engine.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:  # the length alone
        s.sendall(
            b"POST /synth HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: " + str(257 * 2**20).encode() + b"\r\n\r\n{}"
        )
        answer = b""
        while b"}" not in answer:
            chunk = s.recv(4096)
            if not chunk:
                break
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 413 ")
    assert answer.endswith(b'{"error": "Request too large"}')


def test_unknown_model_fails_the_job_only(engine):
    job = engine.submit("/synth", {"caption": "x", "synth_model": "nope.gguf"})
    assert engine.wait_job(job) == "failed"
    assert "[Server] DiT not found: nope.gguf" in engine.log()
    r = engine.client.get("/job", params={"id": job, "result": 1})
    assert (r.status_code, r.json()) == (404, {"error": "Result not ready"})
    assert engine.client.post("/job", params={"id": job, "cancel": 1}).json() == {
        "status": "failed"
    }
    job = engine.submit("/lm", {"caption": "x", "lm_model": "missing-lm.gguf"})
    assert engine.wait_job(job) == "failed"
    assert "[LM-Load] FATAL: cannot load missing-lm.gguf" in engine.log()
    assert engine.client.get("/health").status_code == 200


def test_cancel_mid_render(engine):
    job = engine.submit(
        "/synth",
        {
            "caption": "x",
            "lyrics": LYRICS,
            "duration": 600,
            "inference_steps": 50,
            "output_format": "wav16",
        },
    )
    queued = engine.submit("/synth", {"caption": "y", "duration": 10, "output_format": "wav16"})
    engine.wait_log(f"[Server] Job {job} created")
    engine.wait_log("[DiT] Step 2/50")
    assert engine.client.post("/job", params={"id": job, "cancel": 1}).json() == {
        "status": "cancelled"
    }
    assert engine.client.get("/job", params={"id": job}).json() == {"status": "cancelled"}
    log = engine.wait_log("[DiT] Cancelled at step")
    assert f"[Server] Cancel requested for job {job}" in log
    k = int(re.search(r"\[DiT\] Cancelled at step (\d+)/50", log).group(1))
    assert 2 < k < 50
    assert engine.wait_job(queued) == "done"  # the worker goes on
    r = engine.client.get("/job", params={"id": job, "result": 1})
    assert r.status_code == 404


def test_logs_replay_the_last_512_lines_then_stream(engine):
    jobs = [
        engine.submit("/lm", {"caption": f"fill {i}", "lm_mode": "format"}) for i in range(90)
    ]  # about 6 lines each
    engine.wait_job(jobs[-1])
    done = f"[Server] Job {jobs[-1]} done"
    wait_until(  # its unload line too: the last line the engine writes for it
        lambda: "[Store] Unload LM" in engine.wait_log(done).split(done, 1)[1],
        "the last job's unload line",
    )
    logged = engine.log().splitlines()
    assert len(logged) > 512
    with engine.client.stream("GET", "/logs", timeout=10) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        lines = r.iter_lines()
        replay = []
        for line in lines:
            if line.startswith("data: "):
                replay.append(line[6:])
            if len(replay) == 512:
                break
        assert replay == logged[-512:]
        job = engine.submit("/lm", {"caption": "stream me", "lm_mode": "format"})
        streamed = []
        for line in lines:
            if line:
                streamed.append(line)
            if line == f"data: [Server] Job {job} done (LM, 1 results)":
                break
        assert streamed[0] == f"data: [Server] Job {job} created (LM, mode=2)"


def test_keeps_the_last_32_jobs(engine):
    ids = [engine.submit("/lm", {"caption": f"c{i}", "lm_mode": "format"}) for i in range(34)]
    for job in ids[-3:]:
        engine.wait_job(job)
    assert engine.client.get("/job", params={"id": ids[0]}).status_code == 404
    assert engine.client.get("/job", params={"id": ids[-1]}).json() == {"status": "done"}


def test_sigterm_lets_the_running_job_finish(tmp_path):
    ensure_sketch_models(tmp_path)
    e = EngineProcess(tmp_path, free_port(), tmp_path / "log", extra=["--keep-loaded"])
    e.wait_ready()
    job = e.submit("/synth", {"caption": "x", "duration": 120, "output_format": "wav16"})
    e.wait_log("[DiT] Step 1/8")
    e.proc.send_signal(signal.SIGTERM)
    assert e.proc.wait(30) == 0
    log = e.log()
    assert f"[Server] Job {job} done (1 tracks)" in log
    assert "[Server] Shutting down...\n" in log and log.rstrip().endswith("[Server] Done")
    assert "[Store] Created (policy=NEVER)" in log and "[Store] Unload" not in log
    e.stop()
    with pytest.raises(httpx.TransportError):
        httpx.get(e.url + "/health", timeout=1)

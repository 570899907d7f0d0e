"""The Sketch's edits as a real engine process: ace-server's multipart /synth, /understand
and /vae, their errors and log lines, and what each task does to the audio."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from support.procs import free_port
from test_sketch_support import EngineProcess, parse_multipart, read_wav, started_engine

from cantor_desktop.song import analysis
from cantor_desktop.models import gguf
from cantor_desktop.sketch import latent
from cantor_desktop.sketch.encode import wav_bytes

# one Sketch engine and one 30-s take for the whole module: its tests stay on one xdist worker (./run-tests)
pytestmark = pytest.mark.xdist_group("test_sketch_edits")

SR = 48000
SONG = {
    "caption": "lofi piano",
    "lyrics": "[Instrumental]",
    "output_format": "wav24",
    "duration": 30,
    "bpm": 100,
    "keyscale": "A minor",
    "seed": 5,
}


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    e = started_engine(tmp_path_factory.mktemp("sketch-edits"))
    yield e
    e.stop()


@pytest.fixture(scope="module")
def take(engine):
    """A 30-s Sketch take: (audio, latent bytes)."""
    return synth(engine, SONG)[0]


def takes_of(r) -> list[tuple[np.ndarray, bytes]]:
    parts = parse_multipart(r.headers["content-type"], r.content)
    assert [h["content-type"] for h, _ in parts][1::2] == ["application/octet-stream"] * (
        len(parts) // 2
    )
    return [(read_wav(a)[1], lat) for (_, a), (_, lat) in zip(parts[::2], parts[1::2])]


def synth(engine, req: dict, **files) -> list[tuple[np.ndarray, bytes]]:
    """/synth: JSON, or multipart when files are given (name → (filename, bytes))."""
    if not files:
        return takes_of(engine.result(engine.submit("/synth", req)))
    r = post(engine, "/synth", req, **files)
    assert r.status_code == 200, r.text
    return takes_of(engine.result(r.json()["id"]))


def post(engine, path: str, req: dict | None = None, **files):
    form = {} if req is None else {"request": (None, json.dumps(req), "application/json")}
    form.update(
        {name: (fn, data, "application/octet-stream") for name, (fn, data) in files.items()}
    )
    return engine.client.post(path, files=form)


def lat_file(data: bytes) -> tuple[str, bytes]:
    return ("take.f32", data)


def db(a: np.ndarray, b: np.ndarray) -> float:
    """The largest difference of two signals in dB full scale."""
    return 20 * np.log10(max(float(np.abs(a - b).max()), 1e-12))


def new_lines(engine, before: str) -> str:
    return engine.log()[len(before) :]


# ---------------------------------------------------------------- the protocol


def test_every_take_has_a_latent_with_its_recipe(engine, take):
    audio, lat = take
    assert len(audio) == 30 * SR
    arr = latent.from_bytes(lat)
    assert arr.shape == (750, 64)  # float32 [T, 64], 25 frames a second
    recipe, head = latent.read(arr)
    assert recipe["t"] == "song" and recipe["song"]["seed"] == 5 and head >= 1
    assert recipe["song"]["bpm"] == 100 and recipe["song"]["caption"] == "lofi piano"
    assert (
        np.array_equal(arr[head:], latent.features(audio.astype(np.float32))[head:])
        or np.abs(arr[head:] - latent.features(audio.astype(np.float32))[head:]).max() < 0.05
    )


def test_multipart_errors_are_ace_servers(engine, take):
    _, lat = take
    rep = {"caption": "x", "task_type": "repaint", "repainting_start": 5, "repainting_end": 8}
    cases = [
        (
            post(engine, "/synth", None, src_latents=lat_file(lat)),
            400,
            "Multipart: missing 'request' part",
        ),
        (
            engine.client.post("/synth", files={"request": (None, "{nope")}),
            400,
            "Multipart: invalid JSON in 'request' part",
        ),
        (
            engine.client.post("/synth", files={"request": (None, "[1]")}),
            400,
            "Multipart: invalid JSON in 'request' part",
        ),
        (
            post(engine, "/synth", rep, src_latents=("x.f32", b"\0" * 100)),
            400,
            "src_latents size not a multiple of 64*4 bytes",
        ),
        (
            post(engine, "/synth", rep, src_latents=("x.f32", b"\0" * (256 * 15001))),
            413,
            "src_latents exceeds max frames",
        ),
        (
            post(engine, "/synth", rep, ref_latents=("x.f32", b"\0" * 300)),
            400,
            "ref_latents size not a multiple of 64*4 bytes",
        ),
        (post(engine, "/synth", rep, audio=("a.wav", b"")), 400, "Multipart: empty 'audio' part"),
        (
            post(engine, "/synth", rep, audio=("a.exe", b"MZ\x90\0" + b"\0" * 1000)),
            400,
            "Failed to decode audio",
        ),
        (
            post(engine, "/synth", {**rep, "caption": ""}, src_latents=lat_file(lat)),
            400,
            "Caption is required",
        ),
        (
            post(engine, "/synth", {**rep, "output_format": "wav"}, src_latents=lat_file(lat)),
            400,
            "Invalid output_format (use: mp3, wav16, wav24, wav32)",
        ),
        (
            engine.client.post("/understand", json={}),
            400,
            "Understand requires multipart/form-data",
        ),
        (post(engine, "/understand", {}), 400, "Multipart: missing 'audio' or 'src_latents' part"),
        (engine.client.post("/vae", json={}), 400, "VAE endpoint requires multipart/form-data"),
        (
            post(engine, "/vae", {}),
            400,
            "Multipart: provide exactly one of 'audio' (encode) or 'src_latents' (decode)",
        ),
        (
            post(
                engine,
                "/vae",
                None,
                audio=("a.wav", wav_bytes(np.zeros((100, 2)), "wav16")),
                src_latents=lat_file(lat),
            ),
            400,
            "Multipart: provide exactly one of 'audio' (encode) or 'src_latents' (decode)",
        ),
    ]
    for r, status, message in cases:
        assert (r.status_code, r.json()) == (status, {"error": message})
    # extract, lego and complete need no caption
    ((stem, _),) = synth(
        engine,
        {"task_type": "extract", "track": "bass", "seed": 1, "output_format": "wav16"},
        src_latents=lat_file(lat),
    )
    assert len(stem) == 30 * SR


def test_an_lm_only_folder_answers_501_for_understand_and_vae(tmp_path):
    gguf.write_header_only(tmp_path / "probe-lm.gguf", gguf.ARCH_LM)
    e = EngineProcess(tmp_path, free_port(), tmp_path / "log")
    try:
        e.wait_ready()
        assert "[Server] Pipelines: /lm\n" in e.log()
        for path, message in (
            ("/understand", "Understand requires LM, DiT and VAE models"),
            ("/vae", "VAE endpoint requires a VAE in the registry"),
        ):
            r = e.client.post(path, content=b"{}")  # checked before anything else
            assert (r.status_code, r.json()) == (501, {"error": message})
    finally:
        e.stop()


def test_a_part_counts_only_as_a_file_and_the_job_fails_without_a_source(engine, take):
    _, lat = take
    before = engine.log()
    r = engine.client.post(
        "/synth",
        files={
            "request": (
                None,
                json.dumps(
                    {
                        "caption": "x",
                        "task_type": "repaint",
                        "repainting_start": 1,
                        "repainting_end": 3,
                        "output_format": "wav16",
                    }
                ),
            ),
            "src_latents": (None, lat),
        },
    )  # no filename: a field, ignored
    assert r.status_code == 200
    assert engine.wait_job(r.json()["id"]) == "failed"
    log = engine.wait_log("requires source")
    assert (
        "[Synth-Run] ERROR: task 'repaint' requires source audio or src_latents"
        in log[len(before) :]
    )
    for task, what in (
        ("cover", "latents"),
        ("extract", "latents"),
        ("lego", "src_latents"),
        ("complete", "latents"),
    ):
        job = engine.submit(
            "/synth", {"caption": "x", "task_type": task, "track": "bass", "output_format": "wav16"}
        )
        assert engine.wait_job(job) == "failed"
        assert f"[Synth-Run] ERROR: task '{task}' requires source audio or {what}" in engine.log()
    job = engine.submit("/synth", {"caption": "x", "task_type": "remix"})
    assert engine.wait_job(job) == "failed"
    assert "[Synth-Run] ERROR: unknown task_type 'remix'" in engine.log()


def test_latents_win_over_audio_and_both_are_logged(engine, take):
    audio, lat = take
    other = wav_bytes(np.zeros((SR * 5, 2), dtype=np.float32), "wav16")
    before = engine.log()
    ((out, _),) = synth(
        engine,
        {
            "caption": "harp",
            "task_type": "repaint",
            "repainting_start": 10,
            "repainting_end": 12,
            "output_format": "wav24",
            "seed": 2,
        },
        src_latents=lat_file(lat),
        audio=("other.wav", other),
    )
    log = new_lines(engine, before)
    assert "[Server] Source latents: 750 frames (30.00s), VAE encode skipped" in log
    assert "[Server] Source audio: 5.00s @ 48kHz" in log
    assert len(out) == 30 * SR and db(out[: 9 * SR], audio[: 9 * SR]) < -100


# ---------------------------------------------------------------- repaint and extend


def test_repaint_keeps_the_outside_and_remakes_the_region(engine, take):
    audio, lat = take
    before = engine.log()
    ((out, out_lat),) = synth(
        engine,
        {
            "caption": "jazz trumpet solo",
            "task_type": "repaint",
            "repainting_start": 10,
            "repainting_end": 20,
            "seed": 9,
            "output_format": "wav24",
        },
        src_latents=lat_file(lat),
    )
    assert out.shape == audio.shape
    assert db(out[: int(9.9 * SR)], audio[: int(9.9 * SR)]) < -100  # bit for bit
    assert db(out[int(20.1 * SR) :], audio[int(20.1 * SR) :]) < -100
    inside = slice(11 * SR, 19 * SR)
    assert db(out[inside], audio[inside]) > -20
    level = 20 * np.log10(np.sqrt(np.mean(out[inside] ** 2)) / np.sqrt(np.mean(audio[inside] ** 2)))
    assert abs(level) < 8, level  # at the song's own level
    assert "[Region] 10.0s..20.0s (canvas=30.0s)" in new_lines(engine, before)
    recipe, _ = latent.read(latent.from_bytes(out_lat))
    assert recipe["t"] == "repaint" and recipe["src"]["t"] == "song"
    # the repainted take is a source like any other: the decode gives it back exactly
    r = post(engine, "/vae", {"output_format": "wav24"}, src_latents=lat_file(out_lat))
    decoded = read_wav(engine.result(r.json()["id"]).content)[1]
    assert db(decoded, out) < -100


def test_extend_after_and_before_keep_the_source(engine, take):
    audio, lat = take
    before = engine.log()
    ((after, _),) = synth(
        engine,
        {
            "caption": "lofi piano",
            "task_type": "repaint",
            "repainting_start": 30,
            "repainting_end": 45,
            "seed": 3,
            "output_format": "wav24",
        },
        src_latents=lat_file(lat),
    )
    assert len(after) == 45 * SR and db(after[: 30 * SR], audio) < -100
    tail = after[31 * SR : 43 * SR]
    assert np.sqrt(np.mean(tail**2)) > 0.02  # music, not a fade to silence
    bpm = analysis.estimate_tempo(after[30 * SR :], SR)
    assert abs(bpm - 100) < 1, bpm
    log = new_lines(engine, before)
    assert "[Outpaint] latent pad left=0.0s (0) right=15.0s (375) total=45.0s" in log
    assert "[Region] 30.0s..45.0s (canvas=45.0s)" in log
    ((lead, _),) = synth(
        engine,
        {
            "caption": "lofi piano",
            "task_type": "repaint",
            "repainting_start": -6,
            "repainting_end": 0,
            "seed": 3,
            "output_format": "wav24",
        },
        src_latents=lat_file(lat),
    )
    assert len(lead) == 36 * SR and db(lead[6 * SR :], audio) < -100
    assert np.sqrt(np.mean(lead[SR : 5 * SR] ** 2)) > 0.005
    job = post(
        engine,
        "/synth",
        {
            "caption": "x",
            "task_type": "repaint",
            "repainting_start": 9,
            "repainting_end": 4,
            "output_format": "wav16",
        },
        src_latents=lat_file(lat),
    ).json()["id"]
    assert engine.wait_job(job) == "failed"
    assert "[Region] ERROR: end (4.0) <= start (9.0)" in engine.log()


# ---------------------------------------------------------------- cover


def test_cover_keeps_tempo_key_and_sections_in_new_sounds(engine, take):
    audio, lat = take
    before = engine.log()
    ((cov, cov_lat),) = synth(
        engine,
        {
            "caption": "rock band, electric guitar",
            "seed": 4,
            "task_type": "cover",
            "output_format": "wav24",
        },
        src_latents=lat_file(lat),
    )
    assert len(cov) == len(audio) and db(cov, audio) > -10
    facts = analysis.tempo_key({}, None, cov.astype(np.float32), SR)
    assert (facts["bpm"], facts["key"]) == (100, "A minor")
    recipe, _ = latent.read(latent.from_bytes(cov_lat))
    src_recipe, _ = latent.read(latent.from_bytes(lat))
    assert [s[:3] for s in recipe["song"]["sections"]] == [s[:3] for s in _sections_of(src_recipe)]
    assert recipe["song"]["degrees"] == _degrees_of(src_recipe)  # strength 1: the chords
    assert "audio_cover_strength" not in new_lines(engine, before)
    # strength: the chords go below 0.5; noise: the source is heard under it
    before = engine.log()
    ((low, low_lat),) = synth(
        engine,
        {
            "caption": "rock band, electric guitar",
            "seed": 4,
            "task_type": "cover",
            "audio_cover_strength": 0.3,
            "cover_noise_strength": 0.5,
            "output_format": "wav24",
        },
        src_latents=lat_file(lat),
    )
    log = new_lines(engine, before)
    assert "[Context-Silence] audio_cover_strength=0.30 -> switch at step 2/8" in log
    assert "[Init-Noise] cover_noise_strength=0.50" in log
    low_recipe, _ = latent.read(latent.from_bytes(low_lat))
    assert low_recipe["song"].get("degrees") is None and low_recipe["noise"] == 0.5
    heard = np.corrcoef(low[:, 0], audio[:, 0])[0, 1]  # half of it is the source
    assert heard > 0.6 and heard > np.corrcoef(cov[:, 0], audio[:, 0])[0, 1] + 0.2
    # faithful: the same arrangement in the new sounds
    ((faith, faith_lat),) = synth(
        engine,
        {
            "caption": "rock band, electric guitar",
            "seed": 4,
            "task_type": "cover-nofsq",
            "output_format": "wav24",
        },
        src_latents=lat_file(lat),
    )
    f_recipe, _ = latent.read(latent.from_bytes(faith_lat))
    assert f_recipe["song"]["plan_seed"] == 5


def _sections_of(recipe):
    from cantor_desktop.sketch import render

    song = render.Song.from_json(recipe["song"])
    return [[s.kind, s.start, s.bars] for s in render.plan(song).sections]


def _degrees_of(recipe):
    from cantor_desktop.sketch import render

    return render.plan(render.Song.from_json(recipe["song"])).degrees


# ---------------------------------------------------------------- stems, layers


def test_extract_returns_the_songs_own_part(engine, take):
    from cantor_desktop.sketch import render
    from cantor_desktop.sketch.request import normalise
    from cantor_desktop.sketch.engine import song_from_request

    audio, lat = take
    song = song_from_request(normalise(SONG), 5)
    recipe, _ = latent.read(latent.from_bytes(lat))
    parts = render.render_parts(song, ["drums", "bass"])
    stems = {}
    for track in ("drums", "bass", "brass"):
        before = engine.log()
        ((stem, _),) = synth(
            engine,
            {"task_type": "extract", "track": track, "output_format": "wav32"},
            src_latents=lat_file(lat),
        )
        assert "[Synth-Run] task=extract" in new_lines(engine, before)
        stems[track] = stem
    for track in ("drums", "bass"):
        want = parts[track] * np.float32(recipe["gain"])
        assert np.corrcoef(stems[track].ravel(), want.ravel())[0, 1] > 0.999
        assert db(stems[track], want) < -100  # in the mix's scale
    assert not stems["brass"].any() and len(stems["brass"]) == len(audio)


def test_extract_of_outside_audio_is_a_band_limited_stand_in(engine):
    rng = np.random.default_rng(3)
    noise = (rng.standard_normal((SR * 6, 2)) * 0.1).astype(np.float32)
    ((bass, _),) = synth(
        engine,
        {"task_type": "extract", "track": "bass", "output_format": "wav32"},
        audio=("n.wav", wav_bytes(noise, "wav32")),
    )
    spec = np.abs(np.fft.rfft(bass[:, 0])) ** 2
    freqs = np.fft.rfftfreq(len(bass), 1 / SR)
    assert spec[freqs < 300].sum() / spec.sum() > 0.95


def test_lego_adds_the_named_part_and_complete_the_rest(engine, take):
    audio, lat = take
    ((layered, lego_lat),) = synth(
        engine,
        {
            "caption": "",
            "task_type": "lego",
            "track": "guitar",
            "seed": 8,
            "output_format": "wav24",
        },
        src_latents=lat_file(lat),
    )
    assert len(layered) == len(audio)
    facts = analysis.tempo_key({}, None, layered.astype(np.float32), SR)
    assert (facts["bpm"], facts["key"]) == (100, "A minor")
    ((guitar, _),) = synth(
        engine,
        {"task_type": "extract", "track": "guitar", "output_format": "wav32"},
        src_latents=lat_file(lego_lat),
    )
    assert np.sqrt(np.mean(guitar**2)) > 0.01  # the layer is its own stem
    ((drums, drums_lat),) = synth(
        engine,
        {"task_type": "extract", "track": "drums", "output_format": "wav32"},
        src_latents=lat_file(lat),
    )
    ((full, _),) = synth(
        engine,
        {
            "caption": "lofi hip hop, piano",
            "task_type": "complete",
            "track": "drums",
            "seed": 2,
            "output_format": "wav32",
        },
        src_latents=lat_file(drums_lat),
    )
    assert len(full) == len(audio)
    assert db(full, drums) > -20  # more than the drums now
    region = post(
        engine,
        "/synth",
        {
            "task_type": "lego",
            "track": "strings",
            "seed": 1,
            "repainting_start": 5,
            "repainting_end": 10,
            "output_format": "wav24",
        },
        src_latents=lat_file(lat),
    )
    ((part, _),) = takes_of(engine.result(region.json()["id"]))
    assert db(part[: 5 * SR], audio[: 5 * SR]) < -60 and db(part[10 * SR :], audio[10 * SR :]) < -60
    assert db(part[6 * SR : 9 * SR], audio[6 * SR : 9 * SR]) > -60


# ---------------------------------------------------------------- understand, vae


def test_understand_a_take_and_outside_audio(engine, take):
    audio, lat = take
    before = engine.log()
    r = post(engine, "/understand", None, src_latents=lat_file(lat))
    res = engine.result(r.json()["id"])
    parts = parse_multipart(res.headers["content-type"], res.content)
    assert [h["content-type"] for h, _ in parts] == ["application/json", "application/octet-stream"]
    [heard] = json.loads(parts[0][1])
    assert (heard["bpm"], heard["keyscale"], heard["timesignature"]) == (100, "A minor", "4")
    assert heard["duration"] == 30.0 and "lyrics" not in heard  # sparse: empty
    assert "piano" in heard["caption"] and heard["audio_codes"].startswith("<|audio_code_")
    assert parts[1][1] == lat
    log = new_lines(engine, before)
    for line in (
        "[Server] Understand source: 750 latent frames (30.00s)",
        f"[Server] Job {r.json()['id']} created (understand)",
        "[Understand-Result] bpm: 100",
        "[Understand-Result] keyscale: A minor",
        f"[Server] Job {r.json()['id']} done (understand)",
    ):
        assert line in log
    # outside audio: measured when it comes in; its latent carries what was found
    wav = wav_bytes(audio.astype(np.float32), "wav16")
    r = post(engine, "/understand", {"lm_temperature": 0.2}, audio=("song.wav", wav))
    res = engine.result(r.json()["id"])
    parts = parse_multipart(res.headers["content-type"], res.content)
    [heard] = json.loads(parts[0][1])
    assert (heard["bpm"], heard["keyscale"]) == (100, "A minor")
    assert "audio_codes" not in heard
    recipe, _ = latent.read(latent.from_bytes(parts[1][1]))
    assert recipe["t"] == "audio" and recipe["facts"]["bpm"] == pytest.approx(100, abs=0.5)
    assert "[Server] Understand source: 30.00s @ 48kHz" in engine.log()


def test_vae_encode_is_remembered_and_decode_gives_the_take_back(engine, take):
    audio, lat = take
    rng = np.random.default_rng(7)
    upload = (
        np.sin(np.arange(SR * 12) * 2 * np.pi * 220 / SR)[:, None] * 0.3
        + rng.standard_normal((SR * 12, 2)) * 0.01
    ).astype(np.float32)
    before = engine.log()
    r = post(engine, "/vae", None, audio=("up.wav", wav_bytes(upload, "wav24")))
    job = r.json()["id"]
    res = engine.result(job)
    assert res.headers["content-type"] == "application/octet-stream"
    enc = res.content
    assert len(enc) == 300 * 256  # 12 s: 300 frames
    log = new_lines(engine, before)
    assert f"[Server] Job {job} created (vae encode, 12.00s audio)" in log
    assert re.search(
        r"\[Server\] encode: 576000 audio samples \(12\.00s\) -> 300 latent "
        r"frames, \d+ms",
        log,
    )
    assert f"[Server] Job {job} done (encode)" in log
    # an edit of the encoded upload keeps its own audio outside the region
    ((out, _),) = synth(
        engine,
        {
            "caption": "piano",
            "task_type": "repaint",
            "seed": 1,
            "repainting_start": 4,
            "repainting_end": 6,
            "output_format": "wav32",
        },
        src_latents=lat_file(enc),
    )
    assert db(out[: int(3.9 * SR)], upload[: int(3.9 * SR)]) < -80
    assert db(out[int(6.1 * SR) :], upload[int(6.1 * SR) :]) < -80
    # decode: a take's latent gives the take; an envelope alone gives noise shaped like it
    r = post(engine, "/vae", {"output_format": "wav24"}, src_latents=lat_file(lat))
    job = r.json()["id"]
    back = read_wav(engine.result(job).content)[1]
    assert db(back, audio) < -100
    assert f"[Server] Job {job} created (vae decode, 750 latent frames)" in engine.log()
    env = latent.to_bytes(latent.features(upload))
    r = post(engine, "/vae", {"output_format": "wav16"}, src_latents=lat_file(env))
    noise = read_wav(engine.result(r.json()["id"]).content)[1]
    assert len(noise) == 300 * 1920 and np.abs(noise).max() > 0.5
    # another engine process never held the upload: the envelope stands in, the edit works
    other = EngineProcess(
        engine.log_path.parent / "models", free_port(), engine.log_path.parent / "other-engine.log"
    )
    try:
        other.wait_ready()
        ((out, _),) = synth(
            other,
            {
                "caption": "piano",
                "task_type": "repaint",
                "seed": 1,
                "repainting_start": 4,
                "repainting_end": 6,
                "output_format": "wav32",
            },
            src_latents=lat_file(enc),
        )
        assert len(out) == 12 * SR and np.abs(out[: 3 * SR]).max() > 0.05
        assert "spectral envelope stands in" in other.log()
    finally:
        other.stop()
    big = wav_bytes(np.zeros((8000 * 601, 1), dtype=np.float32), "wav16", sample_rate=8000)
    r = post(engine, "/vae", None, audio=("long.wav", big))
    assert (r.status_code, r.json()) == (413, {"error": "audio exceeds max duration (10 min)"})


def test_a_reference_and_the_fields_are_noted(engine, take):
    audio, lat = take
    before = engine.log()
    ((out, _),) = synth(
        engine,
        {
            "caption": "ambient",
            "lyrics": "[Instrumental]",
            "duration": 10,
            "seed": 3,
            "output_format": "wav16",
            "inference_steps": 12,
            "guidance_scale": 4.5,
            "shift": 2.25,
            "solver": "dpm3m",
        },
        ref_latents=lat_file(lat),
    )
    log = new_lines(engine, before)
    assert "[Server] Reference latents: 750 frames (30.00s), VAE encode skipped" in log
    assert "[Encode-Timbre] Latents in: 750 frames (30.0s), VAE encode skipped" in log
    assert "[Server] Loading synth: DiT=sketch-dit.gguf VAE=sketch-vae.gguf" in log
    assert "inference_steps=12, guidance_scale=4.5, shift=2.25, solver='dpm3m'" in log
    assert "[Resolve-T] seed=3, steps=12, guidance=4.5, shift=2.2, duration=10.0s" in log
    assert "[DiT] Step 12/12" in log and len(out) == 10 * SR
    before = engine.log()
    job = engine.submit(
        "/lm",
        {
            "caption": "x",
            "lyrics": "la la",
            "lm_temperature": 0.6,
            "lm_cfg_scale": 3.5,
            "lm_top_p": 0.8,
            "lm_top_k": 40,
            "lm_negative_prompt": "no drums",
            "use_cot_caption": False,
        },
    )
    assert engine.wait_job(job) == "done"
    log = new_lines(engine, before)
    import zlib

    assert (
        f"lm_temperature=0.6, lm_cfg_scale=3.5, lm_top_p=0.8, lm_top_k=40, "
        f"use_cot_caption=false, negative_prompt=8 chars (crc32 "
        f"{zlib.crc32(b'no drums'):08x})"
    ) in log

"""Edits through a real node and its Sketch engine, end to end: repaint, extend, cover,
understand, uploads, stems, a layer, "same song, new render", and the 4xx for bad values.

One node serves the module (its own CANTOR_HOME); a 60-s Sketch song at 100 BPM in A minor
is the source of every edit. What the engine was sent is read from the Sketch's own log
(``logs/engine-sketch.log``: the lines ace-server prints for each part it received)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from support.node import Node, write_config

from cantor_desktop.song import analysis
from cantor_desktop.sketch import latent, render

# one node and its source song for the whole module: its tests stay on one xdist worker (./run-tests)
pytestmark = pytest.mark.xdist_group("test_node_edits")

SR = 48000
SOURCE = {
    "caption": "lofi piano",
    "duration": 60,
    "bpm": 100,
    "key": "A minor",
    "seed": 5,
    "model": "sketch",
    "format": "wav24",
}


class Running:
    """The module's node, driven from synchronous tests (one event loop per call)."""

    def __init__(self, home: Path):
        self.home = home
        self.node = Node(home)
        asyncio.run(self.node.start())

    def run(self, work):
        async def main():
            async with self.node.client() as c:
                return await work(c)

        return asyncio.run(main())

    def log(self) -> str:
        path = self.home / "logs" / "engine-sketch.log"
        return path.read_text("utf-8", "replace") if path.exists() else ""

    def song(self, request: dict, timeout: float = 120, expect: str = "done") -> dict:
        """Make a song; its record once it ends as ``expect`` (the test fails otherwise)."""

        async def work(c):
            sid = await c.submit_song(request)
            deadline = time.monotonic() + timeout
            while True:
                song = await c.song(sid)
                if song["state"] in ("done", "failed", "cancelled"):
                    return song
                assert time.monotonic() < deadline, song
                await asyncio.sleep(0.05)

        song = self.run(work)
        assert song["state"] == expect, song
        return song

    def edit(self, request: dict, expect: str = "done") -> tuple[dict, str]:
        """An edit, and the engine's log lines written while it ran."""
        before = len(self.log())
        song = self.song(request, expect=expect)
        return song, self.log()[before:]

    def stop(self) -> None:
        asyncio.run(self.node.stop())


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    home = tmp_path_factory.mktemp("edits") / "home"
    home.mkdir()
    write_config(home)
    running = Running(home)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def source(node):
    return node.song(SOURCE)


def audio_of(song: dict, take: int = 1) -> np.ndarray:
    data, rate = sf.read(song["takes"][take - 1]["audio"], dtype="float64", always_2d=True)
    assert rate == SR
    return data


def db(a: np.ndarray, b: np.ndarray) -> float:
    return 20 * np.log10(max(float(np.abs(a - b).max()), 1e-12))


def sidecar(song: dict, take: int = 1) -> dict:
    return json.loads(Path(song["takes"][take - 1]["sidecar"]).read_text("utf-8"))


def of(song: dict, take: int = 1) -> dict:
    return {"song": song["id"], "take": take}


def sent_the_latent(log: str, frames: int) -> None:
    """The engine got the source's latent, not its audio (and encoded nothing)."""
    seconds = frames / 25
    assert (
        f"[Server] Source latents: {frames} frames ({seconds:.2f}s), VAE encode skipped" in log
    ), log
    assert "[Server] Source audio:" not in log and "(vae encode" not in log


# ---------------------------------------------------------------- repaint, extend, cover


def test_repaint_leaves_the_outside_and_changes_the_region(node, source):
    src = audio_of(source)
    song, log = node.edit(
        {
            "caption": "jazz trumpet solo",
            "task": "repaint",
            "source": of(source),
            "region": {"start": 20, "end": 30},
            "seed": 9,
            "model": "sketch",
            "format": "wav24",
        }
    )
    out = audio_of(song)
    assert out.shape == src.shape == (60 * SR, 2)
    assert db(out[: int(19.9 * SR)], src[: int(19.9 * SR)]) < -60
    assert db(out[int(30.1 * SR) :], src[int(30.1 * SR) :]) < -60
    assert db(out[21 * SR : 29 * SR], src[21 * SR : 29 * SR]) > -20  # changed
    sent_the_latent(log, 1500)
    assert "[Region] 20.0s..30.0s (canvas=60.0s)" in log
    meta = sidecar(song)
    assert meta["parent"] == of(source)
    assert meta["engine_request"]["task_type"] == "repaint"
    assert (
        meta["engine_request"]["repainting_start"],
        meta["engine_request"]["repainting_end"],
    ) == (20.0, 30.0)


def test_extend_keeps_the_first_minute(node, source):
    src = audio_of(source)
    song, log = node.edit(
        {
            "caption": "lofi piano",
            "task": "extend",
            "source": of(source),
            "extend": {"after": 30},
            "seed": 4,
            "model": "sketch",
            "format": "wav24",
        }
    )
    out = audio_of(song)
    assert len(out) == 90 * SR and song["takes"][0]["duration"] == pytest.approx(90.0)
    assert db(out[: 60 * SR], src) < -60
    assert np.sqrt(np.mean(out[62 * SR : 86 * SR] ** 2)) > 0.02  # music goes on
    assert abs(analysis.estimate_tempo(out[60 * SR :].astype(np.float32), SR) - 100) < 1
    sent_the_latent(log, 1500)
    assert "[Region] 60.0s..90.0s (canvas=90.0s)" in log


def test_cover_of_a_100_bpm_song_is_at_100_bpm(node, source):
    song, log = node.edit(
        {
            "caption": "rock band, electric guitar, drums",
            "task": "cover",
            "source": of(source),
            "strength": 0.8,
            "seed": 2,
            "model": "sketch",
            "format": "wav24",
        }
    )
    take = song["takes"][0]
    assert take["bpm"] == 100 and take["facts_from"]["bpm"] == "measured"
    assert take["key"] == "A minor"
    assert take["duration"] == pytest.approx(60.0)
    assert db(audio_of(song), audio_of(source)) > -10  # new sounds
    sent_the_latent(log, 1500)
    assert "[Context-Silence] audio_cover_strength=0.80" in log


# ---------------------------------------------------------------- understand, uploads


def test_understand_finds_the_tempo_and_key_of_a_sketch_song(node, source):
    before = len(node.log())
    heard = node.run(lambda c: c.understand(of(source)))
    assert abs(heard["bpm"] - 100) <= 1 and heard["key"] == "A minor"
    assert heard["time_signature"] == 4 and heard["duration"] == pytest.approx(60.0)
    assert heard["caption"] and heard["lyrics"] is None
    log = node.log()[before:]
    assert "[Server] Understand source: 1500 latent frames (60.00s)" in log


def test_an_upload_is_encoded_once_then_sent_as_its_latent(node, source, tmp_path):
    wav = tmp_path / "mine.wav"
    sf.write(str(wav), audio_of(source)[: 30 * SR], SR, subtype="PCM_16")
    before = len(node.log())
    upload = node.run(lambda c: c.upload(wav))
    ref = {"upload": upload["id"]}
    first, _ = node.edit(
        {
            "caption": "piano",
            "task": "repaint",
            "source": ref,
            "region": {"start": 10, "end": 15},
            "seed": 1,
            "model": "sketch",
            "format": "wav24",
        }
    )
    second, _ = node.edit(
        {
            "caption": "synthwave",
            "task": "cover",
            "source": ref,
            "seed": 1,
            "model": "sketch",
            "format": "wav24",
        }
    )
    stem, _ = node.edit(
        {
            "caption": "stem",
            "task": "extract",
            "source": ref,
            "track": "bass",
            "model": "sketch",
            "format": "wav24",
        }
    )
    heard = node.run(lambda c: c.understand(ref))
    log = node.log()[before:]
    assert log.count("(vae encode, 30.00s audio)") == 1, log
    assert log.count("[Server] Source latents: 750 frames (30.00s), VAE encode skipped") == 3
    assert "[Server] Understand source: 750 latent frames (30.00s)" in log
    assert "[Server] Source audio:" not in log
    assert (Path(node.home) / "state" / "uploads" / f"{upload['id']}.sketch.f32").is_file()
    mine, out = audio_of(source)[: 30 * SR], audio_of(first)
    assert db(out[: int(9.9 * SR)], mine[: int(9.9 * SR)]) < -60  # the upload's own audio
    assert db(out[int(15.1 * SR) :], mine[int(15.1 * SR) :]) < -60
    assert second["takes"][0]["bpm"] == 100
    low = audio_of(stem)  # the bass band's stand-in
    spec = np.abs(np.fft.rfft(low[:, 0])) ** 2
    assert spec[: int(300 * len(low) / SR)].sum() / spec.sum() > 0.95
    assert abs(heard["bpm"] - 100) <= 1 and heard["key"] == "A minor"


# ---------------------------------------------------------------- stems, a layer


def test_stems_are_the_parts_the_sketch_rendered(node, source):
    lat = (Path(node.home) / "state" / "latents" / f"{source['id']}_take1.sketch.f32").read_bytes()
    recipe, _ = latent.read(latent.from_bytes(lat))
    song = render.Song.from_json(recipe["song"])
    parts = render.render_parts(song, ["drums", "bass"])
    before = len(node.log())
    for track in ("drums", "bass"):
        stem, log = node.edit(
            {
                "caption": "stem",
                "task": "extract",
                "source": of(source),
                "track": track,
                "model": "sketch",
                "format": "wav24",
            }
        )
        got = audio_of(stem)
        want = parts[track] * recipe["gain"]
        c = np.corrcoef(got.ravel(), want.ravel())[0, 1]
        assert c >= 0.9, (track, c)
        sent_the_latent(log, 1500)
        assert "[Synth-Run] task=extract" in log
        assert sidecar(stem)["engine_request"]["track"] == track
        take = stem["takes"][0]  # a stem has its song's tempo and key, not measured
        assert (take["bpm"], take["key"], take["facts_from"]) == (
            100,
            "A minor",
            {"bpm": "source", "key": "source"},
        )
    assert "(vae encode" not in node.log()[before:]  # a Cantor song: never encoded


def test_lego_guitar_keeps_length_tempo_and_key(node, source):
    song, log = node.edit(
        {
            "caption": "warm strummed guitar",
            "task": "lego",
            "source": of(source),
            "track": "guitar",
            "seed": 3,
            "model": "sketch",
            "format": "wav24",
        }
    )
    out = audio_of(song)
    assert len(out) == 60 * SR
    facts = analysis.tempo_key({}, None, out.astype(np.float32), SR)
    assert (facts["bpm"], facts["key"]) == (100, "A minor")
    sent_the_latent(log, 1500)
    assert "[Synth-Run] task=lego" in log


# ---------------------------------------------------------------- the same song again


def test_same_song_new_render_keeps_the_arrangement(node):
    first = node.song(
        {
            "caption": "synthwave night drive",
            "seed": 21,
            "model": "sketch",
            "lyrics": "[Verse]\nNeon on the highway\nWe drive into the night\n"
            "[Chorus]\nHold on, hold on",
            "format": "wav16",
        }
    )
    codes = sidecar(first)["lm_metadata"]["audio_codes"]
    assert codes.startswith("<|audio_code_")
    again, log = node.edit(
        {
            "caption": "synthwave night drive",
            "seed": 77,
            "model": "sketch",
            "lyrics": "[Verse]\nNeon on the highway\nWe drive into the night\n"
            "[Chorus]\nHold on, hold on",
            "format": "wav16",
            "codes_from": of(first),
        }
    )
    assert "[LM-" not in log  # the LM was skipped
    plans = []
    for song in (first, again):
        lat = (
            Path(node.home) / "state" / "latents" / f"{song['id']}_take1.sketch.f32"
        ).read_bytes()
        recipe, _ = latent.read(latent.from_bytes(lat))
        plans.append((recipe["song"]["seed"], render.plan(render.Song.from_json(recipe["song"]))))
    (seed_a, plan_a), (seed_b, plan_b) = plans
    assert (seed_a, seed_b) == (21, 77)
    assert [(e.start, e.key) for e in plan_a.events] == [(e.start, e.key) for e in plan_b.events]
    assert db(audio_of(first), audio_of(again)) > -40  # a new render all the same


# ---------------------------------------------------------------- bad values


def test_bad_edits_are_refused_naming_the_field(node, source):
    instrumental = node.song({"caption": "tiny", "duration": 10, "seed": 1, "model": "sketch"})
    base = {"caption": "x", "model": "sketch"}
    cases = [
        (
            {"task": "repaint", "source": of(source), "region": {"start": 50, "end": 70}},
            422,
            "region",
        ),
        (
            {"task": "repaint", "source": of(source), "region": {"start": 10, "end": 10.5}},
            422,
            "region",
        ),
        ({"task": "repaint", "source": of(source)}, 422, "region"),
        ({"task": "extend", "source": of(source), "extend": {"after": 560}}, 422, "extend"),
        ({"task": "cover", "source": of(source), "strength": 1.5}, 422, "strength"),
        ({"task": "cover", "source": of(source), "noise": -0.1}, 422, "noise"),
        ({"task": "extract", "source": of(source), "track": "kazoo"}, 422, "track"),
        ({"task": "extract", "source": of(source)}, 422, "track"),
        ({"task": "lego", "source": of(source), "track": "drums | bass"}, 422, "track"),
        ({"task": "cover"}, 422, "source"),
        ({"task": "cover", "source": {"song": "0" * 16}}, 404, "source"),
        ({"task": "cover", "source": of(source) | {"take": 3}}, 422, "source"),
        ({"task": "cover", "source": {"upload": "0123456789abcdef"}}, 404, "source"),
        (
            {
                "task": "repaint",
                "source": of(source),
                "region": {"start": 1, "end": 5},
                "strength": 0.5,
            },
            422,
            "strength",
        ),
        ({"reference": {"upload": "nope"}}, 422, "reference"),
        ({"codes_from": of(instrumental)}, 422, "codes_from"),
        ({"steps": 0}, 422, "steps"),
        ({"solver": "rk4"}, 422, "solver"),
        ({"lm_top_p": 2}, 422, "lm_top_p"),
        ({"adapter_scale": 1.0}, 422, "adapter_scale"),
    ]
    before = len(node.log())

    async def work(c):
        out = []
        async with node.node.http() as http:
            for body, _, _ in cases:
                r = await http.post("/v1/songs", json={**base, **body})
                out.append((r.status_code, r.json()["error"].get("field")))
            r = await http.post("/v1/understand", json={"source": {"song": "0" * 16}})
            out.append((r.status_code, r.json()["error"].get("field")))
            r = await http.post("/v1/understand", json={"source": {"upload": "x"}})
            out.append((r.status_code, r.json()["error"].get("field")))
        return out

    got = node.run(work)
    want = [(status, field) for _, status, field in cases] + [(404, "source"), (422, "source")]
    assert got == want
    assert "created" not in node.log()[before:]  # nothing reached the engine


# ---------------------------------------------------------------- the LM's help


def test_inspire_and_format_through_the_node(node):
    inspired = node.run(lambda c: c.lm(mode="inspire", caption="a sad song about the sea"))
    assert inspired["caption"].startswith("piano ballad") and "melancholic" in inspired["caption"]
    tags = [ln for ln in inspired["lyrics"].splitlines() if ln.startswith("[")]
    assert tags[:2] == ["[Verse 1]", "[Chorus]"] and "sea" in inspired["lyrics"].lower()
    assert inspired["bpm"] and inspired["key"] and inspired["duration"] >= 10
    tidy = node.run(
        lambda c: c.lm(
            mode="format",
            caption="Lofi , piano,PIANO",
            lyrics="verse:\n  hello   world\n\n\n(CHORUS)\noh yeah",
        )
    )
    assert tidy["caption"] == "Lofi, piano"
    assert tidy["lyrics"] == "[Verse]\nHello world\n\n[Chorus]\nOh yeah"


VERSE_2 = "[Verse 2]\nNew lines for the second verse\nSung where the song goes on"


def test_extend_with_new_lyrics_runs_the_lm_on_them_and_keeps_the_song(node, source):
    """A vocal extend: the LM writes codes for the new lines, the new part is rendered
    hearing the song's last 20 s, and the join is repainted with those lines; the song
    itself is kept."""
    src = audio_of(source)
    song, log = node.edit(
        {
            "caption": "lofi piano",  # no lyrics: the song it extends is an instrumental
            "task": "extend",
            "source": of(source),
            "extend": {"after": 20, "lyrics": VERSE_2, "context": 20},
            "seed": 4,
            "model": "sketch",
            "format": "wav24",
        }
    )
    sent = sidecar(song)["engine_request"]
    lm, render, joins = (sent["continuation"][k] for k in ("lm", "render", "joins"))
    assert lm["lyrics"] == VERSE_2 and lm["duration"] == 20.0 and lm["lm_mode"] == "generate"
    assert (lm["bpm"], lm["keyscale"]) == (100, "A minor")  # the song's, not the LM's choice
    assert lm["lm_seed"] == lm["seed"] == 4 and lm["lm_model"]  # the planned LM, named
    assert render["lyrics"] == VERSE_2 and render["audio_codes_count"] > 0
    assert render["ref_audio_s"] == 20.0
    (join,) = joins
    assert join["task_type"] == "repaint" and join["lyrics"] == VERSE_2
    assert (join["repainting_start"], join["repainting_end"]) == (58.0, 62.0)
    assert sent["lyrics"] == VERSE_2
    # the engine ran the LM, heard 20 s of the song, and repainted only the join
    assert "[LM-Phase2]" in log
    assert "[Region] 58.0s..62.0s" in log, log
    out = audio_of(song)
    added = len(out) - len(src)
    assert added > 5 * SR and song["takes"][0]["duration"] == pytest.approx(len(out) / SR)
    assert db(out[: 58 * SR], src[: 58 * SR]) < -60  # the song up to the seam, kept
    assert np.sqrt(np.mean(out[63 * SR :] ** 2)) > 0.02  # and it goes on
    assert song["request"]["extend"]["lyrics"] == VERSE_2


def test_a_sung_extend_of_a_take_that_cannot_be_read_fails_saying_so(node, tmp_path):
    """The node reads the song it extends: a take whose file is no longer audio fails the
    extend with the node's own words, not an engine's."""
    broken = node.song({**SOURCE, "duration": 10, "seed": 9})
    Path(broken["takes"][0]["audio"]).write_bytes(b"RIFF" + b"\0" * 400)
    song, _ = node.edit(
        {
            "caption": "lofi piano",
            "task": "extend",
            "source": of(broken),
            "extend": {"after": 10, "lyrics": VERSE_2},
            "model": "sketch",
        },
        expect="failed",
    )
    assert "could not be read to extend it" in song["error"], song["error"]

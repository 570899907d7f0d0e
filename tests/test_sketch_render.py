"""The sketch's arrangement and synthesis, checked on the plan and on the audio."""

from __future__ import annotations

import math

import numpy as np
import pytest

from test_sketch_support import assert_on_the_beat

from cantor_desktop.models import gguf
from cantor_desktop.sketch import SKETCH_DISPLAY_NAME, ensure_sketch_models, music, render
from cantor_desktop.sketch.engine import expand_tracks, song_from_request
from cantor_desktop.sketch.request import normalise

SR = render.SR


def _song(**kw) -> render.Song:
    base = dict(bpm=120, beats_per_bar=4, tonic=9, minor=True, duration=30.0, seed=1)
    return render.Song(**(base | kw))


def _render(song: render.Song, steps: int = 4) -> np.ndarray:
    r = render.Renderer(song, steps)
    for k in range(steps):
        r.step(k)
    return r.finish()


def test_display_name():
    assert SKETCH_DISPLAY_NAME == "Sketch — built-in, no AI model"


def test_syllables():
    assert music.word_syllables("love") == 1
    assert music.word_syllables("darling") == 2
    assert music.word_syllables("beautiful") == 3
    assert music.lyric_lines("[Verse]\nHello world\n\n[Chorus]\n(ooh)\n我爱你 yeah") == [
        [2, 1],
        [1, 1, 1, 1],
    ]
    assert music.count_syllables("[Instrumental]") == 0


def _sung(p: render.Plan) -> list:
    return [e for e in p.events if e.part == "vocals"]


@pytest.mark.parametrize(
    "lyrics,duration",
    [
        ("[Verse]\nHello darling, can you hear me\nSinging softly\n[Chorus]\nHold on", 30.0),
        ("[Verse]\n" + "many many words in a very long line of lyrics\n" * 12, 10.0),
        ("我爱你\n你爱我", 12.0),
        ("a b c d e f g h i j k l m n o\n" * 3, 2.5),
    ],
)  # the last bar cut short
def test_one_lead_note_per_syllable(lyrics, duration):
    song = _song(lyrics=lyrics, duration=duration)
    p = render.plan(song)
    lead = _sung(p)
    assert len(lead) == music.count_syllables(lyrics)
    assert all(0 <= e.start < p.total for e in lead)
    starts = [e.start for e in lead]
    assert starts == sorted(starts) and len(set(starts)) == len(starts)
    scale_pcs = {(9 + s) % 12 for s in music.MINOR}
    assert {e.key[1] % 12 for e in lead} <= scale_pcs  # in A minor


def test_lines_end_on_the_chord_root_and_a_chorus_sits_higher():
    verse = "[Verse]\n" + "walking on the quiet road tonight\n" * 4
    chorus = "[Chorus]\n" + "walking on the quiet road tonight\n" * 4
    means = []
    for lyrics in (verse, chorus):
        song = _song(lyrics=lyrics, duration=60.0, seed=3)
        p = render.plan(song)
        lead = _sung(p)
        means.append(np.mean([e.key[1] for e in lead]))
        per_line = len(lead) // 4
        bar = song.bar_seconds * SR
        for line in range(4):
            last = lead[(line + 1) * per_line - 1]
            chord = p.chords[int(last.start // bar)]
            assert last.key[1] % 12 == chord[0] % 12  # the chord's root
    assert means[1] > means[0] + 1


def test_no_singing_without_lyrics():
    p = render.plan(_song(lyrics=""))
    assert not _sung(p) and "vocals" not in p.parts


@pytest.mark.parametrize("beats,bpm", [(3, 90), (4, 120), (2, 100), (6, 150)])
def test_bars_follow_time_signature_and_tempo(beats, bpm):
    song = _song(beats_per_bar=beats, bpm=bpm, duration=40.0, seed=4, caption="pop song")
    p = render.plan(song)
    assert p.total == 40 * SR
    bar = song.bar_seconds * SR
    half = bar / (beats * 2)
    bars = math.ceil(40 / song.bar_seconds)
    assert len(p.chords) == len(p.degrees) == bars
    assert sum(s.bars for s in p.sections) == bars
    downbeats = {e.start for e in p.events}
    assert all(round(i * song.bar_seconds * SR) in downbeats for i in range(bars))
    for part in ("drums", "bass"):
        starts = [e.start for e in p.events if e.part == part]
        assert starts, part
        assert all(abs(k / half - round(k / half)) < 1e-3 for k in starts), part
    kicks = [e.start for e in p.events if e.voice == "kick"]
    bars_with_downbeat = {round(k / bar) for k in kicks if abs(k / bar - round(k / bar)) < 1e-3}
    drummed = sum(s.bars for s in p.sections if s.kind not in ("intro", "outro", "breakdown"))
    assert len(bars_with_downbeat) >= drummed  # a kick on every "1"
    scale_pcs = {(9 + s) % 12 for s in music.MINOR}
    bass = [e.key[1] for e in p.events if e.part == "bass"]
    assert {b % 12 for b in bass} <= scale_pcs


def test_rendered_tempo_matches_bpm():
    for bpm, beats in ((96, 4), (128, 4), (72, 3), (110, 2)):
        for seed in (1, 2):
            x = _render(_song(bpm=bpm, beats_per_bar=beats, duration=16.0, seed=seed))
            assert_on_the_beat(x, SR, bpm)


def test_length_levels_and_determinism():
    song = _song(duration=12.5, lyrics="la la la la la la la la")
    a = _render(song)
    assert a.shape == (int(12.5 * SR), 2) and a.dtype == np.float32
    assert np.array_equal(a, _render(song, steps=7))  # steps split the same work
    assert not np.array_equal(
        a, _render(_song(duration=12.5, seed=2, lyrics="la la la la la la la la"))
    )
    n = render.master(a, normalise=True)
    assert abs(np.abs(n).max() - render.HEADROOM) < 1e-6
    quiet = a * np.float32(0.1 / np.abs(a).max())
    assert np.array_equal(render.master(quiet, normalise=False), quiet)  # wav32: as is
    loud = a * np.float32(3.0 / np.abs(a).max())
    assert np.abs(render.master(loud, normalise=False)).max() <= 1.0
    lat = render.latent(n)
    assert lat.shape == (313, 64) and lat.dtype == np.float32 and np.isfinite(lat).all()


def test_request_to_song():
    req = normalise({"caption": "a waltz in D minor", "lyrics": " [instrumental] \n"})
    s = song_from_request(req, 7)
    assert (s.beats_per_bar, s.tonic, s.minor, s.bpm, s.duration, s.lyrics) == (
        3,
        2,
        True,
        90,
        30.0,
        "",
    )
    req = normalise(
        {
            "caption": "x",
            "bpm": 999,
            "duration": 5000,
            "keyscale": "Eb major",
            "timesignature": "6",
            "audio_codes": "<|audio_code_1|>",
        }
    )
    s = song_from_request(req, 1)
    assert (s.bpm, s.duration, s.tonic, s.minor, s.beats_per_bar) == (300, 600.0, 3, False, 6)
    assert s.melody_seed is not None
    tracks = expand_tracks([normalise({"caption": "x", "seed": 10, "synth_batch_size": 20})])
    assert [seed for _, seed in tracks] == list(range(10, 19))


def test_ensure_sketch_models_is_idempotent_and_repairs(tmp_path):
    names = ensure_sketch_models(tmp_path / "m")
    for kind, name in names.items():
        assert gguf.KIND_BY_ARCH[gguf.read_architecture(tmp_path / "m" / name)] == kind
    (tmp_path / "m" / names["vae"]).write_bytes(b"junk")
    before = (tmp_path / "m" / names["dit"]).stat().st_mtime_ns
    assert ensure_sketch_models(tmp_path / "m") == names
    assert gguf.read_architecture(tmp_path / "m" / names["vae"]) == gguf.ARCH_VAE
    assert (tmp_path / "m" / names["dit"]).stat().st_mtime_ns == before


def test_the_lead_sings_the_lyrics_vowels():
    assert music.line_vowels("Hello darling, you are") == ["e", "o", "a", "i", "o", "a"]
    assert music.line_vowels("[Verse] 我爱你") == ["a", "a", "a"]
    lyrics = "[Verse]\nsee the moon\nfar away"
    p = render.plan(_song(lyrics=lyrics))
    assert [e.key[3] for e in _sung(p)] == music.line_vowels("see the moon") + music.line_vowels(
        "far away"
    )
    voices = render.Voices(1)

    def band(vowel, lo, hi):
        w = voices.get(("voice", 57, SR // 2, vowel))
        spec = np.abs(np.fft.rfft(w)) ** 2
        freqs = np.fft.rfftfreq(len(w), 1 / SR)
        return spec[(freqs >= lo) & (freqs < hi)].sum() / spec.sum()

    assert band("i", 1900, 2700) > 3 * band("a", 1900, 2700)  # "ee": a high second formant
    assert band("a", 650, 1300) > 3 * band("i", 650, 1300)  # "ah": a high first formant


@pytest.mark.parametrize("lyrics", ["", "walking in the city lights tonight"])
def test_no_dc_offset(lyrics):
    # the kick's click and first half-cycle push one way; the mix was ~-58 dBFS off centre
    x = render.master(_render(_song(duration=20.0, seed=3, lyrics=lyrics)), normalise=True)
    assert np.abs(x.mean(axis=0, dtype=np.float64)).max() < 1e-4  # below -80 dBFS

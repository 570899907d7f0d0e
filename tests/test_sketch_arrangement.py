"""The Sketch's arrangement, measured on its audio (numpy FFTs of what it renders): the
caption chooses the instruments, the lyrics' tags choose the sections, an instrumental has a
melody, a long song changes as it goes, and tempo and key stay exact."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from support.procs import free_port
from sketch_analysis import (
    band_energy,
    cosine,
    grid_fit,
    in_key_share,
    onsets,
    render_song,
    share_between,
)
from test_sketch_support import EngineProcess, parse_multipart, read_wav

from cantor_desktop.sketch import ensure_sketch_models, music, render
from cantor_desktop.sketch.engine import song_from_request
from cantor_desktop.sketch.request import normalise
from cantor_desktop.sketch.style import style_for

SR = render.SR


def _requested(caption: str, seed: int = 1, **fields) -> render.Song:
    """A song as the engine makes it from a request (caption → style, bpm, key …)."""
    req = normalise(
        {
            "caption": caption,
            "lyrics": "[Instrumental]",
            "duration": 30,
            "seed": seed,
            "output_format": "wav32",
            **fields,
        }
    )
    return song_from_request(req, seed)


def _song(caption: str = "", **kw) -> render.Song:
    base = dict(bpm=110, beats_per_bar=4, tonic=9, minor=True, duration=24.0, seed=1)
    return render.Song(caption=caption, **(base | kw))


# ---------------------------------------------------------------- the caption's sound


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_solo_piano_sits_between_250_hz_and_4_khz(seed):
    x = render_song(_requested("solo piano", seed))
    assert share_between(x, 250, 4000) >= 0.40


def test_captions_naming_other_instruments_sound_different():
    """Cosine similarity of the energy in ten octave bands (20 Hz – 20 kHz).

    The reference for "the same sound" is measured here: two seeds of one caption (same
    tempo and key; other notes, voicings and form) score above 0.9. Captions that name
    other instruments must land clearly outside that: below 0.85, and at least 0.1 below
    the same-caption score of each of the two. (The engine before this arrangement
    ignored the caption: every pair scored 1.0.)"""
    captions = ["solo piano", "808 trap", "epic orchestral trailer", "rain ambient"]
    bands = {
        (c, s): band_energy(render_song(_requested(c, s, bpm=100, keyscale="A minor")))
        for c in captions
        for s in (1, 2)
    }
    same = {c: cosine(bands[c, 1], bands[c, 2]) for c in captions}
    assert min(same.values()) > 0.9, same
    for a, b in itertools.combinations(captions, 2):
        sim = cosine(bands[a, 1], bands[b, 1])
        assert sim < 0.85 and sim < min(same[a], same[b]) - 0.1, (a, b, sim, same)


def test_the_engine_plays_the_caption(tmp_path):
    """Through the real engine process and its HTTP API: the caption reaches the render."""
    ensure_sketch_models(tmp_path / "models")
    engine = EngineProcess(tmp_path / "models", free_port(), tmp_path / "engine.log")
    try:
        engine.wait_ready()
        audio = {}
        for caption in ("solo piano", "808 trap"):
            r = engine.result(
                engine.submit(
                    "/synth",
                    {
                        "caption": caption,
                        "lyrics": "[Instrumental]",
                        "duration": 20,
                        "seed": 4,
                        "bpm": 100,
                        "keyscale": "A minor",
                        "output_format": "wav16",
                    },
                )
            )
            [(_, wav), _] = parse_multipart(r.headers["content-type"], r.content)
            audio[caption] = read_wav(wav)[1]
    finally:
        engine.stop()
    assert share_between(audio["solo piano"], 250, 4000) >= 0.40
    assert share_between(audio["808 trap"], 250, 4000) < 0.35
    assert cosine(band_energy(audio["solo piano"]), band_energy(audio["808 trap"])) < 0.6


@pytest.mark.parametrize(
    "caption,present,absent",
    [
        ("solo piano", {"keyboard"}, {"drums", "bass", "fx", "strings", "synth"}),
        ("808 trap", {"drums", "bass"}, {"strings", "guitar"}),
        ("epic orchestral trailer", {"strings", "brass", "percussion", "fx"}, {"guitar", "synth"}),
        ("rain ambient", {"fx", "synth"}, {"drums", "guitar"}),
        ("lo-fi piano", {"keyboard", "drums", "bass", "fx"}, {"brass", "guitar"}),
        ("dreamy synthwave", {"synth", "drums", "bass"}, {"strings", "guitar", "brass"}),
        ("rock anthem with electric guitar", {"guitar", "drums", "bass"}, {"strings"}),
        ("jazz trio, no drums", {"keyboard", "bass"}, {"drums"}),
        ("acoustic guitar and strings", {"guitar", "strings"}, {"synth"}),
        ("choir and brass", {"backing_vocals", "brass"}, {"guitar"}),
        ("flute over rain", {"woodwinds", "fx"}, set()),
        ("rock song with a guitar solo", {"guitar", "drums", "bass"}, {"strings"}),
        ("cello solo", {"strings"}, {"drums", "bass", "keyboard"}),
    ],
)
def test_the_caption_chooses_the_parts(caption, present, absent):
    p = render.plan(_song(caption, duration=60.0))
    assert present <= set(p.parts), (caption, p.parts, p.style)
    assert not absent & set(p.parts), (caption, p.parts, p.style)


def test_textures_and_instruments_are_the_voices_named():
    voices = {e.voice for e in render.plan(_song("808 trap", duration=60.0)).events}
    assert "808" in voices
    rain = render.plan(_song("rain ambient", duration=60.0))
    assert {e.key[1] for e in rain.events if e.voice == "texture"} == {"rain"}
    assert "hit" in {e.voice for e in render.plan(_song("epic trailer", duration=60.0)).events}
    assert "vinyl" in style_for("lo-fi beat").textures
    # the rain is audible: most of its part's energy above 600 Hz, a real share of the mix
    song = _song("rain ambient", duration=20.0)
    parts = render.render_parts(song, ["fx"])
    assert share_between(parts["fx"], 600, 20000) > 0.8
    mix = render_song(song)
    assert np.sum(parts["fx"].astype(np.float64) ** 2) > 0.1 * np.sum(mix.astype(np.float64) ** 2)


def test_a_caption_without_instruments_gets_a_genre_palette():
    for caption in ("a song", "something for a sunday"):
        s = style_for(caption, 3)
        assert s.drums != "none" and s.bass != "none" and s.chords and s.lead
    assert style_for("lofi beat").genre == "lofi" and style_for("lofi beat").lead == "epiano"
    assert style_for("lofi piano").lead == "piano"


# ---------------------------------------------------------------- melody and form


def test_an_instrumental_has_a_melody():
    song = _song("pop song", duration=120.0)
    p = render.plan(song)
    lead = [e for e in p.events if e.voice == "synth" and e.part == "synth"]
    assert len(lead) >= 40
    bar = song.bar_seconds * SR
    sections_with_tune = {
        s.kind
        for s in p.sections
        if any(round(s.start * bar) <= e.start < round(s.end * bar) for e in lead)
    }
    assert {"verse", "chorus"} <= sections_with_tune
    scale_pcs = {(9 + s) % 12 for s in music.MINOR}
    assert {e.key[1] % 12 for e in lead} <= scale_pcs
    half = song.beat_seconds / 2 * SR
    assert all(abs(e.start / half - round(e.start / half)) < 1e-3 for e in lead)
    # a motif: every chorus plays the same tune (relative to its first bar), the verse another

    def tune(section):
        a, b = round(section.start * bar), round(section.end * bar)
        return [(round((e.start - a) / half), e.key[1]) for e in lead if a <= e.start < b]

    def opening(section):  # its first three bars (the cadence may vary)
        return [n for n in tune(section) if n[0] < 3 * 2 * song.beats_per_bar]

    choruses = [s for s in p.sections if s.kind == "chorus" and s.bars >= 4]
    verse = next(s for s in p.sections if s.kind == "verse")
    assert len(choruses) >= 2 and len(opening(choruses[0])) >= 4
    assert all(opening(c) == opening(choruses[0]) for c in choruses)
    assert [m for _, m in opening(verse)] != [m for _, m in opening(choruses[0])]
    # and it sounds: the lead part alone is loud enough and in the key
    parts = render.render_parts(song, ["synth"])
    assert np.abs(parts["synth"]).max() > 0.05
    assert in_key_share(parts["synth"], 9, True) > 0.9


LYRICS = """[Intro]
[Verse 1]
Walking down the river where the city lights are low
Every little window has a story we don't know
[PRE CHORUS]
Hold your breath and count to three
(Chorus)
Hold on, hold on, the morning's coming home
Hold on, hold on, you will never be alone
[Bridge]
Slowly now
[Guitar Solo]
[Hook]
Hold on, hold on, the morning's coming home
[Outro]
"""


def test_the_lyrics_tags_choose_the_sections():
    song = _song("pop song", lyrics=LYRICS, duration=120.0, bpm=100)
    p = render.plan(song)
    kinds = [s.kind for s in p.sections]
    assert kinds == ["intro", "verse", "pre", "chorus", "bridge", "solo", "chorus", "outro"]
    bar = song.bar_seconds * SR
    sung = [e for e in p.events if e.part == "vocals"]
    assert len(sung) == music.count_syllables(LYRICS)
    by_kind = {}
    for e in sung:
        section = next(
            s for s in p.sections if round(s.start * bar) <= e.start < round(s.end * bar)
        )
        by_kind.setdefault(section.kind, []).append(e.key[1])
    assert set(by_kind) == {"verse", "pre", "chorus", "bridge"}  # nothing sung elsewhere
    assert np.mean(by_kind["chorus"]) > np.mean(by_kind["verse"]) + 2  # a chorus sits higher
    # the [Guitar Solo] has an instrument's melody, no voice
    solo = next(s for s in p.sections if s.kind == "solo")
    in_solo = [e for e in p.events if round(solo.start * bar) <= e.start < round(solo.end * bar)]
    assert not [e for e in in_solo if e.part == "vocals"]
    assert any(e.voice == "piano" and len(e.key[1]) == 1 for e in in_solo)  # a tune

    # on the audio: the chorus is louder and brighter than the verse, the bridge drops the
    # groove to half time
    x = render_song(song)
    attacks = onsets(x, rel=0.1)  # one threshold for the whole song

    def section_audio(kind):
        s = next(s for s in p.sections if s.kind == kind)
        return x[round(s.start * bar) : round(s.end * bar)]

    def rms_db(a):
        return 10 * np.log10(np.mean(a.astype(np.float64) ** 2))

    def rate(kind):
        s = next(s for s in p.sections if s.kind == kind)
        inside = (attacks >= s.start * bar / SR) & (attacks < s.end * bar / SR)
        return np.count_nonzero(inside) / (s.bars * song.bar_seconds)

    def highs_db(a):  # energy per second above 4 kHz
        return 10 * np.log10(share_between(a, 4000, 20000) * np.mean(a.astype(np.float64) ** 2))

    verse, chorus, bridge = (section_audio(k) for k in ("verse", "chorus", "bridge"))
    assert rms_db(chorus) > rms_db(verse) + 2
    assert highs_db(chorus) > highs_db(verse) + 2
    assert rate("bridge") < rate("chorus")


@pytest.mark.parametrize(
    "tag,kind",
    [
        ("Verse 2", "verse"),
        ("PRE-CHORUS", "pre"),
        ("Prechorus", "pre"),
        ("Pre Chorus", "pre"),
        ("Build-up", "pre"),
        ("Chorus x2", "chorus"),
        ("Hook", "chorus"),
        ("Refrain", "chorus"),
        ("Post-Chorus", "chorus"),
        ("Drop", "chorus"),
        ("Bridge", "bridge"),
        ("Middle 8", "bridge"),
        ("Intro", "intro"),
        ("Outro", "outro"),
        ("Ending", "outro"),
        ("Coda", "outro"),
        ("Instrumental", "solo"),
        ("Interlude", "solo"),
        ("Guitar Solo", "solo"),
        ("Breakdown", "breakdown"),
        ("Break", "breakdown"),
    ],
)
def test_section_tag_spellings(tag, kind):
    assert music.section_kind(tag) == kind
    blocks = music.lyric_blocks(f"[{tag}]\nla la la\n")
    assert blocks == [(kind, [("la la la", [1, 1, 1])])]


def test_untagged_lyrics_get_verses_and_a_chorus():
    lyrics = "one line here\nand another\n\nsing it again\n\nsecond verse now\n\nsing it again"
    assert [k for k, _ in music.lyric_blocks(lyrics)] == ["verse", "chorus", "verse", "chorus"]


@pytest.mark.parametrize(
    "seconds,bpm,beats",
    [(30, 120, 4), (60, 90, 4), (600, 128, 4), (90, 96, 3), (45, 150, 6), (20, 70, 2)],
)
def test_a_generated_form_fills_the_song(seconds, bpm, beats):
    song = _song(bpm=bpm, beats_per_bar=beats, duration=float(seconds))
    p = render.plan(song)
    bars = math.ceil(seconds / song.bar_seconds - 1e-9)
    assert sum(s.bars for s in p.sections) == bars
    assert [s.start for s in p.sections] == list(
        itertools.accumulate([0] + [s.bars for s in p.sections[:-1]])
    )
    kinds = [s.kind for s in p.sections]
    if bars >= 12:
        assert kinds[0] == "intro" and kinds[-1] == "outro" and "chorus" in kinds
    if bars >= 100:
        assert {"verse", "pre", "chorus"} <= set(kinds) and len(set(kinds)) >= 6


@pytest.fixture(scope="module")
def ten_minutes():
    song = _song("pop song", duration=600.0, bpm=120)
    return song, render.plan(song), render.master(render_song(song), normalise=True)


@pytest.mark.xdist_group("test_sketch_arrangement")  # shares the module's ten_minutes
def test_a_ten_minute_song_has_four_audibly_different_sections(ten_minutes):
    """Each section measured on the audio alone (the plan only says where it starts):
    loudness, spectral shape (level in eight octave bands, 40 Hz – 10 kHz, relative to the
    section's own total) and attacks per second. Two sections count as audibly different
    when their loudness differs by 3 dB or more, or their shapes by 3 dB RMS over the bands,
    or one has 1.5 times the attacks of the other (a level step of 3 dB is ~3 just-noticeable
    differences). Repeats of one kind of section must stay alike (under 1 dB), so the
    differences come from the arrangement, not from chance."""
    song, p, x = ten_minutes
    bar = song.bar_seconds * SR
    edges = [40, 80, 160, 320, 640, 1280, 2560, 5120, 10240]
    attacks = onsets(x, rel=0.1)
    feats = []
    for s in p.sections:
        a, b = round(s.start * bar), min(round(s.end * bar), len(x))
        e = band_energy(x[a:b], edges)
        loud = 10 * np.log10(np.mean(x[a:b].astype(np.float64) ** 2))
        rate = np.count_nonzero((attacks >= a / SR) & (attacks < b / SR)) / ((b - a) / SR)
        feats.append((s, loud, 10 * np.log10(e / e.sum() + 1e-12), rate))

    def different(f, g):
        return (
            abs(f[1] - g[1]) >= 3
            or np.sqrt(np.mean((f[2] - g[2]) ** 2)) >= 3
            or max(f[3], g[3]) >= 1.5 * max(min(f[3], g[3]), 0.1)
        )

    firsts = {}
    for f in feats:
        firsts.setdefault(f[0].kind, f)
    distinct: list = []
    for f in sorted(firsts.values(), key=lambda f: f[1]):
        if all(different(f, g) for g in distinct):
            distinct.append(f)
    assert len(distinct) >= 4, [(f[0].kind, round(f[1], 1), round(f[3], 1)) for f in feats]
    # repeats alike: the middle choruses (not the first, not the biggest last one)
    mid = [
        f
        for f in feats
        if f[0].kind == "chorus" and 1 < f[0].number and not f[0].last and f[0].bars == 8
    ]
    assert len(mid) >= 3
    assert max(f[1] for f in mid) - min(f[1] for f in mid) < 1.0


@pytest.mark.xdist_group("test_sketch_arrangement")  # shares the module's ten_minutes
def test_a_ten_minute_song_keeps_tempo_and_key(ten_minutes):
    song, p, x = ten_minutes
    assert x.shape == (600 * SR, 2)
    for minute in (1, 5, 9):
        part = x[minute * 60 * SR : (minute + 1) * 60 * SR]
        t = onsets(part)
        assert len(t) >= 40 and grid_fit(t, 120) >= 0.85, minute
        assert in_key_share(part, 9, True) > 0.8, minute


# ---------------------------------------------------------------- tempo and key

STYLES = [
    "solo piano",
    "808 trap",
    "epic orchestral trailer",
    "lo-fi piano",
    "jazz trio",
    "acoustic folk",
    "rock anthem",
    "dreamy synthwave",
    "ambient pads",
    "deep house",
    "waltz with strings",
]


@pytest.mark.parametrize("caption", STYLES)
@pytest.mark.parametrize("bpm,beats", [(96, 4), (72, 3), (150, 6)])
def test_every_style_keeps_the_tempo(caption, bpm, beats):
    """Attacks (spectral-flux onsets) fall on the tempo's grid, and not on one 6 % off.
    The grid is the half beat, a quarter beat for trap's sixteenth-note hats."""
    song = _song(caption, bpm=bpm, beats_per_bar=beats, duration=24.0, seed=2)
    t = onsets(render_song(song))
    fine = bpm * (2 if style_for(caption).drums == "trap" else 1)
    assert len(t) >= 6, t
    assert grid_fit(t, fine) >= 0.8, (caption, t)
    assert grid_fit(t, bpm * 1.06) <= 0.35 and grid_fit(t, bpm * 0.94) <= 0.35


@pytest.mark.parametrize(
    "caption",
    [
        "pop song",
        "lo-fi piano",
        "epic orchestral trailer",
        "808 trap",
        "rain ambient",
        "rock anthem",
        "jazz trio",
    ],
)
@pytest.mark.parametrize("tonic,minor", [(9, True), (2, False), (6, True)])
def test_energy_stays_in_the_key(caption, tonic, minor):
    """Chance (noise, or notes anywhere) puts 7/12 = 58 % of the tonal energy on a key's
    pitch classes; the pitched parts put over 90 % there, the whole mix (drums, noise
    textures and all) over 80 %."""
    song = _song(caption, tonic=tonic, minor=minor, duration=20.0)
    parts = render.render_parts(song)
    mix = sum(parts.values())
    pitched = sum(a for k, a in parts.items() if k not in ("drums", "percussion", "fx"))
    assert in_key_share(pitched, tonic, minor) > 0.9
    assert in_key_share(mix, tonic, minor) > 0.8


# ---------------------------------------------------------------- parts (stems)


def test_the_mix_is_the_sum_of_its_parts():
    song = _song(
        "pop song with strings and choir",
        lyrics="[Verse]\nla la la la\n[Chorus]\nhold on hold on",
        duration=16.0,
    )
    mix = render_song(song)
    parts = render.render_parts(song)
    assert {"vocals", "drums", "bass", "strings", "backing_vocals"} <= set(parts)
    assert set(parts) <= set(render.PARTS)
    for name, a in parts.items():
        assert a.shape == mix.shape and np.abs(a).max() > 1e-3, name
    total = sum(parts.values())
    assert np.abs(total - mix).max() < 1e-5 * np.abs(mix).max() + 1e-6
    # a part alone, again, is the same part; two parts together are their sum
    assert np.array_equal(render_song(song, parts={"drums"}), parts["drums"])
    both = render_song(song, parts={"drums", "bass"})
    assert np.abs(both - parts["drums"] - parts["bass"]).max() < 1e-6
    # the mastered mix scales every part by one gain
    gain = render.master_gain(mix)
    assert np.allclose(render.master(mix.copy(), normalise=True), mix * np.float32(gain))
    with pytest.raises(ValueError, match="unknown part"):
        render.Renderer(song, 1, parts={"kazoo"})


def test_same_seed_same_audio_other_seed_other_audio():
    song = _song("lo-fi piano with rain", duration=10.0)
    a = render_song(song)
    assert np.array_equal(a, render_song(song))
    b = render_song(_song("lo-fi piano with rain", duration=10.0, seed=2))
    assert not np.array_equal(a, b)

"""The Sketch hears "solo", "no drums", "without vocals" and the instruments named wherever
they sit in a caption of any length — checked on what it renders: which parts sound (each
part rendered alone, as its stems are) and where the mix's energy lies (numpy FFTs)."""

from __future__ import annotations

import numpy as np
import pytest

from cantor_desktop.sketch import caption as caption_words
from cantor_desktop.sketch import render
from cantor_desktop.sketch.engine import song_from_request
from cantor_desktop.sketch.request import normalise
from cantor_desktop.sketch.style import style_for

LYRICS = (
    "[Verse]\nwalking home beneath the streetlights\ncounting every window glowing\n"
    "[Chorus]\nhold on hold on to the summer\nhold on hold on we are younger"
)


def _song(caption: str, seed: int = 1, lyrics: str = "[Instrumental]", duration: float = 30):
    """The song the engine makes from a request with this caption (style, tempo, key …)."""
    req = normalise(
        {
            "caption": caption,
            "lyrics": lyrics,
            "duration": duration,
            "seed": seed,
            "output_format": "wav32",
        }
    )
    return song_from_request(req, seed)


def sounding(song, floor: float = 1e-3) -> set[str]:
    """The parts that sound: each rendered alone, kept when it holds more than ``floor`` of
    the energy of all the parts together."""
    parts = render.render_parts(song)
    energy = {n: float(np.sum(a.astype(np.float64) ** 2)) for n, a in parts.items()}
    total = sum(energy.values()) or 1.0
    return {n for n, e in energy.items() if e > floor * total}


SOLO_PIANO = (
    "a slow, melancholic solo piano piece with soft rain in the background, intimate, "
    "cinematic, building gently to a tender ending"
)


@pytest.mark.parametrize("seed", [1, 2])
def test_a_long_solo_piano_caption_is_a_piano_alone_with_its_rain(seed):
    song = _song(SOLO_PIANO, seed)
    assert sounding(song) == {"keyboard", "fx"}  # the piano, and the rain it asked for
    plan = render.plan(song)
    assert {e.voice for e in plan.events if e.part == "fx"} == {"texture"}  # no hits, swells
    assert {e.key[1] for e in plan.events if e.part == "fx"} == {"rain"}
    # the same words without "solo": the cinematic band plays, its low strings and drums too
    band = sounding(_song(SOLO_PIANO.replace("solo piano", "piano"), seed))
    assert {"bass", "percussion", "keyboard"} <= band


@pytest.mark.parametrize(
    "text",
    [
        "piano solo, melancholic, cinematic, late at night, soft rain on the window",
        "intimate and cinematic: a lone piano, rain outside, slow, tender, a gentle ending",
        "tender, cinematic, a dreamy solo piano piece that builds gently, rain, nostalgic",
        "just a piano, melancholic and slow, cinematic, rain in the background",
    ],
)
def test_solo_is_heard_in_any_place_and_spelling(text):
    assert sounding(_song(text)) == {"keyboard", "fx"}, style_for(text)


def test_no_drums_just_pads_and_a_cello():
    song = _song("no drums, just warm pads and a cello, slow and wide, a quiet film scene")
    assert sounding(song) == {"synth", "strings"}


@pytest.mark.parametrize(
    "text,present,absent",
    [
        (
            (
                "lo-fi hip hop beat with dusty vinyl and a mellow electric piano, no bass, late "
                "night study session, relaxed and warm"
            ),
            {"drums", "keyboard", "fx"},
            {"bass"},
        ),
        (
            (
                "a warm jazz trio in a late-night lounge, brushed drums, upright bass and piano, "
                "no brass, smoky and intimate"
            ),
            {"drums", "bass", "keyboard"},
            {"brass"},
        ),
        (
            (
                "dreamy synthwave at midnight, neon city, driving arpeggios, without drums and "
                "bass, nostalgic, slow build"
            ),
            {"synth"},
            {"drums", "bass", "percussion"},
        ),
        (
            "an indie rock song without drums, bass or vocals, just jangly guitars, hazy summer",
            {"guitar"},
            {"drums", "bass", "vocals", "keyboard"},
        ),
        (
            "hip hop beat, boom bap, no piano, dusty and laid back, head-nodding groove",
            {"drums", "bass"},
            {"keyboard"},
        ),
        (
            "epic cinematic trailer with a huge choir and brass, no percussion, rising tension",
            {"brass", "backing_vocals"},
            {"drums", "percussion"},
        ),
        # controls: "solo" as a passage in a band, a drum kit's part refused, not the kit
        (
            "an energetic rock song with a blazing guitar solo, driving drums and bass",
            {"guitar", "drums", "bass"},
            set(),
        ),
        ("dark trap beat with heavy 808s and eerie bells, no hi-hats", {"drums", "bass"}, set()),
        (
            "no drums and a soft bass under a lonely piano, late night",
            {"bass", "keyboard"},
            {"drums"},
        ),
    ],
)
def test_the_parts_named_and_refused_are_the_parts_that_sound(text, present, absent):
    heard = sounding(_song(text))
    assert present <= heard, (heard, style_for(text))
    assert not absent & heard, (heard, style_for(text))


def test_without_vocals_the_tune_of_the_words_is_played_not_sung():
    caption = "an upbeat pop song without vocals, bright synths and a punchy beat, summer"
    song = _song(caption, lyrics=LYRICS)
    heard = sounding(song)
    assert "vocals" not in heard and "backing_vocals" not in heard
    sung = _song("an upbeat pop song, bright synths and a punchy beat, summer", lyrics=LYRICS)
    assert "vocals" in sounding(sung)
    # the lead plays where the voice would sing: its part is louder in the sung bars than
    # it is in the song that sings them
    p_plain, p_played = render.plan(sung), render.plan(song)
    sung_at = {e.start for e in p_plain.events if e.part == "vocals"}
    played = [e for e in p_played.events if e.start in sung_at and e.part == "synth"]
    assert len(played) >= 0.9 * len(sung_at) and all(e.voice != "voice" for e in played)


def test_a_caption_refuses_as_musicians_write_it():
    reading = caption_words.read(
        "without drums, bass or vocals; a soft piano, no strings or pads, drumless anyway"
    )
    assert reading.refused == {"drums", "bass", "vocals", "strings", "pad"}
    assert reading.instruments == ("piano",)
    assert caption_words.read("no drums and a soft bass").bass == ""  # asked for again
    assert caption_words.read("no guitars, organ").refused == {"guitar", "eguitar"}
    assert caption_words.read("a cappella choir").refused == {"drums", "bass"}
    assert not caption_words.read("not a ballad, a piano and strings").refused  # nothing named

"""Keys as musicians spell them (cantor_desktop/song/musical_keys.py): any spelling read, one written;
no # in a file name; an old sidecar still reads; every place a key becomes text agrees."""

from __future__ import annotations

import json

import pytest

from cantor_desktop.song import analysis, musical_keys
from cantor_desktop.song import naming
from cantor_desktop.export.tags import SongMeta
from cantor_desktop.sketch import music

# the usual spelling of all 24 keys: fewer accidentals; at the ties F# major and Eb minor
USUAL = {
    "major": ["C", "Db", "D", "Eb", "E", "F", "F#", "G", "Ab", "A", "Bb", "B"],
    "minor": ["C", "C#", "D", "Eb", "E", "F", "F#", "G", "G#", "A", "Bb", "B"],
}


def test_each_key_has_one_usual_spelling():
    for key in musical_keys.ALL:
        assert key.name == f"{USUAL[key.mode][key.tonic]} {key.mode}"
        assert musical_keys.parse(key.name) == key  # and reads back
        assert musical_keys.parse(key.display) == key
        assert musical_keys.parse(key.short) == key
        assert musical_keys.parse(key.file_text) == key
    assert len({k.name for k in musical_keys.ALL}) == 24


@pytest.mark.parametrize(
    "typed",
    [
        "D# minor",
        "Eb minor",
        "E♭m",
        "E♭ minor",
        "eb minor",
        "Ebm",
        "D#m",
        "d♯ min",
        "Ebmin",
        "E flat minor",
        "E-flat minor",
        "D sharp minor",
        "EB MINOR",
        "Eb moll",
    ],
)
def test_any_spelling_is_read_and_written_the_usual_way(typed):
    key = musical_keys.parse(typed)
    assert (key.name, key.display, key.short, key.file_text) == (
        "Eb minor",
        "E♭ minor",
        "Ebm",
        "Ebm",
    )


def test_sharp_keys_keep_their_sharps_but_never_a_hash_in_a_file_name():
    fsharp_minor = musical_keys.parse("Gb minor")  # nine flats: nobody writes it so
    assert fsharp_minor.name == "F# minor" and fsharp_minor.display == "F♯ minor"
    assert fsharp_minor.short == "F#m"  # ID3 TKEY's notation
    assert fsharp_minor.file_text == "Fsharpm"
    assert (
        musical_keys.parse("Gb major").name == "F# major"
        and musical_keys.parse("C# major").name == "Db major"
    )
    assert (
        musical_keys.parse("A# minor").name == "Bb minor"
        and musical_keys.parse("Ab minor").name == "G# minor"
    )
    assert musical_keys.parse("Cb major").name == "B major"  # seven flats: a key, spelt as B major
    for key in musical_keys.ALL:
        assert "#" not in key.file_text and key.file_text.isascii() and key.file_text.isalnum()


@pytest.mark.parametrize("text", ["H minor", "E## major", "Ebmx", "", "minor", "the key of C", 7])
def test_what_is_no_key_is_none(text):
    assert musical_keys.parse(text) is None and musical_keys.spell(text) is None
    assert musical_keys.display(text) == ("" if text is None else str(text))


def test_a_note_alone_is_its_major_key_unless_a_mode_is_needed():
    assert musical_keys.parse("Bb").name == "Bb major"
    assert musical_keys.parse("Bb", need_mode=True) is None


def test_the_sketch_and_the_analysis_spell_as_musicians_do():
    assert music.key_name(3, True) == "Eb minor"  # was "D# minor"
    assert analysis.key_name(3, True) == "Eb minor"
    assert music.find_key("a dark ballad in D# minor, slow") == (3, True)
    assert music.find_key("piano in E♭m with rain") == (3, True)
    assert music.find_key("a minor thing") is None  # "a minor" needs a capital or "key"
    # what the LM or an old record says is written the usual way in a take's facts
    facts = analysis.tempo_key({"bpm": 100}, {"key": "D# minor"}, None)
    assert facts["key"] == "Eb minor" and facts["facts_from"]["key"] == "lm"


def _sidecar(tmp_path, key: str):
    audio = tmp_path / "2026-01-01_1200_dark-piano_seed1.wav"
    audio.write_bytes(b"")
    audio.with_suffix(".json").write_text(
        json.dumps(
            {
                "cantor_song": 1,
                "id": "0123456789abcdef",
                "take": 1,
                "takes": 1,
                "request": {"caption": "dark piano", "key": key, "bpm": 70},
                "seed": 1,
                "model": "sketch",
                "bpm": 70,
                "key": key,
                "facts_from": {"bpm": "asked", "key": "asked"},
            }
        )
    )
    return audio


def test_an_old_sidecar_written_with_sharps_still_reads_and_exports_as_e_flat_minor(tmp_path):
    meta = SongMeta.beside(_sidecar(tmp_path, "D# minor"))
    assert meta.key == "Eb minor" and meta.key_short == "Ebm"
    name = naming.render(naming.DEFAULT_PATTERN, meta.name_fields())
    assert name == "dark-piano_70bpm_Ebm_take1"


def test_a_sharp_key_is_spelt_out_in_the_file_name_and_kept_in_the_tag(tmp_path):
    meta = SongMeta.beside(_sidecar(tmp_path, "F# minor"))
    assert meta.key_short == "F#m"
    assert naming.render(naming.DEFAULT_PATTERN, meta.name_fields()) == (
        "dark-piano_70bpm_Fsharpm_take1"
    )


def test_the_compose_list_offers_each_key_once_as_the_app_shows_it():
    from cantor_desktop.views.compose_form import KEYS

    assert len(KEYS) == 24 and "E♭ minor" in KEYS and "F♯ major" in KEYS
    assert "D# minor" not in KEYS and "D♯ minor" not in KEYS
    assert [musical_keys.parse(k).display for k in KEYS] == list(KEYS)

"""The song request's rules: each bad field is named; the sentinel in every spelling."""

import pytest

from cantor_desktop.song_request import RequestError, is_instrumental, normalise_key, validate


@pytest.mark.parametrize("lyrics", [None, "", "   ", "[Instrumental]", "[instrumental]",
                                    "  [INSTRUMENTAL]\n", "\t[InStRuMeNtAl] "])
def test_every_spelling_of_the_sentinel_is_instrumental(lyrics):
    assert is_instrumental(lyrics)
    assert validate({"caption": "lofi", "lyrics": lyrics}).lyrics == "[Instrumental]"


def test_lyrics_are_not_instrumental():
    assert not is_instrumental("[Verse]\nhello")
    assert not is_instrumental("[Instrumental] break")


@pytest.mark.parametrize("body, field", [
    ({}, "caption"), ({"caption": "  "}, "caption"), ({"caption": 3}, "caption"),
    ({"caption": "x", "duration": 5}, "duration"), ({"caption": "x", "duration": 601}, "duration"),
    ({"caption": "x", "duration": "long"}, "duration"),
    ({"caption": "x", "bpm": 29}, "bpm"), ({"caption": "x", "bpm": 301}, "bpm"),
    ({"caption": "x", "bpm": 120.5}, "bpm"), ({"caption": "x", "bpm": True}, "bpm"),
    ({"caption": "x", "key": "H minor"}, "key"), ({"caption": "x", "key": "C"}, "key"),
    ({"caption": "x", "key": "E# major"}, "key"),
    ({"caption": "x", "time_signature": 5}, "time_signature"),
    ({"caption": "x", "batch": 0}, "batch"), ({"caption": "x", "batch": 5}, "batch"),
    ({"caption": "x", "seed": -2}, "seed"), ({"caption": "x", "format": "ogg"}, "format"),
    ({"caption": "x", "language": "klingon"}, "language"),
    ({"caption": "x", "lyrics": 7}, "lyrics"), ({"caption": "x", "colour": "red"}, "colour"),
])
def test_bad_fields_are_named(body, field):
    with pytest.raises(RequestError) as err:
        validate(body)
    assert err.value.field == field
    assert str(err.value).startswith(field)


def test_good_request_is_normalised():
    req = validate({"caption": " synthwave ", "lyrics": "[Verse]\nla la", "duration": "30",
                    "bpm": 128, "key": "f# MIN", "time_signature": "3/4", "seed": 42,
                    "batch": 2, "format": "flac", "language": "EN"})
    assert (req.caption, req.duration, req.bpm, req.key, req.time_signature, req.seed,
            req.batch, req.format, req.language) == (
        "synthwave", 30.0, 128, "F# minor", 3, 42, 2, "flac", "en")
    assert not req.instrumental
    auto = validate({"caption": "x", "duration": "auto", "bpm": "", "key": None})
    assert auto.duration is None and auto.bpm is None and auto.key is None and auto.seed == -1


def test_key_spellings():
    assert normalise_key("Bb major") == "Bb major"
    assert normalise_key("c♯ minor") == "C# minor"


@pytest.mark.parametrize("body, field", [
    ({"caption": "x", "bpm": float("-inf")}, "bpm"), ({"caption": "x", "seed": float("inf")}, "seed"),
    ({"caption": "x", "duration": float("nan")}, "duration"),
    ({"caption": "x", "format": False}, "format"), ({"caption": "x", "format": []}, "format"),
    ({"caption": "x", "format": 0}, "format"),
])
def test_non_finite_numbers_and_false_like_formats_are_refused(body, field):
    with pytest.raises(RequestError) as err:
        validate(body, default_format="wav24")
    assert err.value.field == field


def test_error_messages_quote_long_values_briefly():
    with pytest.raises(RequestError) as err:
        validate({"caption": "x", "key": "Q" * 100_000})
    assert len(str(err.value)) < 300

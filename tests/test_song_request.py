"""The song request's rules: each bad field is named; the sentinel in every spelling."""

import pytest

from cantor_desktop.song.request import RequestError, is_instrumental, normalise_key, validate


@pytest.mark.parametrize(
    "lyrics",
    [
        None,
        "",
        "   ",
        "[Instrumental]",
        "[instrumental]",
        "  [INSTRUMENTAL]\n",
        "\t[InStRuMeNtAl] ",
    ],
)
def test_every_spelling_of_the_sentinel_is_instrumental(lyrics):
    assert is_instrumental(lyrics)
    assert validate({"caption": "lofi", "lyrics": lyrics}).lyrics == "[Instrumental]"


def test_lyrics_are_not_instrumental():
    assert not is_instrumental("[Verse]\nhello")
    assert not is_instrumental("[Instrumental] break")


@pytest.mark.parametrize(
    "body, field",
    [
        ({}, "caption"),
        ({"caption": "  "}, "caption"),
        ({"caption": 3}, "caption"),
        ({"caption": "x", "duration": 5}, "duration"),
        ({"caption": "x", "duration": 601}, "duration"),
        ({"caption": "x", "duration": "long"}, "duration"),
        ({"caption": "x", "bpm": 29}, "bpm"),
        ({"caption": "x", "bpm": 301}, "bpm"),
        ({"caption": "x", "bpm": 120.5}, "bpm"),
        ({"caption": "x", "bpm": True}, "bpm"),
        ({"caption": "x", "key": "H minor"}, "key"),
        ({"caption": "x", "key": "C"}, "key"),
        ({"caption": "x", "key": "E## major"}, "key"),
        ({"caption": "x", "key": "Ebmx"}, "key"),
        ({"caption": "x", "time_signature": 5}, "time_signature"),
        ({"caption": "x", "batch": 0}, "batch"),
        ({"caption": "x", "batch": 5}, "batch"),
        ({"caption": "x", "seed": -2}, "seed"),
        ({"caption": "x", "format": "ogg"}, "format"),
        ({"caption": "x", "language": "klingon"}, "language"),
        ({"caption": "x", "lyrics": 7}, "lyrics"),
        ({"caption": "x", "colour": "red"}, "colour"),
    ],
)
def test_bad_fields_are_named(body, field):
    with pytest.raises(RequestError) as err:
        validate(body)
    assert err.value.field == field
    assert str(err.value).startswith(field)


def test_good_request_is_normalised():
    req = validate(
        {
            "caption": " synthwave ",
            "lyrics": "[Verse]\nla la",
            "duration": "30",
            "bpm": 128,
            "key": "f# MIN",
            "time_signature": "3/4",
            "seed": 42,
            "batch": 2,
            "format": "flac",
            "language": "EN",
        }
    )
    assert (
        req.caption,
        req.duration,
        req.bpm,
        req.key,
        req.time_signature,
        req.seed,
        req.batch,
        req.format,
        req.language,
    ) == ("synthwave", 30.0, 128, "F# minor", 3, 42, 2, "flac", "en")
    assert not req.instrumental
    auto = validate({"caption": "x", "duration": "auto", "bpm": "", "key": None})
    assert auto.duration is None and auto.bpm is None and auto.key is None and auto.seed == -1


def test_key_spellings():
    assert normalise_key("Bb major") == "Bb major"
    assert normalise_key("c♯ minor") == "C# minor"
    # any spelling is accepted and written the usual way (song/musical_keys.py)
    for typed in ("D# minor", "Eb minor", "E♭m", "ebm", "E flat minor", "d♯ min", "Ebmin"):
        assert normalise_key(typed) == "Eb minor", typed
    assert normalise_key("Gb major") == "F# major" and normalise_key("A# minor") == "Bb minor"
    assert normalise_key("E# major") == "F major"  # a theoretical spelling, still a key


@pytest.mark.parametrize(
    "body, field",
    [
        ({"caption": "x", "bpm": float("-inf")}, "bpm"),
        ({"caption": "x", "seed": float("inf")}, "seed"),
        ({"caption": "x", "duration": float("nan")}, "duration"),
        ({"caption": "x", "format": False}, "format"),
        ({"caption": "x", "format": []}, "format"),
        ({"caption": "x", "format": 0}, "format"),
    ],
)
def test_non_finite_numbers_and_false_like_formats_are_refused(body, field):
    with pytest.raises(RequestError) as err:
        validate(body, default_format="wav24")
    assert err.value.field == field


def test_error_messages_quote_long_values_briefly():
    with pytest.raises(RequestError) as err:
        validate({"caption": "x", "key": "Q" * 100_000})
    assert len(str(err.value)) < 300


SONG = "0123456789abcdef"


def test_editing_fields_in_shape_and_range_and_what_each_task_needs():
    from cantor_desktop.song.request import RequestError, validate

    ok = [
        {"task": "cover", "source": {"song": SONG, "take": 2}, "strength": 0.6, "noise": 0.2},
        {"task": "cover", "source": {"upload": "fedcba9876543210"}, "faithful": True},
        {"task": "repaint", "source": {"song": SONG}, "region": {"start": 20, "end": 30}},
        {"task": "extend", "source": {"song": SONG}, "extend": {"after": 30}},
        {"task": "extract", "source": {"song": SONG}, "track": "Drums"},
        {
            "task": "lego",
            "source": {"song": SONG},
            "track": "guitar",
            "region": {"start": 0, "end": 12.5},
        },
        {"task": "complete", "source": {"song": SONG}, "track": "vocals | bass"},
        {
            "reference": {"upload": "fedcba9876543210"},
            "adapter": "my-style",
            "adapter_scale": 0.8,
            "steps": 12,
            "guidance": 3.5,
            "shift": 2,
            "solver": "sde",
            "lm_temperature": 0.9,
            "lm_cfg": 2.5,
            "lm_top_p": 0.95,
            "lm_top_k": 40,
            "lm_negative_prompt": "muddy mix",
            "lock_caption": True,
            "codes_from": {"song": SONG, "take": 1},
        },
    ]
    for extra in ok:
        req = validate({"caption": "x", **extra})
        assert req.to_dict()["caption"] == "x"
    assert (
        validate(
            {"caption": "x", "task": "extract", "source": {"song": SONG}, "track": "Drums"}
        ).track
        == "drums"
    )
    plain = validate({"caption": "x"}).to_dict()
    assert "task" not in plain and "source" not in plain  # text to music reads as before
    bad = [
        ({"task": "remix"}, "task"),
        ({"task": "cover"}, "source"),
        ({"source": {"song": SONG}}, "source"),  # text2music: no source
        ({"task": "cover", "source": {"song": "../../etc"}}, "source"),
        ({"task": "cover", "source": {"upload": "x", "song": SONG}}, "source"),
        ({"task": "cover", "source": {"song": SONG, "take": 9}}, "source.take"),
        ({"task": "cover", "source": {"song": SONG}, "strength": 1.5}, "strength"),
        ({"task": "cover", "source": {"song": SONG}, "noise": -0.1}, "noise"),
        ({"task": "repaint", "source": {"song": SONG, "take": 1}}, "region"),
        (
            {"task": "repaint", "source": {"song": SONG}, "region": {"start": 20, "end": 20.5}},
            "region",
        ),
        ({"task": "repaint", "source": {"song": SONG}, "region": {"start": 20}}, "region"),
        ({"task": "extend", "source": {"song": SONG}}, "extend"),
        ({"task": "extend", "source": {"song": SONG}, "extend": {"after": 0.2}}, "extend"),
        ({"task": "extend", "source": {"song": SONG}, "extend": {"after": 700}}, "extend.after"),
        (
            {"task": "extend", "source": {"song": SONG}, "extend": {"before": 9, "lyrics": "la"}},
            "extend.lyrics",
        ),
        (
            {"task": "extend", "source": {"song": SONG}, "extend": {"after": 9, "lyrics": 5}},
            "extend.lyrics",
        ),
        (
            {"task": "extend", "source": {"song": SONG}, "extend": {"after": 9, "context": 9}},
            "extend.context",
        ),
        (
            {
                "task": "extend",
                "source": {"song": SONG},
                "extend": {"after": 9, "lyrics": "la", "context": 0},
            },
            "extend.context",
        ),
        ({"task": "extend", "source": {"song": SONG}, "extend": {"lyrics": "la"}}, "extend"),
        ({"strength": 0.5}, "strength"),
        ({"task": "extract", "source": {"song": SONG}}, "track"),
        ({"task": "extract", "source": {"song": SONG}, "track": "kazoo"}, "track"),
        ({"task": "lego", "source": {"song": SONG}, "track": "bass | drums"}, "track"),
        ({"track": "drums"}, "track"),
        ({"adapter_scale": 1.0}, "adapter_scale"),
        ({"adapter": "x", "adapter_scale": 3}, "adapter_scale"),
        ({"steps": 0}, "steps"),
        ({"steps": 2.5}, "steps"),
        ({"guidance": 99}, "guidance"),
        ({"solver": "rk4"}, "solver"),
        ({"lm_top_p": 1.2}, "lm_top_p"),
        ({"lm_top_k": -1}, "lm_top_k"),
        ({"lock_caption": "yes"}, "lock_caption"),
        ({"lm_negative_prompt": "x" * 3000}, "lm_negative_prompt"),
        ({"codes_from": {"upload": "fedcba9876543210"}}, "codes_from"),
    ]
    for extra, field in bad:
        try:
            validate({"caption": "x", **extra})
        except RequestError as exc:
            assert exc.field == field, (extra, exc.field, exc.message)
        else:
            raise AssertionError(f"accepted {extra}")


def test_an_extend_sings_new_lyrics_in_what_it_adds_after_the_song():
    req = validate(
        {
            "caption": "x",
            "task": "extend",
            "source": {"song": SONG},
            "extend": {"after": 20, "lyrics": "  [Verse 2]\nla la  ", "context": 15},
        }
    )
    assert req.extend == {
        "before": 0.0,
        "after": 20.0,
        "lyrics": "[Verse 2]\nla la",
        "context": 15.0,
    }
    # no words (or [Instrumental]) is the plain extend: the music goes on
    plain = validate(
        {
            "caption": "x",
            "task": "extend",
            "source": {"song": SONG},
            "extend": {"after": 20, "lyrics": "[Instrumental]"},
        }
    )
    assert plain.extend == {"before": 0.0, "after": 20.0}

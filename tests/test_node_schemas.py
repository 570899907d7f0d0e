"""The node's OpenAPI document promises what the song request's rules allow, and no more:
each limit of the song schema is song_request's own, and validate() takes a value at each
limit and refuses one just past it (the fuzz in tests/faults relies on these promises)."""

from __future__ import annotations

import pytest

from cantor_desktop.song import request as r
from cantor_desktop.node.schemas import AUTO_FIELDS, LM_SCHEMA, SONG_SCHEMA
from cantor_desktop.song.request import RequestError, validate

PROPS = SONG_SCHEMA["properties"]
SONG = "0123456789abcdef"
# what a field needs beside it to be allowed at all
NEEDS = {
    "adapter_scale": {"adapter": "my-style"},
    "strength": {"task": "cover", "source": {"song": SONG}},
    "noise": {"task": "cover", "source": {"song": SONG}},
}


def plain(name: str) -> dict:
    """A field's own schema, without the null / "auto" alternatives around it."""
    schema = PROPS[name]
    while "anyOf" in schema:
        schema = schema["anyOf"][0]
    return schema


def ok(name: str, value) -> bool:
    try:
        validate({"caption": "a song", **NEEDS.get(name, {}), name: value})
    except RequestError as exc:
        assert exc.field == name, exc
        return False
    return True


def test_the_song_schema_names_every_field_of_the_song_request_and_no_other():
    assert set(PROPS) == set(r.FIELDS)
    assert SONG_SCHEMA["additionalProperties"] is False
    assert SONG_SCHEMA["required"] == ["caption"]


@pytest.mark.parametrize(
    "name, limits",
    [
        ("duration", r.DURATION_RANGE),
        ("bpm", r.BPM_RANGE),
        ("batch", r.BATCH_RANGE),
        ("seed", (-1, r.SEED_MAX)),
        ("steps", r.STEPS_RANGE),
        ("guidance", r.GUIDANCE_RANGE),
        ("shift", r.SHIFT_RANGE),
        ("adapter_scale", r.ADAPTER_SCALE_RANGE),
        ("lm_temperature", r.LM_TEMPERATURE_RANGE),
        ("lm_cfg", r.LM_CFG_RANGE),
        ("lm_top_k", r.LM_TOP_K_RANGE),
    ],
)
def test_each_numeric_limit_is_the_song_request_s_constant(name, limits):
    schema = plain(name)
    assert (schema["minimum"], schema["maximum"]) == tuple(limits)


def test_the_shared_lists_and_lengths_are_the_song_request_s():
    assert plain("time_signature")["enum"] == list(r.TIME_SIGNATURES)
    assert plain("language")["enum"] == list(r.LANGUAGES)
    assert plain("format")["enum"] == list(r.SONG_FORMATS)
    assert plain("task")["enum"] == list(r.TASKS)
    assert plain("solver")["enum"] == list(r.SOLVERS)
    assert PROPS["caption"]["maxLength"] == r.CAPTION_MAX
    assert plain("lyrics")["maxLength"] == r.LYRICS_MAX
    assert plain("lm_negative_prompt")["maxLength"] == r.NEGATIVE_MAX
    assert LM_SCHEMA["properties"]["caption"]["maxLength"] == r.CAPTION_MAX
    assert LM_SCHEMA["properties"]["lyrics"]["maxLength"] == r.LYRICS_MAX
    longest = r.DURATION_RANGE[1]
    for name, parts in (("region", ("start", "end")), ("extend", ("before", "after"))):
        for part in parts:
            assert plain(name)["properties"][part]["maximum"] == longest
    assert plain("source")["properties"]["take"]["maximum"] == r.BATCH_RANGE[1]


NUMERIC = sorted(n for n in PROPS if "maximum" in plain(n))


@pytest.mark.parametrize("name", NUMERIC)
def test_validate_takes_each_numeric_limit_and_refuses_a_step_past_it(name):
    schema = plain(name)
    lo, hi = schema["minimum"], schema["maximum"]
    step = 1 if schema["type"] == "integer" else 0.001
    assert ok(name, lo) and ok(name, hi)
    assert not ok(name, hi + step)
    assert not ok(name, lo - step)


@pytest.mark.parametrize(
    "name", sorted(n for n in PROPS if "enum" in plain(n) and n != "task")
)  # a task needs its own fields
def test_validate_takes_each_listed_value_and_refuses_another(name):
    schema = plain(name)
    assert all(ok(name, value) for value in schema["enum"])
    assert not ok(name, 5 if schema["type"] == "integer" else "zz-not-listed")


@pytest.mark.parametrize("name", sorted(n for n in PROPS if "maxLength" in plain(n)))
def test_validate_takes_the_longest_text_and_refuses_one_more_character(name):
    longest = plain(name)["maxLength"]
    assert ok(name, "x" * longest)
    assert not ok(name, "x" * (longest + 1))


@pytest.mark.parametrize("name", sorted(set(NUMERIC) | {"key", "language", "time_signature"}))
def test_auto_is_documented_exactly_for_the_fields_the_node_may_choose(name):
    documented = any(
        alt.get("pattern", "").startswith("^\\s*([Aa][Uu][Tt][Oo])")
        for alt in PROPS[name].get("anyOf", ())
    )
    assert documented == (name in AUTO_FIELDS)
    assert ok(name, "auto") == (name in AUTO_FIELDS)


@pytest.mark.parametrize("beats", r.TIME_SIGNATURES)
def test_a_time_signature_written_as_a_fraction_is_documented_and_taken(beats):
    import re

    pattern = PROPS["time_signature"]["anyOf"][0]["anyOf"][1]["pattern"]
    assert re.search(pattern, f"{beats}/4") and ok("time_signature", f"{beats}/4")
    assert not re.search(pattern, "5/4") and not ok("time_signature", "5/4")

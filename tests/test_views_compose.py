"""Compose's view-model, without Qt: what blocks Generate and how it is named, the adapter
and the pool's member the node would refuse, the Model and Node lists, what the language
model's answer and a dropped file change, the queue's buttons, the format and the draft."""

from __future__ import annotations

import pytest

import subprocess
import sys

from cantor_desktop.client.pool_view import PoolView
from cantor_desktop.models.catalogue import SKETCH_DISPLAY
from cantor_desktop.song.record import Song, SongState
from cantor_desktop.views.compose import (
    ANY_NODE,
    ComposeViewModel,
    NodeChoice,
    strength_words,
)
from cantor_desktop.views.compose_form import ADVANCED_FIELDS, ComposeForm


def pool(*members, state="connected") -> PoolView:
    view = PoolView.from_json(
        {
            "state": state,
            "url": "redis://studio:6379/0",
            "node": {"id": "a", "name": "alpha"},
            "members": [
                {"id": n[0], "name": n, "alive": True, "models": list(models)}
                for n, models in members
            ],
        }
    )
    assert view is not None
    return view


def test_the_view_models_load_without_qt():
    code = (
        "import sys, pkgutil, importlib, cantor_desktop.views as v\n"
        "for m in pkgutil.iter_modules(v.__path__):\n"
        "    importlib.import_module('cantor_desktop.views.' + m.name)\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('PySide6', 'shiboken6', 'qasync')]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_every_problem_is_named_by_its_label_and_outlined_when_it_holds_something():
    vm = ComposeViewModel()
    verdict = vm.check(ComposeForm(bpm="400"), None)
    assert not verdict.ok and verdict.fields == {"caption", "bpm"}
    caption, bpm = verdict.text.splitlines()
    assert caption.startswith("Caption is required") and bpm.startswith("BPM must be from 30")
    assert vm.outlined(verdict, "bpm", holds_input=True)
    assert not vm.outlined(verdict, "caption", holds_input=False)  # named, not red yet
    vm.tried = True  # Generate asked for: the empty required field is outlined too
    assert vm.outlined(verdict, "caption", holds_input=False)
    assert vm.check(ComposeForm(caption="boom bap", bpm="92"), None).ok
    assert vm.check(ComposeForm(caption="x"), None).text == ""


def test_the_adapter_is_checked_once_the_nodes_list_is_known():
    vm = ComposeViewModel()
    form = ComposeForm(caption="x", adapter="tape", model="acestep-v15-turbo-Q8_0")
    assert vm.check(form, None).ok  # the node's list is not known yet: nothing said
    vm.adapters_known = True
    assert "tape is not installed on the node" in vm.check(form, None).text
    vm.adapters = [{"name": "tape", "dit": "XL"}]
    assert vm.check(form, None).text == "Adapter tape was made for the XL DiT; choose an XL model"
    form.model = "acestep-v15-xl-turbo-Q8_0"
    assert vm.check(form, None).ok
    vm.adapters = [{"name": "tape", "problem": "an image model's LoRA"}]
    assert vm.check(form, None).text == "Adapter tape cannot be used: an image model's LoRA"


def test_the_model_list_has_the_sketch_the_ready_models_and_the_pools_own():
    vm = ComposeViewModel()
    vm.models = [
        {"name": "acestep-v15-turbo-Q8_0", "state": "ready", "title": "Turbo"},
        {"name": "acestep-v15-sft-Q8_0", "state": "not downloaded"},
    ]
    assert vm.model_choices() == [(SKETCH_DISPLAY, "sketch"), ("Turbo", "acestep-v15-turbo-Q8_0")]
    assert vm.set_pool(pool(("alpha", ["sketch"]), ("bravo", ["acestep-v15-xl-turbo-Q8_0"])))
    assert vm.model_choices()[-1] == (
        "acestep-v15-xl-turbo-Q8_0 (on bravo)",
        "acestep-v15-xl-turbo-Q8_0",
    )
    assert not vm.set_pool(pool(("alpha", ["sketch"]), ("bravo", ["acestep-v15-xl-turbo-Q8_0"])))


def test_the_node_choice_names_a_member_that_left_or_lacks_the_model():
    vm = ComposeViewModel()
    assert vm.node_choices("sketch", "") == [NodeChoice(ANY_NODE, "")]
    assert vm.chosen_node("bravo") is None  # no pool: any member
    vm.set_pool(pool(("alpha", ["sketch"]), ("bravo", ["sketch"])))
    names = [c.name for c in vm.node_choices("sketch", "") or []]
    assert names == ["", "alpha", "bravo"] and vm.chosen_node("bravo") == "bravo"
    vm.set_pool(pool(("alpha", ["sketch"])))  # bravo left: still chosen, marked
    assert (vm.node_choices("sketch", "bravo") or [])[-1] == NodeChoice(
        "bravo — not in the pool now", "bravo", False
    )
    verdict = vm.check(ComposeForm(caption="x"), "bravo")
    assert verdict.text == "Node bravo is not in the pool now; choose Any node or another member"
    assert (
        "alpha does not have acestep-v15-turbo-Q8_0"
        in vm.check(ComposeForm(caption="x", model="acestep-v15-turbo-Q8_0"), "alpha").text
    )
    vm.set_pool(pool(("alpha", ["sketch"]), state="unreachable"))
    assert vm.node_choices("sketch", "bravo") is None  # who is there is not known now
    assert vm.check(ComposeForm(caption="x"), "bravo").ok  # the node says so when asked


def test_the_language_models_answer_fills_only_what_is_left_to_the_model():
    vm = ComposeViewModel()
    assert vm.lm_problem("inspire", ComposeForm()) == (
        "Inspire me: write a short idea in Caption first"
    )
    assert vm.lm_problem("format", ComposeForm()) is None
    form = ComposeForm(caption="rain", lyrics="old words", instrumental=True, bpm="90")
    assert vm.lm_request(form) == {"caption": "rain", "lyrics": "", "model": "sketch"}
    answer = {"caption": "rain, piano", "lyrics": "[Verse]\nnew", "bpm": 120.0, "duration": 95.0}
    filled = vm.with_lm_answer(form, {**answer, "key": "F# minor"})
    assert (filled.caption, filled.lyrics, filled.instrumental) == (
        "rain, piano",
        "[Verse]\nnew",
        False,
    )
    assert (filled.bpm, filled.duration, filled.key) == ("90", "95", "F♯ minor")  # bpm was set
    kept = vm.with_lm_answer(form, {"lyrics": "[Instrumental]"})
    assert kept.instrumental and kept.lyrics == "old words"


def test_a_dropped_file_fills_the_form_and_can_be_covered_instead():
    vm = ComposeViewModel()
    assert vm.dropped_audio(["/x/notes.txt", "/x/Take.WAV", "/x/b.flac"]) == "/x/Take.WAV"
    assert vm.dropped_audio(["/x/notes.txt"]) is None
    vm.reference = ({"upload": "r"}, "old.wav")
    form = ComposeForm(reference={"upload": "r"}, reference_name="old.wav", lyrics="mine")
    heard = {"caption": "guitar", "lyrics": "", "bpm": 100.0, "time_signature": 3, "language": "en"}
    filled = vm.with_file_heard(form, {"id": "u1"}, heard, "song.wav")
    assert filled.reference is None and vm.reference is None
    assert (filled.caption, filled.instrumental, filled.bpm) == ("guitar", True, "100")
    assert (filled.time_signature, filled.language, filled.lyrics) == ("3", "en", "mine")
    assert vm.dropped == ({"upload": "u1"}, "song.wav")
    assert "Cover this file" in vm.heard_words("song.wav")


def test_a_queue_rows_button_plays_retries_or_cancels():
    def song(state):
        return Song(id="s", request={"caption": "x"}, state=state)

    vm = ComposeViewModel()
    assert vm.row_action(song(SongState.DONE)) == "play"
    assert vm.row_action(song(SongState.FAILED)) == "retry"
    assert vm.row_action(song(SongState.CANCELLED)) == "retry"
    assert vm.row_action(song(SongState.RUNNING)) == "cancel"


def test_the_format_follows_the_node_until_one_is_chosen_and_the_draft_keeps_the_form(tmp_path):
    vm = ComposeViewModel()
    assert vm.default_format({"songs.format": "flac"}, "wav24") == "flac"
    assert vm.default_format({"songs.format": "nonsense"}, "wav24") == "wav24"
    assert vm.format_from_node({"songs.format": "mp3"}) == "mp3"
    draft = tmp_path / "draft.json"
    assert vm.read_draft(draft, "wav24") is None
    draft.write_bytes(vm.draft_bytes(ComposeForm(caption="kept", format="flac", steps="12")))
    form = vm.read_draft(draft, "wav24")
    assert form is not None and (form.caption, form.steps) == ("kept", "12")
    assert vm.format_chosen and vm.format_from_node({"songs.format": "mp3"}) is None
    draft.write_text("[1, 2]")
    assert vm.read_draft(draft, "wav24") is None


def test_the_advanced_section_says_how_many_are_set_and_its_fields_are_the_requests():
    assert ComposeViewModel.advanced_title(ComposeForm(), False) == "Advanced ▸"
    form = ComposeForm(steps="12", lm_negative_prompt="no drums", lock_caption=True)
    assert ComposeViewModel.advanced_title(form, True) == "Advanced ▾  (3 set)"
    assert all(hasattr(ComposeForm(), name) for name in ADVANCED_FIELDS)
    assert "codes_from" not in ADVANCED_FIELDS
    body = ComposeForm(caption="x", steps="auto", guidance="3", lm_negative_prompt=" y ").request()
    assert "steps" not in body and body["guidance"] == "3" and body["lm_negative_prompt"] == "y"


def test_a_covers_strength_is_said_in_words():
    assert strength_words(1.0).startswith("100 % of the steps hear the source: it keeps")
    assert "broad shape" in strength_words(0.3) and "close to a new song" in strength_words(0.1)
    vm = ComposeViewModel()
    assert vm.cover_text() == "" and vm.reference_text() == ""
    vm.cover, vm.reference = ({"song": "s", "take": 1}, "boom bap"), ({"upload": "u"}, "g.wav")
    assert vm.cover_text() == "Cover of “boom bap” — strength"
    assert vm.reference_text().startswith("Reference sound: “g.wav”")


def test_a_style_fills_the_recipe_and_leaves_the_songs_own_words():
    from cantor_desktop.views.compose_form import ComposeForm

    form = ComposeForm(caption="old", lyrics="[Verse]\nmine", duration="60", takes=2, bpm="80")
    style = {
        "name": "Night drive",
        "fields": {"caption": "dreamy synthwave", "bpm": 96, "key": "A minor", "guidance": 7.5},
        "seed": 42,
        "reference": {"upload": "ab" * 8},
        "reference_name": "voice.wav",
    }
    filled = form.with_style(style)
    assert (filled.caption, filled.bpm, filled.key, filled.guidance) == (
        "dreamy synthwave",
        "96",
        "A minor",
        "7.5",
    )
    assert (filled.lyrics, filled.duration, filled.takes) == ("[Verse]\nmine", "60", 2)
    assert filled.reference == {"upload": "ab" * 8} and filled.reference_name == "voice.wav"
    assert (filled.seed, filled.seed_locked) == ("42", True)
    assert form.caption == "old"  # a copy: the form itself unchanged until the page sets it
    random_seed = form.with_style({**style, "seed": "random"})
    assert not random_seed.seed_locked
    recipe = filled.recipe()
    assert recipe["fields"]["bpm"] == 96 and recipe["fields"]["caption"] == "dreamy synthwave"
    assert "lyrics" not in recipe["fields"] and "duration" not in recipe["fields"]
    assert recipe["seed"] == 42 and recipe["reference"] == {"upload": "ab" * 8}


def test_control_characters_never_reach_a_caption():
    from cantor_desktop.song.request import RequestError, validate
    from cantor_desktop.views.compose_form import ComposeForm

    pasted = "\x1b[31mred\x1b[0m synthwave\tnight\x00"
    assert ComposeForm(caption=pasted).request()["caption"] == "[31mred[0m synthwave\tnight"
    with pytest.raises(RequestError, match=r"caption: has a control character \(U\+001B\)"):
        validate({"caption": "\x1b[31mred", "model": "sketch"})
    assert validate({"caption": "two\nlines\tand a tab", "model": "sketch"}).caption

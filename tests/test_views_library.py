"""The Library's view-model, without Qt: each row's words and buttons, which rows are
drawn again, the recommendation, a pull's typed events folded into the page's state, and the
sentence for every outcome."""

from __future__ import annotations

from cantor_desktop.models.events import PullEvent
from cantor_desktop.views.library import (
    WAITING,
    LibraryViewModel,
    done_message,
    failed_message,
    row_actions,
)
from cantor_desktop.views.messages import DANGER, WARNING

TURBO = "acestep-v15-turbo-Q8_0"
GIB = 1024**3
SYSTEM = {"hardware": {"ram_bytes": 24 * GIB, "gpus": []}, "families": {}}


def model(name: str, state: str = "not downloaded", **more) -> dict:
    quant = name.rsplit("-", 1)[-1]
    return {"name": name, "state": state, "variant": "turbo", "quant": quant, **more}


def library(*models: dict) -> LibraryViewModel:
    vm = LibraryViewModel()
    vm.take_models([{"name": "sketch", "state": "ready", "builtin": True}, *models], SYSTEM)
    return vm


def test_rows_are_drawn_again_only_when_their_model_changed():
    vm = LibraryViewModel()
    new_rows, redraw = vm.take_models([model(TURBO), model(TURBO)], SYSTEM)  # one row each
    assert new_rows and redraw == [TURBO] and vm.rows == {TURBO: 0}
    assert vm.take_models([model(TURBO)], SYSTEM) == (False, [])
    assert vm.take_models([model(TURBO, "partial", size_bytes=5)], SYSTEM) == (False, [TURBO])
    new_rows, redraw = vm.take_models([model(TURBO), model("acestep-v15-sft-Q8_0")], SYSTEM)
    assert new_rows and vm.rows == {TURBO: 0, "acestep-v15-sft-Q8_0": 1}


def test_a_row_says_what_the_model_is_for_its_size_and_how_much_is_there():
    vm = library(model(TURBO, "partial", size_bytes=GIB, download_bytes=GIB, display_name="Turbo"))
    row = vm.row(TURBO)
    assert row.text.startswith("★ Turbo\n")  # the one recommended for 24 GiB without a GPU
    assert row.bold and "Recommended for this machine." in row.tooltip
    assert row.size == "1.0 GiB to get" and row.bar == (500, "1.0 GiB of 2.0 GiB")
    sketch = vm.row("sketch")
    assert sketch.size == "built in" and sketch.bar is None
    assert sketch.text.endswith("for trying things out: no download")
    assert vm.state("sketch").always_ready and vm.state("sketch").actions == ()


def test_each_state_offers_its_buttons():
    assert row_actions("ready", builtin=False, pulling=False, failed=False, partial=True) == [
        "Remove"
    ]
    assert row_actions("x", builtin=False, pulling=True, failed=False, partial=True) == [
        "Pause",
        "Cancel",
    ]
    assert row_actions("x", builtin=False, pulling=False, failed=True, partial=False) == ["Retry"]
    assert row_actions("partial", builtin=False, pulling=False, failed=False, partial=True) == [
        "Resume",
        "Discard",
    ]
    assert row_actions("corrupt", builtin=False, pulling=False, failed=False, partial=True) == [
        "Repair"
    ]
    assert row_actions("ready", builtin=True, pulling=False, failed=False, partial=True) == []


def test_a_pull_is_followed_from_its_plan_to_its_end():
    vm = library(model(TURBO, download_bytes=8 * 2**20))
    vm.start_pull(TURBO)
    assert vm.state(TURBO).actions == ("Pause", "Cancel") and vm.state(TURBO).text == "downloading"
    assert vm.pull_event(TURBO, PullEvent("catalogue", TURBO)).state == "asking the hub…"
    plan = PullEvent("plan", TURBO, total=8 * 2**20, files=[{"name": "d.gguf", "kind": "dit"}])
    assert vm.pull_event(TURBO, plan).bar_text == "0 / 8.0 MiB"
    step = PullEvent(
        "progress",
        TURBO,
        file="d.gguf",
        file_received=2**20,
        file_total=4 * 2**20,
        received=2**20,
        total=8 * 2**20,
        speed=2**20,
        eta=7.0,
    )
    shown = vm.pull_event(TURBO, step)
    assert (shown.state, shown.bar_value, shown.bar_text) == ("DiT 25%", 125, "1.0 MiB / 8.0 MiB")
    assert (shown.speed, shown.time_left) == ("1.0 MiB/s", "7 s")
    assert shown.bar_tip == "d.gguf: 1.0 MiB / 4.0 MiB — 1.0 MiB/s, 7 s left"
    ended = vm.pull_event(TURBO, PullEvent("done", TURBO, engine_ready=False, engine_error="x."))
    assert ended.ended and ended.message is not None and ended.message.tone == WARNING
    assert vm.models[TURBO]["state"] == "ready" and vm.state(TURBO).actions == ("Remove",)


def test_a_pull_that_failed_or_paused_says_so_and_offers_what_is_next():
    vm = library(model(TURBO))
    vm.start_pull(TURBO)
    failed = PullEvent.failed(TURBO, "https://cdn.example/a/b/d.gguf: HTTP 404.", "NeedsToken")
    shown = vm.pull_event(TURBO, failed)
    assert shown.drop_bar  # nothing arrived: no bar
    assert shown.message is not None and shown.message.tone == DANGER
    assert shown.message.text.startswith(f"Could not download {TURBO}: d.gguf: HTTP 404.")
    assert "Save a Hugging Face token below" in shown.message.text
    cell = vm.state(TURBO)
    assert (cell.text, cell.tone, cell.actions) == ("failed", DANGER, ("Retry",))
    assert "HTTP 404" in cell.tooltip and not vm.hidden(TURBO, every_quant=False)
    vm.start_pull(TURBO)
    paused = vm.pull_event(TURBO, PullEvent.paused(TURBO))
    assert paused.message is not None and "paused" in paused.message.text
    vm.models[TURBO]["state"] = "partial"
    assert vm.state(TURBO).text == "paused"
    assert vm.state(TURBO).actions == ("Resume", "Discard")
    said = vm.discarded(TURBO, {"deleted": ["d.gguf.part"], "freed_bytes": 2**20})
    assert said.text == f"{TURBO}: deleted 1 partly downloaded file(s), 1.0 MiB."
    assert "nothing partly downloaded" in vm.discarded(TURBO, {}).text


def test_a_pull_started_elsewhere_changes_the_rows_buttons():
    vm = library(model(TURBO))
    assert vm.pull_event(TURBO, PullEvent("catalogue", TURBO)).actions
    assert vm.state(TURBO).actions == ("Pause", "Cancel")


def test_other_quantisations_are_folded_away_unless_asked_for_or_on_the_node():
    q4 = "acestep-v15-turbo-Q4_K_M"
    vm = library(model(TURBO), model(q4), model("acestep-v15-sft-Q4_K_M", "ready"))
    assert vm.hidden(q4, every_quant=False) and not vm.hidden(q4, every_quant=True)
    assert not vm.hidden("acestep-v15-sft-Q4_K_M", every_quant=False)  # on the node
    assert not vm.hidden(TURBO, every_quant=False) and not vm.hidden("sketch", False)


def test_the_recommendation_and_its_download_button():
    vm = library(model(TURBO, download_bytes=GIB, display_name="Turbo"))
    advice = vm.advice()
    assert advice is not None and advice.button == "Download (1.0 GiB)"
    assert "Recommended for this machine: Turbo" in advice.text
    vm.start_pull(TURBO)
    assert (vm.advice() or advice).button is None  # pulling: no second Download
    big = {
        "hardware": {"ram_bytes": 64 * GIB, "gpus": [{"vram_mib": 24576}]},
        "families": {"acestep": {"pinned": "cuda12", "default": "cuda12"}},
    }
    vm.take_models([model(TURBO), model("acestep-v15-xl-turbo-Q8_0")], SYSTEM)
    assert vm.update_advice(big) and vm.recommended is not None
    assert vm.recommended.name == "acestep-v15-xl-turbo-Q8_0"
    assert not vm.update_advice(big)


def test_the_disk_line_the_waiting_line_and_the_details():
    vm = LibraryViewModel()
    assert vm.waiting("") == WAITING
    vm = library(model(TURBO, "ready", size_bytes=GIB, folder="/m/acestep"))
    assert vm.disk_line(remote=False) == "Models use 1.0 GiB · /m/acestep"
    assert vm.disk_line(remote=True).startswith("Models use 1.0 GiB on the node's machine")
    assert vm.waiting(WAITING) == "" and vm.waiting("Imported 1 of 1 file(s).") is None
    assert vm.details(TURBO).startswith(f"<b>{TURBO}</b> ({TURBO}) — ")
    assert vm.details(None) == ""


def test_every_outcome_has_its_sentence():
    vm = LibraryViewModel()
    outcomes = [("/a/my-dit.gguf", {"name": "my-dit"}, ""), ("C:\\b\\x.gguf", None, "not GGUF")]
    said = vm.imported(outcomes, remote=True)
    assert said.tone == DANGER and said.text == (
        "Imported 1 of 2 file(s) into the node's models folder. Not imported: x.gguf: not GGUF."
    )
    assert vm.importing(2, remote=False) == "Importing 2 file(s)…"
    assert vm.sending("C:\\m\\d.gguf", 2**20, 2 * 2**20) == (
        "Sending d.gguf to the node: 1.0 MiB of 2.0 MiB"
    )
    assert vm.token_state({"set": True, "source": "environment"})[:3] == (
        "✓ set (HF_TOKEN)",
        "",
        False,
    )
    assert vm.token_state({"set": False})[3] == "for gated models only"
    assert done_message(TURBO, PullEvent("done", TURBO)).endswith("is downloaded and ready.")
    assert failed_message(TURBO, PullEvent.failed(TURBO, "no space")).endswith(": no space.")


def test_adapter_rows_and_their_sentences():
    vm = LibraryViewModel()
    row = vm.adapter_row(
        {
            "name": "tape",
            "format": "peft",
            "path": "/a/tape",
            "size": 2**20,
            "rank": 16,
            "alpha": 32.0,
            "made_for": "ACE-Step 1.5 (2B DiT)",
        }
    )
    assert (row.size, row.made_for, row.problem) == ("1.0 MiB", "ACE-Step 1.5 (2B DiT)", False)
    assert row.tooltip.splitlines() == ["tape (PEFT)", "/a/tape", "rank 16, alpha 32"]
    refused = vm.adapter_row({"name": "img", "problem": "an image model's LoRA"})
    assert refused.problem and refused.made_for == "cannot be used: an image model's LoRA"
    assert vm.adapters_note([], loaded=False, remote=False) == ""
    assert vm.adapters_note([], loaded=True, remote=True).startswith(
        "none yet on the node's machine"
    )
    added = vm.adapters_added(
        [("/a/tape", {"name": "tape", "made_for": "2B"}, ""), ("/a/img/", None, "no")]
    )
    assert added.text == "Added tape (made for 2B); Not added: img: no." and added.tone == DANGER
    assert vm.adapter_removed("tape", {"freed_bytes": 2**20}).text == "tape removed, 1.0 MiB freed."
